"""The servers at run time: one background asyncio loop, a session per server, reconnection."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fnmatch
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...tools import ToolRegistrationError
from .config import (
    _UNSAFE,
    BACKOFF_FIRST,
    BACKOFF_MAX,
    CLOSE_TIMEOUT,
    STABLE_AFTER,
    ServerConfig,
    _clip,
    _public_url,
    _where,
)
from .results import _error, kernel_tool_name, result_json, select_tools, tool_schema

if TYPE_CHECKING:
    from ...core.context import PluginContext
    from ...core.kernel import Kernel, _Record


class _Sdk:
    """The parts of the ``mcp`` SDK this surface uses, imported on first need."""

    def __init__(self) -> None:
        import anyio
        import httpx
        import mcp  # noqa: F401  (the clear ImportError when the SDK is missing)
        import tenacity
        from mcp import ClientSession, StdioServerParameters, types
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared.exceptions import McpError

        self.anyio, self.httpx, self.tenacity, self.types = anyio, httpx, tenacity, types
        self.ClientSession, self.StdioServerParameters = ClientSession, StdioServerParameters
        self.stdio_client, self.streamable_http_client = stdio_client, streamable_http_client
        self.McpError = McpError
        # The SDK logs transport trouble (a server that went away) at WARNING; what
        # matters reaches the record and the kernel's log, so keep it off a bare stderr.
        sdk_logger = logging.getLogger("mcp")
        if not sdk_logger.handlers:
            sdk_logger.addHandler(logging.NullHandler())


class _Manager:
    """The event-loop thread shared by the servers of one kernel."""

    def __init__(self, kernel: Kernel, sdk: _Sdk) -> None:
        self.kernel = kernel
        self.sdk = sdk
        self.servers: list[_Server] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run_loop, name="hermes-mcp", daemon=True)
        self.closed = False
        self._lock = threading.Lock()
        self._started = 0.0

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def start(self) -> None:
        if not self.servers:
            self.loop.close()
            return
        self._started = time.monotonic()
        self.thread.start()
        for server in self.servers:
            server.future = asyncio.run_coroutine_threadsafe(server.run(), self.loop)

    def server_of(self, record_name: str) -> _Server | None:
        """The server of this kernel whose record is ``record_name``, if any."""
        return next((s for s in self.servers if s.record is not None and s.record.name == record_name), None)

    def comes_before(self, one: _Server, other: _Server) -> bool:
        """Whether ``one`` is earlier than ``other`` in ``mcp_servers`` (the order of ``servers``)."""
        return self.servers.index(one) < self.servers.index(other)

    def wait_first_attempts(self) -> None:
        """Wait for each server's first connection attempt, at most its own ``connect_timeout``."""
        for server in self.servers:
            deadline = self._started + server.cfg.connect_timeout
            server.first_attempt.wait(max(0.0, deadline - time.monotonic()))
            if not server.first_attempt.is_set():
                server.late(f"no answer within connect_timeout ({server.cfg.connect_timeout:g} s)")

    def close(self) -> None:
        """Stop every server (stdio processes end) and the loop thread; idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        if not self.thread.is_alive():
            return
        for server in self.servers:
            self.loop.call_soon_threadsafe(server.request_stop)
        deadline = time.monotonic() + CLOSE_TIMEOUT
        futures = [s.future for s in self.servers if s.future is not None]
        for future in futures:
            with contextlib.suppress(Exception):
                future.result(max(0.0, deadline - time.monotonic()))
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._cancel_rest(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    async def _cancel_rest(self) -> None:
        """Cancel what is still running on the loop (a server stuck in its shutdown, a call in flight)."""
        current = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not current]
        for task in rest:
            task.cancel()
        if rest:
            await asyncio.wait(rest, timeout=3)


class _Disconnected(Exception):
    """The transport of a connected server closed."""


class _Server:
    """One configured server: its connection task, its state, and its tool handlers."""

    def __init__(self, manager: _Manager, cfg: ServerConfig) -> None:
        self.manager = manager
        self.kernel = manager.kernel
        self.sdk = manager.sdk
        self.cfg = cfg
        self.name = cfg.name
        self.record: _Record | None = None
        self.ctx: PluginContext | None = None
        self.future: concurrent.futures.Future[None] | None = None
        self.first_attempt = threading.Event()
        self.session: Any = None
        self.state = "connecting"
        self.reason = ""
        self.attempt = 0
        self.registered: dict[str, dict[str, Any]] = {}  # kernel tool name -> schema
        self.offered: dict[str, str] = {}  # kernel tool name -> MCP tool name, of the last tools listed
        self.hidden = 0
        self._stopping = False
        self._stop_event: asyncio.Event | None = None
        self._wake: Any = None  # anyio.Event of the current connection
        self._closed_reason = ""
        self._connect_scope: Any = None
        self._stderr_from = 0
        self._up_since: float | None = None
        self._inflight: dict[asyncio.Task[Any], str] = {}  # call task -> why it was dropped
        self._sync_lock = threading.Lock()
        self.log_path = self.kernel.home / "logs" / f"mcp-{re.sub(_UNSAFE, '_', cfg.name)}.log"

    # -- the record ---------------------------------------------------------

    def setup(self, ctx: PluginContext) -> None:
        """The record's setup: keep the context; tools are registered once the server answers."""
        self.ctx = ctx

    def _publish(self) -> None:
        record = self.record
        if record is None:
            return
        if self.state == "up":
            hidden = f", {self.hidden} hidden by the tools filter" if self.hidden else ""
            record.description = f"{self.cfg.label}; {len(self.registered)} tool(s){hidden}"
            record.error = None
            record.enabled = True
            return
        record.enabled = False
        tools = f"; {len(self.registered)} tool(s) unavailable" if self.registered else ""
        record.description = f"{self.cfg.label}; not connected{tools}"
        record.error = f"MCP server '{self.name}' is not connected: {self.reason}; retrying in the background"

    def late(self, reason: str) -> None:
        """Called by :func:`load` when the first attempt is still running at its deadline."""
        if self.state == "connecting":
            self.reason = reason
            self.state = "down"
            self._publish()
            self.kernel.log.warning("mcp_server_unavailable", server=self.name, error=reason)

    # -- the connection task (runs on the manager's loop) ---------------------

    def request_stop(self) -> None:
        self._stopping = True
        if self._stop_event is not None:
            self._stop_event.set()
        if self._connect_scope is not None:
            self._connect_scope.cancel()
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Connect, serve until the transport closes, reconnect with backoff; until stopped."""
        tenacity = self.sdk.tenacity
        self._stop_event = asyncio.Event()
        if self._stopping:
            return
        try:
            while not self._stopping:
                retrying = tenacity.AsyncRetrying(
                    wait=tenacity.wait_exponential(multiplier=BACKOFF_FIRST, max=BACKOFF_MAX),
                    retry=tenacity.retry_if_exception(
                        lambda exc: isinstance(exc, Exception) and not self._stopping
                    ),
                    sleep=self._sleep,
                    before_sleep=self._before_sleep,
                    reraise=True,
                )
                try:
                    async for attempt in retrying:
                        with attempt:
                            await self._connect_once()
                except Exception:  # raised again only once stopping
                    break
        finally:
            self.session = None
            self.state = "stopped"
            self.first_attempt.set()

    async def _sleep(self, seconds: float) -> None:
        assert self._stop_event is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop_event.wait(), seconds)

    def _before_sleep(self, retry_state: Any) -> None:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        delay = retry_state.next_action.sleep if retry_state.next_action else 0
        self._fail(self._describe(exc), delay)

    def _down_early(self, reason: str) -> None:
        self.session = None
        self.state = "down"
        self.reason = reason
        self._publish()
        self.first_attempt.set()

    def _fail(self, reason: str, delay: float) -> None:
        was_up = self.state == "up"
        self.session = None
        self.state = "down"
        self.reason = reason
        self._publish()
        self.first_attempt.set()
        event = "mcp_server_down" if was_up else "mcp_server_unavailable"
        self.kernel.log.warning(
            event, server=self.name, error=reason, attempt=self.attempt, retry_in_s=round(delay, 2)
        )

    async def _connect_once(self) -> None:
        """One connection: returns when stopped or after a long-lived connection closed; else raises."""
        if self._stopping:
            return
        anyio = self.sdk.anyio
        self.attempt += 1
        self._closed_reason = ""
        wake = self._wake = anyio.Event()
        self._up_since = None
        try:
            await self._connection(wake)
        except BaseException as exc:
            # Calls still waiting on this connection will get no answer: end them now.
            self.session = None
            if not self._stopping:
                self._drop_calls(self._describe(exc) if isinstance(exc, Exception) else self._closed_reason)
            raise
        if self._stopping:
            return
        reason = self._closed_reason or "the connection closed"
        self._drop_calls(reason)
        if self._up_since is not None and time.monotonic() - self._up_since >= STABLE_AFTER:
            # A long-lived connection: report it, and reconnect at once with a fresh backoff.
            self._fail(reason, 0)
            return
        raise _Disconnected(reason)

    async def _connection(self, wake: Any) -> None:
        """Open the transport and the session, list the tools, and wait until stopped or closed."""
        anyio = self.sdk.anyio
        async with contextlib.AsyncExitStack() as stack:
            read, write = await self._open_transport(stack)
            # The session reads through a relay, so that the end of the transport's stream is seen.
            relay_send, relay_read = anyio.create_memory_object_stream(0)
            for stream in (read, write, relay_send, relay_read):  # closed even if no task got to them
                stack.callback(stream.close)
            relays = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(relays.cancel_scope.cancel)
            relays.start_soon(self._relay, read, relay_send, wake)
            session = await stack.enter_async_context(
                self.sdk.ClientSession(
                    relay_read,
                    write,
                    client_info=self.sdk.types.Implementation(name="hermes-kernel", version=_version()),
                )
            )
            tools: list[Any] | None = None
            try:
                with anyio.move_on_after(self.cfg.connect_timeout) as scope:
                    self._connect_scope = scope
                    if not self._stopping:
                        await session.initialize()
                        tools = await self._list_tools(session)
            except Exception as exc:
                if self._closed_reason:  # the process exited (or the stream closed) while starting
                    raise _Disconnected(self._closed_reason) from exc
                raise
            finally:
                self._connect_scope = None
            if self._stopping:
                return
            if tools is None:
                timeout = self.cfg.connect_timeout
                reason = self._closed_reason or f"no answer within connect_timeout ({timeout:g} s)"
                # Reported now: leaving the transport may take a few seconds (the process is ended).
                self._down_early(reason + self._stderr_hint())
                raise TimeoutError(self.reason)
            self._up_since = time.monotonic()
            self._ready(session, tools)
            await wake.wait()
            self.session = None

    async def _open_transport(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        cfg, sdk = self.cfg, self.sdk
        if cfg.transport == "stdio":
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            errlog = stack.enter_context(open(self.log_path, "a", encoding="utf-8"))  # noqa: SIM115
            self._stderr_from = errlog.tell()
            params = sdk.StdioServerParameters(command=cfg.command, args=cfg.args, env=cfg.env)
            read, write = await stack.enter_async_context(sdk.stdio_client(params, errlog=errlog))
            return read, write
        timeout = sdk.httpx.Timeout(cfg.connect_timeout, read=max(cfg.timeout + 30, 300.0))
        client = sdk.httpx.AsyncClient(headers=cfg.headers or None, timeout=timeout)
        await stack.enter_async_context(client)
        read, write, _session_id = await stack.enter_async_context(
            sdk.streamable_http_client(cfg.url, http_client=client)
        )
        return read, write

    async def _relay(self, source: Any, sink: Any, wake: Any) -> None:
        anyio = self.sdk.anyio
        try:
            async with sink:
                async for message in source:
                    await sink.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        finally:
            if not self._stopping and not self._closed_reason:
                what = (
                    "the server process exited" if self.cfg.transport == "stdio" else "the connection closed"
                )
                self._closed_reason = what + self._stderr_hint()
            wake.set()

    async def _list_tools(self, session: Any) -> list[Any]:
        tools: list[Any] = []
        cursor = None
        while True:
            params = self.sdk.types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.nextCursor
            if not cursor:
                return tools

    def _ready(self, session: Any, tools: list[Any]) -> None:
        self.session = session
        self.state = "up"
        self.reason = ""
        self._sync_tools(tools)
        self._publish()
        self.first_attempt.set()
        self.kernel.log.info("mcp_server_connected", server=self.name, tools=len(self.registered))

    def _stderr_hint(self) -> str:
        """The last line the stdio server wrote on stderr during this attempt, if any."""
        if self.cfg.transport != "stdio":
            return ""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                f.seek(self._stderr_from)
                lines = [line.strip() for line in f.read()[-4000:].splitlines() if line.strip()]
        except OSError:
            return ""
        return f"; its last line on stderr: {_clip(lines[-1], 200)}" if lines else ""

    def _describe(self, exc: BaseException | None) -> str:
        """A one-line reason for a failed or lost connection."""
        leaf = _leaf(exc)
        if leaf is None:
            return "unknown error"
        if isinstance(leaf, (_Disconnected, TimeoutError)) and str(leaf):
            return str(leaf)
        httpx = self.sdk.httpx
        if isinstance(leaf, FileNotFoundError) and self.cfg.transport == "stdio":
            return f"cannot start {self.cfg.command!r}: command not found"
        if isinstance(leaf, OSError) and self.cfg.transport == "stdio":
            return f"cannot start {self.cfg.command!r}: {leaf.strerror or leaf}"
        if isinstance(leaf, httpx.HTTPStatusError):
            return f"HTTP {leaf.response.status_code} from {_public_url(self.cfg.url)}"
        if isinstance(leaf, httpx.TransportError):
            return f"cannot reach {_public_url(self.cfg.url)}: {type(leaf).__name__}: {leaf}".rstrip(": ")
        if isinstance(leaf, self.sdk.McpError):
            return f"MCP error: {leaf.error.message}" + self._stderr_hint()
        text = str(leaf).strip()
        return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__

    # -- tools -------------------------------------------------------------

    def _sync_tools(self, tools: list[Any]) -> None:
        """Register the tools of this connection; drop those the server no longer offers."""
        ctx, record = self.ctx, self.record
        if ctx is None or record is None or self.manager.closed:
            return
        with self._sync_lock:
            by_name = {t.name: t for t in tools}
            kept = select_tools(list(by_name), self.cfg.include, self.cfg.exclude)
            self.hidden = len(by_name) - len(kept)
            wanted: dict[str, tuple[str, dict[str, Any]]] = {}
            for tool_name in kept:
                kname = kernel_tool_name(self.name, tool_name)
                if kname in wanted:
                    first = wanted[kname][0]
                    self._warn(
                        f"MCP tool '{tool_name}' skipped: '{first}' has the same kernel name '{kname}'"
                    )
                    continue
                wanted[kname] = (tool_name, tool_schema(kname, self.name, by_name[tool_name]))
            self.offered = {kname: tool_name for kname, (tool_name, _schema) in wanted.items()}
            for kname, schema in list(self.registered.items()):
                if kname not in wanted or wanted[kname][1] != schema:
                    self._unregister(kname)
            for kname, (tool_name, schema) in wanted.items():
                if kname in self.registered:
                    continue
                owner = self.kernel.tools.get(kname)
                if owner is not None and owner.plugin != record.name:
                    holder = self.manager.server_of(owner.plugin)
                    if holder is not None and self.manager.comes_before(self, holder):
                        # The earlier server in mcp_servers keeps a shared name, whichever connected first.
                        holder.yield_name(kname, self)
                    elif holder is not None:
                        self._warn(_lost(tool_name, kname, holder.name))
                        continue
                    else:
                        self._warn(
                            f"MCP tool '{tool_name}' skipped: plugin '{owner.plugin}' already has '{kname}'"
                        )
                        continue
                try:
                    ctx.register_tool(
                        kname,
                        f"mcp-{self.name}",
                        schema,
                        self._handler(tool_name),
                        description=schema["description"],
                    )
                except ToolRegistrationError as exc:
                    self._warn(f"MCP tool '{tool_name}' skipped: {exc}")
                    continue
                if kname in record.tools:
                    self.registered[kname] = schema
            if self.cfg.include is not None:
                for pattern in self.cfg.include:
                    if not any(fnmatch.fnmatchcase(n, pattern) for n in by_name):
                        self._warn(f"{_where(self.name, 'tools.include')}: {pattern!r} matches no tool")

    def yield_name(self, kname: str, winner: _Server) -> None:
        """Give tool ``kname`` up to ``winner``, a server earlier in ``mcp_servers``; say so on the record."""
        self._unregister(kname)
        self._warn(_lost(self.offered.get(kname, kname), kname, winner.name))

    def _unregister(self, kname: str) -> None:
        self.registered.pop(kname, None)
        self.kernel.tools.unregister(kname)
        if self.record is not None and kname in self.record.tools:
            self.record.tools.remove(kname)

    def _warn(self, text: str) -> None:
        if self.record is not None and text not in self.record.warnings:
            self.record.warnings.append(text)
            self.kernel.log.warning("mcp_tool", server=self.name, detail=text)

    def _handler(self, tool_name: str) -> Callable[..., str]:
        def handler(args: dict[str, Any], **_context: Any) -> str:
            return self.call(tool_name, args)

        handler.__name__ = f"mcp_{re.sub(_UNSAFE, '_', tool_name)}"
        return handler

    def call(self, tool: str, args: dict[str, Any]) -> str:
        """Call ``tool`` on the server (from any thread) and return the kernel's JSON text."""
        session = self.session
        if self.manager.closed:
            return _error(f"MCP server '{self.name}' is shut down", self.name, tool=tool)
        if session is None or self.state != "up":
            reason = self.reason or "still connecting"
            return _error(
                f"MCP server '{self.name}' is not connected ({reason}); it is being reconnected in the "
                "background, try again later",
                self.name,
                tool=tool,
            )
        timeout = self.cfg.timeout
        call = self._call(session, tool, args)
        try:
            future = asyncio.run_coroutine_threadsafe(call, self.manager.loop)
        except RuntimeError as exc:  # the loop is closed
            call.close()
            return _error(f"MCP server '{self.name}' is shut down ({exc})", self.name, tool=tool)
        try:
            result = future.result(timeout + 10)
        except TimeoutError:
            future.cancel()
            return _error(
                f"MCP server '{self.name}': '{tool}' did not answer within {timeout:g} s",
                self.name,
                tool=tool,
            )
        except concurrent.futures.CancelledError:
            return _error(
                f"MCP server '{self.name}' stopped during the call to '{tool}'", self.name, tool=tool
            )
        except _ServerLost as exc:
            return _error(
                f"MCP server '{self.name}' went away during the call to '{tool}' ({exc}); it is being "
                "reconnected in the background",
                self.name,
                tool=tool,
            )
        except _CallTimeout:
            return _error(
                f"MCP server '{self.name}': '{tool}' did not answer within its timeout ({timeout:g} s)",
                self.name,
                tool=tool,
            )
        except self.sdk.McpError as exc:
            return self._mcp_error(tool, session, exc)
        except Exception as exc:
            return _error(
                f"MCP server '{self.name}': the call to '{tool}' failed: {type(exc).__name__}: {exc}",
                self.name,
                tool=tool,
            )
        return result_json(self.name, tool, result)

    async def _call(self, session: Any, tool: str, args: dict[str, Any]) -> Any:
        task = asyncio.current_task()
        assert task is not None
        if session is not self.session:
            raise _ServerLost(self._closed_reason or "the connection closed")
        self._inflight[task] = ""
        try:
            return await asyncio.wait_for(session.call_tool(tool, args), self.cfg.timeout)
        except TimeoutError:
            raise _CallTimeout from None
        except asyncio.CancelledError:
            reason = self._inflight.get(task)
            if not reason:
                raise
            task.uncancel()
            raise _ServerLost(reason) from None
        finally:
            self._inflight.pop(task, None)

    def _drop_calls(self, reason: str) -> None:
        """End the calls still waiting on a connection that closed (on the loop)."""
        reason = reason or "the connection closed"
        for task in list(self._inflight):
            self._inflight[task] = reason
            task.cancel()

    def _mcp_error(self, tool: str, session: Any, exc: Any) -> str:
        code, message = exc.error.code, exc.error.message
        lost = code == self.sdk.types.CONNECTION_CLOSED or message == "Session terminated"
        if not lost:
            return _error(
                f"MCP server '{self.name}' refused the call to '{tool}': {message}", self.name, tool=tool
            )
        # The connection is gone: make the connection task notice now, and reconnect.
        reason = (
            "the server no longer knows this session (it restarted?)"
            if message == "Session terminated"
            else "the connection closed during a call"
        )
        self.manager.loop.call_soon_threadsafe(self._lost, session, reason)
        return _error(
            f"MCP server '{self.name}' went away during the call to '{tool}' ({reason}); it is being "
            "reconnected in the background",
            self.name,
            tool=tool,
        )

    def _lost(self, session: Any, reason: str) -> None:
        if self.session is session and self._wake is not None:
            if not self._closed_reason:
                self._closed_reason = reason
            self._wake.set()


class _CallTimeout(Exception):
    """A tool call that took longer than the server's ``timeout``."""


class _ServerLost(Exception):
    """A tool call whose connection closed before the answer came."""


def _lost(tool_name: str, kname: str, winner: str) -> str:
    return (
        f"MCP tool '{tool_name}' not registered: its kernel name '{kname}' is also a tool of server "
        f"'{winner}', which comes first in mcp_servers and keeps it (rename one server to keep both)"
    )


def _leaf(exc: BaseException | None) -> BaseException | None:
    """The most telling exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = inner[0] if inner else exc.exceptions[0]
    return exc


def _version() -> str:
    from ...hookspecs import __version__

    return __version__
