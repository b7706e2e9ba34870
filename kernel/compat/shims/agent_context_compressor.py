"""``agent.context_compressor`` for plugins written for Hermes Agent: a working ``ContextCompressor``.

It is a :class:`~kernel.providers.context_engine.ContextEngine` (so a plugin may subclass it and
register it with ``ctx.register_context_engine``) that compresses when the last prompt passed
``threshold_percent`` of the context: it keeps the first ``protect_first_n`` and last
``protect_last_n`` messages and replaces the ones between with one message that starts with
:data:`SUMMARY_PREFIX`.  Unlike Hermes' own, it calls no model: the summary lists the dropped turns,
each cut short (about ``summary_target_ratio`` of the tokens it replaces); a subclass that wants a
model-written summary overrides ``summarize``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ...providers.context_engine import ContextEngine

__all__ = [
    "COMPRESSED_SUMMARY_METADATA_KEY",
    "HISTORICAL_IN_PROGRESS_HEADING",
    "HISTORICAL_PENDING_ASKS_HEADING",
    "HISTORICAL_REMAINING_WORK_HEADING",
    "HISTORICAL_TASK_HEADING",
    "LEGACY_SUMMARY_PREFIX",
    "MINIMUM_CONTEXT_LENGTH",
    "SUMMARY_PREFIX",
    "ContextCompressor",
]

SUMMARY_PREFIX = (
    "[CONTEXT COMPACTION - REFERENCE ONLY] Earlier turns of this conversation were replaced by the "
    "summary below; use it as background, and answer the latest message."
)
LEGACY_SUMMARY_PREFIX = "[CONTEXT SUMMARY]:"
COMPRESSED_SUMMARY_METADATA_KEY = "_compressed_summary"
MINIMUM_CONTEXT_LENGTH = 64_000
HISTORICAL_TASK_HEADING = "## Historical Task Snapshot"
HISTORICAL_IN_PROGRESS_HEADING = "## Historical In-Progress State"
HISTORICAL_PENDING_ASKS_HEADING = "## Historical Pending User Asks"
HISTORICAL_REMAINING_WORK_HEADING = "## Historical Remaining Work"
_CHARS_PER_TOKEN = 4


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def _tokens(messages: list[dict[str, Any]]) -> int:
    return (
        sum(len(_text(m)) + len(json.dumps(m.get("tool_calls") or "")) for m in messages) // _CHARS_PER_TOKEN
    )


class ContextCompressor(ContextEngine):
    """Keeps the head and tail of the conversation and summarises the middle (see the module)."""

    def __init__(
        self,
        model: str,
        threshold_percent: float = 0.5,
        protect_first_n: int = 3,
        protect_last_n: int = 20,
        summary_target_ratio: float = 0.2,
        quiet_mode: bool = False,
        summary_model_override: str | None = None,
        base_url: str = "",
        api_key: str = "",
        config_context_length: int | None = None,
        provider: str = "",
        api_mode: str = "",
        abort_on_summary_failure: bool = False,
        max_tokens: int | None = None,
    ) -> None:
        self.threshold_percent = threshold_percent
        super().__init__(max(config_context_length or 128_000, MINIMUM_CONTEXT_LENGTH))
        self.model, self.base_url, self.api_key = model, base_url, api_key
        self.provider, self.api_mode, self.max_tokens = provider, api_mode, max_tokens
        self.protect_first_n, self.protect_last_n = protect_first_n, protect_last_n
        self.summary_target_ratio = summary_target_ratio
        self.quiet_mode = quiet_mode
        self.summary_model = summary_model_override or model
        self.abort_on_summary_failure = abort_on_summary_failure
        self.session_id = ""
        self.session_db: Any = None
        self._cooldown_until = 0.0

    @property
    def name(self) -> str:
        return "compressor"

    def update_model(  # type: ignore[override]  # Hermes' own signature (no **kwargs), kept
        self,
        model: str,
        context_length: int,
        base_url: str = "",
        api_key: Any = "",
        provider: str = "",
        api_mode: str = "",
        max_tokens: int | None = None,
    ) -> None:
        """The active model changed: adopt it and its context length."""
        super().update_model(model, max(context_length, 1))
        self.model, self.base_url, self.api_key = model, base_url, api_key
        self.provider, self.api_mode, self.max_tokens = provider, api_mode, max_tokens

    def update_from_response(self, usage: dict[str, Any]) -> None:
        self.last_prompt_tokens = int(usage.get("prompt_tokens", usage.get("input_tokens", 0)) or 0)
        self.last_completion_tokens = int(usage.get("completion_tokens", usage.get("output_tokens", 0)) or 0)
        self.last_total_tokens = int(usage.get("total_tokens", 0) or 0) or (
            self.last_prompt_tokens + self.last_completion_tokens
        )

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        tokens = self.last_prompt_tokens if prompt_tokens is None else prompt_tokens
        return bool(self.threshold_tokens) and tokens >= self.threshold_tokens

    def should_compress_preflight(self, messages: list[dict[str, Any]]) -> bool:
        return self.should_compress(_tokens(messages))

    def should_defer_preflight_to_real_usage(self, rough_tokens: int) -> bool:
        """Whether a rough estimate is close enough to the threshold to wait for the real count."""
        return self.last_prompt_tokens == 0 and rough_tokens < self.threshold_tokens * 1.2

    def has_content_to_compress(self, messages: list[dict[str, Any]]) -> bool:
        """Whether any message lies between the protected head and tail."""
        return len(messages) > self.protect_first_n + self.protect_last_n

    def bind_session_state(self, session_db: Any = None, session_id: str = "") -> None:
        self.session_db, self.session_id = session_db, session_id

    def on_session_start(self, session_id: str, **kwargs: Any) -> None:
        self.session_id = session_id

    def record_completed_compaction(self, *, used_fallback: bool = False) -> None:
        """Count one compaction (the kernel's summary never needs a fallback)."""
        self.compression_count += 1

    def get_active_compression_failure_cooldown(self, *, refresh: bool = False) -> dict[str, Any] | None:
        """The pause after a failed summary, if one is running (this compressor's summary cannot fail)."""
        remaining = self._cooldown_until - time.time()
        return {"seconds_remaining": remaining} if remaining > 0 else None

    def summarize(self, messages: list[dict[str, Any]], focus_topic: str | None = None) -> str:
        """The text standing for ``messages``: one short line per message."""
        budget = max(int(_tokens(messages) * self.summary_target_ratio) * _CHARS_PER_TOKEN, 400)
        per_message = max(budget // max(len(messages), 1), 40)
        lines = [f"Focus: {focus_topic}"] if focus_topic else []
        for message in messages:
            text = " ".join(_text(message).split())
            if len(text) > per_message:
                text = text[: per_message - 3] + "..."
            lines.append(f"- {message.get('role', '?')}: {text}")
        return "\n".join(lines)

    def compress(
        self,
        messages: list[dict[str, Any]],
        current_tokens: int | None = None,
        focus_topic: str | None = None,
        force: bool = False,
        memory_context: str = "",
    ) -> list[dict[str, Any]]:
        if not self.has_content_to_compress(messages):
            return list(messages)
        head = list(messages[: self.protect_first_n])
        tail_start = len(messages) - self.protect_last_n
        # Never split a tool call from its results: the tail starts at a message that is not a tool result.
        while tail_start > self.protect_first_n and messages[tail_start].get("role") == "tool":
            tail_start -= 1
        middle, tail = messages[self.protect_first_n : tail_start], list(messages[tail_start:])
        if not middle:
            return list(messages)
        summary = f"{SUMMARY_PREFIX}\n\n{self.summarize(middle, focus_topic)}"
        if memory_context:
            summary += f"\n\nMemory:\n{memory_context}"
        self.record_completed_compaction()
        return [*head, {"role": "user", "content": summary, COMPRESSED_SUMMARY_METADATA_KEY: True}, *tail]
