"""``PluginContext``: the ``ctx`` a Hermes-style plugin's ``register(ctx)`` receives.

The core's part is the plugin's identity, its hooks, its settings and the
ledger that rolls a failed ``register()`` back.  Everything else a plugin
registers (``ctx.register_tool``, ``ctx.register_command``, ``ctx.llm``, ...)
is contributed by the service that owns it (see :mod:`kernel.core.services`):
the first use of such a member attaches its service.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

from ..base.config import profile_name
from .hooks import NORMAL, Callback
from .plugin_manager import PluginError

if TYPE_CHECKING:
    import logging

    from ..base.log import LazyLogger
    from .hooks import HookEngine
    from .plugin_manager import KernelPluginManager
    from .records import _Record
    from .sources.manifest import Manifest


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class _MemberServices(Protocol):
    def for_member(self, name: str) -> _Named | None: ...
    def attach(self, name: str) -> object: ...


class ContextKernel(Protocol):
    """What a plugin's context uses of its kernel (the kernel has it; the context does not import it)."""

    @property
    def home(self) -> Path: ...
    @property
    def config(self) -> dict[str, Any]: ...
    @property
    def pm(self) -> KernelPluginManager: ...
    @property
    def log(self) -> LazyLogger: ...
    @property
    def hook_names(self) -> list[str]: ...
    @property
    def _closed(self) -> bool: ...
    @property
    def _records(self) -> dict[str, _Record]: ...
    @property
    def _hooks(self) -> HookEngine: ...
    @property
    def _namespace(self) -> str: ...
    @property
    def _services(self) -> _MemberServices: ...


_loading: contextvars.ContextVar[PluginContext | None] = contextvars.ContextVar(
    "hermes_kernel_loading", default=None
)


@contextlib.contextmanager
def loading(ctx: PluginContext) -> Iterator[None]:
    """Mark ``ctx``'s plugin as the one being imported and registered (in this thread or task)."""
    token = _loading.set(ctx)
    try:
        yield
    finally:
        _loading.reset(token)


def roll_back(ctx: PluginContext) -> None:
    """Undo, newest first, what ``ctx``'s plugin registered (its ``register()`` failed or overran)."""
    ctx._rollback()


