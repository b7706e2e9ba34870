"""A plugin tool that takes the name of a service's tool (``memory_search``) never shadows it silently.

The bundled ``sqlite`` memory provider registers ``memory_search`` and
``memory_store`` when it is active; a user plugin registers a
``memory_search`` of its own.  As documented (docs/plugins.md, "Tools"), a
bundled plugin's tool gives way to the user's — and now, whichever
registers first, the log holds a warning naming both owners and both
plugins' records (``plugins list``) say who holds the name.
"""

from __future__ import annotations

import json
import shutil
import types
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from conftest import REPO, agent_log, run_cli

from kernel import Kernel

SHADOW = """\
import json


def register(ctx):
    params = {"type": "object", "properties": {"query": {"type": "string"}}}
    schema = {"name": "memory_search", "parameters": params}
    ctx.register_tool(
        name="memory_search", toolset="mine", schema=schema,
        handler=lambda args, **kw: json.dumps({"from": "shadow"}),
    )
"""

MEMORY = {"memory": {"provider": "sqlite"}}
MANIFEST = {"name": "shadow", "version": "0.1.0", "provides_tools": ["memory_search"]}


@pytest.fixture(autouse=True)
def sqlite_bundled(bundled: Path) -> None:
    shutil.copytree(REPO / "extensions" / "memory" / "sqlite", bundled / "memory" / "sqlite")


def shadowing_warnings(home: Path) -> list[dict[str, str]]:
    """The WARNING records of agent.log that name the tool ``memory_search`` and both its owners."""
    found = []
    for line in agent_log(home).splitlines():
        if "[warning" in line and "memory_search" in line and "shadow" in line and "memory/sqlite" in line:
            found.append(line)
    return found


def assert_told_on_both(k: Kernel) -> None:
    assert k.tools.get("memory_search").plugin == "shadow", "the user's tool wins over a bundled one"
    assert k.tools.get("memory_store").plugin == "memory/sqlite"
    mine = [w for w in k.plugin("shadow").warnings if "memory_search" in w and "memory/sqlite" in w]
    theirs = [w for w in k.plugin("memory/sqlite").warnings if "memory_search" in w and "shadow" in w]
    assert mine and theirs, (k.plugin("shadow").warnings, k.plugin("memory/sqlite").warnings)
    assert shadowing_warnings(k.home), agent_log(k.home)
    result = json.loads(k.tools.dispatch("memory_search", {"query": "x"}))
    assert result == {"from": "shadow"}


def test_a_plugin_tool_registered_before_the_service_tool_warns(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    """The user plugin loads first; the memory provider's tools come when memory is first selected."""
    plugin_dir("shadow", SHADOW, manifest=MANIFEST)
    k = make_kernel(config=MEMORY)
    assert k.providers.memory() is not None
    assert_told_on_both(k)


def test_a_plugin_tool_registered_after_the_service_tool_warns(make_kernel: Callable[..., Kernel]) -> None:
    """The memory provider is active first; the other plugin is added later, at run time."""
    k = make_kernel(config=MEMORY)
    assert k.providers.memory() is not None and k.tools.get("memory_search").plugin == "memory/sqlite"
    module = types.ModuleType("shadow")
    exec(compile(SHADOW, "<shadow plugin>", "exec"), module.__dict__)
    k.register(module, name="shadow")
    assert_told_on_both(k)


def test_tools_list_and_plugins_list_show_who_holds_the_name(
    home: Path, bundled: Path, plugin_dir: Callable[..., Path]
) -> None:
    """``tools list`` (a load) shows the winner; ``plugins list`` (the saved state) names both owners."""
    plugin_dir("shadow", SHADOW, manifest=MANIFEST)
    (home / "config.yaml").write_text(yaml.safe_dump(MEMORY), encoding="utf-8")
    env = {"HERMES_BUNDLED_PLUGINS": str(bundled)}
    proc = run_cli(home, "tools", "list", "--json", **env)
    assert proc.returncode == 0, proc.stderr
    assert {t["function"]["name"]: t["plugin"] for t in json.loads(proc.stdout)}["memory_search"] == "shadow"
    proc = run_cli(home, "plugins", "list", "--json", **env)
    assert proc.returncode == 0, proc.stderr
    rows = {row["name"]: row for row in json.loads(proc.stdout)}
    for name, other in (("shadow", "memory/sqlite"), ("memory/sqlite", "shadow")):
        assert any("memory_search" in w and other in w for w in rows[name]["warnings"]), rows[name]
