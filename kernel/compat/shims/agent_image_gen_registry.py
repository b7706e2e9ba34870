"""``agent.image_gen_registry`` for plugins written for Hermes Agent: the current kernel's image backends."""

from __future__ import annotations

from ...providers.image_gen import ImageGenProvider
from . import current_kernel, registering_context

__all__ = ["get_active_provider", "get_provider", "list_providers", "register_provider"]


def get_provider(name: str) -> ImageGenProvider | None:
    """The image backend ``name`` of the current kernel, or ``None`` (also when no kernel runs)."""
    kernel = current_kernel()
    if kernel is None:
        return None
    provider = kernel.slots.providers("image_gen").get(str(name))
    return provider.obj if provider is not None else None


def list_providers() -> list[ImageGenProvider]:
    """Every image backend of the current kernel, by name."""
    kernel = current_kernel()
    if kernel is None:
        return []
    providers = kernel.slots.providers("image_gen")
    return [providers[name].obj for name in sorted(providers)]


def get_active_provider() -> ImageGenProvider | None:
    """The backend ``image_gen.provider`` selects, or ``None`` (none configured, unknown or unavailable)."""
    kernel = current_kernel()
    if kernel is None:
        return None
    from ...providers.manager import ProviderSelectionError

    try:
        return kernel.providers.active("image_gen")
    except ProviderSelectionError:
        return None


def register_provider(provider: ImageGenProvider) -> None:
    """Offer an image backend, as ``ctx.register_image_gen_provider`` does.

    During a plugin's load it belongs to that plugin; otherwise to the
    kernel's ``compat:hermes`` record.
    """
    registering_context("agent.image_gen_registry.register_provider").register_image_gen_provider(provider)
