"""Config writes through YAML aliases and merge keys, and strings only PyYAML's escapes can spell.

A write changes only the path written: a mapping reached through an alias (``ci: *base``), the anchor's
own mapping (``base: &base``) and a key a ``<<`` merge brought each get their own copy at the written path,
so that the anchor and every other alias keep what they said.  Every route is tried: :func:`update_config`,
``hermes-kernel plugins disable`` as a real subprocess, ``ctx.set_config`` and Hermes' ``save_config`` from
real plugins.  And any file ``yaml.safe_load`` reads (surrogate escapes, NUL, control characters) can be
written through, every value reading back as PyYAML read it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, cli_env, write_plugin
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.base.yamledit import update_config

ALIASED = "base: &base\n  x: 1\n  opts:\n    deep: a\nci: *base\nchild:\n  <<: *base\n  y: 2\n"


def write(home: Path, text: str) -> Path:
    path = home / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def read(home: Path) -> Any:
    return yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- aliases and merge keys


def test_a_write_through_an_alias_leaves_the_anchor_alone(home: Path) -> None:
    write(home, ALIASED)
    update_config(home, lambda d: d["ci"].__setitem__("x", 2))
    data = read(home)
    assert data["ci"] == {"x": 2, "opts": {"deep": "a"}}
    assert data["base"] == {"x": 1, "opts": {"deep": "a"}}
    assert data["child"] == {"x": 1, "opts": {"deep": "a"}, "y": 2}


def test_a_write_deep_inside_an_alias_leaves_the_anchor_alone(home: Path) -> None:
    write(home, ALIASED)
    update_config(home, lambda d: d["ci"]["opts"].__setitem__("deep", "b"))
    data = read(home)
    assert data["ci"]["opts"] == {"deep": "b"}
    assert data["base"]["opts"] == {"deep": "a"} and data["child"]["opts"] == {"deep": "a"}


def test_a_write_to_the_anchor_leaves_its_aliases_and_merges_alone(home: Path) -> None:
    write(home, ALIASED)
    update_config(home, lambda d: d["base"].__setitem__("x", 5))
    data = read(home)
    assert data["base"] == {"x": 5, "opts": {"deep": "a"}}
    assert data["ci"] == {"x": 1, "opts": {"deep": "a"}}
    assert data["child"] == {"x": 1, "opts": {"deep": "a"}, "y": 2}


def test_successive_writes_each_change_their_path_only(home: Path) -> None:
    write(home, "base: &base\n  x: 1\nci: *base\nchild:\n  <<: *base\n  y: 2\n")
    update_config(home, lambda d: d["base"].__setitem__("x", 5))
    update_config(home, lambda d: d["ci"].__setitem__("x", 7))  # the anchor moved to `ci`
    update_config(home, lambda d: d["child"].__setitem__("x", 9))
    assert read(home) == {"base": {"x": 5}, "ci": {"x": 7}, "child": {"x": 9, "y": 2}}


def test_a_write_to_a_merged_key_lands_in_the_child_only(home: Path) -> None:
    write(home, ALIASED)
    update_config(home, lambda d: d["child"]["opts"].__setitem__("deep", "c"))
    data = read(home)
    assert data["child"] == {"x": 1, "opts": {"deep": "c"}, "y": 2}
    assert data["base"]["opts"] == {"deep": "a"} and data["ci"]["opts"] == {"deep": "a"}


def test_an_aliased_list_written_at_one_place_changes_there_only(home: Path) -> None:
    write(home, "names: &names [a, b]\nagain: *names\n")
    update_config(home, lambda d: d["again"].append("c"))
    assert read(home) == {"names": ["a", "b"], "again": ["a", "b", "c"]}


def test_plugins_disable_through_an_aliased_section_changes_that_section_only(
    home: Path, bundled: Path
) -> None:
    write(home, "defaults: &d\n  disabled: [old]\nplugins: *d\n")
    write_plugin(home / "plugins", "newer")
    result = subprocess.run(
        [*CLI, "plugins", "disable", "newer"],
        env=cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    data = read(home)
    assert data["plugins"]["disabled"] == ["old", "newer"]
    assert data["defaults"] == {"disabled": ["old"]}


def test_set_config_through_an_aliased_entry_changes_that_plugin_only(
    home: Path, plugin_dir: Any, make_kernel: Any
) -> None:
    write(
        home,
        "plugins:\n  entries:\n    first: &shared\n      settings:\n        level: 1\n    second: *shared\n",
    )
    plugin_dir("second", "def register(ctx):\n    ctx.set_config('level', 2)\n")
    k = make_kernel()
    assert [p.error for p in k.plugins if p.name == "second"] == [None]
    entries = read(home)["plugins"]["entries"]
    assert entries["second"]["settings"]["level"] == 2
    assert entries["first"]["settings"]["level"] == 1
    # The kernel's configuration in memory too: the other plugin's settings kept their value.
    assert k.config["plugins"]["entries"]["first"]["settings"]["level"] == 1
    assert k.config["plugins"]["entries"]["second"]["settings"]["level"] == 2


def test_hermes_save_config_through_an_alias_changes_that_path_only(
    home: Path, plugin_dir: Any, make_kernel: Any
) -> None:
    write(home, ALIASED)
    plugin_dir(
        "saver",
        "from hermes_cli.config import load_config, save_config\n\n"
        "def register(ctx):\n"
        "    cfg = load_config()\n"
        "    cfg['ci']['x'] = 2\n"
        "    save_config(cfg)\n",
    )
    k = make_kernel()
    assert [p.error for p in k.plugins if p.name == "saver"] == [None]
    data = read(home)
    assert data["ci"]["x"] == 2
    assert data["base"]["x"] == 1 and data["child"]["x"] == 1


# --------------------------------------------------------------------------- strings PyYAML reads


SURROGATES = 'emoji: "\\ud83d\\ude00"\nlone: "\\udc80"\nnul: "a\\0b"\nbell: "\\a\\x1b[2J"\nkeep: 1\n'


def test_a_file_with_surrogate_escapes_is_written_through(home: Path) -> None:
    write(home, SURROGATES)
    before = yaml.safe_load(SURROGATES)
    update_config(home, lambda d: d.__setitem__("keep", 2))
    assert read(home) == {**before, "keep": 2}


def test_the_kernel_reads_a_file_with_surrogate_escapes_as_pyyaml_does(home: Path, make_kernel: Any) -> None:
    write(home, SURROGATES)
    k = make_kernel()
    assert not [p for p in k.problems if "using defaults" in p]
    assert {key: k.config[key] for key in yaml.safe_load(SURROGATES)} == yaml.safe_load(SURROGATES)


# Any character at all, surrogates and NUL included, and the escapes that spell them.
characters = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
texts = st.text(
    st.one_of(
        characters,
        st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, exclude_categories=()),
        st.sampled_from("\0\x1b\x85\u2028\ufeff\t\r\n"),
    ),
    max_size=12,
)


def _escaped(text: str) -> str:
    """``text`` as a double-quoted YAML scalar in which every character is a \\U escape."""
    return '"' + "".join(f"\\U{ord(c):08x}" if ord(c) > 0xFFFF else f"\\u{ord(c):04x}" for c in text) + '"'


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(kept=texts, new=texts)
def test_property_any_string_pyyaml_reads_is_kept_and_any_string_is_written(
    tmp_path_factory: pytest.TempPathFactory, kept: str, new: str
) -> None:
    home = tmp_path_factory.mktemp("home")
    text = f"kept: {_escaped(kept)}  # a comment\nplain: 1\n"
    before = yaml.safe_load(text)
    assert before["kept"] == kept
    write(home, text)
    update_config(home, lambda d: d.__setitem__("new", new))
    assert read(home) == {"kept": kept, "plain": 1, "new": new}
    # And back again: the file the writer made is one it edits.
    update_config(home, lambda d: d.__setitem__("plain", 2))
    assert read(home) == {"kept": kept, "plain": 2, "new": new}
