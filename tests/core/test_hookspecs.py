"""The hook contract: one test per hookspec, fired through a real kernel, plus meta-tests.

Every ``test_hook_<name>`` loads real plugin directories that register a
callback for ``<name>`` and fires the hook the way the host does: tool hooks
through ``k.tools.dispatch``, ``pre_llm_call`` through ``k.pre_llm_context``,
provider slot hooks through ``k.load()``, the rest through ``k.invoke_hook``
with the spec's full set of arguments.  The meta-tests at the end make sure
no hookspec lacks such a test, a docs entry or a complete docstring.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import REPO, run_json

from kernel import Kernel, hookspecs
from kernel.providers.slots import REPLACING_SLOTS

# The hooks the issue names; the kernel may not define fewer.
ISSUE_HOOKS = (
    "pre_tool_call",
    "post_tool_call",
    "pre_llm_call",
    "post_llm_call",
    "on_session_start",
    "on_session_end",
    "on_session_finalize",
    "on_session_reset",
    "transform_tool_result",
    "transform_llm_output",
    "pre_api_request",
    "post_api_request",
    "api_request_error",
    "subagent_start",
    "subagent_stop",
    "pre_gateway_dispatch",
    "register_model_providers",
    "register_memory_providers",
    "register_context_engines",
    "register_image_gen_providers",
)

TOOL_CONTEXT = {
    "task_id": "task-1",
    "session_id": "sess-1",
    "tool_call_id": "call-1",
    "turn_id": "turn-1",
    "api_request_id": "req-1",
}
# What every tool hook gets besides the call's ids, as in Hermes (no tool_request middleware here).
OBSERVER_FIELDS = {"telemetry_schema_version": "hermes.observer.v1", "middleware_trace": []}
# What every hook's callbacks get, as in Hermes (a callback that takes **kwargs or names it).
OBSERVER_FIELDS_OF_EVERY_HOOK = {"telemetry_schema_version": "hermes.observer.v1"}


def spec_names() -> list[str]:
    """Every hookspec of kernel.hookspecs, found with pluggy's own marker parsing."""
    import pluggy

    pm = pluggy.PluginManager("hermes")
    return sorted(name for name in vars(hookspecs) if pm.parse_hookspec_opts(hookspecs, name))


def spec_args(hook: str) -> list[str]:
    return list(inspect.signature(getattr(hookspecs, hook)).parameters)


def manifest(name: str, hooks: tuple[str, ...] = (), tools: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"name": name, "version": "0.1.0", "provides_hooks": list(hooks), "provides_tools": list(tools)}


def recorder(hook: str, answer: Any = None) -> str:
    """Plugin code: a Hermes callback for ``hook`` recording its kwargs and returning ``answer``."""
    return f"""
import hook_sink

def register(ctx):
    def on_hook(**kwargs):
        hook_sink.calls.append((ctx.name, {hook!r}, kwargs))
        return {answer!r}
    ctx.register_hook({hook!r}, on_hook)
"""


def native_recorder(hook: str, arg: str, answer: Any = None) -> str:
    """Plugin code: a pluggy-native ``@hookimpl`` for ``hook`` declaring only ``arg``."""
    return f"""
import hook_sink
from kernel import hookimpl

@hookimpl
def {hook}({arg}):
    hook_sink.calls.append(("native", {hook!r}, {{{arg!r}: {arg}}}))
    return {answer!r}
"""


def fire_with_full_args(
    hook: str,
    kwargs: dict[str, Any],
    plugin_dir: Callable[..., Path],
    make_kernel: Callable[..., Kernel],
    sink: types.ModuleType,
    answer: Any = "seen",
) -> list[Any]:
    """Fire ``hook`` through ``k.invoke_hook`` with every spec argument; check what callbacks got."""
    assert sorted(kwargs) == sorted(spec_args(hook)), "the test must pass the spec's full argument set"
    plugin_dir("a_hermes", recorder(hook, answer), manifest=manifest("a_hermes", (hook,)))
    last = spec_args(hook)[-1]
    plugin_dir("b_native", native_recorder(hook, last), manifest=manifest("b_native", (hook,)))
    k = make_kernel()
    assert k.plugin("a_hermes").enabled, k.plugin("a_hermes").error
    assert k.plugin("b_native").enabled, k.plugin("b_native").error
    assert hook in k.hook_names
    results = k.invoke_hook(hook, **kwargs)
    # Every hook's callbacks also get Hermes' observer schema version (a callback taking **kwargs).
    assert sink.calls == [
        ("a_hermes", hook, {**kwargs, **OBSERVER_FIELDS_OF_EVERY_HOOK}),
        ("native", hook, {last: kwargs[last]}),
    ]
    assert results == [answer]
    assert k.plugin("a_hermes").disabled_hooks == []
    return results


