"""Start-up does only what it must: a current ``plugins list`` parses no YAML and imports no service.

The second ``hermes-kernel plugins list`` of an unchanged home answers from the saved list, the
parsed ``config.yaml`` and manifests, and the remembered entry points: it imports neither PyYAML,
structlog, asyncio nor ``importlib.metadata``, and no service module.  The config cache follows the
file's content, and a kernel that is only constructed writes nothing into the home.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import REPO, age, run_probe, write_plugin

from kernel import Kernel
from kernel.base.state import CONFIG_FILE

PROBE = """
import json, runpy, sys
sys.argv = ["hermes-kernel", *(sys.argv[1:] or ["plugins", "list", "--json"])]
try:
    runpy.run_module("kernel", run_name="__main__")
except SystemExit:
    pass
heavy = ["yaml", "structlog", "asyncio", "importlib.metadata", "dotenv", "blinker", "httpx",
         "rich", "argcomplete", "ruamel", "ruamel.yaml", "jsonschema"]
services = sorted(m for m in sys.modules if m.startswith(("kernel.tools", "kernel.providers",
                  "kernel.gateway", "kernel.surfaces", "kernel.events", "kernel.llm", "kernel.agent",
                  "kernel.registrations")))
print("PROBE " + json.dumps({"heavy": [m for m in heavy if m in sys.modules], "services": services}))
"""

HOOK_PLUGIN = "def register(ctx):\n    ctx.register_hook('post_tool_call', lambda **kw: None)\n"


def probe(home: Path, cwd: Path, bundled: Path, *argv: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "_ARGCOMPLETE"))}
    env.update(HERMES_HOME=str(home), HERMES_BUNDLED_PLUGINS=str(bundled), PYTHONPATH=str(REPO))
    return run_probe(PROBE, *argv, cwd=cwd, env=env)


def test_a_current_plugins_list_parses_no_yaml_and_imports_no_service(tmp_path: Path, bundled: Path) -> None:
    home = tmp_path / "home"
    for i in range(3):
        write_plugin(home / "plugins", f"p{i}", HOOK_PLUGIN)
    (home / "config.yaml").write_text("plugins:\n  register_timeout: 20\n", encoding="utf-8")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    age(home, cwd)
    first = probe(home, cwd, bundled)  # loads, then saves the list and the caches
    assert "yaml" in first["heavy"]
    second = probe(home, cwd, bundled)
    assert second == {"heavy": [], "services": []}
    # The table through a pipe (the benchmarked case): no rich, no argcomplete either.
    assert probe(home, cwd, bundled, "plugins", "list") == {"heavy": [], "services": []}


def test_help_and_version_import_neither_rich_nor_argcomplete(tmp_path: Path, bundled: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for argv in (["--version"], ["plugins", "--help"], ["logs", "-n", "1"]):
        loaded = probe(home, tmp_path, bundled, *argv)["heavy"]
        assert not {"rich", "argcomplete", "ruamel", "jsonschema"} & set(loaded), (argv, loaded)


def test_the_config_cache_follows_the_content(home: Path) -> None:
    (home / "cache").mkdir()
    (home / "config.yaml").write_text("model:\n  provider: one\n", encoding="utf-8")
    assert Kernel(home=home).config["model"]["provider"] == "one"
    assert (home / CONFIG_FILE).is_file()
    assert Kernel(home=home).config["model"]["provider"] == "one"  # from the cache
    (home / "config.yaml").write_text("model:\n  provider: two\n", encoding="utf-8")  # same size
    assert Kernel(home=home).config["model"]["provider"] == "two"


def test_a_config_json_cannot_hold_is_read_from_the_file_every_time(home: Path) -> None:
    (home / "cache").mkdir()
    (home / "config.yaml").write_text(
        "plugins:\n  entries:\n    x:\n      settings:\n        d: 2026-12-01\n"
    )
    for _ in range(2):
        value = Kernel(home=home).config["plugins"]["entries"]["x"]["settings"]["d"]
        assert str(value) == "2026-12-01" and not isinstance(value, str)
    assert not (home / CONFIG_FILE).exists()


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe", b"[" * 100_000, b'{"format": 1, "digest": "0", "data": {"model": {"provider": "evil"}}}'],
    ids=["garbage", "deep", "another-digest"],
)
def test_a_broken_or_foreign_config_cache_is_not_used(home: Path, content: bytes) -> None:
    (home / "cache").mkdir()
    (home / CONFIG_FILE).write_bytes(content)
    (home / "config.yaml").write_text("model:\n  provider: mine\n", encoding="utf-8")
    assert Kernel(home=home).config["model"]["provider"] == "mine"


def test_constructing_a_kernel_writes_nothing_into_the_home(tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  provider: x\n", encoding="utf-8")
    k = Kernel(home=home)
    assert k.config["model"]["provider"] == "x"
    assert sorted(p.name for p in home.iterdir()) == ["config.yaml"]


def test_a_config_with_a_credential_is_never_copied_into_the_cache(home: Path) -> None:
    """A chat never sees a configuration value, and no second file holds one: a config.yaml with a
    secret-named value (at any depth) is parsed at every start instead of being cached."""
    (home / "cache").mkdir()
    (home / "config.yaml").write_text("model:\n  provider: x\n  api_key: sk-live-123\n", encoding="utf-8")
    k = Kernel(home=home)
    assert k.config["model"]["api_key"] == "sk-live-123"
    k.load()
    k.save_plugin_state()
    k.shutdown()
    assert not (home / CONFIG_FILE).exists()
    cached = [f for f in (home / "cache").rglob("*") if f.is_file()]
    assert cached and not any("sk-live-123" in f.read_text(errors="replace") for f in cached)
