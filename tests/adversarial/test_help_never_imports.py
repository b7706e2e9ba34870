"""``--help``, ``--version`` and Tab completion never import plugin code.

A real plugin writes a marker file whenever it is imported and, when ``HANG_AT_IMPORT`` is set, then
blocks for good.  Help, the version and completions must answer at once and leave no marker: the plugins'
own commands are listed from the last load's saved state, not by loading them.  A command that shows what
loaded plugins offer (``tools list``) still imports them.  The subprocess timeouts are a safety net only.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CLI, cli_env, write_plugin

SAFETY = 60

HANGING = """
import os
import threading
from pathlib import Path

Path(os.environ["IMPORT_MARKER"]).write_text("imported", encoding="utf-8")
if os.environ.get("HANG_AT_IMPORT"):
    threading.Event().wait()


def setup(parser):
    parser.add_argument("--loud", action="store_true")


def register(ctx):
    ctx.register_cli_command("hang-cli", "Talks to the hanging service", setup, lambda args: 0)
    ctx.register_tool("hang_tool", "demo", {"name": "hang_tool", "parameters": {"type": "object"}},
                      lambda args, **kw: "{}")
"""


@pytest.fixture
def hanging(home: Path, tmp_path: Path, bundled: Path) -> dict[str, str]:
    """A home with the hanging plugin (in a folder whose name is not the plugin's); the environment."""
    write_plugin(home / "plugins", "hang_folder", HANGING, manifest={"name": "hanger", "version": "1.0"})
    return cli_env(
        home,
        HERMES_BUNDLED_PLUGINS=str(bundled),
        IMPORT_MARKER=str(tmp_path / "imported.txt"),
    )


def run(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [*CLI, *args], env={**env, **extra}, capture_output=True, text=True, timeout=SAFETY, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hermes-kernel {' '.join(args)} hung on a plugin's import")


def complete(env: dict[str, str], tmp_path: Path, line: str) -> list[str]:
    answer = tmp_path / "answer.txt"
    answer.unlink(missing_ok=True)
    completing = {
        **env,
        "HANG_AT_IMPORT": "1",
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_SHELL": "bash",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
    }
    script = Path(sys.executable).parent / "hermes-kernel"
    try:
        proc = subprocess.run(
            [str(script)], env=completing, capture_output=True, text=True, timeout=SAFETY, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"completing {line!r} hung on a plugin's import")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [word.strip() for word in answer.read_text(encoding="utf-8").split("\v") if word.strip()]


def load_once(env: dict[str, str], marker: Path) -> None:
    """A real load (not hanging) that saves the plugin list, then the marker is gone again."""
    proc = run(env, "plugins", "list", "--refresh")
    assert proc.returncode == 0, proc.stderr
    assert marker.exists()
    marker.unlink()


@pytest.mark.parametrize(
    "argv", [["--help"], ["-h"], [], ["--version"], ["plugins", "--help"], ["tools", "-h"]], ids=" ".join
)
def test_help_and_version_import_no_plugin(hanging: dict[str, str], tmp_path: Path, argv: list[str]) -> None:
    marker = tmp_path / "imported.txt"
    load_once(hanging, marker)
    proc = run(hanging, *argv, HANG_AT_IMPORT="1")
    assert proc.returncode in (0, 2), proc.stderr
    assert not marker.exists()
    if argv in (["--help"], ["-h"], []):
        # The plugin's command is still offered, from the last load's saved list, with its help.
        assert "hang-cli" in proc.stdout and "Talks to the hanging service" in proc.stdout


def test_help_in_a_home_never_loaded_imports_nothing_and_says_how_to_see_more(
    hanging: dict[str, str], tmp_path: Path
) -> None:
    proc = run(hanging, "--help", HANG_AT_IMPORT="1")
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "imported.txt").exists()
    assert "plugins list --refresh" in " ".join(proc.stdout.split())


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("hermes-kernel ", {"plugins", "tools", "hang-cli"}),
        ("hermes-kernel ha", {"hang-cli"}),
        ("hermes-kernel plugins ", {"list", "info"}),
        ("hermes-kernel --no", {"--no-color", "--no-plugins"}),
    ],
)
def test_completion_imports_no_plugin(
    hanging: dict[str, str], tmp_path: Path, line: str, expected: set[str]
) -> None:
    marker = tmp_path / "imported.txt"
    load_once(hanging, marker)
    assert expected <= set(complete(hanging, tmp_path, line))
    assert not marker.exists()


def test_commands_that_show_what_plugins_offer_still_load_them(
    hanging: dict[str, str], tmp_path: Path
) -> None:
    proc = run(hanging, "tools", "list")
    assert proc.returncode == 0, proc.stderr
    assert "hang_tool" in proc.stdout
    assert (tmp_path / "imported.txt").exists()


def test_the_plugin_command_itself_still_runs(hanging: dict[str, str], tmp_path: Path) -> None:
    load_once(hanging, tmp_path / "imported.txt")
    proc = run(hanging, "hang-cli", "--loud")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "imported.txt").exists()
