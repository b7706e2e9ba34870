"""``hermes-kernel mcp serve``: the kernel's tools over MCP on real stdio, driven by the ``mcp`` client SDK.

Every test but the in-process ones starts the venv's ``hermes-kernel mcp serve`` on a temporary home
with real plugin directories (and the checkout's bundled plugins, the calculator among them) and talks
to it with the SDK's ``ClientSession`` over the process's own stdin and stdout.  The transport here
keeps every line the server writes, so that a line that is not a JSON-RPC message (a plugin's print
that leaked onto stdout) fails the test, and lets a test write a raw request the SDK's client would
refuse to send.  Plugin ``probe`` writes what its hooks and tools see as JSON lines to a file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from conftest import REPO, cli_env, write_plugin
from mcp import ClientSession, types
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage

from kernel import Kernel
from kernel.integrations.mcp_server import aserve

SCRIPT = Path(sys.executable).parent / "hermes-kernel"
#: Seconds a test waits for the server (an answer, its exit): a guard against a hang, not a measure.
DEADLINE = 60

PROBE = """
import json
import os
import sys


def record(event, **data):
    line = json.dumps({"event": event, "pid": os.getpid(), **data}, default=str) + "\\n"
    fd = os.open(os.environ["MCP_TEST_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


ADD = {
    "description": "Add two integers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer", "description": "the first"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}
WRITE = {
    "description": "Write text into a file.",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
        "required": ["path", "text"],
    },
}
SLOW = {
    "description": "Wait for a word on a named pipe.",
    "parameters": {"type": "object", "properties": {"fifo": {"type": "string"}}, "required": ["fifo"]},
}


def add(args, **kw):
    return json.dumps({"sum": int(args["a"]) + int(args["b"])})


def write_file(args, **kw):
    record("write_file ran", path=args["path"])
    with open(args["path"], "w", encoding="utf-8") as f:
        f.write(args["text"])
    return json.dumps({"written": args["path"]})


def slow(args, **kw):
    print("probe: slow is waiting", file=sys.stderr, flush=True)
    with open(args["fifo"], encoding="utf-8") as f:
        word = f.read()
    record("slow ran", word=word)
    return json.dumps({"got": word})


def guard(tool_name, args, **kw):
    record("pre_tool_call", tool_name=tool_name, args=args, tool_call_id=kw.get("tool_call_id"),
           session_id=kw.get("session_id"), task_id=kw.get("task_id"))
    if tool_name == "write_file" and "forbidden" in str(args.get("path")):
        return {"action": "block", "message": "probe: that path is forbidden"}


def after(tool_name, status, **kw):
    record("post_tool_call", tool_name=tool_name, status=status, session_id=kw.get("session_id"))


def register(ctx):
    ctx.register_tool("add", "probe", ADD, add)
    ctx.register_tool("write_file", "probe", WRITE, write_file)
    ctx.register_tool("slow", "probe", SLOW, slow)
    ctx.register_hook("pre_tool_call", guard)
    ctx.register_hook("post_tool_call", after)
    ctx.register_hook("on_session_start", lambda **kw: record("on_session_start", **kw))
    ctx.register_hook("on_session_end", lambda **kw: record("on_session_end", **kw))
    ctx.register_hook("on_session_finalize", lambda **kw: record("on_session_finalize", **kw))
"""

NOISY = """
import json
import os
import subprocess
import sys

print("noisy: print at import")

EMPTY = {"description": "d", "parameters": {"type": "object", "properties": {}}}


def hook(**kw):
    print("noisy: print in a hook")


def shout(args, **kw):
    print("noisy: print in a handler")
    sys.stdout.write("noisy: sys.stdout.write in a handler\\n")
    sys.stdout.flush()
    print("noisy: sys.__stdout__ in a handler", file=sys.__stdout__, flush=True)
    os.write(1, b"noisy: os.write(1) in a handler\\n")
    subprocess.run([sys.executable, "-c", "print('noisy: a child process of a handler')"], check=True)
    return json.dumps({"shouted": True})


def slurp(args, **kw):
    child = subprocess.run(
        [sys.executable, "-c", "import sys; print(len(sys.stdin.read()))"],
        capture_output=True, text=True, check=True,
    )
    return json.dumps({"stdin": sys.stdin.read(), "child_read": int(child.stdout)})


def register(ctx):
    print("noisy: print in register")
    os.write(1, b"noisy: os.write(1) in register\\n")
    ctx.register_tool("shout", "noisy", EMPTY, shout)
    ctx.register_tool("slurp", "noisy", EMPTY, slurp)
    ctx.register_hook("pre_tool_call", hook)
"""


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def events(records: list[dict[str, Any]]) -> list[str]:
    return [r["event"] for r in records]


def only(records: list[dict[str, Any]], event: str) -> dict[str, Any]:
    (found,) = [r for r in records if r["event"] == event]
    return found


def error_of(result: types.CallToolResult) -> str:
    """The kernel's error message in an ``isError`` result (one text content holding ``{"error": ...}``)."""
    assert result.isError is True, result
    (content,) = result.content
    assert isinstance(content, types.TextContent)
    return json.loads(content.text)["error"]


def text_of(result: types.CallToolResult) -> str:
    (content,) = result.content
    assert isinstance(content, types.TextContent) and content.type == "text"
    return content.text


@pytest.fixture
def served_home(home: Path) -> Path:
    write_plugin(home / "plugins", "probe", PROBE)
    return home


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "records.jsonl"


class Connection:
    """A running ``hermes-kernel mcp serve`` and an SDK client session over its stdin and stdout."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.client: ClientSession = None  # type: ignore[assignment]  # set once connected
        self.initialized: types.InitializeResult | None = None
        self.lines: list[str] = []  # every line the server wrote on stdout
        self.garbage: list[str] = []  # the lines that were not JSON-RPC messages
        self.sent: list[tuple[str, Any]] = []  # (method, id) of every request written to the server
        self.stderr = bytearray()
        self.returncode: int | None = None
        self._stderr_grew = anyio.Event()
        self._raw: dict[str, Any] = {}
        self._stdin_lock = anyio.Lock()
        self._outgoing: Any = None  # the client's end of the stream to the server's stdin

    async def _write(self, message: types.JSONRPCMessage) -> None:
        root = message.root
        if isinstance(root, types.JSONRPCRequest):
            self.sent.append((root.method, root.id))
        data = message.model_dump_json(by_alias=True, exclude_none=True) + "\n"
        async with self._stdin_lock:
            await self.process.stdin.send(data.encode())  # type: ignore[union-attr]

    async def pump_stdin(self, outgoing: Any) -> None:
        async with outgoing:
            async for session_message in outgoing:
                await self._write(session_message.message)
        await self.process.stdin.aclose()  # type: ignore[union-attr]

    async def pump_stdout(self, incoming: Any) -> None:
        buffer = b""
        async with incoming:
            async for chunk in self.process.stdout:  # type: ignore[union-attr]
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                for raw_line in complete:
                    line = raw_line.decode(errors="replace")
                    self.lines.append(line)
                    try:
                        message = types.JSONRPCMessage.model_validate_json(line)
                    except ValueError:
                        self.garbage.append(line)
                        continue
                    waiter = self._raw.pop(getattr(message.root, "id", None), None)
                    if waiter is not None:
                        await waiter.send(message.root)
                    else:
                        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                            await incoming.send(SessionMessage(message))
        if buffer:
            self.lines.append(buffer.decode(errors="replace"))
            self.garbage.append(buffer.decode(errors="replace"))

    async def pump_stderr(self) -> None:
        async for chunk in self.process.stderr:  # type: ignore[union-attr]
            self.stderr.extend(chunk)
            self._stderr_grew.set()
            self._stderr_grew = anyio.Event()

    async def stderr_shows(self, marker: str) -> None:
        with anyio.fail_after(DEADLINE):
            while marker.encode() not in self.stderr:
                await self._stderr_grew.wait()

    def end_stream(self) -> None:
        """Close the server's stdin now, as the client does when it leaves."""
        self._outgoing.close()

    async def raw(self, request_id: str, method: str, params: dict[str, Any]) -> Any:
        """Write a request as given (the SDK's client would check it) and wait for its answer."""
        send, receive = anyio.create_memory_object_stream[Any](1)
        self._raw[request_id] = send
        message = types.JSONRPCMessage(
            types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=params)
        )
        await self._write(message)
        with anyio.fail_after(DEADLINE):
            return await receive.receive()

    def last_id(self, method: str) -> Any:
        return [i for m, i in self.sent if m == method][-1]


