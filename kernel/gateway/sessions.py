"""Where the gateway keeps its conversations: a session store, SQLite or Redis.

A chat's state (:class:`SessionState`: the session id, the conversation, the number of turns) is
saved after every turn and every ``/new`` or ``/reset``, and read back when the chat's next message
arrives — in another process, on another machine, or after a restart.  ``gateway.sessions.store``
chooses: ``sqlite`` (``<home>/gateway/sessions.db``; the default without a broker) or ``redis`` (the
broker's server; the default with one, where a worker saves the state in the same atomic step that
hands the reply back).

What is read back came from outside the process: it is bounded (:data:`MAX_STATE_BYTES`, the JSON's
depth) and checked; a record that cannot be used is kept aside under another key (never
overwritten) and the chat starts a new conversation, with a warning in the log naming the store and
the key.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.safe_yaml import json_text_size

#: The largest state a store keeps (its JSON, in UTF-8 bytes); a bigger one is not saved (and logged).
MAX_STATE_BYTES = 32 * 1024 * 1024
#: The deepest JSON nesting accepted when a state is read back.
MAX_STATE_DEPTH = 64
#: A JSON string (its escapes included), and the brackets left once strings are taken out.
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")
#: "The store was not read": what a caller passes when it has no record in hand.
NOT_READ = object()


class SessionStoreError(Exception):
    """A state that cannot be saved (too big, or not JSON)."""


@dataclass
class SessionState:
    """What a chat's next turn needs, wherever it runs."""

    session_id: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    #: True once ``on_session_finalize`` fired for ``session_id`` (a single-process gateway's stop):
    #: the conversation then goes on under a new session id, so no id is finalized twice.
    finalized: bool = False

    def dumps(self) -> str:
        """The state as JSON text; :class:`SessionStoreError` when it is too big or not JSON."""
        try:
            text = json.dumps(
                {
                    "session_id": self.session_id,
                    "messages": self.messages,
                    "turns": self.turns,
                    "finalized": self.finalized,
                    "saved_at": time.time(),
                },
                # ASCII: a lone surrogate from a chat stays an escape, which SQLite and Redis accept.
                allow_nan=False,
            )
        except (TypeError, ValueError, RecursionError) as exc:
            raise SessionStoreError(f"the conversation cannot be saved as JSON: {exc}") from None
        if json_text_size(text) > MAX_STATE_BYTES:
            raise SessionStoreError(
                f"the conversation is larger than {MAX_STATE_BYTES // (1024 * 1024)} MiB and was not saved"
            )
        return text

    @classmethod
    def loads(cls, text: str | bytes) -> SessionState:
        """Read a state back; ``ValueError`` saying what is wrong with it."""
        data = read_json_object(text, MAX_STATE_BYTES)
        session_id, messages, turns = data.get("session_id"), data.get("messages"), data.get("turns", 0)
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("no session_id")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise ValueError("'messages' is not a list of objects")
        if type(turns) is not int or turns < 0:
            raise ValueError("'turns' is not a whole number")
        return cls(session_id, messages, turns, data.get("finalized") is True)


def read_json_object(text: str | bytes, limit: int) -> dict[str, Any]:
    """A JSON object read from outside the process: at most ``limit`` UTF-8 bytes of JSON (non-ASCII
    text counted as itself, not as its ``\\uXXXX`` escapes) and :data:`MAX_STATE_DEPTH` levels deep,
    checked before parsing; ``ValueError`` saying what is wrong."""
    # An escape is at most 3 times the size of what it stands for: a text past that is not even counted.
    if len(text) > 3 * limit or json_text_size(text) > limit:
        raise ValueError(f"larger than {limit} bytes")
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    _check_depth(text)
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object but {type(data).__name__}")
    return data


def _check_depth(text: str) -> None:
    """Refuse JSON nested deeper than :data:`MAX_STATE_DEPTH` before ``json.loads`` recurses into it."""
    if text.count("[") + text.count("{") <= MAX_STATE_DEPTH:
        return  # not even that many openings, inside strings or not
    depth = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub("", text)):
        if bracket in "[{":
            depth += 1
            if depth > MAX_STATE_DEPTH:
                raise ValueError(f"nested deeper than {MAX_STATE_DEPTH} levels")
        else:
            depth -= 1


class SessionStore(ABC):
    """The chats' states, by chat key (``"<platform>:<chat id>"``)."""

    #: ``"sqlite"`` or ``"redis"``: what ``gateway status`` shows.
    kind: str = ""

    @abstractmethod
    async def load(self, key: str) -> SessionState | None:
        """The chat's state, or ``None`` when it has none (or its record could not be used)."""

    @abstractmethod
    async def save(self, key: str, state: SessionState) -> None:
        """Keep ``state`` as the chat's; :class:`SessionStoreError` when it cannot be."""

    def describe(self) -> dict[str, Any]:
        """What ``gateway status --json`` shows of the store (no secret)."""
        return {"store": self.kind}

    async def aclose(self) -> None:  # noqa: B027 - a store may have nothing to release
        """Release the store's connections."""


