"""``hermes_cli.plugins`` for plugins written for Hermes Agent: the plugin manager of the current kernel.

``PluginContext`` is the kernel's.  :func:`get_plugin_manager` returns a
small view of the current kernel with the calls Hermes plugins and their
command-line tools make on Hermes' plugin manager.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import threading
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.context import PluginContext
from ...tools.middleware import KINDS as _MIDDLEWARE_KINDS
from ...tools.middleware import OBSERVER_SCHEMA_VERSION as _OBSERVER_SCHEMA_VERSION
from ...tools.registry import PluginToolOverrideError
from . import current_kernel, require_kernel

if TYPE_CHECKING:
    from ...core.kernel import Kernel

__all__ = [
    "ENTRY_POINTS_GROUP",
    "OBSERVER_SCHEMA_VERSION",
    "VALID_HOOKS",
    "VALID_MIDDLEWARE",
    "PluginContext",
    "PluginManagerView",
    "PluginToolOverrideError",
    "discover_plugins",
    "get_bundled_plugins_dir",
    "get_plugin_auxiliary_tasks",
    "get_plugin_command_handler",
    "get_plugin_commands",
    "get_plugin_context_engine",
    "get_plugin_manager",
    "get_plugin_toolsets",
    "get_pre_tool_call_block_message",
    "get_pre_tool_call_directive",
    "get_pre_verify_continue_message",
    "has_hook",
    "has_middleware",
    "invoke_hook",
    "resolve_plugin_command_result",
    "resolve_pre_tool_block",
]


def _hookspec_names() -> list[str]:
    from ... import hookspecs

    return [
        name
        for name, fn in vars(hookspecs).items()
        if callable(fn)
        and not name.startswith("_")
        and name not in hookspecs.SLOT_HOOKS
        and getattr(fn, "__module__", "") == hookspecs.__name__
    ]


ENTRY_POINTS_GROUP = "hermes_agent.plugins"
OBSERVER_SCHEMA_VERSION = _OBSERVER_SCHEMA_VERSION
# The hooks of the kernel's contract a plugin may register (the provider slot hooks aside).
VALID_HOOKS: set[str] = set(_hookspec_names())
VALID_MIDDLEWARE: set[str] = set(_MIDDLEWARE_KINDS)


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

    def has_hook(self, hook_name: str) -> bool:
        """Whether a live callback is registered for ``hook_name``."""
        return self._kernel.has_callbacks(hook_name)

    def has_middleware(self, kind: str) -> bool:
        """Whether a middleware of ``kind`` is registered."""
        return bool(self._kernel.middleware.has(kind))

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
        for cb in self._kernel.host.engine.callbacks():
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
    tool_name: str,
    args: Mapping[str, Any] | None = None,
    task_id: str = "",
    session_id: str = "",
    tool_call_id: str = "",
    turn_id: str = "",
    api_request_id: str = "",
    middleware_trace: list[dict[str, Any]] | None = None,
    **context: Any,
) -> str | None:
    """Ask the ``pre_tool_call`` hooks about a call without making it: the block message, or ``None``.

    The ids (and any further ``context``) are what a real call would carry.
    Approval requests go to the kernel's approver, as for a real call.
    """
    from ...tools.decisions import decide_tool_call

    kernel = require_kernel("hermes_cli.plugins.resolve_pre_tool_block")
    call_args = copy.deepcopy(dict(args or {}))
    ids = _call_context(task_id, session_id, tool_call_id, turn_id, api_request_id, middleware_trace, context)
    return decide_tool_call(kernel, tool_name, call_args, ids).blocked


def _call_context(
    task_id: str,
    session_id: str,
    tool_call_id: str,
    turn_id: str,
    api_request_id: str,
    middleware_trace: list[dict[str, Any]] | None,
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    from ...tools import observer_context

    given = {
        **extra,
        "task_id": task_id,
        "session_id": session_id,
        "tool_call_id": tool_call_id,
        "turn_id": turn_id,
        "api_request_id": api_request_id,
    }
    return observer_context(given, list(middleware_trace) if middleware_trace else None)


def get_pre_tool_call_directive(
    tool_name: str,
    args: Mapping[str, Any] | None,
    task_id: str = "",
    session_id: str = "",
    tool_call_id: str = "",
    turn_id: str = "",
    api_request_id: str = "",
    middleware_trace: list[dict[str, Any]] | None = None,
) -> tuple[str | None, str | None]:
    """What the ``pre_tool_call`` hooks say of a call, asking nobody: ``("block", message)``,
    ``("approve", message)`` or ``(None, None)``.

    The kernel's rule applies: a block anywhere wins over an approve before it (Hermes takes the
    first directive); an answer that is not a decision is no opinion.
    """
    from ...tools.decisions import MalformedDecision, parse_decision

    kernel = require_kernel("hermes_cli.plugins.get_pre_tool_call_directive")
    ids = _call_context(task_id, session_id, tool_call_id, turn_id, api_request_id, middleware_trace, {})
    results = kernel.invoke_hook(
        "pre_tool_call", **ids, tool_name=tool_name, args=copy.deepcopy(dict(args or {}))
    )
    approve: str | None = None
    for result in results:
        try:
            decision = parse_decision(result)
        except (MalformedDecision, TypeError, ValueError):
            continue
        if decision is None:
            continue
        kind, payload = decision
        if kind == "block":
            return "block", payload or None
        if kind == "approve" and approve is None:
            approve = payload[0]
    return ("approve", approve or None) if approve is not None else (None, None)


def get_pre_tool_call_block_message(
    tool_name: str,
    args: Mapping[str, Any] | None,
    task_id: str = "",
    session_id: str = "",
    tool_call_id: str = "",
    turn_id: str = "",
    api_request_id: str = "",
    middleware_trace: list[dict[str, Any]] | None = None,
) -> str | None:
    """The block message the ``pre_tool_call`` hooks give a call, or ``None`` (an approve is not a block)."""
    directive, message = get_pre_tool_call_directive(
        tool_name, args, task_id, session_id, tool_call_id, turn_id, api_request_id, middleware_trace
    )
    return message if directive == "block" else None


def get_pre_verify_continue_message(
    *,
    session_id: str = "",
    platform: str = "",
    model: str = "",
    coding: bool = False,
    attempt: int = 0,
    final_response: str = "",
    changed_paths: list[str] | None = None,
) -> str | None:
    """Fire ``pre_verify``; the first ``{"action": "continue"}`` (or ``{"decision": "block"}``) answer's
    message, stripped, or ``None`` to let the turn finish."""
    kernel = require_kernel("hermes_cli.plugins.get_pre_verify_continue_message")
    results = kernel.invoke_hook(
        "pre_verify",
        session_id=session_id,
        platform=platform,
        model=model,
        coding=coding,
        attempt=attempt,
        final_response=final_response,
        changed_paths=list(changed_paths or []),
    )
    for result in results:
        if not isinstance(result, dict):
            continue
        action = str(result.get("action") or result.get("decision") or "").strip().lower()
        message = result.get("message") or result.get("reason")
        if action in ("continue", "block") and isinstance(message, str) and message.strip():
            return message.strip()
    return None


def has_hook(hook_name: str) -> bool:
    """Whether the current kernel has a live callback for ``hook_name``."""
    return require_kernel("hermes_cli.plugins.has_hook").has_callbacks(hook_name)


def has_middleware(kind: str) -> bool:
    """Whether the current kernel has a middleware of ``kind``."""
    return bool(require_kernel("hermes_cli.plugins.has_middleware").middleware.has(kind))


def discover_plugins(force: bool = False) -> None:
    """Load the current kernel's plugins (once; the kernel reloads only through its host, so ``force``
    is the same call)."""
    require_kernel("hermes_cli.plugins.discover_plugins").load()


def get_bundled_plugins_dir() -> Path:
    """Where the bundled plugins are: ``$HERMES_BUNDLED_PLUGINS``, else the kernel's ``extensions/``."""
    from ...core.sources.discovery import bundled_root

    return bundled_root()


