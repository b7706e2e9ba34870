"""Asking for the environment variables an installed plugin needs, and saving the answers to ``.env``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from ...base.config import read_dotenv
from ...core.sources.manifest import EnvVar, Manifest
from ..common import env_state
from .dists import _dist_manifest


class _Aborted(Exception):
    """The user pressed Ctrl-C at a prompt."""


def _ask_env(home: Path, manifest: Manifest, *, no_input: bool) -> tuple[dict[str, str], list[EnvVar]]:
    """Ask for each ``requires_env`` variable set neither in the environment nor in ``<home>/.env``.

    The answers are saved to ``.env`` at once; returns them and the variables
    still missing.  Raises :class:`_Aborted` on Ctrl-C (nothing saved).
    """
    dotenv = read_dotenv(home)
    environ = dict(os.environ)
    missing = [v for v in manifest.requires_env if env_state(v, environ, dotenv) is None]
    if not missing or no_input:
        return {}, missing
    print(
        f"'{manifest.name}' needs {len(missing)} environment variable(s); the answers go to "
        f"{home / '.env'} (press Enter to skip one, Ctrl-C to abort)."
    )
    answers: dict[str, str] = {}
    for var in missing:
        about = " ".join(x for x in (var.description, f"<{var.url}>" if var.url else "") if x)
        if about:
            print(f"  {var.name}: {about}")
        label = var.prompt or var.name
        try:
            if var.secret and sys.stdin.isatty():
                import getpass

                value = getpass.getpass(f"{label} (hidden): ")
            else:
                value = input(f"{label}: ")
        except KeyboardInterrupt:
            print()
            raise _Aborted from None
        except EOFError:
            print()
            break
        value = value.strip()
        if value:
            answers[var.name] = value
    if answers:
        from ...base.files import write_env

        write_env(home, answers)
    return answers, [v for v in missing if v.name not in answers]


def _ask_package_env(home: Path, dist: Any, *, no_input: bool, stays: str) -> list[str] | None:
    """Ask for the variables an installed package's manifest needs; the names still missing, or
    ``None`` when the user aborted (nothing saved; the package ``stays`` installed or updated)."""
    manifest = _dist_manifest(dist)
    if manifest is None:
        return []
    try:
        answers, still = _ask_env(home, manifest, no_input=no_input)
    except _Aborted:
        print(f"aborted: no variables saved (the package stays {stays})", file=sys.stderr)
        return None
    _report_env(home, answers)
    return [v.name for v in still]


def _report_env(home: Path, answers: dict[str, str]) -> None:
    if answers:
        print(f"saved {', '.join(answers)} to {home / '.env'} (mode 0600)")
        for name, value in answers.items():
            if "${" in value:
                print(f"warning: the value of {name} contains '${{': .env readers expand ${{NAME}} in it")
