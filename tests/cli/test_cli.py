"""The ``hermes-kernel`` command line, run as a real subprocess against a temporary home."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CLI, cli_env, write_plugin

SCRIPT = Path(sys.executable).parent / "hermes-kernel"

PLUGIN_INFO_FIELDS = {
    "name",
    "version",
    "kind",
    "source",
    "path",
    "enabled",
    "error",
    "tools",
    "hooks",
    "commands",
    "disabled_hooks",
}


def run(argv: list[str], home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env=cli_env(home, **env), capture_output=True, text=True, timeout=120, check=False
    )


def cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run([*CLI, *args], home, **env)


@pytest.fixture
def cli_home(home: Path) -> Path:
    """A home with one good, one broken and one env-gated user plugin (the calculator is bundled)."""
    plugins = home / "plugins"
    write_plugin(
        plugins,
        "greeter",
        """
import json

def register(ctx):
    ctx.register_tool("greet", "demo", {"description": "Say hello."},
                      lambda args, **kw: json.dumps({"hello": args.get("who", "world")}))
    ctx.register_hook("on_session_start", lambda **kw: None)
""",
        manifest={
            "name": "greeter",
            "version": "2.3.4",
            "provides_tools": ["greet"],
            "provides_hooks": ["on_session_start"],
        },
    )
    write_plugin(plugins, "broken", "import module_that_does_not_exist_anywhere\n")
    write_plugin(
        plugins,
        "gated",
        "def register(ctx):\n    pass\n",
        manifest={"name": "gated", "requires_env": ["HK_CLI_GATE_ONE", "HK_CLI_GATE_TWO"]},
    )
    return home


def test_help_works(home):
    result = run([str(SCRIPT), "--help"], home)
    assert result.returncode == 0, result.stderr
    for word in ("plugins", "tools", "demo"):
        assert word in result.stdout
    sub = cli(home, "plugins", "--help")
    assert sub.returncode == 0 and "list" in sub.stdout


def test_installed_script_lists_plugins_as_a_table(cli_home):
    assert SCRIPT.is_file(), f"console script missing: {SCRIPT}"
    result = run([str(SCRIPT), "plugins", "list", "--refresh"], cli_home)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = lines[0].split()
    for column in ("NAME", "VERSION", "KIND", "SOURCE", "STATUS", "TOOLS", "HOOKS"):
        assert column in header
    rows = {line.split()[0]: line.split() for line in lines[1:] if not line.startswith(" ")}
    # The user's three plugins and the bundled ones (the calculator among them).
    assert {"broken", "calculator", "gated", "greeter"} <= set(rows)
    assert all(
        rows[n][header.index("SOURCE")] == "bundled" for n in set(rows) - {"broken", "gated", "greeter"}
    )
    calc = rows["calculator"]
    assert calc[header.index("VERSION")] == "1.0.0"
    assert calc[header.index("SOURCE")] == "bundled"
    assert calc[header.index("STATUS")] == "enabled"
    assert calc[header.index("TOOLS")] == "2"
    assert calc[header.index("HOOKS")] == "1"
    greeter = rows["greeter"]
    assert greeter[header.index("VERSION")] == "2.3.4"
    assert greeter[header.index("SOURCE")] == "user"
    assert rows["broken"][header.index("STATUS")] == "failed"
    assert rows["gated"][header.index("STATUS")] == "disabled"
    # Each problem sits on an indented line right under its plugin's row.
    broken_at = next(i for i, line in enumerate(lines) if line.startswith("broken"))
    assert lines[broken_at + 1].startswith(" ")
    assert "module_that_does_not_exist_anywhere" in lines[broken_at + 1]
    gated_at = next(i for i, line in enumerate(lines) if line.startswith("gated"))
    assert "Plugin gated disabled (missing: HK_CLI_GATE_ONE, HK_CLI_GATE_TWO)" in lines[gated_at + 1]


def test_ls_alias_and_bare_plugins_command(cli_home):
    for args in (("plugins", "ls"), ("plugins",)):
        result = cli(cli_home, *args)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[0].split()[0] == "NAME"
        assert "calculator" in result.stdout


def test_plugins_list_json_has_exactly_the_plugin_info_fields(cli_home):
    result = cli(cli_home, "plugins", "list", "--refresh", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, list)
    by_name = {p["name"]: p for p in data}
    assert {"broken", "calculator", "gated", "greeter"} <= set(by_name)
    assert all(by_name[n]["source"] == "bundled" for n in set(by_name) - {"broken", "gated", "greeter"})
    for record in data:
        assert set(record) >= PLUGIN_INFO_FIELDS, set(record)
        for key in ("tools", "hooks", "commands", "disabled_hooks"):
            assert isinstance(record[key], list)
        assert isinstance(record["enabled"], bool)
    # The keys are the same for every plugin: the PluginInfo fields, in a fixed set.
    assert len({tuple(sorted(p)) for p in data}) == 1
    from kernel import PluginInfo

    listing_fields = {"listed_from", "state", "loaded", "why", "missing_env", "declared", "takeovers"}
    assert set(data[0]) == {*PluginInfo.__dataclass_fields__, *listing_fields}
    calc = by_name["calculator"]
    assert calc["enabled"] is True and calc["error"] is None
    assert calc["source"] == "bundled"
    assert calc["tools"] == ["calculate", "unit_convert"]
    assert calc["hooks"] == ["post_tool_call"]
    assert Path(calc["path"]).name == "calculator"
    assert by_name["broken"]["enabled"] is False
    assert "module_that_does_not_exist_anywhere" in by_name["broken"]["error"]
    assert by_name["gated"]["error"] == "Plugin gated disabled (missing: HK_CLI_GATE_ONE, HK_CLI_GATE_TWO)"
    assert by_name["greeter"]["tools"] == ["greet"]
    assert by_name["greeter"]["hooks"] == ["on_session_start"]


def test_requires_env_from_environment_enables_the_plugin(cli_home):
    result = cli(cli_home, "plugins", "list", "--refresh", "--json", HK_CLI_GATE_ONE="1", HK_CLI_GATE_TWO="2")
    assert result.returncode == 0, result.stderr
    gated = next(p for p in json.loads(result.stdout) if p["name"] == "gated")
    assert gated["enabled"] is True and gated["error"] is None


def test_tools_list_text_and_json(cli_home):
    text = cli(cli_home, "tools", "list")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert any(line.startswith("calculate ") and "calculator" in line for line in lines), lines
    assert any(line.startswith("unit_convert ") for line in lines), lines
    assert any(line.startswith("greet ") and "greeter" in line for line in lines), lines

    as_json = cli(cli_home, "tools", "list", "--json")
    assert as_json.returncode == 0, as_json.stderr
    schemas = json.loads(as_json.stdout)
    assert all(s["type"] == "function" for s in schemas)
    names = [s["function"]["name"] for s in schemas]
    assert set(names) == {"calculate", "unit_convert", "greet", "skill_view"}
    calc = next(s["function"] for s in schemas if s["function"]["name"] == "calculate")
    assert calc["parameters"]["required"] == ["expression"]


def test_tools_call_calculate(cli_home):
    result = cli(cli_home, "tools", "call", "calculate", '{"expression": "2**16"}')
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["result"] == 65536


def test_tools_call_with_installed_script(cli_home):
    result = run([str(SCRIPT), "tools", "call", "greet", '{"who": "cli"}'], cli_home)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"hello": "cli"}


def test_tools_call_tool_error_exits_non_zero_with_json(cli_home):
    result = cli(cli_home, "tools", "call", "calculate", '{"expression": "1/0"}')
    assert result.returncode != 0
    assert "division by zero" in json.loads(result.stdout)["error"]


def test_tools_call_unknown_tool(cli_home):
    result = cli(cli_home, "tools", "call", "calculat", "{}")
    assert result.returncode != 0
    assert "unknown tool" in result.stderr
    assert "calculate" in result.stderr
    assert result.stdout.strip() == ""


def test_tools_call_invalid_json_arguments(cli_home):
    result = cli(cli_home, "tools", "call", "calculate", "{not json")
    assert result.returncode == 2
    assert "JSON" in result.stderr
    assert result.stdout.strip() == ""


def test_demo_runs_the_calculator(home):
    result = cli(home, "demo")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "calculator" in out
    assert '"result": 65536' in out
    assert "37.7778" in out
    assert "4.44288293815837" in out
    assert '"result": 1536' in out
    assert "too large" in out


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import sys\nsys.exit(1)\n", id="exit-at-import"),
        pytest.param("import sys\n\ndef register(ctx):\n    sys.exit(1)\n", id="exit-in-register"),
        pytest.param("raise SystemExit('bye')\n", id="raise-systemexit"),
    ],
)
def test_plugin_calling_sys_exit_does_not_break_the_listing(home, code):
    write_plugin(home / "plugins", "quitter", code)
    write_plugin(home / "plugins", "survivor")
    result = cli(home, "plugins", "list", "--refresh")
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if not line.startswith(" ")}
    assert "failed" in rows["quitter"]
    assert "enabled" in rows["survivor"]
    assert "enabled" in rows["calculator"]
    assert "SystemExit" in result.stdout

    as_json = cli(home, "plugins", "list", "--refresh", "--json")
    assert as_json.returncode == 0, as_json.stderr
    quitter = next(p for p in json.loads(as_json.stdout) if p["name"] == "quitter")
    assert quitter["enabled"] is False and "SystemExit" in quitter["error"]


def test_malformed_config_warns_and_still_lists(home):
    (home / "config.yaml").write_text("plugins:\n  disabled: [unclosed\n  other: : :\n", encoding="utf-8")
    result = cli(home, "plugins", "list", "--refresh")
    assert result.returncode == 0, result.stderr
    assert "warning" in result.stderr.lower()
    assert "config.yaml" in result.stderr
    assert "calculator" in result.stdout


def test_config_can_disable_a_plugin_from_the_cli(home):
    (home / "config.yaml").write_text("plugins:\n  disabled: [calculator]\n", encoding="utf-8")
    result = cli(home, "plugins", "list", "--refresh", "--json")
    assert result.returncode == 0, result.stderr
    calc = next(p for p in json.loads(result.stdout) if p["name"] == "calculator")
    assert calc["enabled"] is False
    assert "disabled" in calc["error"]
    tools = cli(home, "tools", "call", "calculate", '{"expression": "1+1"}')
    assert tools.returncode != 0
    assert "unknown tool" in tools.stderr


def test_hermes_home_selects_the_home(tmp_path):
    first, second = tmp_path / "h1", tmp_path / "h2"
    write_plugin(first / "plugins", "only_in_first")
    write_plugin(second / "plugins", "only_in_second")
    out1 = json.loads(cli(first, "plugins", "list", "--refresh", "--json").stdout)
    out2 = json.loads(cli(second, "plugins", "list", "--refresh", "--json").stdout)
    assert "only_in_first" in {p["name"] for p in out1} - {p["name"] for p in out2}
    assert "only_in_second" in {p["name"] for p in out2} - {p["name"] for p in out1}
