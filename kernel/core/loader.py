"""Loading plugins: import, ``register()``, roll-back and unloading (the kernel's :class:`Loader`).

The :class:`~kernel.core.kernel.Kernel` holds one :class:`Loader`, given the
parts it works on: the plugin registry (records), ``k.pm``, the hook engine and
the services, which it tells what happened through the service hooks
(:mod:`kernel.core.services`).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import inspect
import os
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..hookspecs import PROJECT_NAME
from . import watchdog
from .context import ContextKernel, PluginContext, loading, roll_back
from .hooks import describe, plugin_order, propagates, safe_text
from .plugin_manager import PluginError, PluginHandle
from .records import (
    BLOCKED,
    DISABLE_VARIABLE,
    DISABLED_FOR_RUN,
    NO_PLUGINS_VARIABLE,
    SOURCE_RANK,
    Choice,
    PluginInfo,
    SurfaceError,
    _Record,
    not_enabled_error,
)
from .registry import PluginRegistry, source_dir
from .sources.discovery import ENTRY_POINT_GROUPS, Candidate, scan_entry_points

if TYPE_CHECKING:
    from ..base.environ import KernelEnviron
    from ..base.log import LazyLogger
    from .hooks import HookEngine
    from .plugin_manager import KernelPluginManager
    from .services import ServiceManager

T = TypeVar("T")

_namespaces_in_use: set[str] = set()
_namespace_lock = threading.Lock()


class LoaderHost(ContextKernel, Protocol):
    """What the loader uses of the kernel that holds it (its public ``load`` and ``plugin_choice``);
    it hands the kernel on to each plugin's context and to the service hooks."""

    def load(self) -> list[PluginInfo]: ...
    def plugin_choice(self) -> Choice: ...


