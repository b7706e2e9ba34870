"""``config.yaml`` checked against its schema: typos get the closest key, wrong values name the key.

Commands run as real subprocesses against real homes (``plugins list`` prints the warnings, ``doctor``
lists them with their fixes); kernels are real; the start-up probe runs a fresh interpreter to see what a
start with an unchanged ``config.yaml`` imports.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, age, cli_env, run_cli, run_probe, write_plugin
from jsonschema import Draft202012Validator

from kernel import Kernel
from kernel.base.schema import MAX_FINDINGS, check_config
from kernel.base.state import CHECK_FILE
from kernel.core.services import config_schema_for

#: The schema of a kernel with the built-in services and the checkout's bundled plugins.
SCHEMA = config_schema_for().build()

DEADLOCK = 120


def run(
    home: Path, *args: str, bundled: Path | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    extra = {"HERMES_BUNDLED_PLUGINS": str(bundled)} if bundled is not None else {}
    return run_cli(home, *args, stdin=stdin, **extra)


def warnings(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [
        line.removeprefix("warning: ") for line in result.stderr.splitlines() if line.startswith("warning: ")
    ]


def write(home: Path, text: str) -> Path:
    path = home / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def found(text: str) -> list[tuple[str, str, str]]:
    return check_config(yaml.safe_load(text), "/home/me/.hermes/config.yaml", schema=SCHEMA)


# --------------------------------------------------------------------------- typos, at load and in doctor


TYPOS = """\
modle: gpt-4o-mini
memory:
  provder: sqlite
gateway:
  platforms:
    irc:
      enabled: true
      sever: irc.libera.chat
