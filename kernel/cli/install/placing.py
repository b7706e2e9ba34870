"""Copying a checked plugin folder into ``<home>/plugins``, and the file hashes that show later changes."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ...core.sources.manifest import EnvVar, Manifest
from ..common import fail
from .checks import _NOT_COPIED, _not_regular
from .env import _Aborted, _ask_env


def tree_hashes(root: Path) -> dict[str, str]:
    """SHA-256 of each file under ``root`` that an install copies (relative path: hex digest)."""
    import hashlib

    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in _NOT_COPIED)
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = Path(folder) / name
            try:
                if path.is_symlink():
                    digest = "link:" + os.readlink(path)
                else:
                    digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError as exc:
                digest = f"unreadable: {exc}"
            out[path.relative_to(root).as_posix()] = digest
    return out


def _changes(recorded: dict[str, str], current: dict[str, str]) -> list[str]:
    """What differs between two :func:`tree_hashes` (``changed: a``, ``added: b``, ``deleted: c``)."""
    changed = sorted(k for k in recorded.keys() & current.keys() if recorded[k] != current[k])
    added = sorted(current.keys() - recorded.keys())
    deleted = sorted(recorded.keys() - current.keys())
    out = []
    for label, names in (("changed", changed), ("added", added), ("deleted", deleted)):
        if names:
            more = f" and {len(names) - 5} more" if len(names) > 5 else ""
            out.append(f"{label}: {', '.join(names[:5])}{more}")
    return out


@dataclass
class _Placed:
    """A plugin directory copied into place, and the variables asked for on the way."""

    manifest: Manifest
    dest: Path
    replaced: bool
    answers: dict[str, str]
    missing: list[EnvVar]
    files: dict[str, str]


def _place(
    plugin_dir: Path,
    dest: Path,
    manifest: Manifest,
    home: Path,
    *,
    origin: str,
    no_input: bool,
    nothing: str = "nothing was installed",
) -> _Placed | int:
    """Copy ``plugin_dir`` to ``dest`` through a hidden staging directory, asking for missing variables
    on the way; the old ``dest`` is swapped out only at the end.  The exit code on failure (``nothing``
    says what that left)."""
    import shutil
    import tempfile

    unsafe = _not_regular(plugin_dir)
    if unsafe:
        shown = ", ".join(unsafe[:5]) + (f" and {len(unsafe) - 5} more" if len(unsafe) > 5 else "")
        return fail(
            f"{origin} holds entries that are not regular files or folders ({shown}); a plugin is installed "
            f"from its own regular files only (links could copy files from outside it); {nothing}"
        )
    plugins_root = dest.parent
    replacing = dest.exists() or dest.is_symlink()
    try:
        plugins_root.mkdir(parents=True, exist_ok=True)
        # Staged in a hidden directory (discovery skips dot names), swapped in at the end.
        staging = Path(tempfile.mkdtemp(prefix=f".install-{dest.name}-", dir=plugins_root))
    except OSError as exc:
        return fail(f"cannot create {plugins_root}: {exc}; {nothing}")
    try:
        staged = staging / dest.name
        # A link that appeared after the check above is copied as a link, never followed, then refused.
        shutil.copytree(
            plugin_dir, staged, symlinks=True, ignore=shutil.ignore_patterns(*_NOT_COPIED, "*.pyc")
        )
        unsafe = _not_regular(staged)
        if unsafe:
            return fail(f"{origin} changed while it was copied (a link appeared: {unsafe[0]}); {nothing}")
        files = tree_hashes(staged)
        try:
            answers, missing = _ask_env(home, manifest, no_input=no_input)
        except _Aborted:
            print(f"aborted: {nothing} and nothing saved", file=sys.stderr)
            return 130
        if replacing:
            os.replace(dest, staging / ".replaced")
        try:
            os.replace(staged, dest)
        except OSError:
            if replacing:  # put the previous copy back before the staging directory goes
                os.replace(staging / ".replaced", dest)
            raise
    except OSError as exc:
        return fail(f"cannot copy {plugin_dir} into {dest}: {exc}; {nothing}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _Placed(manifest, dest, replacing, answers, missing, files)