class Loader:
    """Imports, registers and unloads the plugins of one kernel, given the parts of it that it uses.

    ``kernel`` is what a plugin's context and the service hooks are given;
    the loader calls only its public :meth:`~kernel.core.kernel.Kernel.load`
    and :meth:`~kernel.core.kernel.Kernel.plugin_choice`.
    """

    def __init__(
        self,
        kernel: LoaderHost,
        registry: PluginRegistry,
        pm: KernelPluginManager,
        engine: HookEngine,
        services: ServiceManager,
        *,
        log: LazyLogger,
        environ: KernelEnviron,
        debug: bool,
        namespace: str,
        register_timeout: float | None,
        lendable: list[watchdog.SharedRLock],
        closers: list[tuple[str, Callable[[], None]]],
    ) -> None:
        self._kernel = kernel
        self._registry = registry
        self._records = registry.records
        self._lock = registry.lock
        self.pm = pm
        self._hooks = engine
        self._services = services
        self.log = log
        self.environ = environ
        self.debug = debug
        self._namespace = namespace
        self._register_timeout = register_timeout
        # Locks of attached services that a loader thread borrows along with the kernel's (each_bounded).
        self._lendable = lendable
        self._closers = closers
        #: Whether the kernel's load() has begun: a plugin that joins later is announced (:meth:`joined`).
        self.loaded = False
        #: Set once the deferred (model provider) plugins were asked for: load() then imports them all.
        self.deferred_wanted = False
        # Whether the per-plugin DEBUG records are made (each_bounded asks the logger once per list).
        self._debugging = True
        #: Whether unloading a plugin takes its modules out of ``sys.modules`` (a shutdown takes the
        #: whole namespace out at once instead: :func:`release_namespace`).
        self.evict_each = True

    def load_candidate(self, cand: Candidate, disabled: Choice) -> None:
        existing = self._records.get(cand.key)
        if existing is not None:
            # Registered on k.pm before load() (or loaded from its entry point already): adopted once.
            existing.path = existing.path or cand.path
            existing.version = existing.version or cand.version
            existing.description = existing.description or cand.description
            self.log.debug("plugin_adopted", plugin=cand.key, source=existing.source, found_in=cand.source)
            return
        record = _Record.from_candidate(cand)
        self._records[record.name] = record
        manifest = record.manifest
        if self._debugging:
            self.log.debug(
                "plugin_found",
                key=record.name,
                name=manifest.name if manifest else record.name,
                kind=record.kind,
                source=record.source,
                path=cand.where,
            )
        for warning in record.warnings:
            self.log.warning("manifest_warning", plugin=record.name, detail=warning)
        if manifest is not None and manifest.extra:
            self.log.debug("manifest_unknown_fields", plugin=record.name, fields=sorted(manifest.extra))
        if record.error is not None:
            self.log.warning("plugin_invalid", plugin=record.name, error=record.error)
            return
        reason, missing = self.skip_reason(record, disabled)
        if reason is not None:
            record.error = reason
            if missing:
                self.log.warning("plugin_missing_env", plugin=record.name, missing=missing)
            else:
                self.log.debug("skip", plugin=record.name, reason=record.error)
            return
        if record.is_model_provider:
            # Imported on the first provider lookup (k.providers), not at start-up.
            record.enabled = True
            record.deferred = True
            self.log.debug(
                "plugin_deferred", plugin=record.name, reason="model provider: loaded on first lookup"
            )
            return
        if cand.entry_point is not None:
            entry_point = cand.entry_point
            self.activate(record, entry_point.load)
        else:
            self.activate(record, lambda: self._import_directory(record))

    def skip_reason(self, record: _Record, choice: Choice) -> tuple[str | None, list[str]]:
        """Why ``record``'s plugin is not to be imported (blocked, disabled, not enabled, missing
        variables), and the missing variables; ``(None, [])`` when it is to be.  Imports nothing."""
        manifest = record.manifest
        if self.pm.is_blocked(record.name):
            return BLOCKED, []
        if choice.none:
            return f"{DISABLED_FOR_RUN} (--no-plugins / {NO_PLUGINS_VARIABLE})", []
        given = choice.off_for_run(record)
        if given is not None:
            return f"{DISABLED_FOR_RUN} (--disable / {DISABLE_VARIABLE}: '{given}')", []
        if record.name in choice or (manifest is not None and manifest.name in choice):
            return "disabled via config (plugins.disabled)", []
        if choice.unlisted(record):
            return not_enabled_error(record.name, choice.opt_in if choice.enabled is None else None), []
        if manifest is not None:
            missing = [v.name for v in manifest.requires_env if not self.environ.get(v.name)]
            if missing:
                return f"Plugin {record.name} disabled (missing: {', '.join(missing)})", missing
        return None, []

    def activate(self, record: _Record, load_target: Any) -> str | None:
        """Import and register one plugin; on any failure roll back and return the error.

        On a loader thread (see :meth:`each_bounded`) the plugin may be given
        up while it runs; then nothing here touches the kernel any more.
        """
        with watchdog.settled() as live:
            if not live:
                return "given up (plugins.register_timeout)"
        activation = _Activation(record, self._services.context_class(self._kernel, record))
        ctx = activation.ctx
        with watchdog.working(activation):
            try:
                # Its object in k.pm until the import tells whether it has one of its own.
                record.obj = PluginHandle(record.name)
                self.pm.add_object(record.obj, record.name, scan=False)
                # Hermes-style module-level calls (providers.register_provider,
                # tools.registry.registry, ...) made while it loads are its own.
                entry_point = record.entry_point
                preloaded = entry_point is not None and entry_point.module in sys.modules
                with loading(ctx):
                    target = load_target()
                    if preloaded and self._registers_on_import(target):
                        # Imported by an earlier kernel: what it registered on import went there.
                        target = importlib.reload(target)
                    if record.path is None:
                        record.path = source_dir(target)
                    activation.phase = "register"
                    self._register_target(record, target, ctx)
            except BaseException as exc:
                with watchdog.settled() as live:
                    if not live:
                        return record.error
                    roll_back(ctx)
                    self._release(record)
                    if record.module_name:
                        _evict_modules(record.module_name)
                    if propagates(exc):
                        raise
                    record.error = _load_error(activation.phase, exc)
                    record.enabled = False
                    self.log.warning(
                        "plugin_load_failed",
                        plugin=record.name,
                        error=record.error,
                        exc_info=self.debug or None,
                    )
                    return record.error
            with watchdog.settled() as live:
                if not live:
                    return record.error
                record.enabled = True
                record.error = None
                self._check_declarations(record)
                if self._debugging:
                    self.log.debug(
                        "plugin_registered",
                        plugin=record.name,
                        tools=list(record.tools),
                        hooks=list(dict.fromkeys(cb.hook for cb in record.callbacks)),
                        commands=list(record.commands),
                    )
        return None

    def each_bounded(self, items: Iterable[T], fn: Callable[[T], None]) -> None:
        """``fn(item)`` for each item (plugins to load), each bounded by ``plugins.register_timeout``.

        They run on a loader thread that borrows the kernel's locks; one that
        overruns is given up (:meth:`_give_up`) and the next go on.
        """
        import logging  # made with the kernel's logging, which a load makes first

        locks = (self._lock, self._hooks.lock, *self._lendable)
        # Whether the per-plugin DEBUG records are wanted, asked once for the whole list.
        self._debugging = self.log.isEnabledFor(logging.DEBUG)
        try:
            watchdog.run_each(items, fn, timeout=self._register_timeout, on_overran=self._give_up, lend=locks)
        finally:
            self._debugging = True

    def _give_up(self, item: Any, stack: list[Any]) -> None:
        """A load that overran: each plugin it was activating (innermost first) is failed and undone,
        dead first so that its context refuses from now on; its code may go on running."""
        if not stack:
            self.log.warning("plugin_load_overran", item=describe(item), timeout=self._register_timeout)
        for activation in reversed(stack):
            record = activation.record
            self._release(record)
            roll_back(activation.ctx)
            if record.module_name:
                _evict_modules(record.module_name)
            what = "its import" if activation.phase == "import" else "register()"
            record.error = (
                f"{what} did not return within {self._register_timeout:g} s (plugins.register_timeout); "
                "not loaded — its code may still be running in the background: fix the plugin, or raise "
                "the timeout in config.yaml"
            )
            record.enabled = False
            self.log.warning("plugin_load_failed", plugin=record.name, error=record.error)

    def _register_target(self, record: _Record, target: Any, ctx: PluginContext) -> None:
        if inspect.isclass(target):
            # A provider class, usually: a service that knows the kind takes it.
            self._services.attach_answering("service_register_object")
            hook = self._services.hook
            if not hook.service_register_object(kernel=self._kernel, record=record, target=target):
                raise PluginError(
                    f"the entry point names the class {target.__module__}.{target.__qualname__}, which is "
                    "not a provider the kernel knows (MemoryProvider, ContextEngine, ImageGenProvider, "
                    "...); point it at a register(ctx) function instead"
                )
            return
        register: Callable[..., Any] | None
        if inspect.isfunction(target) or inspect.ismethod(target):
            register, native = target, False
        else:
            register = getattr(target, "register", None)
            register = register if callable(register) else None
            native = self._has_hookimpls(target)
        if register is None and not native:
            if record.is_model_provider or self._registered_anything(record):
                # A module that registered itself when imported (Hermes allows it).
                self.log.debug("plugin_self_registered", plugin=record.name)
                self._take_object(record, target, scan=False)
                return
            if inspect.ismodule(target):
                # A module that only defines a provider class (Hermes instantiates it): a service may take it.
                self._services.attach_answering("service_register_object")
                hook = self._services.hook
                if hook.service_register_object(kernel=self._kernel, record=record, target=target):
                    self._take_object(record, target, scan=False)
                    return
            where = getattr(target, "__file__", None) or (
                record.path / "__init__.py" if record.path else repr(target)
            )
            raise PluginError(f"no register(ctx) function and no @hookimpl functions in {where}")
        if register is not None:
            _call_register(register, ctx, self._hooks.run_sync)
        if not (inspect.isfunction(target) or inspect.ismethod(target)):
            self._take_object(record, target, scan=native)

    def _take_object(self, record: _Record, target: Any, *, scan: bool) -> None:
        """Make ``target`` (the plugin's module or object) its object in ``k.pm``, with its ``@hookimpl``s.

        The callbacks it registered meanwhile move from its handle to it.  A
        module that is another plugin's object already keeps the handle.
        """
        handle = record.obj
        if target is handle or not self.pm.swap_object(record.name, handle, target, scan):
            return
        record.obj = target
        for cb in record.callbacks:
            if cb.impl.plugin is handle:
                cb.impl.plugin = target  # type: ignore[misc]
        if scan:
            known = set(record.callbacks)
            record.callbacks.extend(cb for cb in self._hooks.adopt(target) if cb not in known)
            self._registry.note_unknown_hooks(record, self.pm.has_spec)

    def add_surface(
        self,
        name: str,
        kind: str,
        setup: Callable[[PluginContext], None],
        *,
        source: str = "config",
        path: Path | None = None,
        description: str = "",
        close: Callable[[], None] | None = None,
    ) -> _Record:
        """Add a surface record (see :mod:`kernel.surfaces`): ``setup(ctx)`` registers what it offers.

        It is listed with the plugins and isolated like one: a ``setup`` that
        raises leaves the record with its error and nothing registered.
        ``close`` runs at shutdown, before the record is dropped.
        """
        with self._lock:
            if name in self._records:
                raise PluginError(f"'{name}' is already used by a plugin from {self._records[name].source}")
            record = _Record(name=name, source=source, path=path, kind=kind, description=description)
            self._registry.add(record)
            if close is not None:
                self._closers.append((name, close))
            self.activate(record, lambda: setup)
            return record

    def _registers_on_import(self, target: Any) -> bool:
        """A module that has neither ``register`` nor hookimpls: it can only register as it is imported."""
        return (
            inspect.ismodule(target)
            and not callable(getattr(target, "register", None))
            and not self._has_hookimpls(target)
        )

    def _registered_anything(self, record: _Record) -> bool:
        return bool(
            record.tools
            or record.callbacks
            or record.commands
            or record.skills
            or record.cli_commands
            or record.middleware
            or record.platforms
            or any(self._services.hook.service_plugin_owns(kernel=self._kernel, record=record))
        )

    def _has_hookimpls(self, obj: Any) -> bool:
        if inspect.ismodule(obj):
            # pluggy's marker is an attribute on the function; skip the
            # per-attribute parse for modules that carry none.
            marker = f"{PROJECT_NAME}_impl"
            if not any(hasattr(value, marker) for value in vars(obj).values() if callable(value)):
                return False
        for attr in dir(obj):
            try:
                if self.pm.parse_hookimpl_opts(obj, attr) is not None:
                    return True
            except Exception:  # noqa: S112 - an attribute that cannot be read is not a hookimpl
                continue
        return False

    def _import_directory(self, record: _Record) -> types.ModuleType:
        assert record.path is not None
        folder = os.fspath(record.path)
        init = os.path.join(folder, "__init__.py")
        namespace = self.namespace_module()
        self._registry.claim_slug(record)
        module_name = f"{self._namespace}.{record.slug}"
        import importlib.util  # with the first plugin folder imported: a listing imports none

        spec = importlib.util.spec_from_file_location(module_name, init, submodule_search_locations=[folder])
        if spec is None or spec.loader is None:
            raise PluginError(f"cannot import {init}")
        module = importlib.util.module_from_spec(spec)
        record.module_name = module_name
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        setattr(namespace, record.slug, module)
        return module

    def _check_declarations(self, record: _Record) -> None:
        manifest = record.manifest
        if manifest is None or manifest.path is None:
            return
        undeclared_tools = [t for t in record.tools if t not in manifest.provides_tools]
        if undeclared_tools:
            record.warnings.append(
                f"registers tool(s) not in provides_tools of {manifest.path}: {', '.join(undeclared_tools)}"
            )
        hooks = dict.fromkeys(cb.hook for cb in record.callbacks)
        undeclared_hooks = [h for h in hooks if h not in manifest.provides_hooks]
        if undeclared_hooks:
            record.warnings.append(
                f"registers hook(s) not in provides_hooks of {manifest.path}: {', '.join(undeclared_hooks)}"
            )
        if undeclared_tools or undeclared_hooks:
            self.log.warning(
                "manifest_drift", plugin=record.name, tools=undeclared_tools, hooks=undeclared_hooks
            )

    def load_deferred(self) -> None:
        """Import the deferred (model provider) plugins: bundled first, so that user ones override."""
        self.deferred_wanted = True
        self._kernel.load()
        with self._lock:
            deferred = [r for r in self._records.values() if r.deferred]
            deferred.sort(key=lambda r: (SOURCE_RANK.get(r.source, 4), plugin_order(r.name)))

            def load_one(record: _Record) -> None:
                record.deferred = False
                if record.entry_point is not None:
                    error = self.activate(record, record.entry_point.load)
                else:
                    error = self.activate(record, lambda: self._import_directory(record))
                if error is None:
                    self._services.hook.service_plugin_added(kernel=self._kernel, name=record.name)

            self.each_bounded(deferred, load_one)

    def plugin_submodule(self, plugin: str, name: str) -> types.ModuleType | None:
        """Import ``<plugin package>.<name>`` (e.g. a memory provider's ``cli.py``), or ``None``."""
        record = self._records.get(plugin)
        if record is None or record.module_name is None or record.path is None:
            return None
        if not (record.path / f"{name}.py").is_file():
            return None
        try:
            return importlib.import_module(f"{record.module_name}.{name}")
        except Exception as exc:
            self.log.warning(
                "plugin_submodule_failed", plugin=plugin, module=name, error=f"{type(exc).__name__}: {exc}"
            )
            return None

    def _release(self, record: _Record) -> None:
        """Take ``record``'s object out of ``k.pm``, with every callback it had."""
        if record.obj is not None:
            self.pm.remove_object(record.obj)
            record.obj = None
        self._hooks.forget(record.name)
        record.callbacks.clear()

    def unload(self, record: _Record) -> None:
        """Remove everything ``record`` registered; the record itself stays as it is."""
        self._release(record)
        self._services.hook.service_plugin_unloaded(kernel=self._kernel, record=record)
        for registered in (
            record.tools,
            record.commands,
            record.cli_commands,
            record.skills,
            record.middleware,
            record.platforms,
        ):
            registered.clear()
        if record.module_name and self.evict_each:
            _evict_modules(record.module_name)

    # -- plugins that join after load() ----------------------------------------------

    def implemented_hooks(self) -> set[str]:
        """The hooks that have a live callback now."""
        return {hook for hook, chain in self._hooks.chains.items() if chain.callbacks}

    def added(self, name: str) -> None:
        """Plugin ``name`` joined after load(): the services it needs join, and all are told."""
        self._services.attach_for_hooks(self.implemented_hooks())
        self._services.hook.service_plugin_added(kernel=self._kernel, name=name)

    def joined(self, name: str) -> None:
        """Plugin ``name`` was registered on ``k.pm``: announced as :meth:`added` once load() has begun."""
        if self.loaded:
            self.added(name)

    def load_entry_point_group(self, group: str, name: str | None) -> int | None:
        """``k.pm.load_setuptools_entrypoints`` for a Hermes group; ``None`` for any other group."""
        if group not in ENTRY_POINT_GROUPS:
            return None
        with self._lock:
            self._registry.refuse_if_closed(name or group)
            count = 0
            disabled = self._kernel.plugin_choice()
            wanted = [
                cand
                for cand in scan_entry_points(self.log, groups=(group,))
                if (name is None or cand.key == name)
                and cand.key not in self._records
                and not self.pm.is_blocked(cand.key)
            ]

            def load_one(cand: Candidate) -> None:
                nonlocal count
                self.load_candidate(cand, disabled)
                record = self._records[cand.key]
                if record.enabled:
                    count += 1
                    dist = getattr(cand.entry_point, "dist", None)
                    if dist is not None and record.obj is not None:
                        self.pm.note_distribution(record.obj, dist)

            with self._hooks.batch():
                self.each_bounded(wanted, load_one)
            if self.loaded:
                for cand_name in [r.name for r in self._records.values() if r.enabled]:
                    self.added(cand_name)
            return count

    def namespace_module(self) -> types.ModuleType:
        """The package module directory plugins are imported under, made on first use."""
        module = sys.modules.get(self._namespace)
        if module is None:
            module = types.ModuleType(self._namespace, "Directory plugins loaded by hermes-kernel.")
            module.__path__ = []
            sys.modules[self._namespace] = module
        return module


