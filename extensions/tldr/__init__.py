"""``/tldr <text>``: the user's model sums the text up in one short paragraph.

The plainest use of ``ctx.llm``: one chat completion on the user's active
provider and model, no overrides, so no trust-gate configuration is needed.
``purpose="tldr"`` tags the call in ``agent.log`` and ``result.audit``.
"""

from __future__ import annotations

from typing import Any

SYSTEM_PROMPT = "Summarize the user's text in one short paragraph. No preamble."
USAGE = "Usage: /tldr <text to summarize>"


def register(ctx: Any) -> None:
    ctx.register_command(
        name="tldr",
        handler=lambda raw: tldr(ctx, raw),
        description="Sum the given text up in one paragraph",
        args_hint="<text>",
    )


def tldr(ctx: Any, raw_args: str) -> str:
    text = raw_args.strip()
    if not text:
        return USAGE
    result = ctx.llm.complete(
        messages=[
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": text},
        ],
        max_tokens=256,
        temperature=0.3,
        purpose="tldr",
    )
    return result.text
