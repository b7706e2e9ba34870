"""Hostile ``config.yaml`` files meet the commands that write it, and hostile data meets its schema check.

A write (``plugins disable`` as a real subprocess, ``ctx.set_config`` from a real plugin, or
:func:`update_config` itself) against a file that is an alias bomb, not YAML, 10 MB, full of NUL bytes, a
list, a symbolic link, nested without end or holding duplicate keys either writes exactly what was meant or
refuses with ``ValueError`` naming the file — and then the file is byte for byte as it was.  The round trip
and the schema check are also fed random YAML-shaped data (hypothesis): neither ever raises anything else,
and a write that succeeds always reads back as the data that was meant.
"""

from __future__ import annotations

import copy
import datetime
import resource
import string
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, cli_env, write_plugin
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel import Kernel
from kernel.base.config import load_config
from kernel.base.safe_yaml import MAX_CONFIG_BYTES
from kernel.base.schema import check_config
from kernel.base.yamledit import MAX_EDIT_BYTES, edited_yaml, update_config
from kernel.core.services import config_schema_for

DEADLOCK = 120
# Nine levels of ten aliases: 10**9 values once expanded.
BOMB = "\n".join(
    ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
)

#: The schema of a kernel with the built-in services and the bundled plugins.
SCHEMA = config_schema_for().build()


def cli(home: Path, bundled: Path, *args: str, memory: int | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:  # in the child: an expanded bomb would need far more than this
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [*CLI, *args],
        env=cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled)),
        capture_output=True,
        text=True,
        timeout=DEADLOCK,
        check=False,
        preexec_fn=limit,
    )


def refused(home: Path, data: bytes, match: str) -> None:
    """``update_config`` refuses the file ``data`` with a message naming it, and leaves it as it was."""
    path = home / "config.yaml"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=match) as caught:
        update_config(home, lambda d: d.__setitem__("plugins", {"disabled": ["x"]}))
    assert str(path) in str(caught.value)
    assert path.read_bytes() == data
    assert [p.name for p in home.iterdir() if p.name.endswith(".tmp")] == []


# --------------------------------------------------------------------------- files that are refused


def test_an_alias_bomb_is_refused_by_a_write_without_being_expanded(home: Path, bundled: Path) -> None:
    write_plugin(home / "plugins", "weather")
    (home / "config.yaml").write_text(BOMB + "\n", encoding="utf-8")
    # 1 GiB of address space: the command starts in it, an expanded bomb (10**9 values) would not fit.
    result = cli(home, bundled, "plugins", "disable", "weather", memory=1024**3)
    assert result.returncode == 1, result.stderr
    assert str(home / "config.yaml") in result.stderr and "alias bomb" in result.stderr
    assert "MemoryError" not in result.stderr and "Traceback" not in result.stderr
    assert (home / "config.yaml").read_text(encoding="utf-8") == BOMB + "\n"
    refused(home, BOMB.encode(), "alias bomb")


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"plugins: [unclosed\n", "not valid YAML"),
        (b"a: 1\x00\nb: 2\n", "not valid YAML"),
        (b"\x00" * 64, "not valid YAML"),
        (b"\xff\xfe not utf-8\n", "cannot be read"),
        (b"- a\n- list\n", "top level is not a mapping"),
        (b"just a string\n", "top level is not a mapping"),
        (b"a: !!python/object/apply:os.system [ls]\n", "not valid YAML"),
        (b"a:\n\tb: tab-indented\n", "not valid YAML"),
        (b"a: 1\nb: 2\na: 3\n", "duplicate key"),
        (b"a: " + b"[" * 150 + b"]" * 150 + b"\n", "nested deeper than 100 levels"),
        (b"a: " + b"[" * 100_000 + b"\n", "not valid YAML"),
        (b"loop: &loop [1, *loop]\n", "self-reference"),
    ],
    ids=[
        "invalid",
        "nul-inside",
        "only-nul",
        "not-utf8",
        "list",
        "scalar",
        "python-tag",
        "tabs",
        "duplicate-key",
        "deep",
        "very-deep",
        "self-reference",
    ],
)
def test_a_file_the_kernel_cannot_edit_is_refused_and_left_untouched(
    home: Path, data: bytes, match: str
) -> None:
    refused(home, data, match)


