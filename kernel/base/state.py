"""The plugin list of the last ``load()``, kept so that ``plugins list`` need not import plugin code.

After a load, the kernel writes ``<home>/cache/plugins-state.json``: the
:class:`~kernel.core.kernel.PluginInfo` records and a fingerprint of everything
the outcome depends on (each plugin directory's files, entry points,
the effective config, which ``requires_env`` variables are set, the kernel's
version).  A later listing recomputes the fingerprint from discovery alone,
which reads manifests but imports nothing, and reuses the records while it
matches.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

STATE_FILE = Path("cache") / "plugins-state.json"
MANIFESTS_FILE = Path("cache") / "manifests.json"
CONFIG_FILE = Path("cache") / "config.json"
CHECK_FILE = Path("cache") / "config-check.json"
FORMAT = 1
#: Bounds of the manifest cache: entries kept, and the size of the file read back.
MAX_CACHED_MANIFESTS = 20_000
#: The largest cache file read back (a bigger one is treated as absent).
MAX_CACHE_FILE_BYTES = 32 * 1024 * 1024
#: A file changed this recently may change again within one tick of the clock: not trusted yet.
RACY_NS = 2_000_000_000


def fingerprint(parts: Iterable[Any]) -> str:
    """A stable hash of JSON-able parts."""
    digest = _hasher()
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
    data = json.dumps({"format": FORMAT, "fingerprint": print_, "plugins": plugins}, default=str)
    write_atomic(home / STATE_FILE, data)


def write_atomic(path: Path, data: str) -> None:
    """Write ``data`` to ``path`` atomically; a folder that cannot be written is left alone."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        import tempfile

        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(tmp)


def read_cache(path: Path) -> dict[str, Any] | None:
    """A cache file of this format as a mapping; ``None`` when it is absent, too big, broken, too deep
    to parse, or of another format (a cache is never trusted more than that)."""
    try:
        if path.stat().st_size > MAX_CACHE_FILE_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def load(home: Path, print_: str) -> list[dict[str, Any]] | None:
    """The saved plugin records when their fingerprint is ``print_``; else ``None``."""
    data = read_cache(home / STATE_FILE)
    if data is None or data.get("fingerprint") != print_:
        return None
    plugins = data.get("plugins")
    return plugins if isinstance(plugins, list) else None


def last(home: Path) -> tuple[str | None, list[dict[str, Any]]]:
    """The saved fingerprint and plugin records, whatever the fingerprint (``(None, [])`` when none)."""
    data = read_cache(home / STATE_FILE)
    plugins = data.get("plugins") if data is not None else None
    if data is None or not isinstance(plugins, list):
        return None, []
    kept = [p for p in plugins if isinstance(p, dict) and isinstance(p.get("name"), str)]
    return (str(data.get("fingerprint")) if data.get("fingerprint") else None), kept


# A fingerprint no listing matches: the records are kept for their counts, never taken as current.
NEVER_CURRENT = "never-current"


def discard(home: Path) -> None:
    """Forget the saved state (the next listing loads)."""
    with contextlib.suppress(OSError):
        (home / STATE_FILE).unlink()


def _hasher() -> Any:
    """A BLAKE2b hasher; ``_blake2`` spares importing OpenSSL (``hashlib``) on every start-up."""
    try:
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - an interpreter without the module
        from hashlib import blake2b
    return blake2b(digest_size=32)


