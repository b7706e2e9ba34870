"""The provider slots as a service: model providers, memory, context engine, image, video, web search.

It joins a kernel when a plugin offers a provider (``ctx.register_memory_provider``,
Hermes' ``register_provider`` at import, a pluggy ``register_*_providers``
hook, an entry point naming a provider class, a plugin module that only defines
a ``MemoryProvider`` or ``ContextEngine`` subclass), when ``k.providers`` or
``k.slots`` is first read, or at ``load()`` when ``config.yaml`` has a provider
section.  See :mod:`kernel.core.services` for how a service attaches.
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from .. import hookspecs
from ..core.api import kernel_of, on_rollback, record_of
from ..core.callbacks import describe
from ..core.context import PluginContext, ServiceContext, _live
from ..core.plugin_manager import PluginError
from ..core.services import serviceimpl
from .manager import SLOTS as PROVIDER_SLOTS
from .manager import ProviderManager
from .slots import REPLACING_SLOTS, SLOTS, SlotError, SlotRegistry, conform

if TYPE_CHECKING:
    from ..core.kernel import Kernel
    from ..core.records import _Record


class Context(ServiceContext):
    """The ``ctx.register_*_provider`` members this service adds to :class:`PluginContext`."""

    @_live
    def register_memory_provider(self, provider: Any) -> None:
        """Offer a :class:`~kernel.providers.MemoryProvider`; ``memory.provider`` selects one."""
        _offer(self, "memory", provider)

    @_live
    def register_context_engine(self, engine: Any) -> None:
        """Offer a :class:`~kernel.providers.ContextEngine`; ``context.engine`` selects one."""
        _offer(self, "context_engine", engine)

    @_live
    def register_image_gen_provider(self, provider: Any) -> None:
        """Offer an :class:`~kernel.providers.ImageGenProvider`; ``image_gen.provider`` selects one."""
        _offer(self, "image_gen", provider)

    @_live
    def register_model_provider(self, profile: Any) -> None:
        """Offer a :class:`~kernel.providers.ProviderProfile` (like ``register_provider``)."""
        _offer(self, "model_provider", profile)

    @_live
    def register_web_search_provider(self, provider: Any) -> None:
        """Offer a :class:`~kernel.providers.WebSearchProvider`; ``web_search.provider`` selects one."""
        _offer(self, "web_search", provider)

    @_live
    def register_video_gen_provider(self, provider: Any) -> None:
        """Offer a :class:`~kernel.providers.VideoGenProvider`; ``video_gen.provider`` selects one."""
        _offer(self, "video_gen", provider)

    @_live
    def register_tts_provider(self, provider: Any) -> None:
        """Offer a text-to-speech provider; ``tts.provider`` may name it (command providers win)."""
        _offer(self, "tts", provider)

    @_live
    def register_transcription_provider(self, provider: Any) -> None:
        """Offer a speech-to-text provider; ``stt.provider`` may name it (command providers win)."""
        _offer(self, "transcription", provider)


def _offer(ctx: PluginContext, slot: str, provider: Any) -> None:
    kernel, record = kernel_of(ctx), record_of(ctx)
    offer_provider(kernel, slot, provider, record.name)
    on_rollback(ctx, lambda: kernel.slots.remove_plugin(record.name))
    on_rollback(ctx, lambda: kernel.providers.catalog.remove_plugin(record.name))


def offer_provider(kernel: Kernel, slot: str, provider: Any, plugin: str) -> None:
    """Put ``provider`` into ``slot`` for ``plugin``; a refusal is a warning on the plugin."""
    record = kernel.host.records.get(plugin)
    if slot == "model_provider":
        problem = kernel.providers.catalog.add(provider, plugin, record.source if record else "runtime")
    else:
        spec = PROVIDER_SLOTS.get(slot)
        base = spec[3] if spec is not None else None
        offered = type(provider).__name__
        bases = {s: b for s, (_group, _key, _default, b) in PROVIDER_SLOTS.items() if b is not None}
        other = next((b for s, b in bases.items() if s != slot and isinstance(provider, b)), None)
        problem = None
        if base is not None and other is not None and not isinstance(provider, base):
            problem = (
                f"plugin '{plugin}' offered a {other.__name__} ({offered}) as a {slot} provider; ignored"
            )
        elif base is not None:
            provider, missing = conform(provider, base)
            if provider is None:
                problem = (
                    f"plugin '{plugin}' offered {offered} as a {slot} provider, but it is not a "
                    f"{base.__name__} and lacks {', '.join(missing)}; ignored"
                )
        if problem is None:
            try:
                if slot in REPLACING_SLOTS:
                    _replace(kernel, slot, provider, plugin)
                else:
                    kernel.slots.add(slot, provider, plugin)
            except SlotError as exc:
                problem = str(exc)
    if problem is not None:
        if record is not None:
            record.warnings.append(problem)
        kernel.log.error("slot_conflict", slot=slot, plugin=plugin, error=problem)


def _replace(kernel: Kernel, slot: str, provider: Any, plugin: str) -> None:
    """Put ``provider`` in ``slot``; one of the same name goes, as in Hermes' registries (logged)."""
    replaced = kernel.slots.put(slot, provider, plugin)
    if replaced is None:
        return
    kernel.log.warning(
        f"{slot}_provider_replaced", provider=replaced.name, plugin=plugin, replaced_plugin=replaced.plugin
    )
    record = kernel.host.records.get(plugin)
    if replaced.plugin != plugin and record is not None:
        record.warnings.append(
            f"{slot} provider '{replaced.name}' of plugin '{replaced.plugin}' was replaced by plugin "
            f"'{plugin}''s provider of the same name (as Hermes replaces it); rename one to keep both"
        )