def test_a_10_mb_file_is_refused_as_reading_refuses_it(home: Path, bundled: Path) -> None:
    data = ("model: x\n# " + "x" * (10 * 1024 * 1024) + "\n").encode()
    refused(home, data, "read up to")
    write_plugin(home / "plugins", "weather")
    result = cli(home, bundled, "plugins", "disable", "weather")
    assert result.returncode == 1 and str(home / "config.yaml") in result.stderr
    assert (home / "config.yaml").read_bytes() == data


def test_a_file_too_big_to_edit_in_place_is_refused(home: Path) -> None:
    data = ("model: x\n# " + "x" * (MAX_EDIT_BYTES + 10) + "\n").encode()
    assert len(data) < MAX_CONFIG_BYTES  # readable, but not edited
    refused(home, data, "edit it by hand")


def test_a_change_that_would_make_the_file_unreadable_is_refused(home: Path) -> None:
    path = home / "config.yaml"
    path.write_text("model: x\n", encoding="utf-8")
    with pytest.raises(ValueError, match="more than the kernel reads"):
        update_config(home, lambda d: d.__setitem__("huge", "x" * (MAX_CONFIG_BYTES + 1)))
    assert path.read_text(encoding="utf-8") == "model: x\n"


def test_set_config_from_a_plugin_against_a_bomb_fails_only_that_call(home: Path, bundled: Path) -> None:
    code = (
        "RESULT = []\n"
        "def register(ctx):\n"
        "    try:\n"
        "        ctx.set_config('k', 1)\n"
        "    except ValueError as exc:\n"
        "        RESULT.append(str(exc))\n"
    )
    write_plugin(home / "plugins", "weather", code)
    (home / "config.yaml").write_text(BOMB + "\n", encoding="utf-8")
    with Kernel(home=home) as k:
        k.load()
        assert k.plugin("weather").enabled
        assert any("alias bomb" in p for p in k.problems)
    assert (home / "config.yaml").read_text(encoding="utf-8") == BOMB + "\n"


# --------------------------------------------------------------------------- links and odd files


def test_a_symlinked_config_is_written_through_and_stays_a_link(home: Path, tmp_path: Path) -> None:
    """Chosen: a link is written through (a dotfiles repository keeps its file); the target keeps its
    comments and its mode, the link stays a link."""
    target = tmp_path / "dotfiles" / "hermes.yaml"
    target.parent.mkdir()
    target.write_text("# my dotfiles\nmodel: x  # mine\n", encoding="utf-8")
    target.chmod(0o640)
    link = home / "config.yaml"
    link.symlink_to(target)
    update_config(home, lambda d: d.__setitem__("plugins", {"disabled": ["x"]}))
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert (
        target.read_text(encoding="utf-8")
        == "# my dotfiles\nmodel: x  # mine\nplugins:\n  disabled:\n    - x\n"
    )
    assert target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in target.parent.iterdir()] == ["hermes.yaml"]


def test_a_dangling_link_or_a_directory_is_refused(home: Path, tmp_path: Path) -> None:
    link = home / "config.yaml"
    link.symlink_to(tmp_path / "nowhere.yaml")
    with pytest.raises(ValueError, match="dangling symbolic link"):
        update_config(home, lambda d: d.__setitem__("a", 1))
    assert not (tmp_path / "nowhere.yaml").exists() and link.is_symlink()
    link.unlink()
    (home / "config.yaml").mkdir()
    with pytest.raises(ValueError, match="not a regular file"):
        update_config(home, lambda d: d.__setitem__("a", 1))
    assert (home / "config.yaml").is_dir()


def test_nul_and_control_characters_in_a_value_are_stored_escaped(home: Path, bundled: Path) -> None:
    value = "a\x00b\x1b[31mred\x07"
    (home / "config.yaml").write_text("# keep\nmodel: x\n", encoding="utf-8")
    update_config(home, lambda d: d.__setitem__("odd", value))
    text = (home / "config.yaml").read_text(encoding="utf-8")
    assert "\x00" not in text and "\x1b" not in text and text.startswith("# keep\nmodel: x\n")
    assert yaml.safe_load(text)["odd"] == value
    with Kernel(home=home) as k:
        assert k.config["odd"] == value


