"""Finding plugins: directories and entry points, read without importing plugin code."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib import metadata

from .manifest import Manifest, ManifestError, find_manifest_stat, load_manifest

# One level of category folders: <root>/<category>/<name>/ has key "<category>/<name>".  In these,
# a folder with only an ``__init__.py`` is a plugin too; any other category needs manifests.
CATEGORIES = ("model-providers", "platforms", "memory", "context_engine", "image_gen")

ENTRY_POINT_GROUP = "hermes_agent.plugins"

# Every group published Hermes plugins use, with the kind of plugin each implies
# (the first is the documented one).  A name in two groups is one plugin when
# both point at the same target.
ENTRY_POINT_GROUPS: dict[str, str] = {
    ENTRY_POINT_GROUP: "standalone",
    "hermes.plugins": "standalone",
    "hermes_agent.model_providers": "model-provider",
    "hermes_agent.memory_providers": "memory",
    "hermes.memory_provider": "memory",
}

SOURCES = ("bundled", "user", "project", "entrypoint")

#: Which installed distributions' entry points are plugins: ``all`` (unset: every one on ``sys.path``),
#: ``none``, ``pythonpath`` (only those in the folders of ``$PYTHONPATH``), or folders separated by
#: ``os.pathsep`` (only the distributions in these).
ENTRY_POINTS_VARIABLE = "HERMES_KERNEL_ENTRY_POINTS"


@dataclass
class Candidate:
    """A plugin found by discovery, before anything of it is imported."""

    key: str
    source: str
    path: Path | None = None
    manifest: Manifest | None = None
    error: str | None = None
    entry_point: metadata.EntryPoint | None = None
    version: str = ""
    description: str = ""
    overrides: list[str] = field(default_factory=list)
    kind: str | None = None

    @property
    def where(self) -> str:
        if self.path is not None:
            return str(self.path)
        if self.entry_point is not None:
            return f"entry point {self.entry_point.name} = {self.entry_point.value}"
        return self.key


def bundled_root() -> Path:
    """The bundled ``extensions/``: ``$HERMES_BUNDLED_PLUGINS``, the wheel's copy, or the checkout's."""
    env = os.environ.get("HERMES_BUNDLED_PLUGINS", "").strip()
    if env:
        return Path(env).expanduser()
    package = Path(__file__).resolve().parents[2]  # the kernel package
    installed = package / "_extensions"
    if installed.is_dir():
        return installed
    return package.parent / "extensions"


def scan_root(root: Path, source: str, log: Any, cache: Any = None) -> list[Candidate]:
    """Plugin directories under ``root``: flat ones and one level of categories.

    ``cache`` (a :class:`~kernel.base.state.ManifestCache`) spares parsing manifests that did not change.
    """
    if not root.is_dir():
        log.debug("source_missing", source=source, root=str(root))
        return []
    found: list[Candidate] = []
    for child in _subdirs(root, log):
        manifest = find_manifest_stat(child)
        if manifest is not None:
            found.append(_candidate(child, manifest, source, None, cache))
        elif child.name in CATEGORIES:
            for grandchild in _subdirs(child, log):
                grand_manifest = find_manifest_stat(grandchild)
                if grand_manifest is not None or (grandchild / "__init__.py").is_file():
                    found.append(_candidate(grandchild, grand_manifest, source, child.name, cache))
                else:
                    log.debug(
                        "skip",
                        path=str(grandchild),
                        reason="no plugin.yaml or __init__.py (depth cap reached)",
                    )
        elif (child / "__init__.py").is_file():
            found.append(_candidate(child, None, source, None, cache))
        else:
            # Any other folder is a category too, as in Hermes (``plugins/video_gen/x``), whose
            # plugins must then have a manifest; a folder of neither kind is skipped.
            inner = [(g, m) for g in _subdirs(child, log) if (m := find_manifest_stat(g)) is not None]
            for grandchild, grand_manifest in inner:
                found.append(_candidate(grandchild, grand_manifest, source, child.name, cache))
            if not inner:
                log.debug("skip", path=str(child), reason="no plugin.yaml, __init__.py or plugins with one")
    log.debug("source_scanned", source=source, root=str(root), plugins=len(found))
    return found


def scan_entry_points(
    log: Any, groups: Iterable[str] = tuple(ENTRY_POINT_GROUPS), cache: Path | None = None
) -> list[Candidate]:
    """Plugins advertised by installed distributions in the Hermes entry-point ``groups``.

    Two entries of one name are one plugin when they name the same target (a
    package listed in two groups); otherwise the first kept and the second is
    refused like a duplicate directory.  With ``cache`` (a JSON file), the scan
    of every installed distribution is skipped while ``sys.path`` looks as it
    did (see :func:`_installed_signature`).
    """
    groups = tuple(groups)
    scope = entry_point_scope()
    if scope == []:
        log.debug("source_skipped", source="entrypoint", reason=f"{ENTRY_POINTS_VARIABLE}=none")
        return []
    signature = _installed_signature(scope) if cache is not None else None
    rows = _cached_rows(cache, signature, groups) if cache is not None else None
    if rows is None:
        rows = _scan_rows(log, groups, scope)
        if rows is None:
            return []
        if cache is not None and signature is not None:
            _save_rows(cache, signature, groups, rows)
    found: dict[str, Candidate] = {}
    out: list[Candidate] = []
    for group, ep, version, description in rows:
        previous = found.get(ep.name)
        if previous is not None:
            if previous.entry_point is not None and previous.entry_point.value == ep.value:
                continue
            log.debug("skip", entry_point=f"{ep.name} = {ep.value}", reason="duplicate entry point name")
        cand = Candidate(
            key=ep.name,
            source="entrypoint",
            entry_point=ep,
            version=version,
            description=description,
            kind=ENTRY_POINT_GROUPS.get(group, "standalone"),
        )
        if previous is None:
            found[ep.name] = cand
        out.append(cand)
    log.debug("source_scanned", source="entrypoint", plugins=len(found))
    return out


def entry_point_scope() -> list[str] | None:
    """Where entry-point plugins come from, by ``$HERMES_KERNEL_ENTRY_POINTS``: ``None`` for every
    distribution on ``sys.path`` (unset, empty or ``all``), ``[]`` for none, else the folders named
    (those of ``$PYTHONPATH`` for ``pythonpath``)."""
    value = os.environ.get(ENTRY_POINTS_VARIABLE, "").strip()
    if value.lower() in ("", "all"):
        return None
    if value.lower() == "none":
        return []
    if value.lower() == "pythonpath":
        value = os.environ.get("PYTHONPATH", "")
    return [os.path.abspath(os.path.expanduser(p)) for p in value.split(os.pathsep) if p.strip()]


def _scan_rows(
    log: Any, groups: tuple[str, ...], scope: list[str] | None = None
) -> list[tuple[str, Any, str, str]] | None:
    """``(group, entry point, version, summary)`` of every installed distribution (or of those in the
    folders of ``scope``), by group and name."""
    from importlib import metadata

    try:
        selected = metadata.entry_points() if scope is None else _entry_points_in(scope)
    except Exception as exc:  # a broken distribution must not stop discovery
        log.debug("entry_points_failed", error=str(exc))
        return None
    rows = []
    for group in groups:
        try:
            eps = sorted(selected.select(group=group), key=lambda ep: ep.name)
        except Exception as exc:  # pragma: no cover - a broken distribution
            log.debug("entry_points_failed", group=group, error=str(exc))
            continue
        for ep in eps:
            dist = getattr(ep, "dist", None)
            version, description = "", ""
            if dist is not None:
                version = dist.version or ""
                description = (dist.metadata.get("Summary") or "") if dist.metadata else ""
            rows.append((group, ep, version, description))
    return rows


def _entry_points_in(folders: list[str]) -> Any:
    """The entry points of the distributions in ``folders``; of two of one name, the first folder's."""
    from importlib import metadata

    seen: set[str] = set()
    found: list[Any] = []
    for dist in metadata.distributions(path=folders):
        name = _dist_key((dist.metadata["Name"] or "") if dist.metadata else "")
        if name and name in seen:
            continue
        seen.add(name)
        found.extend(dist.entry_points)
    return metadata.EntryPoints(found)


