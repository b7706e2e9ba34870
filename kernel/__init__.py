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
from .core.kernel import PluginError, PluginInfo, merge_context
from .defaults import BUILTIN_SERVICES, BUNDLED_CONFIG_SCHEMAS, CONFIG_SCHEMAS
from .hookspecs import __version__, hookimpl, hookspec

_services.use_builtins(BUILTIN_SERVICES, CONFIG_SCHEMAS, BUNDLED_CONFIG_SCHEMAS)

# name -> module that defines it (imported on first access).
_LAZY = {
    "ApprovalRequest": "kernel.tools.decisions",
    "terminal_approver": "kernel.tools.decisions",
    "Callback": "kernel.core.hooks",
    "EnvVar": "kernel.core.sources.manifest",
    "Manifest": "kernel.core.sources.manifest",
    "ManifestError": "kernel.core.sources.manifest",
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
    from collections.abc import Callable

    from .commands import CliCommand, CommandRegistry
    from .commands import Context as _CommandsContext
    from .core.context import PluginContext as _CoreContext
    from .core.hooks import Callback
    from .core.kernel import Kernel as _CoreKernel
    from .core.plugin_manager import KernelPluginManager, PluginHandle
    from .core.sources.manifest import EnvVar, Manifest, ManifestError
    from .events import EventBus
    from .gateway.base import BasePlatformAdapter
    from .gateway.registry import PlatformRegistry
    from .gateway.runner import Gateway
    from .gateway.service import Context as _PlatformsContext
    from .llm import Context as _LlmContext
    from .messages import Context as _MessagesContext
    from .messages import Inbox
    from .providers.context_engine import ContextEngine
    from .providers.image_gen import ImageGenProvider
    from .providers.manager import ProviderManager
    from .providers.memory import MemoryProvider
    from .providers.service import Context as _ProvidersContext
    from .providers.slots import Provider, SlotError, SlotRegistry
    from .providers.video_gen import VideoGenProvider
    from .providers.web_search import WebSearchProvider
    from .registrations import BrowserProvider, DashboardAuthProvider, SecretSource
    from .registrations.registry import Registrations
    from .registrations.service import Context as _RegistrationsContext
    from .skills import Context as _SkillsContext
    from .skills import SkillRegistry
    from .surfaces.speech import Speech
    from .surfaces.speech.providers import TranscriptionProvider, TTSProvider
    from .tools import Tool, ToolRegistrationError
    from .tools.decisions import ApprovalRequest, terminal_approver
    from .tools.middleware import MiddlewareRegistry
    from .tools.registry import ToolRegistry
    from .tools.service import Context as _ToolsContext

    # What a type checker sees: the kernel and the context with the members of the built-in services
    # (kernel.defaults).  At run time they are the core's classes, whose service members are attached
    # on first use, per kernel; these declarations add nothing else.

    class Kernel(_CoreKernel):
        tools: ToolRegistry
        middleware: MiddlewareRegistry
        commands: CommandRegistry
        cli_commands: dict[str, CliCommand]
        skills: SkillRegistry
        providers: ProviderManager
        slots: SlotRegistry
        events: EventBus
        inbox: Inbox
        inject_message: Callable[..., bool]
        platforms: PlatformRegistry
        gateway: Gateway
        speech: Speech
        registrations: Registrations

    class PluginContext(
        _ToolsContext,
        _CommandsContext,
        _SkillsContext,
        _ProvidersContext,
        _MessagesContext,
        _LlmContext,
        _PlatformsContext,
        _RegistrationsContext,
        _CoreContext,
    ): ...
else:
    from .core.kernel import Kernel


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
