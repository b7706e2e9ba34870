"""``pre_tool_call`` decisions through ``k.tools.dispatch``: block, modify, approve, malformed answers.

Every plugin is a real directory under ``<home>/plugins``.  Plugins record what they see in the
``hook_sink`` module (the ``sink`` fixture); the tool ``act`` of plugin ``tooly`` records the
arguments its handler received, and plugin ``zz_observer`` records what ``post_tool_call`` and
``transform_tool_result`` were given.
"""

from __future__ import annotations

import builtins
import io
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import agent_log, cli_env, run_json

from kernel import Kernel
from kernel.tools.decisions import ApprovalRequest, merge_decisions, parse_decision, terminal_approver

TOOL_CODE = """
import json
import hook_sink

SCHEMA = {"description": "Record the arguments and echo them.",
          "parameters": {"type": "object", "properties": {}}}

def act(args, **kwargs):
    hook_sink.calls.append(("handler", dict(args)))
    return json.dumps({"ran": args})

def register(ctx):
    ctx.register_tool("act", "demo", SCHEMA, act)
"""

OBSERVER_CODE = """
import hook_sink

def post(tool_name, args, result, **kwargs):
    hook_sink.calls.append(("post", tool_name, dict(args)))

def transform(tool_name, args, result, **kwargs):
    hook_sink.calls.append(("transform", tool_name, dict(args)))

def register(ctx):
    ctx.register_hook("post_tool_call", post)
    ctx.register_hook("transform_tool_result", transform)
"""

DECIDER_CODE = """
import hook_sink

NAME = {name!r}

def pre(tool_name, args, **kwargs):
    hook_sink.calls.append(("pre", NAME, tool_name, dict(args)))
    return {decision}

def register(ctx):
    ctx.register_hook("pre_tool_call", pre)
"""


def manifest(name: str, tools: tuple[str, ...] = (), hooks: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"name": name, "version": "0.1.0", "provides_tools": list(tools), "provides_hooks": list(hooks)}


@pytest.fixture
def base(plugin_dir: Callable[..., Path], sink: Any) -> Callable[..., None]:
    """Write the tool plugin and the observer; ``decider(name, decision_source)`` adds a gate."""
    plugin_dir("tooly", TOOL_CODE, manifest=manifest("tooly", tools=("act",)))
    plugin_dir(
        "zz_observer",
        OBSERVER_CODE,
        manifest=manifest("zz_observer", hooks=("post_tool_call", "transform_tool_result")),
    )

    def decider(name: str, decision: str) -> None:
        plugin_dir(
            name,
            DECIDER_CODE.format(name=name, decision=decision),
            manifest=manifest(name, hooks=("pre_tool_call",)),
        )

    return decider


@pytest.fixture
def approving_kernel(home: Path, bundled: Path) -> Iterator[Callable[[Any], Kernel]]:
    """``approving_kernel(approver)``: a loaded kernel with that approver, shut down after the test."""
    made: list[Kernel] = []

    def make(approver: Any) -> Kernel:
        k = Kernel(home=home, approver=approver)
        made.append(k)
        k.load()
        return k

    yield make
    for k in made:
        k.shutdown()


class Recorder:
    """An approver that records every request and answers with ``answer``."""

    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> bool:
        self.requests.append(request)
        return self.answer


def handler_calls(sink: Any) -> list[dict[str, Any]]:
    return [c[1] for c in sink.calls if c[0] == "handler"]


def hook_calls(sink: Any, kind: str) -> list[tuple[Any, ...]]:
    return [c for c in sink.calls if c[0] == kind]


def malformed_lines(home: Path) -> list[str]:
    return [line for line in agent_log(home).splitlines() if "tool_decision_malformed" in line]


# --------------------------------------------------------------------------- no opinion


