"""A user's plugin (or an installed package's) that provides a tool a bundled plugin provides takes it
over, visibly (issue 17): the bundled tool is set aside, not lost, and comes back when the other goes.

The checkout's bundled calculator (``extensions/calculator``) provides ``calculate`` and
``unit_convert``; the seed's calculator plugin, written by a user, provides the same names.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, run_json

from kernel import Kernel

SEED_CALCULATOR = """
import json

SCHEMA = {"description": "Evaluate.", "parameters": {"type": "object", "properties": {
    "expression": {"type": "string"}}}}

def calculate(args, **kwargs):
    return json.dumps({"by": "seed", "expression": args.get("expression")})

def register(ctx):
    ctx.register_tool("calculate", "calc", SCHEMA, calculate)
    ctx.register_tool("unit_convert", "calc", SCHEMA, lambda args, **kw: json.dumps({"by": "seed"}))
"""


@pytest.fixture
def with_bundled(bundled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkout's own bundled plugins (after the test kit's empty stand-in)."""
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(REPO / "extensions"))


@pytest.mark.parametrize("dirname", ["a-calc", "zz-calc"])  # loaded before and after "calculator"
def test_a_user_plugin_takes_a_bundled_tool_over_in_either_load_order(
    with_bundled: None, plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], dirname: str
) -> None:
    plugin_dir(dirname, SEED_CALCULATOR)
    k = make_kernel()
    mine, bundled = k.plugin(dirname), k.plugin("calculator")
    assert mine.enabled and bundled.enabled, (mine.error, bundled.error)
    assert run_json(k.tools.dispatch("calculate", {"expression": "1+1"}))["by"] == "seed"
    assert k.tools.get("unit_convert").plugin == dirname
    assert sorted(mine.tools) == sorted(bundled.tools) == ["calculate", "unit_convert"]
    why = "(a bundled plugin's tool gives way to yours)"
    assert f"tool 'calculate' overrides the one plugin 'calculator' registered {why}" in mine.warnings
    assert f"tool 'calculate' is overridden by plugin '{dirname}' {why}" in bundled.warnings
    assert not any("was refused" in w for w in mine.warnings + bundled.warnings)

    k.unregister(dirname)
    result = run_json(k.tools.dispatch("calculate", {"expression": "1+1"}))
    assert "by" not in result and result["result"] == 2  # the bundled calculator again
    assert not [w for w in k.plugin("calculator").warnings if "overridden" in w]


def test_two_plugins_of_the_user_still_conflict(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    """Only bundled tools give way; between two plugins of the user the first keeps the name, as before."""
    plugin_dir("a-calc", SEED_CALCULATOR)
    plugin_dir("b-calc", SEED_CALCULATOR)
    k = make_kernel()
    assert k.tools.get("calculate").plugin == "a-calc"
    assert any(
        "of plugin 'b-calc' was refused: plugin 'a-calc' already registered it" in w
        for w in k.plugin("b-calc").warnings
    )


def test_plugins_list_shows_the_takeover(
    with_bundled: None, plugin_dir: Callable[..., Path], home: Path
) -> None:
    import subprocess

    from conftest import CLI, cli_env

    plugin_dir("seed-calc", SEED_CALCULATOR)
    proc = subprocess.run(
        [*CLI, "plugins", "list", "--refresh", "--json"],
        env=cli_env(home, HERMES_BUNDLED_PLUGINS=str(REPO / "extensions")),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    by_name = {p["name"]: p for p in json.loads(proc.stdout)}
    assert any("overrides the one plugin 'calculator'" in w for w in by_name["seed-calc"]["warnings"])
    assert any("is overridden by plugin 'seed-calc'" in w for w in by_name["calculator"]["warnings"])
