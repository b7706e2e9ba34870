"""``ContextEngine``: decides when and how to shrink the conversation (the ``context_engine`` slot)."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

# Served to context engines under Hermes' module (agent.context_engine).
from ..base.data import MEMORY_CONTEXT_MAX_CHARS as MEMORY_CONTEXT_MAX_CHARS
from ..base.data import sanitize_memory_context as sanitize_memory_context


class ContextEngine(ABC):
    """Subclass and implement ``name``, ``should_compress``, ``compress`` and ``update_from_response``.

    The engine keeps the token bookkeeping attributes below up to date; the
    agent loop consults it before each model call.  ``context.engine`` in
    config.yaml selects the active one (default ``compressor``).  The counters
    have class-level defaults, so an engine that never calls
    ``super().__init__()`` still has them (``context_length`` 0 until
    :meth:`update_model` gives one).
    """

    threshold_percent: float = 0.75
    protect_first_n: int = 3
    protect_last_n: int = 6

    context_length: int = 0
    threshold_tokens: int = 0
    last_prompt_tokens: int = 0
    last_completion_tokens: int = 0
    last_total_tokens: int = 0
    compression_count: int = 0

    def __init__(self, context_length: int = 128_000) -> None:
        self.context_length = context_length
        self.threshold_tokens = int(context_length * self.threshold_percent)
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self.last_total_tokens = 0
        self.compression_count = 0

    @property
    @abstractmethod
    def name(self) -> str:
        """The engine's name, as config.yaml selects it."""

    @abstractmethod
    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        """Whether the conversation should be compressed before the next call."""

    @abstractmethod
    def compress(
        self,
        messages: list[dict[str, Any]],
        current_tokens: int | None = None,
        focus_topic: str | None = None,
        force: bool = False,
        memory_context: str = "",
    ) -> list[dict[str, Any]]:
        """A shorter list of messages standing for ``messages``.

        ``memory_context`` is what the memory provider's ``on_pre_compress``
        returned (an engine written without that parameter is called without it).
        """

    @abstractmethod
    def update_from_response(self, usage: dict[str, Any]) -> None:
        """Take the token counts of the latest response.

        ``usage`` has ``input_tokens``, ``output_tokens``, ``total_tokens`` (and
        cache counts when known), plus the same counts as ``prompt_tokens`` /
        ``completion_tokens``, the names Hermes engines read.
        """

    def is_available(self) -> bool:
        return True

    def should_compress_preflight(self, messages: list[dict[str, Any]]) -> bool:
        """A cheap check of the messages about to be sent, before any token count exists (default: no).

        The agent loop asks it before each model call, next to
        :meth:`should_compress`; either one saying yes compresses.
        """
        return False

    def should_defer_preflight_to_real_usage(self, rough_tokens: int) -> bool:
        """Whether a rough pre-call estimate of ``rough_tokens`` should wait for the real usage of
        the next response instead of compressing now (default: no)."""
        return False

    def has_content_to_compress(self, messages: list[dict[str, Any]]) -> bool:
        """Whether ``messages`` hold anything this engine could shrink; ``/compress`` reports
        "nothing to compress" on ``False`` (default: yes)."""
        return True

    def update_model(
        self,
        model: str,
        context_length: int,
        base_url: str = "",
        api_key: str = "",
        provider: str = "",
        api_mode: str = "",
        **kwargs: Any,
    ) -> None:
        """The active model changed: adopt its context length (the endpoint details are for
        engines that call a model of their own)."""
        self.context_length = context_length
        self.threshold_tokens = int(context_length * self.threshold_percent)

    def on_session_start(self, session_id: str, **kwargs: Any) -> None:
        """A session begins (default: nothing)."""
        return None

    def on_session_end(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """A session ends (default: nothing)."""
        return None

    def on_session_reset(self) -> None:
        """``/new`` or ``/reset``: forget the session's counts (the default zeroes the token counters
        and ``compression_count``)."""
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self.last_total_tokens = 0
        self.compression_count = 0

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        """Tools the active engine offers the model (default: none); calls reach :meth:`handle_tool_call`."""
        return []

    def handle_tool_call(self, name: str, args: dict[str, Any], **kwargs: Any) -> str:
        """Run the engine's tool ``name``; return a JSON string."""
        return json.dumps({"error": f"context engine '{self.name}' has no tool '{name}'"})

    def get_status(self) -> dict[str, Any]:
        """For status displays; ``usage_percent`` is the last prompt's share of the context (0-100)."""
        prompt = max(self.last_prompt_tokens, 0)
        usage = min(100.0, prompt / self.context_length * 100) if self.context_length > 0 else 0
        return {
            "name": self.name,
            "context_length": self.context_length,
            "threshold_tokens": self.threshold_tokens,
            "last_prompt_tokens": prompt,
            "usage_percent": usage,
            "compression_count": self.compression_count,
        }
