"""Hostile cache files: a broken, poisoned or bottomless cache is ignored, never trusted, never a crash."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import age, write_plugin

from kernel import Kernel
from kernel.base.state import MANIFESTS_FILE

CODE = "def register(ctx):\n    ctx.register_hook('post_tool_call', lambda **kw: None)\n"
pytestmark = pytest.mark.usefixtures("bundled")


def load(home: Path) -> Kernel:
    k = Kernel(home=home)
    k.load()
    return k


@pytest.mark.parametrize(
    "content",
    [
        b"\x00\xff not json",
        b'{"format": 1, "entries": []}',
        b'{"format": 1, "entries": {"x": 5, "y": [1]}}',
        b'{"format": 99, "entries": {}}',
        b"[" * 100_000,
    ],
    ids=["garbage", "entries-not-a-mapping", "malformed-entries", "other-format", "deep-nesting"],
)
def test_a_broken_cache_file_is_ignored_and_rewritten(home: Path, content: bytes) -> None:
    directory = write_plugin(
        home / "plugins", "steady", CODE, manifest={"name": "steady", "version": "3.0.0"}
    )
    age(directory / "plugin.yaml")
    cache = home / MANIFESTS_FILE
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(content)
    k = load(home)
    assert k.plugin("steady").enabled and k.plugin("steady").version == "3.0.0"
    k.shutdown()
    data = json.loads(cache.read_text(encoding="utf-8"))
    assert data["format"] == 1 and any(
        key.endswith(os.path.join("steady", "plugin.yaml")) for key in data["entries"]
    )


def test_a_poisoned_entry_for_another_identity_is_not_used(home: Path) -> None:
    """An entry whose recorded identity (size, mtime, inode) is not the file's is never trusted."""
    directory = write_plugin(home / "plugins", "real", CODE, manifest={"name": "real", "version": "1.0.0"})
    manifest = directory / "plugin.yaml"
    age(manifest)
    cache = home / MANIFESTS_FILE
    cache.parent.mkdir(parents=True, exist_ok=True)
    fake = {"format": 1, "entries": {str(manifest): [[1, 2, 3], {"name": "impostor", "version": "6.6.6"}]}}
    cache.write_text(json.dumps(fake), encoding="utf-8")
    k = load(home)
    assert k.plugin("real").version == "1.0.0"
    k.shutdown()


def test_a_deeply_nested_plugin_state_file_is_ignored(home: Path) -> None:
    """The saved plugin list is read back as carefully: nesting deeper than the parser's recursion
    limit means "no saved list", not a crash."""
    from kernel.base import state

    (home / state.STATE_FILE).parent.mkdir(parents=True, exist_ok=True)
    (home / state.STATE_FILE).write_text("[" * 100_000, encoding="utf-8")
    assert state.load(home, "any") is None


@pytest.mark.parametrize(
    "content",
    [b"\x00garbage", b"[" * 100_000, b'{"format": 1, "signature": "x", "groups": [], "rows": "no"}'],
    ids=["garbage", "deep", "foreign"],
)
def test_a_broken_entry_points_cache_is_ignored(home: Path, tmp_path: Path, content: bytes) -> None:
    """The remembered entry points are read like every cache: a broken, bottomless or foreign file is no
    cache (the distributions are scanned), never a crash."""
    from kernel.base.log import LazyLogger
    from kernel.core.sources.discovery import scan_entry_points

    cache = tmp_path / "entry-points.json"
    cache.write_bytes(content)
    log = LazyLogger(__import__("logging").getLogger("hostile-ep-cache"), list)
    assert isinstance(scan_entry_points(log, cache=cache), list)
