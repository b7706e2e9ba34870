"""Finding plugins: directories and entry points, read without importing plugin code."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib import metadata

from .manifest import Manifest, ManifestError, find_manifest, load_manifest

# One level of category folders: <root>/<category>/<name>/ has key "<category>/<name>".
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
    package = Path(__file__).resolve().parents[1]  # the kernel package
    installed = package / "_extensions"
    if installed.is_dir():
        return installed
    return package.parent / "extensions"


def scan_root(root: Path, source: str, log: Any) -> list[Candidate]:
    """Plugin directories under ``root``: flat ones and one level of categories."""
    if not root.is_dir():
        log.debug("source_missing", source=source, root=str(root))
        return []
    found: list[Candidate] = []
    for child in _subdirs(root, log):
        manifest_file = find_manifest(child)
        if manifest_file is not None:
            found.append(_candidate(child, manifest_file, source, category=None))
        elif child.name in CATEGORIES:
            for grandchild in _subdirs(child, log):
                grand_manifest = find_manifest(grandchild)
                if grand_manifest is not None or (grandchild / "__init__.py").is_file():
                    found.append(_candidate(grandchild, grand_manifest, source, category=child.name))
                else:
                    log.debug(
                        "skip",
                        path=str(grandchild),
                        reason="no plugin.yaml or __init__.py (depth cap reached)",
                    )
        elif (child / "__init__.py").is_file():
            found.append(_candidate(child, None, source, category=None))
        else:
            log.debug("skip", path=str(child), reason="no plugin.yaml or __init__.py")
    log.debug("source_scanned", source=source, root=str(root), plugins=len(found))
    return found


def scan_entry_points(log: Any, groups: Iterable[str] = tuple(ENTRY_POINT_GROUPS)) -> list[Candidate]:
    """Plugins advertised by installed distributions in the Hermes entry-point ``groups``.

    Two entries of one name are one plugin when they name the same target (a
    package listed in two groups); otherwise the first kept and the second is
    refused like a duplicate directory.
    """
    from importlib import metadata

    try:
        selected = metadata.entry_points()
    except Exception as exc:  # a broken distribution must not stop discovery
        log.debug("entry_points_failed", error=str(exc))
        return []
    found: dict[str, Candidate] = {}
    out: list[Candidate] = []
    for group in groups:
        try:
            eps = sorted(selected.select(group=group), key=lambda ep: ep.name)
        except Exception as exc:  # pragma: no cover - a broken distribution
            log.debug("entry_points_failed", group=group, error=str(exc))
            continue
        for ep in eps:
            previous = found.get(ep.name)
            if previous is not None:
                if previous.entry_point is not None and previous.entry_point.value == ep.value:
                    continue
                log.debug("skip", entry_point=f"{ep.name} = {ep.value}", reason="duplicate entry point name")
            dist = getattr(ep, "dist", None)
            version, description = "", ""
            if dist is not None:
                version = dist.version or ""
                description = (dist.metadata.get("Summary") or "") if dist.metadata else ""
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


def _candidate(directory: Path, manifest_file: Path | None, source: str, category: str | None) -> Candidate:
    default = directory.name
    manifest: Manifest | None = None
    error: str | None = None
    if manifest_file is None:
        manifest = Manifest(name=default, path=None)
    else:
        try:
            manifest = load_manifest(manifest_file, default)
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
