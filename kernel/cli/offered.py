"""The plugins' commands of ``hermes-kernel``, known without importing any plugin code.

``--help`` and Tab completion list them from what the last load saved: which plugin registered which
command (the plugin list of :meth:`Kernel.listing`, read from manifests and the saved state) and each
command's help text (``<home>/cache/cli-commands.json``, written by :func:`save` after every load the
command line saves).  Running a plugin's command, or completing its own arguments, loads the plugins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import Kernel
from ..base import state

COMMANDS_FILE = Path("cache") / "cli-commands.json"


@dataclass(frozen=True)
class Offered:
    """One plugin's command as ``--help`` lists it."""

    name: str
    plugin: str
    help: str = ""


def save(kernel: Kernel) -> None:
    """Remember the help text of each command the loaded ``kernel``'s plugins offer (no import)."""
    commands: dict[str, dict[str, str]] = {
        name: {"plugin": command.plugin, "help": command.help or ""}
        for name, command in kernel.cli_commands.items()
    }
    memory = _memory_command(kernel)
    if memory is not None and memory.name not in commands:
        commands[memory.name] = {"plugin": memory.plugin, "help": memory.help, "memory": "1"}
    data = json.dumps({"format": state.FORMAT, "commands": commands})
    state.write_atomic(kernel.home / COMMANDS_FILE, data)


def _memory_command(kernel: Kernel) -> Offered | None:
    """The active memory provider's command (its plugin has a ``cli.py``), found without importing it."""
    try:
        name = kernel.providers.selected("memory")
        providers = kernel.slots.providers("memory")
    except Exception:  # a slot that cannot answer offers no command
        return None
    provider = providers.get(name) if name else None
    if provider is None:
        return None
    info = next((p for p in kernel.plugins if p.name == provider.plugin), None)
    if info is None or info.path is None or not (Path(info.path) / "cli.py").is_file():
        return None
    return Offered(str(name), provider.plugin, f"the active memory provider '{name}'")


def offered(kernel: Kernel) -> tuple[list[Offered], bool]:
    """The commands the plugins of ``kernel`` (not loaded) offer, as far as the last load knows, and
    whether some plugin that would load has never been loaded here (its commands are not known)."""
    saved = state.read_cache(kernel.home / COMMANDS_FILE) or {}
    helps: Any = saved.get("commands")
    helps = helps if isinstance(helps, dict) else {}
    found: dict[str, Offered] = {}
    unknown = False
    usable: dict[str, str | None] = {}  # the plugins that would load, and their folders
    for info, basis in kernel.listing():
        if info.error is not None:
            continue
        usable[info.name] = info.path
        if basis == "unknown":
            unknown = True
            continue
        if not info.enabled:
            continue
        for name in info.cli_commands:
            entry = helps.get(name)
            text = entry.get("help") if isinstance(entry, dict) and entry.get("plugin") == info.name else None
            found.setdefault(name, Offered(name, info.name, str(text or "")))
    memory = kernel.config.get("memory") if isinstance(kernel.config, dict) else None
    chosen = memory.get("provider") if isinstance(memory, dict) else None
    if isinstance(chosen, str) and chosen and chosen not in found:
        memory_command = _chosen_memory(chosen, helps.get(chosen), usable)
        if memory_command is not None:
            found[chosen] = memory_command
    return sorted(found.values(), key=lambda o: o.name), unknown


def _chosen_memory(chosen: str, entry: Any, usable: dict[str, str | None]) -> Offered | None:
    """The command of memory provider ``chosen`` (``memory.provider``): as the last load saved it,
    else that of the plugin named after it (``memory/<name>``) when the plugin has a ``cli.py``."""
    if isinstance(entry, dict) and entry.get("memory") and entry.get("plugin") in usable:
        return Offered(chosen, str(entry["plugin"]), str(entry.get("help") or ""))
    for plugin, path in usable.items():
        if chosen in (plugin, plugin.rsplit("/", 1)[-1]) and path and (Path(path) / "cli.py").is_file():
            return Offered(chosen, plugin, f"the active memory provider '{chosen}'")
    return None
