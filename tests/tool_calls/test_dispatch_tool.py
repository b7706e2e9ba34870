"""``ctx.dispatch_tool``: a plugin runs another plugin's tool through the whole pipeline.

Plugin ``caller`` keeps its ``ctx`` and offers the tool ``outer`` and the slash command ``/relay``;
both run another tool with ``ctx.dispatch_tool`` as described by their (JSON) argument:
``{"tool": name, "args": ..., "kw": {...}, "agent": {...}}``.  Plugin ``callee`` owns the tool
``inner``.  Plugin ``observer`` records every tool hook with all its keyword arguments in
``hook_sink.calls``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import run_json

from kernel import Kernel
from kernel.tools.decisions import ApprovalRequest

CALLER_CODE = """
import json
import types
import hook_sink

CTX = None

SCHEMA = {"description": "Run another tool.", "parameters": {"type": "object", "properties": {}}}


def relay_spec(spec):
    agent = types.SimpleNamespace(**spec["agent"]) if "agent" in spec else None
    return CTX.dispatch_tool(spec.get("tool", "inner"), spec.get("args"), parent_agent=agent,
                             **spec.get("kw", {}))


def outer(args, **kwargs):
    hook_sink.calls.append(("outer_handler", dict(kwargs)))
    inner_result = relay_spec(args)
    return json.dumps({"outer": True, "inner": json.loads(inner_result)})


def relay(raw):
    return relay_spec(json.loads(raw) if raw else {})


def register(ctx):
    global CTX
    CTX = ctx
    ctx.register_tool("outer", "demo", SCHEMA, outer)
    ctx.register_command("relay", relay, description="Run a tool from a command")
"""

CALLEE_CODE = """
import json
import hook_sink

SCHEMA = {"description": "Echo.", "parameters": {"type": "object", "properties": {}}}


def inner(args, **kwargs):
    hook_sink.calls.append(("inner_handler", dict(args), dict(kwargs)))
    return json.dumps({"inner_got": args})


def register(ctx):
    ctx.register_tool("inner", "demo", SCHEMA, inner)
"""

OBSERVER_CODE = """
import json
import hook_sink


def make(kind):
    def record(**kwargs):
        hook_sink.calls.append((kind, kwargs.get("tool_name"), dict(kwargs)))
        if kind == "transform" and kwargs.get("tool_name") == "inner":
            return json.dumps({"transformed": json.loads(kwargs["result"])})
    return record


def register(ctx):
    ctx.register_hook("pre_tool_call", make("pre"))
    ctx.register_hook("post_tool_call", make("post"))
    ctx.register_hook("transform_tool_result", make("transform"))
"""

BLOCKER_CODE = """
def pre(tool_name, **kwargs):
    if tool_name == "inner":
        return {"action": "block", "message": "inner is off limits"}


def register(ctx):
    ctx.register_hook("pre_tool_call", pre)
"""

ASKER_CODE = """
def pre(tool_name, **kwargs):
    if tool_name == "inner":
        return {"action": "approve", "message": "inner needs a yes"}


def register(ctx):
    ctx.register_hook("pre_tool_call", pre)
