"""``hermes_cli.config`` for plugins written for Hermes Agent: config.yaml and .env of the home.

With a kernel running, :func:`load_config` is a copy of that kernel's
configuration (``<home>/config.yaml`` merged with what the host passed in);
without one, ``<home>/config.yaml`` read safely.  Writes are atomic and
locked (the same helpers as ``ctx.set_config`` and ``hermes-kernel``).

Which kernel: see :mod:`kernel.compat.host`.  When several run and the call
cannot be told apart (a plain thread of a plugin), reads see only what the
process itself sets (``$HERMES_HOME``, its own environment variables) and
writes are refused: never another kernel's home or ``.env``.
"""

from __future__ import annotations

import copy
import io
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ...base.config import load_config as _read_config
from ...base.config import read_dotenv
from ...base.environ import process_value
from .. import host
from . import current_kernel, hermes_home, home_to_write

__all__ = [
    "cfg_get",
    "get_config_path",
    "get_env_path",
    "get_env_value",
    "get_env_value_prefer_dotenv",
    "get_hermes_home",
    "invalidate_env_cache",
    "is_provider_enabled",
    "load_config",
    "load_config_readonly",
    "load_env",
    "read_raw_config",
    "remove_env_value",
    "save_config",
    "save_env_value",
    "save_env_value_secure",
]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def get_hermes_home() -> Path:
    """The home directory: the current kernel's, else ``$HERMES_HOME``, else ``~/.hermes``."""
    return hermes_home()


def load_config() -> dict[str, Any]:
    """The configuration as a plain dict the caller may change (a deep copy, in which what a YAML
    alias shares is a copy at each place: a change at one path is saved at that path only)."""
    from ...base.yamledit import unshared

    kernel = current_kernel()
    if kernel is not None:
        return unshared(kernel.config)
    data, _problems = _read_config(hermes_home(), None)  # a malformed file reads as empty
    return unshared(data)


def load_config_readonly() -> dict[str, Any]:
    """The configuration, for reading (a copy too: changing it changes nothing)."""
    return load_config()


def cfg_get(cfg: Mapping[str, Any] | None, *keys: str, default: Any = None) -> Any:
    """``cfg["a"]["b"]`` for ``cfg_get(cfg, "a.b")`` or ``cfg_get(cfg, "a", "b")``; else ``default``."""
    node: Any = cfg
    for key in keys:
        for part in str(key).split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
    return node


def save_config(
    config: Mapping[str, Any],
    *,
    strip_defaults: bool = True,
    preserve_keys: Any = None,
    merge_existing: bool = False,
) -> None:
    """Replace ``<home>/config.yaml`` with ``config`` (atomically, under the config lock).

    ``config`` must be a mapping that YAML can store (``ValueError`` otherwise);
    a malformed existing file is left untouched (``ValueError``).  With
    ``merge_existing``, what the file has and ``config`` leaves out is kept.
    ``strip_defaults`` and ``preserve_keys`` concern Hermes' own defaults,
    which the kernel never writes: they change nothing.  The current
    kernel's configuration follows the new file.
    """
    if not isinstance(config, Mapping):
        raise ValueError(f"save_config: the configuration must be a mapping, not {type(config).__name__}")
    data = copy.deepcopy(dict(config))
    try:
        yaml.safe_dump(data)
    except yaml.YAMLError as exc:
        raise ValueError(f"save_config: the configuration cannot be stored in YAML: {exc}") from None
    from ...base.yamledit import update_config

    def replace(current: dict[str, Any]) -> None:
        new = _deep_merge(current, data) if merge_existing else data
        current.clear()
        current.update(new)

    home, kernel = home_to_write("hermes_cli.config.save_config")
    update_config(home, replace, what="the configuration", always_write=True)
    if kernel is not None:
        merged, _problems = kernel.host.reread_config()
        kernel.config.clear()
        kernel.config.update(merged)


