"""Provider slots: named providers collected from plugins, one chosen by config."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from .hookspecs import SLOT_HOOKS

SLOTS = tuple(SLOT_HOOKS.values())


class SlotError(ValueError):
    """A provider that cannot take a name in a slot."""


@dataclass(frozen=True)
class Provider:
    """One provider offered to a slot, with the plugin that offered it."""

    slot: str
    name: str
    plugin: str
    obj: Any


class SlotRegistry:
    """The providers of every slot of one kernel."""

    def __init__(self) -> None:
        self._slots: dict[str, dict[str, Provider]] = {slot: {} for slot in SLOTS}
        self._lock = threading.Lock()

    def add(self, slot: str, obj: Any, plugin: str) -> Provider:
        """Offer ``obj`` under its ``name``; raise :class:`SlotError` on a bad or taken name."""
        if slot not in self._slots:
            raise SlotError(f"unknown slot '{slot}' (slots: {', '.join(SLOTS)})")
        name = getattr(obj, "name", None)
        if not isinstance(name, str) or not name.strip():
            raise SlotError(f"plugin '{plugin}' offered a {slot} provider without a string 'name': {obj!r}")
        with self._lock:
            taken = self._slots[slot].get(name)
            if taken is not None:
                raise SlotError(
                    f"{slot} provider '{name}' of plugin '{plugin}' was refused: "
                    f"plugin '{taken.plugin}' already offers that name"
                )
            provider = Provider(slot, name, plugin, obj)
            self._slots[slot][name] = provider
        return provider

    def remove_plugin(self, plugin: str) -> None:
        with self._lock:
            for providers in self._slots.values():
                for name in [n for n, p in providers.items() if p.plugin == plugin]:
                    del providers[name]

    def providers(self, slot: str) -> dict[str, Provider]:
        """The providers of ``slot`` by name (a copy)."""
        return dict(self._slots.get(slot, {}))

    def get(self, slot: str, name: str) -> Provider:
        """The provider ``name`` of ``slot``; an unknown name lists the available ones."""
        providers = self._slots.get(slot, {})
        if name not in providers:
            known = ", ".join(sorted(providers)) or "none"
            raise SlotError(f"no {slot} provider named '{name}' (available: {known})")
        return providers[name]
