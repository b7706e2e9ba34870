"""What the CLI's command groups share: loading the kernel as a command does, finding a plugin by name."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.discovery import (
    Candidate,
    merge_sources,
)
from ..core.kernel import Kernel, PluginInfo
from ..core.manifest import EnvVar, Manifest, ManifestError, find_manifest, load_manifest


def loaded_kernel(home: str | None = None) -> Kernel:
    """A kernel loaded for a command: its plugin list saved, its config problems printed as warnings."""
    kernel = Kernel(home=home)
    kernel.load()
    kernel.save_plugin_state()
    for problem in kernel.problems:
        print(f"warning: {problem}", file=sys.stderr)
    return kernel


DISABLED_BY_CONFIG = "disabled via config"
NOT_ENABLED = "not enabled in config"  # kernel.core.records.NOT_ENABLED, without importing the core
DISABLED_FOR_RUN = "disabled for this run"  # kernel.core.records.DISABLED_FOR_RUN
TIERS = {0: "tryfirst", 1: "normal", 2: "trylast", 3: "config"}


def fail(message: str, code: int = 1) -> int:
    """Print ``error: message`` on stderr; the exit code."""
    print(f"error: {message}", file=sys.stderr)
    return code


def unloaded_kernel() -> Kernel:
    """A kernel of the home, not loaded (for commands that only read files)."""
    return Kernel()


def discover(kernel: Kernel) -> tuple[dict[str, Candidate], list[Candidate]]:
    """What ``Kernel.load`` would find, without importing any plugin code.

    Returns the winners by key and every candidate of every source (overridden
    and refused ones too).
    """
    groups = kernel._scan_sources()
    merged, _refused = merge_sources(groups, kernel.log)
    return merged, [c for group in groups for c in group]


@dataclass
class Named:
    """Something a user may name on the command line: a plugin key, its manifest name, its directory."""

    key: str
    manifest_name: str | None
    dirname: str | None
    obj: Any


def resolve_name(name: str, items: list[Named]) -> list[Named]:
    """The items ``name`` designates: by key, else manifest name, else directory, else ignoring case."""
    rules = (
        lambda i: i.key == name,
        lambda i: i.manifest_name == name,
        lambda i: i.dirname == name,
        lambda i: name.casefold() in {i.key.casefold(), (i.manifest_name or "").casefold()},
    )
    for rule in rules:
        found = [i for i in items if rule(i)]
        if found:
            return found
    return []


def unknown_name(name: str, items: list[Named]) -> int:
    import difflib

    names = sorted({i.key for i in items} | {i.manifest_name for i in items if i.manifest_name})
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    close += [n for n in names if name.casefold() in n.casefold() and n not in close][: 5 - len(close)]
    if close:
        hint = f"; did you mean: {', '.join(close)}?"
    else:
        hint = f"; known plugins: {', '.join(names)}" if names else "; no plugins were found"
    return fail(f"no plugin named '{name}'{hint} (see: hermes-kernel plugins list)")


def manifest_at(path: str | Path | None) -> Manifest | None:
    """The manifest of a plugin directory, or ``None`` (no directory, no manifest, or invalid)."""
    if path is None:
        return None
    file = find_manifest(Path(path))
    if file is None:
        return None
    try:
        return load_manifest(file, Path(path).name)
    except ManifestError:
        return None


def info_items(plugins: list[PluginInfo]) -> list[Named]:
    items = []
    for p in plugins:
        manifest = manifest_at(p.path)
        items.append(Named(p.name, manifest.name if manifest else None, None, (p, manifest)))
    return items


def candidate_items(candidates: Iterable[Candidate]) -> list[Named]:
    return [
        Named(
            c.key,
            c.manifest.name if c.manifest else None,
            c.path.name if c.path is not None and c.source == "user" else None,
            c,
        )
        for c in candidates
    ]


def env_state(var: EnvVar, environ: dict[str, str], dotenv: dict[str, str]) -> str | None:
    """Where ``var`` is set: ``environment``, ``.env`` or ``None`` (missing)."""
    if environ.get(var.name):
        return "environment"
    if dotenv.get(var.name):
        return ".env"
    return None


def plugin_status(info: PluginInfo) -> str:
    if info.enabled:
        return "enabled (deferred: imported on the first provider lookup)" if info.deferred else "enabled"
    error = info.error or ""
    if error.startswith((DISABLED_BY_CONFIG, DISABLED_FOR_RUN)):
        return "disabled"
    if error.startswith(NOT_ENABLED):
        return "not enabled"
    if "(missing: " in error:
        return "disabled (missing environment variables)"
    return "failed"


def dump_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


# --------------------------------------------------------------------------- plugins info
