"""creedspace-hermes 0.1.0 through hermes-kernel: ``register_middleware`` and its constitution.

creedspace registers a ``tool_execution`` middleware that asks a Creed PDP
(policy decision point) before each tool runs and, in ``enforce`` mode,
returns a refusal instead of calling ``next_call``; its ``pre_llm_call`` adds
the constitution to the user's message.  The PDP here is a real HTTP server on
127.0.0.1 (the plugin's ``http`` backend); the tools are those of a small
directory plugin whose effect on the sandboxed cwd shows whether the handler ran.
"""

from __future__ import annotations

import json
import socket
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from local_server import LocalServer, Reply, Seen

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.testing import HookRecorder

PACKAGE = "creedspace-hermes"
API_KEY = "crd_test_compat"
HEADER = '<creed-space-constitution id="creed_agentic_default" rules="8" digest="a011ad8a"'
FILES_PLUGIN = """\
from pathlib import Path
import json


def _write(args, **kw):
    (Path.cwd() / args["path"]).write_text(args.get("content", ""), encoding="utf-8")
    return json.dumps({"written": args["path"]})


def _delete(args, **kw):
    (Path.cwd() / args["path"]).unlink()
    return json.dumps({"deleted": args["path"]})


def _schema(name):
    return {
        "name": name,
        "description": name,
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path"],
        },
    }


def register(ctx):
    ctx.register_tool(name="write_file", toolset="files", schema=_schema("write_file"), handler=_write)
    ctx.register_tool(name="delete_path", toolset="files", schema=_schema("delete_path"), handler=_delete)
"""


def decide(seen: Seen) -> Reply:
    """The PDP: DENY deletes, ALLOW everything else (HTTP 200 either way, as the SDK contract says)."""
    if seen.json["tool_name"] == "delete_path":
        return Reply(
            200,
            {
                "decision": "DENY",
                "reasons": ["rule 4: no destructive actions without consent"],
                "guidance": {"message": "Ask the user before deleting anything."},
            },
        )
    return Reply(200, {"decision": "ALLOW", "reasons": []})


