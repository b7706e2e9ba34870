"""`hermes-kernel plugins list` reuses the last load's list and imports no plugin code while it is current."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import CLI, cli_env, write_plugin

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


def test_second_listing_imports_nothing_and_shows_the_same(cli_home: Path) -> None:
    first = plugins_list(cli_home)
    assert imports(cli_home) == 1
    second = plugins_list(cli_home)
    assert imports(cli_home) == 1  # the list of the last load was reused
    assert second == first
    assert by_name(second)["marker"]["tools"] == ["marked"]
    broken = by_name(second)["broken"]
    assert not broken["enabled"] and "broken at import" in broken["error"]


def test_a_changed_plugin_file_is_loaded_again(cli_home: Path) -> None:
    plugins_list(cli_home)
    init = cli_home / "plugins" / "marker" / "__init__.py"
    init.write_text(init.read_text() + "\n# changed\n")
    os.utime(init, ns=(init.stat().st_mtime_ns + 10**9, init.stat().st_mtime_ns + 10**9))
    plugins_list(cli_home)
    assert imports(cli_home) == 2


def test_config_and_environment_changes_are_seen(cli_home: Path) -> None:
    write_plugin(
        cli_home / "plugins",
        "needy",
        "def register(ctx):\n    pass\n",
        manifest={"name": "needy", "requires_env": ["NEEDY_KEY"]},
    )
    assert "missing: NEEDY_KEY" in by_name(plugins_list(cli_home))["needy"]["error"]
    assert by_name(plugins_list(cli_home, NEEDY_KEY="set"))["needy"]["enabled"]
    (cli_home / "config.yaml").write_text(yaml.safe_dump({"plugins": {"disabled": ["marker"]}}))
    assert "disabled via config" in by_name(plugins_list(cli_home))["marker"]["error"]


def test_refresh_and_debug_always_load(cli_home: Path) -> None:
    plugins_list(cli_home)
    plugins_list(cli_home, "--refresh")
    assert imports(cli_home) == 2
    plugins_list(cli_home, HERMES_PLUGINS_DEBUG="1")
    assert imports(cli_home) == 3


def test_cached_listing_imports_no_plugin_code_or_http_client(cli_home: Path) -> None:
    plugins_list(cli_home)
    code = (
        "import sys\n"
        "from kernel.cli import main\n"
        "main(['plugins', 'list'])\n"
        "loaded = [m for m in sys.modules if m.startswith('hermes_plugins') or m == 'httpx']\n"
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
