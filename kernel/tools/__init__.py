"""Tools and the tool-call pipeline: the registry (``k.tools``), the ``pre_tool_call`` decisions
and approvals (:mod:`kernel.tools.decisions`), and middleware (:mod:`kernel.tools.middleware`)."""

from .registry import (
    HOOK_CONTEXT_KEYS,
    MAX_ARGS_CHARS,
    MAX_ARGS_DEPTH,
    MAX_ARGS_VALUES,
    RESERVED_TOOLS,
    TOOL_NAME,
    PluginToolOverrideError,
    Tool,
    ToolConflict,
    ToolRegistrationError,
    ToolRegistry,
    calling_kernel,
    current_call,
    error_json,
    is_error_result,
    multimodal_content,
    normalize_schema,
    observer_context,
)

__all__ = [
    "HOOK_CONTEXT_KEYS",
    "MAX_ARGS_CHARS",
    "MAX_ARGS_DEPTH",
    "MAX_ARGS_VALUES",
    "RESERVED_TOOLS",
    "TOOL_NAME",
    "PluginToolOverrideError",
    "Tool",
    "ToolConflict",
    "ToolRegistrationError",
    "ToolRegistry",
    "calling_kernel",
    "current_call",
    "error_json",
    "is_error_result",
    "multimodal_content",
    "normalize_schema",
    "observer_context",
]
