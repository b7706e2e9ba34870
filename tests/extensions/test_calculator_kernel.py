"""The real bundled calculator (``extensions/calculator``) loaded and called through the kernel."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, run_json

from kernel import Kernel

EXTENSIONS = REPO / "extensions"


@pytest.fixture
def calc_kernel(home: Path) -> Iterator[Kernel]:
    """A kernel over the real bundled extensions (HERMES_BUNDLED_PLUGINS is cleared by the sandbox)."""
    k = Kernel(home=home)
    try:
        k.load()
        yield k
    finally:
        k.shutdown()


def calculator_module(k: Kernel) -> Any:
    module = sys.modules[f"{k._namespace}.calculator"]
    assert Path(module.__file__).resolve().is_relative_to(EXTENSIONS.resolve())
    return module


def call(k: Kernel, tool: str, args: Any, **ctx: Any) -> dict[str, Any]:
    out = run_json(k.tools.dispatch(tool, args, **ctx))
    assert isinstance(out, dict)
    return out


def test_calculator_is_loaded_from_the_bundled_extensions(calc_kernel):
    info = calc_kernel.plugin("calculator")
    assert info.enabled, info.error
    assert info.source == "bundled"
    assert Path(info.path).resolve() == (EXTENSIONS / "calculator").resolve()
    assert info.version == "1.0.0"
    assert info.tools == ["calculate", "unit_convert"]
    assert info.hooks == ["post_tool_call"]
    assert info.warnings == []


def test_the_seed_examples(calc_kernel):
    k = calc_kernel
    assert call(k, "calculate", {"expression": "2**16"})["result"] == 65536
    temp = call(k, "unit_convert", {"value": 100, "from_unit": "F", "to_unit": "C"})
    assert temp["result"] == pytest.approx(37.7778, abs=1e-4)
    assert temp["category"] == "temperature"
    root = call(k, "calculate", '{"expression": "sqrt(2) * pi"}')
    assert root["result"] == pytest.approx(4.442882938158366, rel=1e-12)
    data = call(k, "unit_convert", {"value": 1.5, "from_unit": "TB", "to_unit": "GB"})
    assert data["result"] == 1536
    assert data["category"] == "data"


def test_division_by_zero_is_a_json_error(calc_kernel):
    out = call(calc_kernel, "calculate", {"expression": "1/0"})
    assert "division by zero" in out["error"]
    assert "result" not in out


def test_syntax_error_is_a_json_error(calc_kernel):
    out = call(calc_kernel, "calculate", {"expression": "2 +* 3"})
    assert "syntax" in out["error"]
    assert "result" not in out


def test_huge_power_is_refused(calc_kernel):
    out = call(calc_kernel, "calculate", {"expression": "9**9**9**9"})
    assert "too large" in out["error"]
    assert "result" not in out


def test_no_eval_escape(calc_kernel):
    out = call(calc_kernel, "calculate", {"expression": "__import__('os').getcwd()"})
    assert "error" in out and "result" not in out


def test_mixing_categories_is_refused(calc_kernel):
    out = call(calc_kernel, "unit_convert", {"value": 5, "from_unit": "km", "to_unit": "kg"})
    assert "cannot convert" in out["error"]
    assert "length" in out["error"] and "weight" in out["error"]


def test_unit_case_matters(calc_kernel):
    bad = call(calc_kernel, "unit_convert", {"value": 1, "from_unit": "mB", "to_unit": "KB"})
    assert "unknown unit 'mB'" in bad["error"]
    megabytes = call(calc_kernel, "unit_convert", {"value": 1, "from_unit": "MB", "to_unit": "KB"})
    megabits = call(calc_kernel, "unit_convert", {"value": 1, "from_unit": "Mb", "to_unit": "KB"})
    assert megabytes["result"] == 1024
    assert megabits["result"] == 128


def test_schemas_list_both_tools_with_the_calculator_descriptions(calc_kernel):
    module = calculator_module(calc_kernel)
    schemas = {s["function"]["name"]: s for s in calc_kernel.tools.schemas()}
    # The calculator ships a skill, so the kernel's own skill_view tool is offered too.
    assert set(schemas) == {"calculate", "unit_convert", "skill_view"}
    for name, declared in (
        ("calculate", module.schemas.CALCULATE),
        ("unit_convert", module.schemas.UNIT_CONVERT),
    ):
        schema = schemas[name]
        assert schema["type"] == "function"
        assert schema["function"]["description"] == declared["description"]
        assert schema["function"]["parameters"] == declared["parameters"]
    assert "sqrt" in schemas["calculate"]["function"]["description"]
    assert "case-sensitive" in schemas["unit_convert"]["function"]["description"]
    tools = {t.name: t for t in calc_kernel.tools.all()}
    assert tools["calculate"].toolset == "calculator"
    assert tools["calculate"].plugin == "calculator"
    assert tools["calculate"].emoji == tools["unit_convert"].emoji == "🧮"
    assert tools["calculate"].handler is module.tools.calculate
    assert tools["skill_view"].plugin == "builtin"


def test_post_tool_call_hook_records_every_call(calc_kernel):
    k = calc_kernel
    module = calculator_module(k)
    assert module.recent_calls() == []
    call(k, "calculate", {"expression": "1+1"}, task_id="task-a", session_id="sess-1")
    call(k, "unit_convert", {"value": 1, "from_unit": "km", "to_unit": "m"}, task_id="task-b")
    call(k, "calculate", {"expression": "1/0"}, task_id="task-c")
    recent = module.recent_calls()
    assert [(r["tool"], r["task_id"]) for r in recent] == [
        ("calculate", "task-a"),
        ("unit_convert", "task-b"),
        ("calculate", "task-c"),
    ]
    assert recent[0]["session_id"] == "sess-1"
    assert all(isinstance(r["duration_ms"], int | float) for r in recent)
    # Unknown tools never reach the hook.
    call(k, "no_such_tool", {}, task_id="task-d")
    assert len(module.recent_calls()) == 3


def test_second_live_kernel_uses_its_own_module(calc_kernel, tmp_path):
    other = Kernel(home=tmp_path / "other-home")
    try:
        other.load()
        assert other._namespace != calc_kernel._namespace
        first, second = calculator_module(calc_kernel), calculator_module(other)
        assert first is not second
        call(other, "calculate", {"expression": "3*3"}, task_id="other")
        assert [r["task_id"] for r in second.recent_calls()] == ["other"]
        assert first.recent_calls() == []
    finally:
        other.shutdown()


def test_calculator_skill_is_registered_and_viewable(calc_kernel):
    info = calc_kernel.plugin("calculator")
    assert info.skills == ["calculator"]
    assert info.hooks == ["post_tool_call"]
    text = run_json(calc_kernel.tools.dispatch("skill_view", {"name": "calculator:calculator"}))["content"]
    assert text.startswith("[Skill 'calculator:calculator' from plugin 'calculator' (read-only).]")
    assert "unit_convert" in text and "calculate" in text
    # A bare name means a skill of the host's own; the plugin's skill does not answer to it.
    error = run_json(calc_kernel.tools.dispatch("skill_view", {"name": "calculator"}))["error"]
    assert "no skill named 'calculator'" in error
