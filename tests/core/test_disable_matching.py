"""``--disable NAME`` and ``HERMES_DISABLE_PLUGINS`` match a plugin by its name, its folder, its
entry-point name or its category path, in any case; the command line says which plugin each name
switched off and warns about a name that matched nothing.

Real plugin folders (whose folder names differ from their manifests' names), a bundled plugin under a
category folder, and a real installed distribution's entry point.
"""

from __future__ import annotations

import importlib
import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import CLI, cli_env, evict_package, pip_install_fixture, write_pip_project, write_plugin

from kernel import Kernel

TOOL = """
import json
import os
from pathlib import Path

def register(ctx):
    marks = os.environ.get("DISABLE_MARKS")
    if marks:
        (Path(marks) / {name!r}).write_text("imported", encoding="utf-8")
    ctx.register_tool({name!r}, "t", {{"description": "x", "parameters": {{"type": "object",
                      "properties": {{}}}}}}, lambda args, **kw: json.dumps({{"tool": {name!r}}}))
"""


@pytest.fixture(scope="module")
def ep_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real distribution with the entry point ``Shouty-EP`` (module ``shouty_ep``), pip-installed."""
    source = tmp_path_factory.mktemp("ep-source")
    write_pip_project(source, "shouty-ep", TOOL.format(name="shouty_tool"), entry_point="Shouty-EP")
    return pip_install_fixture(source, tmp_path_factory.mktemp("ep-target"))["target"]


@pytest.fixture
def plugins(home: Path, bundled: Path, tmp_path: Path) -> Path:
    """Three plugins: folder ``weather_dir`` (name ``weather``), folder ``Mixed`` (name ``MixedCase``),
    and the bundled ``platforms/chatty``; import marks go into the returned folder."""
    write_plugin(
        home / "plugins", "weather_dir", TOOL.format(name="weather_tool"), manifest={"name": "weather"}
    )
    write_plugin(home / "plugins", "Mixed", TOOL.format(name="mixed_tool"), manifest={"name": "MixedCase"})
    write_plugin(
        bundled / "platforms", "chatty", TOOL.format(name="chatty_tool"), manifest={"name": "chatty"}
    )
    marks = tmp_path / "marks"
    marks.mkdir()
    return marks


@pytest.fixture
def ep_site(ep_target: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    evict_package("shouty_ep")
    monkeypatch.syspath_prepend(str(ep_target))
    monkeypatch.setenv("HERMES_KERNEL_ENTRY_POINTS", str(ep_target))
    importlib.invalidate_caches()
    yield ep_target
    evict_package("shouty_ep")
    importlib.invalidate_caches()


def enabled(k: Kernel) -> dict[str, bool]:
    return {p.name: p.enabled for p in k.plugins}


@pytest.mark.parametrize(
    "given",
    [
        "WEATHER_DIR",
        "Weather",
        "weather_dir",
        "mixedcase",
        "MIXED",
        "Platforms/Chatty",
        "CHATTY",
        "shouty-ep",
    ],
)
def test_a_name_matches_by_name_folder_entry_point_or_category_in_any_case(
    plugins: Path,
    ep_site: Path,
    make_kernel: Callable[..., Kernel],
    monkeypatch: pytest.MonkeyPatch,
    given: str,
) -> None:
    monkeypatch.setenv("DISABLE_MARKS", str(plugins))
    monkeypatch.setenv("HERMES_DISABLE_PLUGINS", f"{given}, nothing-like-it")
    k = make_kernel()
    target = {
        "weather_dir": "weather",
        "weather": "weather",
        "mixedcase": "MixedCase",
        "mixed": "MixedCase",
        "platforms/chatty": "platforms/chatty",
        "chatty": "platforms/chatty",
        "shouty-ep": "Shouty-EP",
    }[given.lower()]
    state = enabled(k)
    assert state[target] is False, state
    assert all(on for name, on in state.items() if name != target), state
    tool = {"weather": "weather_tool", "MixedCase": "mixed_tool", "platforms/chatty": "chatty_tool"}
    assert not (plugins / tool.get(target, "shouty_tool")).exists()  # never imported
    assert given in (k.plugin(target).error or "")


def run(
    home: Path, bundled: Path, ep_target: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        env=cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled), PYTHONPATH=str(ep_target), **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_command_line_says_what_each_name_switched_off(
    plugins: Path, home: Path, bundled: Path, ep_target: Path
) -> None:
    proc = run(
        home,
        bundled,
        ep_target,
        "--disable",
        "Weather_Dir",
        "tools",
        "list",
        "--json",
        "--disable=platforms/CHATTY,SHOUTY-EP",
        "--disable",
        "no-such-plugin",
        DISABLE_MARKS=str(plugins),
    )
    assert proc.returncode == 0, proc.stderr
    tools = {t["function"]["name"] for t in json.loads(proc.stdout)}
    assert "mixed_tool" in tools
    assert not tools & {"weather_tool", "chatty_tool", "shouty_tool"}
    assert sorted(p.name for p in plugins.iterdir()) == ["mixed_tool"]
    err = proc.stderr
    assert "--disable Weather_Dir: plugin 'weather' is off for this run" in err
    assert "--disable platforms/CHATTY: plugin 'platforms/chatty' is off for this run" in err
    assert "--disable SHOUTY-EP: plugin 'Shouty-EP' is off for this run" in err
    [warning] = [line for line in err.splitlines() if "no-such-plugin" in line]
    assert warning.startswith("warning:") and "matches no plugin" in warning


def test_the_variable_is_reported_too(plugins: Path, home: Path, bundled: Path, ep_target: Path) -> None:
    proc = run(home, bundled, ep_target, "tools", "list", HERMES_DISABLE_PLUGINS="mixed,Nope")
    assert proc.returncode == 0, proc.stderr
    assert "mixed_tool" not in proc.stdout and "weather_tool" in proc.stdout
    assert "HERMES_DISABLE_PLUGINS mixed: plugin 'MixedCase' is off for this run" in proc.stderr
    assert any("Nope" in line and "matches no plugin" in line for line in proc.stderr.splitlines())


def test_help_says_nothing_about_disabled_plugins(
    plugins: Path, home: Path, bundled: Path, ep_target: Path
) -> None:
    proc = run(home, bundled, ep_target, "--disable", "nope", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
