"""hermes-kernel: a small, fast, embeddable plugin kernel for AI agents.

Runs plugins written for Hermes Agent unchanged and ordinary pluggy
extensions alike::

    from kernel import Kernel, hookimpl

    k = Kernel()
    k.load()
    print(k.tools.dispatch("calculate", {"expression": "2**16"}))

The names below are imported when first used, so that ``import kernel``
costs only the core.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core import services as _services
from .core.kernel import Kernel, PluginError, PluginInfo, merge_context
from .defaults import BUILTIN_SERVICES
from .hookspecs import __version__, hookimpl, hookspec

_services.use_builtins(BUILTIN_SERVICES)

# name -> module that defines it (imported on first access).
_LAZY = {
    "ApprovalRequest": "kernel.tools.decisions",
    "terminal_approver": "kernel.tools.decisions",
    "Callback": "kernel.core.hooks",
    "EnvVar": "kernel.core.loader.manifest",
    "Manifest": "kernel.core.loader.manifest",
    "ManifestError": "kernel.core.loader.manifest",
    "KernelPluginManager": "kernel.core.plugin_manager",
    "PluginHandle": "kernel.core.plugin_manager",
    "PluginContext": "kernel.core.context",
    "Provider": "kernel.providers.slots",
    "SlotError": "kernel.providers.slots",
    "Tool": "kernel.tools",
    "ToolRegistrationError": "kernel.tools",
    # The base classes a plugin subclasses, so that no plugin imports an internal path.
    "MemoryProvider": "kernel.providers.memory",
    "ContextEngine": "kernel.providers.context_engine",
    "ImageGenProvider": "kernel.providers.image_gen",
    "VideoGenProvider": "kernel.providers.video_gen",
    "WebSearchProvider": "kernel.providers.web_search",
    "TTSProvider": "kernel.surfaces.speech.providers",
    "TranscriptionProvider": "kernel.surfaces.speech.providers",
    "BasePlatformAdapter": "kernel.gateway.base",
    "SecretSource": "kernel.registrations",
    "BrowserProvider": "kernel.registrations",
    "DashboardAuthProvider": "kernel.registrations",
}

if TYPE_CHECKING:
    from .core.context import PluginContext
    from .core.hooks import Callback
    from .core.loader.manifest import EnvVar, Manifest, ManifestError
    from .core.plugin_manager import KernelPluginManager, PluginHandle
    from .gateway.base import BasePlatformAdapter
    from .providers.context_engine import ContextEngine
    from .providers.image_gen import ImageGenProvider
    from .providers.memory import MemoryProvider
    from .providers.slots import Provider, SlotError
    from .providers.video_gen import VideoGenProvider
    from .providers.web_search import WebSearchProvider
    from .registrations import BrowserProvider, DashboardAuthProvider, SecretSource
    from .surfaces.speech.providers import TranscriptionProvider, TTSProvider
    from .tools import Tool, ToolRegistrationError
    from .tools.decisions import ApprovalRequest, terminal_approver


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kernel' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ApprovalRequest",
    "BasePlatformAdapter",
    "BrowserProvider",
    "Callback",
    "ContextEngine",
    "DashboardAuthProvider",
    "EnvVar",
    "ImageGenProvider",
    "Kernel",
    "KernelPluginManager",
    "Manifest",
    "ManifestError",
    "MemoryProvider",
    "PluginContext",
    "PluginError",
    "PluginHandle",
    "PluginInfo",
    "Provider",
    "SecretSource",
    "SlotError",
    "TTSProvider",
    "Tool",
    "ToolRegistrationError",
    "TranscriptionProvider",
    "VideoGenProvider",
    "WebSearchProvider",
    "__version__",
    "hookimpl",
    "hookspec",
    "merge_context",
    "terminal_approver",
]
