"""The install records: where each plugin that `plugins install` put came from (`.installs.json`)."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_SAFE_DIRNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: Where installs are recorded, under the home.
RECORDS_FILE = Path("plugins") / ".installs.json"
_RECORDS_FORMAT = 1
_MAX_RECORDS_BYTES = 4 * 1024 * 1024
#: The kernel's own distribution: never uninstalled by ``plugins remove``.
KERNEL_DISTRIBUTION = "hermes-kernel"


def records_path(home: Path) -> Path:
    """``<home>/plugins/.installs.json`` (a dot name: plugin discovery never looks at it)."""
    return home / RECORDS_FILE


def read_records(home: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """The install records: ``{"plugins": {dirname: {...}}, "packages": {dist: {...}}}``.

    ``plugins`` is keyed by the directory under ``<home>/plugins``; its records
    have ``kind`` ``git`` (``url``, ``ref``, ``subdir``, ``commit``, ``branch``)
    or ``dir`` (``path``), and ``name``, ``version``, ``files`` (relative path
    to SHA-256 of each installed file).  ``packages`` is keyed by the
    normalized distribution name: ``name``, ``requirement``, ``pip_args``,
    ``target``, ``prefix``, ``python``, ``cwd``, ``version``,
    ``entry_points``, ``owned`` (pip installed it in that run; it was not
    there before) and ``pulled_in`` (what pip installed along with it).  A
    missing, unreadable or malformed file counts as empty; an entry whose key
    is not a plain name is ignored.
    """
    path = records_path(home)
    empty: dict[str, dict[str, dict[str, Any]]] = {"plugins": {}, "packages": {}}
    try:
        if path.stat().st_size > _MAX_RECORDS_BYTES:
            print(f"warning: {path} is larger than {_MAX_RECORDS_BYTES} bytes; ignoring it", file=sys.stderr)
            return empty
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return empty
    except (OSError, ValueError) as exc:
        print(f"warning: {path} cannot be read ({exc}); ignoring it", file=sys.stderr)
        return empty
    if not isinstance(data, dict):
        return empty
    for kind in ("plugins", "packages"):
        entries = data.get(kind)
        if isinstance(entries, dict):
            empty[kind] = {
                str(k): v for k, v in entries.items() if isinstance(v, dict) and _SAFE_DIRNAME.match(str(k))
            }
    return empty


def _change_records(home: Path, change: Callable[[dict[str, dict[str, dict[str, Any]]]], object]) -> None:
    """Re-read the records under a lock, apply ``change``, write them back atomically (mode 0600)."""
    from ...base.files import atomic_write, file_lock

    path = records_path(home)
    try:
        with file_lock(path):
            records = read_records(home)
            change(records)
            data = {"format": _RECORDS_FORMAT, **records}
            atomic_write(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    except OSError as exc:
        print(
            f"warning: cannot write {path}: {exc}; 'plugins update' will not know this source",
            file=sys.stderr,
        )


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def normalize_dist(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``Hk_Pip.Plugin`` is ``hk-pip-plugin``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _record_str(record: dict[str, Any], key: str) -> str | None:
    value = record.get(key)
    return value if isinstance(value, str) and value else None


def _record_list(record: dict[str, Any], key: str) -> list[str]:
    value = record.get(key)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
