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
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.config import section
from ..core.hooks import plain_text
from ..core.services import serviceimpl
from .base import BasePlatformAdapter, MessageEvent, SendResult
from .broker import Broker, BrokerError, BrokerSettings, fit_reply
from .config import PlatformConfig
from .conversations import Conversations
from .duplicates import RecentMessages
from .ingress import Ingress
from .platforms import Platforms, PlatformStatus, split_message
from .registry import GatewayError, PlatformSpec
from .sessions import NOT_READ, SessionState, SessionStore, SqliteSessionStore
from .worker import Worker

if TYPE_CHECKING:
    from ..agent import AgentSession
    from ..core.kernel import Kernel

__all__ = ["Gateway", "GatewayError", "PlatformStatus", "open_broker", "split_message"]

DRAIN_TIMEOUT = 30.0  # how long shutdown waits for the turns in progress
TASKS_TIMEOUT = 5.0  # how long shutdown waits for its tasks to end (then once more after cancelling them)
ROLES = ("all", "ingress", "worker")
DEFAULT_CONCURRENCY = 4  # turns a worker runs at once (gateway.worker.concurrency)


class Gateway:
    """``k.gateway``: runs the enabled platform adapters and routes their messages to sessions.

    A facade over its parts: :class:`Platforms` (the adapters, sending), :class:`Conversations` (the
    chats' sessions and their store), :class:`RecentMessages` (ids delivered again), and, with a
    broker, the :class:`Ingress` and :class:`Worker` of a scaled-out gateway.
    """

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self.platforms = Platforms(kernel, self.handle)
        self.conversations = Conversations(kernel)
        self.recent = RecentMessages(kernel)
        #: What this process is while it runs: ``all``, ``ingress`` or ``worker``.
        self.role = "all"
        #: The broker while :meth:`run` serves with one (``gateway.broker``), else ``None``.
        self.broker: Broker | None = None
        self.worker: Worker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._broker_tasks: list[asyncio.Task[Any]] = []  # they end by themselves once stopping
        self._inflight: set[asyncio.Future[None]] = set()
        self._ingress: Ingress | None = None

    @property
    def adapters(self) -> dict[str, BasePlatformAdapter]:
        """The adapters of the platforms this gateway runs, by name."""
        return self.platforms.adapters

    @property
    def errors(self) -> dict[str, str]:
        """Why a platform is not connected, by name."""
        return self.platforms.errors

    @property
    def sessions(self) -> dict[tuple[str, str], AgentSession]:
        """The chats' agent sessions in memory, by ``(platform, chat)``."""
        return self.conversations.sessions

    @property
    def store(self) -> SessionStore | None:
        """Where the chats' conversations are kept while :meth:`run` serves."""
        return self.conversations.store

    # -- which platforms (see Platforms) ------------------------------------------------

    def platform_config(self, spec: PlatformSpec) -> tuple[PlatformConfig | None, str, str]:
        """``(config, source, reason)``: the config when the platform is enabled, else why not."""
        return self.platforms.platform_config(spec)

    def status(self) -> list[PlatformStatus]:
        """Every registered platform: enabled or not and why, connected or not."""
        return self.platforms.status()

    def make_adapter(self, spec: PlatformSpec, config: PlatformConfig) -> BasePlatformAdapter:
        """Build the adapter of ``spec`` and connect it to this gateway's message handling."""
        return self.platforms.make_adapter(spec, config)

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
        self.role, self.broker = role, broker
        self.conversations.begin(store, bounded=broker is not None)
        self._loop = self.platforms.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.recent.clear()  # message ids are remembered while a run lasts
        self.errors.clear()
        started: list[str] = []
        try:
            if broker is not None:
                # Not awaited: every broker call retries until Redis answers (an adapter connects once
                # its ingress holds the platform, which needs Redis; a worker waits to take chats).
                self._tasks.append(asyncio.create_task(broker.open(), name="gateway-broker-open"))
                if role != "worker":
                    # Before the adapters: they wait for its hold.
                    self._ingress = Ingress(kernel, self.platforms, broker, role=role, stop=self.stop)
            if role != "worker":
                hold = self._ingress.hold if self._ingress is not None else None
                started = self.platforms.start(platforms, self._tasks, hold)
            if broker is not None:
                if self._ingress is not None:
                    self._broker_tasks.extend(self._ingress.start(started))
                if role != "ingress":
                    self.worker = Worker(kernel, self.conversations, broker, store, slots, role=role)
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

    def stop(self) -> None:
        """Ask :meth:`run` to end (safe from any thread and from signal handlers)."""
        loop, stop = self._loop, self._stop
        if loop is None or stop is None:
            return
        if loop.is_running():
            loop.call_soon_threadsafe(stop.set)
        else:
            stop.set()

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
        await self.platforms.disconnect_all()
        await self.conversations.close_all()
        self.adapters.clear()
        if self._ingress is not None:
            await self._ingress.let_go()
            self._ingress.write_spool()
        if broker is not None:
            await broker.aclose()
        if self.store is not None:
            await self.store.aclose()
        self.worker = self._ingress = self.broker = None
        self.conversations.bounded = False
        kernel.log.info("gateway_stopped")

    # -- one message ----------------------------------------------------------------------

    async def handle(self, spec: PlatformSpec, adapter: BasePlatformAdapter, event: MessageEvent) -> None:
        """Answer one incoming message (see the module docstring); never raises for a plugin's failure."""
        kernel = self._kernel
        chat = event.chat_id
        if chat is None:
            kernel.log.warning("gateway_message_without_chat", platform=spec.name)
            return
        if self._ingress is None and self.recent.seen_before(spec.name, str(chat), event.message_id):
            # Answered: the first reply again; in progress: its reply, when sent, answers both.
            # (With a broker, the broker does the same at submit.)
            kept = self.recent.kept_reply(spec.name, str(chat), event.message_id)
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

    async def _answer(
        self, spec: PlatformSpec, adapter: BasePlatformAdapter, event: MessageEvent, text: str
    ) -> None:
        chat = str(event.chat_id)
        user = event.source.user_id if event.source is not None else None
        reply = await self.conversations.turn(spec.name, chat, user, text)
        if reply:
            reply = fit_reply(reply)
            self.recent.keep_reply(spec.name, chat, event.message_id, reply)
            error = await self.platforms.send_reply(adapter, chat, reply, reply_to=event.message_id)
            if error is not None:
                self.platforms.keep_undelivered(spec.name, chat, event.message_id, reply, error)

    # -- the conversations (see Conversations) ---------------------------------------------

    async def respond(self, platform: str, session: AgentSession, text: str, user: str | None) -> str | None:
        """The reply to ``text`` in ``session`` (see :meth:`Conversations.respond`)."""
        return await self.conversations.respond(platform, session, text, user)

    async def session_for(
        self,
        platform: str,
        chat: str,
        user: str | None,
        *,
        refresh: bool = False,
        state: SessionState | object | None = NOT_READ,
    ) -> AgentSession:
        """The session of ``(platform, chat)`` (see :meth:`Conversations.session_for`)."""
        return await self.conversations.session_for(platform, chat, user, refresh=refresh, state=state)

    def session_state(self, session: AgentSession, *, finalized: bool = False) -> SessionState:
        return self.conversations.session_state(session, finalized=finalized)

    # -- sending and delivering (see Platforms) ----------------------------------------------

    async def send(
        self, adapter: BasePlatformAdapter, chat_id: str, text: str, reply_to: str | None = None
    ) -> list[SendResult]:
        """Send ``text`` in pieces of at most the adapter's ``max_message_length``."""
        return await self.platforms.send(adapter, chat_id, text, reply_to=reply_to)

    async def send_reply(
        self, adapter: BasePlatformAdapter, chat_id: str, text: str, reply_to: str | None = None
    ) -> str | None:
        """Send a reply, tried again while none of it went through; ``None`` once sent, else the error."""
        return await self.platforms.send_reply(adapter, chat_id, text, reply_to=reply_to)

    def home_channel(self, spec: PlatformSpec, config: PlatformConfig | None = None) -> str | None:
        """Where deliveries go: ``$<cron_deliver_env_var>``, else the platform's ``home_channel``."""
        return self.platforms.home_channel(spec, config)

    def deliver(self, platform: str, text: str, *, timeout: float = 60.0) -> list[SendResult]:
        """Send ``text`` to the home channel of ``platform``.

        Uses the running gateway's adapter when there is one (from any
        thread); otherwise connects an adapter for the delivery and
        disconnects it afterwards.  Raises :class:`GatewayError` when the
        platform is unknown, not enabled or has no home channel.
        """
        return self.platforms.deliver(platform, text, timeout=timeout)

    async def adeliver(self, platform: str, text: str) -> list[SendResult]:
        """As :meth:`deliver`, from a coroutine (on the gateway's loop, or any other)."""
        return await self.platforms.adeliver(platform, text)


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
    kernel.host.provide(gateway=Gateway(kernel))
