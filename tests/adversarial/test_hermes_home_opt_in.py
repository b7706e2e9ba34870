"""A home Hermes Agent has used stays opt-in, as Hermes 0.19 keeps it.

Hermes runs a user's plugins only when ``config.yaml`` names them in ``plugins.enabled``; a home it has
used (``_config_version`` in config.yaml, ``SOUL.md``, ``sessions/``, ``state.db``) and that has no such
list must not start running the code in its ``plugins/`` folder because the kernel was pointed at it.
Each attack here puts a plugin that writes a file the moment it is imported into such a home: the file
must not appear until ``plugins enable`` (or ``install --enable``) turns it on.  A home the kernel made
keeps running its plugins; bundled plugins load in both.  Real homes, real subprocesses, a real
pip-installed distribution for the entry points.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, cli_env, pip_install_fixture, write_plugin
from test_cli_admin import ok, run, run_in_pty

MARKS = "OPT_IN_MARKS"

SPY = """
import json
import os
import pathlib

pathlib.Path(os.environ["OPT_IN_MARKS"], {name!r}).write_text("imported")


def register(ctx):
    ctx.register_tool({tool!r}, "spy", {{"description": "d", "parameters": {{"type": "object",
                      "properties": {{}}}}}}, lambda args, **kw: json.dumps({{"ok": True}}))
"""


def spy(root: Path, name: str) -> Path:
    """A plugin that leaves ``<marks>/<name>`` behind as soon as its module is imported."""
    manifest = {"name": name, "version": "1.0.0", "provides_tools": [f"{name}_tool"]}
    return write_plugin(root, name, SPY.format(name=name, tool=f"{name}_tool"), manifest)


def write_config(home: Path, data: dict[str, Any]) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")


def read_config(home: Path) -> dict[str, Any]:
    path = home / "config.yaml"
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.is_file() else {}


def _config_version(home: Path) -> None:
    write_config(home, {"_config_version": 17})


def _soul(home: Path) -> None:
    (home / "SOUL.md").write_text("You are a helpful assistant.\n", encoding="utf-8")


def _sessions(home: Path) -> None:
    (home / "sessions").mkdir()


def _state_db(home: Path) -> None:
    (home / "state.db").write_bytes(b"SQLite format 3\x00")


#: Each of Hermes' own traces in a home, made as Hermes leaves it.
MARKERS: dict[str, Callable[[Path], None]] = {
    "_config_version": _config_version,
    "SOUL.md": _soul,
    "sessions": _sessions,
    "state.db": _state_db,
}


@pytest.fixture
def env(home: Path, bundled: Path, marks: Path) -> dict[str, str]:
    """The CLI's environment: ``home``, a bundled folder with one plain plugin, the marks folder."""
    spy(bundled, "kept")
    return cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled), **{MARKS: str(marks)})


def plugins(env: dict[str, str], *extra: str) -> dict[str, dict[str, Any]]:
    data = json.loads(ok(run(env, "plugins", "list", "--json", *extra)).stdout)
    return {row["name"]: row for row in data}


def imported(marks: Path) -> list[str]:
    return sorted(p.name for p in marks.iterdir())


# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize("marker", sorted(MARKERS))
def test_a_hermes_home_without_an_allow_list_imports_no_user_plugin_until_it_is_enabled(
    marker: str, home: Path, env: dict[str, str], marks: Path
) -> None:
    MARKERS[marker](home)
    spy(home / "plugins", "spy")
    rows = plugins(env, "--refresh")
    assert imported(marks) == ["kept"]  # the bundled plugin ran; the user's did not
    assert rows["kept"]["enabled"] is True
    assert rows["spy"]["enabled"] is False
    assert "hermes-kernel plugins enable spy" in rows["spy"]["error"] and marker in rows["spy"]["error"]
    info = json.loads(ok(run(env, "plugins", "info", "spy", "--json")).stdout)
    assert info["status"] == "not enabled" and "plugins enable spy" in info["error"]
    assert imported(marks) == ["kept"]
    assert "spy_tool" not in ok(run(env, "tools", "list")).stdout

    ok(run(env, "plugins", "enable", "spy"))
    assert "spy" in read_config(home)["plugins"]["enabled"]
    rows = plugins(env, "--refresh")
    assert imported(marks) == ["kept", "spy"]
    # The list enable wrote keeps the bundled plugin that ran before it existed.
    assert rows["spy"]["enabled"] is True and rows["kept"]["enabled"] is True, rows
    if marker == "_config_version":
        assert read_config(home)["_config_version"] == 17


