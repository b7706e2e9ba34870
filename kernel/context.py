"""``PluginContext``: the ``ctx`` a Hermes-style plugin's ``register(ctx)`` receives."""

from __future__ import annotations

import contextlib
import copy
import difflib
import logging
import types
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .hooks import adapt_hermes_callback
from .manifest import Manifest
from .tools import ToolConflict

if TYPE_CHECKING:
    from .kernel import Kernel, _Record


class PluginContext:
    """What one plugin may do to the kernel while it registers.

    Everything registered through a context is recorded in a ledger, so that a
    ``register(ctx)`` that fails half-way is rolled back completely.
    """

    def __init__(self, kernel: Kernel, record: _Record) -> None:
        self._kernel = kernel
        self._record = record
        self._undo: list[Callable[[], None]] = []

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
        return logging.getLogger(f"{self._kernel._namespace}.{self._record.slug}")

    # -- tools and hooks -------------------------------------------------------

    def register_tool(
        self,
        name: str,
        toolset: str,
        schema: dict[str, Any],
        handler: Callable[..., Any],
        check_fn: Callable[[], Any] | None = None,
        requires_env: Iterable[str] | None = None,
        is_async: bool = False,
        description: str = "",
        emoji: str = "",
    ) -> None:
        """Add a tool.  A bad name, schema or handler raises ``ToolRegistrationError``.

        A name another plugin already owns is refused with a warning (recorded
        on this plugin); the rest of the plugin still loads.
        """
        record = self._record
        try:
            tool, warnings = self._kernel.tools.register(
                name,
                toolset,
                schema,
                handler,
                plugin=record.name,
                check_fn=check_fn,
                requires_env=requires_env,
                is_async=is_async,
                description=description,
                emoji=emoji,
            )
        except ToolConflict as exc:
            record.warnings.append(str(exc))
            self._kernel.log.warning("tool_conflict", tool=name, plugin=record.name, owner=exc.owner)
            return
        for warning in warnings:
            record.warnings.append(warning)
            self._kernel.log.warning("tool_schema", plugin=record.name, detail=warning)
        record.tools.append(tool.name)
        self._undo.append(lambda: self._kernel.tools.unregister(tool.name))
        self._undo.append(lambda: record.tools.remove(tool.name))

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
        if name not in kernel.hook_names:
            close = difflib.get_close_matches(name, kernel.hook_names, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            warning = (
                f"hook '{name}' is not defined by the kernel{hint} (kept; fires only if the host calls it)"
            )
            record.warnings.append(warning)
            kernel.log.warning(
                "unknown_hook", plugin=record.name, hook=name, hint=close[0] if close else None
            )
        cb = kernel._hooks.add(record.name, name, callback, adapt_hermes_callback(callback))
        record.callbacks.append(cb)
        self._undo.append(lambda: kernel._hooks.remove(cb))
        self._undo.append(lambda: record.callbacks.remove(cb))

    # -- ledger ------------------------------------------------------------------

    def _rollback(self) -> None:
        while self._undo:
            undo = self._undo.pop()
            with contextlib.suppress(ValueError):  # already gone
                undo()
