"""How services attach to the core.

The core knows a service only by its :class:`Service` declaration: the module
that implements it, the kernel attributes and ``PluginContext`` members it
provides, and what asks for it at :meth:`Kernel.load` (a ``config.yaml``
section, an environment variable, a folder of the home, a hook a plugin
implements).  The module is imported the first time one of those is used, and
then registered, as pytest registers its built-in plugins, on the kernel's
service manager: a pluggy ``PluginManager`` whose hooks (:class:`ServiceHooks`)
are the moments of the kernel's lifecycle.  The list of built-in services is
:data:`kernel.defaults.BUILTIN_SERVICES`; the core never imports a service.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

from ..base.config import ConfigSchema
from .context import PluginContext

if TYPE_CHECKING:
    from ..base.environ import KernelEnviron
    from .records import _Record


class Kernel(Protocol):
    """The kernel as this module sees it (it sits below the kernel): what a service's declaration
    reads.  The service hooks are given the whole kernel, :class:`kernel.Kernel`."""

    @property
    def home(self) -> Path: ...
    @property
    def config(self) -> dict[str, Any]: ...
    @property
    def environ(self) -> KernelEnviron: ...


SERVICE_PROJECT = "hermes_kernel_service"
servicespec = pluggy.HookspecMarker(SERVICE_PROJECT)
serviceimpl = pluggy.HookimplMarker(SERVICE_PROJECT)


@dataclass(frozen=True)
class Service:
    """One service of the kernel, as the core sees it before (or without) importing it."""

    name: str
    #: The module with the service's ``@serviceimpl`` functions and its ``Context`` members.
    module: str
    #: Attributes of the kernel it sets when attached (``k.tools``); reading one attaches it.
    attributes: tuple[str, ...] = ()
    #: Members of ``PluginContext`` it contributes (``ctx.register_tool``), from ``module.Context``.
    context: tuple[str, ...] = ()
    #: ``config.yaml`` top-level keys whose presence attaches it at ``load()``.
    sections: tuple[str, ...] = ()
    #: Environment variables whose presence attaches it at ``load()`` (the plugin-list cache keys on them).
    env: tuple[str, ...] = ()
    #: Folders of the home that attach it at ``load()`` when they hold anything (an empty one, as Hermes
    #: makes them in every home, asks for nothing); the saved plugin list keys on their contents.
    paths: tuple[str, ...] = ()
    #: Hooks of the kernel's hookspecs that, once a plugin implements one, attach it.
    plugin_hooks: tuple[str, ...] = ()
    #: Service hooks it answers even before anything else asked for it (attached before they fire).
    answers: tuple[str, ...] = ()
    #: Attached at every ``load()``.
    at_load: bool = False

    def declared(self, kernel: Kernel) -> bool:
        """Whether ``kernel``'s config, environment or home asks for this service at ``load()``."""
        return (
            self.at_load
            or any(kernel.config.get(key) is not None for key in self.sections)
            or any(kernel.environ.get(name) for name in self.env)
            or any(_holds_anything(kernel.home / path) for path in self.paths)
        )


def _holds_anything(path: Path) -> bool:
    """Whether ``path`` is a file, or a folder with at least one entry."""
    try:
        with os.scandir(path) as entries:
            return next(entries, None) is not None
    except NotADirectoryError:
        return True
    except OSError:
        return False


class ServiceHooks:
    """The kernel-internal hooks a service implements with ``@serviceimpl`` (all optional)."""

    @servicespec(historic=True)
    def service_attach(self, kernel: Kernel) -> None:
        """The service joins ``kernel``: set the attributes it declares (``kernel.tools = ...``)."""

    @servicespec
    def service_load_started(self, kernel: Kernel) -> None:
        """:meth:`Kernel.load` begins, before any plugin is imported."""

    @servicespec(firstresult=True)
    def service_register_object(self, kernel: Kernel, record: _Record, target: Any) -> bool | None:
        """A plugin's entry point named something the core cannot register (a class), or its module
        has neither ``register()`` nor ``@hookimpl`` functions: ``True`` if this service took it."""

    @servicespec
    def service_load_finished(self, kernel: Kernel) -> None:
        """Every plugin of :meth:`Kernel.load` is registered."""

    @servicespec
    def service_plugin_added(self, kernel: Kernel, name: str) -> None:
        """Plugin ``name`` was registered after :meth:`Kernel.load` (``k.register``, ``k.pm.register``,
        an entry-point group, a deferred model provider)."""

    @servicespec
    def service_plugin_owns(self, kernel: Kernel, record: _Record) -> bool:
        """Whether ``record``'s plugin registered something with this service."""
        return False

    @servicespec
    def service_plugin_unloaded(self, kernel: Kernel, record: _Record) -> None:
        """Remove everything ``record``'s plugin registered with this service."""

    @servicespec
    def service_shutdown(self, kernel: Kernel) -> None:
        """:meth:`Kernel.shutdown`: release the service's resources (before the plugins are dropped)."""


