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
    Every other method has a harmless default, so an override may call
    ``super()``; the reference agent loop (:class:`kernel.agent.AgentSession`)
    calls them at the moments their docstrings name, and a method that raises
    is logged without breaking the turn.
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
        """Prepare for a session (``hermes_home``, ``platform`` and more arrive as keywords).

        Called once per session object, before its first turn; a later ``/new``
        or ``/reset`` calls :meth:`on_session_switch` instead.
        """

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

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        """A turn finished: start recalling for the next turn's :meth:`prefetch` (default: nothing).

        ``query`` is the finished turn's user message.
        """
        return None

    def sync_turn(
        self,
        user_content: str,
        assistant_content: str,
        *,
        session_id: str = "",
        messages: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        """Store one finished turn (default: nothing).

        ``messages`` is the conversation as of the finished turn (tool calls and results included),
        a copy of its own; a provider whose ``sync_turn`` lacks the parameter is called without it.
        """
        return None

    def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        """Run one of the provider's tools; return a JSON string."""
        return json.dumps({"error": f"memory provider '{self.name}' has no tool '{tool_name}'"})

    def on_turn_start(self, turn_number: int, message: str, **kwargs: Any) -> None:
        """A turn begins (``turn_number`` counts from 1 in the session), before :meth:`prefetch`.

        Keywords the host adds: ``model``, ``platform``, ``session_id`` (an
        override that does not take them is not given them) (default: nothing).
        """
        return None

    def on_session_end(self, messages: list[dict[str, Any]]) -> None:
        """The session ended (default: nothing)."""
        return None

    def on_session_switch(
        self,
        new_session_id: str,
        *,
        parent_session_id: str = "",
        reset: bool = False,
        rewound: bool = False,
        **kwargs: Any,
    ) -> None:
        """The session id changed while the provider stays initialized (default: nothing).

        ``/new`` and ``/reset`` call it with ``reset=True`` and the old id as
        ``parent_session_id`` (and ``reason``): drop per-session buffers and
        write under ``new_session_id`` from now on.
        """
        return None

    def on_pre_compress(self, messages: list[dict[str, Any]]) -> str:
        """The context engine is about to compress ``messages``: text worth keeping, or ``""`` (default).

        Non-empty text reaches the engine's ``compress`` as ``memory_context``
        when the engine accepts that argument.
        """
        return ""

    def on_delegation(self, task: str, result: str, *, child_session_id: str = "", **kwargs: Any) -> None:
        """A sub-agent this session delegated ``task`` to came back with ``result`` (default: nothing)."""
        return None

    def on_memory_write(
        self, action: str, target: str, content: str, metadata: dict[str, Any] | None = None
    ) -> None:
        """The host's built-in memory wrote an entry (``action`` add/replace/remove, ``target``
        memory/user): mirror it if you like (default: nothing)."""
        return None

    def get_config_schema(self) -> list[dict[str, Any]]:
        """The settings the provider needs, for a setup dialog (default: none).

        Each field is a dict with ``key`` and ``description``, optionally
        ``secret``, ``required``, ``default``, ``choices``, ``url``, ``env_var``.
        """
        return []

    def save_config(self, values: dict[str, Any], hermes_home: str) -> None:
        """Save the non-secret ``values`` of a setup where the provider keeps its config (default: nothing).

        ``hermes_home`` is the kernel's home, as a string.
        """
        return None

    def backup_paths(self) -> list[str]:
        """Absolute paths outside the home where the provider keeps state, for backups (default: none).

        Must work without :meth:`initialize` and without the network.
        """
        return []

    def shutdown(self) -> None:
        """Release resources (default: nothing)."""
        return None
