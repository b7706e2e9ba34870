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
    """An empty kernel home in the test's temporary directory, also set as ``$HERMES_HOME``.

    Kernels made in the test (``Kernel()`` with no ``home``) use it; your own ``~/.hermes`` is never
    read or written.  Returns its path.
    """
    home = tmp_path / "hermes-home"
    home.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(home))
    return home


@pytest.fixture
def hermes_plugin(hermes_home: Path) -> Callable[..., Path]:
    """A function that writes a directory plugin into ``<hermes_home>/plugins/<name>/``.

    ``hermes_plugin(name, code, manifest=None, files=None)``: ``code`` is the plugin's ``__init__.py``,
    ``manifest`` its ``plugin.yaml`` as a dict (default: the name and version ``0.0.0``), and ``files``
    maps further relative paths to their text; the texts are dedented.  Returns the plugin's directory;
    the kernel finds the plugin at its next ``load()``.
    """

    def make(
        name: str, code: str, manifest: dict[str, Any] | None = None, files: dict[str, str] | None = None
    ) -> Path:
        return write_plugin(hermes_home, name, code, manifest, files)

    return make


@pytest.fixture
def hermes_kernel(hermes_home: Path) -> Iterator[Callable[..., TestKernel]]:
    """A function that loads a kernel in ``hermes_home`` and returns its ``TestKernel`` harness.

    ``hermes_kernel(config=None, *, script=None, approver=None)``: ``config`` is merged over
    ``config.yaml``, ``script`` (a list of assistant turns) selects the bundled ``scripted`` model, and
    ``approver`` answers approval requests.  The :class:`~kernel.testing.TestKernel` it returns has
    ``.kernel``, ``.recorder`` (every hook call), ``.session()`` and ``.chat(...)``.  The bundled plugins
    load as they do for a user.  Every kernel made is shut down when the test ends.
    """
    made: list[TestKernel] = []

    def make(config: dict[str, Any] | None = None, *, script: Any = None, approver: Any = None) -> TestKernel:
        harness = TestKernel(hermes_home, config, script=script, approver=approver)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.close()
