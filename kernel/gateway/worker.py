"""The worker of a scaled-out gateway (``gateway run --role worker``, or ``all``): it takes chats from
the broker, answers their messages one at a time with the kernel's agent loop and its plugins,
continuing each conversation from the session store, and hands the replies back.

See :mod:`kernel.gateway.broker` for what is guaranteed, and docs/scale-out.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.hooks import describe
from .broker import (
    FAILED_REPLY,
    GAVE_UP_REPLY,
    MAX_ATTEMPTS,
    STALE,
    Broker,
    BrokerUnavailable,
    Inbound,
    Lease,
    Member,
    Outbound,
    fit_reply,
    member_id,
)
from .ingress import Ingress, spool_lines  # they lived here: importable as before
from .membership import beat, leave
from .sessions import NOT_READ, SessionState, SessionStore, SessionStoreError

if TYPE_CHECKING:
    from ..core.kernel import Kernel
    from .conversations import Conversations

#: The longest a worker waits before it tries to take chats again after a failure (not "unreachable").
LOOP_BACKOFF_MAX = 5.0

__all__ = ["Ingress", "Worker", "spool_lines"]


class Worker:
    """Answers the broker's chats, ``concurrency`` at a time, each one message at a time."""

    def __init__(
        self,
        kernel: Kernel,
        conversations: Conversations,
        broker: Broker,
        store: SessionStore,
        concurrency: int,
        *,
        role: str = "worker",
    ) -> None:
        self.kernel = kernel
        self.conversations = conversations
        self.broker = broker
        self.store = store
        self.concurrency = concurrency
        self.member = Member(id=member_id("worker"), role=role, concurrency=concurrency)
        self.serving: dict[str, tuple[Lease, asyncio.Task[None]]] = {}
        self.stopping = False
        self.answered = 0
        self.stopped = asyncio.Event()  # set with stopping: wakes the heartbeat
        self._freed = asyncio.Event()
        self._failures = 0

    async def run(self) -> None:
        beats = asyncio.create_task(beat(self, self._leases), name="gateway-worker-heartbeat")
        try:
            # The model's client (its imports, a scripted model's file) is built now, not in a turn.
            await asyncio.to_thread(self._prepare_model)
            while not self.stopping:
                free = self.concurrency - len(self.serving)
                if free <= 0:
                    self._freed.clear()
                    await self._freed.wait()
                    continue
                try:
                    leases = await self.broker.take(self.member.id, free, block=1.0)
                except BrokerUnavailable:
                    return
                except Exception as exc:  # anything else must not end the loop while the heartbeat goes on
                    await self._loop_failed(exc)
                    continue
                if self.member.error is not None:
                    self.kernel.log.info("gateway_worker_loop_recovered", worker=self.member.id)
                    self.member.error, self._failures = None, 0
                for lease in leases:
                    if self.stopping:
                        await self._give_back(lease)
                        continue
                    task = asyncio.create_task(self._serve(lease), name=f"gateway-chat-{lease.chat_key}")
                    self.serving[lease.token] = (lease, task)
                    task.add_done_callback(_calling(self._done, lease.token))
        finally:
            beats.cancel()

    def _prepare_model(self) -> None:
        with contextlib.suppress(Exception):  # a turn reports it to the chat, with the fix
            self.kernel.providers.model()

    async def _loop_failed(self, exc: Exception) -> None:
        """Log a failure to take chats (the first of a run, and each new kind), report it in the member
        record, and wait before trying again: 0.1 s, doubling up to :data:`LOOP_BACKOFF_MAX`."""
        error = describe(exc)
        self._failures += 1
        if error != self.member.error:
            self.kernel.log.warning(
                "gateway_worker_loop_failed",
                worker=self.member.id,
                error=error,
                failures=self._failures,
                detail="this worker takes no chat until it works again; it keeps trying",
            )
        self.member.error = error
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                self.stopped.wait(), min(0.1 * 2 ** min(self._failures - 1, 10), LOOP_BACKOFF_MAX)
            )

    def _leases(self) -> list[Lease]:
        self.member.busy = len(self.serving)
        return [lease for lease, _task in self.serving.values()]

    def _done(self, token: str) -> None:
        self.serving.pop(token, None)
        self._freed.set()

    async def _serve(self, lease: Lease) -> None:
        """Answer the chat's messages until none is left (or the chat was taken over, or a stop)."""
        log = self.kernel.log
        first = True
        try:
            if lease.message is None:  # its messages were removed behind the gateway's back
                following = await self.broker.finish(self.member.id, lease, None)
                lease.message = following if isinstance(following, Inbound) else None
            while lease.message is not None:
                message = lease.message
                # The chat was taken just now: its conversation is read again (another worker may have
                # answered it since).  Its next messages follow this worker's own turns.
                reply, state = await self._answer(message, lease if first else None)
                first = False
                atomic = state is not None and getattr(self.store, "atomic_with_replies", False)
                following = await self.broker.finish(
                    self.member.id,
                    lease,
                    reply,
                    (message.chat_key, state) if atomic and state is not None else None,
                )
                if following is STALE:
                    log.warning(
                        "gateway_chat_taken_over",
                        chat=lease.chat_key,
                        worker=self.member.id,
                        detail="another worker took the chat over (this one was silent longer than "
                        "claim_after); its reply was dropped and the other worker's counts",
                    )
                    async with self.conversations.chat_lock(message.platform, message.chat_id):
                        self.conversations.drop(message.platform, message.chat_id)
                    return
                self.answered += 1
                if state is not None and not atomic:
                    await self._save(message, state)
                lease.message = following if isinstance(following, Inbound) else None
                if lease.message is not None and self.stopping:
                    await self._give_back(lease)
                    return
        except BrokerUnavailable:
            return  # a stop while the broker is unreachable: the message stays unacknowledged there
        except Exception as exc:  # the broker refused a step: the chat goes to another worker in time
            log.warning(
                "gateway_chat_failed", chat=lease.chat_key, worker=self.member.id, error=describe(exc)
            )

    async def _answer(self, message: Inbound, taken: Lease | None) -> tuple[Outbound | None, str | None]:
        """The reply to ``message`` and the chat's state after it (JSON), the turn run on this worker;
        ``taken``: the lease when the chat was just taken (its session is read again)."""
        conversations = self.conversations
        if message.message_type == "unreadable":
            return None, None  # unreadable or another chat's: logged by the broker when it was read
        if taken is not None and taken.attempts > MAX_ATTEMPTS:
            self.kernel.log.warning(
                "gateway_message_given_up",
                chat=message.chat_key,
                message=message.message_id or message.uid,
                attempts=taken.attempts - 1,
                detail="each worker that took it stopped before answering (its turn may kill the worker)",
            )
            return self._reply(message, GAVE_UP_REPLY.format(attempts=taken.attempts - 1)), None
        async with conversations.chat_lock(message.platform, message.chat_id):
            try:
                session = await conversations.session_for(
                    message.platform,
                    message.chat_id,
                    message.user_id,
                    refresh=taken is not None,
                    state=self._prefetched(taken),
                )
                text: str | None = await conversations.respond(
                    message.platform, session, message.text, message.user_id
                )
            except BrokerUnavailable:
                raise
            except Exception as exc:  # a bug must not leave the chat stuck on this message
                self.kernel.log.warning("gateway_worker_failed", chat=message.chat_key, error=describe(exc))
                text, session = FAILED_REPLY.format(error=type(exc).__name__), None
            state = None
            if session is not None:
                try:
                    state = conversations.session_state(session).dumps()
                except SessionStoreError as exc:
                    self.kernel.log.warning(
                        "gateway_session_not_saved", chat=message.chat_key, error=str(exc)
                    )
        return self._reply(message, text), state

    def _reply(self, message: Inbound, text: str | None) -> Outbound | None:
        """The reply record of ``text``, cut to :data:`MAX_REPLY_BYTES` with a notice when longer (the
        ingress reads no bigger one); ``None`` for no reply."""
        if not text:
            return None
        return Outbound(
            platform=message.platform,
            chat_id=message.chat_id,
            text=fit_reply(text),
            reply_to=message.message_id,
            key=message.reply_key,
            accepted_at=message.accepted_at,
            worker=self.member.id,
        )

    def _prefetched(self, lease: Lease | None) -> SessionState | object | None:
        """The session record read with ``lease`` (when the store is the broker's), else ``NOT_READ``."""
        if lease is None or not lease.prefetched or not getattr(self.store, "atomic_with_replies", False):
            return NOT_READ
        if lease.session is None:
            return None
        try:
            return SessionState.loads(lease.session)
        except (ValueError, RecursionError):
            return NOT_READ  # the store reads it again, and keeps the bad record aside

    async def _save(self, message: Inbound, state: str) -> None:
        try:
            await self.store.save(message.chat_key, SessionState.loads(state))
        except (SessionStoreError, ValueError, OSError) as exc:
            self.kernel.log.warning("gateway_session_not_saved", chat=message.chat_key, error=describe(exc))

    async def _give_back(self, lease: Lease) -> None:
        with contextlib.suppress(BrokerUnavailable):  # else taken over after claim_after
            await self.broker.release(self.member.id, lease)

    async def drain(self, timeout: float) -> None:
        """Stop taking chats; let the turns in progress finish and hand back, for up to ``timeout``."""
        self.stopping = True
        self.stopped.set()
        self._freed.set()
        tasks = [task for _lease, task in self.serving.values()]
        if tasks:
            _done, late = await asyncio.wait(tasks, timeout=timeout)
            for task in late:
                task.cancel()  # unacknowledged: another worker takes the chat after claim_after
            if late:
                self.kernel.log.warning("gateway_turns_abandoned", count=len(late), detail="stop timed out")
        if self.broker.connected:
            await leave(self.broker, self.member, self.kernel)


def _calling(done: Callable[[str], object], token: str) -> Callable[[asyncio.Task[Any]], None]:
    """A task's done-callback that calls ``done(token)`` (bound now, not when the loop moves on)."""

    def finished(_task: asyncio.Task[Any]) -> None:
        done(token)

    return finished