"""


def with_irc(bundled: Path) -> Path:
    """The bundled IRC plugin in the test's bundled folder: its section's schema comes with it."""
    folder = bundled / "platforms" / "irc"
    shutil.copytree(
        REPO / "extensions" / "platforms" / "irc", folder, ignore=shutil.ignore_patterns("__pycache__")
    )
    return folder / "config_schema.json"


def test_typos_are_warned_at_load_with_the_closest_key(home: Path, bundled: Path) -> None:
    with_irc(bundled)
    write(home, TYPOS)
    result = run(home, "plugins", "list", bundled=bundled)
    assert result.returncode == 0, result.stderr
    irc = "'gateway.platforms.irc.sever' — did you mean 'gateway.platforms.irc.server'?"
    assert warnings(result) == [
        f"config.yaml: unknown key {irc}",
        "config.yaml: unknown key 'memory.provder' — did you mean 'memory.provider'?",
        "config.yaml: unknown key 'modle' — did you mean 'model'?",
    ]


def test_doctor_lists_each_finding_with_its_fix(home: Path, bundled: Path) -> None:
    path = write(home, TYPOS + "agent:\n  max_iterations: lots\n")
    result = run(home, "doctor", "--json", bundled=bundled)
    data = json.loads(result.stdout)
    config = {f["problem"]: f for f in data["findings"] if f["area"] == "config"}
    typo = config["unknown key 'modle' — did you mean 'model'?"]
    assert typo["level"] == "warning" and typo["subject"] == str(path)
    assert typo["fix"] == f"rename 'modle' to 'model' in {path}"
    wrong = config[
        "'agent.max_iterations' must be a whole number of at least 1, not 'lots' "
        "(write it as `max_iterations: 20`)"
    ]
    assert wrong["level"] == "error"
    assert (
        wrong["fix"]
        == f"set 'agent.max_iterations' to a whole number of at least 1 in {path}, e.g. `max_iterations: 20`"
    )
    assert result.returncode == 1 and data["ok"] is False  # a wrong value is an error

    text = run(home, "doctor", bundled=bundled).stdout
    assert f"[warn]  config {path}: unknown key 'modle' — did you mean 'model'?\n" in text
    assert f"        fix: rename 'modle' to 'model' in {path}\n" in text


def test_doctor_passes_with_only_warnings(home: Path, bundled: Path) -> None:
    write(home, "modle: x\n")
    result = run(home, "doctor", "--json", bundled=bundled)
    data = json.loads(result.stdout)
    assert result.returncode == 0 and data["ok"] is True and data["warnings"] >= 1


def test_a_top_level_platform_section_is_pointed_to_its_place(home: Path) -> None:
    assert found("irc:\n  server: x\n") == [
        (
            "config.yaml: unknown key 'irc' — did you mean 'gateway.platforms.irc'?",
            "move 'irc' to 'gateway.platforms.irc' in /home/me/.hermes/config.yaml",
            "warning",
        )
    ]


# --------------------------------------------------------------------------- plugins.disabled / enabled


def test_plugins_disabled_as_a_string_turns_the_calculator_off_and_says_how_to_write_it(home: Path) -> None:
    write(home, "plugins:\n  disabled: calculator\n")
    result = run(home, "plugins", "list", "--json")  # the real bundled plugins
    assert result.returncode == 0, result.stderr
    calculator = next(p for p in json.loads(result.stdout) if p["name"] == "calculator")
    assert calculator["enabled"] is False and "plugins.disabled" in calculator["error"]
    assert warnings(result) == [
        "config.yaml: 'plugins.disabled' must be a list of plugin names, not a string "
        "(write it as `disabled: [calculator]`); it is read as that list"
    ]
    loaded = run(home, "tools", "list", "--json")
    assert "calculate" not in loaded.stdout


def test_the_string_is_read_once_and_reported_once(home: Path, bundled: Path) -> None:
    write_plugin(home / "plugins", "alpha")
    write_plugin(home / "plugins", "beta")
    write(home, "plugins:\n  disabled: alpha, beta\n")
    with Kernel(home=home) as k:
        k.listing()
        k.load()
        assert not k.plugin("alpha").enabled and not k.plugin("beta").enabled
        notes = [p for p in k.problems if "plugins.disabled" in p]
        assert notes == [
            "config.yaml: 'plugins.disabled' must be a list of plugin names, not a string "
            "(write it as `disabled: [alpha, beta]`); it is read as that list"
        ]
        assert notes[0].fix == f"write it as `disabled: [alpha, beta]` in {home / 'config.yaml'}"


def test_plugins_enabled_as_a_string_is_an_allow_list_of_one(home: Path, bundled: Path) -> None:
    write_plugin(home / "plugins", "alpha")
    write_plugin(home / "plugins", "beta")
    write(home, "plugins:\n  enabled: alpha\n")
    with Kernel(home=home) as k:
        k.load()
        assert k.plugin("alpha").enabled and not k.plugin("beta").enabled
        assert any("'plugins.enabled' must be a list of plugin names, not a string" in p for p in k.problems)


def test_a_list_with_entries_that_are_not_names_keeps_the_names(home: Path, bundled: Path) -> None:
    write_plugin(home / "plugins", "alpha")
    write(home, "plugins:\n  disabled: [alpha, 3, {x: 1}]\n")
    with Kernel(home=home) as k:
        k.load()
        assert not k.plugin("alpha").enabled
        assert any("2 of its entries are not names" in p for p in k.problems)


def test_plugins_disabled_of_another_kind_is_ignored_with_an_error(home: Path, bundled: Path) -> None:
    write_plugin(home / "plugins", "alpha")
    write(home, "plugins:\n  disabled: {alpha: true}\n")
    with Kernel(home=home) as k:
        k.load()
        assert k.plugin("alpha").enabled
        (note,) = [p for p in k.problems if "plugins.disabled" in p]
        assert (
            note == "config.yaml: 'plugins.disabled' must be a list of plugin names, not a mapping; ignored"
        )
        assert note.level == "error"


# --------------------------------------------------------------------------- what is and is not flagged


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model:\n  timeout: -1\n", "'model.timeout' must be a number of seconds (more than 0), not -1"),
        (
            "model:\n  max_retries: [3]\n",
            "'model.max_retries' must be a whole number of retries (0 or more), not a list",
        ),
        ("agent:\n  coding: 'yes'\n", "'agent.coding' must be true or false, not a string"),
        (
            "context:\n  threshold_percent: 2\n",
            "'context.threshold_percent' must be a fraction of the context",
        ),
        (
            "plugins:\n  entries:\n    x:\n      settings: 3\n",
            "'plugins.entries.x.settings' must be a mapping",
        ),
        (
            "plugins:\n  entries:\n    x:\n      llm:\n        allowed_models: [1]\n",
            "'plugins.entries.x.llm.allowed_models[0]' must be a name (a string), not a number",
        ),
        (
            "gateway:\n  platforms:\n    irc:\n      enabled: 'yes'\n",
            "'gateway.platforms.irc.enabled' must be true",
        ),
        ("memory: [sqlite]\n", "'memory' must be a mapping, not a list"),
    ],
)
def test_a_wrong_value_names_the_key_and_what_it_must_be(text: str, message: str) -> None:
    (item,) = found(text)
    assert item[0].startswith("config.yaml: " + message), item
    assert item[2] == "error" and "/home/me/.hermes/config.yaml" in item[1]


HERMES_AND_PLUGINS = """\
model:
  default: anthropic/claude-sonnet-4
  provider: openrouter
