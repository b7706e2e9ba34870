"""MCP servers from ``config.yaml``: real servers over stdio and Streamable HTTP, real processes.

The servers: tests/fixtures/mcp/server.py (written with the SDK's FastMCP), spawned over stdio and
served over HTTP on 127.0.0.1, and the reference filesystem server from npm (installed by
``make test-deps``).  Most tests share one kernel (``shared``) whose config declares every kind of
server at once, so that each server process is started once for the module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, REPO, cli_env, run_json, write_plugin
from ports import free_port

from kernel import Kernel
from kernel.surfaces import mcp as surface

SERVER = REPO / "tests" / "fixtures" / "mcp" / "server.py"
FS_SERVER = REPO / ".venv" / "node" / "node_modules" / ".bin" / "mcp-server-filesystem"
# The fixture's tools, but "same-name": its kernel name is the one of "same.name", so it is skipped.
FIXTURE_TOOLS = {
    "echo",
    "add",
    "getenv",
    "pid",
    "fail",
    "crash",
    "hang",
    "weird.name-v2",
    "header",
    "same.name",
}


def stdio(*extra: str, **settings: Any) -> dict[str, Any]:
    """A stdio entry running the fixture server with the venv's Python."""
    return {"command": sys.executable, "args": [str(SERVER), *extra], **settings}


def start_http_server(port: int = 0) -> tuple[subprocess.Popen[str], int]:
    """The fixture server over Streamable HTTP; returns the process and its port once it listens."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--transport", "http", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("PORT "), f"the HTTP fixture server did not start: {line!r}"
    return proc, int(line.split()[1])


def stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


def wait_for(predicate: Callable[[], Any], deadline: float = 30.0, every: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns something true (a generous deadline for a hang, not a timing)."""
    end = time.monotonic() + deadline
    while True:
        value = predicate()
        if value or time.monotonic() > end:
            return value
        time.sleep(every)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def record(k: Kernel, name: str) -> Any:
    return k.plugin(f"mcp:{name}")


# --------------------------------------------------------------------------- fixtures

AUDIT_PLUGIN = """
import json, os

LOG = os.path.join(os.path.dirname(__file__), "calls.jsonl")

def _write(entry):
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\\n")

def pre(tool_name, args, **kw):
    _write({"hook": "pre", "tool": tool_name, "args": args})
    if tool_name == "mcp__t__echo" and args.get("text") == "forbidden":
        return {"action": "block", "message": "echoing that is not allowed"}
    return None

def post(tool_name, status, result, **kw):
    _write({"hook": "post", "tool": tool_name, "status": status, "result": result})

def register(ctx):
    ctx.register_hook("pre_tool_call", pre)
    ctx.register_hook("post_tool_call", post)
"""


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """The fixture server over Streamable HTTP, once for the module; yields its URL."""
    proc, port = start_http_server()
    yield f"http://127.0.0.1:{port}/mcp"
    stop(proc)


