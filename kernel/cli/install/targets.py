"""Which installed plugin a name given to ``plugins update`` or ``plugins remove`` stands for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.sources.discovery import Candidate
from ..common import candidate_items, fail, resolve_name, unknown_name
from .records import _record_list, normalize_dist


@dataclass
class _Installed:
    """What a name given to ``update`` or ``remove`` stands for."""

    key: str
    cand: Candidate | None = None
    dirname: str | None = None  # a user plugin's directory under <home>/plugins
    dir_record: dict[str, Any] | None = None
    package: str | None = None  # the records' key of a pip package
    package_record: dict[str, Any] | None = None
    dist_name: str | None = None  # the distribution of an entry-point plugin, when known


def _package_for(records: dict[str, dict[str, Any]], ep_name: str, dist_name: str | None) -> str | None:
    """The package record of an entry-point plugin: by its distribution's name, else by entry point."""
    if dist_name is not None:
        key = normalize_dist(dist_name)
        return key if key in records else None
    matches = [k for k, r in records.items() if ep_name in _record_list(r, "entry_points")]
    return matches[0] if len(matches) == 1 else None


def _resolve_installed(
    name: str, every: list[Candidate], records: dict[str, dict[str, dict[str, Any]]]
) -> _Installed | int:
    """The plugin ``name`` designates (user plugins first, then packages, then the rest); else it is looked
    up in the install records (a package whose folder is not on ``sys.path``); else an error."""
    items = candidate_items(every)
    found = resolve_name(name, items)
    if found:
        for source in ("user", "entrypoint"):
            of_source = [i for i in found if i.obj.source == source]
            if len(of_source) > 1 and source == "user":
                paths = ", ".join(str(i.obj.path) for i in of_source)
                return fail(f"'{name}' names several user plugins ({paths}); give the directory name instead")
            if of_source:
                cand: Candidate = of_source[0].obj
                if source == "user":
                    assert cand.path is not None
                    dirname = cand.path.name
                    return _Installed(cand.key, cand, dirname, records["plugins"].get(dirname))
                dist = getattr(getattr(cand.entry_point, "dist", None), "metadata", None)
                dist_name = dist["Name"] if dist else None
                package = _package_for(records["packages"], cand.key, dist_name)
                record = records["packages"].get(package) if package else None
                return _Installed(cand.key, cand, package=package, package_record=record, dist_name=dist_name)
        return _Installed(found[0].obj.key, found[0].obj)
    for dirname, record in records["plugins"].items():
        if name in (dirname, record.get("name")):
            return _Installed(str(record.get("name") or dirname), None, dirname, record)
    for package, record in records["packages"].items():
        if normalize_dist(name) == package or name in _record_list(record, "entry_points"):
            eps = _record_list(record, "entry_points")
            return _Installed(eps[0] if eps else package, None, package=package, package_record=record)
    return unknown_name(name, items)
