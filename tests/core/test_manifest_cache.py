"""Manifests that have not changed are not parsed again (``<home>/cache/manifests.json``)."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import pytest
from conftest import age, write_plugin

from kernel import Kernel
from kernel.base.state import MANIFESTS_FILE
from kernel.core.sources import manifest as manifest_module

CODE = "def register(ctx):\n    ctx.register_hook('post_tool_call', lambda **kw: None)\n"
pytestmark = pytest.mark.usefixtures("bundled")


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The manifest texts the YAML parser is asked for, in order (the real parser still runs)."""
    seen: list[str] = []
    real = manifest_module.load_yaml

    def counting(text: str) -> object:
        seen.append(text)
        return real(text)

    monkeypatch.setattr(manifest_module, "load_yaml", counting)
    return seen


def load(home: Path) -> Kernel:
    k = Kernel(home=home)
    k.load()
    return k


def test_an_unchanged_manifest_is_read_from_the_cache(home: Path, parses: list[str]) -> None:
    directory = write_plugin(
        home / "plugins", "cached", CODE, manifest={"name": "cached", "version": "1.2.3"}
    )
    age(directory / "plugin.yaml")
    first = load(home)
    assert first.plugin("cached").version == "1.2.3"
    first.shutdown()
    assert len(parses) == 1 and (home / MANIFESTS_FILE).is_file()
    second = load(home)
    assert second.plugin("cached").enabled and second.plugin("cached").version == "1.2.3"
    second.shutdown()
    assert len(parses) == 1  # not parsed again


def test_a_kernel_lets_the_parsed_cache_go_and_a_second_scan_still_uses_the_file(
    home: Path, parses: list[str]
) -> None:
    """The cache's entries are held only while plugins are scanned (500 plugins' parsed manifests would
    stay in memory for the kernel's life); a later scan of the same kernel reads the file again."""
    directory = write_plugin(home / "plugins", "cached", CODE, manifest={"name": "cached"})
    age(directory / "plugin.yaml")
    load(home).shutdown()
    assert len(parses) == 1
    k = load(home)
    assert k._manifests._entries is None
    merged, _refused = k.discover()
    assert "cached" in merged and len(parses) == 1  # read from the file, not parsed
    k.shutdown()


def test_an_edited_manifest_is_parsed_again(home: Path, parses: list[str]) -> None:
    directory = write_plugin(
        home / "plugins", "edited", CODE, manifest={"name": "edited", "version": "1.0.0"}
    )
    age(directory / "plugin.yaml")
    load(home).shutdown()
    (directory / "plugin.yaml").write_text("name: edited\nversion: 2.0.0\n", encoding="utf-8")
    k = load(home)
    assert k.plugin("edited").version == "2.0.0"
    k.shutdown()
    assert len(parses) == 2


def test_a_manifest_changed_just_now_is_not_cached(home: Path) -> None:
    """Two edits within one tick of the file system's clock would keep the file's identity: a file
    modified in the last seconds is parsed every time until it is older."""
    write_plugin(home / "plugins", "fresh", CODE, manifest={"name": "fresh", "version": "1.0.0"})
    load(home).shutdown()
    cache = home / MANIFESTS_FILE
    entries = json.loads(cache.read_text(encoding="utf-8"))["entries"] if cache.exists() else {}
    assert not any(key.endswith(os.path.join("fresh", "plugin.yaml")) for key in entries)


def test_data_json_cannot_give_back_is_parsed_every_time(home: Path, parses: list[str]) -> None:
    """A YAML date (an unknown field) is not JSON: such a manifest is never cached, and reads the same."""
    directory = home / "plugins" / "dated"
    directory.mkdir(parents=True)
    (directory / "plugin.yaml").write_text("name: dated\nreleased: 2026-12-01\n", encoding="utf-8")
    (directory / "__init__.py").write_text(CODE, encoding="utf-8")
    age(directory / "plugin.yaml")
    for _ in range(2):
        k = load(home)
        assert k.plugin("dated").enabled
        k.shutdown()
    assert len(parses) == 2


# -- the entry points of the installed distributions ----------------------------------------------


def _distribution(site: Path, name: str, entry: str) -> None:
    """A real distribution on disk (a package and its .dist-info), as pip would leave it."""
    package = site / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(CODE, encoding="utf-8")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\nSummary: s\n")
    (info / "entry_points.txt").write_text(f"[hermes_agent.plugins]\n{entry} = {name}\n", encoding="utf-8")


def test_entry_points_are_read_from_the_cache_while_nothing_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernel.base.log import LazyLogger
    from kernel.core.sources.discovery import CachedEntryPoint, scan_entry_points

    log = LazyLogger(logging.getLogger("test-ep-cache"), list)
    site = tmp_path / "site"
    _distribution(site, "demo_ep_pkg", "demo-ep")
    age(site)
    # Only folders that this test leaves alone (the working folder changes as tests write to it).
    monkeypatch.setattr(sys, "path", [str(site), *(p for p in sys.path if p not in ("", str(Path.cwd())))])
    monkeypatch.setenv("HERMES_KERNEL_ENTRY_POINTS", "all")  # the subject: every folder of sys.path
    cache = tmp_path / "entry-points.json"
    first = [c for c in scan_entry_points(log, cache=cache) if c.key == "demo-ep"]
    assert len(first) == 1 and not isinstance(first[0].entry_point, CachedEntryPoint)
    assert cache.is_file()
    second = [c for c in scan_entry_points(log, cache=cache) if c.key == "demo-ep"]
    assert len(second) == 1 and isinstance(second[0].entry_point, CachedEntryPoint)
    assert second[0].version == "1.0" and second[0].description == "s"
    assert callable(second[0].entry_point.load().register)

    # Installing another distribution changes the folder: the cache is not trusted, the new one is seen.
    _distribution(site, "other_ep_pkg", "other-ep")
    third = {c.key for c in scan_entry_points(log, cache=cache)}
    assert {"demo-ep", "other-ep"} <= third
