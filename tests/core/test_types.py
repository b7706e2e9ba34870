"""mypy over ``kernel/`` with the settings of ``[tool.mypy]`` in pyproject.toml, run by ``make test``.

mypy runs from ``.venv/lint-site`` (``make test-deps`` installs it there with the stubs it needs), kept
out of the project's venv like import-linter; the lint site is appended to ``sys.path``, so the project's
packages win where both hold one. ``--python-executable`` is this interpreter, so mypy reads the search
path in-process (the stubs of the lint site included). Its cache under ``.venv/`` keeps a rerun to seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINT_SITE = REPO / ".venv" / "lint-site"
CACHE = REPO / ".venv" / "mypy-cache"
MYPY = (
    "import sys; sys.path.append(sys.argv.pop(1)); from mypy.__main__ import console_entry\nconsole_entry()"
)


def test_mypy_finds_no_error_in_the_kernel() -> None:
    assert (LINT_SITE / "mypy").is_dir(), f"mypy is not in {LINT_SITE}: run `make test-deps`"
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "MYPYPATH"}}
    command = [
        sys.executable,
        "-c",
        MYPY,
        str(LINT_SITE),
        "--python-executable",
        sys.executable,
        "--cache-dir",
        str(CACHE),
        "--no-error-summary",
        "--no-color-output",
    ]
    proc = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_is_configured_with_the_strictness_the_kernel_keeps() -> None:
    """The settings the issue asks for (pluggy's), and no blanket escape hatch for the kernel's own code."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    for setting in ("check_untyped_defs", "disallow_any_generics", "strict_equality", "warn_unused_ignores"):
        assert config.get(setting) is True, setting
    assert config["files"] == ["kernel"]
    assert "ignore_missing_imports" not in config
    for override in config.get("overrides", []):
        modules = [override["module"]] if isinstance(override["module"], str) else override["module"]
        if override.get("ignore_missing_imports"):
            assert not any(m == "kernel" or m.startswith("kernel.") for m in modules), override