_builtins: list[Service] = []
_config_schemas: list[str] = []
_bundled_schemas: list[tuple[str, str]] = []


def use_builtins(
    services: Iterable[Service],
    config_schemas: Iterable[str] = (),
    bundled_schemas: Iterable[tuple[str, str]] = (),
) -> None:
    """Set the services every new kernel knows, the modules that declare the schema of ``config.yaml``
    and the schema files of bundled plugins (done once by :mod:`kernel`, from :mod:`kernel.defaults`)."""
    _builtins[:] = list(services)
    _config_schemas[:] = list(config_schemas)
    _bundled_schemas[:] = list(bundled_schemas)


def config_schema_for(services: Iterable[Service] | None = None) -> ConfigSchema:
    """The schema of ``config.yaml`` for a kernel with ``services`` (the built-in ones by default): the
    declared fragments, and the sections of those services as theirs to check."""
    chosen = _builtins if services is None else services
    owned = sorted({key for service in chosen for key in service.sections})
    from .sources.discovery import bundled_root

    root = bundled_root()
    files = tuple((section, str(root / file)) for section, file in _bundled_schemas)
    return ConfigSchema(modules=tuple(_config_schemas), owned=tuple(owned), files=files)


class ServiceManager:
    """A kernel's services: the declared ones, and the attached ones on a pluggy manager."""

    def __init__(self, kernel: Kernel, services: Iterable[Service] | None = None) -> None:
        self._kernel = kernel
        self.declared: dict[str, Service] = {s.name: s for s in (_builtins if services is None else services)}
        self.attached: dict[str, ModuleType] = {}
        # Its own lock, not the kernel's: a service may first be needed on a thread of a surface
        # (an MCP connection registering tools) while the loading thread holds the kernel's.
        self._lock = threading.RLock()
        self._by_attribute = {a: s for s in self.declared.values() for a in s.attributes}
        self._by_member = {m: s for s in self.declared.values() for m in s.context}
        #: This kernel's own ``PluginContext`` class: the members of its attached services are put on
        #: it, so that two kernels with different services give their plugins different contexts.
        self.context_class: type[PluginContext] = type(
            "PluginContext", (PluginContext,), {"__module__": PluginContext.__module__}
        )
        self.pm = pluggy.PluginManager(SERVICE_PROJECT)
        self.pm.add_hookspecs(ServiceHooks)
        self.hook = self.pm.hook
        self.hook.service_attach.call_historic(kwargs={"kernel": kernel})

    def attach(self, name: str) -> ModuleType:
        """Import service ``name`` (once per process) and attach it to this kernel (once)."""
        module = self.attached.get(name)
        if module is not None:
            return module
        service = self.declared[name]
        with self._lock:
            module = self.attached.get(name)
            if module is None:
                module = importlib.import_module(service.module)
                _install_members(service, module, self.context_class)
                self.attached[name] = module
                try:
                    self.pm.register(module, name)  # runs its service_attach (a historic hook)
                except BaseException:
                    # Not attached after all: the next use tries again, nothing half-made stays.
                    del self.attached[name]
                    if self.pm.is_registered(module):
                        self.pm.unregister(module)
                    raise
        return module

    def for_attribute(self, name: str) -> Service | None:
        return self._by_attribute.get(name)

    def for_member(self, name: str) -> Service | None:
        return self._by_member.get(name)

    def attach_declared(self) -> None:
        """Attach every service the kernel's config, environment or home asks for."""
        for service in self.declared.values():
            if service.name not in self.attached and service.declared(self._kernel):
                self.attach(service.name)

    def attach_answering(self, hook: str) -> None:
        """Attach the services that answer service hook ``hook`` whoever asked for them."""
        for service in self.declared.values():
            if hook in service.answers:
                self.attach(service.name)

    def attach_for_hooks(self, implemented: Any) -> None:
        """Attach the services one of whose ``plugin_hooks`` is in ``implemented`` (hook names)."""
        for service in self.declared.values():
            if service.name not in self.attached and any(h in implemented for h in service.plugin_hooks):
                self.attach(service.name)

    def asked_for(self) -> list[str]:
        """The services config.yaml, the environment or the home ask for (not the always-on ones)."""
        return [s.name for s in self.declared.values() if not s.at_load and s.declared(self._kernel)]

    def env_names(self) -> list[str]:
        return sorted({n for s in self.declared.values() for n in s.env})

    def paths(self) -> list[str]:
        return sorted({p for s in self.declared.values() for p in s.paths})


def _install_members(service: Service, module: ModuleType, target: type[PluginContext]) -> None:
    """Put the service's ``Context`` members on ``target``, one kernel's context class."""
    if not service.context:
        return
    members = getattr(module, "Context", None)
    for name in service.context:
        value = vars(members).get(name) if members is not None else None
        if value is None:
            raise RuntimeError(
                f"service '{service.name}' declares the context member '{name}', "
                f"but {service.module}.Context has none"
            )
        setattr(target, name, value)
