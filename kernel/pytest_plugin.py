"""pytest fixtures for testing hermes-kernel plugins (loaded through the ``pytest11`` entry point).

* ``hermes_home``: an empty kernel home in a temporary directory (also ``$HERMES_HOME``).
* ``hermes_plugin(name, code, manifest=None, files=None)``: write a plugin into that home.
* ``hermes_kernel(config=None, script=None, approver=None)``: a loaded :class:`~kernel.testing.TestKernel`
  (with ``.kernel``, ``.recorder``, ``.session()``, ``.chat(...)``), shut down after the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .testing import TestKernel, write_plugin


@pytest.fixture
def hermes_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "hermes-home"
    home.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(home))
    return home


@pytest.fixture
def hermes_plugin(hermes_home: Path) -> Callable[..., Path]:
    def make(
        name: str, code: str, manifest: dict[str, Any] | None = None, files: dict[str, str] | None = None
    ) -> Path:
        return write_plugin(hermes_home, name, code, manifest, files)

    return make


@pytest.fixture
def hermes_kernel(hermes_home: Path) -> Iterator[Callable[..., TestKernel]]:
    made: list[TestKernel] = []

    def make(config: dict[str, Any] | None = None, *, script: Any = None, approver: Any = None) -> TestKernel:
        harness = TestKernel(hermes_home, config, script=script, approver=approver)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.close()
