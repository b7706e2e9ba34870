"""Writes to ``config.yaml`` keep the user's file: only the keys that change, change.

``plugins disable`` / ``plugins enable`` run as real subprocesses; ``ctx.set_config`` runs inside a real
plugin loaded by a real kernel; ``hermes_cli.config.save_config`` inside a real kernel too; the shapes of
file the round trip must keep are exercised through :func:`kernel.base.yamledit.update_config` on real
files, each re-read with the kernel's own reader (PyYAML) to prove the data is what was meant.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, REPO, age, cli_env, run_probe, write_plugin

from kernel import Kernel
from kernel.base.yamledit import update_config

DEADLOCK = 120

# A file as people write them: comments above, beside and below, a commented-out block and a commented-out
# list item, blank lines, quoting styles, a flow mapping, an anchor, a merge key, a Hermes Agent section.
HAND_WRITTEN = """\
# hermes-kernel configuration (hand-written)

model:
  provider: scripted        # the offline model
  script: 'turns.yaml'
  # base_url: http://127.0.0.1:8080/v1

x-defaults: &net  # a block of my own, for the anchor
  timeout: 30
  max_retries: 2

image_gen:
  <<: *net
  provider: "openai-compatible"

plugins:
  disabled:
    - tldr   # too chatty
  # - paste-to-tasks

  entries:
    weather:
      settings: {units: metric}