toolsets: [hermes-cli]
terminal:
  backend: local
agent:
  max_turns: 60
  reasoning_effort: medium
display:
  compact: true
memory:
  memory_enabled: true
  provider: sqlite
tts:
  provider: edge
  edge: {voice: en-US-AriaNeural}
stt:
  anything: goes
hooks:
  pre_tool_call: [{command: ./check.sh}]
mcp_servers:
  files: {command: npx, args: [server]}
auxiliary:
  vision: {provider: auto}
  my_plugin_task: {model: small}
plugins:
  hook_callback_timeout: 30
  entries:
    weather:
      settings: {any: {thing: [1, 2]}, units: metric}
      config: {legacy: true}
image_gen:
  stepfun: {model: step-2x}
x-defaults: &defaults
  timeout: 30
secrets:
  sources: [onepassword]
  onepassword: {enabled: false}
gateway:
  multiplex_profiles: false
  platforms:
    telegram: {enabled: true, anything: 1}
_config_version: 45
"""


def test_hermes_agent_keys_and_the_sections_plugins_own_are_not_flagged() -> None:
    assert found(HERMES_AND_PLUGINS) == []


def test_in_shared_sections_only_a_near_miss_is_reported() -> None:
    assert found("agent:\n  max_iteration: 5\n  some_future_hermes_setting: 1\n") == [
        (
            "config.yaml: unknown key 'agent.max_iteration' — did you mean 'agent.max_iterations'?",
            "rename 'agent.max_iteration' to 'agent.max_iterations' in /home/me/.hermes/config.yaml",
            "warning",
        )
    ]


def test_an_unknown_key_far_from_any_says_so_and_lists_the_keys_read_there() -> None:
    (item,) = found("plugins:\n  colour: blue\n")
    assert item[0] == "config.yaml: unknown key 'plugins.colour' (hermes-kernel does not read it)"
    assert "disabled, enabled, entries, hook_timeout, register_timeout" in item[1]
    (top,) = found("zzzz: 1\n")
    assert "a block kept for its anchors can be named x-zzzz" in top[1]


def test_an_unquoted_yes_as_a_key_is_explained() -> None:
    (item,) = found("yes: 1\n")
    assert item[0].startswith("config.yaml: unknown key 'true' (YAML reads an unquoted yes")


def test_keys_are_shown_without_control_characters_and_findings_are_capped() -> None:
    data = {f"k{i}\x1b[31m": i for i in range(MAX_FINDINGS + 10)}
    result = check_config(data, schema=SCHEMA)
    assert len(result) == MAX_FINDINGS + 1
    assert all("\x1b" not in message for message, _fix, _level in result)
    assert "\\x1b[31m" in result[0][0]
    assert result[-1][0] == "config.yaml: 10 more problem(s) not shown"


def test_the_schema_is_a_valid_json_schema() -> None:
    Draft202012Validator.check_schema(SCHEMA)


# --------------------------------------------------------------------------- the cost at start-up

PROBE = """
import json, runpy, sys
sys.argv = ["hermes-kernel", "plugins", "list"]
try:
    runpy.run_module("kernel", run_name="__main__")
except SystemExit:
    pass
