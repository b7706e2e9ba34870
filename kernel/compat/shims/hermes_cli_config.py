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
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ...core.config import load_config as _read_config
from ...core.config import read_dotenv
from ...core.environ import process_value
from .. import host
from . import current_kernel, hermes_home, home_to_write

__all__ = [
    "cfg_get",
    "get_env_value",
    "get_hermes_home",
    "load_config",
    "load_config_readonly",
    "save_config",
    "save_env_value",
]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def get_hermes_home() -> Path:
    """The home directory: the current kernel's, else ``$HERMES_HOME``, else ``~/.hermes``."""
    return hermes_home()


def load_config() -> dict[str, Any]:
    """The configuration as a plain dict the caller may change (a deep copy, in which what a YAML
    alias shares is a copy at each place: a change at one path is saved at that path only)."""
    from ...core.settings import unshared

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


def save_config(cfg: Mapping[str, Any]) -> None:
    """Replace ``<home>/config.yaml`` with ``cfg`` (atomically, under the config lock).

    ``cfg`` must be a mapping that YAML can store (``ValueError`` otherwise);
    a malformed existing file is left untouched (``ValueError``).  The
    current kernel's configuration follows the new file.
    """
    if not isinstance(cfg, Mapping):
        raise ValueError(f"save_config: the configuration must be a mapping, not {type(cfg).__name__}")
    data = copy.deepcopy(dict(cfg))
    try:
        yaml.safe_dump(data)
    except yaml.YAMLError as exc:
        raise ValueError(f"save_config: the configuration cannot be stored in YAML: {exc}") from None
    from ...core.settings import update_config

    def replace(current: dict[str, Any]) -> None:
        current.clear()
        current.update(data)

    home, kernel = home_to_write("hermes_cli.config.save_config")
    update_config(home, replace, what="the configuration", always_write=True)
    if kernel is not None:
        merged, _problems = _read_config(home, kernel._config_override)
        kernel.config.clear()
        kernel.config.update(merged)


def get_env_value(name: str) -> str | None:
    """The environment variable ``name``, else its value in ``<home>/.env``, else ``None``.

    Answers from the calling plugin's kernel's view (:class:`~kernel.environ.KernelEnviron`), so a
    value another kernel in the process exported is not seen.  When several kernels run and the
    call cannot be told apart, only what the process itself set: no kernel's ``.env``.
    """
    kernel = current_kernel()
    if kernel is not None:
        return kernel.environ.get(name) or read_dotenv(kernel.home).get(name)
    if host.attached():
        return process_value(name)
    value = os.environ.get(name)
    if value is not None:
        return value
    return read_dotenv(hermes_home()).get(name)


def save_env_value(name: str, value: str) -> None:
    """Set ``name`` in ``<home>/.env`` (other lines kept, mode 0600) and in this process's environment."""
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise ValueError(f"save_env_value: {name!r} is not a valid environment variable name")
    from ...core.settings import write_env

    home, _kernel = home_to_write("hermes_cli.config.save_env_value")
    text = str(value)
    write_env(home, {name: text})
    os.environ[name] = text