# --- everything below is for Hermes Agent ---
toolsets: [hermes-cli]
"""

# The same file with weather disabled: one line more, nothing else moves.
HAND_WRITTEN_DISABLED = HAND_WRITTEN.replace(
    "    - tldr   # too chatty\n", "    - tldr   # too chatty\n    - weather\n"
)


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], env=cli_env(home), capture_output=True, text=True, timeout=DEADLOCK, check=False
    )


def read(home: Path) -> Any:
    return yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))


def edit(home: Path, text: str, change: Any) -> str:
    """Write ``text`` as config.yaml, apply ``change`` through update_config, return the new text."""
    path = home / "config.yaml"
    path.write_bytes(text.encode("utf-8"))
    update_config(home, change)
    return path.read_bytes().decode("utf-8")


# --------------------------------------------------------------------------- the commands


def test_disable_then_enable_change_one_line_and_give_the_file_back(home: Path, bundled: Path) -> None:
    write_plugin(home / "plugins", "weather")
    (home / "config.yaml").write_text(HAND_WRITTEN, encoding="utf-8")

    result = run(home, "plugins", "disable", "weather")
    assert result.returncode == 0, result.stderr
    assert (home / "config.yaml").read_text(encoding="utf-8") == HAND_WRITTEN_DISABLED
    assert read(home)["plugins"]["disabled"] == ["tldr", "weather"]

    again = run(home, "plugins", "disable", "weather")
    assert again.returncode == 0 and "already disabled" in again.stdout
    assert (home / "config.yaml").read_text(encoding="utf-8") == HAND_WRITTEN_DISABLED

    result = run(home, "plugins", "enable", "weather")
    assert result.returncode == 0, result.stderr
    assert (home / "config.yaml").read_text(encoding="utf-8") == HAND_WRITTEN


def test_enable_keeps_a_flow_list_flow_and_a_commented_out_line(home: Path, bundled: Path) -> None:
    write_plugin(home / "plugins", "weather")
    text = "plugins:\n  disabled: [weather, tldr]  # for now\n  # enabled: [weather]\nmodel: {provider: x}\n"
    (home / "config.yaml").write_text(text, encoding="utf-8")
    assert run(home, "plugins", "enable", "weather").returncode == 0
    after = (home / "config.yaml").read_text(encoding="utf-8")
    assert after.splitlines()[1].split("#")[0].rstrip() == "  disabled: [tldr]"
    assert after.splitlines()[1].endswith("# for now")
    assert after.splitlines()[2:] == ["  # enabled: [weather]", "model: {provider: x}"]


def test_enable_and_disable_read_a_string_list_as_the_kernel_does(home: Path, bundled: Path) -> None:
    """``disabled: calculator, weather`` (a string) is what the kernel applies as two names; the verbs
    read it the same way and write a proper list back, comment kept, instead of refusing the file."""
    write_plugin(home / "plugins", "weather")
    write_plugin(home / "plugins", "calculator")
    (home / "config.yaml").write_text("plugins:\n  disabled: calculator, weather  # both\n", encoding="utf-8")
    result = run(home, "plugins", "enable", "weather")
    assert result.returncode == 0, result.stderr
    after = (home / "config.yaml").read_text(encoding="utf-8")
    assert read(home)["plugins"]["disabled"] == ["calculator"] and "# both" in after
    assert run(home, "plugins", "disable", "calculator").stdout.startswith("'calculator' is already disabled")


def test_enabling_the_last_disabled_plugin_leaves_an_empty_list_and_the_comments(
    home: Path, bundled: Path
) -> None:
    write_plugin(home / "plugins", "weather")
    text = "plugins:\n  disabled:\n    - weather\n  # - tldr\n\n# the model\nmodel: x\n"
    (home / "config.yaml").write_text(text, encoding="utf-8")
    assert run(home, "plugins", "enable", "weather").returncode == 0
    assert (home / "config.yaml").read_text(encoding="utf-8") == (
        "plugins:\n  disabled: []\n  # - tldr\n\n# the model\nmodel: x\n"
    )


def test_set_config_from_a_plugin_keeps_the_file(home: Path, bundled: Path) -> None:
    code = "def register(ctx):\n    ctx.set_config('mode', 'on')\n    ctx.set_config('limits.daily', 3)\n"
    write_plugin(home / "plugins", "weather", code)
    (home / "config.yaml").write_text(HAND_WRITTEN, encoding="utf-8")
    with Kernel(home=home) as k:
        k.load()
        assert k.plugin("weather").enabled, k.plugin("weather").error
    after = (home / "config.yaml").read_text(encoding="utf-8")
    assert after == HAND_WRITTEN.replace(
        "      settings: {units: metric}\n",
        "      settings: {units: metric, mode: 'on', limits: {daily: 3}}\n",
    )
    settings = read(home)["plugins"]["entries"]["weather"]["settings"]
    assert settings == {"units": "metric", "mode": "on", "limits": {"daily": 3}}


def test_hermes_save_config_changes_only_what_differs(home: Path, bundled: Path) -> None:
    """A Hermes plugin rewriting the whole mapping (``save_config(cfg)``) still keeps the comments."""
    (home / "config.yaml").write_text(HAND_WRITTEN, encoding="utf-8")
    with Kernel(home=home) as k:
        k.load()
        from hermes_cli.config import load_config, save_config

        cfg = load_config()
        cfg["model"]["provider"] = "openai-compatible"
        del cfg["toolsets"]
        save_config(cfg)
        assert k.config["model"]["provider"] == "openai-compatible"
    after = (home / "config.yaml").read_text(encoding="utf-8")
    assert after == HAND_WRITTEN.replace(
        "provider: scripted        #", "provider: openai-compatible #"
    ).replace("toolsets: [hermes-cli]\n", "")


def test_plugins_list_does_not_import_ruamel_and_a_write_does(
    tmp_path: Path, home: Path, bundled: Path
) -> None:
    write_plugin(home / "plugins", "weather")
    (home / "config.yaml").write_text(HAND_WRITTEN, encoding="utf-8")
    age(home)
    probe = (
        "import json, runpy, sys\n"
        "sys.argv = ['hermes-kernel'] + sys.argv[1:]\n"
        "try:\n    runpy.run_module('kernel', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('PROBE ' + json.dumps(sorted(m for m in ('ruamel.yaml', 'jsonschema') if m in sys.modules)))\n"
    )
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled), PYTHONPATH=str(REPO))
    assert "ruamel.yaml" not in run_probe(probe, "plugins", "list", cwd=tmp_path, env=env)
    assert "ruamel.yaml" in run_probe(probe, "plugins", "disable", "weather", cwd=tmp_path, env=env)
    assert (home / "config.yaml").read_text(encoding="utf-8") == HAND_WRITTEN_DISABLED


# --------------------------------------------------------------------------- shapes of file


def test_the_change_callback_gets_plain_dicts_and_lists(home: Path) -> None:
    seen: list[Any] = []

    def change(data: dict[str, Any]) -> None:
        seen.extend([type(data), type(data["plugins"]), type(data["plugins"]["disabled"])])
        data["plugins"]["disabled"].append("x")

    edit(home, HAND_WRITTEN, change)
    assert seen == [dict, dict, list]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The dash under the key (PyYAML's own style) stays there...
        ("a:\n- x\nb:\n- y\n", "a:\n- x\n- new\nb:\n- y\n"),
        # ...indented by two, stays indented by two...
        ("a:\n  - x\nb:\n  - y\n", "a:\n  - x\n  - new\nb:\n  - y\n"),
        # ...and mappings indented by four stay at four.
        ("a:\n    - x\nc:\n    d: 1\n", "a:\n    - x\n    - new\nc:\n    d: 1\n"),
    ],
    ids=["dash-under-key", "dash-indented", "four-spaces"],
)
def test_the_indentation_the_file_uses_is_kept(home: Path, text: str, expected: str) -> None:
    assert edit(home, text, lambda d: d["a"].append("new")) == expected


def test_quoting_and_yaml_11_spellings_are_kept_and_new_strings_read_back_as_strings(home: Path) -> None:
    text = "compat:\n  hermes: yes\ntime: 1:30\nname: 'single'\nother: \"double\"\n"

    def change(data: dict[str, Any]) -> None:
        data["name"] = "changed"
        data["other"] = "also changed"
        data["switch"] = "on"  # would read back as true if written plain
        data["clock"] = "1:30"  # would read back as 90
        data["on"] = "key"  # the key reads back as the string 'on'

    after = edit(home, text, change)
    assert after.startswith("compat:\n  hermes: yes\ntime: 1:30\nname: 'changed'\nother: \"also changed\"\n")
    assert yaml.safe_load(after) == {
        "compat": {"hermes": True},
        "time": 90,
        "name": "changed",
        "other": "also changed",
        "switch": "on",
        "clock": "1:30",
        "on": "key",
    }


def test_a_key_written_in_yaml_11_spelling_is_found(home: Path) -> None:
    # PyYAML reads `yes:` as the key True; the change removes it, and the file loses just that line.
    after = edit(home, "yes: 1  # odd key\nkeep: 2\n", lambda d: d.pop(True))
    assert after == "keep: 2\n"


def test_anchors_aliases_and_merge_keys_stay(home: Path) -> None:
    text = (
        "base: &base\n  timeout: 30\n  retries: 2\n"
        "first:\n  <<: *base\n  name: one\n"
        "second: *base\n"
        "names: &names [a, b]\n"
        "again: *names\n"
    )

    def change(data: dict[str, Any]) -> None:
        data["first"]["timeout"] = 60  # overrides the merged value in `first` only
        data["extra"] = 1

    after = edit(home, text, change)
    assert after == text.replace("  name: one\n", "  name: one\n  timeout: 60\n") + "extra: 1\n"
    data = yaml.safe_load(after)
    assert data["first"] == {"timeout": 60, "retries": 2, "name": "one"}
    assert data["second"] == {"timeout": 30, "retries": 2} and data["again"] == ["a", "b"]


def test_a_shared_mapping_changed_at_one_place_only_changes_there(home: Path) -> None:
    text = "base: &base\n  timeout: 30\nsecond: *base\n"

    def change(data: dict[str, Any]) -> None:
        data["second"] = {**data["second"], "timeout": 5}  # a new mapping: `base` keeps 30

    after = edit(home, text, change)
    assert yaml.safe_load(after) == {"base": {"timeout": 30}, "second": {"timeout": 5}}
    assert after == "base: &base\n  timeout: 30\nsecond:\n  timeout: 5\n"  # the anchor stays


def test_a_change_to_an_anchor_changes_that_path_only_and_the_alias_keeps_the_value(home: Path) -> None:
    text = "base: &base\n  timeout: 30\nsecond: *base\n"
    after = edit(home, text, lambda d: d["base"].__setitem__("timeout", 5))
    assert after == "base:\n  timeout: 5\nsecond: &base\n  timeout: 30\n"  # the anchor moves with its value


def test_comment_lines_at_the_end_of_a_block_stay_below_what_is_added(home: Path) -> None:
    text = "plugins:\n  disabled:\n    - a\n# the model, for later:\n# model: x\nagent: {}\n"

    def change(data: dict[str, Any]) -> None:
        data["plugins"]["disabled"].append("b")
        data["agent"]["max_iterations"] = 5

    assert edit(home, text, change) == (
        "plugins:\n  disabled:\n    - a\n    - b\n# the model, for later:\n# model: x\n"
        "agent:\n  max_iterations: 5\n"
    )


def test_removing_a_key_keeps_the_comments_that_follow_it(home: Path) -> None:
    text = "a: 1\nb: 2  # about b\n# about c\nc: 3\n"
    assert edit(home, text, lambda d: d.pop("b")) == "a: 1\n# about c\nc: 3\n"


def test_a_file_of_comments_only_keeps_them_above_the_new_keys(home: Path) -> None:
    text = "# written by hand\n# plugins:\n#   disabled: [tldr]\n"
    after = edit(home, text, lambda d: d.setdefault("plugins", {}).__setitem__("disabled", ["x"]))
    assert after == text + "plugins:\n  disabled:\n    - x\n"


def test_a_document_start_marker_and_windows_line_ends_are_kept(home: Path) -> None:
    text = "---\r\n# top\r\na: 1\r\n"
    after = edit(home, text, lambda d: d.__setitem__("b", 2))
    assert after == "---\r\n# top\r\na: 1\r\nb: 2\r\n"


def test_long_lines_are_not_folded(home: Path) -> None:
    long = "word " * 60
    text = f"prompt: '{long.strip()}'\n"
    after = edit(home, text, lambda d: d.__setitem__("n", 1))
    assert after == text + "n: 1\n"


def test_a_value_with_control_characters_reads_back_the_same(home: Path) -> None:
    value = "tab\there\nnew line, NUL \x00 and a quote ' \""
    after = edit(home, "a: 1\n", lambda d: d.__setitem__("odd", value))
    assert yaml.safe_load(after) == {"a": 1, "odd": value}


def test_nothing_is_written_when_nothing_changed(home: Path) -> None:
    path = home / "config.yaml"
    path.write_text(HAND_WRITTEN, encoding="utf-8")
    os.utime(path, (1_000_000, 1_000_000))
    assert update_config(home, lambda d: "result") == "result"
    assert path.stat().st_mtime == 1_000_000
    assert path.read_text(encoding="utf-8") == HAND_WRITTEN


def test_always_write_rewrites_an_unchanged_file_identically(home: Path) -> None:
    path = home / "config.yaml"
    path.write_text(HAND_WRITTEN, encoding="utf-8")
    update_config(home, lambda d: None, always_write=True)
    assert path.read_text(encoding="utf-8") == HAND_WRITTEN


def test_the_written_file_is_what_the_kernel_reads(home: Path, bundled: Path) -> None:
    (home / "config.yaml").write_text(HAND_WRITTEN, encoding="utf-8")
    update_config(home, lambda d: d["plugins"].__setitem__("hook_timeout", 5))
    with Kernel(home=home) as k:
        assert k.config["plugins"]["hook_timeout"] == 5
        assert k.config["image_gen"] == {"timeout": 30, "max_retries": 2, "provider": "openai-compatible"}
    assert json.loads(json.dumps(read(home)))["plugins"]["hook_timeout"] == 5
