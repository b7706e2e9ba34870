"""Fixtures for loading real published Hermes plugins through hermes-kernel.

The ten packages of ``requirements.txt`` are installed by ``make test-deps`` with
``pip install --no-deps --target .venv/compat-site``: outside site-packages, so
that their entry points exist only for the tests here, which put that folder on
``sys.path`` for the length of one test.  Every test runs with a fresh HOME,
HERMES_HOME (in the environment too: several packages read it directly) and
working directory, and the packages' modules are imported afresh (some read
their settings once, at import).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kernel import Kernel
from kernel.core.sources.discovery import ENTRY_POINTS_VARIABLE

REPO = Path(__file__).resolve().parents[2]
COMPAT_SITE = REPO / ".venv" / "compat-site"

# Entry-point name of each package's plugin(s) (what plugins.disabled takes).
ENTRY_POINTS = {
    "acp-hermes": ["acp"],
    "creedspace-hermes": ["creedspace"],
    "hermes-apertis-provider": ["apertis"],
    "hermes-llm-api-call-logger": ["llm-api-call-logger"],
    "hermes-loop-plugin": ["hermes-loop"],
    "hermes-nanogpt-provider": ["nanogpt-provider"],
    "hermes-stepfun-imagegen": ["stepfun-imggen", "image-gen-chain"],
    "lossless-hermes-py": ["lossless-hermes"],
    "noisegate-hermes": ["noisegate"],
}
ALL_ENTRY_POINTS = [name for names in ENTRY_POINTS.values() for name in names]


@pytest.fixture
def compat_site(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``.venv/compat-site`` on ``sys.path`` for this test; its modules are forgotten afterwards."""
    if not (COMPAT_SITE / ".installed").is_file():
        pytest.fail(f"the published plugins are not installed in {COMPAT_SITE}: run `make test-deps`")
    before = set(sys.modules)
    monkeypatch.syspath_prepend(str(COMPAT_SITE))
    # Its distributions are the entry-point plugins of this test, and only they.
    monkeypatch.setenv(ENTRY_POINTS_VARIABLE, str(COMPAT_SITE))
    importlib.invalidate_caches()
    yield COMPAT_SITE
    root = COMPAT_SITE.resolve()
    for name in set(sys.modules) - before:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file and Path(file).resolve().is_relative_to(root):
            del sys.modules[name]


@pytest.fixture
def hermes_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The kernel home, also exported as ``HERMES_HOME``."""
    monkeypatch.setenv("HERMES_HOME", str(home))
    return home


@pytest.fixture
def compat_kernel(compat_site: Path, hermes_home: Path) -> Iterator[Callable[..., Kernel]]:
    """``compat_kernel(*packages, config=None, approver=None)``: a loaded kernel with only those packages.

    The bundled plugins of the checkout load too (the scripted and openai-compatible
    model providers among them), as they would for a user.
    The other packages' entry points are disabled through ``plugins.disabled``
    (no package is given: all ten load together).  ``config`` is written to
    ``<home>/config.yaml`` (merged under the ``plugins.disabled`` list).
    """
    made: list[Kernel] = []

    def make(*packages: str, config: dict[str, Any] | None = None, approver: Any = None) -> Kernel:
        data = dict(config or {})
        if packages:
            keep = {name for package in packages for name in ENTRY_POINTS.get(package, [])}
            plugins = dict(data.get("plugins") or {})
            plugins["disabled"] = [
                *plugins.get("disabled", []),
                *(n for n in ALL_ENTRY_POINTS if n not in keep),
            ]
            data["plugins"] = plugins
        (hermes_home / "config.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
        kernel = Kernel(hermes_home, approver=approver)
        made.append(kernel)
        kernel.load()
        return kernel

    yield make
    for kernel in made:
        kernel.shutdown()