@contextlib.asynccontextmanager
async def connect(
    home: Path, record: Path, *args: str, sigint_ignored: bool = False, **env: str
) -> AsyncIterator[Connection]:
    """Start ``hermes-kernel mcp serve ARGS`` on ``home``, initialize an SDK client session with it; on
    leaving, close the session (the server's stdin ends) and wait for the process to exit.
    ``sigint_ignored``: the server starts with SIGINT ignored (``nohup``, some CI runners, editors)."""
    environ = cli_env(
        home, HERMES_BUNDLED_PLUGINS=str(REPO / "extensions"), MCP_TEST_RECORD=str(record), **env
    )
    # The server starts with the SIGINT disposition chosen here, whatever this process has (exec keeps an
    # ignored one, and the suite may run with SIGINT ignored: ``nohup make test &``).
    disposition = "SIG_IGN" if sigint_ignored else "SIG_DFL"
    reset = (
        f"import os, signal, sys; signal.signal(signal.SIGINT, signal.{disposition}); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    command = [sys.executable, "-c", reset, str(SCRIPT), "mcp", "serve", *args]
    process = await anyio.open_process(command, env=environ)
    conn = Connection(process)
    to_client_send, to_client = anyio.create_memory_object_stream[Any](16)
    from_client, from_client_receive = anyio.create_memory_object_stream[Any](16)
    conn._outgoing = from_client
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(conn.pump_stdout, to_client_send)
            tasks.start_soon(conn.pump_stdin, from_client_receive)
            tasks.start_soon(conn.pump_stderr)
            async with ClientSession(to_client, from_client, timedelta(seconds=DEADLINE)) as client:
                conn.client = client
                with anyio.fail_after(DEADLINE):
                    conn.initialized = await client.initialize()
                yield conn
            with anyio.fail_after(DEADLINE):
                conn.returncode = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def run(test: Callable[[], Any]) -> None:
    """Run the async ``test``; one that hangs fails after a deadline."""

    async def guarded() -> None:
        with anyio.fail_after(3 * DEADLINE):
            await test()

    anyio.run(guarded)


# --------------------------------------------------------------------------
# tools/list and tools/call
# --------------------------------------------------------------------------


def test_tools_list_gives_the_kernels_tools_with_their_schemas(
    served_home: Path, record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(REPO / "extensions"))
    monkeypatch.setenv("MCP_TEST_RECORD", str(record))
    with Kernel(home=served_home) as k:
        k.load()
        expected = [s["function"] for s in k.tools.schemas()]

    async def test() -> None:
        async with connect(served_home, record) as conn:
            assert conn.initialized is not None
            assert conn.initialized.serverInfo.name == "hermes-kernel"
            assert conn.initialized.capabilities.tools is not None
            listed = (await conn.client.list_tools()).tools
            assert [(t.name, t.description, t.inputSchema) for t in listed] == [
                (f["name"], f["description"], f["parameters"]) for f in expected
            ]
            names = [t.name for t in listed]
            assert {"add", "write_file", "slow", "calculate"} <= set(names)
        assert conn.returncode == 0

    run(test)


def test_a_call_answers_the_kernels_json_string_as_one_text_content(served_home: Path, record: Path) -> None:
    async def test() -> None:
        async with connect(served_home, record) as conn:
            added = await conn.client.call_tool("add", {"a": 2, "b": 40})
            assert added.isError is False
            assert text_of(added) == json.dumps({"sum": 42})
            add_id = conn.last_id("tools/call")
            calc = await conn.client.call_tool("calculate", {"expression": "2**16"})
            assert calc.isError is False and json.loads(text_of(calc))["result"] == 65536
            assert calc.structuredContent is None
        records = read_records(record)
        session_id = only(records, "on_session_start")["session_id"]
        pre = [r for r in records if r["event"] == "pre_tool_call"]
        assert [(r["tool_name"], r["args"]) for r in pre] == [
            ("add", {"a": 2, "b": 40}),
            ("calculate", {"expression": "2**16"}),
        ]
        assert pre[0]["tool_call_id"] == str(add_id)
        assert {(r["session_id"], r["task_id"]) for r in pre} == {(session_id, session_id)}
        post = [(r["tool_name"], r["status"]) for r in records if r["event"] == "post_tool_call"]
        assert post == [("add", "ok"), ("calculate", "ok")]

    run(test)


def test_the_mcp_request_id_reaches_pre_tool_call_as_tool_call_id(served_home: Path, record: Path) -> None:
    async def test() -> None:
        async with connect(served_home, record) as conn:
            sdk_ids = []
            for n in range(3):
                await conn.client.call_tool("add", {"a": n, "b": 1})
                sdk_ids.append(conn.last_id("tools/call"))
            answer = await conn.raw("call-7f3e", "tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})
            assert isinstance(answer, types.JSONRPCResponse) and answer.id == "call-7f3e"
            assert answer.result["content"] == [{"type": "text", "text": '{"sum": 2}'}]
        assert len(set(sdk_ids)) == 3
        pre = [r["tool_call_id"] for r in read_records(record) if r["event"] == "pre_tool_call"]
        assert pre == [*(str(i) for i in sdk_ids), "call-7f3e"]

    run(test)


def test_a_guards_block_is_an_error_result_and_the_handler_never_runs(
    served_home: Path, record: Path, tmp_path: Path
) -> None:
    forbidden, allowed = tmp_path / "forbidden.txt", tmp_path / "allowed.txt"

    async def test() -> None:
        async with connect(served_home, record) as conn:
            blocked = await conn.client.call_tool("write_file", {"path": str(forbidden), "text": "x"})
            assert "probe: that path is forbidden" in error_of(blocked)
            assert not forbidden.exists()
            written = await conn.client.call_tool("write_file", {"path": str(allowed), "text": "hello"})
            assert written.isError is False and json.loads(text_of(written)) == {"written": str(allowed)}
        assert allowed.read_text(encoding="utf-8") == "hello"
        records = read_records(record)
        assert [r["path"] for r in records if r["event"] == "write_file ran"] == [str(allowed)]
        post = [(r["tool_name"], r["status"]) for r in records if r["event"] == "post_tool_call"]
        assert post == [("write_file", "blocked"), ("write_file", "ok")]

    run(test)


def test_unknown_tools_and_bad_arguments_are_error_results_and_the_server_goes_on(
    served_home: Path, record: Path
) -> None:
    async def test() -> None:
        async with connect(served_home, record) as conn:
            client = conn.client
            assert "unknown tool 'nosuch'" in error_of(await client.call_tool("nosuch", {}))
            # Against the schema (a string for an integer, a missing required argument): the SDK lets
            # them through; the kernel runs the handler, whose failure is the error.
            wrong_type = error_of(await client.call_tool("add", {"a": "three", "b": 1}))
            assert "tool 'add' (plugin probe) failed: ValueError" in wrong_type
            assert "KeyError" in error_of(await client.call_tool("add", {"a": 1}))
            # Arguments that are not an object: the SDK would refuse the request; the kernel says why.
            for request_id, arguments, message in [
                ("raw-list", [1, 2], "arguments must be a JSON object, not list"),
                ("raw-number", 5, "arguments must be a JSON object, not int"),
                ("raw-text", "not json", "arguments are not valid JSON"),
            ]:
                answer = await conn.raw(request_id, "tools/call", {"name": "add", "arguments": arguments})
                assert isinstance(answer, types.JSONRPCResponse), answer
                assert answer.result["isError"] is True
                (content,) = answer.result["content"]
                assert message in json.loads(content["text"])["error"]
            # A JSON string holding the object is what a model writes: the kernel reads it.
            answer = await conn.raw(
                "raw-json", "tools/call", {"name": "add", "arguments": '{"a": 3, "b": 4}'}
            )
            assert answer.result == {"content": [{"type": "text", "text": '{"sum": 7}'}], "isError": False}
            still = await client.call_tool("add", {"a": 20, "b": 22})
            assert still.isError is False and text_of(still) == '{"sum": 42}'
            assert conn.process.returncode is None
        assert conn.returncode == 0 and conn.garbage == []
        # The handler never saw the calls the kernel refused: only the object arguments reached the tool.
        pre = [r["args"] for r in read_records(record) if r["event"] == "pre_tool_call"]
        assert pre == [{"a": "three", "b": 1}, {"a": 1}, {"a": 3, "b": 4}, {"a": 20, "b": 22}]

    run(test)


# --------------------------------------------------------------------------
# The session: one connection
# --------------------------------------------------------------------------


def test_the_session_starts_at_connect_and_ends_when_the_client_closes_the_stream(
    served_home: Path, record: Path
) -> None:
    async def test() -> None:
        async with connect(served_home, record) as conn:
            # Answered initialize: the session started before the first message was read.
            started = read_records(record)
            assert events(started) == ["on_session_start"]
            assert started[0]["platform"] == "mcp" and started[0]["model"] is None
            await conn.client.call_tool("add", {"a": 1, "b": 2})
            await conn.client.list_tools()
            assert "on_session_end" not in events(read_records(record))
        # Leaving closed the client's stream; the process exited on its own, with status 0.
        assert conn.returncode == 0
        records = read_records(record)
        assert events(records) == [
            "on_session_start",
            "pre_tool_call",
            "post_tool_call",
            "on_session_end",
            "on_session_finalize",
        ]
        session_id = records[0]["session_id"]
        assert session_id.startswith("session-")
        end, final = records[-2], records[-1]
        assert (end["session_id"], end["completed"], end["interrupted"], end["platform"]) == (
            session_id,
            True,
            False,
            "mcp",
        )
        assert (final["session_id"], final["reason"], final["platform"]) == (session_id, "exit", "mcp")
        assert len({r["pid"] for r in records}) == 1

    run(test)


@pytest.mark.parametrize(
    ("signum", "sigint_ignored"),
    [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGTERM, True)],
    ids=["SIGINT", "SIGTERM", "SIGTERM-with-SIGINT-ignored"],
)
def test_a_signal_ends_the_session_interrupted_and_the_process_exits(
    served_home: Path, record: Path, signum: int, sigint_ignored: bool
) -> None:
    async def test() -> None:
        async with connect(served_home, record, sigint_ignored=sigint_ignored) as conn:
            await conn.client.call_tool("add", {"a": 1, "b": 2})
            # The client still holds stdin open: only the signal ends the server.
            conn.process.send_signal(signum)
            with anyio.fail_after(DEADLINE):
                await conn.process.wait()
        assert conn.returncode == 130
        assert b"interrupted" in conn.stderr

    run(test)
    records = read_records(record)
    assert events(records) == [
        "on_session_start",
        "pre_tool_call",
        "post_tool_call",
        "on_session_end",
        "on_session_finalize",
    ]
    end = only(records, "on_session_end")
    assert (end["completed"], end["interrupted"]) == (False, True)
    assert only(records, "on_session_finalize")["session_id"] == records[0]["session_id"]


def test_session_id_names_the_session(served_home: Path, record: Path) -> None:
    async def test() -> None:
        async with connect(served_home, record, "--session-id", "editor-42") as conn:
            await conn.client.call_tool("add", {"a": 1, "b": 2})
        assert conn.returncode == 0

    run(test)
    records = read_records(record)
    assert {r["session_id"] for r in records} == {"editor-42"}
    assert only(records, "pre_tool_call")["task_id"] == "editor-42"


def test_a_call_in_flight_when_the_stream_ends_finishes_before_the_session_ends(
    served_home: Path, record: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "release"
    os.mkfifo(fifo)

    def release() -> None:
        with open(fifo, "w", encoding="utf-8") as f:
            f.write("go")

    async def test() -> None:
        async with connect(served_home, record) as conn, anyio.create_task_group() as tasks:

            async def call() -> None:
                # The stream ends before the answer: the SDK's client reports the closed connection.
                with contextlib.suppress(Exception):
                    await conn.client.call_tool("slow", {"fifo": str(fifo)})

            tasks.start_soon(call)
            await conn.stderr_shows("probe: slow is waiting")
            conn.end_stream()
            # The server's stdin has ended; only now does the handler get its word.
            await anyio.to_thread.run_sync(release)
        assert conn.returncode == 0

    run(test)
    assert events(read_records(record)) == [
        "on_session_start",
        "pre_tool_call",
        "slow ran",
        "post_tool_call",
        "on_session_end",
        "on_session_finalize",
    ]


def test_what_plugins_print_goes_to_stderr_and_the_stream_stays_clean(
    served_home: Path, record: Path
) -> None:
    write_plugin(served_home / "plugins", "noisy", NOISY)

    async def test() -> None:
        async with connect(served_home, record) as conn:
            for _ in range(2):
                shouted = await conn.client.call_tool("shout", {})
                assert shouted.isError is False and json.loads(text_of(shouted)) == {"shouted": True}
            # Reading stdin (the plugin, or a child process it starts) gets nothing of the protocol.
            slurped = await conn.client.call_tool("slurp", {})
            assert json.loads(text_of(slurped)) == {"stdin": "", "child_read": 0}
            assert text_of(await conn.client.call_tool("add", {"a": 1, "b": 1})) == '{"sum": 2}'
            assert {t.name for t in (await conn.client.list_tools()).tools} >= {"shout", "slurp", "add"}
        assert conn.returncode == 0
        assert conn.garbage == [] and conn.lines
        assert all(json.loads(line)["jsonrpc"] == "2.0" for line in conn.lines)
        stderr = conn.stderr.decode()
        for marker in (
            "noisy: print at import",
            "noisy: print in register",
            "noisy: os.write(1) in register",
            "noisy: print in a hook",
            "noisy: print in a handler",
            "noisy: sys.stdout.write in a handler",
            "noisy: sys.__stdout__ in a handler",
            "noisy: os.write(1) in a handler",
            "noisy: a child process of a handler",
        ):
            assert marker in stderr, marker
        assert stderr.count("noisy: print in a handler") == 2
        assert not any("noisy" in line for line in conn.lines)

    run(test)


def test_two_connections_are_two_sessions(served_home: Path, record: Path) -> None:
    async def test() -> None:
        async with connect(served_home, record) as one, connect(served_home, record) as two:
            for n in range(3):
                await one.client.call_tool("add", {"a": n, "b": 100})
                await two.client.call_tool("add", {"a": n, "b": 200})
        assert (one.returncode, two.returncode) == (0, 0)
        records = read_records(record)
        starts = {r["pid"]: r["session_id"] for r in records if r["event"] == "on_session_start"}
        assert len(starts) == 2 and len(set(starts.values())) == 2
        for pid, session_id in starts.items():
            mine = [r for r in records if r["pid"] == pid]
            assert {r["session_id"] for r in mine} == {session_id}
            assert events(mine)[-2:] == ["on_session_end", "on_session_finalize"]
        by_pid = {
            pid: [r["args"]["b"] for r in records if r["pid"] == pid and r["event"] == "pre_tool_call"]
            for pid in starts
        }
        assert sorted(by_pid.values()) == [[100] * 3, [200] * 3]

    run(test)


# --------------------------------------------------------------------------
# In process: serve_stdio's core over the SDK's in-memory streams
# --------------------------------------------------------------------------


def test_aserve_keeps_two_sessions_on_one_kernel_apart(
    make_kernel: Callable[..., Kernel],
    plugin_dir: Callable[..., Path],
    record: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    monkeypatch.setenv("MCP_TEST_RECORD", str(record))
    plugin_dir("probe", PROBE)
    k = make_kernel()
    served: list[str] = []

    async def connection(name: str, calls: int, ready: anyio.Event, both: anyio.Event) -> None:
        async with create_client_server_memory_streams() as (client_streams, server_streams):

            async def serve() -> None:
                served.append(await aserve(k, *server_streams, session_id=name))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(serve)
                async with ClientSession(*client_streams) as client:
                    await client.initialize()
                    ready.set()
                    await both.wait()  # both sessions are open before either calls
                    for n in range(calls):
                        result = await client.call_tool("add", {"a": n, "b": 0})
                        assert text_of(result) == json.dumps({"sum": n})
                    blocked = await client.call_tool("write_file", {"path": "forbidden", "text": ""})
                    assert "forbidden" in error_of(blocked)
                await client_streams[1].aclose()  # the client's end: the server's stream ends

    async def test() -> None:
        ready_a, ready_b, both = anyio.Event(), anyio.Event(), anyio.Event()
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(connection, "mcp-a", 2, ready_a, both)
                tasks.start_soon(connection, "mcp-b", 3, ready_b, both)
                await ready_a.wait()
                await ready_b.wait()
                both.set()

    run(test)
    assert sorted(served) == ["mcp-a", "mcp-b"]
    records = read_records(record)
    for name, calls in (("mcp-a", 2), ("mcp-b", 3)):
        mine = [r for r in records if r.get("session_id") == name]
        assert [r["event"] for r in mine if r["event"].startswith("on_session")] == [
            "on_session_start",
            "on_session_end",
            "on_session_finalize",
        ]
        assert [r["args"] for r in mine if r["event"] == "pre_tool_call"] == [
            *({"a": n, "b": 0} for n in range(calls)),
            {"path": "forbidden", "text": ""},
        ]
    assert not any(r["event"] == "write_file ran" for r in records)


GATED = """
import json
import hook_sink

SCHEMA = {"description": "Wait for the test's word.", "parameters": {"type": "object", "properties": {}}}


def gated(args, **kw):
    hook_sink.calls.append("gated started")
    hook_sink.started.set()
    hook_sink.gate.wait(60)
    hook_sink.calls.append("gated ran")
    return json.dumps({"released": True})


async def ended(**kw):  # awaited on the server's loop: recorded as soon as the session ends
    hook_sink.calls.append("on_session_end")


def register(ctx):
    ctx.register_tool("gated", "gated", SCHEMA, gated)
    ctx.register_hook("post_tool_call", lambda tool_name, **kw: hook_sink.calls.append("post_tool_call"))
    ctx.register_hook("on_session_end", ended)
    ctx.register_hook("on_session_finalize", lambda **kw: hook_sink.calls.append("on_session_finalize"))
"""


def test_aserve_ends_the_session_only_after_the_calls_in_flight(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], sink: ModuleType
) -> None:

    sink.started, sink.gate = threading.Event(), threading.Event()  # type: ignore[attr-defined]
    plugin_dir("gated", GATED)
    k = make_kernel()

    async def test() -> None:
        served = anyio.Event()
        async with (
            create_client_server_memory_streams() as (client_streams, server_streams),
            anyio.create_task_group() as tasks,
        ):

            async def serve() -> None:
                await aserve(k, *server_streams)
                served.set()

            tasks.start_soon(serve)
            async with ClientSession(*client_streams) as client, anyio.create_task_group() as calls:
                await client.initialize()
                calls.start_soon(client.call_tool, "gated", {})
                assert await anyio.to_thread.run_sync(sink.started.wait, DEADLINE)
                calls.cancel_scope.cancel()  # the client gives up on the answer, and leaves
            # The client left (its stream to the server ended) while the handler runs: once the
            # server has done all it can, the session is still open.
            await anyio.wait_all_tasks_blocked()
            seen.extend(sink.calls)
            sink.gate.set()
            await served.wait()

    seen: list[str] = []
    run(test)
    assert seen == ["gated started"]
    assert sink.calls == [
        "gated started",
        "gated ran",
        "post_tool_call",
        "on_session_end",
        "on_session_finalize",
    ]


ENGINE = """
import hook_sink
from kernel.providers import ContextEngine


class Watching(ContextEngine):
    @property
    def name(self):
        return "watching"

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False):
        return list(messages)

    def update_from_response(self, usage):
        pass

    def on_session_start(self, session_id, **kwargs):
        hook_sink.calls.append(("engine start", session_id))

    def on_session_end(self, session_id, messages):
        hook_sink.calls.append(("engine end", session_id, messages))


def finalize(session_id, **kw):
    hook_sink.calls.append(("finalize", session_id))


def register(ctx):
    ctx.register_context_engine(Watching())
    ctx.register_hook("on_session_finalize", finalize)
"""


def test_aserve_tells_the_context_engine_of_the_sessions_start_and_end(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], sink: ModuleType
) -> None:
    plugin_dir("watching", ENGINE)
    k = make_kernel({"context": {"engine": "watching"}})

    async def test() -> None:
        async with (
            create_client_server_memory_streams() as (client_streams, server_streams),
            anyio.create_task_group() as tasks,
        ):
            tasks.start_soon(lambda: aserve(k, *server_streams, session_id="mcp-engine"))
            async with ClientSession(*client_streams) as client:
                await client.initialize()
                sink.calls.append("connected")
                await client.list_tools()

    run(test)
    assert sink.calls == [
        ("engine start", "mcp-engine"),
        "connected",
        ("engine end", "mcp-engine", []),
        ("finalize", "mcp-engine"),
    ]


def test_reserved_stdio_keeps_fds_0_and_1_for_the_protocol_and_restores_them(tmp_path: Path) -> None:
    code = """
import os, subprocess, sys
from kernel.integrations.mcp_server import reserved_stdio
def ident(fd):
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino)
before = ident(0), ident(1), sys.stdout
with reserved_stdio() as (stdin, stdout):
    with reserved_stdio() as inner:
        assert inner == (stdin, stdout)
    assert ident(0) == ident(os.open(os.devnull, os.O_RDONLY)) and ident(1) == ident(2)
    print("inside: print")
    os.write(1, b"inside: fd 1\\n")
    subprocess.run([sys.executable, "-c", "print('inside: child')"], check=True)
    assert sys.stdin.read() == ""
    stdout.write(b"protocol: " + stdin.readline())
    stdout.flush()
assert (ident(0), ident(1), sys.stdout) == before
print("after: print", flush=True)
os.write(1, b"after: fd 1\\n")
"""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input="first line\n",
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "protocol: first line\nafter: print\nafter: fd 1\n"
    assert proc.stderr == "inside: print\ninside: fd 1\ninside: child\n"


# --------------------------------------------------------------------------
# Without the SDK
# --------------------------------------------------------------------------


def test_without_the_mcp_sdk_the_module_and_the_command_say_which_extra(home: Path, tmp_path: Path) -> None:
    blocked = "import sys\nsys.modules['mcp'] = None\n"
    module = subprocess.run(
        [sys.executable, "-c", blocked + "import kernel.integrations.mcp_server"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
        cwd=REPO,
    )
    assert module.returncode == 1
    assert (
        "ImportError: kernel.integrations.mcp_server needs the MCP SDK: pip install 'hermes-kernel[mcp]'"
        in module.stderr
    )
    command = subprocess.run(
        [sys.executable, "-c", blocked + "from kernel.cli import main\nsys.exit(main(['mcp', 'serve']))"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
        cwd=REPO,
        env=cli_env(home, HERMES_BUNDLED_PLUGINS=str(tmp_path)),
        stdin=subprocess.DEVNULL,
    )
    assert command.returncode == 2 and command.stdout == ""
    assert "error: kernel.integrations.mcp_server needs the MCP SDK" in command.stderr


def test_the_command_line_imports_the_server_only_to_serve(home: Path, tmp_path: Path) -> None:
    code = (
        "import sys\nfrom kernel.cli import main\nassert main(['mcp']) == 2\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'kernel.integrations'))))"
    )
    probe = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE, check=False, cwd=REPO
    )
    assert probe.returncode == 0, probe.stderr
    assert "serve" in probe.stdout and probe.stdout.splitlines()[-1] == "[]", probe.stdout
    helped = subprocess.run(
        [str(SCRIPT), "mcp", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
        env=cli_env(home, HERMES_BUNDLED_PLUGINS=str(tmp_path)),
    )
    assert helped.returncode == 0 and "--session-id" in helped.stdout
