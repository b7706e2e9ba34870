"""``MemoryProvider``: a backend that remembers across sessions (the ``memory`` slot)."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any


class MemoryProvider(ABC):
    """Subclass, implement the four abstract members, override what else you need.

    One provider is active at a time, chosen by ``memory.provider`` in
    config.yaml.  Its tools (``get_tool_schemas``) are offered to the model
    only while it is the active one; their calls reach ``handle_tool_call``.
    """

    @property
    @abstractmethod
    def name(self) -> str:
        """The provider's name, as config.yaml selects it."""

    @abstractmethod
    def is_available(self) -> bool:
        """Whether it can work now (keys present, library installed); must not touch the network."""

    @abstractmethod
    def initialize(self, session_id: str, **kwargs: Any) -> None:
        """Prepare for a session (``hermes_home``, ``platform`` and more arrive as keywords)."""

    @abstractmethod
    def get_tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI function schemas of the provider's tools (may be empty)."""

    def unavailable_reason(self) -> str:
        """Why ``is_available()`` is false, for ``providers list``."""
        return "is_available() returned False"

    def system_prompt_block(self) -> str:
        """Text for the system prompt (default: none)."""
        return ""

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        """Context recalled for ``query``, injected into the user's message (default: none)."""
        return ""

    def sync_turn(
        self, user_content: str, assistant_content: str, *, session_id: str = "", **kwargs: Any
    ) -> None:
        """Store one finished turn (default: nothing)."""
        return None

    def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        """Run one of the provider's tools; return a JSON string."""
        return json.dumps({"error": f"memory provider '{self.name}' has no tool '{tool_name}'"})

    def on_session_end(self, messages: list[dict[str, Any]]) -> None:
        """The session ended (default: nothing)."""
        return None

    def shutdown(self) -> None:
        """Release resources (default: nothing)."""
        return None