@pytest.fixture(scope="module")
def fs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fs-allowed")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, http_server: str, fs_root: Path) -> Iterator[Kernel]:
    """One kernel with every kind of server (good, filtered, crashing, hanging, missing, bad, disabled)."""
    home = tmp_path_factory.mktemp("hermes")
    write_plugin(
        home / "plugins",
        "audit",
        AUDIT_PLUGIN,
        manifest={"name": "audit", "version": "0.1.0", "provides_hooks": ["pre_tool_call", "post_tool_call"]},
    )
    servers: dict[str, Any] = {
        "t": stdio(
            env={"GREETING": "hello ${MCP_TEST_GREETING}", "UNSET": "${MCP_TEST_NOT_SET}"},
            timeout=2,
            connect_timeout=30,
            tools={"exclude": ["head*"]},
        ),
        "crashy": stdio(connect_timeout=30, tools={"include": ["crash", "pid", "nothing_*"]}),
        "h": {
            "url": http_server,
            "headers": {"X-Token": "Bearer ${MCP_TEST_TOKEN}"},
            "connect_timeout": 30,
            "tools": {"include": ["echo", "head*"], "exclude": ["echo", "pid"]},
        },
        "slow": stdio("--hang-start", "3600", connect_timeout=1),
        "missing": {"command": "hermes-no-such-mcp-server", "connect_timeout": 30},
        "bad": {"command": "x", "url": "http://127.0.0.1:1/mcp"},
        "worse": {"command": sys.executable, "timeout": -1},
        "off": stdio(enabled=False),
    }
    if FS_SERVER.exists():
        servers["fs"] = {"command": str(FS_SERVER), "args": [str(fs_root)], "connect_timeout": 30}
    (home / "config.yaml").write_text(yaml.safe_dump({"mcp_servers": servers}), encoding="utf-8")
    empty = tmp_path_factory.mktemp("bundled")
    with pytest.MonkeyPatch.context() as mp:
        for name in ("HERMES_HOME", "HERMES_PLUGINS_DEBUG", "HERMES_ENABLE_PROJECT_PLUGINS"):
            mp.delenv(name, raising=False)
        mp.delenv("MCP_TEST_NOT_SET", raising=False)
        mp.setenv("HERMES_BUNDLED_PLUGINS", str(empty))
        mp.setenv("MCP_TEST_GREETING", "world")
        mp.setenv("MCP_TEST_TOKEN", "tok-123")
        k = Kernel(home=home)
        k.load()
    yield k
    k.shutdown()


def calls_log(k: Kernel) -> list[dict[str, Any]]:
    path = k.home / "plugins" / "audit" / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --------------------------------------------------------------------------- stdio and HTTP


def test_stdio_server_tools_are_registered_with_schemas(shared: Kernel) -> None:
    info = record(shared, "t")
    assert info.enabled and info.error is None and info.kind == "mcp-server"
    expected = {surface.kernel_tool_name("t", n) for n in FIXTURE_TOOLS - {"header"}}
    assert set(info.tools) == expected
    assert "mcp__t__weird_name_v2" in info.tools  # '.' and '-' became '_'
    assert (
        info.description.startswith("stdio: ")
        and "9 tool(s), 1 hidden by the tools filter" in info.description
    )
    skipped = "MCP tool 'same-name' skipped: 'same.name' has the same kernel name 'mcp__t__same_name'"
    assert skipped in info.warnings
    tool = shared.tools.get("mcp__t__add")
    assert tool is not None and tool.toolset == "mcp-t" and tool.plugin == "mcp:t"
    assert tool.schema["description"] == "Add two integers."
    assert tool.schema["parameters"]["required"] == ["a", "b"]
    assert tool.schema["parameters"]["properties"]["a"]["type"] == "integer"
    schemas = {s["function"]["name"] for s in shared.tools.schemas()}
    assert expected <= schemas


def test_stdio_calls_return_json(shared: Kernel) -> None:
    dispatch = shared.tools.dispatch
    assert run_json(dispatch("mcp__t__echo", {"text": "héllo"})) == {"result": "héllo"}
    assert run_json(dispatch("mcp__t__add", {"a": 2, "b": 40})) == {"result": 42}
    assert run_json(dispatch("mcp__t__weird_name_v2", "{}")) == {"result": '{"already": "json"}'}


def test_a_tool_error_becomes_an_error_json(shared: Kernel) -> None:
    out = run_json(shared.tools.dispatch("mcp__t__fail", {"message": "boom"}))
    assert "boom" in out["error"] and out["server"] == "t" and out["tool"] == "fail"
    bad_args = run_json(shared.tools.dispatch("mcp__t__add", {"a": "not a number"}))
    assert "error" in bad_args and "validation error" in bad_args["error"]


def test_env_is_interpolated_and_an_unset_variable_stays_literal_with_a_warning(shared: Kernel) -> None:
    assert run_json(shared.tools.dispatch("mcp__t__getenv", {"name": "GREETING"})) == {
        "result": "hello world"
    }
    assert run_json(shared.tools.dispatch("mcp__t__getenv", {"name": "UNSET"})) == {
        "result": "${MCP_TEST_NOT_SET}"
    }
    warnings = record(shared, "t").warnings
    assert any("'mcp_servers.t.env.UNSET'" in w and "${MCP_TEST_NOT_SET} is not set" in w for w in warnings)
    # Only the variables the config names reach the server, on top of a small safe baseline.
    assert run_json(shared.tools.dispatch("mcp__t__getenv", {"name": "MCP_TEST_TOKEN"})) == {"result": ""}


