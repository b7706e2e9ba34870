"""``agent.tts_registry`` for plugins written for Hermes Agent: the current kernel's TTS providers."""

from __future__ import annotations

from typing import Any

from ...surfaces.speech.dispatch import lookup, offered
from ...surfaces.speech.providers import TTSProvider
from . import current_kernel, registering_context

__all__ = ["get_provider", "list_providers", "register_provider"]


def register_provider(provider: TTSProvider) -> None:
    """Offer a TTS provider, as ``ctx.register_tts_provider`` does.

    During a plugin's load it belongs to that plugin; otherwise to the
    kernel's ``compat:hermes`` record.
    """
    registering_context("agent.tts_registry.register_provider").register_tts_provider(provider)


def get_provider(name: str) -> Any:
    """The TTS provider called ``name`` (ignoring case and surrounding blanks), or ``None``."""
    kernel = current_kernel()
    entry = lookup(kernel, "tts", name) if kernel is not None and isinstance(name, str) else None
    return entry.obj if entry is not None else None


def list_providers() -> list[Any]:
    """Every TTS provider plugins offer to the current kernel, by name."""
    kernel = current_kernel()
    providers = offered(kernel, "tts") if kernel is not None else {}
    return [providers[name].obj for name in sorted(providers)]
