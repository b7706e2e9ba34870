"""noisegate-hermes 0.3.3 through hermes-kernel: ``transform_tool_result`` shrinks noisy tool output.

noisegate compacts the output of Hermes's shell tools (``terminal``, ``process``,
...) before the model sees it, keeping failures and summaries.  The shell tool
here is a small directory plugin written by the test whose ``terminal`` tool
returns a long, noisy pytest run, as Hermes's own would.  Its second hook,
``transform_terminal_output``, is not a kernel hook: it is kept with a warning
and fires when the host invokes it.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.testing import HookRecorder

PACKAGE = "noisegate-hermes"
FAILED = "FAILED tests/test_mod7.py::test_case_3 - AssertionError: boom"
SUMMARY = "=========== 1 failed, 399 passed in 12.34s ==========="
SHELL_PLUGIN = """\
import json


def noisy_output():
    lines = [f"tests/test_mod{i % 40}.py::test_case_{i} PASSED" for i in range(400)]
    lines.append("_____________ test_case_3 _____________")
    lines.append("    assert compute() == 4")
    lines.append("E   AssertionError: boom")
    lines.append(FAILED_LINE)
    lines.append(SUMMARY_LINE)
    return "\\n".join(lines) + "\\n"


def _terminal(args, **kw):
    return json.dumps({"output": noisy_output(), "exit_code": 1, "error": None})


def _read_file(args, **kw):
    return json.dumps({"content": noisy_output(), "total_lines": 405})


def _schema(name):
    return {
        "name": name,
        "description": name,
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}, "path": {"type": "string"}},
        },
    }


def register(ctx):
    ctx.register_tool(name="terminal", toolset="shell", schema=_schema("terminal"), handler=_terminal)
    ctx.register_tool(name="read_file", toolset="shell", schema=_schema("read_file"), handler=_read_file)
""".replace("FAILED_LINE", repr(FAILED)).replace("SUMMARY_LINE", repr(SUMMARY))


def noisy_output() -> str:
    lines = [f"tests/test_mod{i % 40}.py::test_case_{i} PASSED" for i in range(400)]
    lines += [
        "_____________ test_case_3 _____________",
        "    assert compute() == 4",
        "E   AssertionError: boom",
    ]
    return "\n".join([*lines, FAILED, SUMMARY]) + "\n"


def write_shell_plugin(home: Path) -> None:
    folder = home / "plugins" / "shell"
    folder.mkdir(parents=True)
    manifest = {"name": "shell", "version": "1.0.0", "provides_tools": ["terminal", "read_file"]}
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    (folder / "__init__.py").write_text(textwrap.dedent(SHELL_PLUGIN), encoding="utf-8")


@pytest.fixture
def kernel(
    compat_kernel: Callable[..., Kernel], hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Kernel:
    for name in (
        "NOISEGATE",
        "NOISEGATE_DISABLE",
        "NOISEGATE_BYPASS",
        "NOISEGATE_RAW",
        "NOISEGATE_ARTIFACTS",
    ):
        monkeypatch.delenv(name, raising=False)
    write_shell_plugin(hermes_home)
    return compat_kernel(PACKAGE, config=_script(hermes_home))


def _script(home: Path) -> dict[str, Any]:
    turns = [
        {"tool_calls": [{"name": "terminal", "arguments": {"command": "pytest -v"}}]},
        "One test failed.",
    ]
    path = home / "noisegate-script.yaml"
    path.write_text(yaml.safe_dump(turns, sort_keys=False), encoding="utf-8")
    return {"model": {"provider": "scripted", "script": str(path)}}


def assert_reduced(text: str) -> dict[str, Any]:
    """``text`` is a compacted form of the noisy run: strict JSON, much smaller, failures kept."""
    original = json.dumps({"output": noisy_output(), "exit_code": 1, "error": None})
    data = json.loads(text)
    assert len(text) < len(original) / 2, (len(text), len(original))
    assert data["exit_code"] == 1
    assert FAILED in data["output"]
    assert "1 failed, 399 passed" in data["output"]
    assert "AssertionError: boom" in data["output"]
    assert data["output"].count(" PASSED") < 100
    return data


def test_loads_and_keeps_its_unknown_hook_with_a_warning(kernel: Kernel) -> None:
    info = kernel.plugin("noisegate")
    assert info.enabled and info.error is None and info.source == "entrypoint"
    assert info.hooks == ["transform_tool_result", "transform_terminal_output"]
    warnings = [w for w in info.warnings if "transform_terminal_output" in w]
    assert len(warnings) == 1 and "kept" in warnings[0]
    assert kernel.plugin("shell").tools == ["terminal", "read_file"]


def test_a_noisy_terminal_result_is_compacted_through_dispatch(kernel: Kernel) -> None:
    recorder = HookRecorder().attach(kernel)
    text = kernel.tools.dispatch("terminal", {"command": "pytest -v"}, session_id="s1", tool_call_id="c1")
    assert_reduced(text)
    # post_tool_call still observed the handler's own, full result; only the model's copy is reduced.
    observed = recorder.of("post_tool_call")[-1]
    assert json.loads(observed["result"])["output"] == noisy_output()
    assert kernel.plugin("noisegate").hook_errors == {}
    # No artifact store was written (artifacts are off by default).
    assert not (Path.home() / ".local" / "share" / "noisegate").exists()


def test_protected_tools_and_bypass_leave_results_alone(
    kernel: Kernel, monkeypatch: pytest.MonkeyPatch
) -> None:
    untouched = json.loads(kernel.tools.dispatch("read_file", {"path": "log.txt"}))
    assert untouched == {"content": noisy_output(), "total_lines": 405}
    monkeypatch.setenv("NOISEGATE_BYPASS", "1")
    raw = json.loads(kernel.tools.dispatch("terminal", {"command": "pytest -v"}))
    assert raw["output"] == noisy_output()


def test_the_model_sees_the_compacted_result_in_a_real_turn(kernel: Kernel) -> None:
    recorder = HookRecorder().attach(kernel)
    with AgentSession(kernel, session_id="noise") as session:
        turn = session.run("Run the tests.")
    assert turn.reply == "One test failed."
    assert_reduced(turn.tool_calls[0].result)
    # The second model request carried the compacted tool message.
    sent = recorder.of("pre_api_request")[-1]["request_messages"]
    tool_messages = [m for m in sent if m["role"] == "tool"]
    assert len(tool_messages) == 1 and tool_messages[0]["tool_call_id"] == "call_1"
    assert tool_messages[0]["content"] == turn.tool_calls[0].result
    assert_reduced(tool_messages[0]["content"])


def test_transform_terminal_output_fires_when_the_host_invokes_it(kernel: Kernel) -> None:
    output = noisy_output()
    [reduced] = kernel.invoke_hook(
        "transform_terminal_output", command="pytest -v", output=output, exit_code=1
    )
    assert isinstance(reduced, str) and len(reduced) < len(output) / 2
    assert FAILED in reduced and "1 failed, 399 passed" in reduced
    # Strict JSON output is never rewritten by this hook (no result: no change).
    document = json.dumps({"ok": True, "items": list(range(50))})
    assert (
        kernel.invoke_hook("transform_terminal_output", command="cat x.json", output=document, exit_code=0)
        == []
    )
    assert kernel.plugin("noisegate").hook_errors == {}
