"""``providers`` for plugins written for Hermes Agent: model provider profiles.

``ProviderProfile`` is the kernel's.  ``register_provider`` sends a profile
to the kernel loading the plugin (its catalog, attributed to the plugin);
outside a load, to the current kernel (refused when several run and none is
known).  The lookups ask the current
kernel's catalog; with no kernel running they fall back to
:mod:`kernel.providers`' process-wide catalog.
"""

from __future__ import annotations

from ...core.context import current_context
from ...providers import registry as _registry
from ...providers.profile import OMIT_TEMPERATURE, ProviderProfile
from .. import host
from . import current_kernel, registering_context

__all__ = [
    "OMIT_TEMPERATURE",
    "ProviderProfile",
    "get_provider_profile",
    "list_providers",
    "register_provider",
]


def register_provider(profile: ProviderProfile) -> None:
    """Offer a model provider profile (Hermes provider plugins call this when imported)."""
    if current_context() is not None or (current_kernel() is None and not host.attached()):
        # A plugin is being imported (the profile is its own), or no kernel runs at all.
        _registry.register_provider(profile)
        return
    registering_context("providers.register_provider").register_model_provider(profile)


def get_provider_profile(name: str) -> ProviderProfile | None:
    """The profile of provider ``name`` (or an alias); ``None`` when there is none, as in Hermes."""
    kernel = current_kernel()
    try:
        if kernel is None:
            return _registry.get_provider_profile(name)
        return kernel.providers.get_provider_profile(name)
    except _registry.ProviderLookupError:
        return None


def list_providers() -> list[ProviderProfile]:
    """Every model provider profile, by name."""
    kernel = current_kernel()
    if kernel is None:
        return _registry.list_providers()
    return kernel.providers.list_providers()
