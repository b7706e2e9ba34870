"""The model provider catalog: profiles offered by plugins, looked up by name or alias."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..core.context import current_context
from ..core.records import SOURCE_RANK
from ..core.watchdog import SharedRLock
from .hermes_config import BUILT_IN, builtin_profile, shown_name, unreachable
from .profile import ProviderProfile


class ProviderLookupError(LookupError):
    """No provider of that name (the message lists the known ones)."""


@dataclass(frozen=True)
class CatalogEntry:
    profile: ProviderProfile
    plugin: str
    source: str


class ProviderCatalog:
    """Profiles by name; a later source overrides an earlier one (user over bundled).

    Within one source, a second plugin offering a taken name is refused with an
    error naming both.  ``loader`` runs once, before the first lookup.
    """

    def __init__(self, loader: Callable[[], None] | None = None) -> None:
        self._entries: dict[str, CatalogEntry] = {}
        self._loader = loader
        self._loaded = loader is None
        self._lock = SharedRLock()
        self.problems: list[str] = []

    def add(self, profile: ProviderProfile, plugin: str, source: str = "runtime") -> str | None:
        """Offer ``profile``; return a problem text when it was refused."""
        if not isinstance(profile, ProviderProfile):
            return f"plugin '{plugin}' offered {profile!r}, which is not a ProviderProfile; ignored"
        key = profile.name.casefold()
        with self._lock:
            taken = self._entries.get(key)
            # A later source (user over bundled) replaces; the same or an earlier one is refused.
            if (
                taken is not None
                and taken.plugin != plugin
                and SOURCE_RANK.get(source, 4) <= SOURCE_RANK.get(taken.source, 4)
            ):
                problem = (
                    f"model provider '{profile.name}' of plugin '{plugin}' was refused: "
                    f"plugin '{taken.plugin}' already offers that name"
                )
                self.problems.append(problem)
                return problem
            self._entries[key] = CatalogEntry(profile, plugin, source)
        return None

    def has_plugin(self, plugin: str) -> bool:
        """Whether ``plugin`` offered any profile."""
        with self._lock:
            return any(e.plugin == plugin for e in self._entries.values())

    def remove_plugin(self, plugin: str) -> None:
        with self._lock:
            for key in [k for k, e in self._entries.items() if e.plugin == plugin]:
                del self._entries[key]

    @property
    def loaded(self) -> bool:
        """Whether the deferred provider plugins were imported (the first lookup does it)."""
        return self._loaded

    def ensure_loaded(self) -> None:
        with self._lock:
            if self._loaded:
                return
            # The loader may look a provider up itself (k.load() checks model.provider):
            # that nested call re-enters here and runs the loader to the end first.
            if self._loader is not None:
                self._loader()
            self._loaded = True

    def entry(self, name: str) -> CatalogEntry:
        """The entry for a name or alias (case-insensitive)."""
        self.ensure_loaded()
        wanted = str(name).casefold()
        with self._lock:
            entry = self._entries.get(wanted)
            if entry is None:
                entry = next(
                    (e for e in self._entries.values() if wanted in map(str.casefold, e.profile.aliases)),
                    None,
                )
            if entry is None:
                entry = _builtin_entry(name)
            if entry is None:
                known = ", ".join(sorted(e.profile.name for e in self._entries.values())) or "none"
                raise ProviderLookupError(
                    f"no model provider named '{shown_name(name)}' (available: {known}, "
                    "or a Hermes Agent provider name such as openrouter, openai, nous, custom)"
                )
            return entry

    def get(self, name: str) -> ProviderProfile:
        return self.entry(name).profile

    def entries(self) -> list[CatalogEntry]:
        self.ensure_loaded()
        with self._lock:
            return sorted(self._entries.values(), key=lambda e: e.profile.name.casefold())

    def profiles(self) -> list[ProviderProfile]:
        return [e.profile for e in self.entries()]


_default: ProviderCatalog | None = None
_default_lock = threading.Lock()


def _builtin_entry(name: str) -> CatalogEntry | None:
    """Hermes' provider ``name`` when no plugin offers it: its OpenAI-compatible endpoint, or a
    :class:`ProviderLookupError` saying why the kernel cannot reach it; ``None`` for other names."""
    profile = builtin_profile(name)
    if profile is not None:
        return CatalogEntry(profile, BUILT_IN, "builtin")
    why = unreachable(name)
    if why is not None:
        raise ProviderLookupError(why)
    return None


def default_catalog() -> ProviderCatalog:
    """The process-wide catalog used by the module-level functions.

    It is filled lazily by a kernel for ``$HERMES_HOME`` that imports only the
    model provider plugins, not the others.
    """
    global _default
    with _default_lock:
        if _default is None:
            from ..core.kernel import Kernel

            _default = Kernel().providers.catalog
        return _default


def register_provider(profile: ProviderProfile) -> None:
    """Offer a model provider profile.  Provider plugins call this when they are imported."""
    ctx = current_context()
    if ctx is not None:
        # Called while a plugin is imported: the profile is that plugin's.
        ctx.register_model_provider(profile)
        return
    problem = default_catalog().add(profile, plugin="(direct)", source="runtime")
    if problem:
        raise ValueError(problem)


def get_provider_profile(name: str) -> ProviderProfile:
    """The profile of provider ``name`` (or an alias) from the default catalog."""
    return default_catalog().get(name)


def list_providers() -> list[ProviderProfile]:
    """Every profile in the default catalog, by name."""
    return default_catalog().profiles()
