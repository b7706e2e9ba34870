"""The tools service: the tool registry and the tool-call pipeline (guards, approvals, middleware).

It joins a kernel when ``k.tools`` or ``k.middleware`` is first read or a
plugin calls ``ctx.register_tool``, ``ctx.dispatch_tool`` or
``ctx.register_middleware`` (see :mod:`kernel.core.services`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..core.context import _live
from ..core.services import serviceimpl
from .middleware import MiddlewareRegistry
from .registry import ToolConflict, ToolRegistry

if TYPE_CHECKING:
    from ..core.kernel import Kernel
    from ..core.records import _Record


class Context:
    """The ``ctx`` members this service adds to :class:`~kernel.core.context.PluginContext`."""

    @_live
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

    @_live
    def dispatch_tool(
        self,
        tool_name: str,
        args: dict[str, Any] | str | None = None,
        *,
        parent_agent: Any = None,
        **context: Any,
    ) -> str:
        """Run another tool through the same pipeline as a model's call; always a JSON string.

        The session and task of the call in progress (or of ``parent_agent``,
        read from its ``session_id`` / ``task_id`` attributes) are passed on, and
        the hooks see ``caller_plugin`` set to this plugin.
        """
        if parent_agent is not None:
            for key in ("session_id", "task_id"):
                value = getattr(parent_agent, key, None)
                if value is not None:
                    context.setdefault(key, value)
        context["caller_plugin"] = self._record.name
        return self._kernel.tools.dispatch(tool_name, args, **context)

    @_live
    def register_middleware(self, kind: str, fn: Callable[..., Any]) -> None:
        """Rewrite or wrap an operation of the kernel: ``tool_request``, ``tool_execution``,
        ``llm_request`` or ``llm_execution``.

        See :mod:`kernel.middleware` for what each kind receives and returns.
        """
        kernel, record = self._kernel, self._record
        item = kernel.middleware.add(record.name, kind, fn)
        record.middleware.append(kind)
        self._undo.append(lambda: kernel.middleware.remove(item))
        self._undo.append(lambda: record.middleware.remove(kind))


@serviceimpl
def service_attach(kernel: Kernel) -> None:
    kernel.tools = ToolRegistry(kernel)
    kernel.middleware = MiddlewareRegistry(kernel)


@serviceimpl
def service_plugin_unloaded(kernel: Kernel, record: _Record) -> None:
    for tool in record.tools:
        kernel.tools.unregister(tool)
    kernel.middleware.remove_plugin(record.name)