@pytest.fixture(autouse=True)
def creed_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clean CREEDSPACE_* environment (the plugin reads it once, at its first call)."""
    for name in (
        "CREEDSPACE_CONSTITUTION_PATH",
        "CREEDSPACE_INJECT_MODE",
        "CREEDSPACE_INJECT_EVERY_TURN",
        "CREEDSPACE_PDP_MODE",
        "CREEDSPACE_PDP_BACKEND",
        "CREEDSPACE_PDP_COMMAND",
        "CREEDSPACE_PDP_HTTP_URL",
        "CREEDSPACE_PDP_API_KEY",
        "CREEDSPACE_CONSTITUTION_ID",
        "CREEDSPACE_PDP_TIMEOUT_S",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def pdp() -> Iterator[LocalServer]:
    with LocalServer(default=decide) as server:
        yield server


def enforce_with(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("CREEDSPACE_PDP_MODE", "enforce")
    monkeypatch.setenv("CREEDSPACE_PDP_BACKEND", "http")
    monkeypatch.setenv("CREEDSPACE_PDP_HTTP_URL", url)
    monkeypatch.setenv("CREEDSPACE_PDP_API_KEY", API_KEY)
    monkeypatch.setenv("CREEDSPACE_PDP_TIMEOUT_S", "2")


def write_files_plugin(home: Path) -> None:
    folder = home / "plugins" / "files"
    folder.mkdir(parents=True)
    manifest = {"name": "files", "version": "1.0.0", "provides_tools": ["write_file", "delete_path"]}
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    (folder / "__init__.py").write_text(textwrap.dedent(FILES_PLUGIN), encoding="utf-8")


def scripted(home: Path, turns: list[Any]) -> dict[str, Any]:
    path = home / "creed-script.yaml"
    path.write_text(yaml.safe_dump(turns, sort_keys=False), encoding="utf-8")
    return {"model": {"provider": "scripted", "script": str(path)}}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_loads_with_its_hooks_and_tool_execution_middleware(compat_kernel: Callable[..., Kernel]) -> None:
    k = compat_kernel(PACKAGE)
    info = k.plugin("creedspace")
    assert info.enabled and info.error is None and info.source == "entrypoint"
    assert info.hooks == ["on_session_start", "on_session_end", "pre_llm_call"]
    [middleware] = k.middleware.of("tool_execution")
    assert middleware.plugin == "creedspace" and middleware.fn.__name__ == "tool_execution"
    assert middleware.error is None


def test_enforce_mode_asks_the_pdp_and_runs_or_refuses_the_tool(
    compat_kernel: Callable[..., Kernel], hermes_home: Path, monkeypatch: pytest.MonkeyPatch, pdp: LocalServer
) -> None:
    enforce_with(monkeypatch, f"{pdp.base_url}/decide")
    write_files_plugin(hermes_home)
    k = compat_kernel(PACKAGE)
    recorder = HookRecorder().attach(k)
    cwd = Path.cwd()
    (cwd / "keep.txt").write_text("precious\n", encoding="utf-8")

    # ALLOW: the middleware called next_call, so the handler ran and its result came back unchanged.
    allowed = k.tools.dispatch("write_file", {"path": "notes.txt", "content": "hello"}, session_id="s1")
    assert json.loads(allowed) == {"written": "notes.txt"}
    assert (cwd / "notes.txt").read_text(encoding="utf-8") == "hello"

    # DENY: the middleware's refusal is the tool result; next_call never ran.
    refused = json.loads(k.tools.dispatch("delete_path", {"path": "keep.txt"}, session_id="s1"))
    assert refused == {
        "error": "blocked_by_creed_pdp",
        "tool": "delete_path",
        "decision": "DENY",
        "reasons": ["rule 4: no destructive actions without consent"],
        "message": "Ask the user before deleting anything.",
    }
    assert (cwd / "keep.txt").read_text(encoding="utf-8") == "precious\n"

    # The PDP saw each call's tool name and arguments, with the bearer key.
    seen = pdp.posts()
    assert [(s.path, s.json) for s in seen] == [
        ("/v1/decide", {"tool_name": "write_file", "arguments": {"path": "notes.txt", "content": "hello"}}),
        ("/v1/decide", {"tool_name": "delete_path", "arguments": {"path": "keep.txt"}}),
    ]
    assert all(s.headers["authorization"] == f"Bearer {API_KEY}" for s in seen)
    # The refusal is an ordinary result to the rest of the pipeline, not a failure.
    assert [c["status"] for c in recorder.of("post_tool_call")] == ["ok", "ok"]
    assert k.middleware.of("tool_execution")[0].error is None
    assert k.plugin("creedspace").warnings == []


def test_enforce_fails_closed_when_the_pdp_is_unreachable(
    compat_kernel: Callable[..., Kernel], hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    enforce_with(monkeypatch, f"http://127.0.0.1:{closed_port()}/v1/decide")
    write_files_plugin(hermes_home)
    k = compat_kernel(PACKAGE)
    result = json.loads(k.tools.dispatch("write_file", {"path": "x.txt", "content": "x"}))
    assert result["error"] == "blocked_by_creed_pdp"
    assert result["decision"] == "pdp_unavailable"
    assert not (Path.cwd() / "x.txt").exists()
    # A clean failure: the middleware returned a refusal, it did not raise, and it stays enabled.
    assert k.middleware.of("tool_execution")[0].error is None
    assert k.plugin("creedspace").warnings == []


def test_enforce_without_a_pdp_refuses_every_tool(
    compat_kernel: Callable[..., Kernel], hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CREEDSPACE_PDP_MODE", "enforce")
    write_files_plugin(hermes_home)
    k = compat_kernel(PACKAGE)
    result = json.loads(k.tools.dispatch("write_file", {"path": "y.txt", "content": "y"}))
    assert result["error"] == "blocked_by_creed_pdp"
    assert result["decision"] == "pdp_unconfigured"
    assert result["reasons"] == [
        "CREEDSPACE_PDP_COMMAND is required for the mcp-stdio backend in enforce mode"
    ]
    assert not (Path.cwd() / "y.txt").exists()


def test_advisory_mode_asks_but_always_runs_the_tool(
    compat_kernel: Callable[..., Kernel], hermes_home: Path, monkeypatch: pytest.MonkeyPatch, pdp: LocalServer
) -> None:
    enforce_with(monkeypatch, f"{pdp.base_url}/decide")
    monkeypatch.setenv("CREEDSPACE_PDP_MODE", "advisory")
    write_files_plugin(hermes_home)
    (Path.cwd() / "old.txt").write_text("x", encoding="utf-8")
    k = compat_kernel(PACKAGE)
    assert json.loads(k.tools.dispatch("delete_path", {"path": "old.txt"})) == {"deleted": "old.txt"}
    assert not (Path.cwd() / "old.txt").exists()
    assert [s.json["tool_name"] for s in pdp.posts()] == ["delete_path"]


def test_constitution_is_added_to_the_user_message_and_tools_pass_in_off_mode(
    compat_kernel: Callable[..., Kernel], hermes_home: Path
) -> None:
    write_files_plugin(hermes_home)
    turns = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "A"}}]},
        "Wrote it.",
        "Second answer.",
    ]
    k = compat_kernel(PACKAGE, config=scripted(hermes_home, turns))
    recorder = HookRecorder().attach(k)
    with AgentSession(k, session_id="creed-session") as session:
        first = session.run("Write a.txt please.")
        second = session.run("And now?")

    # First turn: the full constitution, appended to the user's message the model was sent.
    assert first.context.startswith(HEADER)
    assert (
        "## Reversibility First" in first.context and "## The Operator Can Always Intervene" in first.context
    )
    assert first.context.endswith("</creed-space-constitution>")
    sent = recorder.of("pre_api_request")[0]["request_messages"]
    assert sent[-1] == {"role": "user", "content": f"Write a.txt please.\n\n{first.context}"}
    assert HEADER not in sent[0]["content"]  # never the system prompt
    # Every run ends with on_session_end, where the plugin forgets the session (as under Hermes,
    # which fires it at the end of each run too): the next turn carries the constitution again.
    assert second.context == first.context
    assert second.reply == "Second answer."
    assert [c["is_first_turn"] for c in recorder.of("pre_llm_call")] == [True, False]
    # Two pre_llm_call in a row for one session: the second gets the short reminder.
    kwargs = {
        "session_id": "direct",
        "task_id": None,
        "turn_id": "t1",
        "user_message": "hi",
        "conversation_history": [],
        "model": "scripted",
        "platform": "cli",
        "parent_session_id": None,
        "sender_id": None,
    }
    assert k.pre_llm_context(**kwargs, is_first_turn=True) == first.context
    reminder = k.pre_llm_context(**kwargs, is_first_turn=False)
    assert reminder.startswith("<creed-space-constitution") and 'mode="reminder"' in reminder
    assert len(reminder) < len(first.context) / 2
    # PDP mode off (the default): the middleware passed the call through to the handler.
    assert json.loads(first.tool_calls[0].result) == {"written": "a.txt"}
    assert (Path.cwd() / "a.txt").read_text(encoding="utf-8") == "A"
    assert k.plugin("creedspace").hook_errors == {}