def test_a_hermes_home_with_an_allow_list_loads_what_it_lists(
    home: Path, env: dict[str, str], marks: Path
) -> None:
    write_config(home, {"_config_version": 17, "plugins": {"enabled": ["spy", "kept"]}})
    spy(home / "plugins", "spy")
    spy(home / "plugins", "other")
    rows = plugins(env, "--refresh")
    assert imported(marks) == ["kept", "spy"]
    assert not rows["other"]["enabled"]


def test_a_home_the_kernel_made_runs_the_plugins_in_its_folder(
    home: Path, env: dict[str, str], marks: Path
) -> None:
    (home / "logs").mkdir()
    (home / "memory").mkdir()  # the kernel's own files are no trace of Hermes
    write_config(home, {"model": {"provider": "scripted"}})
    spy(home / "plugins", "spy")
    rows = plugins(env, "--refresh")
    assert imported(marks) == ["kept", "spy"] and rows["spy"]["enabled"]


def test_the_listing_from_the_saved_state_shows_the_rule_once_hermes_left_a_trace(
    home: Path, env: dict[str, str], marks: Path
) -> None:
    """``plugins list`` without ``--refresh`` answers from the last load's saved state: a ``SOUL.md``
    written since makes that state stale, and the listing says why the plugin stays off."""
    spy(home / "plugins", "spy")
    assert plugins(env, "--refresh")["spy"]["enabled"]
    _soul(home)
    for path in marks.iterdir():
        path.unlink()
    row = plugins(env)["spy"]
    assert row["enabled"] is False and "plugins enable spy" in row["error"], row
    assert imported(marks) == []
    assert "spy_tool" not in ok(run(env, "tools", "list")).stdout
    assert imported(marks) == ["kept"]


def test_project_plugins_stay_off_in_a_hermes_home(home: Path, env: dict[str, str], marks: Path) -> None:
    _soul(home)
    work = Path(os.getcwd())
    spy(work / ".hermes" / "plugins", "proj")
    rows = plugins({**env, "HERMES_ENABLE_PROJECT_PLUGINS": "1"}, "--refresh")
    assert rows["proj"]["source"] == "project" and not rows["proj"]["enabled"]
    assert imported(marks) == ["kept"]


# --------------------------------------------------------------------------- entry points

FIXTURE = REPO / "tests" / "fixtures" / "ep_plugins"


