"""acp-hermes 0.3.2 through hermes-kernel: ``pre_tool_call`` block and approve, local metering.

ACP asks its governance API (``POST {ACP_API_BASE}/govern/tool-use``) about
every tool call and turns the answer into a Hermes decision: ``deny`` → block,
``ask`` → approve (the host's approver decides).  The API here is a real HTTP
server on 127.0.0.1; the tools are those of a small directory plugin written by
the test, whose effect (a file written or removed in the sandboxed cwd) shows
whether the handler ran.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from local_server import LocalServer, Reply, Seen

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.tools.decisions import ApprovalRequest

PACKAGE = "acp-hermes"
TOKEN = "gsk_test_compat"
FILES_PLUGIN = """\
from pathlib import Path
import json


def _write(args, **kw):
    target = Path.cwd() / args["path"]
    target.write_text(args.get("content", ""), encoding="utf-8")
    return json.dumps({"written": args["path"], "bytes": target.stat().st_size})


def _delete(args, **kw):
    target = Path.cwd() / args["path"]
    target.unlink()
    return json.dumps({"deleted": args["path"]})


def _schema(name, **props):
    return {
        "name": name,
        "description": name,
        "parameters": {
            "type": "object",
            "properties": {p: {"type": t} for p, t in props.items()},
            "required": ["path"],
        },
    }


def register(ctx):
    ctx.register_tool(
        name="write_file", toolset="files", schema=_schema("write_file", path="string", content="string"),
        handler=_write,
    )
    ctx.register_tool(
        name="delete_path", toolset="files", schema=_schema("delete_path", path="string"), handler=_delete
    )
