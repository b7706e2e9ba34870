"""`hermes-kernel plugins list` never imports plugin code: it lists from manifests, with the state and the
counts of the last load (the saved list) marked as such, or, when there was none, enabled or not from the
config with what the manifest declares, "not loaded yet"; `--refresh` loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from conftest import CLI, cli_env, write_plugin

from kernel import Kernel

MARKER_PLUGIN = """
import os, pathlib
marks = pathlib.Path(os.environ["HERMES_HOME"]) / "imports.txt"
with marks.open("a") as f:
    f.write("imported\\n")

SCHEMA = {"description": "d", "parameters": {"type": "object", "properties": {}}}

def register(ctx):
    ctx.register_tool("marked", "marker", SCHEMA, lambda args, **kw: "{}")
"""


@pytest.fixture
def cli_home(tmp_path: Path, bundled: Path) -> Path:
    home = tmp_path / "cli-home"
    write_plugin(
        home / "plugins", "marker", MARKER_PLUGIN, manifest={"name": "marker", "provides_tools": ["marked"]}
    )
    write_plugin(home / "plugins", "broken", "raise RuntimeError('broken at import')\n")
    return home


def plugins_list(home: Path, *extra: str, **env: str) -> list[dict]:
    result = subprocess.run(
        [*CLI, "plugins", "list", "--json", *extra],
        capture_output=True,
        text=True,
        env=cli_env(home, HERMES_BUNDLED_PLUGINS=os.environ["HERMES_BUNDLED_PLUGINS"], **env),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def imports(home: Path) -> int:
    path = home / "imports.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def by_name(records: list[dict]) -> dict[str, dict]:
    return {r["name"]: r for r in records}


def test_the_first_listing_imports_nothing_and_says_what_it_does_not_know(cli_home: Path) -> None:
    first = by_name(plugins_list(cli_home))
    assert imports(cli_home) == 0
    for name in ("marker", "broken"):
        assert first[name]["listed_from"] == "unknown" and first[name]["state"] == "not loaded yet"
        assert first[name]["tools"] is None and first[name]["hooks"] is None
        # Enabled is the config's answer; whether the import works only a load tells.
        assert first[name]["error"] is None and first[name]["enabled"] is True
    assert first["marker"]["declared"]["tools"] == ["marked"] and first["broken"]["declared"]["tools"] is None
    table = subprocess.run(
        [*CLI, "plugins", "list"],
        capture_output=True,
        text=True,
        env=cli_env(cli_home, HERMES_BUNDLED_PLUGINS=os.environ["HERMES_BUNDLED_PLUGINS"]),
        timeout=120,
    ).stdout
    row = next(line for line in table.splitlines() if line.startswith("marker "))
    assert row.split()[-6:] == ["enabled", "1", "declared", "?", "not", "yet"]
    broken = next(line for line in table.splitlines() if line.startswith("broken "))
    assert broken.split()[-5:] == ["enabled", "?", "?", "not", "yet"]
    assert "? not declared in plugin.yaml: known once the plugin loads." in table and "--refresh" in table
    assert imports(cli_home) == 0


def test_after_a_load_the_listing_shows_its_outcome_and_imports_nothing(cli_home: Path) -> None:
    loaded = plugins_list(cli_home, "--refresh")
    assert imports(cli_home) == 1
    second = plugins_list(cli_home)
    assert imports(cli_home) == 1  # the list of the last load was reused
    assert [{k: v for k, v in r.items() if k != "listed_from"} for r in second] == [
        {k: v for k, v in r.items() if k != "listed_from"} for r in loaded
    ]
    assert {r["listed_from"] for r in second} == {"current"}
    assert by_name(second)["marker"]["tools"] == ["marked"]
    broken = by_name(second)["broken"]
    assert not broken["enabled"] and "broken at import" in broken["error"]


def test_a_changed_plugin_file_shows_the_last_loads_counts_marked(cli_home: Path) -> None:
    plugins_list(cli_home, "--refresh")
    init = cli_home / "plugins" / "marker" / "__init__.py"
    init.write_text(init.read_text() + "\n# changed\n")
    os.utime(init, ns=(init.stat().st_mtime_ns + 10**9, init.stat().st_mtime_ns + 10**9))
    marker = by_name(plugins_list(cli_home))["marker"]
    assert imports(cli_home) == 1
    assert marker["listed_from"] == "last load" and marker["tools"] == ["marked"] and marker["enabled"]
    table = subprocess.run(
        [*CLI, "plugins", "list"],
        capture_output=True,
        text=True,
        env=cli_env(cli_home, HERMES_BUNDLED_PLUGINS=os.environ["HERMES_BUNDLED_PLUGINS"]),
        timeout=120,
    ).stdout
    row = next(line for line in table.splitlines() if line.startswith("marker "))
    assert row.split()[-5:] == ["enabled*", "1*", "0*", "last", "load*"]
    assert "* as of the last load; things changed since." in table
    assert imports(cli_home) == 1


def test_config_and_environment_changes_are_seen_without_loading(cli_home: Path) -> None:
    write_plugin(
        cli_home / "plugins",
        "needy",
        "def register(ctx):\n    pass\n",
        manifest={"name": "needy", "requires_env": ["NEEDY_KEY"]},
    )
    needy = by_name(plugins_list(cli_home))["needy"]
    assert "missing: NEEDY_KEY" in needy["error"] and needy["listed_from"] == "current"
    assert by_name(plugins_list(cli_home, NEEDY_KEY="set"))["needy"]["listed_from"] == "unknown"
    (cli_home / "config.yaml").write_text(yaml.safe_dump({"plugins": {"disabled": ["marker"]}}))
    assert "disabled via config" in by_name(plugins_list(cli_home))["marker"]["error"]
    assert imports(cli_home) == 0


def test_refresh_and_debug_always_load(cli_home: Path) -> None:
    plugins_list(cli_home)
    plugins_list(cli_home, "--refresh")
    assert imports(cli_home) == 1
    plugins_list(cli_home, "--refresh")
    assert imports(cli_home) == 2
    plugins_list(cli_home, HERMES_PLUGINS_DEBUG="1")
    assert imports(cli_home) == 3


def test_cached_listing_imports_no_plugin_code_or_http_client(cli_home: Path) -> None:
    """Nor another command's module of the CLI (``plugins list`` builds its own part of the parser)."""
    plugins_list(cli_home, "--refresh")
    others = ("chat", "doctor", "gateway", "hooks", "logs", "mcp", "offered")
    code = (
        "import sys\n"
        "from kernel.cli import main\n"
        "main(['plugins', 'list'])\n"
        "loaded = [m for m in sys.modules if m.startswith('hermes_plugins') or m == 'httpx'\n"
        f"          or m.split('.')[-1] in {others!r} and m.startswith('kernel.cli.')]\n"
        "print('LOADED', loaded)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=cli_env(cli_home, HERMES_BUNDLED_PLUGINS=os.environ["HERMES_BUNDLED_PLUGINS"]),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "LOADED []" in result.stdout
    assert "marker" in result.stdout
    assert imports(cli_home) == 1


def test_a_plugins_info_has_every_field_and_stays_frozen(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    """``PluginInfo`` as the kernel makes it for a record (without the dataclass's per-field setattr):
    every field of the class there, equal to one built with them, and still read-only."""
    import dataclasses

    from kernel import PluginInfo

    plugin_dir("fielded", "def register(ctx):\n    ctx.register_hook('pre_llm_call', lambda **kw: 'x')\n")
    k = make_kernel()
    info = k.plugin("fielded")
    assert set(vars(info)) == {f.name for f in dataclasses.fields(PluginInfo)}
    assert PluginInfo(**info.to_dict()) == info and info.hooks == ["pre_llm_call"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.enabled = False  # type: ignore[misc]
