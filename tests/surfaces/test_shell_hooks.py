"""Shell hooks declared under ``hooks:`` in config.yaml, run as real subprocesses.

The hook programs are small Python scripts (run with ``sys.executable``) or ``sh`` scripts written
into the test's tmp dir.  Tools are registered by a runtime plugin whose handler records the arguments
it received, so that a test sees whether a call ran and with what.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, agent_log, cli_env, run_json

from kernel import Kernel
from kernel.surfaces import shell_hooks
from kernel.tools.decisions import ApprovalRequest

PY = sys.executable
DEADLINE = 60  # seconds a CLI run may take before the test calls it a hang


# --------------------------------------------------------------------------- helpers


def script(folder: Path, name: str, body: str) -> str:
    """Write a Python hook script; return the command that runs it (quoted for shlex)."""
    path = folder / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return shlex.join([PY, str(path)])


def sh_script(folder: Path, name: str, body: str) -> str:
    path = folder / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body), encoding="utf-8")
    return shlex.join(["sh", str(path)])


def echo(folder: Path, name: str, answer: Any, code: int = 0, stderr: str = "") -> str:
    """A hook that prints ``answer`` (JSON, or raw text when a str) and exits with ``code``."""
    text = answer if isinstance(answer, str) else json.dumps(answer)
    return script(
        folder,
        name,
        f"""
        import sys
        sys.stdin.read()
        sys.stdout.write({text!r})
        sys.stderr.write({stderr!r})
        sys.exit({code})
        """,
    )


def add_tools(k: Kernel, *names: str) -> list[tuple[str, dict[str, Any]]]:
    """Register tools ``names`` on a runtime plugin; return the list their handler appends to."""
    calls: list[tuple[str, dict[str, Any]]] = []
    schema = {"description": "records its arguments", "parameters": {"type": "object", "properties": {}}}

    def register(ctx: Any) -> None:
        for name in names:

            def handler(args: dict[str, Any], _name: str = name, **kw: Any) -> str:
                calls.append((_name, dict(args)))
                return json.dumps({"ran": _name})

            ctx.register_tool(name, "demo", schema, handler)

    k.register(types.SimpleNamespace(register=register), name="tools")
    return calls


@pytest.fixture
def kernel(home: Path, bundled: Path) -> Callable[..., Kernel]:
    """``kernel(hooks, approver=None, **config)``: a loaded kernel whose config.yaml declares ``hooks``."""
    made: list[Kernel] = []

    def make(hooks: Any, approver: Any = None, **config: Any) -> Kernel:
        (home / "config.yaml").write_text(yaml.safe_dump({"hooks": hooks, **config}), encoding="utf-8")
        k = Kernel(home=home, approver=approver)
        made.append(k)
        k.load()
        return k

    yield make
    for k in made:
        k.shutdown()


def surface(k: Kernel) -> Any:
    return k.plugin(shell_hooks.SURFACE)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# --------------------------------------------------------------------------- pre_tool_call


def test_list_form_blocks_the_listed_tools_only(kernel, tmp_path):
    k = kernel(
        [
            {
                "event": "pre_tool_call",
                "command": echo(tmp_path, "guard.py", {"action": "block", "message": "no terminal here"}),
                "when": {"tools": ["terminal", "write_*"]},
            }
        ]
    )
    calls = add_tools(k, "terminal", "write_file", "read_file")
    assert run_json(k.tools.dispatch("terminal", {"cmd": "ls"})) == {"error": "no terminal here"}
    assert run_json(k.tools.dispatch("write_file", {})) == {"error": "no terminal here"}
    assert run_json(k.tools.dispatch("read_file", {"path": "x"})) == {"ran": "read_file"}
    assert calls == [("read_file", {"path": "x"})]

    info = surface(k)
    assert (info.kind, info.source, info.enabled, info.error) == ("shell-hooks", "config", True, None)
    assert info.hooks == ["pre_tool_call"]
    assert info.description == "1 shell hook (pre_tool_call)"


def test_mapping_form_matcher_is_a_full_regex_match(kernel, tmp_path):
    k = kernel(
        {
            "pre_tool_call": [
                {
                    "command": echo(tmp_path, "guard.py", {"decision": "block", "reason": "claude spelling"}),
                    "matcher": "ac.|shell_.*",
                }
            ]
        }
    )
    calls = add_tools(k, "act", "action", "shell_run", "a")
    assert run_json(k.tools.dispatch("act", {})) == {"error": "claude spelling"}
    assert run_json(k.tools.dispatch("shell_run", {})) == {"error": "claude spelling"}
    # Full match: "ac." does not match "action", nor "a".
    assert run_json(k.tools.dispatch("action", {})) == {"ran": "action"}
    assert run_json(k.tools.dispatch("a", {})) == {"ran": "a"}
    assert [name for name, _ in calls] == ["action", "a"]


@pytest.mark.parametrize(
    ("matcher", "blocked"),
    [("terminal\n", {"terminal"}), ("  terminal  ", {"terminal"}), ("   ", {"terminal", "other"})],
    ids=["block-scalar-newline", "spaces", "blank-matches-all"],
)
def test_a_matcher_is_trimmed_as_hermes_trims_it(kernel, tmp_path, matcher, blocked):
    """Issue 16: an untrimmed matcher ("terminal\\n" from a YAML block scalar) made the guard silently
    never run; a whitespace-only matcher matches every tool, as in Hermes."""
    guard = echo(tmp_path, "guard.py", {"action": "block", "message": "guarded"})
    k = kernel({"pre_tool_call": [{"command": guard, "matcher": matcher}]})
    add_tools(k, "terminal", "other")
    outcome = {name: run_json(k.tools.dispatch(name, {})) for name in ("terminal", "other")}
    assert {name for name, out in outcome.items() if out == {"error": "guarded"}} == blocked


def test_a_shell_hook_block_with_a_malformed_message_still_blocks(kernel, tmp_path):
    """Fail closed (issue 16): ``{"action": "block", "message": 42}`` on stdout blocks, with the
    default message, instead of being read as no opinion."""
    k = kernel(
        {"pre_tool_call": [{"command": echo(tmp_path, "guard.py", {"action": "block", "message": 42})}]}
    )
    calls = add_tools(k, "act")
    out = run_json(k.tools.dispatch("act", {}))
    assert "blocked" in out["error"] and calls == []


def test_a_bad_regex_matches_literally_with_a_warning(kernel, tmp_path):
    k = kernel(
        {
            "pre_tool_call": [
                {"command": echo(tmp_path, "g.py", {"action": "block", "message": "m"}), "matcher": "a("}
            ]
        }
    )
    add_tools(k, "a")
    assert run_json(k.tools.dispatch("a", {})) == {"ran": "a"}
    # No registered tool can be named "a(", but a host may fire the hook with any name.
    assert k.invoke_hook("pre_tool_call", tool_name="a(", args={}) == [{"action": "block", "message": "m"}]
    warnings = surface(k).warnings
    assert any(
        "'hooks.pre_tool_call[0].matcher'" in w and "not a valid regular expression" in w for w in warnings
    )


@pytest.mark.parametrize(
    ("stdout", "stderr", "expected"),
    [
        ("", "  policy says no: rm is dangerous\n", "policy says no: rm is dangerous"),
        (json.dumps({"reason": "from stdout"}), "ignored stderr", "from stdout"),
        ("", "", "blocked by shell hook '{cmd}'"),
    ],
    ids=["stderr", "stdout-json", "default"],
)
def test_exit_code_2_blocks(kernel, tmp_path, stdout, stderr, expected):
    command = echo(tmp_path, "guard.py", stdout, code=2, stderr=stderr)
    k = kernel([{"event": "pre_tool_call", "command": command}])
    calls = add_tools(k, "act")
    assert run_json(k.tools.dispatch("act", {})) == {"error": expected.format(cmd=command)}
    assert calls == []


def test_a_long_stderr_reason_is_cut(kernel, tmp_path):
    k = kernel([{"event": "pre_tool_call", "command": echo(tmp_path, "g.py", "", code=2, stderr="x" * 5000)}])
    add_tools(k, "act")
    assert run_json(k.tools.dispatch("act", {})) == {"error": "x" * shell_hooks.REASON_CHARS}


@pytest.mark.parametrize("spelling", ["action", "decision"])
def test_modify_changes_what_the_handler_sees(kernel, tmp_path, spelling):
    command = script(
        tmp_path,
        "modify.py",
        f"""
        import json, sys
        event = json.load(sys.stdin)
        args = dict(event["tool_input"], path=event["tool_input"]["path"].upper(), checked=True)
        key = "args" if {spelling!r} == "action" else "tool_input"
        print(json.dumps({{{spelling!r}: "modify", key: args}}))
        """,
    )
    k = kernel({"pre_tool_call": [{"command": command}]})
    calls = add_tools(k, "act")
    assert run_json(k.tools.dispatch("act", {"path": "notes.txt", "n": 1})) == {"ran": "act"}
    assert calls == [("act", {"path": "NOTES.TXT", "n": 1, "checked": True})]


@pytest.mark.parametrize("allow", [True, False])
def test_approve_asks_the_kernels_approver(kernel, tmp_path, allow):
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return allow

    answer = {"action": "approve", "message": "deleting files", "rule_key": "rm"}
    k = kernel([{"event": "pre_tool_call", "command": echo(tmp_path, "ask.py", answer)}], approver=approver)
    calls = add_tools(k, "delete")
    result = run_json(k.tools.dispatch("delete", {"path": "/tmp/x"}, session_id="s1"))
    assert len(asked) == 1
    request = asked[0]
    assert (request.tool_name, request.args, request.message) == (
        "delete",
        {"path": "/tmp/x"},
        "deleting files",
    )
    assert (request.plugin, request.rule_key, request.session_id) == ("config:shell-hooks", "rm", "s1")
    if allow:
        assert result == {"ran": "delete"} and calls == [("delete", {"path": "/tmp/x"})]
    else:
        assert "not approved" in result["error"] and "deleting files" in result["error"]
        assert calls == []


def test_decisions_merge_with_the_plugins_and_a_plugin_block_comes_first(kernel, tmp_path, plugin_dir):
    plugin_dir(
        "zz-guard",
        """
        def guard(tool_name, **kw):
            if tool_name == "both":
                return {"action": "block", "message": "plugin says no"}
            return {"action": "modify", "args": {"from_plugin": 1, "who": "plugin"}}

        def register(ctx):
            ctx.register_hook("pre_tool_call", guard)
        """,
    )
    answer = {"action": "modify", "args": {"from_shell": 1, "who": "shell"}}
    block = {"action": "block", "message": "shell says no"}
    k = kernel(
        {
            "pre_tool_call": [
                {"command": echo(tmp_path, "m.py", answer), "matcher": "one"},
                {"command": echo(tmp_path, "b.py", block), "matcher": "both"},
            ]
        }
    )
    calls = add_tools(k, "one", "both")
    assert run_json(k.tools.dispatch("one", {"x": 0})) == {"ran": "one"}
    # The shell hook runs after the plugin (even one named zz-...): its keys win the merge.
    assert calls == [("one", {"x": 0, "from_plugin": 1, "from_shell": 1, "who": "shell"})]
    # Both block: the first block in call order (the plugin's) gives the message.
    assert run_json(k.tools.dispatch("both", {})) == {"error": "plugin says no"}


def test_non_zero_exit_is_logged_and_stdout_still_counts(kernel, tmp_path, home):
    command = echo(tmp_path, "g.py", {"action": "block", "message": "still blocked"}, code=1)
    k = kernel([{"event": "pre_tool_call", "command": command}])
    add_tools(k, "act")
    assert run_json(k.tools.dispatch("act", {})) == {"error": "still blocked"}
    log = agent_log(home)
    assert "shell_hook_output" in log and "exited with code 1" in log


def test_invalid_output_is_no_opinion_unless_fail_closed(kernel, tmp_path, home):
    k = kernel(
        {
            "pre_tool_call": [
                {"command": echo(tmp_path, "a.py", "this is not json"), "matcher": "open"},
                {
                    "command": echo(tmp_path, "b.py", "this is not json"),
                    "matcher": "closed",
                    "fail_closed": True,
                },
                {"command": echo(tmp_path, "c.py", {"action": "explode"}), "matcher": "weird"},
            ]
        }
    )
    calls = add_tools(k, "open", "closed", "weird")
    assert run_json(k.tools.dispatch("open", {})) == {"ran": "open"}
    assert run_json(k.tools.dispatch("weird", {})) == {"ran": "weird"}
    blocked = run_json(k.tools.dispatch("closed", {}))["error"]
    assert blocked.startswith("shell hook '") and "failed closed: its output is not JSON" in blocked
    assert [name for name, _ in calls] == ["open", "weird"]
    log = agent_log(home)
    assert "its output is not JSON" in log and "unknown action 'explode'" in log


def test_claude_codes_decision_approve_means_allow(kernel, tmp_path):
    asked: list[ApprovalRequest] = []
    k = kernel(
        [{"event": "pre_tool_call", "command": echo(tmp_path, "a.py", {"decision": "approve"})}],
        approver=lambda request: asked.append(request) or False,
    )
    calls = add_tools(k, "act")
    assert run_json(k.tools.dispatch("act", {})) == {"ran": "act"}
    assert asked == [] and len(calls) == 1


# --------------------------------------------------------------------------- failures: spawn, timeout


def test_a_missing_program_fails_open_or_closed(kernel, tmp_path, home):
    missing = str(tmp_path / "no-such-program")
    k = kernel(
        [
            {"event": "pre_tool_call", "command": f"{missing} --open", "when": {"tools": ["open"]}},
            {
                "event": "pre_tool_call",
                "command": f"{missing} --closed",
                "when": {"tools": ["closed"]},
                "fail_closed": True,
            },
            {
                "event": "pre_tool_call",
                "command": f"{missing} --camel",
                "when": {"tools": ["camel"]},
                "failClosed": True,
            },
        ]
    )
    calls = add_tools(k, "open", "closed", "camel")
    assert run_json(k.tools.dispatch("open", {})) == {"ran": "open"}
    blocked = run_json(k.tools.dispatch("closed", {}))["error"]
    assert blocked.startswith(f"shell hook '{missing} --closed' failed closed: could not start: ")
    assert "No such file or directory" in blocked
    assert "failed closed" in run_json(k.tools.dispatch("camel", {}))["error"]
    assert calls == [("open", {})]
    assert "shell_hook_failed" in agent_log(home)
    # The callbacks were not disabled: the hook still answers on the next call.
    assert "failed closed" in run_json(k.tools.dispatch("closed", {}))["error"]
    assert all(cb.error is None for cb in k.hook_callbacks("pre_tool_call"))


def test_a_timeout_kills_the_whole_process_group(kernel, tmp_path):
    pids = tmp_path / "pids"
    body = f"""
    sleep 300 &
    echo $! >> {shlex.quote(str(pids))}
    echo $$ >> {shlex.quote(str(pids))}
    wait
    """
    k = kernel(
        [
            {
                "event": "pre_tool_call",
                "command": sh_script(tmp_path, "slow.sh", body),
                "timeout": 1,
                "when": {"tools": ["open"]},
            },
            {
                "event": "pre_tool_call",
                "command": sh_script(tmp_path, "slow2.sh", body),
                "timeout": 1,
                "when": {"tools": ["closed"]},
                "fail_closed": True,
            },
        ]
    )
    calls = add_tools(k, "open", "closed")
    # Fails open: the call goes on once the hook has been killed.
    assert run_json(k.tools.dispatch("open", {})) == {"ran": "open"}
    blocked = run_json(k.tools.dispatch("closed", {}))["error"]
    assert "failed closed: timed out after 1 s" in blocked
    assert calls == [("open", {})]

    started = [int(line) for line in pids.read_text().split()]
    assert len(started) == 4
    deadline = time.monotonic() + 10  # a deadline for reaping, not a speed requirement
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [pid for pid in started if alive(pid)]
    for pid in survivors:  # leave nothing behind when the kill did not work
        os.kill(pid, signal.SIGKILL)
    assert survivors == []


# --------------------------------------------------------------------------- placeholders and stdin


def test_placeholders_stay_inside_one_argument(kernel, tmp_path):
    record = tmp_path / "argv.json"
    command = (
        script(
            tmp_path,
            "argv.py",
            f"""
        import json, sys
        with open({str(record)!r}, "a") as f:
            f.write(json.dumps(sys.argv[1:]) + "\\n")
        """,
        )
        + " {session_id} --tool={tool_name} 'event is {event}' {unknown}"
    )
    k = kernel([{"event": "pre_tool_call", "command": command}])
    add_tools(k, "act")
    attacks = [
        "s; touch PWNED",
        "$(touch PWNED2) `touch PWNED3` | tee PWNED4 && rm -rf ~",
        "two words\nand a newline",
        "{event} {tool_name}",
        "",
    ]
    for session in attacks:
        assert run_json(k.tools.dispatch("act", {}, session_id=session)) == {"ran": "act"}
    seen = [json.loads(line) for line in record.read_text().splitlines()]
    assert seen == [[s, "--tool=act", "event is pre_tool_call", "{unknown}"] for s in attacks]
    assert not list(Path.cwd().glob("PWNED*")) and not list(tmp_path.glob("PWNED*"))


def test_post_tool_call_gets_the_event_on_stdin_and_its_output_is_ignored(kernel, tmp_path):
    record = tmp_path / "event.json"
    command = script(
        tmp_path,
        "observe.py",
        f"""
        import sys
        data = sys.stdin.buffer.read()
        open({str(record)!r}, "wb").write(data)
        print('{{"action": "block", "message": "ignored"}}')
        """,
    )
    k = kernel([{"event": "post_tool_call", "command": command}])
    calls = add_tools(k, "act")
    result = k.tools.dispatch("act", {"text": "héllo ✓", "n": 2}, session_id="sess-1", task_id="t9")
    assert run_json(result) == {"ran": "act"} and len(calls) == 1
    event = json.loads(record.read_bytes().decode("utf-8"))
    assert event["hook_event_name"] == "post_tool_call"
    assert event["tool_name"] == "act"
    assert event["tool_input"] == {"text": "héllo ✓", "n": 2}
    assert event["session_id"] == "sess-1"
    assert event["cwd"] == os.getcwd()
    extra = event["extra"]
    assert extra["task_id"] == "t9" and extra["status"] == "ok"
    assert json.loads(extra["result"]) == {"ran": "act"}
    assert isinstance(extra["duration_ms"], int)
    assert not {"tool_name", "args", "session_id"} & set(extra)


def test_values_that_are_not_json_become_strings(kernel, tmp_path):
    record = tmp_path / "event.json"
    command = script(tmp_path, "o.py", f"import sys; open({str(record)!r}, 'w').write(sys.stdin.read())")
    k = kernel({"on_session_start": [{"command": command}]})

    class Thing:
        def __repr__(self) -> str:
            return "<thing>"

    assert k.invoke_hook("on_session_start", session_id="s", model=Thing(), platform={1: {Thing()}}) == []
    event = json.loads(record.read_text())
    assert event["tool_name"] is None and event["tool_input"] is None
    assert event["extra"] == {
        "model": "<thing>",
        "platform": {"1": ["<thing>"]},
        "telemetry_schema_version": "hermes.observer.v1",  # as Hermes' payload carries it
    }


def test_program_tilde_is_expanded(kernel, tmp_path):
    bin_dir = Path.home() / "bin"
    bin_dir.mkdir()
    hook = bin_dir / "guard"
    hook.write_text('#!/bin/sh\necho \'{"action": "block", "message": "from home"}\'\n')
    hook.chmod(0o755)
    k = kernel([{"event": "pre_tool_call", "command": "~/bin/guard"}])
    add_tools(k, "act")
    assert run_json(k.tools.dispatch("act", {})) == {"error": "from home"}


# --------------------------------------------------------------------------- pre_llm_call


def test_pre_llm_context_comes_after_the_plugins(kernel, tmp_path, plugin_dir):
    for name in ("aaa-context", "zzz-context"):
        plugin_dir(
            name,
            f"""
            def context(user_message, **kw):
                return "plugin {name} saw " + user_message

            def register(ctx):
                ctx.register_hook("pre_llm_call", context)
            """,
        )
    command = script(
        tmp_path,
        "ctx.py",
        """
        import json, sys
        event = json.load(sys.stdin)
        seen = event["extra"]["user_message"] + " in " + event["session_id"]
        print(json.dumps({"context": "shell saw " + seen}))
        """,
    )
    silent = echo(tmp_path, "silent.py", {})
    bad = echo(tmp_path, "bad.py", "plain text")
    k = kernel({"pre_llm_call": [{"command": command}, {"command": silent}, {"command": bad}]})
    merged = k.pre_llm_context(session_id="s7", user_message="hi", conversation_history=[])
    assert merged == "plugin aaa-context saw hi\n\nplugin zzz-context saw hi\n\nshell saw hi in s7"


# --------------------------------------------------------------------------- config problems


def test_unknown_events_warn_with_the_closest_name_and_are_skipped(kernel, tmp_path):
    good = echo(tmp_path, "g.py", {"action": "block", "message": "good hook"})
    k = kernel(
        [
            {"event": "pre_tool_cal", "command": good},
            {"event": "register_memory_providers", "command": good},
            {"event": "pre_tool_call", "command": good},
        ]
    )
    add_tools(k, "act")
    assert run_json(k.tools.dispatch("act", {})) == {"error": "good hook"}
    info = surface(k)
    assert info.hooks == ["pre_tool_call"] and len(k.hook_callbacks("pre_tool_call")) == 1
    assert any(
        "'hooks[0]'" in w
        and "unknown hook event 'pre_tool_cal'" in w
        and "did you mean 'pre_tool_call'?" in w
        for w in info.warnings
    ), info.warnings
    assert any("'hooks[1]'" in w and "register_memory_providers" in w for w in info.warnings)
    assert k.problems == []

    k2 = kernel({"on_sesion_start": [{"command": good}], "xyzzy": [{"command": good}]})
    warnings = surface(k2).warnings
    assert any("did you mean 'on_session_start'?" in w for w in warnings), warnings
    assert any("'xyzzy'" in w and "valid events:" in w and "pre_llm_call" in w for w in warnings)
    assert surface(k2).hooks == []


def test_malformed_entries_are_config_problems_and_the_rest_loads(kernel, tmp_path, home):
    good = echo(tmp_path, "g.py", {"action": "block", "message": "the good one"})
    k = kernel(
        [
            {"event": "pre_tool_call"},
            {"event": "pre_tool_call", "command": ["ls", "-l"]},
            {"event": "pre_tool_call", "command": good, "timeout": "soon"},
            {"event": "pre_tool_call", "command": good, "fail_closed": "yes"},
            {"event": "pre_tool_call", "command": good, "when": ["act"]},
            {"event": "pre_tool_call", "command": good, "when": {"tools": []}},
            {"event": "pre_tool_call", "command": good, "matcher": 3},
            {"event": "pre_tool_call", "command": "python3 'unbalanced"},
            "just a string",
            {"command": good},
            {"event": "pre_tool_call", "command": good, "when": {"tools": ["act"]}, "colour": "red"},
        ]
    )
    add_tools(k, "act")
    assert run_json(k.tools.dispatch("act", {})) == {"error": "the good one"}
    expected = [
        "'hooks[0].command' must be a non-empty string",
        "'hooks[1].command' must be a non-empty string",
        "'hooks[3].fail_closed' must be true or false",
        "'hooks[4].when' must be a mapping",
        "'hooks[5].when.tools' must be a non-empty list of tool names",
        "'hooks[6].matcher' must be a regular expression",
        "'hooks[7].command' cannot be split into arguments",
        "'hooks[8]' must be a mapping with 'event' and 'command'",
        "'hooks[9].event' must name a hook event",
    ]
    assert len(k.problems) == len(expected), k.problems
    for problem, text in zip(k.problems, expected, strict=True):
        assert problem.startswith("config.yaml: ") and text in problem, (problem, text)
    info = surface(k)
    assert info.error is None and info.enabled
    # A timeout that is not a number keeps the hook, with the default 60 s (as in Hermes).
    assert info.description == "2 shell hooks (pre_tool_call)"
    assert any(
        "'hooks[2].timeout' must be a number of seconds" in w and "using 60" in w for w in info.warnings
    )
    assert any("'hooks[10]'" in w and "unknown key(s) colour ignored" in w for w in info.warnings)
    assert "config_problem" in agent_log(home)


def test_a_hooks_section_of_the_wrong_type(kernel):
    k = kernel("run my script")
    assert any(p.startswith("config.yaml: 'hooks' must be a list of hooks") for p in k.problems)
    assert shell_hooks.SURFACE not in [p.name for p in k.plugins]


def test_reserved_keys_are_not_events(kernel, tmp_path):
    good = echo(tmp_path, "g.py", {"action": "block", "message": "m"})
    k = kernel(
        {
            "output_spill": {"max_chars": 10},
            "outbound": [{"url": "http://127.0.0.1:9/"}],
            "pre_tool_call": {"command": good},
        }
    )
    info = surface(k)
    assert info.warnings == [] and k.problems == []
    assert info.hooks == ["pre_tool_call"]
    assert kernel({"output_spill": {"max_chars": 10}}).problems == []


def test_a_timeout_that_is_not_a_number_keeps_the_hook_with_hermes_default():
    """Hermes reads the timeout with ``int()``: ``"30"`` is 30 s, anything else the default 60 s;
    the hook is never dropped for it (before, the kernel skipped such a hook, so a guard never ran)."""
    config = {
        "hooks": [
            {"event": "pre_tool_call", "command": "a", "timeout": "soon"},
            {"event": "pre_tool_call", "command": "b", "timeout": " 30 "},
            {"event": "pre_tool_call", "command": "c", "timeout": [5]},
            {"event": "pre_tool_call", "command": "d", "timeout": True},
            {"event": "pre_tool_call", "command": "e", "timeout": "x" * 10_000},
        ]
    }
    parsed = shell_hooks.parse(config, ["pre_tool_call"])
    assert parsed.problems == []
    assert [h.timeout for h in parsed.hooks] == [60, 30, 60, 60, 60]
    flagged = [i for i in range(5) if any(f"'hooks[{i}].timeout' must be" in w for w in parsed.warnings)]
    assert flagged == [0, 2, 3, 4]
    assert all(len(w) < 400 for w in parsed.warnings)  # a huge value is not echoed back


def test_timeouts_are_clamped_and_kept_below_the_kernels_hook_timeout():
    names = ["pre_tool_call", "post_tool_call", "on_session_start"]
    config = {
        "hooks": [
            {"event": "pre_tool_call", "command": "a"},
            {"event": "pre_tool_call", "command": "b", "timeout": 0},
            {"event": "pre_tool_call", "command": "c", "timeout": 1000},
            {"event": "pre_tool_call", "command": "d", "timeout": 2.5},
            {"event": "on_session_start", "command": "e", "matcher": "x", "fail_closed": True},
        ]
    }
    parsed = shell_hooks.parse(config, names)
    assert [h.timeout for h in parsed.hooks] == [60, 1, 300, 2.5, 60]
    assert parsed.problems == []
    assert any("'hooks[1].timeout' 0 is outside 1..300 s; using 1" in w for w in parsed.warnings)
    assert any("'hooks[2].timeout' 1000 is outside" in w for w in parsed.warnings)
    # A hook without a tool name: the matcher and fail_closed are dropped with a warning.
    last = parsed.hooks[-1]
    assert last.matcher is None and last.fail_closed is False
    assert any("'hooks[4]'" in w and "can fail closed" in w for w in parsed.warnings)
    assert any("'hooks[4]'" in w and "has no tool name" in w for w in parsed.warnings)

    capped = shell_hooks.parse(config, names, ceiling=10)
    assert [h.timeout for h in capped.hooks] == [9, 1, 9, 2.5, 9]
    assert any("'hooks[2].timeout' lowered to 9 s" in w for w in capped.warnings)
    assert not any("'hooks[0].timeout'" in w for w in capped.warnings)


# --------------------------------------------------------------------------- CLI


@pytest.fixture
def cli(home: Path, bundled: Path) -> Callable[..., subprocess.CompletedProcess]:
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled))

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run(
            [*CLI, *args], env=env, input=stdin, capture_output=True, text=True, timeout=DEADLINE, check=False
        )

    return run


def write_config(home: Path, hooks: Any) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump({"hooks": hooks}), encoding="utf-8")


def test_cli_hooks_test_runs_the_matching_hooks(cli, home, tmp_path):
    echo_input = script(
        tmp_path,
        "echo_input.py",
        """
        import json, sys
        event = json.load(sys.stdin)
        print("checking", event["tool_name"], file=sys.stderr)
        print(json.dumps({"action": "modify", "args": dict(event["tool_input"], seen=event["session_id"])}))
        """,
    )
    blocker = echo(tmp_path, "block.py", "", code=2, stderr="terminal is off limits")
    write_config(
        home,
        {
            "pre_tool_call": [
                {"command": echo_input + " {tool_name}"},
                {"command": blocker, "matcher": "terminal"},
            ],
            "post_tool_call": [{"command": "true"}],
        },
    )
    proc = cli("hooks", "test", "pre_tool_call", "--tool", "x")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"hooks.pre_tool_call[0]: {echo_input} {{tool_name}}" in out
    assert f"argv: {echo_input} x" in out
    assert "exit code: 0" in out and "checking x" in out
    assert 'answer: {"action": "modify", "args": {"seen": "hooks-test"}}' in out
    assert "hooks.pre_tool_call[1]" in out and "skipped: does not match tool 'x'" in out

    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps({"tool_name": "terminal", "args": {"cmd": "ls"}, "session_id": "p1"}))
    proc = cli("hooks", "test", "pre_tool_call", "--payload", str(payload), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["ran"] for r in rows] == [True, True]
    assert rows[0]["argv"][-1] == "terminal"
    assert rows[0]["result"] == {"action": "modify", "args": {"cmd": "ls", "seen": "p1"}}
    assert rows[0]["stderr"] == "checking terminal"
    assert rows[1]["exit_code"] == 2 and rows[1]["error"] is None
    assert rows[1]["result"] == {"action": "block", "message": "terminal is off limits"}

    # A stdin payload as a hook received it can be replayed, from stdin; --tool wins over it.
    replay = {
        "hook_event_name": "pre_tool_call",
        "tool_name": "y",
        "tool_input": {"a": 1},
        "session_id": "r",
        "cwd": "/",
        "extra": {"task_id": "t"},
    }
    proc = cli(
        "hooks", "test", "pre_tool_call", "--payload", "-", "--tool", "z", "--json", stdin=json.dumps(replay)
    )
    rows = json.loads(proc.stdout)
    assert rows[0]["argv"][-1] == "z"
    assert rows[0]["result"] == {"action": "modify", "args": {"a": 1, "seen": "r"}}


def test_cli_hooks_test_exit_status(cli, home, tmp_path):
    write_config(
        home,
        [
            {"event": "pre_tool_call", "command": str(tmp_path / "missing-program")},
            {"event": "pre_tool_call", "command": echo(tmp_path, "bad.py", "not json")},
            {"event": "pre_tool_cal", "command": "true"},
            {"event": "pre_tool_call", "timeout": 3},
        ],
    )
    proc = cli("hooks", "test", "pre_tool_call", "--tool", "x")
    assert proc.returncode == 1
    assert "error: could not start: No such file or directory" in proc.stdout
    assert "warning: its output is not JSON" in proc.stdout
    assert "did you mean 'pre_tool_call'?" in proc.stderr
    assert "config.yaml: 'hooks[3].command' must be a non-empty string" in proc.stderr

    proc = cli("hooks", "test", "pre_tool_cal")
    assert proc.returncode == 2 and "did you mean 'pre_tool_call'?" in proc.stderr

    proc = cli("hooks", "test", "on_session_end", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == []
    proc = cli("hooks", "test", "on_session_end")
    assert proc.returncode == 0 and "no shell hook is declared for 'on_session_end'" in proc.stdout

    proc = cli("hooks", "test", "pre_tool_call", "--payload", str(tmp_path / "nope.json"))
    assert proc.returncode == 2 and "cannot read the payload" in proc.stderr
    proc = cli("hooks", "test", "pre_tool_call", "--payload", "-", stdin="[1, 2]")
    assert proc.returncode == 2 and "must be a JSON object" in proc.stderr


def test_cli_lists_the_shell_hooks(cli, home, tmp_path):
    command = echo(tmp_path, "g.py", {})
    write_config(home, {"pre_tool_call": [{"command": command}], "post_llm_call": [{"command": "true"}]})
    rows = {r["hook"]: r for r in json.loads(cli("hooks", "list", "--json").stdout)}
    assert rows["pre_tool_call"]["callbacks"] == [
        {
            "plugin": "config:shell-hooks",
            "callback": command,
            "order": "config",
            "async": False,
            "native": False,
            "disabled": False,
            "error": None,
        }
    ]
    assert [c["callback"] for c in rows["post_llm_call"]["callbacks"]] == ["true"]

    plugins = {p["name"]: p for p in json.loads(cli("plugins", "list", "--refresh", "--json").stdout)}
    info = plugins["config:shell-hooks"]
    assert (info["kind"], info["source"], info["enabled"], info["error"]) == (
        "shell-hooks",
        "config",
        True,
        None,
    )
    assert sorted(info["hooks"]) == ["post_llm_call", "pre_tool_call"]
    assert info["description"] == "2 shell hooks (post_llm_call, pre_tool_call)"  # YAML dumped sorted


def test_no_hooks_section_adds_nothing(kernel):
    k = kernel(None)
    assert shell_hooks.SURFACE not in [p.name for p in k.plugins]
    assert k.hook_callbacks("pre_tool_call") == []
