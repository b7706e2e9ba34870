"""``ctx.register_cli_command``: plugin subcommands of the real ``hermes-kernel`` command line.

Every test writes real plugin directories into a tmp ``HERMES_HOME`` and runs ``python -m kernel``
as a subprocess; the bundled plugins come from an empty directory unless a test needs the real ones.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import CLI, cli_env, write_plugin

WEATHER = """
import sys


def setup(parser):
    actions = parser.add_subparsers(dest="action", required=True)
    status = actions.add_parser("status", help="Show the weather service status")
    status.add_argument("--city", default="Oslo")
    code = actions.add_parser("code", help="Exit with a code")
    code.add_argument("value", type=int)
    actions.add_parser("fail", help="Always fails")


def handle(args):
    if args.action == "status":
        print(f"weather status: ok for {args.city}")
        return None
    if args.action == "code":
        print(f"exiting with {args.value}")
        return args.value
    raise RuntimeError("the weather station is on fire")


def register(ctx):
    ctx.register_cli_command(
        "weather-cli",
        "Weather service tools",
        setup,
        handle,
        description="Inspect the weather service from the command line.",
    )
"""

FUNCY = """
def greet(args):
    print(f"hello {args.who} from func")
    return 0


def setup(parser):
    parser.add_argument("who")
    parser.set_defaults(func=greet)


def register(ctx):
    ctx.register_cli_command("funcy-cli", "Greets via set_defaults(func=...)", setup)
"""


def run_cli(home: Path, *args: str, bundled: Path | None = None) -> subprocess.CompletedProcess[str]:
    extra = {"HERMES_BUNDLED_PLUGINS": str(bundled)} if bundled is not None else {}
    return subprocess.run(
        [*CLI, *args], env=cli_env(home, **extra), capture_output=True, text=True, check=False
    )


def plugins_json(home: Path, bundled: Path) -> dict[str, dict[str, Any]]:
    proc = run_cli(home, "plugins", "list", "--refresh", "--json", bundled=bundled)
    assert proc.returncode == 0, proc.stderr
    return {p["name"]: p for p in json.loads(proc.stdout)}


@pytest.fixture
def weather_home(home: Path, bundled: Path) -> Path:
    write_plugin(home / "plugins", "weather", WEATHER)
    return home


# --------------------------------------------------------------------------- running plugin commands


def test_plugin_command_runs_with_exit_zero(weather_home, bundled):
    proc = run_cli(weather_home, "weather-cli", "status", bundled=bundled)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "weather status: ok for Oslo"
    proc = run_cli(weather_home, "weather-cli", "status", "--city", "Bergen", bundled=bundled)
    assert proc.returncode == 0, proc.stderr
    assert "weather status: ok for Bergen" in proc.stdout


def test_plugin_command_appears_in_plugin_info(weather_home, bundled):
    info = plugins_json(weather_home, bundled)["weather"]
    assert info["enabled"], info["error"]
    assert info["cli_commands"] == ["weather-cli"]
    assert info["warnings"] == []


def test_plugin_subcommand_help(weather_home, bundled):
    proc = run_cli(weather_home, "weather-cli", "--help", bundled=bundled)
    assert proc.returncode == 0, proc.stderr
    assert "status" in proc.stdout
    assert "Inspect the weather service from the command line." in proc.stdout


def test_handler_returning_an_int_is_the_exit_code(weather_home, bundled):
    proc = run_cli(weather_home, "weather-cli", "code", "7", bundled=bundled)
    assert proc.returncode == 7, proc.stderr
    assert "exiting with 7" in proc.stdout
    proc = run_cli(weather_home, "weather-cli", "code", "0", bundled=bundled)
    assert proc.returncode == 0, proc.stderr


def test_raising_handler_exits_1_naming_the_plugin(weather_home, bundled):
    proc = run_cli(weather_home, "weather-cli", "fail", bundled=bundled)
    assert proc.returncode == 1
    assert "weather" in proc.stderr
    assert "the weather station is on fire" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_handler_from_set_defaults_func(home, bundled):
    write_plugin(home / "plugins", "funcy", FUNCY)
    proc = run_cli(home, "funcy-cli", "world", bundled=bundled)
    assert proc.returncode == 0, proc.stderr
    assert "hello world from func" in proc.stdout


def test_usage_error_in_a_plugin_command_is_argparse_exit_2(weather_home, bundled):
    proc = run_cli(weather_home, "weather-cli", "code", "not-a-number", bundled=bundled)
    assert proc.returncode == 2
    assert "invalid int value" in proc.stderr


# --------------------------------------------------------------------------- refusals


CLASHY = """
import sys


def setup(parser):
    pass


def grab(args):
    print("PLUGIN ANSWER")
    return 0


def register(ctx):
    for name in ("plugins", "tools", "demo", "clashy-ok"):
        ctx.register_cli_command(name, "stolen " + name, setup, grab)
