"""Calculator plugin: safe math evaluation and unit conversion tools.

Registers the ``calculate`` and ``unit_convert`` tools in the ``calculator``
toolset, a ``post_tool_call`` hook that keeps a small in-memory log of the
most recent tool calls (of every tool, not only this plugin's), and the skills
under ``skills/`` (``calculator:calculator``).
"""

from __future__ import annotations

import logging
from collections import deque
from pathlib import Path
from typing import Any

from . import schemas, tools

logger = logging.getLogger(__name__)

SKILLS_DIR = Path(__file__).parent / "skills"

#: How many tool calls :func:`recent_calls` remembers.
MAX_LOGGED_CALLS = 100

_call_log: deque[dict[str, Any]] = deque(maxlen=MAX_LOGGED_CALLS)


def _on_post_tool_call(
    tool_name: str,
    args: dict[str, Any] | None = None,
    result: Any = None,
    task_id: str | None = None,
    session_id: str | None = None,
    duration_ms: float | None = None,
    **kwargs: Any,
) -> None:
    """Record a finished tool call in the bounded in-memory log."""
    record = {
        "tool": tool_name,
        "task_id": task_id,
        "session_id": session_id,
        "duration_ms": duration_ms,
    }
    _call_log.append(record)
    logger.debug(
        "tool call finished: tool=%s task_id=%s session_id=%s duration_ms=%s",
        tool_name,
        task_id,
        session_id,
        duration_ms,
    )


def recent_calls() -> list[dict[str, Any]]:
    """Return a copy of the most recent tool-call records, oldest first."""
    return [dict(record) for record in _call_log]


def register(ctx: Any) -> None:
    """Register the calculator tools, the post_tool_call hook and the skills with the plugin context."""
    ctx.register_tool(
        name="calculate",
        toolset="calculator",
        schema=schemas.CALCULATE,
        handler=tools.calculate,
        description="Evaluate a math expression safely (arithmetic, math functions, pi/e/tau).",
        emoji="🧮",
    )
    ctx.register_tool(
        name="unit_convert",
        toolset="calculator",
        schema=schemas.UNIT_CONVERT,
        handler=tools.unit_convert,
        description="Convert length, weight, temperature, data-size and time units.",
        emoji="🧮",
    )
    ctx.register_hook("post_tool_call", _on_post_tool_call)
    for skill_dir in sorted(SKILLS_DIR.iterdir()):
        if (skill_dir / "SKILL.md").is_file():
            ctx.register_skill(skill_dir.name, skill_dir / "SKILL.md")
