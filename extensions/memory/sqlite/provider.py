"""``SqliteMemoryProvider``: the bundled, embedded default memory provider (``memory.provider: sqlite``)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from kernel import MemoryProvider
from kernel.base.config import resolve_home

from .store import (
    MAX_CONTENT_CHARS,
    MAX_LIMIT,
    MemoryStore,
    has_fts5,
    is_trivial,
    keywords,
    normalize_tags,
    words,
)

#: Where the database lives, relative to the Hermes home.
DB_RELATIVE = Path("memory") / "memory.db"
#: How many past snippets ``prefetch`` recalls at most.
PREFETCH_LIMIT = 5
#: The longest text ``prefetch`` returns.
PREFETCH_MAX_CHARS = 1600
#: The longest one recalled snippet may be.
SNIPPET_CHARS = 320

PREFETCH_HEADER = "Recalled from memory (earlier conversations and notes, most relevant first):"

SEARCH_SCHEMA: dict[str, Any] = {
    "name": "memory_search",
    "description": (
        "Search long-term memory (earlier conversations and saved notes) by keywords. "
        "Returns the best matches, most relevant first, each with id, content, created_at and session_id."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "the words to look for"},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "description": "how many results at most (default 5)",
            },
        },
        "required": ["query"],
    },
}

STORE_SCHEMA: dict[str, Any] = {
    "name": "memory_store",
    "description": (
        "Save a fact, preference or decision to long-term memory so that later sessions can find it "
        "with memory_search. Store one self-contained statement per call."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "the text to remember"},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "description": "optional labels that help finding it again",
            },
            "kind": {
                "type": "string",
                "description": "optional category, e.g. fact, preference, decision (default note)",
            },
        },
        "required": ["content"],
    },
}

_LOG = logging.getLogger(__name__)


class SqliteMemoryProvider(MemoryProvider):
    """Remembers turns and notes in ``<home>/memory/memory.db`` and recalls them with FTS5 (bm25)."""

    def __init__(
        self, home: str | os.PathLike[str] | None = None, *, logger: logging.Logger | None = None
    ) -> None:
        self._home = Path(home).expanduser() if home is not None else None
        self._log = logger or _LOG
        self._store: MemoryStore | None = None
        self.session_id = ""
        self.platform = ""

    # -- identity and availability -------------------------------------------------

    @property
    def name(self) -> str:
        return "sqlite"

    @property
    def home(self) -> Path:
        """The Hermes home the database belongs to."""
        return self._home if self._home is not None else resolve_home(None)

    @property
    def db_path(self) -> Path:
        """``<home>/memory/memory.db`` (created on first use, not before)."""
        return self.home / DB_RELATIVE

    @property
    def store(self) -> MemoryStore:
        if self._store is None:
            self._store = MemoryStore(self.db_path)
        return self._store

    def is_available(self) -> bool:
        return has_fts5()

    def unavailable_reason(self) -> str:
        if has_fts5():
            return ""
        return "this Python's sqlite3 module was built without FTS5 (full-text search)"

    # -- session lifecycle ---------------------------------------------------------

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        """Remember the session; ``hermes_home`` is used only when no home was given at construction."""
        self.session_id = str(session_id or "")
        self.platform = str(kwargs.get("platform") or "")
        hermes_home = kwargs.get("hermes_home")
        if self._home is None and hermes_home:
            self._home = Path(hermes_home).expanduser()
            self._close_store()

    def on_session_switch(self, new_session_id: str, **kwargs: Any) -> None:
        """``/new`` or ``/reset``: what is stored from now on belongs to ``new_session_id``."""
        self.session_id = str(new_session_id or "")

    def system_prompt_block(self) -> str:
        return (
            "You have a long-term memory that persists across sessions. Use memory_search to look up "
            "what was said or decided earlier, and memory_store to save a fact, preference or decision "
            "worth keeping. Snippets recalled automatically appear under 'Recalled from memory'."
        )

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        """The most relevant past snippets for ``query`` as a short block ("" when nothing matches)."""
        if is_trivial(query):
            return ""
        try:
            found = self.store.search(keywords(query), PREFETCH_LIMIT)
        except Exception as exc:
            self._log.warning("sqlite memory: prefetch failed: %s: %s", type(exc).__name__, exc)
            return ""
        if not found:
            return ""
        lines = [PREFETCH_HEADER]
        size = len(PREFETCH_HEADER)
        for memory in found:
            line = f"- [{memory['created_at'][:10]}] {_snippet(memory['content'])}"
            if size + 1 + len(line) > PREFETCH_MAX_CHARS:
                break
            lines.append(line)
            size += 1 + len(line)
        return "\n".join(lines) if len(lines) > 1 else ""

    def sync_turn(
        self, user_content: str, assistant_content: str, *, session_id: str = "", **kwargs: Any
    ) -> None:
        """Store one finished turn (user and assistant text together) as a memory of kind ``turn``.

        Raises ``sqlite3.Error`` only when the database stays locked through every retry.
        """
        user = _text(user_content).strip()
        assistant = _text(assistant_content).strip()
        if not user and not assistant:
            return
        parts = [f"User: {user}" if user else "", f"Assistant: {assistant}" if assistant else ""]
        content = "\n".join(p for p in parts if p)[:MAX_CONTENT_CHARS]
        self.store.add(content, session_id=session_id or self.session_id, kind="turn", source="sync_turn")

    def on_session_end(self, messages: list[dict[str, Any]]) -> None:
        """Nothing to do: every turn was stored by ``sync_turn`` already."""
        return None

    def shutdown(self) -> None:
        self._close_store()

    def _close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()

    # -- tools ---------------------------------------------------------------------

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return [SEARCH_SCHEMA, STORE_SCHEMA]

    def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        """Run ``memory_search`` or ``memory_store``; always a JSON string, errors as ``{"error": ...}``."""
        try:
            if isinstance(args, str):
                args = json.loads(args) if args.strip() else {}
            if not isinstance(args, dict):
                return _error(f"{tool_name} needs a JSON object of arguments")
            if tool_name == "memory_search":
                return self._tool_search(args)
            if tool_name == "memory_store":
                return self._tool_store(args, str(kwargs.get("session_id") or self.session_id or ""))
            return _error(f"memory provider 'sqlite' has no tool '{tool_name}'")
        except Exception as exc:
            return _error(f"{tool_name} failed: {type(exc).__name__}: {exc}")

    def _tool_search(self, args: dict[str, Any]) -> str:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            return _error("memory_search needs a non-empty string 'query'")
        limit = args.get("limit", 5)
        if isinstance(limit, bool) or not isinstance(limit, int | float) or int(limit) < 1:
            return _error(f"'limit' must be a positive integer (at most {MAX_LIMIT})")
        # Keywords first; a query made only of common words still searches for them.
        terms = keywords(query) or words(query)
        results = self.store.search(terms, min(int(limit), MAX_LIMIT))
        return json.dumps({"query": query, "count": len(results), "results": results}, ensure_ascii=False)

    def _tool_store(self, args: dict[str, Any], session_id: str) -> str:
        content = args.get("content")
        if not isinstance(content, str) or not content.strip():
            return _error("memory_store needs a non-empty string 'content'")
        if len(content) > MAX_CONTENT_CHARS:
            return _error(f"'content' is too long ({len(content)} characters; at most {MAX_CONTENT_CHARS})")
        kind = args.get("kind") or "note"
        if not isinstance(kind, str) or len(kind) > 40:
            return _error("'kind' must be a short string")
        try:
            tags = normalize_tags(args.get("tags"))
        except ValueError as exc:
            return _error(str(exc))
        memory = self.store.add(
            content.strip(), session_id=session_id, kind=kind.strip(), tags=tags, source="memory_store"
        )
        return json.dumps({"stored": True, **memory}, ensure_ascii=False)


def _text(value: Any) -> str:
    """Message content as text: a string, or the text parts of a list of content blocks."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in value]
        return "\n".join(p for p in parts if isinstance(p, str) and p)
    return "" if value is None else str(value)


def _snippet(content: str) -> str:
    flat = " ".join(content.split())
    return flat if len(flat) <= SNIPPET_CHARS else flat[: SNIPPET_CHARS - 1].rstrip() + "…"


def _error(message: str) -> str:
    return json.dumps({"error": message}, ensure_ascii=False)