def current_context() -> PluginContext | None:
    """The context of the plugin being imported or registered right now, if any: module-level
    calls a plugin makes while it loads (Hermes' ``register_provider``, ...) are its own."""
    return _loading.get()


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _live(method: Callable[Concatenate[Any, _P], _R]) -> Callable[Concatenate[Any, _P], _R]:
    """Refuse ``method`` once the plugin is no longer registered (unloaded, blocked, rolled back,
    or its kernel shut down): a thread it left behind cannot add anything any more."""

    @functools.wraps(method)
    def guarded(self: PluginContext, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        kernel, record = self._kernel, self._record
        if kernel._closed or record.obj is None or kernel._records.get(record.name) is not record:
            raise PluginError(
                f"plugin '{record.name}' is not registered with the kernel any more: "
                f"{method.__name__} refused"
            )
        return method(self, *args, **kwargs)

    return guarded


#: The decorator a service puts on the ``ctx`` members it contributes (see kernel.core.services).
live = _live


class PluginContext:
    """What one plugin may do to the kernel while it registers.

    Everything registered through a context is recorded in a ledger, so that a
    ``register(ctx)`` that fails half-way is rolled back completely.
    """

    def __init__(self, kernel: ContextKernel, record: _Record) -> None:
        self._kernel = kernel
        self._record = record
        self._undo: list[Callable[[], object]] = []

    def __getattr__(self, name: str) -> Any:
        # Only for members not on the class yet: one a service contributes attaches that service.
        if name.startswith("_"):
            raise AttributeError(name)
        service = self._kernel._services.for_member(name)
        if service is None:
            raise AttributeError(f"'PluginContext' object has no attribute '{name}'")
        self._kernel._services.attach(service.name)
        return object.__getattribute__(self, name)

    # -- identity ------------------------------------------------------------

    @property
    def plugin_id(self) -> str:
        """The plugin's key: the manifest name, ``<category>/<dir>``, or the entry-point name."""
        return self._record.name

    @property
    def name(self) -> str:
        return self._record.name

    @property
    def manifest(self) -> Manifest | None:
        """The parsed manifest (``None`` for entry-point plugins)."""
        return self._record.manifest

    @property
    def home(self) -> Path:
        """The kernel's home directory (``HERMES_HOME``)."""
        return self._kernel.home

    @property
    def config(self) -> Mapping[str, Any]:
        """A read-only snapshot of the kernel's configuration."""
        return types.MappingProxyType(copy.deepcopy(self._kernel.config))

    @property
    def logger(self) -> logging.Logger:
        """A stdlib logger for the plugin, rendered like the kernel's own lines."""
        import logging

        return logging.getLogger(f"{self._kernel._namespace}.{self._record.slug}")

    # -- tools and hooks -------------------------------------------------------

    @_live
    def register_hook(self, name: str, callback: Callable[..., Any]) -> None:
        """Call ``callback`` with keyword arguments whenever hook ``name`` fires.

        A name the kernel does not define is kept with a warning: it fires if
        the host ever invokes it.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"register_hook: the hook name must be a non-empty string, not {name!r}")
        if not callable(callback):
            raise TypeError(f"register_hook({name!r}): the callback must be callable, not {callback!r}")
        kernel, record = self._kernel, self._record
        caller = getattr(kernel.pm.hook, name, None)
        if caller is None or not caller.has_spec():
            import difflib

            close = difflib.get_close_matches(name, kernel.hook_names, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            warning = (
                f"hook '{name}' is not defined by the kernel{hint} (kept; fires only if the host calls it)"
            )
            record.warnings.append(warning)
            kernel.log.warning(
                "unknown_hook", plugin=record.name, hook=name, hint=close[0] if close else None
            )
        self._add_hook(name, callback)

    @_live
    def add_hookspecs(self, module_or_class: Any) -> None:
        """Declare hooks of this plugin's own: functions marked with ``kernel.hookspec``.

        As pytest's ``pytest_addhooks``: afterwards ``ctx.register_hook`` (and
        ``@hookimpl`` functions of any plugin) implement them, and the host
        calls them with ``k.invoke_hook``, ``k.ainvoke_hook`` or
        ``k.pm.hook.<name>``.  ``ValueError`` when it declares none.
        """
        # An impl of another plugin that does not fit is disabled, not this plugin's failure.
        self._kernel.pm.add_hookspecs_for(module_or_class, strict=False)

    @_live
    def _add_hook(self, name: str, callback: Callable[..., Any], tier: int = NORMAL) -> Callback:
        kernel, record = self._kernel, self._record
        cb = kernel._hooks.add(record.obj, record.name, name, callback, tier=tier)
        record.callbacks.append(cb)
        self._undo.append(lambda: kernel._hooks.remove(cb))
        self._undo.append(lambda: record.callbacks.remove(cb))
        return cb

    @property
    def profile_name(self) -> str:
        """The Hermes profile of the kernel's home: ``default`` (``~/.hermes``), ``<name>``
        (``~/.hermes/profiles/<name>``), else ``custom``."""
        return profile_name(self._kernel.home)

    # -- settings ----------------------------------------------------------------

    def get_config(self, key: str, default: Any = None) -> Any:
        """``plugins.entries.<plugin_id>.settings.<key>`` (dotted), or ``default``."""
        from ..base.settings import get_setting

        return copy.deepcopy(get_setting(self._kernel.config, self.plugin_id, key, default))

    @_live
    def set_config(self, key: str, value: Any) -> None:
        """Store ``value`` at this plugin's ``settings.<key>`` in ``<home>/config.yaml``, atomically.

        A key that is not plain names joined by dots raises ``ValueError``: a
        plugin can change only its own settings.
        """
        from ..base.settings import write_setting

        write_setting(self._kernel.home, self._kernel.config, self.plugin_id, key, copy.deepcopy(value))

    # -- ledger ------------------------------------------------------------------

    def _rollback(self) -> None:
        while self._undo:
            undo = self._undo.pop()
            with contextlib.suppress(ValueError):  # already gone
                undo()


if TYPE_CHECKING:
    #: The base of a service's ``Context`` (the members it contributes): ``PluginContext`` for type
    #: checkers, so that its methods see the context they are installed on; ``object`` at run time.
    ServiceContext = PluginContext
else:
    ServiceContext = object
