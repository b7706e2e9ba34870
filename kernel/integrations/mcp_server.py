"""The kernel's tools as an MCP server: ``hermes-kernel mcp serve``, or :func:`serve_stdio` in a host.

One connection is one :class:`~kernel.host.HostSession` (``platform="mcp"``):
``on_session_start`` fires when the connection opens, before the first
request; ``tools/list`` answers the kernel's tools as they are now
(``k.tools.schemas()``: name, description, the parameters schema as
``inputSchema``); ``tools/call`` runs the kernel's whole tool pipeline
(``pre_tool_call`` guards, ``post_tool_call``, ``transform_tool_result``)
with the JSON-RPC request id as ``tool_call_id``, and answers one text
content holding the kernel's JSON string, ``isError`` when that is an error
object (a guard's block, an unknown tool, bad arguments, a failing handler).
The SDK does not check the arguments against the schema: the kernel does.
When the client closes the stream: ``on_session_end`` (completed) and
``on_session_finalize``.

Over stdio, stdout is the protocol's alone: :func:`reserved_stdio` keeps
file descriptors 0 and 1 for it and points them (and ``sys.stdout``) at
``/dev/null`` and stderr for everything else, so that what plugins print,
read, or let a child process inherit cannot corrupt the stream.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import queue
import sys
import threading
from collections.abc import Iterator
from io import TextIOWrapper
from typing import IO, TYPE_CHECKING, Any

try:
    import anyio
    from anyio.abc import ObjectReceiveStream, ObjectSendStream
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "kernel.integrations.mcp_server needs the MCP SDK: pip install 'hermes-kernel[mcp]'"
    ) from exc

from ..hookspecs import __version__
from ..host import HostSession
from ..tools import is_error_result

if TYPE_CHECKING:
    from .. import Kernel

__all__ = ["aserve", "aserve_stdio", "reserved_stdio", "serve_stdio"]

#: The ``platform`` the hooks are told.
PLATFORM = "mcp"
#: The name the server gives in its ``initialize`` answer.
SERVER_NAME = "hermes-kernel"
# At most this many calls' non-object arguments wait for their handler (a request that fails the
# SDK's validation after they were set aside never takes them).
_MAX_SET_ASIDE = 1024


class _NoSchemaWarning(logging.Filter):
    """Drops the SDK's warning that a call to a tool it never listed is not validated: the kernel, not
    the SDK, checks every call (and answers an unknown tool with an error)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Tool '%s' not listed")


logging.getLogger("mcp.server.lowlevel.server").addFilter(_NoSchemaWarning())


class _Tools:
    """A low-level MCP server answering ``tools/list`` and ``tools/call`` with the session's kernel's
    tools, each call dispatched through the session; and the arguments :class:`_Arguments` set aside."""

    def __init__(self, session: HostSession) -> None:
        self.session = session
        #: A call's arguments that are not a JSON object, by request id: the kernel, not the SDK, says why.
        self.set_aside: dict[Any, Any] = {}
        server: Server = Server(SERVER_NAME, version=__version__)
        server.list_tools()(self.list_tools)
        server.call_tool(validate_input=False)(self.call_tool)
        self.server = server

    async def list_tools(self) -> list[types.Tool]:
        return [_tool(schema.get("function") or {}) for schema in self.session.kernel.tools.schemas()]

    async def call_tool(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        request_id = self.server.request_context.request_id
        args = self.set_aside.pop(request_id, arguments)
        # Shielded: a call the client cancels, or one in flight when the stream ends, still runs its
        # hooks to the end (its handler would anyway) before the session ends.
        with anyio.CancelScope(shield=True):
            result = await self.session.adispatch(name, args, tool_call_id=str(request_id))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result)], isError=is_error_result(result)
        )


def _tool(function: dict[str, Any]) -> types.Tool:
    parameters = function.get("parameters")
    return types.Tool(
        name=str(function.get("name", "")),
        description=function.get("description") or None,
        inputSchema=parameters if isinstance(parameters, dict) else {"type": "object", "properties": {}},
    )


class _Arguments(ObjectReceiveStream[Any]):
    """The client's messages as they come, but for a ``tools/call`` whose ``arguments`` is not an object.

    The SDK would refuse such a request as invalid parameters; its arguments are
    set aside for the handler instead, so that the kernel answers (``arguments
    must be a JSON object``, or the object a JSON string holds), as an
    ``isError`` result.
    """

    def __init__(self, inner: ObjectReceiveStream[Any], set_aside: dict[Any, Any]) -> None:
        self._inner = inner
        self._set_aside = set_aside

    async def receive(self) -> Any:
        message = await self._inner.receive()
        if type(message) is SessionMessage:
            request = message.message.root
            if type(request) is types.JSONRPCRequest and request.method == "tools/call":
                params = request.params
                if isinstance(params, dict) and isinstance(params.get("name"), str):
                    value = params.get("arguments")
                    if value is not None and not isinstance(value, dict):
                        if len(self._set_aside) >= _MAX_SET_ASIDE:
                            self._set_aside.pop(next(iter(self._set_aside)))
                        self._set_aside[request.id] = value
                        request.params = {**params, "arguments": None}
        return message

    async def aclose(self) -> None:
        await self._inner.aclose()