def test_http_server_with_interpolated_headers_and_filters(shared: Kernel, http_server: str) -> None:
    info = record(shared, "h")
    assert info.enabled and info.error is None
    # include wins over exclude: echo is kept; pid is not included at all.
    assert sorted(info.tools) == ["mcp__h__echo", "mcp__h__header"]
    assert info.description == f"http: {http_server}; 2 tool(s), 9 hidden by the tools filter"
    assert run_json(shared.tools.dispatch("mcp__h__echo", {"text": "over http"})) == {"result": "over http"}
    header = run_json(shared.tools.dispatch("mcp__h__header", {"name": "x-token"}))
    assert header == {"result": "Bearer tok-123"}
    assert "tok-123" not in json.dumps([p.to_dict() for p in shared.plugins])


def test_calls_go_through_the_tool_pipeline(shared: Kernel) -> None:
    blocked = run_json(shared.tools.dispatch("mcp__t__echo", {"text": "forbidden"}, session_id="s1"))
    assert blocked == {"error": "echoing that is not allowed"}
    ok = run_json(shared.tools.dispatch("mcp__t__echo", {"text": "fine"}, session_id="s1"))
    assert ok == {"result": "fine"}
    log = [e for e in calls_log(shared) if e["tool"] == "mcp__t__echo"]
    pre_texts = [e["args"]["text"] for e in log if e["hook"] == "pre"]
    assert "forbidden" in pre_texts and "fine" in pre_texts
    post_results = [e["result"] for e in log if e["hook"] == "post"]
    assert '{"result": "fine"}' in post_results
    assert not any("forbidden" in r for r in post_results), "a blocked call never reaches the server"


# --------------------------------------------------------------------------- failures


def test_config_problems_name_the_key_and_skip_only_that_server(shared: Kernel) -> None:
    problems = "\n".join(shared.problems)
    assert "config.yaml: 'mcp_servers.bad' has both 'command' (stdio) and 'url' (HTTP)" in problems
    assert "config.yaml: 'mcp_servers.worse.timeout' must be a positive number of seconds" in problems
    for name in ("bad", "worse"):
        info = record(shared, name)
        assert not info.enabled and f"'mcp_servers.{name}" in (info.error or "") and not info.tools
    assert record(shared, "t").enabled


def test_a_disabled_server_is_listed_and_not_started(shared: Kernel) -> None:
    info = record(shared, "off")
    assert not info.enabled and not info.tools
    assert info.error == "disabled via config.yaml (mcp_servers.off.enabled: false); not connected"
    assert not any(name.startswith("mcp__off__") for name in shared.tools.names())


def test_a_missing_command_is_reported_and_the_others_load(shared: Kernel) -> None:
    info = record(shared, "missing")
    assert not info.enabled and not info.tools
    assert "cannot start 'hermes-no-such-mcp-server': command not found" in (info.error or "")
    assert "retrying in the background" in (info.error or "")
    assert record(shared, "t").enabled and record(shared, "h").enabled


def test_a_server_that_hangs_at_start_does_not_block_the_others(shared: Kernel) -> None:
    # load() returned (the fixture exists) although 'slow' never answers initialize.
    info = record(shared, "slow")
    assert not info.enabled and not info.tools
    assert "no answer within connect_timeout (1 s)" in (info.error or "")
    assert "not connected" in info.description
    assert record(shared, "t").tools and record(shared, "h").tools


def test_a_hanging_call_returns_an_error_after_the_timeout(shared: Kernel) -> None:
    out = run_json(shared.tools.dispatch("mcp__t__hang", {"seconds": 120}))
    assert out["server"] == "t"
    assert out["error"] == "MCP server 't': 'hang' did not answer within its timeout (2 s)"
    # The server is still fine.
    assert run_json(shared.tools.dispatch("mcp__t__echo", {"text": "after"})) == {"result": "after"}