print("PROBE " + json.dumps(sorted(m for m in ("jsonschema", "yaml", "ruamel.yaml") if m in sys.modules)))
"""


def probe(home: Path, tmp_path: Path, bundled: Path) -> Any:
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled), PYTHONPATH=str(REPO))
    return run_probe(PROBE, cwd=tmp_path, env=env)


def test_an_unchanged_config_yaml_is_not_checked_again(tmp_path: Path, home: Path, bundled: Path) -> None:
    with_irc(bundled)
    write_plugin(home / "plugins", "alpha")  # a home with a plugin: the kernel keeps caches there
    write(home, TYPOS)
    age(home)
    assert "jsonschema" in probe(home, tmp_path, bundled)  # first start: parsed and checked, then cached
    assert "jsonschema" not in probe(home, tmp_path, bundled)  # not checked again
    again = run(home, "plugins", "list", bundled=bundled)
    assert len(warnings(again)) == 3  # the warnings come from the cache
    write(home, "modle: x\n")
    age(home)
    assert "jsonschema" in probe(home, tmp_path, bundled)
    assert warnings(run(home, "plugins", "list", bundled=bundled)) == [
        "config.yaml: unknown key 'modle' — did you mean 'model'?"
    ]


def test_a_config_with_a_secret_is_checked_once_and_the_secret_is_not_kept(
    tmp_path: Path, home: Path, bundled: Path
) -> None:
    write_plugin(home / "plugins", "alpha")
    write(home, "model:\n  api_key: sk-live-123\n  provder: x\n")
    age(home)
    assert "jsonschema" in probe(home, tmp_path, bundled)
    assert "jsonschema" not in probe(home, tmp_path, bundled)
    kept = (home / CHECK_FILE).read_text(encoding="utf-8")
    assert "model.provder" in kept and "sk-live-123" not in kept


def test_a_broken_check_cache_is_not_trusted(home: Path, bundled: Path) -> None:
    (home / "cache").mkdir()
    (home / CHECK_FILE).write_text('{"format": 1, "key": "x", "found": [["forged", "", "warning"]]}')
    write(home, "modle: x\n")
    with Kernel(home=home) as k:
        assert [str(p) for p in k.problems] == ["config.yaml: unknown key 'modle' — did you mean 'model'?"]


# --------------------------------------------------------------------------- doctor: a missing variable


def test_doctor_advises_a_command_that_works_for_a_missing_variable(
    tmp_path: Path, home: Path, bundled: Path
) -> None:
    source = write_plugin(
        tmp_path / "src", "weather", manifest={"name": "weather", "requires_env": ["HK_SCHEMA_KEY"]}
    )
    assert run(home, "plugins", "install", str(source), "--no-input", bundled=bundled).returncode == 0
    data = json.loads(run(home, "doctor", "--json", bundled=bundled).stdout)
    (finding,) = [f for f in data["findings"] if "HK_SCHEMA_KEY" in f["problem"]]
    assert "without --no-input" not in finding["fix"]
    assert finding["fix"].startswith(f"set HK_SCHEMA_KEY in {home / '.env'}")
    assert "hermes-kernel plugins install SOURCE --force" in finding["fix"]
    # The advice, followed as written (SOURCE is where the plugin came from), asks and saves the value.
    result = run(home, "plugins", "install", str(source), "--force", bundled=bundled, stdin="secret-value\n")
    assert result.returncode == 0, result.stderr
    assert "HK_SCHEMA_KEY=" in (home / ".env").read_text(encoding="utf-8")
    assert not [
        f
        for f in json.loads(run(home, "doctor", "--json", bundled=bundled).stdout)["findings"]
        if "HK_SCHEMA_KEY" in f["problem"]
    ]


def test_a_bundled_plugins_section_is_checked_by_the_schema_beside_it(
    tmp_path: Path, home: Path, bundled: Path
) -> None:
    """``gateway.platforms.irc`` is described by ``config_schema.json`` in the IRC plugin's folder: without
    the plugin the section is not the kernel's to judge; a changed file is a changed schema (the cached
    check is not reused)."""
    write_plugin(home / "plugins", "alpha")
    write(home, TYPOS)
    irc = "config.yaml: unknown key 'gateway.platforms.irc.sever' — did you mean "
    irc += "'gateway.platforms.irc.server'?"
    assert irc not in warnings(run(home, "plugins", "list", bundled=bundled))
    schema_file = with_irc(bundled)
    assert irc in warnings(run(home, "plugins", "list", bundled=bundled))
    fragment = json.loads(schema_file.read_text(encoding="utf-8"))
    fragment["properties"]["sever"] = {}
    schema_file.write_text(json.dumps(fragment), encoding="utf-8")
    assert "jsonschema" in probe(home, tmp_path, bundled)
    assert irc not in warnings(run(home, "plugins", "list", bundled=bundled))
