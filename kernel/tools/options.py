"""``ToolOptions``: the optional settings of a tool, named once for every signature that passes them on."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict, cast


class ToolOptions(TypedDict, total=False):
    """What ``ctx.register_tool`` takes after ``name, toolset, schema, handler``, in its order."""

    check_fn: Callable[[], Any] | None
    requires_env: Iterable[str] | None
    is_async: bool
    description: str
    emoji: str
    override: bool


# Each option's value when a caller leaves it out (the defaults of ``ctx.register_tool``).
TOOL_OPTION_DEFAULTS: ToolOptions = {
    "check_fn": None,
    "requires_env": None,
    "is_async": False,
    "description": "",
    "emoji": "",
    "override": False,
}


def tool_options(where: str, options: Mapping[str, Any]) -> ToolOptions:
    """``options`` with every default filled in; a keyword that is no tool option raises ``TypeError``."""
    if not options.keys() <= TOOL_OPTION_DEFAULTS.keys():
        unknown = sorted(set(options) - set(TOOL_OPTION_DEFAULTS))
        raise TypeError(f"{where}() got unexpected keyword argument(s): {', '.join(unknown)}")
    return cast(ToolOptions, {**TOOL_OPTION_DEFAULTS, **options})