def test_hostile_keys_round_trip(home: Path) -> None:
    (home / "config.yaml").write_text("model: x\n", encoding="utf-8")
    keys = {"\x1b[2J": 1, "a: b": 2, "- x": 3, "&anchor": 4, "*alias": 5, "null": 6, "~": 7, "?": 8, "#": 9}
    update_config(home, lambda d: d.update(keys))
    assert yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8")) == {"model": "x", **keys}


# --------------------------------------------------------------------------- random data (hypothesis)

NAMES = [
    "model", "provider", "plugins", "disabled", "enabled", "entries", "settings", "llm", "allowed_models",
    "gateway", "platforms", "irc", "server", "agent", "max_iterations", "memory", "context", "secrets",
    "modle", "provder", "yes", "on", "1:30", "x-", "", " ", "a b", "é", "\x1b", "#",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=string.printable + "é\x00\x1b", max_size=12),
    st.sampled_from(NAMES),
    st.dates(min_value=datetime.date(1, 1, 1)),
)
keys = st.one_of(st.sampled_from(NAMES), st.text(max_size=8), st.integers(-5, 5), st.booleans(), st.none())
documents = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=5)),
    max_leaves=40,
)
configs = st.dictionaries(keys, documents, max_size=6)

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(data=configs)
def test_property_the_schema_check_never_raises(data: dict[Any, Any]) -> None:
    result = check_config(data, "/h/config.yaml", schema=SCHEMA)
    assert isinstance(result, list)
    for message, fix, level in result:
        assert message.startswith("config.yaml: ") and isinstance(fix, str) and level in ("warning", "error")
        assert message.isprintable()


@SETTINGS
@given(data=configs)
def test_property_a_config_yaml_of_any_shape_loads_with_its_check(
    tmp_path_factory: Any, data: dict[Any, Any]
) -> None:
    home = tmp_path_factory.mktemp("home")
    try:
        text = yaml.safe_dump(data, allow_unicode=True)
    except yaml.YAMLError:
        return
    (home / "config.yaml").write_text(text, encoding="utf-8")
    config, problems = load_config(home, None, check=config_schema_for())
    assert isinstance(config, dict) and all(isinstance(p, str) for p in problems)
    assert not any("could not be checked" in p for p in problems)


def _mutate(data: dict[Any, Any], draw: Any) -> dict[Any, Any]:
    after = copy.deepcopy(data)
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["set", "delete", "append", "nested"]))
        key = draw(keys)
        if action == "delete" and after:
            after.pop(draw(st.sampled_from(list(after))))
        elif action == "append":
            lists = [v for v in after.values() if isinstance(v, list)]
            if lists:
                draw(st.sampled_from(lists)).append(draw(scalars))
            else:
                after[key] = [draw(scalars)]
        elif action == "nested":
            maps = [v for v in after.values() if isinstance(v, dict)]
            target = draw(st.sampled_from(maps)) if maps else after.setdefault("plugins", {})
            if isinstance(target, dict):
                target[draw(keys)] = draw(documents)
        else:
            after[key] = draw(documents)
    return after


@SETTINGS
@given(data=configs, comment=st.booleans(), draw=st.data())
def test_property_an_edit_writes_what_was_meant_or_refuses(
    data: dict[Any, Any], comment: bool, draw: st.DataObject
) -> None:
    try:
        text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    except yaml.YAMLError:
        return
    if comment:
        text = "# a comment\n" + text.replace("\n", "  # eol\n", 1)
    before = yaml.safe_load(text) or {}
    memo: dict[int, Any] = {}
    after = copy.deepcopy(before, memo)
    after = _mutate(after, draw.draw)
    try:
        out = edited_yaml(text, before, after, memo)
    except ValueError as exc:
        assert "config.yaml" in str(exc)
        return
    assert _plain(yaml.safe_load(out) or {}) == _plain(after)
    if comment:
        assert out.startswith("# a comment\n")


def _plain(value: Any) -> Any:
    """``value`` comparable with ``==`` (NaN as a marker)."""
    if isinstance(value, float) and value != value:
        return "<nan>"
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def test_the_schema_is_a_plain_json_document() -> None:
    import json

    assert json.loads(json.dumps(SCHEMA)) == SCHEMA