def test_a_server_that_crashes_mid_call_is_reported_and_reconnected(shared: Kernel) -> None:
    first_pid = run_json(shared.tools.dispatch("mcp__crashy__pid"))["result"]
    out = run_json(shared.tools.dispatch("mcp__crashy__crash"))
    assert out["server"] == "crashy"
    assert out["error"].startswith("MCP server 'crashy' went away during the call to 'crash'")
    assert "the server process exited" in out["error"]
    assert wait_for(lambda: not alive(first_pid), deadline=10), "the crashed process is still there"

    def back() -> Any:
        result = run_json(shared.tools.dispatch("mcp__crashy__pid"))
        return result if "result" in result else None

    again = wait_for(back, deadline=30, every=0.2)
    assert again, f"no reconnection: {record(shared, 'crashy').error}"
    assert again["result"] != first_pid
    info = record(shared, "crashy")
    assert info.enabled and info.error is None
    assert sorted(info.tools) == ["mcp__crashy__crash", "mcp__crashy__pid"]
    assert info.warnings == ["config.yaml: 'mcp_servers.crashy.tools.include': 'nothing_*' matches no tool"]


# --------------------------------------------------------------------------- the filesystem server (npm)


def test_the_reference_filesystem_server(shared: Kernel, fs_root: Path, tmp_path: Path) -> None:
    assert FS_SERVER.exists(), (
        f"{FS_SERVER.relative_to(REPO)} is missing: run `make test-deps` (it installs the reference MCP "
        "filesystem server from npm)"
    )
    info = record(shared, "fs")
    assert info.enabled, info.error
    for tool in ("read_text_file", "write_file", "list_directory", "list_allowed_directories"):
        assert f"mcp__fs__{tool}" in info.tools
    target = fs_root / "note.txt"
    written = run_json(
        shared.tools.dispatch("mcp__fs__write_file", {"path": str(target), "content": "hi mcp"})
    )
    assert "error" not in written, written
    assert target.read_text(encoding="utf-8") == "hi mcp"
    read = run_json(shared.tools.dispatch("mcp__fs__read_text_file", {"path": str(target)}))
    assert read == {"content": "hi mcp"}
    outside = tmp_path / "secret.txt"
    outside.write_text("no", encoding="utf-8")
    denied = run_json(shared.tools.dispatch("mcp__fs__read_text_file", {"path": str(outside)}))
    assert denied["server"] == "fs"
    assert "outside allowed directories" in denied["error"]


# --------------------------------------------------------------------------- own kernels


def test_shutdown_ends_the_server_processes_and_the_thread(make_kernel: Callable[..., Kernel]) -> None:
    before = set(threading.enumerate())
    k = make_kernel(config={"mcp_servers": {"one": stdio(connect_timeout=30)}})
    ours = [t for t in threading.enumerate() if t.name == "hermes-mcp" and t not in before]
    assert len(ours) == 1
    pid = run_json(k.tools.dispatch("mcp__one__pid"))["result"]
    assert alive(pid)
    k.shutdown()
    assert not alive(pid)
    assert not ours[0].is_alive()
    assert "mcp__one__pid" not in k.tools


def test_an_http_server_that_comes_up_late_and_restarts(make_kernel: Callable[..., Kernel]) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    k = make_kernel(config={"mcp_servers": {"late": {"url": url, "connect_timeout": 5, "timeout": 20}}})
    info = record(k, "late")
    assert not info.enabled and not info.tools
    assert f"cannot reach {url}" in (info.error or "")
    down = run_json(k.tools.dispatch("mcp__late__echo", {"text": "x"}))
    assert "unknown tool" in down["error"]  # nothing is known about its tools yet

    proc, _ = start_http_server(port)
    try:
        assert wait_for(lambda: record(k, "late").enabled, deadline=30), record(k, "late").error
        assert run_json(k.tools.dispatch("mcp__late__echo", {"text": "x"})) == {"result": "x"}
        stop(proc)
        gone = run_json(k.tools.dispatch("mcp__late__echo", {"text": "y"}))
        assert gone["server"] == "late" and "went away during the call to 'echo'" in gone["error"]
        assert wait_for(lambda: not record(k, "late").enabled, deadline=10)
        # While it is down, its tools stay and answer a clear error.
        waiting = run_json(k.tools.dispatch("mcp__late__echo", {"text": "z"}))
        assert waiting["error"].startswith("MCP server 'late' is not connected")
        proc, _ = start_http_server(port)

        def answered() -> Any:
            result = run_json(k.tools.dispatch("mcp__late__echo", {"text": "again"}))
            return result if "result" in result else None

        assert wait_for(answered, deadline=30, every=0.2) == {"result": "again"}
    finally:
        stop(proc)