def test_no_opinion_lets_the_call_run_and_never_asks(base, approving_kernel, sink):
    base("gate", "None")
    approver = Recorder()
    k = approving_kernel(approver)
    assert k.plugin("gate").enabled, k.plugin("gate").error
    out = run_json(k.tools.dispatch("act", {"x": 1}))
    assert out == {"ran": {"x": 1}}
    assert handler_calls(sink) == [{"x": 1}]
    assert [c[1] for c in hook_calls(sink, "pre")] == ["gate"]
    assert hook_calls(sink, "post") == [("post", "act", {"x": 1})]
    assert approver.requests == []


# --------------------------------------------------------------------------- block


@pytest.mark.parametrize(
    "decision",
    [
        '{"action": "block", "message": "not today"}',
        '{"decision": "block", "reason": "not today"}',
    ],
    ids=["action-message", "decision-reason"],
)
def test_block_stops_the_handler_and_its_message_is_the_result(base, make_kernel, sink, decision):
    base("gate", decision)
    k = make_kernel()
    out = run_json(k.tools.dispatch("act", {"x": 1}))
    assert out == {"error": "not today"}
    assert handler_calls(sink) == [], "a blocked call must not run the handler"
    assert hook_calls(sink, "post") == [("post", "act", {"x": 1})], "observers hear of the blocked call"


@pytest.mark.parametrize("block_name", ["a_block", "z_block"])
def test_block_outranks_modify_and_approve_in_any_order(base, approving_kernel, sink, block_name):
    base(block_name, '{"action": "block", "message": "stop here"}')
    base("m_modify", '{"action": "modify", "args": {"x": 99}}')
    base("n_approve", '{"action": "approve", "message": "ask first"}')
    approver = Recorder(answer=True)
    k = approving_kernel(approver)
    out = run_json(k.tools.dispatch("act", {"x": 1}))
    assert out == {"error": "stop here"}
    assert handler_calls(sink) == []
    assert approver.requests == [], "nobody is asked about a call that is blocked anyway"
    # every gate was consulted
    assert sorted(c[1] for c in hook_calls(sink, "pre")) == sorted([block_name, "m_modify", "n_approve"])


def test_first_block_message_wins_when_two_plugins_block(base, make_kernel, sink):
    base("b_second", '{"action": "block", "message": "second"}')
    base("a_first", '{"decision": "block", "reason": "first"}')
    k = make_kernel()
    assert run_json(k.tools.dispatch("act", {})) == {"error": "first"}
    assert handler_calls(sink) == []


# --------------------------------------------------------------------------- modify


def test_modifications_merge_in_plugin_order_later_keys_winning(base, make_kernel, sink):
    base("b_mod", '{"decision": "modify", "tool_input": {"y": "from-b", "z": True}}')
    base("a_mod", '{"action": "modify", "args": {"x": 2, "y": "from-a"}}')
    k = make_kernel()
    original = {"x": 1, "keep": "k"}
    out = run_json(k.tools.dispatch("act", original))
    merged = {"x": 2, "keep": "k", "y": "from-b", "z": True}
    assert handler_calls(sink) == [merged]
    assert out == {"ran": merged}
    assert hook_calls(sink, "post") == [("post", "act", merged)]
    assert hook_calls(sink, "transform") == [("transform", "act", merged)]
    assert original == {"x": 1, "keep": "k"}, "the caller's dict must not be changed"


def test_modify_with_json_string_arguments(base, make_kernel, sink):
    base("a_mod", '{"action": "modify", "args": {"x": 5}}')
    k = make_kernel()
    out = run_json(k.tools.dispatch("act", '{"x": 1, "w": "keep"}'))
    assert out == {"ran": {"x": 5, "w": "keep"}}


# --------------------------------------------------------------------------- approve


