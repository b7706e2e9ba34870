"""``ServiceHost``: the kernel as a service sees it (``k.host``; see :mod:`kernel.core.api`).

It sits below the kernel facade: it is given the kernel as a :class:`HostedKernel`,
the parts of the kernel it serves, so that it imports nothing above it.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..base.config import load_config
from .context import ContextKernel
from .hooks import HookEngine
from .records import _Record

if TYPE_CHECKING:
    from ..base.log import KernelLogging, LazyLogger
    from .context import PluginContext
    from .loader import Loader
    from .registry import PluginRegistry
    from .services import ServiceManager
    from .sources.discovery import Candidate
    from .watchdog import SharedRLock

#: The kernel's mutable record of one plugin (or surface): its warnings, what it registered, its error.
PluginRecord = _Record


class HostedKernel(ContextKernel, Protocol):
    """What :class:`ServiceHost` uses of the kernel besides what a plugin's context uses (the core's own
    members; the kernel has them)."""

    @property
    def _registry(self) -> PluginRegistry: ...
    @property
    def _loader(self) -> Loader: ...
    @property
    def _services(self) -> ServiceManager: ...
    @property
    def _logging(self) -> KernelLogging: ...
    @property
    def _lendable(self) -> list[SharedRLock]: ...
    @property
    def _env_token(self) -> object: ...
    @property
    def _config_override(self) -> dict[str, Any] | None: ...
    def _config_problem(self, problem: str) -> None: ...
    def _scan_sources(self) -> list[list[Candidate]]: ...


class ServiceHost:
    """The kernel as a service sees it: ``k.host``.

    Few methods, each a thing a service needs and a plugin does not: the hook
    engine, the plugin records, noting a failure or a config problem, adding a
    surface, the kernel's environment token and module namespace, deferred loading.
    """

    __slots__ = ("_kernel",)

    def __init__(self, kernel: HostedKernel) -> None:
        self._kernel = kernel

    # -- hooks -------------------------------------------------------------------

    @property
    def engine(self) -> HookEngine:
        """The hook engine: ``invoke`` / ``results_of`` for a wrapped outcome, ``fail``, ``execute``,
        ``chains`` (the live callbacks of each hook, in call order), ``timeout``."""
        return self._kernel._hooks

    def run_sync(self, awaitable: Any) -> Any:
        """Run an awaitable that a plugin's callback returned, on the kernel's loop, bounded as hooks are."""
        return self._kernel._hooks.run_sync(awaitable)

    # -- plugins -------------------------------------------------------------------

    @property
    def records(self) -> Mapping[str, PluginRecord]:
        """The records of the plugins and surfaces, by name: a read-only view of the live mapping."""
        return types.MappingProxyType(self._kernel._registry.records)

    def note_failure(self, plugin: str, problem: str) -> None:
        """Note a run-time failure of ``plugin`` (once) in its listing's warnings."""
        self._kernel._registry.note_failure(plugin, problem)

    def config_problem(self, problem: str) -> None:
        """Report a problem of config.yaml: kept in ``k.problems`` and logged as a warning."""
        self._kernel._config_problem(problem)

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
    ) -> PluginRecord:
        """Add a surface, listed and isolated like a plugin: ``setup(ctx)`` registers what it offers;
        ``close`` runs at shutdown.  ``PluginError`` when ``name`` is taken."""
        return self._kernel._loader.add_surface(
            name, kind, setup, source=source, path=path, description=description, close=close
        )

    def plugin_submodule(self, plugin: str, name: str) -> types.ModuleType | None:
        """Import ``<plugin package>.<name>`` (a memory provider's ``cli.py``), or ``None``."""
        return self._kernel._loader.plugin_submodule(plugin, name)

    def load_deferred(self) -> None:
        """Import the deferred (model provider) plugins now."""
        self._kernel._loader.load_deferred()

    def scan_sources(self) -> list[list[Candidate]]:
        """The plugin candidates of each source (bundled, user, project, entry points), unmerged."""
        return self._kernel._scan_sources()

    def provide(self, **attributes: object) -> None:
        """Set the kernel attributes a service declares (``provide(tools=registry)`` is ``k.tools``),
        from its ``service_attach``.  ``AttributeError`` for a name no service declares."""
        services = self._kernel._services
        undeclared = [name for name in attributes if services.for_attribute(name) is None]
        if undeclared:  # checked before any is set: nothing half-provided stays
            raise AttributeError(f"no service of this kernel declares the attribute '{undeclared[0]}'")
        for name, value in attributes.items():
            setattr(self._kernel, name, value)

    def services_asked_for(self) -> list[str]:
        """The services config.yaml, the environment or the home ask for (not the always-on ones)."""
        return self._kernel._services.asked_for()

    # -- the kernel's own ------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether the kernel has been shut down."""
        return self._kernel._closed

    @property
    def env_token(self) -> object:
        """The token of the kernel's environment (see :mod:`kernel.base.environ`)."""
        return self._kernel._env_token

    @property
    def namespace(self) -> str:
        """The package name this kernel's directory plugins are imported under (``hermes_plugins``...)."""
        return self._kernel._namespace

    def namespace_module(self) -> types.ModuleType:
        """The package module of :attr:`namespace`, made on first use."""
        return self._kernel._loader.namespace_module()

    @property
    def audit(self) -> LazyLogger:
        """The audit logger (``agent.log``, at INFO)."""
        return self._kernel._logging.audit

    def reread_config(self) -> tuple[dict[str, Any], list[str]]:
        """config.yaml read afresh, with the mapping the kernel was built with merged over it."""
        return load_config(self._kernel.home, self._kernel._config_override)

    def lend_locks(self, *locks: SharedRLock) -> None:
        """Locks of the service that a plugin-loading thread borrows with the kernel's own."""
        self._kernel._lendable.extend(locks)
