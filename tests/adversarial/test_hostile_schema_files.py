"""A bundled plugin's ``config_schema.json`` that is hostile: the bundled folder may be the user's
(``HERMES_BUNDLED_PLUGINS``).  Too big, too deep, not JSON, not UTF-8, not a JSON Schema: the kernel starts,
the rest of ``config.yaml`` is checked as always, and only that plugin's section is left unchecked."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel import Kernel

TYPOS = "modle: x\ngateway:\n  platforms:\n    irc:\n      sever: irc.example.net\n"
MODLE = "config.yaml: unknown key 'modle' — did you mean 'model'?"

HOSTILE = {
    "huge": b'{"properties": {' + b'"k": {},' * 200_000 + b'"z": {}}}',
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "nested-objects": b'{"a":' * 5_000 + b"{}" + b"}" * 5_000,
    "not-json": b"{'type': 'object',",
    "not-utf8": b'{"type": "object", "x-expected": "\xff\xfe"}',
    "nul": b'{"type": "object"}\x00',
    "not-a-schema": b'{"type": 5, "properties": []}',
    "a-list": b"[1, 2, 3]",
}


@pytest.mark.parametrize("content", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_schema_file_leaves_only_its_section_unchecked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes
) -> None:
    bundled = tmp_path / "bundled"
    folder = bundled / "platforms" / "irc"
    folder.mkdir(parents=True)
    (folder / "config_schema.json").write_bytes(content)
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(bundled))
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(TYPOS, encoding="utf-8")
    k = Kernel(home=home)
    try:
        problems = [str(p) for p in k.problems]
        assert MODLE in problems
        assert not any("sever" in p for p in problems)
        assert not any("could not be checked" in p for p in problems)
    finally:
        k.shutdown()


def test_the_real_schema_file_flags_the_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The counterpart: the IRC plugin's own file, in the same place, does flag the typo."""
    bundled = tmp_path / "bundled"
    folder = bundled / "platforms" / "irc"
    folder.mkdir(parents=True)
    real = Path(__file__).resolve().parents[2] / "extensions" / "platforms" / "irc" / "config_schema.json"
    (folder / "config_schema.json").write_bytes(real.read_bytes())
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(bundled))
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(TYPOS, encoding="utf-8")
    with Kernel(home=home) as k:
        assert any("gateway.platforms.irc.sever" in str(p) for p in k.problems)
