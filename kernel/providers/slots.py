"""Provider slots: named providers collected from plugins, one chosen by config."""

from __future__ import annotations

import inspect
import threading
from dataclasses import dataclass
from typing import Any

from ..hookspecs import SLOT_HOOKS

# The four slots with a hookspec, then those only ``ctx.register_*`` fills (Hermes has no hook for them).
SLOTS = (*SLOT_HOOKS.values(), "web_search", "video_gen", "tts", "transcription")
# The slots Hermes keeps in a registry where registering a name again replaces the provider.
REPLACING_SLOTS = frozenset({"image_gen", "video_gen", "web_search", "tts", "transcription"})


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
        # Providers another plugin's replaced (see put), brought back when that plugin goes.
        self._under: dict[tuple[str, str], list[Provider]] = {}
        self._lock = threading.Lock()

    def _offered_name(self, slot: str, obj: Any, plugin: str) -> str:
        if slot not in self._slots:
            raise SlotError(f"unknown slot '{slot}' (slots: {', '.join(SLOTS)})")
        name = getattr(obj, "name", None)
        if not isinstance(name, str) or not name.strip():
            raise SlotError(f"plugin '{plugin}' offered a {slot} provider without a string 'name': {obj!r}")
        return name

    def add(self, slot: str, obj: Any, plugin: str) -> Provider:
        """Offer ``obj`` under its ``name``; raise :class:`SlotError` on a bad or taken name."""
        name = self._offered_name(slot, obj, plugin)
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

    def put(self, slot: str, obj: Any, plugin: str) -> Provider | None:
        """Offer ``obj`` under its ``name``, replacing the provider of that name; return the replaced one.

        For the slots where Hermes keeps a registry that a new registration overwrites.
        """
        name = self._offered_name(slot, obj, plugin)
        with self._lock:
            replaced = self._slots[slot].get(name)
            self._slots[slot][name] = Provider(slot, name, plugin, obj)
            if replaced is not None and replaced.plugin != plugin:
                self._under.setdefault((slot, name), []).append(replaced)
        return replaced

    def remove_plugin(self, plugin: str) -> None:
        with self._lock:
            for under in self._under.values():
                under[:] = [p for p in under if p.plugin != plugin]
            for slot, providers in self._slots.items():
                for name in [n for n, p in providers.items() if p.plugin == plugin]:
                    del providers[name]
                    under = self._under.pop((slot, name), [])
                    if under:
                        providers[name] = under.pop()
                        if under:
                            self._under[(slot, name)] = under

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


def conform(obj: Any, base: type) -> tuple[Any, list[str]]:
    """``obj`` as a ``base``: itself when it is one, else a view of a duck-typed provider.

    Published Hermes plugins sometimes offer a provider that does not subclass
    the slot's base class but has its methods.  The view is an instance of
    ``base`` whose public members come from ``obj`` where it has them and from
    ``base`` (the documented defaults) where it does not, so the kernel can
    call every method of the contract.  Returns ``(None, missing)`` when
    ``obj`` lacks an abstract member.
    """
    if isinstance(obj, base):
        return obj, []
    abstract = sorted(getattr(base, "__abstractmethods__", ()))
    missing = [name for name in abstract if not hasattr(obj, name)]
    if missing:
        return None, missing

    def wrapped(view: Any) -> Any:
        return object.__getattribute__(view, "_wrapped")

    members: dict[str, Any] = {
        "__doc__": f"{type(obj).__name__} seen as a {base.__name__}.",
        "__getattr__": lambda self, name: getattr(wrapped(self), name),
        # A default method of ``base`` run on the view (``update_model``) keeps its state on ``obj``.
        "__setattr__": lambda self, name, value: setattr(wrapped(self), name, value),
        "__repr__": lambda self: f"<{base.__name__} view of {wrapped(self)!r}>",
    }
    for name in dir(base):
        if name.startswith("_"):
            continue
        if hasattr(obj, name):
            members[name] = property(lambda self, n=name: getattr(wrapped(self), n))  # type: ignore[misc]  # a lambda's default argument
        elif not callable(default := getattr(base, name)) and not isinstance(
            inspect.getattr_static(base, name), property
        ):
            # A data default of ``base`` (a counter): ``obj``'s own value once set, else the default.
            members[name] = property(lambda self, n=name, d=default: getattr(wrapped(self), n, d))  # type: ignore[misc]  # as above
    view_class = type(type(obj).__name__, (base,), members)
    view: Any = object.__new__(view_class)
    object.__setattr__(view, "_wrapped", obj)
    return view, []