"""


def manifest(name: str, tools: tuple[str, ...] = (), hooks: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"name": name, "version": "0.1.0", "provides_tools": list(tools), "provides_hooks": list(hooks)}


@pytest.fixture
def plugins(plugin_dir: Callable[..., Path], sink: Any) -> Any:
    plugin_dir("caller", CALLER_CODE, manifest=manifest("caller", tools=("outer",)))
    plugin_dir("callee", CALLEE_CODE, manifest=manifest("callee", tools=("inner",)))
    plugin_dir(
        "observer",
        OBSERVER_CODE,
        manifest=manifest("observer", hooks=("pre_tool_call", "post_tool_call", "transform_tool_result")),
    )
    return sink


@pytest.fixture
def k(plugins: Any, make_kernel: Callable[..., Kernel]) -> Kernel:
    kernel = make_kernel()
    for name in ("caller", "callee", "observer"):
        assert kernel.plugin(name).enabled, kernel.plugin(name).error
    return kernel


def seen(sink: Any, kind: str, tool: str) -> list[dict[str, Any]]:
    """The keyword arguments hook ``kind`` (pre/post/transform) received for ``tool``."""
    return [c[2] for c in sink.calls if c[0] == kind and c[1] == tool]


def inner_runs(sink: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(c[1], c[2]) for c in sink.calls if c[0] == "inner_handler"]


# --------------------------------------------------------------------------- from a tool handler


def test_dispatch_tool_from_a_tool_runs_the_full_pipeline(k, plugins):
    spec = {"tool": "inner", "args": {"q": 1}}
    out = run_json(k.tools.dispatch("outer", spec, session_id="s1", task_id="t1"))
    # transform_tool_result replaced the inner result, and the caller saw the replacement
    assert out == {"outer": True, "inner": {"transformed": {"inner_got": {"q": 1}}}}
    assert [args for args, _ in inner_runs(plugins)] == [{"q": 1}]
    for kind in ("pre", "post", "transform"):
        calls = seen(plugins, kind, "inner")
        assert len(calls) == 1, (kind, plugins.calls)
        call = calls[0]
        assert call["caller_plugin"] == "caller"
        assert call["session_id"] == "s1"
        assert call["task_id"] == "t1"
        assert call["args"] == {"q": 1}
    post = seen(plugins, "post", "inner")[0]
    assert post["status"] == "ok"
    assert json.loads(post["result"]) == {"inner_got": {"q": 1}}
    # the outer call itself was made by the host, not by a plugin
    assert seen(plugins, "pre", "outer")[0].get("caller_plugin") is None


def test_inner_handler_receives_the_inherited_context(k, plugins):
    k.tools.dispatch("outer", {"tool": "inner", "args": {}}, session_id="s1", task_id="t1")
    [(_args, kwargs)] = inner_runs(plugins)
    assert kwargs["session_id"] == "s1"
    assert kwargs["task_id"] == "t1"
    assert kwargs["caller_plugin"] == "caller"


def test_a_blocking_plugin_blocks_the_nested_call(plugins, plugin_dir, make_kernel):
    plugin_dir("zblocker", BLOCKER_CODE, manifest=manifest("zblocker", hooks=("pre_tool_call",)))
    k = make_kernel()
    out = run_json(k.tools.dispatch("outer", {"tool": "inner", "args": {"q": 1}}, session_id="s1"))
    assert out == {"outer": True, "inner": {"error": "inner is off limits"}}
    assert inner_runs(plugins) == []
    # observers hear of the blocked nested call, marked blocked (issue 16, as in Hermes)
    assert [e["status"] for e in seen(plugins, "post", "inner")] == ["blocked"]
    # the outer call itself was not blocked
    assert len(seen(plugins, "post", "outer")) == 1


def test_nested_call_goes_through_approval_with_inherited_ids(plugins, plugin_dir, home, bundled):
    plugin_dir("asker", ASKER_CODE, manifest=manifest("asker", hooks=("pre_tool_call",)))
    requests: list[ApprovalRequest] = []

    def deny(request: ApprovalRequest) -> bool:
        requests.append(request)
        return False

    with Kernel(home=home, approver=deny) as k:
        k.load()
        out = run_json(k.tools.dispatch("outer", {"tool": "inner", "args": {"q": 2}}, session_id="s9"))
    assert len(requests) == 1
    assert requests[0].tool_name == "inner"
    assert requests[0].plugin == "asker"
    assert requests[0].args == {"q": 2}
    assert requests[0].session_id == "s9"
    assert "error" in out["inner"]
    assert "asker" in out["inner"]["error"]
    assert inner_runs(plugins) == []


def test_unknown_tool_is_a_json_error_not_an_exception(k, plugins):
    out = run_json(k.tools.dispatch("outer", {"tool": "no_such_tool", "args": {}}))
    assert set(out["inner"]) == {"error"}
    assert "no_such_tool" in out["inner"]["error"]
    caller = sys.modules[f"{k._namespace}.caller"]
    direct = run_json(caller.CTX.dispatch_tool("still_missing", {"a": 1}))
    assert "error" in direct
    assert "still_missing" in direct["error"]


def test_args_may_be_a_json_string(k, plugins):
    out = run_json(k.tools.dispatch("outer", {"tool": "inner", "args": '{"q": "text"}'}))
    assert out["inner"] == {"transformed": {"inner_got": {"q": "text"}}}
    assert [args for args, _ in inner_runs(plugins)] == [{"q": "text"}]


def test_explicit_kwargs_win_over_the_inherited_context(k, plugins):
    spec = {"tool": "inner", "args": {}, "kw": {"session_id": "explicit"}}
    k.tools.dispatch("outer", spec, session_id="s1", task_id="t1")
    [pre] = seen(plugins, "pre", "inner")
    assert pre["session_id"] == "explicit"
    assert pre["task_id"] == "t1"
    assert pre["caller_plugin"] == "caller"


def test_context_does_not_leak_after_the_nested_call(k, plugins):
    k.tools.dispatch("outer", {"tool": "inner", "args": {}}, session_id="s1", task_id="t1")
    plugins.calls.clear()
    k.tools.dispatch("inner", {})
    [pre] = seen(plugins, "pre", "inner")
    assert pre["session_id"] == ""  # hooks get "" for an id the call lacks, as in Hermes
    assert pre["task_id"] == ""
    assert pre.get("caller_plugin") is None
    [(_args, kwargs)] = inner_runs(plugins)
    assert kwargs.get("session_id") is None
    assert kwargs.get("caller_plugin") is None


# --------------------------------------------------------------------------- from a slash command


def test_dispatch_tool_from_a_slash_command(k, plugins):
    reply = k.commands.run('/relay {"tool": "inner", "args": {"n": 3}}', session_id="s2")
    assert reply is not None
    assert run_json(reply) == {"transformed": {"inner_got": {"n": 3}}}
    for kind in ("pre", "post", "transform"):
        [call] = seen(plugins, kind, "inner")
        assert call["caller_plugin"] == "caller"
        assert call["session_id"] == "s2"
        assert call["task_id"] == ""


def test_async_command_run_passes_the_context_too(k, plugins):
    reply = asyncio.run(k.commands.arun('/relay {"args": {"n": 4}}', session_id="s3", task_id="t3"))
    assert run_json(reply) == {"transformed": {"inner_got": {"n": 4}}}
    [pre] = seen(plugins, "pre", "inner")
    assert (pre["session_id"], pre["task_id"], pre["caller_plugin"]) == ("s3", "t3", "caller")


def test_blocking_plugin_blocks_a_call_from_a_command(plugins, plugin_dir, make_kernel):
    plugin_dir("zblocker", BLOCKER_CODE, manifest=manifest("zblocker", hooks=("pre_tool_call",)))
    k = make_kernel()
    reply = k.commands.run('/relay {"args": {"n": 3}}', session_id="s2")
    assert run_json(reply) == {"error": "inner is off limits"}
    assert inner_runs(plugins) == []


def test_context_does_not_leak_after_a_command(k, plugins):
    k.commands.run('/relay {"args": {}}', session_id="s2", task_id="t2")
    plugins.calls.clear()
    k.tools.dispatch("inner", {})
    [pre] = seen(plugins, "pre", "inner")
    assert pre["session_id"] == ""  # hooks get "" for an id the call lacks, as in Hermes
    assert pre["task_id"] == ""
    assert pre.get("caller_plugin") is None


# --------------------------------------------------------------------------- parent_agent


def test_parent_agent_supplies_session_and_task(k, plugins):
    reply = k.commands.run('/relay {"args": {}, "agent": {"session_id": "agent-s", "task_id": "agent-t"}}')
    assert "error" not in run_json(reply)
    [pre] = seen(plugins, "pre", "inner")
    assert (pre["session_id"], pre["task_id"], pre["caller_plugin"]) == ("agent-s", "agent-t", "caller")


def test_explicit_kwargs_win_over_parent_agent(k, plugins):
    spec = {"args": {}, "agent": {"session_id": "agent-s", "task_id": "agent-t"}, "kw": {"task_id": "mine"}}
    k.commands.run("/relay " + json.dumps(spec))
    [pre] = seen(plugins, "pre", "inner")
    assert pre["session_id"] == "agent-s"
    assert pre["task_id"] == "mine"


def test_parent_agent_outside_any_call(k, plugins):
    caller = sys.modules[f"{k._namespace}.caller"]
    agent = SimpleNamespace(session_id="bg-s", task_id="bg-t")
    out = run_json(caller.CTX.dispatch_tool("inner", {"z": 1}, parent_agent=agent))
    assert out == {"transformed": {"inner_got": {"z": 1}}}
    [pre] = seen(plugins, "pre", "inner")
    assert (pre["session_id"], pre["task_id"], pre["caller_plugin"]) == ("bg-s", "bg-t", "caller")
    plugins.calls.clear()
    # a parent agent without the attributes contributes nothing
    caller.CTX.dispatch_tool("inner", {}, parent_agent=object())
    [pre] = seen(plugins, "pre", "inner")
    assert pre["session_id"] == ""  # hooks get "" for an id the call lacks, as in Hermes
    assert pre["task_id"] == ""


def test_dispatch_tool_reaches_a_builtin_tool(plugins, plugin_dir, make_kernel):
    plugin_dir(
        "skilled",
        """
from pathlib import Path

def register(ctx):
    ctx.register_skill("howto", Path(__file__).parent / "skills" / "howto" / "SKILL.md")
""",
        files={"skills/howto/SKILL.md": "---\nname: howto\ndescription: How to.\n---\nStep one: relay.\n"},
    )
    k = make_kernel()
    assert k.plugin("skilled").enabled, k.plugin("skilled").error
    reply = k.commands.run(
        '/relay {"tool": "skill_view", "args": {"name": "skilled:howto"}}', session_id="s5"
    )
    out = run_json(reply)
    assert "Step one: relay." in out["content"]
    [pre] = seen(plugins, "pre", "skill_view")
    assert (pre["caller_plugin"], pre["session_id"]) == ("caller", "s5")
    assert len(seen(plugins, "post", "skill_view")) == 1
