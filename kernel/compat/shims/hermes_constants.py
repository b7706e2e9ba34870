"""``hermes_constants`` for plugins written for Hermes Agent: where the home directory is.

The home is the current kernel's, else ``$HERMES_HOME``, else ``~/.hermes``.
A home of the form ``<root>/profiles/<name>`` is the profile ``<name>`` of
the root ``<root>`` (Hermes Agent keeps profiles there).
"""

from __future__ import annotations

import os
from pathlib import Path

from ...core.config import profile_name
from . import hermes_home

__all__ = ["get_default_hermes_root", "get_hermes_home", "hermes_home_key", "profile_name_for_home"]


def get_hermes_home() -> Path:
    """The home directory (``config.yaml``, ``.env``, ``plugins/`` ... live there)."""
    return hermes_home()


def get_default_hermes_root() -> Path:
    """The root above the profiles: the home itself, or ``<root>`` for ``<root>/profiles/<name>``."""
    home = hermes_home()
    if home.parent.name == "profiles" and home.name:
        return home.parent.parent
    return home


def hermes_home_key(path: str | os.PathLike[str] | None = None) -> str:
    """A stable key for a home directory (default: the current one): its absolute, resolved path."""
    candidate = Path(path) if path is not None else hermes_home()
    return os.path.normcase(str(candidate.expanduser().resolve(strict=False)))


def profile_name_for_home(home: str | os.PathLike[str] | None = None) -> str:
    """``"default"`` for ``~/.hermes``, ``<name>`` for ``.../profiles/<name>``, else ``"custom"``."""
    return profile_name(Path(home) if home is not None else hermes_home())