async def aserve(
    kernel: Kernel,
    read_stream: ObjectReceiveStream[Any],
    write_stream: ObjectSendStream[Any],
    *,
    session_id: str | None = None,
) -> str:
    """Serve one MCP connection over the SDK's message streams (any transport) until the client's
    stream ends; returns the session's id.

    The session starts (``on_session_start``) before the first message is read
    and ends (``on_session_end``, ``on_session_finalize``) when the stream
    ends, or when serving is cancelled (``on_session_end`` then says
    ``completed=False, interrupted=True``).
    """
    session = HostSession(kernel, session_id=session_id, platform=PLATFORM)
    tools = _Tools(session)
    await session.astart()  # an MCP connection has no model turn to start it on
    completed = False
    try:
        await tools.server.run(
            _Arguments(read_stream, tools.set_aside),  # type: ignore[arg-type]  # the SDK's stream, wrapped
            write_stream,  # type: ignore[arg-type]  # the SDK's own stream, typed more loosely here
            tools.server.create_initialization_options(),
        )
        completed = True
    finally:
        with anyio.CancelScope(shield=True):
            await _close(session, completed=completed)
    return session.session_id


async def aserve_stdio(kernel: Kernel, *, session_id: str | None = None) -> str:
    """Serve MCP on this process's stdin and stdout until stdin ends (see :func:`reserved_stdio`);
    returns the session's id."""
    with reserved_stdio() as (stdin, stdout):
        reader = _Lines(TextIOWrapper(stdin, encoding="utf-8", errors="replace"))
        writer = anyio.wrap_file(TextIOWrapper(stdout, encoding="utf-8", newline="\n"))
        try:
            async with stdio_server(reader, writer) as (read_stream, write_stream):  # type: ignore[arg-type]
                return await aserve(kernel, read_stream, write_stream, session_id=session_id)
        finally:
            reader.close()


class _Lines:
    """The lines of a text file for the SDK's stdio transport, read by a daemon thread of their own.

    ``anyio.wrap_file`` reads on a worker thread the interpreter waits for at
    exit: after Ctrl-C the process would hang until one more line came.  Here
    a worker only waits on a queue, which :meth:`close` wakes.
    """

    def __init__(self, file: IO[str]) -> None:
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        threading.Thread(target=self._read, args=(file,), name="hermes-mcp-stdin", daemon=True).start()

    def _read(self, file: IO[str]) -> None:
        try:
            for line in iter(file.readline, ""):
                self._lines.put(line)
        finally:
            self._lines.put(None)

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await anyio.to_thread.run_sync(self._lines.get, abandon_on_cancel=True)
        if line is None:
            self._lines.put(None)  # the end, for any later reader too
            raise StopAsyncIteration
        return line

    def close(self) -> None:
        """Wake a reader still waiting (serving was cancelled)."""
        self._lines.put(None)


def serve_stdio(kernel: Kernel, *, session_id: str | None = None) -> str:
    """Serve the kernel's tools over MCP on stdin and stdout until the client closes stdin; returns the
    session's id.  What ``hermes-kernel mcp serve`` runs (see the module docstring)."""
    return anyio.run(functools.partial(aserve_stdio, kernel, session_id=session_id))


# -- the session's end ---------------------------------------------------------------------


async def _close(session: HostSession, *, completed: bool) -> None:
    """End the session: ``on_session_end`` (``completed`` when the client's stream ended, else
    interrupted), the context engine's session end, ``on_session_finalize`` with the session's id,
    ``session:end``."""
    await session.aclose("exit", completed=completed, interrupted=not completed)


# -- stdio kept for the protocol ------------------------------------------------------------

_reserved: tuple[IO[bytes], IO[bytes]] | None = None


@contextlib.contextmanager
def reserved_stdio() -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """Keep this process's stdin and stdout for a protocol while the block runs.

    Yields binary files on copies of file descriptors 0 and 1.  Meanwhile fd 1
    and ``sys.stdout`` are stderr, and fd 0 is ``/dev/null``: a plugin's
    ``print``, a write to fd 1, ``input()``, a child process inheriting them
    cannot touch the stream.  Enter it before loading the kernel to cover
    plugins' imports and ``register`` too.  Nests (an inner block yields the
    outer one's files); restores everything on exit.
    """
    global _reserved
    if _reserved is not None:
        yield _reserved
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    saved_stdout = sys.stdout
    sys.stdout = sys.stderr
    files = (os.fdopen(protocol_in, "rb", closefd=False), os.fdopen(protocol_out, "wb", closefd=False))
    _reserved = files
    try:
        yield files
    finally:
        _reserved = None
        for stream in (sys.stdout, sys.stderr, files[1]):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout = saved_stdout
        os.dup2(protocol_in, 0)
        os.dup2(protocol_out, 1)
        os.close(protocol_in)
        os.close(protocol_out)