def get_env_value(key: str) -> str | None:
    """The environment variable ``key``, else its value in ``<home>/.env``, else ``None``.

    Answers from the calling plugin's kernel's view (:class:`~kernel.environ.KernelEnviron`), so a
    value another kernel in the process exported is not seen.  When several kernels run and the
    call cannot be told apart, only what the process itself set: no kernel's ``.env``.
    """
    kernel = current_kernel()
    if kernel is not None:
        return kernel.environ.get(key) or read_dotenv(kernel.home).get(key)
    if host.attached():
        return process_value(key)
    value = os.environ.get(key)
    if value is not None:
        return value
    return read_dotenv(hermes_home()).get(key)


def save_env_value(key: str, value: str) -> None:
    """Set ``key`` in ``<home>/.env`` (other lines kept, mode 0600) and in this process's environment."""
    if not isinstance(key, str) or not _ENV_NAME.match(key):
        raise ValueError(f"save_env_value: {key!r} is not a valid environment variable name")
    from ...base.files import write_env

    home, _kernel = home_to_write("hermes_cli.config.save_env_value")
    text = str(value)
    write_env(home, {key: text})
    os.environ[key] = text


def save_env_value_secure(key: str, value: str) -> dict[str, Any]:
    """:func:`save_env_value`, answering as Hermes' secret capture does (``success``, ``stored_as``,
    ``validated``)."""
    save_env_value(key, value)
    return {"success": True, "stored_as": key, "validated": False}


def remove_env_value(key: str) -> bool:
    """Delete ``key`` from ``<home>/.env`` (other lines kept) and from this process's environment;
    whether ``.env`` had it."""
    if not isinstance(key, str) or not _ENV_NAME.match(key):
        raise ValueError(f"remove_env_value: {key!r} is not a valid environment variable name")
    from dotenv.parser import parse_stream

    from ...base.files import atomic_write, file_lock

    home, _kernel = home_to_write("hermes_cli.config.remove_env_value")
    path = home / ".env"
    found = False
    with file_lock(path):
        if path.is_file():
            kept: list[str] = []
            for binding in parse_stream(io.StringIO(path.read_text(encoding="utf-8"))):
                if binding.key == key:
                    found = True
                    continue
                kept.append(binding.original.string)
            if found:
                atomic_write(path, "".join(kept), mode=0o600)
    os.environ.pop(key, None)
    return found


def get_config_path() -> Path:
    """``<home>/config.yaml``."""
    return hermes_home() / "config.yaml"


def get_env_path() -> Path:
    """``<home>/.env``."""
    return hermes_home() / ".env"


def read_raw_config() -> dict[str, Any]:
    """``<home>/config.yaml`` as the file has it (no host settings merged); ``{}`` when missing or
    unreadable."""
    try:
        data = yaml.safe_load(get_config_path().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def load_env() -> dict[str, str]:
    """The variables ``<home>/.env`` sets (the file only, read afresh each call)."""
    return dict(read_dotenv(hermes_home()))


def invalidate_env_cache() -> None:
    """Nothing to do: the kernel keeps no copy of ``.env`` to forget (each read is fresh)."""


def get_env_value_prefer_dotenv(key: str) -> str | None:
    """``key`` from ``<home>/.env`` first (a value rotated there beats an older one inherited from the
    shell), else as :func:`get_env_value` finds it."""
    value = load_env().get(key)
    return value if value else get_env_value(key)


def is_provider_enabled(provider_cfg: Mapping[str, Any] | None) -> bool:
    """Whether a ``providers.<name>`` block is on: yes unless it says ``enabled: false`` (or ``"no"``,
    ``"off"``, ``"0"``); anything that is not a mapping counts as on."""
    if not isinstance(provider_cfg, Mapping):
        return True
    flag = provider_cfg.get("enabled", True)
    if isinstance(flag, str):
        return flag.strip().lower() not in ("false", "0", "no", "off")
    return bool(flag)


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        old = merged.get(key)
        merged[key] = (
            _deep_merge(old, value) if isinstance(old, Mapping) and isinstance(value, Mapping) else value
        )
    return merged
