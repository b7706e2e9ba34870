"""The plugin list of the last ``load()``, kept so that ``plugins list`` need not import plugin code.

After a load, the kernel writes ``<home>/cache/plugins-state.json``: the
:class:`~kernel.kernel.PluginInfo` records and a fingerprint of everything
the outcome depends on (each plugin directory's files, entry points,
the effective config, which ``requires_env`` variables are set, the kernel's
version).  A later listing recomputes the fingerprint from discovery alone,
which reads manifests but imports nothing, and reuses the records while it
matches.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

STATE_FILE = Path("cache") / "plugins-state.json"
FORMAT = 1


def fingerprint(parts: Iterable[Any]) -> str:
    """A stable hash of JSON-able parts."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(json.dumps(_string_keys(part), sort_keys=True, default=str).encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def tree_signature(path: Path | None) -> list[Any]:
    """Names, sizes and modification times of the files under a plugin directory."""
    if path is None:
        return []
    out: list[Any] = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            try:
                stat = os.stat(os.path.join(root, name))
            except OSError:
                continue
            out.append([os.path.relpath(os.path.join(root, name), path), stat.st_size, stat.st_mtime_ns])
    return out


def _string_keys(value: Any) -> Any:
    """``value`` with every mapping key a string (YAML may give ``off:`` as ``False``), so it sorts."""
    if isinstance(value, dict):
        return {str(k): _string_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_string_keys(v) for v in value]
    return value


def save(home: Path, print_: str, plugins: list[dict[str, Any]]) -> None:
    """Write the state atomically; a home that cannot be written is left alone."""
    path = home / STATE_FILE
    data = json.dumps({"format": FORMAT, "fingerprint": print_, "plugins": plugins}, default=str)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".plugins-state.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(tmp)


def load(home: Path, print_: str) -> list[dict[str, Any]] | None:
    """The saved plugin records when their fingerprint is ``print_``; else ``None``."""
    try:
        data = json.loads((home / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("fingerprint") != print_:
        return None
    plugins = data.get("plugins")
    return plugins if isinstance(plugins, list) else None


def discard(home: Path) -> None:
    """Forget the saved state (the next listing loads)."""
    with contextlib.suppress(OSError):
        (home / STATE_FILE).unlink()
