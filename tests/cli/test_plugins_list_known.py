"""`hermes-kernel plugins list` knows what it can without a load: enabled or not from the config (and
why), what each manifest declares (tools, hooks, commands, marked as declared), the takeovers those
declarations imply, and the last load's outcome when one was saved.  No plugin code runs for it; every
plugin here leaves a file behind the moment it is imported, to show that.  Real homes, real
subprocesses of the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from conftest import REPO, run_cli, write_plugin

# Imported: leaves <HERMES_HOME>/imported-<name> behind; registers what its manifest declares.
MARKING = """
import json, os, pathlib
pathlib.Path(os.environ["HERMES_HOME"], "imported-{name}").write_text("yes")
SCHEMA = {{"description": "d", "parameters": {{"type": "object", "properties": {{}}}}}}

def register(ctx):
    for tool in {tools!r}:
        ctx.register_tool(tool, "{name}", SCHEMA, lambda args, **kw: json.dumps({{"ok": True}}))
    for hook in {hooks!r}:
        ctx.register_hook(hook, lambda **kw: None)
"""


def marking(
    root: Path, name: str, tools: tuple[str, ...] = (), hooks: tuple[str, ...] = (), **extra: object
) -> Path:
    """A plugin that declares (and registers) ``tools`` and ``hooks``; ``extra`` goes to its manifest."""
    manifest = {
        "name": name,
        "version": "1.0.0",
        "provides_tools": list(tools),
        "provides_hooks": list(hooks),
    }
    manifest.update(extra)
    return write_plugin(root, name, MARKING.format(name=name, tools=tools, hooks=hooks), manifest)


def imported(home: Path) -> list[str]:
    return sorted(p.name.removeprefix("imported-") for p in home.glob("imported-*"))


def listing(home: Path, bundled: Path, *extra: str, **env: str) -> dict[str, dict]:
    result = run_cli(home, "plugins", "list", "--json", *extra, HERMES_BUNDLED_PLUGINS=str(bundled), **env)
    assert result.returncode == 0, result.stderr
    return {row["name"]: row for row in json.loads(result.stdout)}


def table(home: Path, bundled: Path, *extra: str, **env: str) -> str:
    result = run_cli(home, "plugins", "list", *extra, HERMES_BUNDLED_PLUGINS=str(bundled), **env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def block(text: str, name: str) -> list[str]:
    """The row of plugin ``name`` and the indented notes under it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split() and line.split()[0] == name)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return lines[start:end]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def test_a_fresh_home_lists_the_configs_answer_and_the_declarations(home: Path, bundled: Path) -> None:
    plugins = home / "plugins"
    marking(plugins, "weather", ("forecast", "radar"), ("post_tool_call",), provides_commands=["/weather"])
    marking(plugins, "muted", ("muted_tool",))
    marking(plugins, "keyed", ("keyed_tool",), requires_env=["HK_KNOWN_KEY"])
    marking(plugins, "needy", ("needy_tool",), requires_env=["HK_KNOWN_MISSING"])
    write_plugin(plugins, "bare", "def register(ctx):\n    pass\n", manifest="")
    (home / ".env").write_text("HK_KNOWN_KEY=from-dotenv\n", encoding="utf-8")
    (home / "config.yaml").write_text(yaml.safe_dump({"plugins": {"disabled": ["muted"]}}), encoding="utf-8")

    rows = listing(home, bundled)
    assert imported(home) == []
    weather = rows["weather"]
    assert weather["enabled"] is True and weather["error"] is None
    assert weather["loaded"] is False and weather["state"] == "not loaded yet"
    assert weather["tools"] is None and weather["hooks"] is None  # not known until a load
    assert weather["declared"] == {
        "tools": ["forecast", "radar"],
        "hooks": ["post_tool_call"],
        "commands": ["weather"],
        "more": {},
    }
    # A variable set only in <home>/.env counts as set, as a load would count it.
    assert rows["keyed"]["enabled"] is True and rows["keyed"]["missing_env"] == []
    assert rows["needy"]["enabled"] is False and rows["needy"]["why"] == "missing_env"
    assert rows["needy"]["missing_env"] == ["HK_KNOWN_MISSING"] and rows["needy"]["state"] == "not loaded"
    assert rows["muted"]["enabled"] is False and rows["muted"]["why"] == "disabled"
    assert rows["muted"]["declared"]["tools"] == ["muted_tool"]
    # No manifest, or no provides_* in it: nothing is declared, which is not the same as "none".
    assert rows["bare"]["declared"] == {"tools": None, "hooks": None, "commands": None, "more": {}}
    assert rows["bare"]["enabled"] is True and rows["bare"]["state"] == "not loaded yet"

    text = table(home, bundled)
    assert imported(home) == []
    header = text.splitlines()[0].split()
    assert header == ["NAME", "VERSION", "KIND", "SOURCE", "STATUS", "TOOLS", "HOOKS", "LOADED"]
    row, *notes = block(text, "weather")
    assert row.split()[4:] == ["enabled", "2", "declared", "1", "declared", "not", "yet"]
    assert any("declares tools forecast, radar; hooks post_tool_call; commands /weather" in n for n in notes)
    assert block(text, "bare")[0].split()[4:] == ["enabled", "?", "?", "not", "yet"]
    muted = block(text, "muted")
    assert muted[0].split()[4:] == ["disabled", "1", "declared", "0", "declared", "-"]
    assert "?" not in block(text, "keyed")[0]