class ManifestCache:
    """Parsed manifests by file identity (path, size, modification time, inode), kept in
    ``<home>/cache/manifests.json``: a ``plugin.yaml`` that has not changed is not parsed again.

    The same identity Python's own bytecode cache trusts; a file modified in
    the last two seconds is not cached yet, so that two edits within one tick
    of the file system's clock cannot leave a stale entry.  Only data that JSON
    gives back unchanged is kept (a YAML date or set is parsed every time); a
    file that failed to parse is never cached.
    """

    def __init__(self, home: Path) -> None:
        self.path = home / MANIFESTS_FILE
        self._entries: dict[str, list[Any]] | None = None
        self._used: set[str] = set()
        self._dirty = False

    @staticmethod
    def _identity(stat: os.stat_result) -> list[int]:
        return [stat.st_size, stat.st_mtime_ns, stat.st_ino]

    def _read(self) -> dict[str, list[Any]]:
        if self._entries is None:
            entries = (read_cache(self.path) or {}).get("entries")
            self._entries = entries if isinstance(entries, dict) else {}
        return self._entries

    def get(self, file: Path, stat: os.stat_result) -> tuple[bool, Any]:
        """``(True, data)`` when ``file`` was parsed before and has not changed since."""
        key = str(file)
        entry = self._read().get(key)
        if isinstance(entry, list) and len(entry) == 2 and entry[0] == self._identity(stat):
            self._used.add(key)
            return True, entry[1]
        return False, None

    def put(self, file: Path, stat: os.stat_result, data: Any) -> None:
        if time.time_ns() - stat.st_mtime_ns < RACY_NS:
            # Changed just now: a second change within the clock's granularity would keep the same
            # identity (git's "racily clean" case), so it is parsed again until it is older.
            return
        same = _faithful(data)
        key = str(file)
        entries = self._read()
        if same and (key in entries or len(entries) < MAX_CACHED_MANIFESTS):
            entries[key] = [self._identity(stat), data]
            self._used.add(key)
            self._dirty = True

    def save(self) -> None:
        """Write the cache back if it changed, without the entries of files no longer seen; then let the
        parsed entries go (a kernel scans once per load: they would stay in memory for nothing)."""
        entries = self._read()
        if self._dirty or not set(entries) <= self._used:
            kept = {k: v for k, v in entries.items() if k in self._used}
            if self.path.parent.is_dir():  # made by a command that saves its load, never by --help alone
                write_atomic(self.path, json.dumps({"format": FORMAT, "entries": kept}))
        self._entries, self._used, self._dirty = None, set(), False


def _faithful(data: Any) -> bool:
    """Whether JSON gives ``data`` back unchanged (a YAML date, set or non-string key does not)."""
    try:
        return json.loads(json.dumps(data)) == data
    except (TypeError, ValueError, RecursionError):
        return False


def text_digest(text: str) -> str:
    digest = _hasher()
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def cached_config(home: Path, digest: str) -> tuple[bool, Any]:
    """``(True, data)`` when ``config.yaml`` with content ``digest`` was parsed before."""
    data = read_cache(home / CONFIG_FILE)
    if data is not None and data.get("digest") == digest:
        return True, data.get("data")
    return False, None


def remember_config(home: Path, digest: str, data: Any) -> bool:
    """Keep the parse of ``config.yaml`` for the next start, in a cache folder that exists already
    (a kernel never creates one just by being constructed); ``False`` when there is none yet."""
    path = home / CONFIG_FILE
    if not path.parent.is_dir():
        return False
    # A config holding a credential is not copied anywhere: it is parsed at every start instead.
    if _faithful(data) and not _holds_secret(data):
        write_atomic(path, json.dumps({"format": FORMAT, "digest": digest, "data": data}))
    return True


def cached_check(home: Path, key: str) -> list[tuple[str, str, str]] | None:
    """What the schema check found in a ``config.yaml`` checked before under ``key`` (``None``: never)."""
    data = read_cache(home / CHECK_FILE)
    if data is None or data.get("key") != key:
        return None
    found = data.get("found")
    if not isinstance(found, list):
        return None
    out: list[tuple[str, str, str]] = []
    for item in found:
        if not (isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item)):
            return None
        out.append((item[0], item[1], item[2]))
    return out


def remember_check(home: Path, key: str, found: list[tuple[str, str, str]]) -> bool:
    """Keep what the schema check found for the next start (its messages name keys, never values), in a
    cache folder that exists already; ``False`` when there is none yet."""
    path = home / CHECK_FILE
    if not path.parent.is_dir():
        return False
    write_atomic(path, json.dumps({"format": FORMAT, "key": key, "found": [list(f) for f in found]}))
    return True


def _holds_secret(value: Any, depth: int = 0) -> bool:
    """Whether a secret-named key (``api_key``, ``token``, ...) has a value anywhere in ``value``."""
    from .redact import is_secret_key

    if depth > 50:
        return True
    if isinstance(value, dict):
        return any(
            (is_secret_key(k) and v not in (None, "")) or _holds_secret(v, depth + 1)
            for k, v in value.items()
        )
    if isinstance(value, list):
        return any(_holds_secret(v, depth + 1) for v in value)
    return False