"""


def policy(seen: Seen) -> Reply:
    """The governance API: deny deletes, ask about writes, allow the rest."""
    if seen.path == "/govern/tool-output":
        return Reply(200, {})
    tool = seen.json.get("tool_name")
    if tool == "delete_path":
        return Reply(200, {"decision": "deny", "reason": "no deletes"})
    if tool == "write_file":
        return Reply(200, {"decision": "ask", "reason": "writes need a human"})
    return Reply(200, {"decision": "allow"})


@pytest.fixture
def acp_api() -> Iterator[LocalServer]:
    with LocalServer(base_path="", default=policy) as server:
        yield server


@pytest.fixture
def acp_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, acp_api: LocalServer) -> Path:
    """Token and API base set (never the public host); the metering database in the tmp dir."""
    monkeypatch.setenv("ACP_API_BASE", acp_api.root)
    monkeypatch.setenv("ACP_BEARER_TOKEN", TOKEN)
    db = tmp_path / "acp-local.db"
    monkeypatch.setenv("ACP_LOCAL_DB", str(db))
    monkeypatch.delenv("ACP_LOCAL_METERING", raising=False)
    monkeypatch.delenv("ACP_SHADOW", raising=False)
    return db


def write_files_plugin(home: Path) -> None:
    folder = home / "plugins" / "files"
    folder.mkdir(parents=True)
    (folder / "plugin.yaml").write_text(
        yaml.safe_dump(
            {"name": "files", "version": "1.0.0", "provides_tools": ["write_file", "delete_path"]}
        ),
        encoding="utf-8",
    )
    (folder / "__init__.py").write_text(textwrap.dedent(FILES_PLUGIN), encoding="utf-8")


def scripted(home: Path, turns: list[Any]) -> dict[str, Any]:
    path = home / "acp-script.yaml"
    path.write_text(yaml.safe_dump(turns, sort_keys=False), encoding="utf-8")
    return {"model": {"provider": "scripted", "script": str(path)}}


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_loads_with_its_governance_and_metering_hooks(compat_kernel: Callable[..., Kernel]) -> None:
    k = compat_kernel(PACKAGE)
    info = k.plugin("acp")
    assert info.enabled and info.error is None and info.source == "entrypoint"
    assert info.hooks == ["pre_tool_call", "post_tool_call", "post_api_request", "post_llm_call"]
    assert info.tools == [] and info.commands == []


def test_deny_blocks_and_ask_goes_to_the_kernel_approver_in_a_real_turn(
    compat_kernel: Callable[..., Kernel], hermes_home: Path, acp_api: LocalServer, acp_env: Path
) -> None:
    write_files_plugin(hermes_home)
    cwd = Path.cwd()
    (cwd / "keep.txt").write_text("precious\n", encoding="utf-8")
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return request.args["path"] == "allowed.txt"

    turns = [
        {
            "tool_calls": [
                {"name": "delete_path", "arguments": {"path": "keep.txt"}},
                {"name": "write_file", "arguments": {"path": "refused.txt", "content": "no"}},
                {"name": "write_file", "arguments": {"path": "allowed.txt", "content": "yes"}},
                {"name": "calculate", "arguments": {"expression": "6*7"}},
            ]
        },
        "Done what I was allowed to.",
    ]
    k = compat_kernel(PACKAGE, config=scripted(hermes_home, turns), approver=approver)
    assert k.plugin("files").enabled

    with AgentSession(k, session_id="acp-session") as session:
        turn = session.run("Tidy up the workspace.")
    results = {(c.name, json.loads(c.arguments).get("path")): json.loads(c.result) for c in turn.tool_calls}

    # deny → blocked with ACP's message; the handler did not run and nobody was asked.
    assert results[("delete_path", "keep.txt")] == {"error": "[ACP] Denied by policy: no deletes"}
    assert (cwd / "keep.txt").read_text(encoding="utf-8") == "precious\n"

    # ask → the kernel's approver, once per write, with ACP's message and rule key.
    assert [r.args for r in asked] == [
        {"path": "refused.txt", "content": "no"},
        {"path": "allowed.txt", "content": "yes"},
    ]
    for request in asked:
        assert request.tool_name == "write_file"
        assert request.plugin == "acp"
        assert request.message == "[ACP] Approval required: writes need a human"
        assert request.rule_key == "acp:write_file"
        assert request.session_id == "acp-session"
    assert results[("write_file", "refused.txt")] == {
        "error": "tool call to 'write_file' was not approved (asked by plugin 'acp'): "
        "[ACP] Approval required: writes need a human"
    }
    assert not (cwd / "refused.txt").exists()
    assert results[("write_file", "allowed.txt")] == {"written": "allowed.txt", "bytes": 3}
    assert (cwd / "allowed.txt").read_text(encoding="utf-8") == "yes"

    # allow → the tool ran, no approval asked.
    assert json.loads(turn.tool_calls[3].result)["result"] == 42
    assert turn.reply == "Done what I was allowed to."

    # What ACP's API saw: one PreToolUse and one PostToolUse per call.
    seen = acp_api.posts()
    pre = [s for s in seen if s.path == "/govern/tool-use"]
    post = [s for s in seen if s.path == "/govern/tool-output"]
    assert [(s.json["tool_name"], s.json.get("call_id")) for s in pre] == [
        ("delete_path", "call_1"),
        ("write_file", "call_2"),
        ("write_file", "call_3"),
        ("calculate", "call_4"),
    ]
    for s in pre:
        assert s.headers["authorization"] == f"Bearer {TOKEN}"
        assert s.headers["x-gs-client"] == "hermes-plugin/0.3.2"
        assert s.json["hook_event_name"] == "PreToolUse"
    assert pre[0].json["tool_input"] == {"path": "keep.txt"}
    # Hermes fires post_tool_call for a blocked call too (status "blocked"), and ACP reports and meters
    # it as such: every call reaches PostToolUse, the blocked ones with the block as their output.
    assert [(s.json["tool_name"], s.json["call_id"]) for s in post] == [
        ("delete_path", "call_1"),
        ("write_file", "call_2"),
        ("write_file", "call_3"),
        ("calculate", "call_4"),
    ]
    assert json.loads(post[0].json["tool_output"]) == {"error": "[ACP] Denied by policy: no deletes"}
    assert json.loads(post[2].json["tool_output"]) == {"written": "allowed.txt", "bytes": 3}
    assert all("pre_lapse" not in s.json for s in post)  # every call had its pre check
    assert rows(acp_env, "select tool_name, status from tool_calls order by id") == [
        ("delete_path", "blocked"),
        ("write_file", "blocked"),
        ("write_file", "ok"),
        ("calculate", "ok"),
    ]

    assert k.plugin("acp").hook_errors == {}


def test_local_metering_of_a_real_turn(
    compat_kernel: Callable[..., Kernel], hermes_home: Path, monkeypatch: pytest.MonkeyPatch, acp_env: Path
) -> None:
    """Metering needs no token: model calls, tool runs and turns go to the local SQLite store."""
    monkeypatch.delenv("ACP_BEARER_TOKEN")
    turns = [{"tool_calls": [{"name": "calculate", "arguments": {"expression": "6*7"}}]}, "It is 42."]
    k = compat_kernel(PACKAGE, config=scripted(hermes_home, turns))
    with AgentSession(k, session_id="metered") as session:
        turn = session.run("What is 6*7?")
    assert turn.reply == "It is 42."

    assert rows(acp_env, "select tool_name, status, session_id from tool_calls") == [
        ("calculate", "ok", "metered")
    ]
    calls = rows(
        acp_env, "select model, provider, api_mode, input_tokens, session_id from model_calls order by id"
    )
    assert [(m, p, a, s) for m, p, a, _, s in calls] == [("scripted", "scripted", "scripted", "metered")] * 2
    assert all(tokens > 0 for _, _, _, tokens, _ in calls)
    # system, user, assistant (tool call), tool result, assistant
    assert rows(acp_env, "select session_id, message_count from turns") == [("metered", 5)]
    assert k.plugin("acp").hook_errors == {}
    # What Hermes passes on post_api_request and ACP stores: the finish reason of each call.
    assert rows(acp_env, "select finish_reason from model_calls order by id") == [("tool_calls",), ("stop",)]


def test_an_unreachable_api_fails_open_and_cleanly(
    compat_kernel: Callable[..., Kernel],
    hermes_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    acp_env: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ACP_API_BASE", f"http://127.0.0.1:{closed_port()}")
    write_files_plugin(hermes_home)
    asked: list[ApprovalRequest] = []
    k = compat_kernel(PACKAGE, approver=lambda r: asked.append(r) or False)
    assert k.plugin("acp").enabled

    result = json.loads(
        k.tools.dispatch("write_file", {"path": "out.txt", "content": "hi"}, tool_call_id="t1")
    )
    assert result == {"written": "out.txt", "bytes": 2}
    assert (Path.cwd() / "out.txt").read_text(encoding="utf-8") == "hi"
    assert asked == []
    err = capfd.readouterr().err
    assert "[ACP] gateway unreachable" in err and "failing open" in err
    # Its hooks returned normally: nothing disabled, nothing logged as a failure.
    info = k.plugin("acp")
    assert info.hook_errors == {} and info.disabled_hooks == []
    log = hermes_home / "logs" / "agent.log"
    assert "hook_failed" not in (log.read_text(encoding="utf-8") if log.exists() else "")
    assert rows(acp_env, "select tool_name from tool_calls") == [("write_file",)]


def test_without_a_token_it_asks_nobody_and_sends_nothing(
    compat_kernel: Callable[..., Kernel],
    hermes_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    acp_api: LocalServer,
    acp_env: Path,
) -> None:
    monkeypatch.delenv("ACP_BEARER_TOKEN")
    assert not (Path.home() / ".acp" / "credentials").exists()
    write_files_plugin(hermes_home)
    k = compat_kernel(PACKAGE, approver=lambda r: pytest.fail(f"approver asked: {r}"))
    (Path.cwd() / "gone.txt").write_text("x", encoding="utf-8")
    result = json.loads(k.tools.dispatch("delete_path", {"path": "gone.txt"}))
    assert result == {"deleted": "gone.txt"}
    assert not (Path.cwd() / "gone.txt").exists()
    assert acp_api.seen == []
    # Metering needs no token: the run is still recorded locally.
    assert rows(acp_env, "select tool_name, status from tool_calls") == [("delete_path", "ok")]