def test_a_missing_sdk_is_a_config_problem(
    make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    k = make_kernel(config={"mcp_servers": {"one": stdio()}})
    hint = "pip install 'hermes-kernel[mcp]'"
    assert any(hint in p and "'mcp_servers'" in p for p in k.problems)
    info = record(k, "one")
    assert not info.enabled and hint in (info.error or "")


def test_a_section_that_is_not_a_mapping(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel(config={"mcp_servers": ["files"]})
    assert any("config.yaml: 'mcp_servers' must be a mapping" in p for p in k.problems)
    assert not [p for p in k.plugins if p.kind == "mcp-server"]


def test_a_server_name_yaml_reads_as_a_boolean(make_kernel: Callable[..., Kernel], home: Path) -> None:
    (home / "config.yaml").write_text("mcp_servers:\n  off:\n    command: x\n", encoding="utf-8")
    k = make_kernel()
    assert any("server named False" in p and "quote the name" in p for p in k.problems)
    assert not record(k, "False").enabled


def test_plugins_list_json_shows_the_servers(home: Path, bundled: Path) -> None:
    config = {
        "mcp_servers": {
            "good": stdio(connect_timeout=30, tools={"include": ["echo", "add"]}),
            "nope": {"command": "hermes-no-such-mcp-server"},
        }
    }
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    proc = subprocess.run(
        [*CLI, "plugins", "list", "--refresh", "--json"],
        env=cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    by_name = {p["name"]: p for p in json.loads(proc.stdout)}
    good, nope = by_name["mcp:good"], by_name["mcp:nope"]
    assert good["kind"] == "mcp-server" and good["enabled"] and good["error"] is None
    assert sorted(good["tools"]) == ["mcp__good__add", "mcp__good__echo"]
    assert "2 tool(s)" in good["description"]
    assert not nope["enabled"] and "command not found" in nope["error"]

    doctor = subprocess.run(
        [*CLI, "doctor", "--json"],
        env=cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    findings = json.loads(doctor.stdout)["findings"]
    assert any(f["subject"] == "'mcp:nope'" and f["level"] == "error" for f in findings), findings
    assert not any(f["subject"] == "'mcp:good'" and f["level"] == "error" for f in findings), findings


# --------------------------------------------------------------------------- pure functions


def test_parse_server_validation_messages() -> None:
    def problem(entry: Any) -> str:
        with pytest.raises(surface.ConfigProblem) as info:
            surface.parse_server("x", entry, {})
        return str(info.value)

    assert problem("npx thing").startswith("config.yaml: 'mcp_servers.x' must be a mapping")
    assert "needs 'command' (a stdio server) or 'url'" in problem({"timeout": 3})
    assert problem({"command": "a", "args": "b c"}).startswith(
        "config.yaml: 'mcp_servers.x.args' must be a list"
    )
    assert problem({"command": "a", "args": [{"k": 1}]}).startswith("config.yaml: 'mcp_servers.x.args[0]'")
    assert problem({"command": "a", "env": ["A=1"]}).startswith("config.yaml: 'mcp_servers.x.env' must map")
    assert problem({"url": "ftp://host/x"}).startswith("config.yaml: 'mcp_servers.x.url' must be an http")
    assert problem({"url": "http://h", "headers": "A: b"}).startswith("config.yaml: 'mcp_servers.x.headers'")
    assert problem({"command": "a", "connect_timeout": True}).startswith(
        "config.yaml: 'mcp_servers.x.connect_timeout'"
    )
    assert problem({"command": "a", "enabled": "maybe"}).startswith("config.yaml: 'mcp_servers.x.enabled'")
    assert problem({"command": "a", "tools": {"include": [1]}}).startswith(
        "config.yaml: 'mcp_servers.x.tools.include'"
    )
    assert "SSE servers are not supported" in problem({"url": "http://h/sse", "transport": "sse"})
    assert "'mcp_servers.x.transport' is 'http' but the entry has 'command'" in problem(
        {"command": "a", "transport": "http"}
    )


def test_parse_server_defaults_interpolation_and_warnings() -> None:
    env = {"TOKEN": "t0k", "DIR": "/data"}
    cfg = surface.parse_server(
        "files",
        {
            "command": "npx",
            "args": ["-y", "server", "${DIR}", "${env:DIR}/sub", 8080],
            "env": {"API_KEY": "${TOKEN}", "FLAG": True},
            "enabled": "yes",
            "auth": "oauth",
            "timout": 3,
        },
        env,
    )
    assert cfg.transport == "stdio" and cfg.enabled
    assert cfg.args == ["-y", "server", "/data", "/data/sub", "8080"]
    assert cfg.env == {"API_KEY": "t0k", "FLAG": "true"}
    assert cfg.timeout == surface.DEFAULT_TIMEOUT == 300
    assert cfg.connect_timeout == surface.DEFAULT_CONNECT_TIMEOUT == 60
    assert cfg.label == "stdio: npx -y server '${DIR}' '${env:DIR}/sub' 8080"  # raw: no interpolated secret
    assert "config.yaml: 'mcp_servers.files.auth' is not supported by hermes-kernel; ignored" in cfg.warnings
    assert any(
        "'mcp_servers.files.timout' is not a known key" in w and "'timeout'" in w for w in cfg.warnings
    )
    http = surface.parse_server(
        "web", {"url": "https://user:pw@host/mcp?key=${TOKEN}", "headers": {"Authorization": "${TOKEN}"}}, env
    )
    assert http.url == "https://user:pw@host/mcp?key=t0k" and http.headers == {"Authorization": "t0k"}
    assert http.label == "http: https://host/mcp"


def test_select_tools_include_wins_and_globs() -> None:
    names = ["read_file", "read_dir", "write_file", "delete"]
    assert surface.select_tools(names, None, []) == names
    assert surface.select_tools(names, None, ["write_*", "delete"]) == ["read_file", "read_dir"]
    assert surface.select_tools(names, ["read_*"], ["read_dir"]) == ["read_file", "read_dir"]
    assert surface.select_tools(names, [], ["delete"]) == []


def test_kernel_tool_names() -> None:
    assert surface.kernel_tool_name("my-files", "read.file v2") == "mcp__my_files__read_file_v2"
    long = surface.kernel_tool_name("server", "x" * 80)
    assert len(long) == 64 and long.startswith("mcp__server__xxx")
    assert long != surface.kernel_tool_name("server", "x" * 81)


def test_result_json_shapes() -> None:
    from mcp import types

    def result(*content: Any, structured: Any = None, error: bool = False) -> types.CallToolResult:
        return types.CallToolResult(content=list(content), structuredContent=structured, isError=error)

    text = types.TextContent(type="text", text="plain words")
    assert json.loads(surface.result_json("s", "t", result(text))) == {"result": "plain words"}
    as_json = types.TextContent(type="text", text='{"a": [1, 2]}')
    assert json.loads(surface.result_json("s", "t", result(as_json))) == {"a": [1, 2]}
    assert json.loads(surface.result_json("s", "t", result(text, structured={"n": 1}))) == {"n": 1}
    image = types.ImageContent(type="image", data="aGVsbG8=", mimeType="image/png")
    mixed = json.loads(surface.result_json("s", "t", result(text, image)))
    assert mixed == {
        "result": "plain words",
        "content": [{"type": "image", "mimeType": "image/png", "bytes": 5}],
    }
    failed = json.loads(surface.result_json("s", "t", result(text, error=True)))
    assert failed == {"error": "plain words", "server": "s", "tool": "t"}
    assert json.loads(surface.result_json("s", "t", result())) == {"result": ""}