class SqliteSessionStore(SessionStore):
    """The states in one SQLite file (WAL mode: several processes of one machine may share it)."""

    kind = "sqlite"

    def __init__(self, path: Path | str, *, log: Any = None) -> None:
        self.path = Path(path)
        self._log = log
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def describe(self) -> dict[str, Any]:
        return {"store": self.kind, "path": str(self.path)}

    def _open(self, target: Path | str) -> sqlite3.Connection:
        db = sqlite3.connect(target, timeout=30, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS sessions "
                "(key TEXT PRIMARY KEY, state TEXT NOT NULL, updated REAL)"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS unreadable (key TEXT, state BLOB, problem TEXT, kept REAL)"
            )
            # A file that is not a database, or a damaged one, says so here rather than mid-turn.
            db.execute("SELECT count(*) FROM sessions").fetchone()
        except BaseException:
            db.close()
            raise
        return db

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._db = self._open(self.path)
            except sqlite3.Error as exc:
                if not _damaged(exc):
                    raise
                self._db = self._replace(exc)
        return self._db

    def _replace(self, exc: sqlite3.Error) -> sqlite3.Connection:
        """A fresh store in place of a damaged or unreadable file, which is moved aside (kept) and logged;
        in memory when even that fails (the conversations then last until the process stops)."""
        problem = f"{type(exc).__name__}: {exc}"
        if self._db is not None:
            self._db.close()
            self._db = None
        stamp = f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}"
        aside, serial = self.path.with_name(stamp), 1
        while aside.exists() or aside.is_symlink():  # never over an earlier one
            serial += 1
            aside = self.path.with_name(f"{stamp}-{serial}")
        try:
            if self.path.exists() or self.path.is_symlink():
                self.path.rename(aside)
            for suffix in ("-wal", "-shm"):  # the journal of the damaged file, not of the new one
                companion = self.path.with_name(self.path.name + suffix)
                if companion.exists() or companion.is_symlink():
                    companion.rename(aside.with_name(aside.name + suffix))
            db = self._open(self.path)
        except (OSError, sqlite3.Error) as again:
            if self._log is not None:
                self._log.error(
                    "gateway_session_store_unusable",
                    store=str(self.path),
                    problem=problem,
                    error=f"{type(again).__name__}: {again}",
                    fix=f"the conversations are kept in memory until the gateway stops; make {self.path} "
                    "a writable file (or remove it) and restart the gateway",
                )
            return self._open(":memory:")
        if self._log is not None:
            self._log.warning(
                "gateway_session_store_replaced",
                store=str(self.path),
                problem=problem,
                moved_to=str(aside),
                fix=f"the chats start new conversations in a fresh {self.path.name}; the old file was "
                f"kept as {aside} for inspection (sqlite3 .recover can read what is left of it)",
            )
        return db

    def _run(self, step: Any) -> Any:
        """``step(connection)``, once more on a fresh store when the file turns out to be damaged."""
        try:
            return step(self._connect())
        except sqlite3.Error as exc:
            if not _damaged(exc):
                raise
            self._db = self._replace(exc)
            return step(self._db)

    def load_now(self, key: str) -> SessionState | None:
        """:meth:`load`, on the calling thread."""
        with self._lock:
            row = self._run(
                lambda db: db.execute("SELECT state FROM sessions WHERE key = ?", (key,)).fetchone()
            )
            if row is None:
                return None
            db = self._connect()
            try:
                return SessionState.loads(row[0])
            except (ValueError, RecursionError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO unreadable VALUES (?, ?, ?, ?)", (key, row[0], problem, time.time()))
            db.execute("DELETE FROM sessions WHERE key = ?", (key,))
            db.execute("COMMIT")
        _warn_unreadable(self._log, f"{self.path} (table sessions)", key, problem, "table unreadable")
        return None

    def save_now(self, key: str, state: SessionState) -> None:
        """:meth:`save`, on the calling thread."""
        text = state.dumps()
        with self._lock:
            self._run(
                lambda db: db.execute(
                    "INSERT INTO sessions VALUES (?, ?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET state = excluded.state, updated = excluded.updated",
                    (key, text, time.time()),
                )
            )

    async def load(self, key: str) -> SessionState | None:
        return await asyncio.to_thread(self.load_now, key)

    async def save(self, key: str, state: SessionState) -> None:
        await asyncio.to_thread(self.save_now, key, state)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    async def aclose(self) -> None:
        self.close()


#: SQLite's primary result codes for a file that is not a usable database (damaged, not a database,
#: not openable, not writable); "busy" or "locked" (another process) is not among them.
_DAMAGED = {3, 8, 11, 14, 26}  # PERM, READONLY, CORRUPT, CANTOPEN, NOTADB


def _damaged(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _DAMAGED


def _warn_unreadable(log: Any, where: str, key: str, problem: str, kept: str) -> None:
    if log is not None:
        log.warning(
            "gateway_session_unreadable",
            store=where,
            key=key,
            problem=problem,
            kept_in=kept,
            fix="the chat starts a new conversation; the unreadable record was kept aside, not deleted",
        )
