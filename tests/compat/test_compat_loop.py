"""hermes-loop-plugin 1.0.2 through hermes-kernel: its six tools, its hooks, its ``pre_llm_call`` context.

The plugin keeps a task loop in ``<cwd>/.hermes-loop-state.json`` (the working
directory is the test's sandbox) and, before every model turn, tells the model
where the loop stands.  Everything here goes through the kernel's real paths:
``k.tools.dispatch`` for the tools and ``AgentSession`` with the bundled
scripted model for the hooks.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.testing import HookRecorder

PACKAGE = "hermes-loop-plugin"
PLUGIN = "hermes-loop"
TOOLS = [
    "loop_status",
    "set_completion_promise",
    "init_loop",
    "complete_task",
    "add_blocking_issue",
    "reset_loop",
]
HOOKS = ["post_tool_call", "on_session_start", "pre_llm_call", "on_session_end"]
STATE = ".hermes-loop-state.json"


def write_script(home: Path, turns: list[Any]) -> Path:
    path = home / "loop-script.yaml"
    path.write_text(yaml.safe_dump(turns, sort_keys=False), encoding="utf-8")
    return path


def scripted(home: Path, turns: list[Any]) -> dict[str, Any]:
    return {"model": {"provider": "scripted", "script": str(write_script(home, turns))}}


def state(cwd: Path) -> dict[str, Any]:
    return json.loads((cwd / STATE).read_text(encoding="utf-8"))


def call(k: Kernel, name: str, args: Any = None, **context: Any) -> dict[str, Any]:
    text = k.tools.dispatch(name, args, **context)
    return json.loads(text)


def test_loads_with_its_six_tools_and_four_hooks(compat_kernel: Callable[..., Kernel]) -> None:
    k = compat_kernel(PACKAGE)
    info = k.plugin(PLUGIN)
    assert info.enabled and info.error is None
    assert info.source == "entrypoint"
    assert info.tools == TOOLS
    assert info.hooks == HOOKS
    assert info.hook_errors == {}
    for name in TOOLS:
        tool = k.tools.get(name)
        assert tool is not None and tool.toolset == "hermes-loop" and tool.plugin == PLUGIN
    offered = {s["function"]["name"]: s["function"] for s in k.tools.schemas()}
    assert set(TOOLS) <= set(offered)
    assert offered["init_loop"]["parameters"]["required"] == ["total_tasks"]
    assert offered["add_blocking_issue"]["parameters"]["required"] == ["issue"]
    # The wheel ships no SKILL.md, so register() copied nothing anywhere.
    assert not (Path.home() / ".hermes").exists()
    assert not (k.home / "skills" / "hermes-loop").exists()


def test_the_six_tools_through_dispatch_keep_the_loop_state_in_the_cwd(
    compat_kernel: Callable[..., Kernel],
) -> None:
    k = compat_kernel(PACKAGE)
    cwd = Path.cwd()
    context = {"session_id": "s-tools", "tool_call_id": "c-1"}

    # Nothing to work on yet: the tools say so instead of failing.
    assert call(k, "complete_task", {}, **context) == {
        "success": False,
        "error": "No active loop state found",
    }
    assert call(k, "loop_status", {}, **context) == {"active": False, "message": "No active loop state found"}
    assert not (cwd / STATE).exists()

    # Arguments as the model sends them: JSON text.
    started = call(k, "init_loop", json.dumps({"total_tasks": 3}), **context)
    assert started == {
        "success": True,
        "message": "Loop initialized with 3 tasks",
        "state_file": str(cwd / STATE),
        "promise_set": False,
    }
    assert state(cwd)["total_tasks"] == 3 and state(cwd)["completed_tasks"] == 0

    done = call(k, "complete_task", {}, **context)
    assert done == {"success": True, "previous_count": 0, "new_count": 1, "total_tasks": 3, "remaining": 2}
    assert len(state(cwd)["completion_history"]) == 1

    promise = call(
        k, "set_completion_promise", {"promise_type": "file_exists", "condition": "DONE.md"}, **context
    )
    assert promise == {
        "success": True,
        "promise_type": "file_exists",
        "message": "Promise set via file_exists",
    }
    assert state(cwd)["completion_promise"] == {
        "promise_type": "file_exists",
        "condition": "DONE.md",
        "expected_value": None,
        "fulfilled": False,
    }

    status = call(k, "loop_status", {}, **context)
    assert status["active"] is True
    assert (status["tasks_completed"], status["total_tasks"], status["remaining_tasks"]) == (1, 3, 2)
    assert status["has_remaining_tasks"] is True
    assert status["promise_status"]["type"] == "file_exists"

    blocked = call(k, "add_blocking_issue", {"issue": "disk full"}, **context)
    assert blocked == {"success": True, "message": "Blocking issue added: 'disk full'", "total_issues": 1}
    assert state(cwd)["blocking_issues"] == ["disk full"]

    reset = call(k, "reset_loop", {}, **context)
    assert reset == {"success": True, "message": "Loop reset - cleared 1 completed tasks", "total_tasks": 3}
    assert state(cwd)["completed_tasks"] == 0
    assert "completion_history" not in state(cwd)

    # Its post_tool_call hook (which requires task_id) ran on every call without failing.
    info = k.plugin(PLUGIN)
    assert info.hook_errors == {} and info.disabled_hooks == []


def test_pre_llm_call_context_reaches_the_model_in_real_turns(
    compat_kernel: Callable[..., Kernel], hermes_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hermes_loop_plugin")
    turns = [
        {
            "tool_calls": [
                {
                    "name": "init_loop",
                    "arguments": {"total_tasks": 3, "promise_type": "file_exists", "condition": "DONE.md"},
                },
                {"name": "complete_task", "arguments": {}},
            ]
        },
        "Loop started, first task done.",
        {"tool_calls": [{"name": "loop_status", "arguments": {}}]},
        "Still two to go.",
        {"tool_calls": [{"name": "add_blocking_issue", "arguments": {"issue": "disk full"}}]},
        "I am blocked.",
        "Stopping here.",
    ]
    k = compat_kernel(PACKAGE, config=scripted(hermes_home, turns))
    recorder = HookRecorder().attach(k)
    cwd = Path.cwd()

    session = AgentSession(k, session_id="loop-session")
    first = session.run("Work through the three tasks.")
    assert first.reply == "Loop started, first task done."
    assert first.context == ""  # no state file yet: the plugin adds nothing
    assert [c.name for c in first.tool_calls] == ["init_loop", "complete_task"]
    assert json.loads(first.tool_calls[0].result)["promise_set"] is True
    assert json.loads(first.tool_calls[1].result)["new_count"] == 1
    assert state(cwd)["completed_tasks"] == 1

    second = session.run("Carry on.")
    expected = (
        "[HERMES-LOOP] Loop active: 1/3 tasks complete (2 remaining). "
        "Completion promise (file_exists: DONE.md) not yet met — keep working. Continue with the next task."
    )
    assert second.context == expected
    # The context is appended to the user's message, and that is what the model was sent.
    sent = recorder.of("pre_api_request")[-1]["request_messages"]
    users = [m for m in sent if m["role"] == "user"]
    assert users[-1]["content"] == f"Carry on.\n\n{expected}"
    assert all(m["role"] != "system" or "HERMES-LOOP" not in m["content"] for m in sent)
    status = json.loads(second.tool_calls[0].result)
    assert (status["tasks_completed"], status["total_tasks"]) == (1, 3)

    # The promise's condition comes true: the next turn is told, and the plugin records it.
    (cwd / "DONE.md").write_text("all done\n", encoding="utf-8")
    third = session.run("Anything left?")
    assert "Completion promise (file_exists: DONE.md) is NOW FULFILLED." in third.context
    assert state(cwd)["completion_promise"]["fulfilled"] is True
    assert json.loads(third.tool_calls[0].result)["total_issues"] == 1

    fourth = session.run("Go on.")
    assert fourth.context.startswith("[HERMES-LOOP] The loop is BLOCKED and cannot continue.")
    assert "Blocking issues: ['disk full']" in fourth.context
    assert fourth.reply == "Stopping here."
    session.close()

    # Its hooks got the kernel's real keyword arguments and none of them failed.
    pre = recorder.of("pre_llm_call")[1]
    assert pre["session_id"] == "loop-session" and pre["is_first_turn"] is False
    assert pre["user_message"] == "Carry on." and pre["platform"] == "cli"
    assert isinstance(pre["conversation_history"], list) and pre["conversation_history"]
    assert recorder.names().count("on_session_start") == 1
    info = k.plugin(PLUGIN)
    assert info.hook_errors == {} and info.disabled_hooks == []
    ended = [r.getMessage() for r in caplog.records if "ended (completed=True" in r.getMessage()]
    assert ended and all("loop-session" in m for m in ended)


def test_a_new_session_resumes_the_loop_left_in_the_cwd(
    compat_kernel: Callable[..., Kernel], hermes_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hermes_loop_plugin")
    k = compat_kernel(PACKAGE, config=scripted(hermes_home, ["Picking up where we left off."]))
    assert call(k, "init_loop", {"total_tasks": 2})["success"] is True
    assert call(k, "complete_task", {})["new_count"] == 1

    with AgentSession(k, session_id="resumed") as session:
        turn = session.run("Where are we?")
    # on_session_start saw the loop in the cwd (it logs the resume) ...
    resumed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[hermes-loop] Resuming")]
    assert resumed == ["[hermes-loop] Resuming loop (session resumed): 1/2 tasks complete"]
    # ... and pre_llm_call told the model on the very first turn.
    assert (
        turn.context
        == "[HERMES-LOOP] Loop active: 1/2 tasks complete (1 remaining). Continue with the next task."
    )
    assert turn.reply == "Picking up where we left off."