@pytest.mark.parametrize(
    ("config", "marker", "why"),
    [
        ({"plugins": {"enabled": ["other"]}}, None, "not_in_allow_list"),
        ({"_config_version": 17}, None, "hermes_opt_in"),
        ({}, "SOUL.md", "hermes_opt_in"),
    ],
    ids=["allow-list", "config-version", "soul-file"],
)
def test_an_allow_list_or_a_hermes_home_says_why_a_plugin_is_off(
    home: Path, bundled: Path, config: dict, marker: str | None, why: str
) -> None:
    marking(home / "plugins", "spy", ("spy_tool",))
    marking(home / "plugins", "other", ("other_tool",))
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    if marker:
        (home / marker).write_text("x", encoding="utf-8")
    spy = listing(home, bundled)["spy"]
    assert spy["enabled"] is False and spy["why"] == why and spy["state"] == "not loaded"
    assert "hermes-kernel plugins enable spy" in spy["error"]
    assert imported(home) == []


def test_a_takeover_the_declarations_imply_is_noted_on_both_rows_as_a_load_notes_it(
    home: Path, tmp_path: Path
) -> None:
    bundled = tmp_path / "bundled"
    marking(bundled, "calculator", ("calculate", "unit_convert"))
    marking(home / "plugins", "seed-calc", ("calculate",))

    rows = listing(home, bundled)
    assert imported(home) == []
    assert rows["seed-calc"]["takeovers"] == [{"tool": "calculate", "overrides": "calculator"}]
    assert rows["calculator"]["takeovers"] == [{"tool": "calculate", "overridden_by": "seed-calc"}]
    text = table(home, bundled)
    assert any(
        "tool 'calculate' (declared) overrides the one plugin 'calculator'" in n
        for n in block(text, "seed-calc")
    )
    assert any(
        "tool 'calculate' (declared) is overridden by plugin 'seed-calc'" in n
        for n in block(text, "calculator")
    )

    # The load agrees: its own notes, then nothing is left to infer.
    loaded = listing(home, bundled, "--refresh")
    assert imported(home) == ["calculator", "seed-calc"]
    assert any("overrides the one plugin 'calculator'" in w for w in loaded["seed-calc"]["warnings"])
    assert any("is overridden by plugin 'seed-calc'" in w for w in loaded["calculator"]["warnings"])
    assert loaded["seed-calc"]["takeovers"] == [] and loaded["seed-calc"]["state"] == "loaded"


def test_no_takeover_is_implied_by_a_plugin_that_will_not_load(home: Path, tmp_path: Path) -> None:
    bundled = tmp_path / "bundled"
    marking(bundled, "calculator", ("calculate",))
    marking(home / "plugins", "seed-calc", ("calculate",))
    (home / "config.yaml").write_text(yaml.safe_dump({"plugins": {"disabled": ["seed-calc"]}}))
    rows = listing(home, bundled)
    assert rows["calculator"]["takeovers"] == [] and rows["seed-calc"]["takeovers"] == []


def test_the_last_loads_outcome_and_refresh_show_what_is_real(home: Path, bundled: Path) -> None:
    # Declares one tool, registers another: only a load can tell.
    code = MARKING.format(name="drift", tools=("actual",), hooks=())
    write_plugin(home / "plugins", "drift", code, {"name": "drift", "provides_tools": ["declared_only"]})
    before = listing(home, bundled)["drift"]
    assert before["state"] == "not loaded yet" and before["declared"]["tools"] == ["declared_only"]

    refreshed = listing(home, bundled, "--refresh")["drift"]
    assert refreshed["state"] == "loaded" and refreshed["loaded"] is True and refreshed["enabled"] is True
    assert refreshed["tools"] == ["actual"] and refreshed["declared"]["tools"] == ["declared_only"]
    assert imported(home) == ["drift"]

    (home / "imported-drift").unlink()
    init = home / "plugins" / "drift" / "__init__.py"
    init.write_text(init.read_text() + "\n# changed\n")
    os.utime(init, ns=(init.stat().st_mtime_ns + 10**9,) * 2)
    stale = listing(home, bundled)["drift"]
    assert stale["state"] == "last load" and stale["loaded"] is True and stale["tools"] == ["actual"]
    row = block(table(home, bundled), "drift")[0]
    assert row.split()[4:] == ["enabled*", "1*", "0*", "last", "load*"]
    assert imported(home) == []


def test_the_real_bundled_plugins_are_listed_enabled_with_what_they_declare(home: Path) -> None:
    rows = listing(home, REPO / "extensions")
    calculator = rows["calculator"]
    assert calculator["enabled"] is True and calculator["state"] == "not loaded yet"
    assert calculator["declared"]["tools"] == ["calculate", "unit_convert"]
    assert not any(row["enabled"] is False and row["error"] is None for row in rows.values())