def _dist_key(name: str) -> str:
    """A distribution's name as packaging compares them (``My_Pkg`` and ``my-pkg`` are one)."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


class CachedEntryPoint:
    """An entry point as the cache recorded it; loading it resolves it as ``importlib.metadata`` would."""

    __slots__ = ("group", "name", "value")

    def __init__(self, name: str, value: str, group: str) -> None:
        self.name, self.value, self.group = name, value, group

    @property
    def module(self) -> str:
        return self.value.partition(":")[0].strip()

    @property
    def dist(self) -> None:
        return None

    def load(self) -> Any:
        from importlib import metadata

        return metadata.EntryPoint(self.name, self.value, self.group).load()

    def __repr__(self) -> str:
        return f"CachedEntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def _installed_signature(scope: list[str] | None = None) -> list[Any] | None:
    """What the installed distributions' entry points depend on: each ``sys.path`` entry's
    modification time and those of the ``entry_points.txt`` of the distributions in it.

    Installing, removing or upgrading a distribution changes its folder's entry; ``None`` when
    something changed too recently to be trusted.
    """
    import sys
    import time

    from ...base.state import RACY_NS

    now = time.time_ns()
    out: list[Any] = [sys.version, scope]
    for entry in dict.fromkeys(os.path.abspath(p or ".") for p in (sys.path if scope is None else scope)):
        try:
            stat = os.stat(entry)
        except OSError:
            out.append([entry, None])
            continue
        times = [stat.st_mtime_ns]
        if os.path.isdir(entry):
            try:
                names = sorted(n for n in os.listdir(entry) if n.endswith((".dist-info", ".egg-info")))
            except OSError:
                names = []
            for name in names:
                try:
                    times.append(os.stat(os.path.join(entry, name, "entry_points.txt")).st_mtime_ns)
                except OSError:
                    times.append(0)
        if max(times) > now - RACY_NS:
            return None
        out.append([entry, times])
    return out


def _cached_rows(cache: Path, signature: list[Any] | None, groups: tuple[str, ...]) -> list[Any] | None:
    from ...base.state import read_cache

    data = read_cache(cache) if signature is not None else None
    if data is None or data.get("signature") != signature or data.get("groups") != list(groups):
        return None
    try:
        return [
            (str(g), CachedEntryPoint(str(name), str(value), str(g)), str(version), str(summary))
            for g, name, value, version, summary in data["rows"]
        ]
    except (TypeError, ValueError, KeyError):
        return None


def _save_rows(cache: Path, signature: list[Any], groups: tuple[str, ...], rows: list[Any]) -> None:
    import json

    from ...base.state import FORMAT, write_atomic

    data = {
        "format": FORMAT,
        "signature": signature,
        "groups": list(groups),
        "rows": [[g, ep.name, ep.value, version, summary] for g, ep, version, summary in rows],
    }
    if cache.parent.is_dir():  # as the manifest cache: only into a folder a saved load made
        write_atomic(cache, json.dumps(data))


def merge_sources(groups: list[list[Candidate]], log: Any) -> tuple[dict[str, Candidate], list[Candidate]]:
    """Later groups override earlier ones on the same key.

    Returns the winners by key, and the candidates refused because another
    plugin of the same source already has their key (kept so that they can be
    listed with the reason, never silently dropped).
    """
    merged: dict[str, Candidate] = {}
    refused: list[Candidate] = []
    for group in groups:
        for cand in group:
            previous = merged.get(cand.key)
            if previous is not None:
                if previous.source == cand.source:
                    fix = (
                        "two installed packages declare it: uninstall one, or ask its author to rename it"
                        if cand.entry_point is not None
                        else "rename one of them (manifest 'name')"
                    )
                    cand.error = (
                        f"plugin name '{cand.key}' ({cand.where}) is already used by {previous.where}; {fix}"
                    )
                    log.warning("plugin_duplicate", key=cand.key, path=cand.where, first=previous.where)
                    refused.append(cand)
                    continue
                cand.overrides = [*previous.overrides, f"{previous.source}: {previous.where}"]
                log.debug("override", key=cand.key, winner=cand.where, loser=previous.where)
            merged[cand.key] = cand
    return merged, refused


def _candidate(
    directory: Path,
    manifest_file: tuple[Path, os.stat_result] | None,
    source: str,
    category: str | None,
    cache: Any = None,
) -> Candidate:
    default = directory.name
    manifest: Manifest | None = None
    error: str | None = None
    if manifest_file is None:
        manifest = Manifest(name=default, path=None)
    else:
        try:
            manifest = load_manifest(manifest_file[0], default, cache, manifest_file[1])
        except ManifestError as exc:
            error = f"invalid manifest: {exc}"
    if category is not None:
        key = f"{category}/{directory.name}"
    else:
        key = manifest.name if manifest is not None else default
    return Candidate(
        key=key,
        source=source,
        path=directory,
        manifest=manifest,
        error=error,
        version=manifest.version if manifest else "",
        description=manifest.description if manifest else "",
    )


def _subdirs(root: Path, log: Any) -> list[Path]:
    """The visible subdirectories of ``root``, sorted by name; unreadable ones are warned about."""
    try:
        with os.scandir(root) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        log.warning("plugin_dir_unreadable", path=str(root), error=str(exc))
        return []
    out = []
    for entry in entries:
        if entry.name.startswith((".", "__")):
            continue
        try:
            if entry.is_dir():
                out.append(root / entry.name)
        except OSError as exc:
            log.warning("plugin_dir_unreadable", path=entry.path, error=str(exc))
    return out