"""


@pytest.fixture
def clashy_home(home: Path, bundled: Path) -> Path:
    write_plugin(home / "plugins", "clashy", CLASHY)
    return home


def test_builtin_names_are_refused_with_warnings(clashy_home, bundled):
    info = plugins_json(clashy_home, bundled)["clashy"]
    assert info["enabled"], info["error"]
    assert info["cli_commands"] == ["clashy-ok"]
    for name in ("plugins", "tools", "demo"):
        matching = [w for w in info["warnings"] if name in w and "clashy" in w]
        assert matching, (name, info["warnings"])


def test_builtins_still_work_after_a_clash(clashy_home, bundled):
    listing = run_cli(clashy_home, "plugins", "list", "--refresh", bundled=bundled)
    assert listing.returncode == 0, listing.stderr
    assert "clashy" in listing.stdout
    assert "PLUGIN ANSWER" not in listing.stdout
    tools = run_cli(clashy_home, "tools", "list", bundled=bundled)
    assert tools.returncode == 0, tools.stderr
    assert "PLUGIN ANSWER" not in tools.stdout
    ok = run_cli(clashy_home, "clashy-ok", bundled=bundled)
    assert ok.returncode == 0, ok.stderr
    assert "PLUGIN ANSWER" in ok.stdout
    helped = run_cli(clashy_home, "--help", bundled=bundled)
    assert helped.returncode == 0, helped.stderr
    assert "stolen plugins" not in helped.stdout
    assert "stolen clashy-ok" in helped.stdout


def test_demo_still_works_after_a_clash(clashy_home):
    proc = run_cli(clashy_home, "demo")  # the real bundled calculator
    assert proc.returncode == 0, proc.stderr
    assert "calculate(" in proc.stdout
    assert "PLUGIN ANSWER" not in proc.stdout


def _shared(owner: str) -> str:
    return f"""
def setup(parser):
    pass


def handle(args):
    print("{owner} ran")


def register(ctx):
    ctx.register_cli_command("shared-cli", "{owner} help", setup, handle)
"""


def test_second_plugin_with_the_same_cli_name_is_refused(home, bundled):
    write_plugin(home / "plugins", "beta", _shared("beta"))
    write_plugin(home / "plugins", "alpha", _shared("alpha"))
    proc = run_cli(home, "shared-cli", bundled=bundled)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "alpha ran"
    plugins = plugins_json(home, bundled)
    assert plugins["alpha"]["cli_commands"] == ["shared-cli"]
    assert plugins["alpha"]["warnings"] == []
    beta = plugins["beta"]
    assert beta["enabled"], beta["error"]
    assert beta["cli_commands"] == []
    matching = [w for w in beta["warnings"] if "shared-cli" in w and "beta" in w]
    assert matching, beta["warnings"]
    assert "alpha" in matching[0]


# --------------------------------------------------------------------------- --help with broken plugins


def loaded_once(home: Path, bundled: Path) -> None:
    """A load that saves the plugin list: ``--help`` lists the plugins' commands from it (it imports
    no plugin code of its own)."""
    proc = run_cli(home, "plugins", "list", "--refresh", bundled=bundled)
    assert proc.returncode == 0, proc.stderr


def test_help_lists_plugin_commands(weather_home, bundled):
    loaded_once(weather_home, bundled)
    proc = run_cli(weather_home, "--help", bundled=bundled)
    assert proc.returncode == 0, proc.stderr
    assert "weather-cli" in proc.stdout
    assert "Weather service tools" in proc.stdout
    for builtin in ("plugins", "tools", "demo"):
        assert builtin in proc.stdout


BROKEN = {
    "raise-in-register": """
def setup(parser):
    pass

def register(ctx):
    ctx.register_cli_command("broken-cli", "never offered", setup, print)
    raise RuntimeError("register exploded")
""",
    "syntax-error": """
def register(ctx):
    return (
""",
    "sys-exit-in-register": """
import sys

def setup(parser):
    pass

def register(ctx):
    ctx.register_cli_command("broken-cli", "never offered", setup, print)
    sys.exit(4)
""",
    "sys-exit-at-import": """
import sys
sys.exit(5)
""",
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_help_survives_a_plugin_that_fails_to_load(weather_home, bundled, kind):
    write_plugin(weather_home / "plugins", "broken", BROKEN[kind])
    loaded_once(weather_home, bundled)
    proc = run_cli(weather_home, "--help", bundled=bundled)
    assert proc.returncode == 0, proc.stderr
    assert "weather-cli" in proc.stdout
    assert "broken-cli" not in proc.stdout, "a failed plugin's CLI command must be rolled back"
    assert "Traceback" not in proc.stderr
    run = run_cli(weather_home, "weather-cli", "status", bundled=bundled)
    assert run.returncode == 0, run.stderr
    assert "weather status: ok" in run.stdout
    info = plugins_json(weather_home, bundled)["broken"]
    assert not info["enabled"]
    assert info["cli_commands"] == []


def test_help_survives_a_raising_setup_fn(weather_home, bundled):
    write_plugin(
        weather_home / "plugins",
        "badsetup",
        """
def setup(parser):
    raise ValueError("no parser today")

def register(ctx):
    ctx.register_cli_command("badsetup-cli", "Broken setup", setup, print)
""",
    )
    loaded_once(weather_home, bundled)
    proc = run_cli(weather_home, "--help", bundled=bundled)
    assert proc.returncode == 0, proc.stderr
    assert "weather-cli" in proc.stdout and "badsetup-cli" in proc.stdout
    assert "Traceback" not in proc.stderr
    # The setups run when a plugin's command does (--help runs no plugin code): the failure is told then.
    run = run_cli(weather_home, "weather-cli", "status", bundled=bundled)
    assert run.returncode == 0, run.stderr
    assert "badsetup" in run.stderr and "no parser today" in run.stderr
    assert "Traceback" not in run.stderr
    assert "weather status: ok" in run.stdout
