"""``agent.secret_sources`` (and ``.base``) for plugins written for Hermes Agent: the secret-source
contract (the kernel's classes, see :mod:`kernel.registrations`) and the helpers source plugins use."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from ...registrations import SECRET_SOURCE_API_VERSION, ErrorKind, FetchResult, SecretSource

__all__ = [
    "DEFAULT_CLI_TIMEOUT_SECONDS",
    "DEFAULT_FETCH_TIMEOUT_SECONDS",
    "SECRET_SOURCE_API_VERSION",
    "ErrorKind",
    "FetchResult",
    "SecretSource",
    "is_valid_env_name",
    "run_secret_cli",
    "scrub_ansi",
]

DEFAULT_FETCH_TIMEOUT_SECONDS = 120.0
DEFAULT_CLI_TIMEOUT_SECONDS = 30.0

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Terminal control sequences: CSI (ESC [ ... final byte) and OSC (ESC ] ... BEL or ESC \).
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")
# What a helper program gets of the environment besides the names a source allows.
_BASE_ENV = ("PATH", "HOME", "USERPROFILE", "SYSTEMROOT", "TMPDIR", "TEMP", "LANG", "LC_ALL")


def is_valid_env_name(name: str) -> bool:
    """Whether ``name`` can be an environment variable's name."""
    return isinstance(name, str) and _ENV_NAME.fullmatch(name) is not None


def scrub_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (a helper's coloured diagnostics)."""
    return _ESCAPES.sub("", text or "")


def run_secret_cli(
    argv: Sequence[str],
    *,
    allow_env: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_CLI_TIMEOUT_SECONDS,
) -> subprocess.CompletedProcess[str]:
    """Run a secret manager's command-line helper, as Hermes does for its own sources.

    No shell; stdin is closed (a helper that prompts fails at once); the child sees only the basic
    variables plus ``allow_env`` and ``extra_env`` (never the credentials already loaded); ``NO_COLOR``
    is set and stderr scrubbed.  ``RuntimeError`` when it cannot start or runs past ``timeout``.
    """
    env = {k: os.environ[k] for k in (*_BASE_ENV, *allow_env) if k in os.environ}
    env.update(extra_env or {})
    env.setdefault("NO_COLOR", "1")
    program = Path(str(argv[0])).name if argv else "?"
    try:
        done = subprocess.run(
            list(argv), env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{program} did not finish within {timeout:g} s") from exc
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"{program} could not be started: {exc}") from exc
    done.stdout = done.stdout or ""
    done.stderr = scrub_ansi(done.stderr or "")
    return done
