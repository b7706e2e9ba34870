"""Tools through a loaded kernel: registration checks, the dispatch pipeline and name collisions.

Every plugin here is a real directory under ``<home>/plugins`` loaded by ``Kernel.load()``.
Side effects are recorded in module-level lists of the plugin modules, read back through
``sys.modules`` under the kernel's own plugin namespace.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import agent_log, run_json

from kernel import Kernel

# A minimal valid bare schema, for plugins that do not care about the schema.
ECHO_SCHEMA = {
    "name": "echo",
    "description": "Echo the arguments back.",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
}


def plugin_module(k: Kernel, name: str) -> Any:
    """The imported module of directory plugin ``name`` in kernel ``k``."""
    return sys.modules[f"{k._namespace}.{name}"]


def tool_plugin(plugin_dir: Any, name: str, body: str, header: str = "") -> Path:
    """A plugin whose ``register(ctx)`` runs ``body`` (indented by the caller's dedent-friendly text)."""
    lines = body.strip("\n").splitlines()
    indented = "\n".join("    " + line for line in lines)
    code = f"import json\n{header}\n\ndef register(ctx):\n{indented}\n"
    return plugin_dir(name, code)


# --------------------------------------------------------------------------- registration


def test_bare_and_wrapped_schemas_are_exposed_in_openai_form(plugin_dir, make_kernel):
    tool_plugin(
        plugin_dir,
        "schemas",
        """
ctx.register_tool("bare_tool", "demo", BARE, handler)
ctx.register_tool("wrapped_tool", "demo", {"type": "function", "function": WRAPPED}, handler)
""",
        header="""
BARE = {"name": "bare_tool", "description": "A bare schema.",
        "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}
WRAPPED = {"name": "wrapped_tool", "description": "A wrapped schema.",
           "parameters": {"type": "object", "properties": {"y": {"type": "string"}}}}

def handler(args, **kw):
    return json.dumps({"got": args})
""",
    )
    k = make_kernel()
    info = k.plugin("schemas")
    assert info.enabled, info.error
    assert info.tools == ["bare_tool", "wrapped_tool"]
    schemas = {s["function"]["name"]: s for s in k.tools.schemas()}
    assert set(schemas) == {"bare_tool", "wrapped_tool"}
    for schema in schemas.values():
        assert schema["type"] == "function"
        assert set(schema) == {"type", "function"}
        assert schema["function"]["parameters"]["type"] == "object"
    assert schemas["bare_tool"]["function"]["description"] == "A bare schema."
    assert schemas["bare_tool"]["function"]["parameters"]["required"] == ["x"]
    assert schemas["wrapped_tool"]["function"]["description"] == "A wrapped schema."
    assert "type" not in schemas["wrapped_tool"]["function"], "the wrapper must not be nested twice"
    assert run_json(k.tools.dispatch("wrapped_tool", {"y": "hi"})) == {"got": {"y": "hi"}}


def test_schemas_returns_copies(plugin_dir, make_kernel):
    tool_plugin(
        plugin_dir,
        "echoer",
        'ctx.register_tool("echo", "demo", SCHEMA, lambda args, **kw: json.dumps(args))',
        header=f"SCHEMA = {ECHO_SCHEMA!r}",
    )
    k = make_kernel()
    first = k.tools.schemas()
    first[0]["function"]["description"] = "tampered"
    first[0]["function"]["parameters"]["properties"].clear()
    second = k.tools.schemas()
    assert second[0]["function"]["description"] == "Echo the arguments back."
    assert "text" in second[0]["function"]["parameters"]["properties"]


BAD_SCHEMAS = [
    pytest.param('"not a dict"', "schema must be a dict", id="not-a-dict"),
    pytest.param(
        '{"name": "t", "parameters": {"type": "string"}}',
        "type 'object'",
        id="parameters-type-string",
    ),
    pytest.param(
        '{"name": "t", "parameters": {"type": "object", "properties": {"a": {"type": "string"}},'
        ' "required": ["b"]}}',
        "undefined properties: b",
        id="required-undefined",
    ),
    pytest.param(
        '{"name": "t", "parameters": {"type": "object", "properties": {"a": {"type": "strnig"}}}}',
        "strnig",
        id="property-type-typo",
    ),
    pytest.param(
        '{"name": "t", "parameters": {"type": "object", "properties": ["a", "b"]}}',
        "properties",
        id="properties-not-mapping",
    ),
]


@pytest.mark.parametrize(("schema", "problem"), BAD_SCHEMAS)
def test_bad_schema_disables_the_plugin_naming_tool_and_problem(plugin_dir, make_kernel, schema, problem):
    tool_plugin(
        plugin_dir,
        "badschema",
        f"""
ctx.register_tool("good_first", "demo", GOOD, lambda args, **kw: "{{}}")
ctx.register_tool("t", "demo", {schema}, lambda args, **kw: "{{}}")
""",
        header='GOOD = {"name": "good_first", "parameters": {"type": "object", "properties": {}}}',
    )
    tool_plugin(
        plugin_dir,
        "zz_neighbour",
        'ctx.register_tool("echo", "demo", SCHEMA, lambda args, **kw: json.dumps(args))',
        header=f"SCHEMA = {ECHO_SCHEMA!r}",
    )
    k = make_kernel()
    info = k.plugin("badschema")
    assert not info.enabled
    assert info.error is not None
    assert "'t'" in info.error, info.error
    assert problem in info.error, info.error
    # Rolled back: the tool registered before the bad one is gone too.
    assert info.tools == []
    assert "good_first" not in k.tools.names()
    assert "t" not in k.tools.names()
    # Nothing else is affected.
    assert k.plugin("zz_neighbour").enabled
    assert [s["function"]["name"] for s in k.tools.schemas()] == ["echo"]


@pytest.mark.parametrize(
    "name",
    [pytest.param("has space", id="space"), pytest.param("", id="empty"), pytest.param("a" * 65, id="65")],
)
def test_bad_tool_names_are_registration_errors(plugin_dir, make_kernel, name):
    tool_plugin(
        plugin_dir,
        "badname",
        f'ctx.register_tool({name!r}, "demo", {{"parameters": {{"type": "object"}}}}, lambda a, **k: "{{}}")',
    )
    k = make_kernel()
    info = k.plugin("badname")
    assert not info.enabled
    assert info.error is not None and "invalid" in info.error
    assert repr(name) in info.error
    assert k.tools.names() == []


def test_64_character_name_is_accepted(plugin_dir, make_kernel):
    name = "b" * 64
    tool_plugin(
        plugin_dir,
        "longname",
        f'ctx.register_tool({name!r}, "demo", {{}}, lambda a, **k: json.dumps({{"ok": True}}))',
    )
    k = make_kernel()
    assert k.plugin("longname").enabled, k.plugin("longname").error
    assert run_json(k.tools.dispatch(name, {})) == {"ok": True}


def test_schema_name_mismatch_warns_and_registry_name_wins(plugin_dir, make_kernel):
    tool_plugin(
        plugin_dir,
        "mismatch",
        """
ctx.register_tool("real_name", "demo", {"name": "other_name", "description": "d",
                  "parameters": {"type": "object", "properties": {}}}, lambda a, **k: '{"ok": 1}')
""",
    )
    k = make_kernel()
    info = k.plugin("mismatch")
    assert info.enabled, info.error
    assert info.tools == ["real_name"]
    assert any("other_name" in w and "real_name" in w for w in info.warnings), info.warnings
    names = [s["function"]["name"] for s in k.tools.schemas()]
    assert names == ["real_name"]
    assert run_json(k.tools.dispatch("real_name", {})) == {"ok": 1}
    assert "error" in run_json(k.tools.dispatch("other_name", {}))


def test_non_callable_handler_is_refused(plugin_dir, make_kernel):
    tool_plugin(plugin_dir, "nohandler", 'ctx.register_tool("t", "demo", {}, "not callable")')
    k = make_kernel()
    info = k.plugin("nohandler")
    assert not info.enabled
    assert "'t'" in info.error and "callable" in info.error
    assert k.tools.names() == []


# --------------------------------------------------------------------------- dispatch

RECORDING_PLUGIN = """
import json

CALLS = []

def echo(args, **kw):
    CALLS.append((dict(args), dict(kw)))
    return json.dumps({"args": args, "ctx": {k: kw.get(k) for k in ("task_id", "session_id")}})

def register(ctx):
    ctx.register_tool("echo", "demo", SCHEMA, echo)
"""


def recording_plugin(plugin_dir: Any) -> None:
    plugin_dir("rec", RECORDING_PLUGIN.replace("SCHEMA", repr(ECHO_SCHEMA)))


def test_unknown_tool_suggests_a_close_name(plugin_dir, make_kernel):
    recording_plugin(plugin_dir)
    k = make_kernel()
    out = run_json(k.tools.dispatch("ecko", {}))
    assert "unknown tool" in out["error"]
    assert "'ecko'" in out["error"]
    assert "'echo'" in out["error"]
    far = run_json(k.tools.dispatch("zzzzzzzz", {}))
    assert "unknown tool" in far["error"] and "did you mean" not in far["error"]


def test_args_as_dict_json_string_and_none(plugin_dir, make_kernel):
    recording_plugin(plugin_dir)
    k = make_kernel()
    assert run_json(k.tools.dispatch("echo", {"text": "a"}))["args"] == {"text": "a"}
    assert run_json(k.tools.dispatch("echo", '{"text": "b"}'))["args"] == {"text": "b"}
    assert run_json(k.tools.dispatch("echo"))["args"] == {}
    calls = plugin_module(k, "rec").CALLS
    assert [c[0] for c in calls] == [{"text": "a"}, {"text": "b"}, {}]


@pytest.mark.parametrize(
    ("args", "word"),
    [
        pytest.param('{"text": ', "JSON", id="invalid-json"),
        pytest.param('["a", "b"]', "object", id="json-list"),
        pytest.param(["a"], "object", id="python-list"),
    ],
)
def test_bad_args_are_json_errors_and_handler_not_run(plugin_dir, make_kernel, args, word):
    recording_plugin(plugin_dir)
    k = make_kernel()
    out = run_json(k.tools.dispatch("echo", args))
    assert set(out) == {"error"}
    assert "'echo'" in out["error"] and word in out["error"]
    assert plugin_module(k, "rec").CALLS == []


HANDLERS_PLUGIN = """
import asyncio
import json
import sys

def boom(args, **kw):
    raise ValueError("kaput")

def leave(args, **kw):
    sys.exit(3)

def as_dict(args, **kw):
    return {"a": 1}

def as_none(args, **kw):
    return None

def as_bytes(args, **kw):
    return b"raw"

def plain_text(args, **kw):
    return "just words"

def json_text(args, **kw):
    return '{"fine": true}'

def nan_text(args, **kw):
    return "NaN"

async def native_async(args, **kw):
    await asyncio.sleep(0)
    return json.dumps({"async": "native", "task": kw.get("task_id")})

def flagged_async(args, **kw):
    async def run():
        await asyncio.sleep(0)
        return json.dumps({"async": "flagged"})
    return run()

def register(ctx):
    s = {"parameters": {"type": "object", "properties": {}}}
    for fn in (boom, leave, as_dict, as_none, as_bytes, plain_text, json_text, nan_text, native_async):
        ctx.register_tool(fn.__name__, "demo", dict(s), fn)
    ctx.register_tool("flagged_async", "demo", dict(s), flagged_async, is_async=True)
"""


@pytest.fixture
def handlers_kernel(plugin_dir, make_kernel) -> Kernel:
    plugin_dir("handlers", HANDLERS_PLUGIN)
    k = make_kernel()
    assert k.plugin("handlers").enabled, k.plugin("handlers").error
    return k


def test_raising_handler_gives_error_naming_tool_plugin_and_exception(handlers_kernel, home):
    out = run_json(handlers_kernel.tools.dispatch("boom", {}))
    assert out["error"] == "tool 'boom' (plugin handlers) failed: ValueError: kaput"
    assert "tool_failed" in agent_log(home)


def test_system_exit_in_handler_is_a_json_error_and_host_survives(handlers_kernel):
    out = run_json(handlers_kernel.tools.dispatch("leave", {}))
    assert "'leave'" in out["error"] and "SystemExit" in out["error"]
    # The host is alive and the kernel still works, the same tool included.
    assert run_json(handlers_kernel.tools.dispatch("json_text", {})) == {"fine": True}
    assert "SystemExit" in run_json(handlers_kernel.tools.dispatch("leave", {}))["error"]


@pytest.mark.parametrize(
    ("tool", "type_name"), [("as_dict", "dict"), ("as_none", "NoneType"), ("as_bytes", "bytes")]
)
def test_non_string_results_are_errors_naming_the_tool(handlers_kernel, tool, type_name):
    text = handlers_kernel.tools.dispatch(tool, {})
    assert isinstance(text, str)
    out = run_json(text)
    assert f"'{tool}'" in out["error"]
    assert "returned" in out["error"]
    assert type_name in out["error"]
    assert "returned" in out


def test_dict_result_is_reported_back_as_data(handlers_kernel):
    out = run_json(handlers_kernel.tools.dispatch("as_dict", {}))
    assert out["returned"] == {"a": 1}


def test_non_json_string_is_wrapped_and_json_string_passes_through(handlers_kernel):
    assert run_json(handlers_kernel.tools.dispatch("plain_text", {})) == {"result": "just words"}
    assert handlers_kernel.tools.dispatch("json_text", {}) == '{"fine": true}'
    # "NaN" is not strict JSON: wrapped as text.
    assert run_json(handlers_kernel.tools.dispatch("nan_text", {})) == {"result": "NaN"}


def test_async_handlers_native_and_flagged(handlers_kernel):
    assert handlers_kernel.tools.get("native_async").is_async
    assert handlers_kernel.tools.get("flagged_async").is_async
    out = run_json(handlers_kernel.tools.dispatch("native_async", {}, task_id="t-9"))
    assert out == {"async": "native", "task": "t-9"}
    assert run_json(handlers_kernel.tools.dispatch("flagged_async", {})) == {"async": "flagged"}


def test_async_handler_from_inside_a_running_loop(handlers_kernel):
    import asyncio

    async def main() -> str:
        return handlers_kernel.tools.dispatch("native_async", {}, task_id="in-loop")

    assert run_json(asyncio.run(main())) == {"async": "native", "task": "in-loop"}


AVAILABILITY_PLUGIN = """
import json

STATE = {"allowed": False, "checks": 0}
CALLS = []

def gate():
    return STATE["allowed"]

def broken_check():
    STATE["checks"] += 1
    raise RuntimeError("probe down")

def handler(args, **kw):
    CALLS.append(args)
    return json.dumps({"ran": True})

def register(ctx):
    s = {"parameters": {"type": "object", "properties": {}}}
    ctx.register_tool("gated", "demo", dict(s), handler, check_fn=gate)
    ctx.register_tool("broken_check", "demo", dict(s), handler, check_fn=broken_check)
    ctx.register_tool("needs_env", "demo", dict(s), handler, requires_env=["HK_TEST_TOOL_TOKEN"])
    ctx.register_tool("always", "demo", dict(s), handler)
"""


@pytest.fixture
def availability_kernel(plugin_dir, make_kernel, monkeypatch) -> Kernel:
    monkeypatch.delenv("HK_TEST_TOOL_TOKEN", raising=False)
    plugin_dir("avail", AVAILABILITY_PLUGIN)
    k = make_kernel()
    assert k.plugin("avail").enabled, k.plugin("avail").error
    return k


def schema_names(k: Kernel) -> list[str]:
    return [s["function"]["name"] for s in k.tools.schemas()]


def test_check_fn_false_hides_and_refuses(availability_kernel):
    k = availability_kernel
    module = plugin_module(k, "avail")
    assert "gated" not in schema_names(k)
    assert "always" in schema_names(k)
    out = run_json(k.tools.dispatch("gated", {}))
    assert "'gated'" in out["error"] and "not available" in out["error"]
    assert module.CALLS == []
    module.STATE["allowed"] = True
    assert "gated" in schema_names(k)
    assert run_json(k.tools.dispatch("gated", {})) == {"ran": True}
    assert module.CALLS == [{}]


def test_raising_check_fn_hides_the_tool_and_warns_once(availability_kernel, home):
    k = availability_kernel
    module = plugin_module(k, "avail")
    for _ in range(3):
        assert "broken_check" not in schema_names(k)
        out = run_json(k.tools.dispatch("broken_check", {}))
        assert "not available" in out["error"] and "probe down" in out["error"]
    assert module.CALLS == []
    assert module.STATE["checks"] >= 6
    log = agent_log(home)
    warnings = [line for line in log.splitlines() if "tool_check_failed" in line]
    assert len(warnings) == 1, log
    assert "broken_check" in warnings[0] and "avail" in warnings[0]


def test_requires_env_hides_until_the_variable_is_set(availability_kernel, monkeypatch):
    k = availability_kernel
    assert "needs_env" not in schema_names(k)
    out = run_json(k.tools.dispatch("needs_env", {}))
    assert "HK_TEST_TOOL_TOKEN" in out["error"]
    monkeypatch.setenv("HK_TEST_TOOL_TOKEN", "value")
    assert "needs_env" in schema_names(k)
    assert run_json(k.tools.dispatch("needs_env", {})) == {"ran": True}


# --------------------------------------------------------------------------- tool hooks

HOOKS_PLUGIN = """
import json

EVENTS = []
MODE = {"pre": None, "transform": None, "edit": False}

def pre(**kw):
    EVENTS.append(("pre", dict(kw)))
    if MODE["edit"]:
        kw["args"]["injected"] = "by-hook"
        kw["args"].pop("text", None)
    return MODE["pre"]

def post(**kw):
    EVENTS.append(("post", dict(kw)))
    if isinstance(kw.get("args"), dict):
        kw["args"]["post_mutation"] = True

def transform(**kw):
    EVENTS.append(("transform", dict(kw)))
    return MODE["transform"]

def register(ctx):
    ctx.register_hook("pre_tool_call", pre)
    ctx.register_hook("post_tool_call", post)
    ctx.register_hook("transform_tool_result", transform)
"""


@pytest.fixture
def hooked_kernel(plugin_dir, make_kernel) -> Kernel:
    plugin_dir("guard", HOOKS_PLUGIN)
    recording_plugin(plugin_dir)
    plugin_dir(
        "failing",
        """
import json

def fail(args, **kw):
    raise KeyError("nope")

def register(ctx):
    ctx.register_tool("fail", "demo", {}, fail)
""",
    )
    k = make_kernel()
    for name in ("guard", "rec", "failing"):
        assert k.plugin(name).enabled, k.plugin(name).error
    return k


def events(k: Kernel, kind: str) -> list[dict[str, Any]]:
    return [e for name, e in plugin_module(k, "guard").EVENTS if name == kind]


@pytest.mark.parametrize(
    "decision",
    [
        pytest.param({"action": "block", "message": "not today"}, id="action-message"),
        pytest.param({"decision": "block", "reason": "not today"}, id="decision-reason"),
    ],
)
def test_pre_tool_call_block_stops_the_handler(hooked_kernel, decision):
    k = hooked_kernel
    plugin_module(k, "guard").MODE["pre"] = decision
    out = run_json(k.tools.dispatch("echo", {"text": "x"}, task_id="t1"))
    assert out == {"error": "not today"}
    assert plugin_module(k, "rec").CALLS == []
    assert len(events(k, "pre")) == 1
    posts = events(k, "post")  # observers hear of the blocked call (issue 16, as in Hermes)
    assert [(e["status"], e["error_type"], e["error_message"]) for e in posts] == [
        ("blocked", "plugin_block", "not today")
    ]
    assert events(k, "transform") == []


def test_non_block_decisions_let_the_call_through(hooked_kernel):
    k = hooked_kernel
    plugin_module(k, "guard").MODE["pre"] = {"action": "allow"}
    assert "args" in run_json(k.tools.dispatch("echo", {"text": "x"}))
    assert len(plugin_module(k, "rec").CALLS) == 1


def test_post_tool_call_receives_result_duration_status_and_context(hooked_kernel):
    k = hooked_kernel
    result = k.tools.dispatch("echo", {"text": "hi"}, task_id="T", session_id="S", tool_call_id="C")
    (post,) = events(k, "post")
    assert post["tool_name"] == "echo"
    assert post["result"] == result
    assert isinstance(post["duration_ms"], int | float) and post["duration_ms"] >= 0
    assert post["status"] == "ok"
    assert post["error_type"] is None
    assert post["task_id"] == "T" and post["session_id"] == "S" and post["tool_call_id"] == "C"
    for key in ("turn_id", "api_request_id"):
        assert key in post and post[key] == ""  # Hermes' empty id, not None
    assert post["telemetry_schema_version"] == "hermes.observer.v1"
    assert post["middleware_trace"] == []


def test_post_tool_call_sees_handler_failure(hooked_kernel):
    k = hooked_kernel
    out = run_json(k.tools.dispatch("fail", {}))
    assert "'fail'" in out["error"] and "KeyError" in out["error"]
    (post,) = events(k, "post")
    assert post["status"] == "error"
    assert post["error_type"] == "KeyError"
    assert "nope" in post["error_message"]
    assert run_json(post["result"]) == out


def test_transform_tool_result_replaces_the_result(hooked_kernel):
    k = hooked_kernel
    module = plugin_module(k, "guard")
    module.MODE["transform"] = '{"replaced": true}'
    assert run_json(k.tools.dispatch("echo", {"text": "x"})) == {"replaced": True}
    module.MODE["transform"] = "plain replacement"
    assert run_json(k.tools.dispatch("echo", {"text": "x"})) == {"result": "plain replacement"}
    module.MODE["transform"] = None
    assert run_json(k.tools.dispatch("echo", {"text": "x"}))["args"] == {"text": "x"}
    original = events(k, "transform")[0]
    assert original["tool_name"] == "echo"
    assert run_json(original["result"])["args"] == {"text": "x"}


def test_hooks_receive_copies_of_args(hooked_kernel):
    k = hooked_kernel
    plugin_module(k, "guard").MODE["edit"] = True
    caller_args = {"text": "original"}
    out = run_json(k.tools.dispatch("echo", caller_args))
    # The pre_tool_call hook removed "text" and added "injected" in its copy: its decision.
    edited = {"injected": "by-hook"}
    assert out["args"] == edited
    assert plugin_module(k, "rec").CALLS[0][0] == edited
    assert caller_args == {"text": "original"}
    # The transform hook sees the args unchanged by the post hook's mutation.
    (transform,) = events(k, "transform")
    assert transform["args"] == edited


def test_context_kwargs_reach_hooks_and_handler(hooked_kernel):
    k = hooked_kernel
    out = run_json(k.tools.dispatch("echo", {}, task_id="task-42", session_id="sess-7"))
    assert out["ctx"] == {"task_id": "task-42", "session_id": "sess-7"}
    handler_kwargs = plugin_module(k, "rec").CALLS[0][1]
    assert handler_kwargs["task_id"] == "task-42" and handler_kwargs["session_id"] == "sess-7"
    for kind in ("pre", "post", "transform"):
        (event,) = events(k, kind)
        assert event["task_id"] == "task-42", kind
        assert event["session_id"] == "sess-7", kind
        assert event["tool_name"] == "echo", kind


def test_raising_pre_tool_call_blocks_naming_the_plugin(plugin_dir, make_kernel):
    plugin_dir(
        "aaa_gate",
        """
def pre(**kw):
    raise RuntimeError("gate broke")

def register(ctx):
    ctx.register_hook("pre_tool_call", pre)
""",
    )
    recording_plugin(plugin_dir)
    k = make_kernel()
    out = run_json(k.tools.dispatch("echo", {"text": "x"}))
    assert "aaa_gate" in out["error"]
    assert plugin_module(k, "rec").CALLS == []
    assert "pre_tool_call" in k.plugin("aaa_gate").disabled_hooks
    # Disabled from now on: the next call goes through.
    assert run_json(k.tools.dispatch("echo", {"text": "y"}))["args"] == {"text": "y"}


def test_every_dispatch_outcome_is_json(handlers_kernel):
    k = handlers_kernel
    cases = [
        ("nope", {}),
        ("boom", {}),
        ("leave", {}),
        ("as_dict", {}),
        ("as_none", {}),
        ("as_bytes", {}),
        ("plain_text", {}),
        ("json_text", '{"a": 1}'),
        ("json_text", "{broken"),
        ("json_text", "[1]"),
        ("json_text", 5),
        ("native_async", None),
    ]
    for name, args in cases:
        text = k.tools.dispatch(name, args)
        assert isinstance(text, str), (name, args)
        json.loads(text)


# --------------------------------------------------------------------------- collisions


def test_tool_collision_first_alphabetical_wins_and_second_keeps_loading(plugin_dir, make_kernel):
    plugin_dir(
        "bravo",
        """
import json

def register(ctx):
    ctx.register_tool("shared", "demo", {}, lambda a, **k: json.dumps({"owner": "bravo"}))
    ctx.register_tool("bravo_only", "demo", {}, lambda a, **k: json.dumps({"owner": "bravo"}))
    ctx.register_hook("on_session_start", lambda **kw: None)
""",
        manifest={
            "name": "bravo",
            "provides_tools": ["shared", "bravo_only"],
            "provides_hooks": ["on_session_start"],
        },
    )
    plugin_dir(
        "Alpha",
        """
import json

def register(ctx):
    ctx.register_tool("shared", "demo", {}, lambda a, **k: json.dumps({"owner": "Alpha"}))
""",
        manifest={"name": "Alpha", "provides_tools": ["shared"]},
    )
    k = make_kernel()
    alpha, bravo = k.plugin("Alpha"), k.plugin("bravo")
    assert alpha.enabled and bravo.enabled
    assert alpha.tools == ["shared"]
    assert bravo.tools == ["bravo_only"]
    assert bravo.hooks == ["on_session_start"]
    conflict = [w for w in bravo.warnings if "shared" in w and "Alpha" in w and "bravo" in w]
    assert conflict, bravo.warnings
    assert alpha.warnings == []
    assert run_json(k.tools.dispatch("shared", {})) == {"owner": "Alpha"}
    assert run_json(k.tools.dispatch("bravo_only", {})) == {"owner": "bravo"}
    assert k.tools.get("shared").plugin == "Alpha"
