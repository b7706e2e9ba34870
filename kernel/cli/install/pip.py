"""Running ``python -m pip install`` and reading what its report says it installed."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any


def _pip_env() -> dict[str, str]:
    return {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _run_pip(command: list[str], *, cwd: str | None = None) -> tuple[int, dict[str, Any]]:
    """Run ``python -m pip install ...`` with ``--report``; pip's output goes to stderr.  The exit code
    (``-1`` when pip cannot be run) and pip's installation report (``{}`` when it wrote none)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hermes-kernel-pip-") as scratch:
        report_file = Path(scratch) / "report.json"
        i = command.index("install") + 1
        full = [*command[:i], "--report", str(report_file), *command[i:]]
        print(f"running: {shlex.join(full)}", file=sys.stderr)
        sys.stdout.flush()
        try:
            result = subprocess.run(full, stdout=sys.stderr, check=False, cwd=cwd, env=_pip_env())
        except OSError as exc:
            print(f"error: cannot run pip: {exc}", file=sys.stderr)
            return -1, {}
        try:
            report = json.loads(report_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            report = {}
    return result.returncode, report if isinstance(report, dict) else {}


def _reported(report: dict[str, Any]) -> dict[str, str]:
    """Name to version of what pip's report says it installed."""
    out = {}
    for item in report.get("install", []):
        metadata = item.get("metadata") if isinstance(item, dict) else None
        if isinstance(metadata, dict) and isinstance(metadata.get("name"), str):
            out[metadata["name"]] = str(metadata.get("version", ""))
    return out


def _absolute_target(pip_args: list[str]) -> tuple[list[str], str | None]:
    """``pip_args`` with a ``--target`` directory made absolute (pip reads it from the working directory),
    and that directory."""
    out = list(pip_args)
    for i, arg in enumerate(out):
        if arg in ("-t", "--target") and i + 1 < len(out):
            out[i + 1] = str(Path(out[i + 1]).expanduser().resolve())
            return out, out[i + 1]
        if arg.startswith("--target="):
            value = str(Path(arg.split("=", 1)[1]).expanduser().resolve())
            out[i] = f"--target={value}"
            return out, value
        if arg.startswith("-t") and len(arg) > 2 and not arg.startswith("--"):
            value = str(Path(arg[2:]).expanduser().resolve())
            out[i] = f"-t{value}"
            return out, value
    return out, None
