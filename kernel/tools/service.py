"""The tools service: the tool registry and the tool-call pipeline (guards, approvals, middleware).

It joins a kernel when ``k.tools`` or ``k.middleware`` is first read or a
plugin calls ``ctx.register_tool``, ``ctx.dispatch_tool`` or
``ctx.register_middleware`` (see :mod:`kernel.core.services`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..base.config import section
from ..core.api import kernel_of, on_rollback, record_of
from ..core.context import ServiceContext, live
from ..core.services import serviceimpl
from .middleware import MiddlewareRegistry
from .registry import PluginToolOverrideError, ToolConflict, ToolRegistry

if TYPE_CHECKING:
    from ..core.kernel import Kernel
    from ..core.records import _Record


class Context(ServiceContext):
    """The ``ctx`` members this service adds to :class:`~kernel.core.context.PluginContext`."""

    @live
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
        override: bool = False,
    ) -> None:
        """Add a tool.  A bad name, schema or handler raises ``ToolRegistrationError``.

        The one spelling of these parameters, positional as in Hermes (plugins call
        ``ctx.register_tool(name, toolset, schema, handler)``); everything that passes them on
        takes :class:`~kernel.tools.options.ToolOptions`.

        A name another plugin already owns is refused with a warning (recorded
        on this plugin); the rest of the plugin still loads.  ``override=True``
        takes such a name over instead (noted on both plugins), as in Hermes:
        a plugin that is not bundled needs ``plugins.entries.<name>.allow_tool_override:
        true`` in config.yaml, else this raises :class:`PluginToolOverrideError`.
        """
        record = record_of(self)
        if override and not _override_allowed(kernel_of(self), record):
            raise PluginToolOverrideError(
                f"plugin '{record.name}' may not override tool {name!r}: set "
                f"plugins.entries.{record.name}.allow_tool_override: true in config.yaml to let it "
                "replace tools other plugins provide"
            )
        try:
            tool, warnings = kernel_of(self).tools.register(
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
                override=override,
            )
        except ToolConflict as exc:
            record.warnings.append(str(exc))
            kernel_of(self).log.warning("tool_conflict", tool=name, plugin=record.name, owner=exc.owner)
            return
        for warning in warnings:
            record.warnings.append(warning)
            kernel_of(self).log.warning("tool_schema", plugin=record.name, detail=warning)
        note_shadowing(kernel_of(self), tool, functools.partial(on_rollback, self))
        record.tools.append(tool.name)
        on_rollback(self, lambda: kernel_of(self).tools.unregister(tool.name, record.name))
        on_rollback(self, lambda: record.tools.remove(tool.name))

    @live
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
            context["parent_agent"] = parent_agent  # the handler's, as in Hermes; hooks do not see it
        context["caller_plugin"] = record_of(self).name
        return kernel_of(self).tools.dispatch(tool_name, args, **context)

    @live
    def register_middleware(self, kind: str, fn: Callable[..., Any]) -> None:
        """Rewrite or wrap an operation of the kernel: ``tool_request``, ``tool_execution``,
        ``llm_request`` or ``llm_execution``.

        See :mod:`kernel.tools.middleware` for what each kind receives and returns.
        """
        kernel, record = kernel_of(self), record_of(self)
        item = kernel.middleware.add(record.name, kind, fn)
        record.middleware.append(kind)
        on_rollback(self, lambda: kernel.middleware.remove(item))
        on_rollback(self, lambda: record.middleware.remove(kind))


def _override_allowed(kernel: Kernel, record: _Record) -> bool:
    """Bundled plugins may override tools; any other needs its ``allow_tool_override`` entry."""
    if record.source == "bundled":
        return True
    return section(kernel.config, "plugins", "entries", record.name, "allow_tool_override") is True


def note_shadowing(
    kernel: Kernel, tool: Any, on_undo: Callable[[Callable[[], None]], None] | None = None
) -> None:
    """After ``tool`` was registered: when it shadows another plugin's tool of its name, or waits
    beneath one, note it on both plugins and log a warning naming both (plugin tools and the tools
    services register for a plugin, such as an active memory provider's, alike)."""
    records, active = kernel.host.records, kernel.tools.get(tool.name)
    if active is not tool and active is not None:
        _note_override(kernel, active, records.get(active.plugin), records.get(tool.plugin), on_undo)
    elif tool.replaced is not None:
        _note_override(kernel, tool, records.get(tool.plugin), records.get(tool.replaced.plugin), on_undo)


def _note_override(
    kernel: Kernel,
    tool: Any,
    winner: _Record | None,
    loser: _Record | None,
    on_undo: Callable[[Callable[[], None]], None] | None,
) -> None:
    """Note on both plugins that ``winner``'s ``tool`` stands over ``loser``'s tool of the same name."""
    if winner is None or loser is None:
        return
    notes = ((winner, _overrides(tool, loser.name)), (loser, _overridden(tool, winner.name)))
    for target, note in notes:
        target.warnings.append(note)
        if on_undo is not None:
            on_undo(_forget_note(target, note))
    kernel.log.warning(
        "tool_overridden", tool=tool.name, plugin=winner.name, owner=loser.name, why=_why(tool)
    )


def _why(tool: Any) -> str:
    return "override=True" if tool.override else "a bundled plugin's tool gives way to yours"


def _forget_note(record: _Record, note: str) -> Callable[[], None]:
    """The undo of ``note`` added to ``record``'s warnings."""

    def forget() -> None:
        if note in record.warnings:
            record.warnings.remove(note)

    return forget


def _overrides(tool: Any, loser: str) -> str:
    return f"tool '{tool.name}' overrides the one plugin '{loser}' registered ({_why(tool)})"


def _overridden(tool: Any, winner: str) -> str:
    return f"tool '{tool.name}' is overridden by plugin '{winner}' ({_why(tool)})"


def _drop_note(record: _Record | None, note: str) -> None:
    if record is not None and note in record.warnings:
        record.warnings.remove(note)


@serviceimpl
def service_attach(kernel: Kernel) -> None:
    kernel.host.provide(tools=ToolRegistry(kernel), middleware=MiddlewareRegistry(kernel))


@serviceimpl
def service_plugin_unloaded(kernel: Kernel, record: _Record) -> None:
    for name in record.tools:
        tool = kernel.tools.get(name)
        if tool is not None and tool.plugin == record.name and tool.replaced is not None:
            _drop_note(kernel.host.records.get(tool.replaced.plugin), _overridden(tool, record.name))
        elif tool is not None and tool.plugin != record.name:  # this plugin's tool waited beneath it
            _drop_note(kernel.host.records.get(tool.plugin), _overrides(tool, record.name))
        kernel.tools.unregister(name, record.name)
    kernel.middleware.remove_plugin(record.name)
