"""Per-plugin settings in ``config.yaml``: ``plugins.entries.<plugin_id>.settings.<key>``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .config import section
from .safe_yaml import data_problem
from .yamledit import MISSING, assign, lookup, update_config

_SEGMENT = re.compile(r"^[A-Za-z0-9_-]+$")


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
        value = lookup(section(config, *base), parts)
        if value is not MISSING:
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
        lambda data: assign(data, (*settings_path(plugin_id), *parts), value, path),
        what="plugin settings",
        always_write=True,
    )
    assign(config, (*settings_path(plugin_id), *parts), value, path, own_path=True)