@pytest.fixture(scope="module")
def ep_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test distribution with entry-point plugins, pip-installed once (no network)."""
    target = pip_install_fixture(FIXTURE, tmp_path_factory.mktemp("ep-site"))["target"]
    assert isinstance(target, Path)
    return target


def test_entry_point_plugins_stay_off_in_a_hermes_home(
    home: Path, env: dict[str, str], marks: Path, ep_target: Path
) -> None:
    _soul(home)
    env = {**env, "PYTHONPATH": str(ep_target), "HERMES_EP_FIXTURE_MARKS": str(marks)}
    env["HERMES_KERNEL_ENTRY_POINTS"] = str(ep_target)
    rows = plugins(env, "--refresh")
    eps = {name: row for name, row in rows.items() if row["source"] == "entrypoint"}
    assert eps and not any(row["enabled"] for row in eps.values()), eps
    assert all(f"plugins enable {name}" in row["error"] for name, row in eps.items())
    assert imported(marks) == ["kept"]  # no module of the distribution was imported
    ok(run(env, "plugins", "enable", "ep-native"))
    rows = plugins(env, "--refresh")
    assert rows["ep-native"]["enabled"] and not rows["ep-module"]["enabled"]
    assert "ep-native-import" in imported(marks)


# --------------------------------------------------------------------------- install


def test_install_without_a_terminal_leaves_it_off_and_prints_the_command(
    home: Path, env: dict[str, str], marks: Path, tmp_path: Path
) -> None:
    _soul(home)
    source = spy(tmp_path / "src", "fresh")
    result = ok(run(env, "plugins", "install", str(source), "--no-input"))
    assert "hermes-kernel plugins enable fresh" in result.stdout + result.stderr
    assert "enabled" not in read_config(home).get("plugins", {})
    assert not plugins(env, "--refresh")["fresh"]["enabled"]
    assert "fresh" not in imported(marks)


def test_install_enable_writes_the_allow_list_and_no_enable_does_not(
    home: Path, env: dict[str, str], marks: Path, tmp_path: Path
) -> None:
    _soul(home)
    ok(run(env, "plugins", "install", str(spy(tmp_path / "a", "first")), "--no-enable"))
    assert "enabled" not in read_config(home).get("plugins", {})
    ok(run(env, "plugins", "install", str(spy(tmp_path / "b", "second")), "--enable"))
    assert "second" in read_config(home)["plugins"]["enabled"]
    rows = plugins(env, "--refresh")
    assert rows["second"]["enabled"] and not rows["first"]["enabled"] and rows["kept"]["enabled"]
    assert "first" not in imported(marks) and "second" in imported(marks)


def test_install_on_a_terminal_asks_before_enabling(
    home: Path, env: dict[str, str], marks: Path, tmp_path: Path
) -> None:
    _soul(home)
    source = spy(tmp_path / "src", "asked")
    code, screen = run_in_pty(env, ["plugins", "install", str(source)], [("[y/N]", "y")])
    assert code == 0, screen
    assert "asked" in read_config(home)["plugins"]["enabled"]
    assert plugins(env, "--refresh")["asked"]["enabled"]


def test_install_in_a_kernel_made_home_says_the_plugin_runs_anyway(
    home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    result = ok(run(env, "plugins", "install", str(spy(tmp_path / "src", "plain")), "--no-enable"))
    assert "no plugins.enabled" in result.stdout
    assert "enabled" not in read_config(home).get("plugins", {})
    assert plugins(env, "--refresh")["plain"]["enabled"]


# --------------------------------------------------------------------------- telling the user


def test_the_first_run_says_once_which_plugins_were_left_off(home: Path, marks: Path) -> None:
    """The checkout's bundled plugins (the scripted model): the notice comes with the first turn, not
    with the second; a plugin that appears later is told about once too."""
    _soul(home)
    (home / "script.yaml").write_text(yaml.safe_dump(["one"]), encoding="utf-8")
    write_config(home, {"model": {"provider": "scripted", "script": "script.yaml"}})
    spy(home / "plugins", "spy")
    env = cli_env(home, **{MARKS: str(marks)})
    first = ok(run(env, "run", "hi"))
    assert first.stdout == "one\n"
    assert "spy" in first.stderr and "hermes-kernel plugins enable spy" in first.stderr
    second = ok(run(env, "run", "hi"))
    assert second.stdout == "one\n" and "spy" not in second.stderr, second.stderr
    spy(home / "plugins", "later")
    third = ok(run(env, "run", "hi"))
    assert "later" in third.stderr and "plugins enable spy" not in third.stderr
    assert imported(marks) == []


def test_doctor_names_the_plugins_left_off_and_then_chat_does_not_repeat_it(home: Path, marks: Path) -> None:
    _soul(home)
    (home / "script.yaml").write_text(yaml.safe_dump(["one"]), encoding="utf-8")
    write_config(home, {"model": {"provider": "scripted", "script": "script.yaml"}})
    spy(home / "plugins", "spy")
    env = cli_env(home, **{MARKS: str(marks)})
    doctor = run(env, "doctor", "--json")
    findings = json.loads(doctor.stdout)["findings"]
    about = [f for f in findings if f["subject"] == "'spy'"]
    assert about and about[0]["fix"] == "hermes-kernel plugins enable spy", findings
    assert "All is well" not in run(env, "doctor").stdout
    chat = ok(run(env, "chat", stdin="hello\n"))
    assert "plugins enable spy" not in chat.stderr, chat.stderr
    assert imported(marks) == []


def test_doctor_does_not_say_all_is_well_while_memory_is_off_by_a_misspelled_key(home: Path) -> None:
    """``memory.provder``: memory is off; doctor warns and does not end with "All is well".  The
    checkout's bundled plugins (IRC among them) are loaded: no reason is said twice."""
    write_config(home, {"memory": {"provder": "sqlite"}})
    result = run(cli_env(home), "doctor")
    assert result.returncode == 0, result.stderr
    assert "memory.provder" in result.stdout
    assert "All is well" not in result.stdout
    assert "not enabled: not enabled" not in result.stdout
    write_config(home, {"memory": {"provider": "sqlite"}})
    assert "All is well" in ok(run(cli_env(home), "doctor")).stdout