# --------------------------------------------------------------------------
# Tool hooks, through k.tools.dispatch
# --------------------------------------------------------------------------

TOOLBOX = """
import json
import time
import hook_sink

SCHEMA = {
    "name": "probe",
    "description": "Echo the arguments back, or fail on request.",
    "parameters": {
        "type": "object",
        "properties": {"value": {"type": "string"}, "fail": {"type": "boolean"}, "sleep": {"type": "number"}},
    },
}

def probe(args, **kwargs):
    hook_sink.calls.append(("handler", "probe", dict(args)))
    if args.get("sleep"):
        time.sleep(args["sleep"])
    if args.get("fail"):
        raise ValueError("probe was told to fail")
    return json.dumps({"echo": args.get("value")})

def register(ctx):
    ctx.register_tool("probe", "toolbox", SCHEMA, probe)
"""


def tool_setup(plugin_dir: Callable[..., Path]) -> None:
    plugin_dir("toolbox", TOOLBOX, manifest=manifest("toolbox", tools=("probe",)))


def test_hook_pre_tool_call(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    tool_setup(plugin_dir)
    plugin_dir(
        "gate",
        """
        import hook_sink

        def register(ctx):
            def gate(**kwargs):
                hook_sink.calls.append(("gate", "pre_tool_call", kwargs))
                value = kwargs["args"].get("value")
                if value == "forbidden":
                    return {"action": "block", "message": "forbidden by gate"}
                if value == "vetoed":
                    return {"decision": "block", "reason": "vetoed by gate"}
                return None
            ctx.register_hook("pre_tool_call", gate)
        """,
        manifest=manifest("gate", ("pre_tool_call",)),
    )
    k = make_kernel()

    assert run_json(k.tools.dispatch("probe", {"value": "fine"}, **TOOL_CONTEXT)) == {"echo": "fine"}
    gate_call = sink.calls[0]
    assert gate_call == (
        "gate",
        "pre_tool_call",
        {"tool_name": "probe", "args": {"value": "fine"}, **TOOL_CONTEXT, **OBSERVER_FIELDS},
    )
    assert sorted(gate_call[2]) == sorted(spec_args("pre_tool_call"))
    assert sink.calls[1] == ("handler", "probe", {"value": "fine"})

    sink.calls.clear()
    assert run_json(k.tools.dispatch("probe", {"value": "forbidden"}, **TOOL_CONTEXT)) == {
        "error": "forbidden by gate"
    }
    assert run_json(k.tools.dispatch("probe", '{"value": "vetoed"}', **TOOL_CONTEXT)) == {
        "error": "vetoed by gate"
    }
    assert [c[0] for c in sink.calls] == ["gate", "gate"]  # the handler never ran
    assert k.plugin("gate").disabled_hooks == []


def test_hook_post_tool_call(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    tool_setup(plugin_dir)
    plugin_dir("watcher", recorder("post_tool_call"), manifest=manifest("watcher", ("post_tool_call",)))
    plugin_dir(
        "blocker",
        """
        def register(ctx):
            def gate(args, **kwargs):
                if args.get("value") == "stop":
                    return {"action": "block", "message": "stopped"}
            ctx.register_hook("pre_tool_call", gate)
        """,
        manifest=manifest("blocker", ("pre_tool_call",)),
    )
    k = make_kernel()

    ok = k.tools.dispatch("probe", {"value": "v", "sleep": 0.02}, **TOOL_CONTEXT)
    assert run_json(ok) == {"echo": "v"}
    posts = [c for c in sink.calls if c[1] == "post_tool_call"]
    assert len(posts) == 1
    plugin, _, got = posts[0]
    assert plugin == "watcher"
    assert sorted(got) == sorted(spec_args("post_tool_call"))
    assert got["tool_name"] == "probe"
    assert got["args"] == {"value": "v", "sleep": 0.02}
    assert run_json(got["result"]) == {"echo": "v"}
    assert type(got["duration_ms"]) is int
    assert got["duration_ms"] >= 19  # the handler slept 20 ms
    assert got["status"] == "ok"
    assert got["error_type"] is None
    assert got["error_message"] is None
    assert {key: got[key] for key in TOOL_CONTEXT} == TOOL_CONTEXT

    sink.calls.clear()
    failed = run_json(k.tools.dispatch("probe", {"fail": True}, **TOOL_CONTEXT))
    assert "probe" in failed["error"]
    posts = [c for c in sink.calls if c[1] == "post_tool_call"]
    assert len(posts) == 1
    got = posts[0][2]
    assert got["status"] == "error"
    assert got["error_type"] == "ValueError"
    assert "probe was told to fail" in got["error_message"]
    assert type(got["duration_ms"]) is int and got["duration_ms"] >= 0
    assert run_json(got["result"]) == failed

    # A blocked call fires post_tool_call too (issue 16, as Hermes does), marked blocked.
    sink.calls.clear()
    assert run_json(k.tools.dispatch("probe", {"value": "stop"}, **TOOL_CONTEXT)) == {"error": "stopped"}
    posts = [c for c in sink.calls if c[1] == "post_tool_call"]
    assert len(posts) == 1
    got = posts[0][2]
    assert (got["status"], got["error_type"], got["error_message"]) == ("blocked", "plugin_block", "stopped")
    assert got["duration_ms"] == 0 and run_json(got["result"]) == {"error": "stopped"}


def test_hook_transform_tool_result(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    tool_setup(plugin_dir)
    plugin_dir(
        "a_observer",
        recorder("transform_tool_result"),
        manifest=manifest("a_observer", ("transform_tool_result",)),
    )
    plugin_dir(
        "b_rewriter",
        """
        import json

        def register(ctx):
            def rewrite(tool_name, args, result, status):
                if args.get("value") == "json":
                    return json.dumps({"rewritten": json.loads(result), "status": status})
                if args.get("value") == "text":
                    return "plain words"
                return None
            ctx.register_hook("transform_tool_result", rewrite)
        """,
        manifest=manifest("b_rewriter", ("transform_tool_result",)),
    )
    plugin_dir(
        "c_late",
        """
        def register(ctx):
            def late(args, **kwargs):
                return '{"late": true}' if args.get("value") == "json" else None
            ctx.register_hook("transform_tool_result", late)
        """,
        manifest=manifest("c_late", ("transform_tool_result",)),
    )
    k = make_kernel()

    out = k.tools.dispatch("probe", {"value": "json"}, **TOOL_CONTEXT)
    assert run_json(out) == {"rewritten": {"echo": "json"}, "status": "ok"}  # the first string wins
    observed = [c for c in sink.calls if c[1] == "transform_tool_result"]
    assert len(observed) == 1
    got = observed[0][2]
    assert sorted(got) == sorted(spec_args("transform_tool_result"))
    assert got["tool_name"] == "probe"
    assert got["args"] == {"value": "json"}
    assert run_json(got["result"]) == {"echo": "json"}
    assert got["status"] == "ok"
    assert got["error_type"] is None and got["error_message"] is None
    assert {key: got[key] for key in TOOL_CONTEXT} == TOOL_CONTEXT

    assert run_json(k.tools.dispatch("probe", {"value": "text"}, **TOOL_CONTEXT)) == {"result": "plain words"}
    assert run_json(k.tools.dispatch("probe", {"value": "keep"}, **TOOL_CONTEXT)) == {"echo": "keep"}

    sink.calls.clear()
    failed = run_json(k.tools.dispatch("probe", {"fail": True}, **TOOL_CONTEXT))
    assert "error" in failed
    got = next(c for c in sink.calls if c[1] == "transform_tool_result")[2]
    assert got["status"] == "error"
    assert got["error_type"] == "ValueError"


ASKING_GATE = """
def register(ctx):
    def gate(tool_name, args, **kwargs):
        if args.get("value") == "ask":
            return {"action": "approve", "message": "a human must look", "rule_key": "probe-rule"}
        return None
    ctx.register_hook("pre_tool_call", gate)
"""


def approval_setup(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType, hook: str
) -> tuple[Kernel, list[Any]]:
    """A tool, a plugin whose ``pre_tool_call`` asks for approval, a recorder of ``hook`` and an
    approver that allows the first request and denies the second."""
    tool_setup(plugin_dir)
    plugin_dir("gate", ASKING_GATE, manifest=manifest("gate", ("pre_tool_call",)))
    plugin_dir("watch", recorder(hook, "ignored"), manifest=manifest("watch", (hook,)))
    k = make_kernel()
    asked: list[Any] = []

    def approver(request: Any) -> bool:
        asked.append(("approver", request.rule_key))
        sink.calls.append(("approver", request.rule_key, None))
        return len(asked) == 1

    k.approver = approver
    assert run_json(k.tools.dispatch("probe", {"value": "ask"}, **TOOL_CONTEXT)) == {"echo": "ask"}
    denied = run_json(k.tools.dispatch("probe", {"value": "ask"}, **TOOL_CONTEXT))
    assert "was not approved" in denied["error"]
    assert run_json(k.tools.dispatch("probe", {"value": "no-ask"}, **TOOL_CONTEXT)) == {"echo": "no-ask"}
    return k, asked


APPROVAL_FIELDS = {
    "command": "<probe> (plugin approval rule)",
    "description": "a human must look",
    "pattern_key": "plugin_rule:probe-rule",
    "pattern_keys": ["plugin_rule:probe-rule"],
    "session_key": "sess-1",
    "surface": "host",
    "tool_name": "probe",
    "plugin": "gate",
    "turn_id": "turn-1",
    "tool_call_id": "call-1",
    "telemetry_schema_version": "hermes.observer.v1",
}


def test_hook_pre_approval_request(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    approval_setup(plugin_dir, make_kernel, sink, "pre_approval_request")
    seen = [c for c in sink.calls if c[1] in ("pre_approval_request", "probe-rule")]
    # Before each question to the approver, never for a call no plugin asked about.
    assert seen == [
        ("watch", "pre_approval_request", APPROVAL_FIELDS),
        ("approver", "probe-rule", None),
        ("watch", "pre_approval_request", APPROVAL_FIELDS),
        ("approver", "probe-rule", None),
    ]
    assert sorted(APPROVAL_FIELDS) == sorted(spec_args("pre_approval_request"))


def test_hook_post_approval_response(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    k, _ = approval_setup(plugin_dir, make_kernel, sink, "post_approval_response")
    seen = [c for c in sink.calls if c[1] in ("post_approval_response", "probe-rule")]
    assert seen == [
        ("approver", "probe-rule", None),
        ("watch", "post_approval_response", {**APPROVAL_FIELDS, "choice": "once"}),
        ("approver", "probe-rule", None),
        ("watch", "post_approval_response", {**APPROVAL_FIELDS, "choice": "deny"}),
    ]
    assert sorted(seen[1][2]) == sorted(spec_args("post_approval_response"))
    # An approver that raises denies, and observers hear "deny".
    sink.calls.clear()

    def broken(request: Any) -> bool:
        raise RuntimeError("approver down")

    k.approver = broken
    assert "was not approved" in run_json(k.tools.dispatch("probe", {"value": "ask"}))["error"]
    [(_, _, got)] = [c for c in sink.calls if c[1] == "post_approval_response"]
    assert got["choice"] == "deny" and got["session_key"] == "" and got["turn_id"] == ""


def test_tool_hooks_get_the_middleware_trace(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    """A ``tool_request`` middleware that rewrites the arguments shows in every tool hook's
    ``middleware_trace`` (Hermes' entry shape, plus the plugin); one that keeps them does not."""
    tool_setup(plugin_dir)
    plugin_dir(
        "a_rewriter",
        """
def register(ctx):
    def shout(tool_name, args, **kwargs):
        return {"args": {**args, "value": args["value"].upper()}, "reason": "loud", "name": "shout"}
    def keep(tool_name, args, **kwargs):
        return None
    ctx.register_middleware("tool_request", shout)
    ctx.register_middleware("tool_request", keep)
""",
        manifest=manifest("a_rewriter"),
    )
    for hook in ("pre_tool_call", "post_tool_call", "transform_tool_result"):
        plugin_dir(f"w_{hook}", recorder(hook), manifest=manifest(f"w_{hook}", (hook,)))
    k = make_kernel()
    k.tools.dispatch("probe", {"value": "hi"})
    trace = [{"reason": "loud", "name": "shout", "source": "plugin", "plugin": "a_rewriter"}]
    got = {c[1]: c[2] for c in sink.calls if c[0].startswith("w_")}
    assert sorted(got) == ["post_tool_call", "pre_tool_call", "transform_tool_result"]
    for hook, kwargs in got.items():
        assert kwargs["middleware_trace"] == trace, hook
        assert kwargs["args"] == {"value": "HI"}
    assert isinstance(got["transform_tool_result"]["duration_ms"], int)


# --------------------------------------------------------------------------
# Model calls and turns
# --------------------------------------------------------------------------


def test_hook_pre_llm_call(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    plugin_dir(
        "a_ctx", recorder("pre_llm_call", "remember the milk"), manifest=manifest("a_ctx", ("pre_llm_call",))
    )
    plugin_dir(
        "b_ctx",
        """
        from kernel import hookimpl

        @hookimpl
        def pre_llm_call(user_message, is_first_turn):
            return {"context": f"first={is_first_turn} msg={user_message}"}
        """,
        manifest=manifest("b_ctx", ("pre_llm_call",)),
    )
    k = make_kernel()
    kwargs = {
        "session_id": "sess-1",
        "task_id": "task-1",
        "turn_id": "turn-1",
        "user_message": "hello",
        "conversation_history": [{"role": "assistant", "content": "hi"}],
        "is_first_turn": True,
        "model": "model-x",
        "platform": "cli",
        "parent_session_id": None,
        "sender_id": "user-9",
    }
    assert sorted(kwargs) == sorted(spec_args("pre_llm_call"))
    assert k.pre_llm_context(**kwargs) == "remember the milk\n\nfirst=True msg=hello"
    assert sink.calls == [("a_ctx", "pre_llm_call", {**kwargs, **OBSERVER_FIELDS_OF_EVERY_HOOK})]


def test_hook_post_llm_call(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    kwargs = {
        "session_id": "sess-1",
        "task_id": "task-1",
        "turn_id": "turn-1",
        "user_message": "what is 2+2?",
        "assistant_response": "4",
        "conversation_history": [
            {"role": "user", "content": "what is 2+2?"},
            {"role": "assistant", "content": "4"},
        ],
        "model": "model-x",
        "platform": "cli",
    }
    fire_with_full_args("post_llm_call", kwargs, plugin_dir, make_kernel, sink)


def test_hook_transform_llm_output(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    kwargs = {"response_text": "raw reply", "session_id": "sess-1", "model": "model-x", "platform": "irc"}
    results = fire_with_full_args(
        "transform_llm_output", kwargs, plugin_dir, make_kernel, sink, answer="polished reply"
    )
    assert results == ["polished reply"]


API_REQUEST = {
    "api_request_id": "req-7",
    "session_id": "sess-1",
    "task_id": "task-1",
    "turn_id": "turn-1",
    "model": "model-x",
    "provider": "local",
    "base_url": "http://127.0.0.1:9/v1",
    "api_mode": "chat_completions",
    "message_count": 1,
    "tool_count": 0,
    "request_messages": [{"role": "user", "content": "hi"}],
    "request": {"model": "model-x", "messages": [{"role": "user", "content": "hi"}]},
}


def test_hook_pre_api_request(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    fire_with_full_args("pre_api_request", dict(API_REQUEST), plugin_dir, make_kernel, sink)


def test_hook_post_api_request(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    kwargs = {
        **API_REQUEST,
        "response": {"choices": [{"message": {"role": "assistant", "content": "hello"}}]},
        "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
        "finish_reason": "stop",
        "response_model": "model-x",
        "assistant_tool_call_count": 0,
        "duration_ms": 120,
        "api_duration": 0.12,
    }
    fire_with_full_args("post_api_request", kwargs, plugin_dir, make_kernel, sink)


def test_hook_api_request_error(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    kwargs = {
        **API_REQUEST,
        "error": "connection refused",
        "status_code": None,
        "duration_ms": 5,
        "attempt": 2,
    }
    fire_with_full_args("api_request_error", kwargs, plugin_dir, make_kernel, sink)


# --------------------------------------------------------------------------
# Sessions
# --------------------------------------------------------------------------


def test_hook_on_session_start(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    kwargs = {"session_id": "sess-1", "model": "model-x", "platform": "cli"}
    fire_with_full_args("on_session_start", kwargs, plugin_dir, make_kernel, sink)


def test_hook_on_session_end(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    kwargs = {
        "session_id": "sess-1",
        "completed": False,
        "interrupted": True,
        "model": "model-x",
        "platform": "cli",
    }
    fire_with_full_args("on_session_end", kwargs, plugin_dir, make_kernel, sink)


def test_hook_on_session_finalize(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    kwargs = {
        "session_id": "sess-1",
        "platform": "irc",
        "old_session_id": "sess-0",
        "new_session_id": "sess-2",
        "reason": "shutdown",
    }
    fire_with_full_args("on_session_finalize", kwargs, plugin_dir, make_kernel, sink)


def test_hook_pre_verify(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    kwargs = {
        "session_id": "sess-1",
        "platform": "cli",
        "model": "m1",
        "coding": False,
        "attempt": 0,
        "final_response": "done",
        "changed_paths": ["notes.txt"],
    }
    fire_with_full_args("pre_verify", kwargs, plugin_dir, make_kernel, sink)


def test_hook_on_session_reset(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    kwargs = {
        "session_id": "sess-2",
        "platform": "cli",
        "reason": "new",
        "old_session_id": "sess-1",
        "new_session_id": "sess-2",
    }
    fire_with_full_args("on_session_reset", kwargs, plugin_dir, make_kernel, sink)


# --------------------------------------------------------------------------
# Subagents and the gateway
# --------------------------------------------------------------------------


def test_hook_subagent_start(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    kwargs = {
        "parent_session_id": "sess-1",
        "child_session_id": "sess-1-child",
        "child_role": "researcher",
        "goal": "find the answer",
        "task_id": "task-3",
        "parent_turn_id": "turn-1",
        "child_goal": "find the answer",
        "parent_subagent_id": "",
        "child_subagent_id": "sess-1/sub-1",
    }
    fire_with_full_args("subagent_start", kwargs, plugin_dir, make_kernel, sink)


def test_hook_subagent_stop(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    kwargs = {
        "parent_session_id": "sess-1",
        "child_session_id": "sess-1-child",
        "child_role": "researcher",
        "child_summary": "the answer is 42",
        "child_status": "completed",
        "tool_call_history": [{"tool": "calculate", "args": {"expression": "6*7"}}],
        "duration_ms": 1500,
        "parent_turn_id": "turn-1",
    }
    fire_with_full_args("subagent_stop", kwargs, plugin_dir, make_kernel, sink)


def test_hook_pre_gateway_dispatch(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    event = types.SimpleNamespace(platform="irc", chat="#hermes", user="nick", text="!spam")
    kwargs = {"event": event, "gateway": object(), "session_store": {}}
    answer = {"action": "skip", "reason": "spam"}
    results = fire_with_full_args(
        "pre_gateway_dispatch", kwargs, plugin_dir, make_kernel, sink, answer=answer
    )
    assert results == [answer]
    got = sink.calls[0][2]
    assert got["event"] is event and got["gateway"] is kwargs["gateway"]


# --------------------------------------------------------------------------
# Provider slots, filled during k.load()
# --------------------------------------------------------------------------


def check_slot_hook(
    hook: str,
    slot: str,
    plugin_dir: Callable[..., Path],
    make_kernel: Callable[..., Kernel],
    sink: types.ModuleType,
) -> None:
    """A pluggy-native plugin and a Hermes-style one both offer providers; one name clashes."""
    assert hookspecs.SLOT_HOOKS[hook] == slot
    sink.make = lambda name, owner: make_provider(slot, name, owner)
    assert spec_args(hook) == ["register"]
    plugin_dir(
        "a_native",
        f"""
        import types
        import hook_sink
        from kernel import hookimpl

        @hookimpl
        def {hook}(register):
            hook_sink.calls.append(("a_native", {hook!r}))
            register(hook_sink.make("shared", "a_native"))
            register(hook_sink.make("a_only", "a_native"))
        """,
        manifest=manifest("a_native", (hook,)),
    )
    plugin_dir(
        "b_hermes",
        f"""
        import types
        import hook_sink

        def register(ctx):
            def offer(register):
                hook_sink.calls.append(("b_hermes", {hook!r}))
                register(hook_sink.make("shared", "b_hermes"))
                register(hook_sink.make("b_only", "b_hermes"))
            ctx.register_hook({hook!r}, offer)
        """,
        manifest=manifest("b_hermes", (hook,)),
    )
    k = make_kernel()
    assert sink.calls == [("a_native", hook), ("b_hermes", hook)]
    providers = slot_providers(k, slot)
    assert sorted(providers) == ["a_only", "b_only", "shared"]
    # Image providers replace one of the same name, as Hermes' registry does; the other slots refuse.
    first = "b_hermes" if slot in REPLACING_SLOTS else "a_native"
    assert providers["shared"] == (first, first)
    assert providers["b_only"] == ("b_hermes", "b_hermes")
    assert providers["a_only"] == ("a_native", "a_native")
    for other in hookspecs.SLOT_HOOKS.values():
        if other != slot:
            assert slot_providers(k, other) == {}

    refused = [w for w in k.plugin("b_hermes").warnings if "shared" in w]
    assert refused, k.plugin("b_hermes").warnings
    assert ("replaced" in refused[0]) == (slot in REPLACING_SLOTS)
    assert "a_native" in refused[0] and "b_hermes" in refused[0]
    assert not [w for w in k.plugin("a_native").warnings if "shared" in w]

    # Fired once per kernel: load() again changes nothing.
    k.load()
    assert len(sink.calls) == 2
    assert sorted(slot_providers(k, slot)) == ["a_only", "b_only", "shared"]


def make_provider(slot: str, name: str, owner: str) -> Any:
    """A real provider object of the slot's base class, tagged with ``owner``."""
    from kernel.providers import ContextEngine, ImageGenProvider, MemoryProvider, ProviderProfile

    if slot == "model_provider":
        profile = ProviderProfile(name=name, description=owner, api_mode="scripted")
        profile.owner = owner  # type: ignore[attr-defined]
        return profile

    class Memory(MemoryProvider):
        def is_available(self) -> bool:
            return True

        def initialize(self, session_id: str, **kwargs: Any) -> None:
            return None

        def get_tool_schemas(self) -> list[dict[str, Any]]:
            return []

    class Engine(ContextEngine):
        def should_compress(self, prompt_tokens: int | None = None) -> bool:
            return False

        def compress(self, messages: list, current_tokens=None, focus_topic=None, force=False) -> list:
            return messages

        def update_from_response(self, usage: dict) -> None:
            return None

    class Images(ImageGenProvider):
        def generate(self, prompt: str, aspect_ratio: str = "landscape", **kwargs: Any) -> dict:
            return {}

    base = {"memory": Memory, "context_engine": Engine, "image_gen": Images}[slot]
    cls = type(f"{base.__name__}Of{owner}", (base,), {"name": property(lambda self: name), "owner": owner})
    return cls()


def slot_providers(k: Kernel, slot: str) -> dict[str, tuple[str, str]]:
    """``{name: (plugin, owner)}`` of a slot (model providers live in the provider catalog)."""
    if slot == "model_provider":
        return {e.profile.name: (e.plugin, e.profile.owner) for e in k.providers.catalog.entries()}
    return {name: (p.plugin, p.obj.owner) for name, p in k.slots.providers(slot).items()}


def test_hook_register_model_providers(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    check_slot_hook("register_model_providers", "model_provider", plugin_dir, make_kernel, sink)


def test_hook_register_memory_providers(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    check_slot_hook("register_memory_providers", "memory", plugin_dir, make_kernel, sink)


def test_hook_register_context_engines(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    check_slot_hook("register_context_engines", "context_engine", plugin_dir, make_kernel, sink)


def test_hook_register_image_gen_providers(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    check_slot_hook("register_image_gen_providers", "image_gen", plugin_dir, make_kernel, sink)


def test_slot_hook_fires_for_a_plugin_registered_later(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    plugin_dir(
        "early",
        """
        import types
        import hook_sink

        def register(ctx):
            def offer(register):
                hook_sink.calls.append("early")
                register(hook_sink.make("early-mem", "early"))
            ctx.register_hook("register_memory_providers", offer)
        """,
        manifest=manifest("early", ("register_memory_providers",)),
    )
    sink.make = lambda name, owner: make_provider("memory", name, owner)
    k = make_kernel()
    assert sink.calls == ["early"]

    from kernel import hookimpl

    class Late:
        @hookimpl
        def register_memory_providers(self, register: Any) -> None:
            sink.calls.append("late")
            register(make_provider("memory", "late-mem", "late"))

    k.register(Late(), name="late")
    assert sink.calls == ["early", "late"]  # the earlier plugin is not fired again
    assert {n: p.plugin for n, p in k.slots.providers("memory").items()} == {
        "early-mem": "early",
        "late-mem": "late",
    }


# --------------------------------------------------------------------------
# Meta-tests: every hookspec has a test, a docs entry and a complete docstring
# --------------------------------------------------------------------------


def test_hook_names_match_the_hookspecs(tmp_path: Path) -> None:
    k = Kernel(home=tmp_path / "meta-home")
    try:
        assert sorted(k.hook_names) == spec_names()
    finally:
        k.shutdown()
    assert set(ISSUE_HOOKS) <= set(spec_names())
    assert set(hookspecs.FAIL_CLOSED_HOOKS) <= set(spec_names())
    assert set(hookspecs.SLOT_HOOKS) <= set(spec_names())


def test_every_hookspec_has_a_test_here() -> None:
    names = spec_names()
    assert names, "no hookspecs found"
    module = globals()
    missing = [name for name in names if not callable(module.get(f"test_hook_{name}"))]
    assert not missing, f"hookspecs without a test_hook_<name> in {__file__}: {missing}"


def test_every_hookspec_has_a_docs_entry() -> None:
    doc = REPO / "docs" / "hooks.md"
    assert doc.is_file(), f"{doc} is missing"
    text = doc.read_text(encoding="utf-8")
    headings = set(re.findall(r"^###\s+`([A-Za-z_][A-Za-z0-9_]*)`", text, flags=re.MULTILINE))
    missing = [name for name in spec_names() if name not in headings]
    assert not missing, f"{doc} has no '### `<name>`' heading for: {missing}"


def _doc(name: str) -> str:
    """The docstring of hookspec ``name`` with its whitespace (line breaks too) collapsed."""
    return " ".join((inspect.getdoc(getattr(hookspecs, name)) or "").split())


def test_every_hookspec_docstring_states_its_failure_policy() -> None:
    lacking = [name for name in spec_names() if "failure policy" not in _doc(name).lower()]
    assert not lacking, f"hookspec docstrings without a 'Failure policy' statement: {lacking}"


def test_every_hookspec_docstring_documents_its_parameters() -> None:
    problems = []
    for name in spec_names():
        doc = _doc(name)
        if not doc.strip():
            problems.append(f"{name}: no docstring")
            continue
        undocumented = [arg for arg in spec_args(name) if f":param {arg}:" not in doc]
        if not undocumented:
            continue
        # "The other arguments are as for ``other_hook``": those must be documented there.
        match = re.search(r"other arguments are as for\s+``(\w+)``", doc, flags=re.IGNORECASE)
        if match is None:
            problems.append(f"{name}: no ':param' for {undocumented}")
            continue
        other = match.group(1)
        if other not in spec_names():
            problems.append(f"{name}: refers to unknown hook {other!r}")
            continue
        other_doc = _doc(other)
        still = [arg for arg in undocumented if f":param {arg}:" not in other_doc]
        if still:
            problems.append(f"{name}: {still} documented neither here nor in {other}")
    assert not problems, "\n".join(problems)


def test_hookspec_arguments_are_keyword_friendly() -> None:
    # Hosts call hooks with keyword arguments only: no *args, **kwargs or positional-only parameters.
    for name in spec_names():
        for param in inspect.signature(getattr(hookspecs, name)).parameters.values():
            assert param.kind is param.POSITIONAL_OR_KEYWORD, (name, param)


def test_tool_context_keys_match_the_tool_hookspecs() -> None:
    for hook in ("pre_tool_call", "post_tool_call", "transform_tool_result"):
        assert set(TOOL_CONTEXT) <= set(spec_args(hook)), hook
