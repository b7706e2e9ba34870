"""Switching plugins off for one run, as pytest's ``-p no:NAME`` and llm's ``LLM_LOAD_PLUGINS`` do:
``--disable NAME`` (anywhere on the command line, repeatable), ``HERMES_DISABLE_PLUGINS=a,b``, and
``--no-plugins`` / ``HERMES_NO_PLUGINS=1``.  config.yaml is not touched."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CLI, cli_env

from kernel import Kernel

TOOL = """
import json

def register(ctx):
    ctx.register_tool({name!r}, "t", {{"description": "x", "parameters": {{"type": "object",
                      "properties": {{}}}}}}, lambda args, **kw: json.dumps({{"tool": {name!r}}}))
"""


def setup(plugin_dir: Callable[..., Path]) -> None:
    for name in ("alpha", "beta", "gamma"):
        plugin_dir(name, TOOL.format(name=f"{name}_tool"))


def test_the_variable_switches_plugins_off_for_the_run(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    setup(plugin_dir)
    monkeypatch.setenv("HERMES_DISABLE_PLUGINS", " alpha, ,gamma ")
    k = make_kernel()
    assert {p.name: p.enabled for p in k.plugins} == {"alpha": False, "beta": True, "gamma": False}
    assert k.plugin("alpha").error == "disabled for this run (--disable / HERMES_DISABLE_PLUGINS: 'alpha')"
    monkeypatch.setenv("HERMES_NO_PLUGINS", "1")
    k2 = make_kernel()
    assert not any(p.enabled for p in k2.plugins)
    assert k2.plugin("beta").error == "disabled for this run (--no-plugins / HERMES_NO_PLUGINS)"
    monkeypatch.setenv("HERMES_NO_PLUGINS", "0")
    assert make_kernel().plugin("beta").enabled


def cli(home: Path, bundled: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args],
        env=cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled), **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_disable_anywhere_on_the_command_line(
    plugin_dir: Callable[..., Path], home: Path, bundled: Path
) -> None:
    setup(plugin_dir)
    first = cli(home, bundled, "--disable", "alpha", "tools", "list", "--json")
    assert first.returncode == 0, first.stderr
    names = {t["function"]["name"] if "function" in t else t.get("name") for t in json.loads(first.stdout)}
    assert "alpha_tool" not in names and "beta_tool" in names
    after = cli(
        home, bundled, "plugins", "list", "--refresh", "--json", "--disable=beta", "--disable", "gamma"
    )
    assert after.returncode == 0, after.stderr
    state = {p["name"]: p["enabled"] for p in json.loads(after.stdout)}
    assert state == {"alpha": True, "beta": False, "gamma": False}
    assert "disabled" not in (home / "config.yaml").read_text() if (home / "config.yaml").exists() else True


def test_no_plugins_and_a_listing_that_follows_the_run(
    plugin_dir: Callable[..., Path], home: Path, bundled: Path
) -> None:
    """The last load's saved list depends on the run's choice: a listing after ``--no-plugins`` does not
    show plugins as disabled once the option is gone."""
    setup(plugin_dir)
    off = cli(home, bundled, "--no-plugins", "plugins", "list", "--refresh", "--json")
    assert {p["enabled"] for p in json.loads(off.stdout)} == {False}
    table = cli(home, bundled, "--no-plugins", "plugins", "list").stdout
    assert "disabled" in next(line for line in table.splitlines() if line.startswith("alpha "))
    plain = json.loads(cli(home, bundled, "plugins", "list", "--json").stdout)
    assert {p["listed_from"] for p in plain} == {"unknown"}  # not the disabled state of the other run


def test_disable_without_a_name_is_a_usage_error(home: Path, bundled: Path) -> None:
    proc = cli(home, bundled, "plugins", "list", "--disable")
    assert proc.returncode == 2 and "--disable needs a plugin name" in proc.stderr


FEEDS = """
def setup(parser):
    parser.add_argument("--disable", action="append", default=[])

def run(args):
    print("feeds disable:", ",".join(args.disable))
    return 0

def register(ctx):
    ctx.register_cli_command("feeds", "manage feeds", setup, run)
"""


def test_after_a_plugins_command_name_the_option_is_that_commands_own(
    plugin_dir: Callable[..., Path], home: Path, bundled: Path
) -> None:
    """``--disable`` before a plugin's command switches a plugin off; after the command's name it is the
    command's own option (a plugin may have one of that name)."""
    setup(plugin_dir)
    plugin_dir("feeds", FEEDS)
    proc = cli(home, bundled, "--disable", "alpha", "feeds", "--disable", "rss")
    assert proc.returncode == 0, proc.stderr
    assert "feeds disable: rss" in proc.stdout
    listed = cli(home, bundled, "plugins", "list", "--json", "--disable", "alpha")
    assert {p["name"]: p["enabled"] for p in json.loads(listed.stdout)}.get("alpha") is not True
