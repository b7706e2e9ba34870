"""Hostile declarations in a manifest meet `plugins list`, which now shows what manifests declare: a
plugin declaring 100,000 tools, tool and command names carrying terminal controls, newlines and 10,000
characters.  The listing stays bounded, one line per note, with nothing raw reaching the terminal, and
the JSON keeps a bounded list with the rest counted.  Real homes, the real CLI in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from conftest import run_cli, write_plugin

TOOLS = 100_000
MARK = "def register(ctx):\n    open(__file__ + '.imported', 'w').close()\n"


def listed(home: Path, bundled: Path, *extra: str) -> str:
    result = run_cli(home, "plugins", "list", *extra, HERMES_BUNDLED_PLUGINS=str(bundled))
    assert result.returncode == 0, result.stderr
    return result.stdout


def notes_of(text: str, name: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(name + " "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return lines[start:end]


def test_a_hundred_thousand_declared_tools_keep_the_listing_bounded(tmp_path: Path) -> None:
    home, bundled = tmp_path / "home", tmp_path / "bundled"
    write_plugin(bundled, "calculator", MARK, {"name": "calculator", "provides_tools": ["calculate"]})
    names = [f"t{i:05d}" for i in range(TOOLS)] + ["calculate"]
    plugin = write_plugin(home / "plugins", "flood", MARK, {"name": "flood", "provides_tools": names})

    text = listed(home, bundled)
    assert len(text) < 4000, len(text)
    row, *notes = notes_of(text, "flood")
    assert f"{TOOLS + 1:,} declared" in row and "not yet" in row
    assert any(
        n.strip().startswith("declares tools t00000, t00001") and f"(+{TOOLS - 7:,} more)" in n for n in notes
    )
    assert any("tool 'calculate' (declared) overrides the one plugin 'calculator'" in n for n in notes)
    assert any("is overridden by plugin 'flood'" in n for n in notes_of(text, "calculator"))

    rows = {r["name"]: r for r in json.loads(listed(home, bundled, "--json"))}
    declared = rows["flood"]["declared"]
    assert declared["tools"] == names[:1000] and declared["more"] == {"tools": TOOLS + 1 - 1000}
    assert rows["flood"]["takeovers"] == [{"tool": "calculate", "overrides": "calculator"}]
    assert not (plugin / "__init__.py.imported").exists()


def test_control_characters_and_huge_names_are_shown_escaped_on_one_line(tmp_path: Path) -> None:
    home, bundled = tmp_path / "home", tmp_path / "bundled"
    bundled.mkdir()
    evil = "evil\x1b[2J\nname\u202e\r"
    huge = "x" * 10_000
    manifest = {
        "name": "nasty",
        "provides_tools": [evil, huge],
        "provides_hooks": ["\x07bell"],
        "provides_commands": ["/\x1b]0;title\x07", 42, {"a": 1}],
    }
    write_plugin(home / "plugins", "nasty", MARK, manifest)
    write_plugin(home / "plugins", "odd", MARK, {"name": "odd", "provides_commands": {"not": "a list"}})
    (home / "config.yaml").write_text(yaml.safe_dump({"plugins": {}}), encoding="utf-8")

    text = listed(home, bundled)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text and "\r" not in text
    row, *notes = notes_of(text, "nasty")
    assert "2 declared" in row
    [declares] = [n for n in notes if "declares" in n]
    assert "evil\\x1b[2J\\nname" in declares and "\\x07bell" in declares
    assert huge not in text and len(declares) < 400
    assert all(line.startswith("    ") for line in notes)  # the newline in a name started no new line

    rows = {r["name"]: r for r in json.loads(listed(home, bundled, "--json"))}
    assert rows["nasty"]["declared"]["tools"] == [evil, huge]  # the data as declared, JSON-escaped
    assert rows["nasty"]["declared"]["commands"] == ["\x1b]0;title\x07"]
    assert rows["odd"]["declared"]["commands"] is None and rows["odd"]["enabled"] is True
