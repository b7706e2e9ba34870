"""The installed distributions of pip plugins: lookups, entry points, dependents, deleting their files."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...core.sources.discovery import ENTRY_POINT_GROUP
from ...core.sources.manifest import MANIFEST_NAMES, Manifest, ManifestError, load_manifest
from .records import normalize_dist


def _search_path(target: str | None) -> list[str]:
    return [target] if target else sys.path


def _installed_names(target: str | None) -> set[str]:
    """The normalized names of the distributions installed in ``target`` (else on ``sys.path``)."""
    from importlib import metadata

    names = set()
    for dist in metadata.distributions(path=_search_path(target)):
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            names.add(normalize_dist(name))
    return names


def _requirement_name(requirement: str) -> str | None:
    path = Path(requirement)
    if path.is_dir() and (path / "pyproject.toml").is_file():
        import tomllib

        try:
            name = tomllib.loads((path / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return name if isinstance(name, str) else None
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    return match.group(0) if match and not path.exists() else None


def _distributions(name: str, target: str | None) -> list[Any]:
    """The installed distributions named ``name`` in ``target`` (else on ``sys.path``), first found first."""
    from importlib import metadata

    wanted = normalize_dist(name)
    return [
        d
        for d in metadata.distributions(path=_search_path(target))
        if d.metadata and d.metadata["Name"] and normalize_dist(d.metadata["Name"]) == wanted
    ]


def _plugin_entry_points(names: list[str], target: str | None) -> Iterator[tuple[Any, list[Any]]]:
    for name in names:
        for dist in _distributions(name, target)[:1]:
            eps = [ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
            if eps:
                yield dist, eps


def _dist_manifest(dist: Any) -> Manifest | None:
    """A ``plugin.yaml`` shipped inside an installed package, if any."""
    for file in dist.files or []:
        if file.name in MANIFEST_NAMES:
            path = Path(str(dist.locate_file(file)))
            try:
                return load_manifest(path, path.parent.name)
            except ManifestError as exc:
                print(f"warning: {exc}", file=sys.stderr)
                return None
    return None


def _drop_stale_versions(name: str, target: str, keep_version: str | None) -> None:
    """``pip install --upgrade --target`` leaves the old version's ``.dist-info`` (and files the new one
    no longer has) behind; delete them, keeping every file of the version installed now."""
    dists = _distributions(name, target)
    keep = [d for d in dists if d.version == keep_version][:1] or dists[:1]
    if not keep:
        return
    kept = {os.path.abspath(str(keep[0].locate_file(f))) for f in keep[0].files or []}
    for dist in dists:
        if dist is not keep[0] and dist.files is not None:
            _delete_dist_files(dist, Path(target), kept)


def _delete_dist_files(dist: Any, root: Path, keep: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Delete the files a distribution's RECORD lists that are inside ``root`` (never outside it), except
    ``keep``; then the folders that left empty.  The problems met (files that could not be deleted)."""
    root = root.resolve()
    problems: list[str] = []
    folders: set[Path] = set()
    for file in dist.files or []:
        located = Path(os.path.abspath(str(dist.locate_file(file))))
        path = located.parent.resolve() / located.name  # the folders resolved, a link itself not followed
        if path == root or not path.is_relative_to(root) or str(located) in keep or str(path) in keep:
            continue
        try:
            if path.is_symlink() or path.is_file():
                path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            problems.append(f"{path}: {exc}")
        folders.add(path.parent)
        if path.suffix == ".py":
            cache = path.parent / "__pycache__"
            for compiled in cache.glob(f"{path.stem}.*.pyc") if cache.is_dir() else []:
                with _suppress_os_error():
                    compiled.unlink()
            folders.add(cache)
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        while folder != root and folder.is_relative_to(root):
            try:
                folder.rmdir()  # only when empty
            except OSError:
                break
            folder = folder.parent
    return problems


def _suppress_os_error() -> Any:
    import contextlib

    return contextlib.suppress(OSError)


def _is_site_packages(folder: str) -> bool:
    import site
    import sysconfig

    places = {*site.getsitepackages(), site.getusersitepackages(), *sysconfig.get_paths().values()}
    resolved = Path(folder).resolve()
    return any(Path(p).resolve() == resolved for p in places if p)


def _dependents(name: str, target: str | None) -> list[str]:
    """The installed distributions (in ``target``, else on ``sys.path``) whose requirements name ``name``."""
    from importlib import metadata

    wanted = normalize_dist(name)
    out: set[str] = set()
    for dist in metadata.distributions(path=_search_path(target)):
        dist_name = dist.metadata["Name"] if dist.metadata else None
        if not dist_name or normalize_dist(dist_name) == wanted:
            continue
        for requirement in dist.requires or []:
            marker = requirement.split(";", 1)[1] if ";" in requirement else ""
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
            if match and normalize_dist(match[1]) == wanted and "extra" not in marker:
                out.add(dist_name)
    return sorted(out)
