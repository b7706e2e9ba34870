"""``hermes_cli.plugins`` for plugins written for Hermes Agent: the plugin manager of the current kernel.

``PluginContext`` is the kernel's.  :func:`get_plugin_manager` returns a
small view of the current kernel with the calls Hermes plugins and their
command-line tools make on Hermes' plugin manager.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ...core.context import PluginContext
from ...tools.registry import PluginToolOverrideError
from . import require_kernel

if TYPE_CHECKING:
    from ...core.kernel import Kernel

__all__ = [
    "PluginContext",
    "PluginManagerView",
    "PluginToolOverrideError",
    "get_plugin_auxiliary_tasks",
    "get_plugin_command_handler",
    "get_plugin_commands",
    "get_plugin_manager",
    "invoke_hook",
    "resolve_pre_tool_block",
]


class PluginManagerView:
    """What a Hermes plugin may ask of the plugin manager, answered by one kernel."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel

    @property
    def kernel(self) -> Kernel:
        return self._kernel

    def discover_and_load(self) -> None:
        """Find and load every plugin (the kernel's ``load()``; does nothing the second time)."""
        self._kernel.load()

    def invoke_hook(self, hook_name: str, **kwargs: Any) -> list[Any]:
        """Call every live callback of ``hook_name``; the non-None results, in plugin order."""
        return self._kernel.invoke_hook(hook_name, **kwargs)

    def list_plugins(self) -> list[dict[str, Any]]:
        """Every known plugin as a dict (name, version, kind, source, enabled, error, tools, hooks, ...)."""
        return [info.to_dict() for info in self._kernel.plugins]

    def get_slack_action_handlers(self) -> list[tuple[Any, Callable[..., Any], str]]:
        """``(action_id, callback, plugin)`` for every Slack action handler plugins registered."""
        return [tuple(handler) for handler in self._kernel.registrations.slack_action_handlers()]

    @property
    def _hooks(self) -> Mapping[str, list[Callable[..., Any]]]:
        """Hook name -> the functions registered for it that are still live, in call order (read-only)."""
        hooks: dict[str, list[Callable[..., Any]]] = {}
        for cb in self._kernel._hooks.callbacks():
            if cb.error is None:
                hooks.setdefault(cb.hook, []).append(cb.fn)
        return types.MappingProxyType(hooks)


def get_plugin_manager() -> PluginManagerView:
    """The plugin manager of the current kernel (``RuntimeError`` when no kernel runs)."""
    return PluginManagerView(require_kernel("hermes_cli.plugins.get_plugin_manager"))


def invoke_hook(hook_name: str, **kwargs: Any) -> list[Any]:
    """Fire ``hook_name`` on the current kernel; the non-None results."""
    return require_kernel("hermes_cli.plugins.invoke_hook").invoke_hook(hook_name, **kwargs)


def get_plugin_auxiliary_tasks() -> list[dict[str, Any]]:
    """The auxiliary tasks plugins registered (key, display name, description, defaults, plugin), by key."""
    kernel = require_kernel("hermes_cli.plugins.get_plugin_auxiliary_tasks")
    return sorted((task.to_dict() for task in kernel.registrations.auxiliary_tasks()), key=lambda t: t["key"])


def get_plugin_commands() -> dict[str, dict[str, Any]]:
    """The slash commands plugins registered: name -> ``{handler, description, args_hint, plugin}``."""
    kernel = require_kernel("hermes_cli.plugins.get_plugin_commands")
    return {
        command.name: {
            "handler": command.handler,
            "description": command.description,
            "args_hint": command.args_hint,
            "plugin": command.plugin,
        }
        for command in kernel.commands.all()
        if command.plugin is not None
    }


def get_plugin_command_handler(name: str) -> Callable[[str], Any] | None:
    """The handler of plugin command ``name`` (with or without the ``/``), or ``None``."""
    entry = get_plugin_commands().get(str(name).strip().lstrip("/").lower())
    return entry["handler"] if entry is not None else None


def resolve_pre_tool_block(
    tool_name: str, args: Mapping[str, Any] | None = None, **context: Any
) -> str | None:
    """Ask the ``pre_tool_call`` hooks about a call without making it: the block message, or ``None``.

    ``context`` is what a real call would carry (``task_id``,
    ``tool_call_id``, ``session_id`` ...).  Approval requests go to the
    kernel's approver, as for a real call.
    """
    from ...tools import HOOK_CONTEXT_KEYS, observer_context
    from ...tools.decisions import decide_tool_call

    kernel = require_kernel("hermes_cli.plugins.resolve_pre_tool_block")
    call_args = copy.deepcopy(dict(args or {}))
    verdict = decide_tool_call(
        kernel, tool_name, call_args, observer_context({**dict.fromkeys(HOOK_CONTEXT_KEYS), **context})
    )
    return verdict.blocked
