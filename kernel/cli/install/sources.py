"""What a ``plugins install`` SOURCE is: a plugin directory, a git URL or a pip requirement."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ...core.sources.manifest import find_manifest

_URL = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|[\w.-]+@[\w.-]+:)")


@dataclass
class _Source:
    kind: str  # "dir" | "git" | "pip"
    value: str
    path: Path | None = None
    notes: list[str] = field(default_factory=list)


def classify_source(source: str, subdir: str | None = None) -> _Source:
    """Decide how ``source`` is installed (see ``INSTALL_DESCRIPTION``); ``ValueError`` when it cannot be."""
    if source.startswith("-"):
        raise ValueError(f"'{source}' looks like an option, not a source; a source never starts with '-'")
    if source.startswith("pip:"):
        requirement = source[4:].strip()
        if not requirement or requirement.startswith("-"):
            raise ValueError(f"'{source}': put a requirement after 'pip:' (e.g. pip:some-plugin==1.0)")
        return _Source("pip", requirement)
    if source.startswith("git+"):
        url = source[4:]
        if url.startswith("-") or not (_URL.match(url) or Path(url).expanduser().is_dir()):
            raise ValueError(f"'{source}': after 'git+' comes a URL such as https://host/repo.git")
        return _Source("git", url if _URL.match(url) else Path(url).expanduser().resolve().as_uri())
    if _URL.match(source):
        return _Source("git", source)
    path = Path(source).expanduser()
    if path.is_dir():
        if find_manifest(path) is not None or (subdir and find_manifest(path / subdir) is not None):
            return _Source("dir", str(path), path)
        if path.name.endswith(".git") or _is_bare_repository(path):
            return _Source("git", path.resolve().as_uri())
        if any((path / f).is_file() for f in ("pyproject.toml", "setup.py", "setup.cfg")):
            return _Source("pip", str(path.resolve()))
        return _Source("dir", str(path), path)  # validation explains what is missing
    if path.is_file():
        if path.name.endswith((".whl", ".tar.gz", ".zip")):
            return _Source("pip", str(path.resolve()))
        raise ValueError(f"'{source}' is a file; give a plugin directory, a git URL or pip:REQUIREMENT")
    hint = ""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?\s*([<>=!~].*)?", source):
        hint = f"; to install the Python package '{source}' with pip, use: pip:{source}"
    raise ValueError(f"'{source}' is not a directory, a git URL or a pip requirement{hint}")


def _is_bare_repository(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def _safe_subdir(subdir: str | None) -> str | None:
    """``subdir`` when it stays inside its root (no absolute path, no ``..``); ``ValueError`` otherwise."""
    if subdir is None:
        return None
    parts = Path(subdir).parts
    if not subdir.strip() or Path(subdir).is_absolute() or ".." in parts:
        raise ValueError(f"--subdir '{subdir}' must be a relative path inside the source, without '..'")
    return subdir
