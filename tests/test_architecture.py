"""The architecture's import contracts (``[tool.importlinter]`` in pyproject.toml), checked by import-linter.

Run as a test so that ``make test`` enforces them; a contract that stops holding
fails here with import-linter's own report of the offending imports.  import-linter
runs from ``.venv/lint-site`` (``make test-deps`` installs it there), not from the
project's venv, so that its dependency ``rich`` does not slow down ``import structlog``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KERNEL = REPO / "kernel"
LINT_SITE = REPO / ".venv" / "lint-site"
LINT = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports())"


def contracts() -> dict[str, dict]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["id"]: c for c in data["tool"]["importlinter"]["contracts"]}


def test_every_import_contract_is_kept() -> None:
    assert (LINT_SITE / "importlinter").is_dir(), f"import-linter is not in {LINT_SITE}: run `make test-deps`"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(LINT_SITE), str(REPO)])}
    proc = subprocess.run(
        [sys.executable, "-c", LINT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def test_the_cli_contract_covers_every_other_module_of_the_kernel() -> None:
    """A module added to ``kernel/`` must be listed, or it could import the CLI unchecked."""
    listed = set(contracts()["cli-on-top"]["source_modules"])
    present = {
        f"kernel.{p.stem if p.suffix == '.py' else p.name}"
        for p in KERNEL.iterdir()
        if (p.suffix == ".py" and p.stem not in ("__init__", "__main__")) or (p / "__init__.py").is_file()
    }
    present -= {"kernel.cli", "kernel._extensions"}
    assert present == listed, f"missing: {sorted(present - listed)}; stale: {sorted(listed - present)}"