def test_approver_receives_the_full_request_and_true_runs_the_call(base, approving_kernel, sink):
    base("a_mod", '{"action": "modify", "args": {"x": 10}}')
    base("b_ask", '{"action": "approve", "message": "really run?", "rule_key": "act:x"}')
    approver = Recorder(answer=True)
    k = approving_kernel(approver)
    out = run_json(k.tools.dispatch("act", {"x": 1, "y": 2}, session_id="s1", task_id="t1"))
    assert approver.requests == [
        ApprovalRequest(
            tool_name="act",
            args={"x": 10, "y": 2},
            message="really run?",
            plugin="b_ask",
            rule_key="act:x",
            session_id="s1",
            task_id="t1",
        )
    ]
    assert out == {"ran": {"x": 10, "y": 2}}
    assert handler_calls(sink) == [{"x": 10, "y": 2}]


def test_approver_false_denies_naming_plugin_and_message(base, approving_kernel, sink):
    base("b_ask", '{"action": "approve", "message": "touches production"}')
    approver = Recorder(answer=False)
    k = approving_kernel(approver)
    out = run_json(k.tools.dispatch("act", {"x": 1}))
    assert set(out) == {"error"}
    assert "b_ask" in out["error"]
    assert "touches production" in out["error"]
    assert "act" in out["error"]
    assert len(approver.requests) == 1
    assert handler_calls(sink) == []


def test_raising_approver_denies_and_is_logged(base, approving_kernel, sink, home):
    base("b_ask", '{"action": "approve", "message": "check"}')

    def broken(request: ApprovalRequest) -> bool:
        raise RuntimeError("approver exploded")

    k = approving_kernel(broken)
    out = run_json(k.tools.dispatch("act", {"x": 1}))
    assert "error" in out
    assert "b_ask" in out["error"]
    assert handler_calls(sink) == []
    assert "approver exploded" in agent_log(home)
    # the host survives and the next call is asked again (and denied again)
    assert "error" in run_json(k.tools.dispatch("act", {"x": 2}))


def test_default_approver_denies_without_a_terminal(base, make_kernel, sink, monkeypatch):
    base("b_ask", '{"action": "approve", "message": "sure?"}')
    k = make_kernel()  # no approver given: the terminal approver
    # a piped stdin (not a TTY), even one holding a "yes", never approves
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    out = run_json(k.tools.dispatch("act", {"x": 1}))
    assert "error" in out
    assert "b_ask" in out["error"]
    assert handler_calls(sink) == []


