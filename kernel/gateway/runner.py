"""The gateway: platform adapters registered by plugins, and the loop that routes their chats to sessions.

``ctx.register_platform(...)`` adds a :class:`PlatformSpec` to ``k.platforms``.
``k.gateway.status()`` says which are enabled and why not; ``await
k.gateway.run()`` (``hermes-kernel gateway run``) connects every enabled
adapter on one asyncio loop and answers each incoming message with the agent
session of its ``(platform, chat)``:

1. ``pre_gateway_dispatch`` may skip the message or rewrite its text;
2. a text starting with ``/`` runs as a slash command (``command:<name>`` is emitted);
3. anything else is a turn of the chat's :class:`~kernel.agent.AgentSession`
   (run on a worker thread, so adapters keep reading); the platform's
   ``platform_hint`` joins the system prompt;
4. the answer goes back through the adapter's ``send``, split to its
   ``max_message_length``.

An adapter whose first connection fails is retried with exponential backoff
(tenacity) and reported in :meth:`Gateway.status`; the others keep running.
:meth:`Gateway.stop` (Ctrl-C, SIGTERM) disconnects every adapter and closes
every session, which fires ``on_session_finalize``.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tenacity

from ..core.config import section
from ..core.hooks import describe, plain_text, propagates
from ..core.safe_yaml import utf8_size
from ..core.services import serviceimpl
from .base import BasePlatformAdapter, MessageEvent, SendResult
from .broker import FAILED_REPLY, Broker, BrokerError, BrokerSettings, chat_key, fit_reply
from .config import Platform, PlatformConfig
from .registry import GatewayError, PlatformSpec
from .sessions import NOT_READ, SessionState, SessionStore, SessionStoreError, SqliteSessionStore

if TYPE_CHECKING:
    from ..agent import AgentSession
    from ..core.kernel import Kernel
    from .worker import Worker

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 60.0
WATCH_INTERVAL = 1.0  # how often a connected adapter's is_connected is checked
CONNECT_TIMEOUT = 60.0  # a connect() that takes longer counts as failed (and is retried)
DRAIN_TIMEOUT = 30.0  # how long shutdown waits for the turns in progress
TASKS_TIMEOUT = 5.0  # how long shutdown waits for its tasks to end (then once more after cancelling them)
ROLES = ("all", "ingress", "worker")
DEFAULT_CONCURRENCY = 4  # turns a worker runs at once (gateway.worker.concurrency)
#: Sessions a worker keeps in memory between its chats' turns (their state is in the store).
WORKER_SESSION_CACHE = 1024
#: Message ids a gateway without a broker remembers (the latest): one delivered again runs no turn.
SEEN_MESSAGES = 10000
#: The UTF-8 bytes of first replies a gateway without a broker keeps for those ids, to send one again
#: to a duplicate delivery (the oldest forgotten first; one forgotten, its duplicate gets nothing).
KEPT_REPLY_BYTES = 64 * 1024 * 1024
#: Tries at sending a reply none of whose pieces went through (0.5 s, then 1 s between them).
SEND_TRIES = 3
#: The most ``gateway/undelivered.jsonl`` grows to (a single process's replies never sent).
UNDELIVERED_BYTES = 64 * 1024 * 1024


@dataclass
class PlatformStatus:
    """What ``gateway status`` shows for one platform."""

    name: str
    label: str
    plugin: str
    enabled: bool
    reason: str
    source: str  # "config", "env" or ""
    connected: bool = False
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


class Gateway:
    """``k.gateway``: runs the enabled platform adapters and routes their messages to sessions."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self.adapters: dict[str, BasePlatformAdapter] = {}
        self.sessions: dict[tuple[str, str], AgentSession] = {}
        self.errors: dict[str, str] = {}
        #: What this process is while it runs: ``all``, ``ingress`` or ``worker``.
        self.role = "all"
        #: The broker while :meth:`run` serves with one (``gateway.broker``), else ``None``.
        self.broker: Broker | None = None
        #: Where the chats' conversations are kept while :meth:`run` serves.
        self.store: SessionStore | None = None
        self.worker: Worker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._broker_tasks: list[asyncio.Task[Any]] = []  # they end by themselves once stopping
        self._session_locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._inflight: set[asyncio.Future[None]] = set()
        self._ingress: Any = None
        #: ``(platform, chat, message id)`` of the latest messages handled without a broker.
        self._seen: collections.OrderedDict[tuple[str, str, str], None] = collections.OrderedDict()
        #: The first replies of the latest of those messages, and their size (``KEPT_REPLY_BYTES``).
        self._kept: collections.OrderedDict[tuple[str, str, str], str] = collections.OrderedDict()
        self._kept_bytes = 0

    # -- which platforms ------------------------------------------------------------

    def platform_config(self, spec: PlatformSpec) -> tuple[PlatformConfig | None, str, str]:
        """``(config, source, reason)``: the config when the platform is enabled, else why not."""
        kernel = self._kernel
        raw = section(kernel.config, "gateway", "platforms", spec.name)
        if raw is not None and not isinstance(raw, dict):
            return None, "", f"config.yaml: 'gateway.platforms.{spec.name}' must be a mapping"
        source = ""
        data: dict[str, Any] | None = None
        if raw is not None and raw.get("enabled") is True:
            data, source = dict(raw), "config"
        elif raw is not None and "enabled" in raw and raw.get("enabled") is not True:
            return None, "", f"disabled in config.yaml (gateway.platforms.{spec.name}.enabled)"
        elif spec.env_enablement_fn is not None:
            try:
                found = spec.env_enablement_fn()
            except Exception as exc:
                return None, "", f"its env_enablement_fn failed: {type(exc).__name__}: {exc}"
            if isinstance(found, dict):
                data, source = {**found, **(raw or {}), "enabled": True}, "env"
        if data is None:
            return None, "", f"not enabled: set gateway.platforms.{spec.name}.enabled: true in config.yaml"
        missing = [v for v in spec.required_env if not kernel.environ.get(v)]
        if missing:
            return None, source, f"missing environment variable(s): {', '.join(missing)}"
        if spec.check_fn is not None:
            try:
                ok = spec.check_fn()
            except Exception as exc:
                return None, source, f"check_fn failed: {type(exc).__name__}: {exc}"
            if not ok:
                return None, source, "check_fn returned False (its requirements are not met)"
        return PlatformConfig.from_dict(data), source, ""

    def status(self) -> list[PlatformStatus]:
        """Every registered platform: enabled or not and why, connected or not."""
        rows = []
        for spec in self._kernel.platforms.all():
            config, source, reason = self.platform_config(spec)
            adapter = self.adapters.get(spec.name)
            rows.append(
                PlatformStatus(
                    name=spec.name,
                    label=spec.label,
                    plugin=spec.plugin,
                    enabled=config is not None,
                    reason=reason,
                    source=source,
                    connected=bool(adapter is not None and adapter.is_connected),
                    error=self.errors.get(spec.name),
                )
            )
        return rows

    def make_adapter(self, spec: PlatformSpec, config: PlatformConfig) -> BasePlatformAdapter:
        """Build the adapter of ``spec`` and connect it to this gateway's message handling."""
        adapter = spec.adapter_factory(config)
        if not isinstance(adapter, BasePlatformAdapter):
            raise GatewayError(
                f"platform '{spec.name}' (plugin '{spec.plugin}'): adapter_factory returned "
                f"{type(adapter).__name__}, not a BasePlatformAdapter"
            )
        adapter.platform = Platform(spec.name)

        async def handler(event: MessageEvent) -> None:
            try:
                await self.handle(spec, adapter, event)
            except Exception as exc:  # a bug here must not be silent, nor reach the adapter
                error = f"{type(exc).__name__}: {exc}"
                self._kernel.log.warning("gateway_handle_failed", platform=spec.name, error=error)

        adapter.set_message_handler(handler)
        return adapter

    # -- how it runs ------------------------------------------------------------------

    def broker_settings(self, url: str | None = None) -> BrokerSettings | None:
        """``gateway.broker`` (``url``, as ``--broker``, instead of its ``url``); ``None`` without one."""
        kernel = self._kernel
        try:
            return BrokerSettings.from_config(
                section(kernel.config, "gateway", "broker"), url, where=str(kernel.home / "config.yaml")
            )
        except BrokerError as exc:
            raise GatewayError(str(exc)) from None

    def _store_choice(self, broker: bool) -> tuple[str, Path]:
        """``(kind, sqlite path)`` from ``gateway.sessions``; :class:`GatewayError` naming the key."""
        kernel = self._kernel
        where = kernel.home / "config.yaml"
        raw = section(kernel.config, "gateway", "sessions")
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise GatewayError(f"{where}: 'gateway.sessions' must be a mapping (store: sqlite or redis)")
        kind = raw.get("store") or ("redis" if broker else "sqlite")
        if kind not in ("sqlite", "redis"):
            raise GatewayError(f"{where}: 'gateway.sessions.store' must be sqlite or redis, not {kind!r}")
        if kind == "redis" and not broker:
            raise GatewayError(
                f"{where}: 'gateway.sessions.store: redis' needs a broker: set gateway.broker.url "
                "(or pass --broker URL), or use store: sqlite"
            )
        path = raw.get("path") or "gateway/sessions.db"
        if not isinstance(path, str):
            raise GatewayError(f"{where}: 'gateway.sessions.path' must be a file name")
        return kind, kernel.home / path

    def make_store(self, broker: Broker | None) -> SessionStore:
        """The session store ``gateway.sessions.store`` names (SQLite, or Redis by default with a broker)."""
        kind, path = self._store_choice(broker is not None)
        if kind == "redis" and broker is not None:
            return broker.session_store()
        return SqliteSessionStore(path, log=self._kernel.log)

    def store_description(self, settings: BrokerSettings | None) -> dict[str, Any]:
        """What :meth:`make_store` would use, without connecting to anything (``gateway status``)."""
        kind, path = self._store_choice(settings is not None)
        if kind == "redis" and settings is not None:
            return {"store": "redis", "url": settings.masked_url}
        return {"store": "sqlite", "path": str(path)}

    def worker_concurrency(self, value: int | None = None) -> int:
        """How many turns a worker runs at once: ``value``, else ``gateway.worker.concurrency``, else 4."""
        if value is None:
            value = section(self._kernel.config, "gateway", "worker", "concurrency")
        if value is None:
            return DEFAULT_CONCURRENCY
        if type(value) is not int or not 1 <= value <= 1024:
            raise GatewayError(
                f"{self._kernel.home / 'config.yaml'}: 'gateway.worker.concurrency' must be a whole number "
                f"from 1 to 1024, not {value!r}"
            )
        return value

    # -- running ----------------------------------------------------------------------

    async def run(
        self,
        platforms: Iterable[str] | None = None,
        *,
        role: str = "all",
        broker_url: str | None = None,
        concurrency: int | None = None,
    ) -> None:
        """Serve until :meth:`stop`: connect the enabled adapters (or only ``platforms``) and answer them.

        Without a broker (``gateway.broker``, or ``broker_url``) everything runs here.  With one,
        ``role`` says what this process does: ``ingress`` holds the platform connections and queues
        their messages, ``worker`` answers queued messages, ``all`` does both (docs/scale-out.md).
        """
        kernel = self._kernel
        kernel.load()
        if role not in ROLES:
            raise GatewayError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        settings = self.broker_settings(broker_url)
        if settings is None and role != "all":
            raise GatewayError(
                f"the {role} role needs a broker: set gateway.broker.url in config.yaml or pass --broker URL"
            )
        slots = self.worker_concurrency(concurrency)
        broker = None
        if settings is not None:
            try:
                broker = open_broker(settings, log=kernel.log)
            except BrokerError as exc:
                raise GatewayError(str(exc)) from None
        store = self.make_store(broker)
        self.role, self.broker, self.store = role, broker, store
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        # Locks belong to the loop they were first used on; a second run gets new ones.
        self._session_locks.clear()
        self._seen.clear()  # message ids are remembered while a run lasts
        self._kept.clear()
        self._kept_bytes = 0
        self.errors.clear()
        started: list[str] = []
        try:
            if broker is not None:
                # Not awaited: every broker call retries until Redis answers (an adapter connects once
                # its ingress holds the platform, which needs Redis; a worker waits to take chats).
                self._tasks.append(asyncio.create_task(broker.open(), name="gateway-broker-open"))
            if broker is not None:
                from .worker import Ingress, Worker

                if role != "worker":
                    self._ingress = Ingress(self, broker)  # before the adapters: they wait for its hold
            if role != "worker":
                started = await self._start_adapters(platforms)
            if broker is not None:
                if self._ingress is not None:
                    self._broker_tasks.extend(self._ingress.start(started))
                if role != "ingress":
                    self.worker = Worker(self, broker, store, slots)
                    self._broker_tasks.append(asyncio.create_task(self.worker.run(), name="gateway-worker"))
            await kernel.events.aemit("gateway:startup", {"platforms": started})
            kernel.log.info(
                "gateway_started",
                platforms=started,
                role=role,
                broker=settings.masked_url if settings is not None else None,
                sessions=store.kind,
            )
            await self._stop.wait()
        finally:
            await self._shutdown()

    async def _start_adapters(self, platforms: Iterable[str] | None) -> list[str]:
        kernel = self._kernel
        wanted = set(platforms) if platforms is not None else None
        started = []
        for spec in kernel.platforms.all():
            if wanted is not None and spec.name not in wanted:
                continue
            config, _source, reason = self.platform_config(spec)
            if config is None:
                kernel.log.info("gateway_platform_skipped", platform=spec.name, reason=reason)
                continue
            try:
                adapter = self.make_adapter(spec, config)
            except BaseException as exc:
                if propagates(exc):
                    raise
                self.errors[spec.name] = describe(exc)
                kernel.log.warning("gateway_adapter_failed", platform=spec.name, error=self.errors[spec.name])
                continue
            self.adapters[spec.name] = adapter
            self._tasks.append(asyncio.create_task(self._connect(spec, adapter), name=f"connect-{spec.name}"))
            started.append(spec.name)
        return started

    def stop(self) -> None:
        """Ask :meth:`run` to end (safe from any thread and from signal handlers)."""
        loop, stop = self._loop, self._stop
        if loop is None or stop is None:
            return
        if loop.is_running():
            loop.call_soon_threadsafe(stop.set)
        else:
            stop.set()

    async def _connect(self, spec: PlatformSpec, adapter: BasePlatformAdapter) -> None:
        """Connect (with retries), then watch: a dropped adapter is reconnected the same way.

        An adapter that reconnects by itself (``reconnects_itself = True``, as
        the IRC adapter does) is only watched, and its state reported.
        """
        if self._ingress is not None and not await self._ingress.hold(spec.name):
            return
        reconnect = False
        while True:
            if not await self._connect_once(spec, adapter, reconnect):
                return
            while adapter.is_connected or not _watched(adapter):
                await asyncio.sleep(WATCH_INTERVAL)
                if getattr(adapter, "reconnects_itself", False):
                    self._note_state(spec, adapter)
            self.errors[spec.name] = "disconnected; reconnecting"
            self._kernel.log.warning("gateway_disconnected", platform=spec.name)
            reconnect = True

    def _note_state(self, spec: PlatformSpec, adapter: BasePlatformAdapter) -> None:
        if adapter.is_connected:
            self.errors.pop(spec.name, None)
        else:
            self.errors.setdefault(spec.name, "disconnected; the adapter is reconnecting")

    async def _connect_once(self, spec: PlatformSpec, adapter: BasePlatformAdapter, reconnect: bool) -> bool:
        kernel = self._kernel
        retrying = tenacity.AsyncRetrying(
            wait=tenacity.wait_exponential(multiplier=BACKOFF_FIRST, max=BACKOFF_MAX),
            retry=tenacity.retry_if_exception_type(Exception),
            before_sleep=lambda state: kernel.log.warning(
                "gateway_connect_retry",
                platform=spec.name,
                attempt=state.attempt_number,
                error=self.errors.get(spec.name),
            ),
        )
        try:
            async for attempt in retrying:
                with attempt:
                    try:
                        again = reconnect or attempt.retry_state.attempt_number > 1
                        ok = await asyncio.wait_for(_call_connect(adapter, again), CONNECT_TIMEOUT)
                    except Exception as exc:
                        self.errors[spec.name] = f"connect failed: {type(exc).__name__}: {exc}"
                        raise
                    if not ok:
                        why = getattr(adapter, "last_error", None)
                        self.errors[spec.name] = "connect() returned False" + (f": {why}" if why else "")
                        raise GatewayError(self.errors[spec.name])
        except asyncio.CancelledError:
            return False
        self.errors.pop(spec.name, None)
        if not adapter.is_connected:
            adapter._mark_connected()  # it said it connected
        kernel.log.info("gateway_connected", platform=spec.name)
        return True

    async def _shutdown(self) -> None:
        kernel = self._kernel
        broker = self.broker
        if self.worker is not None:
            await self.worker.drain(DRAIN_TIMEOUT)
        if self._inflight:
            # Let the turns in progress finish (and answer) before their sessions close.
            await asyncio.wait(set(self._inflight), timeout=DRAIN_TIMEOUT)
        if self._ingress is not None:
            await self._ingress.drain(DRAIN_TIMEOUT)
        if broker is not None:
            broker.stop_retrying()
            # The broker's loops end by themselves once stopping (each waits a second or two at most).
            if self._broker_tasks:
                await asyncio.wait(self._broker_tasks, timeout=TASKS_TIMEOUT)
        tasks = [*self._tasks, *self._broker_tasks]
        for task in tasks:
            task.cancel()
        if tasks:
            _done, stuck = await asyncio.wait(tasks, timeout=TASKS_TIMEOUT)
            if stuck:
                kernel.log.warning("gateway_tasks_left_running", tasks=sorted(t.get_name() for t in stuck))
        self._tasks.clear()
        self._broker_tasks.clear()
        for name, adapter in list(self.adapters.items()):
            try:
                await asyncio.wait_for(adapter.disconnect(), timeout=10)
            except Exception as exc:
                kernel.log.warning(
                    "gateway_disconnect_failed", platform=name, error=f"{type(exc).__name__}: {exc}"
                )
        for key, session in list(self.sessions.items()):
            if broker is not None:
                # Its conversation goes on in the store, on whichever worker takes the chat next.
                session.release()
            else:
                await asyncio.to_thread(session.close, "gateway_shutdown")
                await self._persist(key, session, finalized=True)
            del self.sessions[key]
        self.adapters.clear()
        if self._ingress is not None:
            await self._ingress.let_go()
            self._ingress.write_spool()
        if broker is not None:
            await broker.aclose()
        if self.store is not None:
            await self.store.aclose()
        self.worker = self._ingress = self.broker = None
        kernel.log.info("gateway_stopped")

    # -- one message ----------------------------------------------------------------------

    async def handle(self, spec: PlatformSpec, adapter: BasePlatformAdapter, event: MessageEvent) -> None:
        """Answer one incoming message (see the module docstring); never raises for a plugin's failure."""
        kernel = self._kernel
        chat = event.chat_id
        if chat is None:
            kernel.log.warning("gateway_message_without_chat", platform=spec.name)
            return
        if self._ingress is None and self._seen_before(spec.name, str(chat), event.message_id):
            # Answered: the first reply again; in progress: its reply, when sent, answers both.
            # (With a broker, the broker does the same at submit.)
            kept = self._kept_reply(spec.name, str(chat), event.message_id)
            if kept is not None:
                await self.send(adapter, str(chat), kept, reply_to=event.message_id)
            return
        text = event.text
        decision = await _dispatch_decision(kernel, event, self)
        if decision is not None:
            action, value = decision
            if action == "skip":
                kernel.log.info("gateway_message_skipped", platform=spec.name, reason=value)
                return
            if action == "rewrite":
                text = value
        if self._ingress is not None:
            await self._ingress.queue(spec, adapter, event, text)
            return
        # The turn itself is what shutdown waits for, not the task running it: an adapter may await
        # handle_message inside its own read loop, a task that ends only when the adapter does.
        turn = asyncio.get_running_loop().create_future()
        self._inflight.add(turn)
        try:
            await self._answer(spec, adapter, event, text)
        finally:
            self._inflight.discard(turn)
            turn.set_result(None)

    def _seen_before(self, platform: str, chat: str, message_id: Any) -> bool:
        """Whether the message was handled already (answered or in progress): the platform delivered
        it again.  Its first delivery's turn and reply are its only ones."""
        if message_id is None or message_id == "":  # no id: nothing to recognise it by
            return False
        key = (platform, chat, str(message_id))
        if key in self._seen:
            self._kernel.log.info(
                "gateway_message_duplicate",
                platform=platform,
                chat=chat,
                message=key[2],
                detail="handled already: no second turn; it gets the first reply (sent again once "
                "answered, else when it comes)",
            )
            return True
        self._seen[key] = None
        if len(self._seen) > SEEN_MESSAGES:
            old, _ = self._seen.popitem(last=False)
            self._forget_reply(old)
        return False

    def _keep_reply(self, platform: str, chat: str, message_id: Any, text: str) -> None:
        """Keep ``text``, the first reply to a message id seen, for its duplicates (bounded in bytes)."""
        key = (platform, chat, str(message_id))
        if message_id is None or message_id == "" or key not in self._seen or key in self._kept:
            return
        self._kept[key] = text
        self._kept_bytes += utf8_size(text)
        while self._kept_bytes > KEPT_REPLY_BYTES and self._kept:
            self._forget_reply(next(iter(self._kept)))

    def _kept_reply(self, platform: str, chat: str, message_id: Any) -> str | None:
        if message_id is None or message_id == "":
            return None
        return self._kept.get((platform, chat, str(message_id)))

    def _forget_reply(self, key: tuple[str, str, str]) -> None:
        text = self._kept.pop(key, None)
        if text is not None:
            self._kept_bytes -= utf8_size(text)

    async def _answer(
        self, spec: PlatformSpec, adapter: BasePlatformAdapter, event: MessageEvent, text: str
    ) -> None:
        chat = str(event.chat_id)
        key = (spec.name, chat)
        user = event.source.user_id if event.source is not None else None
        lock = self._session_locks.setdefault(key, asyncio.Lock())
        async with lock:  # one turn at a time per chat
            session = await self.session_for(spec.name, chat, user)
            reply = await self.respond(spec.name, session, text, user)
            await self._persist(key, session)
        if reply:
            reply = fit_reply(reply)
            self._keep_reply(spec.name, chat, event.message_id, reply)
            error = await self.send_reply(adapter, chat, reply, reply_to=event.message_id)
            if error is not None:
                self._keep_undelivered(spec.name, chat, event.message_id, reply, error)

    async def respond(self, platform: str, session: AgentSession, text: str, user: str | None) -> str:
        """The reply to ``text`` in ``session``: ``/new`` and ``/reset`` start over, another slash
        command runs as a command, anything else is a turn.  A failed turn's reply says only that it
        failed: a chat (maybe a public channel) never sees an error's text, which can carry
        configuration values (a URL with its key); the log has it, masked."""
        kernel = self._kernel
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
            kernel = self._kernel
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
        if self.broker is not None and len(self.sessions) > WORKER_SESSION_CACHE:
            oldest = next(iter(self.sessions))
            self.sessions.pop(oldest).release()
        return session

    def session_state(self, session: AgentSession, *, finalized: bool = False) -> SessionState:
        return SessionState(session.session_id, session.messages, session.turns, finalized)

    async def _persist(self, key: tuple[str, str], session: AgentSession, *, finalized: bool = False) -> None:
        """Save the chat's state in the store; a state that cannot be saved is logged, the chat goes on."""
        if self.store is None:
            return
        try:
            await self.store.save(chat_key(*key), self.session_state(session, finalized=finalized))
        except (SessionStoreError, BrokerError, OSError, sqlite3.Error) as exc:
            self._kernel.log.warning(
                "gateway_session_not_saved",
                platform=key[0],
                chat=key[1],
                store=self.store.kind,
                error=describe(exc),
            )

    async def send(
        self, adapter: BasePlatformAdapter, chat_id: str, text: str, reply_to: str | None = None
    ) -> list[SendResult]:
        """Send ``text`` in pieces of at most the adapter's ``max_message_length``."""
        results = []
        for piece in split_message(text, adapter.max_message_length):
            try:
                result = await _call_send(adapter, chat_id, piece, reply_to)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                self._kernel.log.warning("gateway_send_failed", platform=adapter.name, error=error)
                result = SendResult(success=False, error=error)
            results.append(result)
        return results

    async def send_reply(
        self, adapter: BasePlatformAdapter, chat_id: str, text: str, reply_to: str | None = None
    ) -> str | None:
        """Send a reply; while none of its pieces went through, try again (:data:`SEND_TRIES` in all).
        ``None`` once sent, else the platform's last error (the caller keeps the reply)."""
        error = "the platform refused it"
        for attempt in range(SEND_TRIES):
            if attempt:
                await asyncio.sleep(0.5 * 2 ** (attempt - 1))
            results = await self.send(adapter, chat_id, text, reply_to=reply_to)
            if not results or any(result.success for result in results):
                return None
            error = str(results[-1].error or error)
        return error

    def _keep_undelivered(self, platform: str, chat: str, message_id: Any, reply: str, error: str) -> None:
        """A reply the platform never took: logged and appended to ``gateway/undelivered.jsonl``."""
        path = self._kernel.home / "gateway" / "undelivered.jsonl"
        record = json.dumps(
            {"platform": platform, "chat_id": chat, "reply_to": message_id, "text": reply, "error": error}
        )
        kept: str | None = str(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() and path.stat().st_size + len(record) > UNDELIVERED_BYTES:
                kept = None
            else:
                with path.open("a", encoding="utf-8") as out:
                    out.write(record + "\n")
        except OSError:
            kept = None
        self._kernel.log.warning(
            "gateway_reply_undeliverable",
            platform=platform,
            chat=chat[:200],
            message=str(message_id)[:200],
            error=error[:500],
            tries=SEND_TRIES,
            kept_in=kept or f"nowhere: {path} is full or cannot be written",
        )

    # -- delivery to a home channel ----------------------------------------------------------

    def home_channel(self, spec: PlatformSpec, config: PlatformConfig | None = None) -> str | None:
        """Where deliveries go: ``$<cron_deliver_env_var>``, else the platform's ``home_channel``."""
        environ = self._kernel.environ
        if spec.cron_deliver_env_var and environ.get(spec.cron_deliver_env_var):
            return environ[spec.cron_deliver_env_var]
        return config.home_channel if config is not None else None

    def deliver(self, platform: str, text: str, *, timeout: float = 60.0) -> list[SendResult]:
        """Send ``text`` to the home channel of ``platform``.

        Uses the running gateway's adapter when there is one (from any
        thread); otherwise connects an adapter for the delivery and
        disconnects it afterwards.  Raises :class:`GatewayError` when the
        platform is unknown, not enabled or has no home channel.
        """
        spec, config, chat = self._delivery(platform)
        adapter = self.adapters.get(platform)
        loop = self._loop
        if adapter is not None and loop is not None and loop.is_running():
            if _running_loop() is loop:
                raise GatewayError(
                    "deliver() would block the gateway's own loop: use await k.gateway.adeliver()"
                )
            future = asyncio.run_coroutine_threadsafe(self.send(adapter, chat, text), loop)
            return future.result(timeout)
        if _running_loop() is not None:
            raise GatewayError("deliver() cannot run inside an event loop: use await k.gateway.adeliver()")
        return asyncio.run(self._deliver_once(spec, config, chat, text))

    async def adeliver(self, platform: str, text: str) -> list[SendResult]:
        """As :meth:`deliver`, from a coroutine (on the gateway's loop, or any other)."""
        spec, config, chat = self._delivery(platform)
        adapter = self.adapters.get(platform)
        if adapter is not None and self._loop is asyncio.get_running_loop():
            return await self.send(adapter, chat, text)
        if adapter is not None and self._loop is not None and self._loop.is_running():
            future = asyncio.run_coroutine_threadsafe(self.send(adapter, chat, text), self._loop)
            return await asyncio.wrap_future(future)
        return await self._deliver_once(spec, config, chat, text)

    def _delivery(self, platform: str) -> tuple[PlatformSpec, PlatformConfig, str]:
        """The platform, its config and its home channel; :class:`GatewayError` saying what is missing."""
        spec = self._kernel.platforms.get(platform)
        config, _source, reason = self.platform_config(spec)
        if config is None:
            raise GatewayError(f"platform '{platform}' cannot deliver: {reason}")
        chat = self.home_channel(spec, config)
        if not chat:
            where = f"${spec.cron_deliver_env_var} or " if spec.cron_deliver_env_var else ""
            raise GatewayError(
                f"platform '{platform}' has no home channel: "
                f"set {where}gateway.platforms.{platform}.home_channel"
            )
        return spec, config, chat

    async def _deliver_once(
        self, spec: PlatformSpec, config: PlatformConfig, chat: str, text: str
    ) -> list[SendResult]:
        adapter = self.make_adapter(spec, config)
        if not await _call_connect(adapter, False):
            raise GatewayError(f"platform '{spec.name}': connect() returned False")
        try:
            return await self.send(adapter, chat, text)
        finally:
            await adapter.disconnect()


def open_broker(settings: BrokerSettings, *, log: Any = None) -> Broker:
    """The broker for ``settings.url`` (not yet connected: ``await broker.open()``)."""
    try:
        from .redis_broker import RedisBroker
    except ImportError as exc:  # the client library is an extra
        raise BrokerError(
            f"the broker {settings.masked_url} needs the Redis client: pip install 'hermes-kernel[redis]' "
            f"({exc})"
        ) from None
    return RedisBroker(settings, log=log)


def _watched(adapter: BasePlatformAdapter) -> bool:
    """Whether the gateway reconnects this adapter when it drops (not when it does so itself)."""
    return not getattr(adapter, "reconnects_itself", False)


def split_message(text: str, limit: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at line ends, then spaces, when possible."""
    text = text.strip()
    if limit <= 0 or len(text) <= limit:
        return [text] if text else []
    pieces = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit + 1)
        if cut <= 0:
            cut = text.rfind(" ", 0, limit + 1)
        if cut <= 0:
            cut = limit
        pieces.append(text[:cut].rstrip())
        # Drop the line break or space cut at, keep the next line's indentation.
        text = text[cut:]
        text = text[1:] if text[:1] == "\n" else text.lstrip(" ")
    if text:
        pieces.append(text)
    return [p for p in pieces if p]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _call_connect(adapter: BasePlatformAdapter, is_reconnect: bool) -> bool:
    """``adapter.connect()``, passing ``is_reconnect`` only to adapters that take it (the seed's does not)."""
    params = inspect.signature(adapter.connect).parameters
    takes = "is_reconnect" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    result = adapter.connect(is_reconnect=is_reconnect) if takes else adapter.connect()
    if inspect.isawaitable(result):
        result = await result
    return result is not False


async def _call_send(
    adapter: BasePlatformAdapter, chat_id: str, text: str, reply_to: str | None
) -> SendResult:
    """``adapter.send(chat_id, text)``, with ``reply_to`` only for adapters that take it."""
    params = inspect.signature(adapter.send).parameters
    takes = "reply_to" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    result = adapter.send(chat_id, text, reply_to=reply_to) if takes else adapter.send(chat_id, text)
    if inspect.isawaitable(result):
        result = await result
    if isinstance(result, SendResult):
        return result
    return SendResult(success=result is not False, raw_response=result)


async def _dispatch_decision(kernel: Kernel, event: MessageEvent, gateway: Gateway) -> tuple[str, Any] | None:
    """The first ``pre_gateway_dispatch`` answer that decides: ``("skip", reason)``, ``("rewrite", text)``.

    ``None`` to dispatch the message as it is.  An answer that cannot be read
    disables its callback.
    """
    decisions = await kernel.aread_hook(
        "pre_gateway_dispatch",
        _read_dispatch_answer,
        event=event,
        gateway=gateway,
        session_store=gateway.sessions,
    )
    for decision in decisions:
        if decision == ("allow", None):
            return None
        if decision is not None:
            return decision
    return None


def _read_dispatch_answer(value: Any) -> tuple[str, Any] | None:
    """One ``pre_gateway_dispatch`` answer: ``("skip", reason)``, ``("rewrite", text)``,
    ``("allow", None)``, or ``None`` for no decision; no method of a dict subclass runs."""
    if not issubclass(type(value), dict):
        return None
    action = plain_text(dict.get(value, "action"))
    if action == "skip":
        return "skip", plain_text(dict.get(value, "reason"))
    if action == "rewrite":
        text = plain_text(dict.get(value, "text"))
        return None if text is None else ("rewrite", text)
    if action == "allow":
        return "allow", None
    return None


# -- the gateway service (see kernel.core.services) --------------------------------


@serviceimpl
def service_attach(kernel: Kernel) -> None:
    kernel.gateway = Gateway(kernel)
