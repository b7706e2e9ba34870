"""``k.pm``: pluggy's ``PluginManager`` as the kernel's one registry.

Every plugin of a kernel is registered here under its plugin name, Hermes-style
ones included, and every ``HookCaller`` runs the kernel's hook engine
(:mod:`kernel.core.hooks`).  Registering, unregistering or blocking through this
object is the same as doing it through the kernel.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pluggy
from pluggy import HookCaller, HookImpl, PluginValidationError

from ..hookspecs import PROJECT_NAME
from .hooks import HookEngine, _Monitor
from .registry import PluginError, PluginRegistry, file_dir, source_dir

__all__ = ["KernelPluginManager", "PluginError", "PluginHandle"]

#: ``load(group, name)``: a Hermes entry-point group loaded as the kernel loads it, the number of
#: plugins loaded; ``None`` for a group that is not the kernel's.
GroupLoader = Callable[[str, "str | None"], "int | None"]


def _no_groups(group: str, name: str | None) -> int | None:
    return None


class PluginHandle:
    """What ``k.pm`` holds for a plugin that has no module or object of its own.

    A plugin whose entry point is a function or a class, and a surface declared
    in ``config.yaml``, is registered as one of these; its Hermes-style
    callbacks are hook implementations of this object.
    """

    __slots__ = ("__name__",)

    def __init__(self, name: str) -> None:
        self.__name__ = name

    def __repr__(self) -> str:
        return f"<hermes plugin {self.__name__!r}>"


class KernelPluginManager(pluggy.PluginManager):
    """pluggy's manager whose plugins are the kernel's plugins and whose calls run the kernel's engine.

    It is given the kernel's :class:`~kernel.core.registry.PluginRegistry` (the
    records) and, once the loader exists, :attr:`load_group` for the Hermes
    entry-point groups; it knows nothing else of the kernel.
    """

    def __init__(self, registry: PluginRegistry) -> None:
        super().__init__(PROJECT_NAME)
        self.registry = registry
        self.engine: HookEngine  # set by the kernel right after
        self.load_group: GroupLoader = _no_groups
        # The name each object add_object put in was given: whether an object is registered is then
        # one lookup, not a scan of every plugin (a load of n plugins would be quadratic).
        self._names_of: dict[int, str] = {}

    # -- calling ---------------------------------------------------------------

    def _hookexec(
        self, hook_name: str, methods: Sequence[HookImpl], kwargs: Mapping[str, object], firstresult: bool
    ) -> Any:
        # pluggy hands each call a list of its own (a copy of the caller's).
        return self.engine.execute(
            hook_name, methods if type(methods) is list else list(methods), kwargs, firstresult
        )

    def add_hookcall_monitoring(
        self, before: Callable[..., None], after: Callable[..., None]
    ) -> Callable[[], None]:
        """As pluggy's: ``before``/``after`` see every hook call of the kernel, whatever made it."""
        monitor = _Monitor(before, after)
        engine = self.engine
        engine.monitors.append(monitor)
        engine.monitoring_changed()

        def undo() -> None:
            monitor.alive = False
            engine.monitoring_changed()

        return undo

    # -- registering ----------------------------------------------------------

    def register(self, plugin: object, name: str | None = None) -> str | None:
        """Register a pluggy plugin object with the kernel (as pluggy does, plus the kernel's record).

        A plugin registered before ``k.load()`` is adopted by the load, not
        loaded twice; after ``k.shutdown()`` this raises ``PluginError``.
        """
        registry = self.registry
        registry.refuse_if_closed(name or "?")
        if plugin is None:
            return None
        name = name or self.unique_name(plugin)
        if self.is_blocked(name):
            return None
        with registry.lock:
            record = registry.reserve(name, "pluggy", source_dir(plugin) or file_dir(plugin))
            try:
                self.add_object(plugin, name, scan=True)
            except BaseException:
                registry.discard(name)
                raise
            record.obj = plugin
            record.enabled = True
            record.callbacks = self.engine.adopt(plugin)
            registry.note_unknown_hooks(record, self.has_spec)
            registry.joined(name)
            return name

    def has_spec(self, hook_name: str) -> bool:
        """Whether hook ``hook_name`` has a specification."""
        caller = getattr(self.hook, hook_name, None)
        return caller is not None and caller.has_spec()

    def unique_name(self, plugin: object) -> str:
        """:meth:`get_canonical_name`, with ``#2``, ``#3``... when another object has that name."""
        base = self.get_canonical_name(plugin)
        name, n = base, 1
        while self._name2plugin.get(name) is not None and self._name2plugin[name] is not plugin:
            n += 1
            name = f"{base}#{n}"
        return name

    def get_canonical_name(self, plugin: object) -> str:
        """A module's ``__name__``, else the qualified name of the object's class; never an address."""
        name = getattr(plugin, "__name__", None)
        if isinstance(name, str) and name:
            return name
        cls = plugin if inspect.isclass(plugin) else type(plugin)
        return f"{cls.__module__}.{cls.__qualname__}"

    def add_object(self, plugin: object, name: str, scan: bool) -> None:
        """Put ``plugin`` in the registry under ``name``: with pluggy's impl scan, or bare (no impls)."""
        if scan:
            pluggy.PluginManager.register(self, plugin, name)
        else:
            if name in self._name2plugin:
                raise ValueError(f"Plugin name already registered: {name}={plugin}")
            if self.holds(plugin):
                raise ValueError(f"Plugin already registered under a different name: {name}={plugin}")
            self._name2plugin[name] = plugin
        self._names_of[id(plugin)] = name

    def holds(self, plugin: object) -> bool:
        """Whether ``plugin`` is registered (under any name)."""
        name = self._names_of.get(id(plugin))
        # An entry whose object left (pluggy's unregister, a block) is stale: the name says so.
        return name is not None and self._name2plugin.get(name) is plugin

    def swap_object(self, name: str, old: object, new: object, scan: bool) -> bool:
        """Register ``new`` under ``name`` in place of ``old`` (a handle without impls).

        ``False``, ``old`` kept, when ``new`` is another plugin's object already
        (with ``scan``, that ``ValueError`` is raised); any other failure keeps
        ``old`` and is raised.
        """
        del self._name2plugin[name]
        try:
            self.add_object(new, name, scan)
        except ValueError:  # the object is another plugin's already
            self._name2plugin[name] = old
            if scan:
                raise
            return False
        except BaseException:
            self._name2plugin[name] = old
            raise
        return True

    def note_distribution(self, plugin: object, dist: Any) -> None:
        """Remember the distribution ``plugin`` came from (``list_plugin_distinfo``)."""
        self._plugin_distinfo.append((plugin, dist))

    def remove_object(self, plugin: object) -> None:
        """Take ``plugin`` out of the registry, with its impls, when it is there (nothing else)."""
        if self.holds(plugin):
            pluggy.PluginManager.unregister(self, plugin)
            self._names_of.pop(id(plugin), None)

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any | None:
        """Unregister a plugin and everything it registered with the kernel (tools, commands...)."""
        if name is None:
            assert plugin is not None, "one of name or plugin needs to be specified"
            name = self.get_name(plugin)
            assert name is not None, "plugin is not registered"
        registered = self._name2plugin.get(name)
        if plugin is not None and registered is not None and registered is not plugin:
            raise ValueError(f"Plugin name {name!r} and plugin {plugin!r} do not agree")
        if registered is None:
            return None
        self.registry.drop(name)
        if self._name2plugin.get(name) is registered:  # an object the kernel holds no record of
            pluggy.PluginManager.unregister(self, registered)
        return registered

    def set_blocked(self, name: str) -> None:
        """Block plugin ``name`` as a whole: unloaded now if loaded, never loaded later."""
        self.registry.block(name)
        if self._name2plugin.get(name) is not None:
            pluggy.PluginManager.unregister(self, name=name)
        self._name2plugin[name] = None

    def unblock(self, name: str) -> bool:
        """As pluggy's; the blocked plugin's record goes too, so that the name can be registered again."""
        if not super().unblock(name):
            return False
        self.registry.forget_blocked(name)
        return True

    def load_setuptools_entrypoints(self, group: str, name: str | None = None) -> int:
        """As pluggy's; plugins of the Hermes groups load as the kernel loads them (``register(ctx)``)."""
        self.registry.refuse_if_closed(name or group)
        loaded = self.load_group(group, name)
        if loaded is not None:
            return loaded
        return super().load_setuptools_entrypoints(group, name)

    # -- specs -----------------------------------------------------------------

    def add_hookspecs(self, module_or_class: Any) -> None:
        """As pluggy's, and as pluggy raises ``PluginValidationError`` for an existing impl that does
        not fit the new spec; the kernel also disables that impl (every other impl still runs)."""
        self.add_hookspecs_for(module_or_class, strict=True)

    def add_hookspecs_for(self, module_or_class: Any, *, strict: bool) -> None:
        """Add the specs; with ``strict=False`` an unfitting impl is only disabled (``ctx.add_hookspecs``)."""
        names, problems = [], []
        for attr in dir(module_or_class):
            opts = self.parse_hookspec_opts(module_or_class, attr)
            if opts is None:
                continue
            caller: HookCaller | None = getattr(self.hook, attr, None)
            if caller is None:
                setattr(self.hook, attr, HookCaller(attr, self._hookexec, module_or_class, opts))
            else:
                caller.set_specification(module_or_class, opts)
                for impl in caller.get_hookimpls():
                    try:
                        self._verify_hook(caller, impl)
                    except PluginValidationError as exc:
                        problems.append(exc)
                        self.engine.misfit(attr, impl, exc)
            names.append(attr)
        if not names:
            raise ValueError(f"did not find any {self.project_name!r} hooks in {module_or_class!r}")
        self.engine.respecified(names)
        self.registry.hooks_specified(names)
        if strict and problems:
            raise problems[0]

    def _verify_hook(self, hook: HookCaller, hookimpl: HookImpl) -> None:
        cb = self.engine.callback_of(hookimpl)
        if cb is not None and not cb.native:
            return  # Hermes-style callbacks take every argument by keyword; nothing to check
        super()._verify_hook(hook, hookimpl)