def test_default_approver_denies_in_a_subprocess_with_stdin_devnull(base, home, bundled):
    base("b_ask", '{"action": "approve", "message": "sure?"}')
    script = textwrap.dedent(
        """
        import json, sys, types
        sink = types.ModuleType("hook_sink")
        sink.calls = []
        sys.modules["hook_sink"] = sink
        from kernel import Kernel
        with Kernel() as k:
            k.load()
            result = k.tools.dispatch("act", {"x": 1})
        print(json.dumps({"result": json.loads(result), "calls": sink.calls}))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env=cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "error" in data["result"]
    assert "b_ask" in data["result"]["error"]
    assert not any(call[0] == "handler" for call in data["calls"])
    assert "Allow this tool call" not in proc.stdout, "no prompt without a terminal"


class _FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


REQUEST = ApprovalRequest(tool_name="act", args={"x": 1}, message="sure?", plugin="b_ask")


@pytest.mark.parametrize(("answer", "allowed"), [("y", True), ("yes", True), ("n", False), ("", False)])
def test_terminal_approver_asks_on_a_terminal(monkeypatch, answer, allowed):
    out = _FakeTTY()
    monkeypatch.setattr(sys, "stdin", _FakeTTY())
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(builtins, "input", lambda prompt="": answer)
    assert terminal_approver(REQUEST) is allowed
    assert "b_ask" in out.getvalue()
    assert "act" in out.getvalue()


def test_terminal_approver_denies_on_eof_and_without_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stdin", _FakeTTY())
    monkeypatch.setattr(sys, "stdout", _FakeTTY())

    def eof(prompt: str = "") -> str:
        raise EOFError

    monkeypatch.setattr(builtins, "input", eof)
    assert terminal_approver(REQUEST) is False

    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))

    def never(prompt: str = "") -> str:
        raise AssertionError("must not prompt without a terminal")

    monkeypatch.setattr(builtins, "input", never)
    assert terminal_approver(REQUEST) is False


# --------------------------------------------------------------------------- malformed and failing


@pytest.mark.parametrize(
    "decision",
    [
        '"block it"',
        '["block", "no"]',
        '{"action": "explode"}',
        '{"action": "modify", "args": "x=2"}',
        '{"action": "modify"}',
        '{"decision": "modify", "tool_input": ["x"]}',
    ],
    ids=[
        "string",
        "list",
        "unknown-action",
        "modify-args-not-dict",
        "modify-no-args",
        "modify-tool-input-list",
    ],
)
def test_malformed_decision_is_logged_and_ignored(base, make_kernel, sink, home, decision):
    base("sloppy", decision)
    k = make_kernel()
    out = run_json(k.tools.dispatch("act", {"x": 1}))
    assert out == {"ran": {"x": 1}}, "a malformed decision is no opinion: the call proceeds unchanged"
    assert handler_calls(sink) == [{"x": 1}]
    lines = malformed_lines(home)
    assert lines, agent_log(home)
    assert any("sloppy" in line for line in lines), lines
    assert k.plugin("sloppy").disabled_hooks == [], "a malformed answer does not disable the hook"


@pytest.mark.parametrize(
    "decision",
    ['{"action": "block", "message": 42}', '{"decision": "block", "reason": ["no"]}', '{"action": "block"}'],
    ids=["int-message", "list-reason", "no-message"],
)
def test_a_block_with_a_malformed_message_still_blocks(base, make_kernel, sink, decision):
    """Fail closed (issue 16): the guard wanted the call stopped; a bad message does not let it through."""
    base("sloppy_guard", decision)
    k = make_kernel()
    out = run_json(k.tools.dispatch("act", {"x": 1}))
    assert out["error"] == "tool call blocked by plugin 'sloppy_guard'"
    assert handler_calls(sink) == []


@pytest.mark.parametrize("answer", [True, False])
def test_an_approve_with_malformed_fields_still_asks_with_the_tool_as_rule(
    base, approving_kernel, sink, answer
):
    """An approve whose ``rule_key`` or message is not a string asks the approver anyway; the rule key is
    then the tool's name (Hermes' ``rule_key or tool_name``), and a denial blocks."""
    base("sloppy_asker", '{"action": "approve", "message": 7, "rule_key": 5}')
    recorder = Recorder(answer)
    k = approving_kernel(recorder)
    out = run_json(k.tools.dispatch("act", {"x": 1}))
    assert [(r.tool_name, r.rule_key, r.message, r.plugin) for r in recorder.requests] == [
        ("act", "act", "", "sloppy_asker")
    ]
    if answer:
        assert out == {"ran": {"x": 1}}
    else:
        assert "not approved" in out["error"] and handler_calls(sink) == []


def test_malformed_decision_does_not_hide_other_plugins_decisions(base, make_kernel, sink, home):
    base("a_sloppy", '"whatever"')
    base("b_mod", '{"action": "modify", "args": {"x": 7}}')
    k = make_kernel()
    assert run_json(k.tools.dispatch("act", {"x": 1})) == {"ran": {"x": 7}}
    base_lines = malformed_lines(home)
    assert any("a_sloppy" in line for line in base_lines)
    assert not any("b_mod" in line for line in base_lines)


def test_malformed_decision_next_to_a_block_still_blocks(base, make_kernel, sink):
    base("a_sloppy", '{"action": 3}')
    base("b_block", '{"action": "block", "message": "closed"}')
    k = make_kernel()
    assert run_json(k.tools.dispatch("act", {})) == {"error": "closed"}
    assert handler_calls(sink) == []


def test_raising_pre_tool_call_fails_closed_naming_the_plugin(plugin_dir, base, make_kernel, sink):
    plugin_dir(
        "jammed",
        """
