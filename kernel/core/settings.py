"""Per-plugin settings in ``config.yaml``: ``plugins.entries.<plugin_id>.settings.<key>``."""

from __future__ import annotations

import contextlib
import copy
import io
import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from .config import section
from .safe_yaml import MAX_CONFIG_BYTES, data_problem, read_yaml

_SEGMENT = re.compile(r"^[A-Za-z0-9_-]+$")
_MISSING = object()
_write_lock = threading.Lock()
_T = TypeVar("_T")


def settings_path(plugin_id: str) -> tuple[str, ...]:
    """Where a plugin's settings live in the config tree."""
    return ("plugins", "entries", plugin_id, "settings")


def split_key(plugin_id: str, key: str) -> tuple[str, ...]:
    """Validate a dotted settings key; anything that is not plain names joined by dots is refused.

    Keys are always relative to the plugin's own settings, so a key cannot
    reach another plugin's settings or the global configuration.
    """
    if not isinstance(key, str) or not key:
        raise ValueError(f"plugin '{plugin_id}': a settings key must be a non-empty string, not {key!r}")
    parts = tuple(key.split("."))
    for part in parts:
        if not _SEGMENT.match(part):
            raise ValueError(
                f"plugin '{plugin_id}': settings key {key!r} is refused: use names of letters, digits, "
                "'-' and '_' joined by dots; a plugin reads and writes only "
                f"plugins.entries.{plugin_id}.settings"
            )
    return parts


def get_setting(config: dict[str, Any], plugin_id: str, key: str, default: Any = None) -> Any:
    """``plugins.entries.<id>.settings.<key>``, else the legacy ``...config.<key>``, else ``default``."""
    parts = split_key(plugin_id, key)
    for base in (settings_path(plugin_id), ("plugins", "entries", plugin_id, "config")):
        value = _lookup(section(config, *base), parts)
        if value is not _MISSING:
            return value
    return default


def write_setting(home: Path, config: dict[str, Any], plugin_id: str, key: str, value: Any) -> None:
    """Set one setting in ``<home>/config.yaml`` (atomically) and in ``config`` (in memory).

    The file is re-read under a lock, changed at that one key, written to a
    temporary file and renamed over the original, so concurrent writers and a
    crash mid-write lose nothing.  A malformed file is left untouched.
    """
    parts = split_key(plugin_id, key)
    problem = data_problem(value)
    if problem is not None:
        raise ValueError(f"plugin '{plugin_id}': setting {key!r} cannot be stored: it holds {problem}")
    import yaml

    try:
        yaml.safe_dump(value)
    except yaml.YAMLError as exc:
        raise ValueError(f"plugin '{plugin_id}': setting {key!r} cannot be stored in YAML: {exc}") from None
    path = home / "config.yaml"
    update_config(
        home,
        lambda data: _assign(data, (*settings_path(plugin_id), *parts), value, path),
        what="plugin settings",
        always_write=True,
    )
    _assign(config, (*settings_path(plugin_id), *parts), value, path)


def update_config(
    home: Path,
    change: Callable[[dict[str, Any]], _T],
    *,
    what: str = "the change",
    always_write: bool = False,
) -> _T:
    """Edit ``<home>/config.yaml``: re-read it under the lock, call ``change(data)``, write it back.

    ``change`` edits the top-level mapping in place (any path, e.g.
    ``plugins.disabled``) and its return value is returned.  The file is
    written (atomically: temporary file, then rename; the file's mode is
    kept) only when the data changed, unless ``always_write``; a missing file
    counts as empty.  A malformed file is left untouched and ``ValueError`` names
    it (``what`` says what was not written).  Comments are not preserved.
    """
    import yaml

    path = home / "config.yaml"
    with _write_lock, file_lock(path):
        data: Any = {}
        if path.is_file():
            try:
                data = read_yaml(path, MAX_CONFIG_BYTES, "config.yaml") or {}
            except yaml.YAMLError as exc:
                raise ValueError(f"{path} is not valid YAML; not writing {what}: {exc}") from None
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"{path} cannot be read; not writing {what}: {exc}") from None
            if not isinstance(data, dict):
                raise ValueError(f"{path}: the top level is not a mapping; not writing {what}")
        before = copy.deepcopy(data)
        result = change(data)
        if always_write or data != before:
            atomic_write(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return result


def _lookup(node: Any, parts: tuple[str, ...]) -> Any:
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _assign(data: dict[str, Any], parts: tuple[str, ...], value: Any, path: Path) -> None:
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            where = ".".join(parts[: i + 1])
            raise ValueError(f"{path}: '{where}' is not a mapping; cannot set '{'.'.join(parts)}'")
        node = child
    node[parts[-1]] = value


def atomic_write(path: Path, text: str, mode: int | None = None) -> None:
    """Replace ``path`` with ``text`` atomically (temporary file in the same directory, fsync, rename).

    The new file gets ``mode``, else the old file's mode, else ``0600``.  A
    symbolic link is written through: its target is replaced and the link
    stays (a dotfiles repository keeps its file).
    """
    if path.is_symlink():
        path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An advisory lock beside ``path`` (POSIX ``flock``), shared by every process of this kernel."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: the thread lock still holds
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# The names used before these helpers became public.
_atomic_write = atomic_write
_file_lock = file_lock


#: A variable name ``.env`` files may set.
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def quote_env_value(value: str) -> str:
    """``value`` in single quotes, as ``.env`` readers (python-dotenv) read it back unchanged."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_env(home: Path, values: dict[str, str]) -> Path:
    """Set ``values`` in ``<home>/.env``: other lines kept, a variable's old line replaced, mode 0600."""
    from dotenv.parser import parse_stream

    for name, value in values.items():
        if not ENV_NAME.match(name):
            raise ValueError(f"'{name}' is not a valid environment variable name")
        if "\n" in value or "\0" in value:
            raise ValueError(f"the value of {name} must be a single line")
    path = home / ".env"
    with file_lock(path):
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        out: list[str] = []
        done: set[str] = set()
        for binding in parse_stream(io.StringIO(text)):
            original = binding.original.string
            if binding.key in values:
                if binding.key not in done:
                    export = "export " if original.lstrip().startswith("export ") else ""
                    out.append(f"{export}{binding.key}={quote_env_value(values[binding.key])}\n")
                    done.add(binding.key)
                continue
            out.append(original)
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n"
        out += [f"{k}={quote_env_value(v)}\n" for k, v in values.items() if k not in done]
        atomic_write(path, "".join(out), mode=0o600)
    return path
