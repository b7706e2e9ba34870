"""The architecture's import contracts (``[tool.importlinter]`` in pyproject.toml), checked by import-linter.

Run as a test so that ``make test`` enforces them; a contract that stops holding
fails here with import-linter's own report of the offending imports.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KERNEL = REPO / "kernel"
LINT = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports())"


def contracts() -> dict[str, dict]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["id"]: c for c in data["tool"]["importlinter"]["contracts"]}


def test_every_import_contract_is_kept() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", LINT],
        cwd=REPO,
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