def get_plugin_context_engine() -> Any:
    """The context engine the current kernel's config selects, or ``None``."""
    kernel = current_kernel()
    return kernel.providers.context_engine() if kernel is not None else None


def get_plugin_toolsets() -> list[tuple[str, str, str]]:
    """``(toolset, label, description)`` of each toolset plugins' tools are in, by toolset; the
    description is the first plugin's manifest description, else the tools' names."""
    kernel = current_kernel()
    if kernel is None:
        return []
    tools: dict[str, list[str]] = {}
    owners: dict[str, str] = {}
    for tool in kernel.tools.all():
        plugin = getattr(tool, "plugin", None)
        if not plugin or plugin.startswith("compat:"):
            continue
        tools.setdefault(tool.toolset, []).append(tool.name)
        owners.setdefault(tool.toolset, plugin)
    described = {info.name: info.description for info in kernel.plugins}
    return [
        (
            toolset,
            "\N{ELECTRIC PLUG} " + toolset.replace("_", " ").title(),
            described.get(owners[toolset]) or ", ".join(sorted(tools[toolset])),
        )
        for toolset in sorted(tools)
    ]


def resolve_plugin_command_result(result: Any) -> Any:
    """A command handler's answer, awaited when it is awaitable (on a thread of its own when an event
    loop already runs here; ``TimeoutError`` after 30 seconds)."""
    if not inspect.isawaitable(result):
        return result

    async def wait() -> Any:
        return await result

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = asyncio.run(wait())
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=run, name="hermes-command-await", daemon=True)
    worker.start()
    worker.join(30.0)
    if worker.is_alive():
        raise TimeoutError("the plugin command's async handler did not finish within 30 seconds")
    if "error" in box:
        raise box["error"]
    return box.get("value")
