"""``/paste-to-tasks <notes>``: meeting notes in, one ``- [owner] action`` line per task out.

Uses ``ctx.llm.complete_structured`` with a JSON schema: the host asks the
model for JSON (``response_format``), parses the reply itself (a fenced
```json block or the whole text) and validates it.  When the reply is not
valid JSON or does not match the schema, ``result.parsed`` is None and the
command shows the raw reply instead.
"""

from __future__ import annotations

from typing import Any

TASKS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tasks": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "owner": {"type": "string"},
                    "action": {"type": "string"},
                    "due": {"type": "string", "description": "ISO date or empty"},
                },
                "required": ["action"],
            },
        },
    },
    "required": ["tasks"],
}

INSTRUCTIONS = (
    "Extract the concrete action items from these meeting notes. "
    "One task per line that calls for an action. Leave 'owner' empty when nobody is named."
)
USAGE = "Usage: /paste-to-tasks <meeting notes>"
RAW_OUTPUT = "Could not parse the reply. Raw output:\n"
NO_TASKS = "(no tasks found)"


def register(ctx: Any) -> None:
    ctx.register_command(
        name="paste-to-tasks",
        handler=lambda raw: paste_to_tasks(ctx, raw),
        description="Turn free-form meeting notes into structured tasks",
        args_hint="<text>",
    )


def paste_to_tasks(ctx: Any, raw_args: str) -> str:
    if not raw_args.strip():
        return USAGE
    result = ctx.llm.complete_structured(
        instructions=INSTRUCTIONS,
        input=[{"type": "text", "text": raw_args}],
        json_schema=TASKS_SCHEMA,
        schema_name="meeting.tasks",
        purpose="paste-to-tasks",
        temperature=0.0,
        max_tokens=512,
    )
    if result.parsed is None:
        return RAW_OUTPUT + result.text
    lines = [f"- [{task.get('owner') or '?'}] {task['action']}" for task in result.parsed["tasks"]]
    return "\n".join(lines) or NO_TASKS
