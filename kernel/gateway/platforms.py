"""The platforms a gateway runs: which are enabled and why not, their adapters (connected, watched,
reconnected with backoff), sending replies through them, and deliveries to a home channel."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import tenacity

from ..base.config import section
from ..core.hooks import describe, propagates
from .base import BasePlatformAdapter, MessageEvent, SendResult
from .config import Platform, PlatformConfig
from .registry import GatewayError, PlatformSpec

if TYPE_CHECKING:
    from ..core.kernel import Kernel

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 60.0
WATCH_INTERVAL = 1.0  # how often a connected adapter's is_connected is checked
CONNECT_TIMEOUT = 60.0  # a connect() that takes longer counts as failed (and is retried)
#: Tries at sending a reply none of whose pieces went through (0.5 s, then 1 s between them).
SEND_TRIES = 3
#: The most ``gateway/undelivered.jsonl`` grows to (a single process's replies never sent).
UNDELIVERED_BYTES = 64 * 1024 * 1024

#: What an adapter's incoming messages go to: ``route(spec, adapter, event)``.
MessageRoute = Callable[[PlatformSpec, BasePlatformAdapter, MessageEvent], Awaitable[None]]
#: Waits until this process may connect the platform (its ingress holds it); ``False``: never.
Hold = Callable[[str], Awaitable[bool]]


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


class Platforms:
    """The adapters of the enabled platforms, and sending through them."""

    def __init__(self, kernel: Kernel, route: MessageRoute) -> None:
        self.kernel = kernel
        self.adapters: dict[str, BasePlatformAdapter] = {}
        #: Why a platform is not connected (its last failure, a standby's wait), by name.
        self.errors: dict[str, str] = {}
        #: The loop the gateway serves on while it runs (deliveries from other threads go there).
        self.loop: asyncio.AbstractEventLoop | None = None
        self._route = route

    # -- which platforms ------------------------------------------------------------

    def platform_config(self, spec: PlatformSpec) -> tuple[PlatformConfig | None, str, str]:
        """``(config, source, reason)``: the config when the platform is enabled, else why not."""
        kernel = self.kernel
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
        for spec in self.kernel.platforms.all():
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
        """Build the adapter of ``spec``, its incoming messages routed to the gateway."""
        adapter = spec.adapter_factory(config)
        if not isinstance(adapter, BasePlatformAdapter):
            raise GatewayError(
                f"platform '{spec.name}' (plugin '{spec.plugin}'): adapter_factory returned "
                f"{type(adapter).__name__}, not a BasePlatformAdapter"
            )
        adapter.platform = Platform(spec.name)

        async def handler(event: MessageEvent) -> None:
            try:
                await self._route(spec, adapter, event)
            except Exception as exc:  # a bug here must not be silent, nor reach the adapter
                error = f"{type(exc).__name__}: {exc}"
                self.kernel.log.warning("gateway_handle_failed", platform=spec.name, error=error)

        adapter.set_message_handler(handler)
        return adapter

    # -- connecting -------------------------------------------------------------------

    def start(
        self, platforms: Iterable[str] | None, tasks: list[asyncio.Task[Any]], hold: Hold | None = None
    ) -> list[str]:
        """Make the adapters of the enabled platforms (or only ``platforms``) and start connecting them
        (each once ``hold`` says so; the tasks added to ``tasks``); the names started."""
        kernel = self.kernel
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
            tasks.append(asyncio.create_task(self._connect(spec, adapter, hold), name=f"connect-{spec.name}"))
            started.append(spec.name)
        return started

    async def _connect(self, spec: PlatformSpec, adapter: BasePlatformAdapter, hold: Hold | None) -> None:
        """Connect (with retries), then watch: a dropped adapter is reconnected the same way.

        An adapter that reconnects by itself (``reconnects_itself = True``, as
        the IRC adapter does) is only watched, and its state reported.
        """
        if hold is not None and not await hold(spec.name):
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
            self.kernel.log.warning("gateway_disconnected", platform=spec.name)
            reconnect = True

    def _note_state(self, spec: PlatformSpec, adapter: BasePlatformAdapter) -> None:
        if adapter.is_connected:
            self.errors.pop(spec.name, None)
        else:
            self.errors.setdefault(spec.name, "disconnected; the adapter is reconnecting")

    async def _connect_once(self, spec: PlatformSpec, adapter: BasePlatformAdapter, reconnect: bool) -> bool:
        kernel = self.kernel
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

    async def disconnect_all(self) -> None:
        """Disconnect every adapter (a failure is logged, the others still disconnect)."""
        for name, adapter in list(self.adapters.items()):
            try:
                await asyncio.wait_for(adapter.disconnect(), timeout=10)
            except Exception as exc:
                self.kernel.log.warning(
                    "gateway_disconnect_failed", platform=name, error=f"{type(exc).__name__}: {exc}"
                )

    # -- sending ----------------------------------------------------------------------

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
                self.kernel.log.warning("gateway_send_failed", platform=adapter.name, error=error)
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

    def keep_undelivered(self, platform: str, chat: str, message_id: Any, reply: str, error: str) -> None:
        """A reply the platform never took: logged and appended to ``gateway/undelivered.jsonl``."""
        path = self.kernel.home / "gateway" / "undelivered.jsonl"
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
        self.kernel.log.warning(
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
        environ = self.kernel.environ
        if spec.cron_deliver_env_var and environ.get(spec.cron_deliver_env_var):
            return environ[spec.cron_deliver_env_var]
        return config.home_channel if config is not None else None

    def deliver(self, platform: str, text: str, *, timeout: float = 60.0) -> list[SendResult]:
        """Send ``text`` to the home channel of ``platform`` (see :meth:`Gateway.deliver`)."""
        spec, config, chat = self._delivery(platform)
        adapter = self.adapters.get(platform)
        loop = self.loop
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
        if adapter is not None and self.loop is asyncio.get_running_loop():
            return await self.send(adapter, chat, text)
        if adapter is not None and self.loop is not None and self.loop.is_running():
            future = asyncio.run_coroutine_threadsafe(self.send(adapter, chat, text), self.loop)
            return await asyncio.wrap_future(future)
        return await self._deliver_once(spec, config, chat, text)

    def _delivery(self, platform: str) -> tuple[PlatformSpec, PlatformConfig, str]:
        """The platform, its config and its home channel; :class:`GatewayError` saying what is missing."""
        spec = self.kernel.platforms.get(platform)
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
    result: object = adapter.connect(is_reconnect=is_reconnect) if takes else adapter.connect()
    if inspect.isawaitable(result):
        result = await result
    return result is not False


async def _call_send(
    adapter: BasePlatformAdapter, chat_id: str, text: str, reply_to: str | None
) -> SendResult:
    """``adapter.send(chat_id, text)``, with ``reply_to`` only for adapters that take it."""
    params = inspect.signature(adapter.send).parameters
    takes = "reply_to" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    result: object = adapter.send(chat_id, text, reply_to=reply_to) if takes else adapter.send(chat_id, text)
    if inspect.isawaitable(result):
        result = await result
    if isinstance(result, SendResult):
        return result
    return SendResult(success=result is not False, raw_response=result)
