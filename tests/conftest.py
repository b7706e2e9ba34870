"""Shared fixtures: every test runs in a sandboxed HOME, HERMES_HOME and working directory."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kernel import Kernel

REPO = Path(__file__).resolve().parent.parent

_ENV_TO_CLEAR = (
    "HERMES_HOME",
    "HERMES_PLUGINS_DEBUG",
    "HERMES_ENABLE_PROJECT_PLUGINS",
    "HERMES_BUNDLED_PLUGINS",
)


@pytest.fixture(autouse=True)
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh HOME and working directory; no HERMES_* variable leaks in from the machine."""
    for name in _ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)
    user_home = tmp_path / "user"
    user_home.mkdir()
    monkeypatch.setenv("HOME", str(user_home))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


@pytest.fixture
def sink(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A module plugins import to record calls (``hook_sink.calls``)."""
    module = types.ModuleType("hook_sink")
    module.calls = []  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "hook_sink", module)
    return module


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The kernel home used by the ``kernel`` fixtures (``<tmp>/hermes``)."""
    path = tmp_path / "hermes"
    path.mkdir()
    return path


@pytest.fixture
def bundled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty bundled-plugins directory, so that tests see only the plugins they write."""
    path = tmp_path / "bundled"
    path.mkdir()
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(path))
    return path


def write_plugin(
    root: Path,
    dirname: str,
    code: str = "def register(ctx):\n    pass\n",
    manifest: dict[str, Any] | str | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """Write a directory plugin under ``root``; ``manifest`` defaults to ``{name: dirname}``.

    ``manifest`` may be a dict (dumped as YAML), raw YAML text, or ``False``-y
    empty string to write no manifest at all.
    """
    path = root / dirname
    path.mkdir(parents=True, exist_ok=True)
    if manifest is None:
        manifest = {"name": Path(dirname).name, "version": "0.1.0"}
    if isinstance(manifest, dict):
        (path / "plugin.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    elif manifest:
        (path / "plugin.yaml").write_text(manifest, encoding="utf-8")
    (path / "__init__.py").write_text(textwrap.dedent(code), encoding="utf-8")
    for rel, text in (files or {}).items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def plugin_dir(home: Path) -> Callable[..., Path]:
    """``plugin_dir(dirname, code, manifest=None, files=None)`` writes into ``<home>/plugins``."""

    def make(dirname: str, code: str = "def register(ctx):\n    pass\n", **kwargs: Any) -> Path:
        return write_plugin(home / "plugins", dirname, code, **kwargs)

    return make


@pytest.fixture
def make_kernel(home: Path, bundled: Path) -> Iterator[Callable[..., Kernel]]:
    """``make_kernel(config=None, load=True)``: a kernel in ``home``, shut down after the test."""
    made: list[Kernel] = []

    def make(config: dict[str, Any] | None = None, load: bool = True, **kwargs: Any) -> Kernel:
        k = Kernel(home=kwargs.pop("home", home), config=config)
        made.append(k)
        if load:
            k.load()
        return k

    yield make
    for k in made:
        k.shutdown()


def agent_log(home: Path) -> str:
    """The text of ``<home>/logs/agent.log`` ("" when nothing was logged)."""
    path = home / "logs" / "agent.log"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def run_json(text: str) -> Any:
    """Parse a tool result, failing the test with the text when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError:  # pragma: no cover - shown on failure only
        pytest.fail(f"not JSON: {text!r}")


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for running ``hermes-kernel`` as a subprocess against ``home``."""
    env = {k: v for k, v in os.environ.items() if k not in _ENV_TO_CLEAR}
    env["HERMES_HOME"] = str(home)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


CLI = [sys.executable, "-m", "kernel"]