def pre(**kwargs):
    raise RuntimeError("gate jammed")

def register(ctx):
    ctx.register_hook("pre_tool_call", pre)
""",
        manifest=manifest("jammed", hooks=("pre_tool_call",)),
    )
    k = make_kernel()
    out = run_json(k.tools.dispatch("act", {"x": 1}))
    assert set(out) == {"error"}
    assert "jammed" in out["error"]
    assert handler_calls(sink) == []


# --------------------------------------------------------------------------- parse_decision


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ({"action": "block", "message": "m"}, ("block", "m")),
        ({"decision": "block", "reason": "r"}, ("block", "r")),
        ({"action": "modify", "args": {"a": 1}}, ("modify", {"a": 1})),
        ({"decision": "modify", "tool_input": {"a": 1}}, ("modify", {"a": 1})),
        ({"action": "approve", "message": "ask"}, ("approve", ("ask", None))),
        ({"action": "approve", "message": "ask", "rule_key": "k"}, ("approve", ("ask", "k"))),
        ({"action": "approve", "message": "ask", "rule_key": " k \n"}, ("approve", ("ask", "k"))),
        # Malformed fields of a block or an approve never turn it into "no opinion" (fail closed).
        ({"action": "block", "message": 3}, ("block", "")),
        ({"decision": "block", "reason": None}, ("block", "")),
        ({"action": "approve", "message": ["m"]}, ("approve", ("", None))),
        ({"action": "approve", "message": "m", "rule_key": 5}, ("approve", ("m", None))),
        ({"action": "approve", "message": "m", "rule_key": "  "}, ("approve", ("m", None))),
    ],
)
def test_parse_decision_recognised_answers(value, expected):
    assert parse_decision(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "block",
        ["block"],
        42,
        {"action": "explode"},
        {"action": "modify"},
        {"action": "modify", "args": "a=1"},
        {"decision": "modify", "tool_input": [1]},
    ],
)
def test_parse_decision_rejects_malformed_answers(value):
    with pytest.raises(ValueError):
        parse_decision(value)


# --------------------------------------------------------------------------- merge_decisions


def test_merge_first_block_wins_over_everything():
    args = {"x": 1}
    verdict = merge_decisions(
        args,
        [
            ("a", ("modify", {"x": 2})),
            ("b", ("approve", ("ask", None))),
            ("c", ("block", "from c")),
            ("d", ("block", "from d")),
        ],
    )
    assert verdict.blocked == "from c"
    assert args == {"x": 1}


def test_merge_block_without_message_names_the_plugin():
    verdict = merge_decisions({}, [("guardian", ("block", ""))])
    assert verdict.blocked
    assert "guardian" in verdict.blocked


def test_merge_modifications_shallow_later_keys_win_and_input_untouched():
    args = {"x": 1, "nested": {"a": 1}, "keep": True}
    verdict = merge_decisions(
        args,
        [
            ("a", ("modify", {"x": 2, "y": "a"})),
            ("b", ("modify", {"y": "b", "nested": {"b": 2}})),
        ],
    )
    assert verdict.blocked is None
    assert verdict.args == {"x": 2, "y": "b", "nested": {"b": 2}, "keep": True}
    assert args == {"x": 1, "nested": {"a": 1}, "keep": True}
    assert verdict.approvals == []


def test_merge_collects_approvals_in_plugin_order():
    verdict = merge_decisions(
        {"x": 1},
        [("a", ("approve", ("first?", "rule-a"))), ("b", ("approve", ("second?", None)))],
    )
    assert verdict.blocked is None
    assert verdict.args == {"x": 1}
    assert verdict.approvals == [("a", "first?", "rule-a"), ("b", "second?", None)]


def test_merge_of_nothing_is_the_args_unchanged():
    verdict = merge_decisions({"x": 1}, [])
    assert verdict.blocked is None
    assert verdict.args == {"x": 1}
    assert verdict.approvals == []
