"""The chats' conversations: one agent session per ``(platform, chat)``, continued from the session
store, answering one message at a time (a turn, a slash command, ``/new``)."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import TYPE_CHECKING

from ..base.config import section
from ..core.hooks import describe
from .broker import FAILED_REPLY, BrokerError, chat_key
from .sessions import NOT_READ, SessionState, SessionStore, SessionStoreError

if TYPE_CHECKING:
    from ..agent import AgentSession
    from ..core.kernel import Kernel

#: Sessions a worker keeps in memory between its chats' turns (their state is in the store).
WORKER_SESSION_CACHE = 1024


class Conversations:
    """The agent sessions of the chats a gateway answers, and the store their states are kept in."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.sessions: dict[tuple[str, str], AgentSession] = {}
        #: Where the chats' conversations are kept while the gateway serves.
        self.store: SessionStore | None = None
        #: Whether at most :data:`WORKER_SESSION_CACHE` sessions stay in memory (with a broker: the
        #: conversations go on in the store, on whichever worker takes the chat next).
        self.bounded = False
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def begin(self, store: SessionStore, *, bounded: bool) -> None:
        """Serve with ``store``; locks belong to the loop they were first used on, so a run gets new ones."""
        self.store, self.bounded = store, bounded
        self._locks.clear()

    def chat_lock(self, platform: str, chat: str) -> asyncio.Lock:
        """The lock of the chat's session in this process: whoever runs a turn in it or lets it go holds
        it (two leases of one chat can meet in one worker: its own, silent past ``claim_after``, and the
        one that took the chat over).  A session is never let go, or reread, in the middle of a turn."""
        return self._locks.setdefault((platform, chat), asyncio.Lock())

    async def turn(self, platform: str, chat: str, user: str | None, text: str) -> str | None:
        """Answer ``text`` in the chat's session, one message at a time per chat, and save its state."""
        key = (platform, chat)
        async with self.chat_lock(platform, chat):
            session = await self.session_for(platform, chat, user)
            reply = await self.respond(platform, session, text, user)
            await self.persist(key, session)
        return reply

    async def respond(self, platform: str, session: AgentSession, text: str, user: str | None) -> str | None:
        """The reply to ``text`` in ``session``: ``/new`` and ``/reset`` start over, another slash
        command runs as a command, anything else is a turn.  A failed turn's reply says only that it
        failed: a chat (maybe a public channel) never sees an error's text, which can carry
        configuration values (a URL with its key); the log has it, masked."""
        kernel = self.kernel
        command = text.strip().split(maxsplit=1)[0].lower() if text.lstrip().startswith("/") else ""
        if command in ("/new", "/reset"):
            await asyncio.to_thread(session.reset, command.lstrip("/"))
            return "Started a new conversation."
        if command:
            return await kernel.commands.arun(
                text.strip(), session_id=session.session_id, platform=platform, user_id=user
            )
        try:
            result = await session.arun(text)
        except Exception as exc:
            kernel.log.warning("gateway_turn_failed", platform=platform, error=describe(exc))
            return FAILED_REPLY.format(error=type(exc).__name__)
        return result.reply

    async def session_for(
        self,
        platform: str,
        chat: str,
        user: str | None,
        *,
        refresh: bool = False,
        state: SessionState | object | None = NOT_READ,
    ) -> AgentSession:
        """The session of ``(platform, chat)``: the one in memory, else one continuing the store's state.

        ``refresh`` reads the store even when one is in memory (a worker taking a chat: another may have
        answered it since); ``state`` is the store's record when the caller read it already.  A state
        finalized at a stop goes on under a new session id, with its history.
        """
        from ..agent import DEFAULT_SYSTEM_PROMPT, AgentSession

        key = (platform, chat)
        session = self.sessions.get(key)
        if session is not None and not session.closed and not refresh:
            return session
        if state is NOT_READ:
            state = await self.store.load(chat_key(platform, chat)) if self.store is not None else None
        if state is not None and not isinstance(state, SessionState):
            raise TypeError(f"session_for: state must be a SessionState or None, not {type(state).__name__}")
        if state is not None and state.finalized:
            state = SessionState(session_id="", messages=state.messages, turns=0)
        wanted = state.session_id if state is not None else None
        if session is None or session.closed or (wanted and session.session_id != wanted):
            if session is not None:
                session.release()
            kernel = self.kernel
            spec = next((s for s in kernel.platforms.all() if s.name == platform), None)
            hint = spec.platform_hint if spec is not None else ""
            base = str(section(kernel.config, "agent", "system_prompt") or DEFAULT_SYSTEM_PROMPT)
            prompt = f"{base}\n\n{hint}" if hint else base
            session = AgentSession(
                kernel, session_id=wanted or None, platform=platform, system_prompt=prompt, sender_id=user
            )
        elif state is None:
            # The store forgot the chat (a new store, or an unreadable record): start over here too.
            session.messages, session.turns = [], 0
        if state is not None:
            session.messages, session.turns = state.messages, state.turns
        self.sessions.pop(key, None)
        self.sessions[key] = session  # the most recent last
        if self.bounded and len(self.sessions) > WORKER_SESSION_CACHE:
            oldest = next(iter(self.sessions))
            self.sessions.pop(oldest).release()
        return session

    def session_state(self, session: AgentSession, *, finalized: bool = False) -> SessionState:
        return SessionState(session.session_id, session.messages, session.turns, finalized)

    def drop(self, platform: str, chat: str) -> None:
        """Forget the chat's session here (another worker took the chat over)."""
        session = self.sessions.pop((platform, chat), None)
        if session is not None:
            session.release()

    async def persist(self, key: tuple[str, str], session: AgentSession, *, finalized: bool = False) -> None:
        """Save the chat's state in the store; a state that cannot be saved is logged, the chat goes on."""
        if self.store is None:
            return
        try:
            await self.store.save(chat_key(*key), self.session_state(session, finalized=finalized))
        except (SessionStoreError, BrokerError, OSError, sqlite3.Error) as exc:
            self.kernel.log.warning(
                "gateway_session_not_saved",
                platform=key[0],
                chat=key[1],
                store=self.store.kind,
                error=describe(exc),
            )

    async def close_all(self) -> None:
        """At a stop: without a broker each session closes (``on_session_finalize``) and its final
        state is saved; with one, it is only let go (the conversation goes on in the store)."""
        for key, session in list(self.sessions.items()):
            if self.bounded:
                session.release()
            else:
                await asyncio.to_thread(session.close, "gateway_shutdown")
                await self.persist(key, session, finalized=True)
            del self.sessions[key]
