"""``hermes_constants`` for plugins written for Hermes Agent: where the home directory is.

The home is the current kernel's, else ``$HERMES_HOME``, else ``~/.hermes``.
A home of the form ``<root>/profiles/<name>`` is the profile ``<name>`` of
the root ``<root>`` (Hermes Agent keeps profiles there).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Any

from ...base.config import profile_name
from . import hermes_home

__all__ = [
    "FINISH_REASON_LENGTH",
    "OPENROUTER_BASE_URL",
    "OPENROUTER_MODELS_URL",
    "PARTIAL_STREAM_STUB_ID",
    "VALID_REASONING_EFFORTS",
    "display_hermes_home",
    "get_bundled_skills_dir",
    "get_config_path",
    "get_default_hermes_root",
    "get_env_path",
    "get_hermes_dir",
    "get_hermes_home",
    "get_optional_mcps_dir",
    "get_optional_skills_dir",
    "get_process_hermes_home",
    "get_real_home",
    "get_skills_dir",
    "hermes_home_key",
    "parse_reasoning_effort",
    "profile_name_for_home",
    "secure_parent_dir",
]

FINISH_REASON_LENGTH = "length"
PARTIAL_STREAM_STUB_ID = "partial-stream-stub"
OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
OPENROUTER_MODELS_URL = OPENROUTER_BASE_URL + "/models"
VALID_REASONING_EFFORTS = ("minimal", "low", "medium", "high", "xhigh", "max", "ultra")


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


def get_process_hermes_home() -> Path:
    """The home of the running kernel (the kernel has no per-task home override: the same as
    :func:`get_hermes_home`)."""
    return hermes_home()


def get_config_path() -> Path:
    """``<home>/config.yaml``."""
    return hermes_home() / "config.yaml"


def get_env_path() -> Path:
    """``<home>/.env``."""
    return hermes_home() / ".env"


def get_skills_dir() -> Path:
    """``<home>/skills``."""
    return hermes_home() / "skills"


def _catalog_dir(variable: str, default: Path | None, folder: str) -> Path:
    override = os.environ.get(variable, "").strip()
    if override:
        return Path(override)
    return default if default is not None else hermes_home() / folder


def get_bundled_skills_dir(default: Path | None = None) -> Path:
    """``$HERMES_BUNDLED_SKILLS``, else ``default``, else ``<home>/skills`` (the kernel ships no skills)."""
    return _catalog_dir("HERMES_BUNDLED_SKILLS", default, "skills")


def get_optional_skills_dir(default: Path | None = None) -> Path:
    """``$HERMES_OPTIONAL_SKILLS``, else ``default``, else ``<home>/optional-skills``."""
    return _catalog_dir("HERMES_OPTIONAL_SKILLS", default, "optional-skills")


def get_optional_mcps_dir(default: Path | None = None) -> Path:
    """``$HERMES_OPTIONAL_MCPS``, else ``default``, else ``<home>/optional-mcps``."""
    return _catalog_dir("HERMES_OPTIONAL_MCPS", default, "optional-mcps")


def _in_use(path: Path) -> bool:
    try:
        mode = path.lstat().st_mode
    except OSError:
        return False
    if not stat.S_ISDIR(mode) and not stat.S_ISLNK(mode):
        return True
    try:
        return any(True for _ in path.iterdir())
    except OSError:
        return True


def get_hermes_dir(new_subpath: str, old_name: str) -> Path:
    """``<home>/<old_name>`` when that older folder exists and is not empty, else ``<home>/<new_subpath>``."""
    home = hermes_home()
    old = home / old_name
    return old if _in_use(old) else home / new_subpath


def display_hermes_home() -> str:
    """The home for messages: ``~/...`` under the user's home directory, else the full path."""
    home = hermes_home()
    try:
        return "~/" + home.relative_to(Path.home()).as_posix()
    except ValueError:
        return str(home)


def secure_parent_dir(path: Path) -> None:
    """Make ``path``'s folder private (mode 0700), never ``/`` or a folder right under it."""
    parent = Path(path).parent.resolve()
    if len(parent.parts) < 3:
        return
    with contextlib.suppress(OSError):
        os.chmod(parent, 0o700)


def get_real_home(env: dict[str, str] | None = None) -> str:
    """The user's own home directory (``$HERMES_REAL_HOME``, else ``$HOME``, else the account's); read
    from ``env`` first, then the process environment."""
    env = env or {}
    for name in ("HERMES_REAL_HOME", "HOME"):
        value = str(env.get(name) or os.environ.get(name, "")).strip()
        if value:
            return value
    return os.path.expanduser("~")


def parse_reasoning_effort(effort: Any) -> dict[str, Any] | None:
    """A reasoning level as settings: ``{"enabled": True, "effort": level}``, ``{"enabled": False}``
    for ``none`` / ``false`` / ``disabled`` / ``False``, ``None`` for empty or unknown."""
    if effort is False:
        return {"enabled": False}
    if effort is None or effort is True:
        return None
    level = str(effort).strip().lower()
    if level in ("none", "false", "disabled"):
        return {"enabled": False}
    return {"enabled": True, "effort": level} if level in VALID_REASONING_EFFORTS else None
