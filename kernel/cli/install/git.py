"""Cloning a plugin's git repository, and asking a clone which commit and branch it holds."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _git_clone(url: str, ref: str | None, dest: Path, *, interactive: bool) -> str | None:
    """Clone ``url`` (at ``ref``) into ``dest``; the error message, or ``None``."""
    import shutil
    import subprocess

    git = shutil.which("git")
    if git is None:
        return "git is not installed (it is needed to install from a git URL); install git or clone by hand"
    command = [git, "clone", "--depth", "1", "--quiet"]
    if ref:
        command += ["--branch", ref]
    command += ["--", url, str(dest)]
    env = dict(os.environ)
    env.setdefault("GIT_ALLOW_PROTOCOL", "file:git:http:https:ssh")
    if not interactive or not sys.stdin.isatty():
        env["GIT_TERMINAL_PROMPT"] = "0"
    from .. import output

    print(f"cloning {url}" + (f" (at {ref})" if ref else "") + " ...", file=sys.stderr)
    try:
        with output.status("git clone in progress ..."):
            result = subprocess.run(
                command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
            )
    except OSError as exc:
        return f"cannot run git: {exc}"
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip() or f"exit code {result.returncode}"
        return f"git clone {url} failed: {detail}"
    return None


def _git_head(clone: Path) -> tuple[str | None, str | None]:
    """The commit a clone is at, and its branch (``None`` for a tag: a detached head)."""
    import shutil
    import subprocess

    git = shutil.which("git") or "git"

    def ask(*words: str) -> str | None:
        try:
            result = subprocess.run(
                [git, "-C", str(clone), *words],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=False,
            )
        except OSError:
            return None
        return (result.stdout.strip() or None) if result.returncode == 0 else None

    return ask("rev-parse", "HEAD"), ask("symbolic-ref", "--short", "-q", "HEAD")
