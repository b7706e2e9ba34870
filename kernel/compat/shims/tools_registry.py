"""``tools.registry`` for plugins written for Hermes Agent: the tool registry and result helpers.

``registry.register(...)`` made while a plugin is being imported or
registered adds the tool to that plugin, exactly like ``ctx.register_tool``;
made at another time, it adds it to the current kernel under the
``compat:hermes`` record.  The read helpers look at the current kernel.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable
from typing import Any

from ...core.api import record_of
from ...tools.options import TOOL_OPTION_DEFAULTS
from . import current_kernel, registering_context, require_kernel

__all__ = [
    "HermesToolRegistry",
    "ToolEntry",
    "invalidate_check_fn_cache",
    "registry",
    "tool_error",
    "tool_result",
]


class ToolEntry:
    """A snapshot of one registered tool, with the attributes of Hermes' registry entries."""

    __slots__ = (
        "check_fn",
        "description",
        "dynamic_schema_overrides",
        "emoji",
        "handler",
        "is_async",
        "max_result_size_chars",
        "name",
        "requires_env",
        "schema",
        "toolset",
    )

    def __init__(
        self,
        name: str,
        toolset: str,
        schema: dict[str, Any],
        handler: Callable[..., Any],
        check_fn: Callable[[], Any] | None,
        requires_env: Iterable[str] | None,
        is_async: bool,
        description: str,
        emoji: str,
        max_result_size_chars: int | None = None,
        dynamic_schema_overrides: Any = None,
    ) -> None:
        self.name, self.toolset, self.schema, self.handler = name, toolset, schema, handler
        self.check_fn, self.requires_env, self.is_async = check_fn, list(requires_env or ()), is_async
        self.description, self.emoji = description, emoji
        self.max_result_size_chars = max_result_size_chars
        self.dynamic_schema_overrides = dynamic_schema_overrides

    @classmethod
    def of(cls, tool: Any) -> ToolEntry:
        """A snapshot of one of the kernel's tools."""
        return cls(
            tool.name,
            tool.toolset,
            copy.deepcopy(tool.schema),
            tool.handler,
            tool.check_fn,
            tool.requires_env,
            tool.is_async,
            tool.description,
            tool.emoji,
        )

    def __repr__(self) -> str:
        return f"ToolEntry(name={self.name!r}, toolset={self.toolset!r})"


class HermesToolRegistry:
    """The ``registry`` object Hermes plugins register tools on."""

    def register(
        self,
        name: str,
        toolset: str,
        schema: dict[str, Any],
        handler: Callable[..., Any],
        *args: Any,
        **options: Any,
    ) -> None:
        """Add a tool: ``ctx.register_tool``'s parameters, in its order; unknown keywords are ignored
        with a warning (Hermes' ``max_result_size_chars``, ``dynamic_schema_overrides``)."""
        ctx = registering_context("tools.registry.registry.register")
        extra = sorted(set(options) - set(TOOL_OPTION_DEFAULTS))
        if extra:
            warning = f"tools.registry.register({name!r}): ignored keyword(s) {', '.join(extra)}"
            record_of(ctx).warnings.append(warning)
        known = {key: value for key, value in options.items() if key in TOOL_OPTION_DEFAULTS}
        ctx.register_tool(name, toolset, schema, handler, *args, **known)

    def get_all_tool_names(self) -> list[str]:
        """Every tool of the current kernel, by name."""
        kernel = current_kernel()
        return sorted(kernel.tools.names()) if kernel is not None else []

    def get_definitions(
        self, tool_names: Iterable[str] | None = None, quiet: bool = False
    ) -> list[dict[str, Any]]:
        """OpenAI function schemas of the tools available now (only ``tool_names`` when given)."""
        kernel = current_kernel()
        if kernel is None:
            return []
        wanted = None if tool_names is None else set(tool_names)
        return [
            {"type": "function", "function": copy.deepcopy(tool.schema)}
            for tool in kernel.tools.all()
            if (wanted is None or tool.name in wanted) and kernel.tools.available(tool)[0]
        ]

    def get_schema(self, name: str) -> dict[str, Any] | None:
        """The bare schema of tool ``name``, or ``None``."""
        kernel = current_kernel()
        tool = kernel.tools.get(name) if kernel is not None else None
        return copy.deepcopy(tool.schema) if tool is not None else None

    def get_toolset_for_tool(self, name: str) -> str | None:
        """The toolset of tool ``name``, or ``None``."""
        kernel = current_kernel()
        tool = kernel.tools.get(name) if kernel is not None else None
        return tool.toolset if tool is not None else None

    def get_entry(self, name: str) -> ToolEntry | None:
        """A snapshot of tool ``name``'s registration, or ``None``."""
        kernel = current_kernel()
        tool = kernel.tools.get(name) if kernel is not None else None
        return ToolEntry.of(tool) if tool is not None else None

    def get_registered_toolset_names(self) -> list[str]:
        """The toolsets of the current kernel's tools, sorted, each once."""
        kernel = current_kernel()
        return sorted({tool.toolset for tool in kernel.tools.all()}) if kernel is not None else []

    def get_tool_names_for_toolset(self, toolset: str) -> list[str]:
        """The tools of ``toolset``, sorted by name."""
        kernel = current_kernel()
        if kernel is None:
            return []
        return sorted(tool.name for tool in kernel.tools.all() if tool.toolset == toolset)

    def get_emoji(self, name: str, default: str = "\N{HIGH VOLTAGE SIGN}") -> str:
        """Tool ``name``'s emoji, or ``default`` when it has none (or is unknown)."""
        kernel = current_kernel()
        tool = kernel.tools.get(name) if kernel is not None else None
        return tool.emoji if tool is not None and tool.emoji else default

    def dispatch(self, name: str, args: dict[str, Any] | str | None = None, **context: Any) -> str:
        """Run tool ``name`` through the kernel's whole pipeline (hooks included); a JSON string."""
        return require_kernel("tools.registry.registry.dispatch").tools.dispatch(name, args, **context)


registry = HermesToolRegistry()


def tool_error(message: str, **extra: Any) -> str:
    """A tool's error result: ``{"error": message, ...extra}`` as JSON."""
    return json.dumps({"error": str(message), **extra}, ensure_ascii=False, default=str)


def tool_result(data: Any = None, **kwargs: Any) -> str:
    """A tool's result as JSON: ``data`` (a mapping is merged with ``kwargs``), or ``kwargs`` alone."""
    if data is None:
        payload: Any = kwargs
    elif kwargs:
        payload = {**data, **kwargs} if isinstance(data, dict) else {"result": data, **kwargs}
    else:
        payload = data
    return json.dumps(payload, ensure_ascii=False, default=str)


def invalidate_check_fn_cache() -> None:
    """Nothing to do: the kernel asks each tool's ``check_fn`` afresh, it keeps no answer to forget."""