def fire_slots(kernel: Kernel, only: str | None) -> None:
    """Ask the slot-hook callbacks (of plugin ``only``, or all) for their providers, each once."""
    for hook, slot in hookspecs.SLOT_HOOKS.items():
        chain = kernel.host.engine.chains.get(hook)  # its live callbacks, in call order
        for cb in chain.callbacks if chain is not None else ():
            if cb in kernel.providers.slots_asked or (only is not None and cb.plugin != only):
                continue
            kernel.providers.slots_asked.add(cb)
            kernel.host.engine.execute(
                hook, [cb.impl], {"register": _slot_register(kernel, slot, cb.plugin)}, False
            )


def _slot_register(kernel: Kernel, slot: str, plugin: str) -> Any:
    def register(provider: Any) -> None:
        offer_provider(kernel, slot, provider, plugin)

    return register


@serviceimpl
def service_attach(kernel: Kernel) -> None:
    kernel.host.provide(slots=SlotRegistry())
    providers = ProviderManager(kernel)
    kernel.host.provide(providers=providers)
    kernel.host.lend_locks(providers._lock, providers.catalog._lock)


@serviceimpl
def service_register_object(kernel: Kernel, record: _Record, target: Any) -> bool | None:
    """A provider class (an entry point naming it), or a module that only defines one (Hermes' memory
    and context-engine plugins may): instantiate it and offer it to its slot."""
    if inspect.ismodule(target):
        return _register_module(kernel, record, target)
    if not inspect.isclass(target):
        return None
    bases = {slot: spec[3] for slot, spec in PROVIDER_SLOTS.items() if spec[3] is not None}
    slot = next((slot for slot, base in bases.items() if issubclass(target, base)), None)
    if slot is None and record.kind in PROVIDER_SLOTS:
        slot = record.kind
    if slot is None:
        return None
    offer_provider(kernel, slot, target(), record.name)
    return True


# The slots whose plugins Hermes may write as a module with only a provider class (no register()).
CLASS_ONLY_SLOTS = ("memory", "context_engine")


def _register_module(kernel: Kernel, record: _Record, module: ModuleType) -> bool | None:
    """The one concrete provider class ``module`` defines (in itself or a submodule), instantiated."""
    slots = [record.kind] if record.kind in CLASS_ONLY_SLOTS else list(CLASS_ONLY_SLOTS)
    found = [(slot, cls) for cls in _own_classes(module) for slot in slots if issubclass(cls, _base(slot))]
    if not found:
        return None
    if len(found) > 1:
        names = ", ".join(sorted(f"{cls.__qualname__} ({slot})" for slot, cls in found))
        raise PluginError(
            f"{module.__name__} has no register(ctx) and defines several provider classes ({names}); "
            "add a register(ctx) that offers one"
        )
    slot, cls = found[0]
    try:
        provider = cls()
    except Exception as exc:
        raise PluginError(
            f"{module.__name__} has no register(ctx), so its {_base(slot).__name__} is created as "
            f"{cls.__qualname__}() (with no arguments), which failed: {describe(exc)}"
        ) from exc
    offer_provider(kernel, slot, provider, record.name)
    return True


def _base(slot: str) -> type:
    return cast(type, PROVIDER_SLOTS[slot][3])


def _own_classes(module: ModuleType) -> list[type]:
    """Concrete classes in ``module``'s namespace defined by the module or its own submodules."""
    name = module.__name__
    out = []
    for value in list(vars(module).values()):
        if not inspect.isclass(value) or inspect.isabstract(value):
            continue
        home = getattr(value, "__module__", None)
        if isinstance(home, str) and (home == name or home.startswith(name + ".")) and value not in out:
            out.append(value)
    return out


@serviceimpl(tryfirst=True)
def service_load_finished(kernel: Kernel) -> None:
    fire_slots(kernel, None)
    kernel.providers.register_tools()


@serviceimpl
def service_plugin_added(kernel: Kernel, name: str) -> None:
    fire_slots(kernel, name)


@serviceimpl
def service_plugin_owns(kernel: Kernel, record: _Record) -> bool:
    return kernel.providers.catalog.has_plugin(record.name) or any(
        p.plugin == record.name for slot in SLOTS for p in kernel.slots.providers(slot).values()
    )


@serviceimpl
def service_plugin_unloaded(kernel: Kernel, record: _Record) -> None:
    kernel.providers.catalog.remove_plugin(record.name)
    kernel.slots.remove_plugin(record.name)


@serviceimpl
def service_shutdown(kernel: Kernel) -> None:
    kernel.providers.close()