def claim_namespace() -> str:
    """A package name for a new kernel's directory plugins, unused by any other live kernel."""
    with _namespace_lock:
        base, n = "hermes_plugins", 1
        name = base
        while name in _namespaces_in_use:
            n += 1
            name = f"{base}_{n}"
        _namespaces_in_use.add(name)
        return name


def release_namespace(name: str) -> None:
    """Give ``name`` (from :func:`claim_namespace`) back, with its package module and its plugins'."""
    with _namespace_lock:
        _namespaces_in_use.discard(name)
    _evict_modules(name)


def _call_register(register: Any, ctx: PluginContext, run_sync: Any) -> None:
    code = getattr(register, "__code__", None)
    if code is not None and inspect.isfunction(register):
        takes_args = bool(code.co_argcount or code.co_kwonlyargcount or code.co_flags & inspect.CO_VARARGS)
    else:
        try:
            takes_args = bool(inspect.signature(register).parameters)
        except (TypeError, ValueError):
            takes_args = True
    result = register(ctx) if takes_args else register()
    if inspect.isawaitable(result):
        run_sync(result)


class _Activation:
    """A plugin being imported and registered: its record, its context, and how far it got."""

    __slots__ = ("ctx", "phase", "record")

    def __init__(self, record: _Record, ctx: PluginContext) -> None:
        self.record, self.ctx, self.phase = record, ctx, "import"


def _load_error(phase: str, exc: BaseException) -> str:
    if isinstance(exc, SurfaceError):
        return safe_text(str, exc)
    if isinstance(exc, SyntaxError):
        detail = f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    else:
        detail = describe(exc)
    if phase == "import":
        return f"import failed: {detail}"
    return f"register() failed: {detail}"


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Defer cyclic garbage collection while plugins load.

    Importing hundreds of modules creates many long-lived objects; letting
    the collector walk them again and again costs about a quarter of the
    load time.  Collection resumes (if it was on) as soon as loading ends.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _evict_modules(module_name: str) -> None:
    prefix = module_name + "."
    for name in [n for n in sys.modules if n == module_name or n.startswith(prefix)]:
        sys.modules.pop(name, None)
