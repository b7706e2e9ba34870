"""The database behind the ``sqlite`` memory provider: one SQLite file with an FTS5 index.

Layout: a ``memories`` table (one row per stored turn or note) and ``memories_fts``, an
external-content FTS5 table over ``content`` and ``tags`` kept in step by triggers.

Concurrency: the file is opened in WAL mode with a busy timeout, every write runs in its
own ``BEGIN IMMEDIATE`` transaction, and a write that still meets "database is locked"
is retried a few times with a growing pause.  Several threads (one connection guarded by
a lock) and several processes (SQLite's file locks) can therefore write at the same
time without losing a row.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: How long one statement waits for another connection's lock (milliseconds).
BUSY_TIMEOUT_MS = 5000
#: How long one operation keeps retrying a locked database, in all (seconds); a statement
#: started just before the end may still wait its busy timeout, so about 30 s at most.
LOCK_BUDGET = 25.0
#: The first pause between two attempts (seconds); it doubles each time, up to a second.
RETRY_PAUSE = 0.05
#: At most this many words of a query reach the FTS5 expression.
MAX_TERMS = 24
#: The largest ``limit`` a search accepts.
MAX_LIMIT = 50
#: The longest text one memory may hold.
MAX_CONTENT_CHARS = 20_000

SCHEMA_VERSION = 1

SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS memories (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL DEFAULT '',
        kind TEXT NOT NULL DEFAULT 'note',
        content TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        source TEXT NOT NULL DEFAULT ''
    )
    """,
    "CREATE INDEX IF NOT EXISTS memories_session ON memories(session_id)",
    """
    CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
        content, tags,
        content='memories', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2'
    )
    """,
    """
    CREATE TRIGGER IF NOT EXISTS memories_after_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts(rowid, content, tags) VALUES (new.id, new.content, new.tags);
    END
    """,
    """
    CREATE TRIGGER IF NOT EXISTS memories_after_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, content, tags)
        VALUES ('delete', old.id, old.content, old.tags);
    END
    """,
    """
    CREATE TRIGGER IF NOT EXISTS memories_after_update AFTER UPDATE ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, content, tags)
        VALUES ('delete', old.id, old.content, old.tags);
        INSERT INTO memories_fts(rowid, content, tags) VALUES (new.id, new.content, new.tags);
    END
    """,
)

# Words only: letters and digits.  Everything else (quotes, * ^ : ( ) - + and
# the underscore) separates words, so no FTS5 syntax survives into a term.
_WORD = re.compile(r"[^\W_]+")


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Words too common to say what a query is about.
STOPWORDS = _word_set(
    """
    a about above after again all am an and any are as at be been before being below between both but by
    can could did do does doing down during each few for from further had has have having he her here hers
    him his how i if in into is it its itself just me more most my no nor not now of off on once only or
    other our ours out over own same she should so some such than that the their theirs them then there
    these they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself
    """
)

#: Words of small talk: a query made only of these (and stopwords) recalls nothing.
SMALL_TALK = _word_set(
    """
    hi hello hey hiya yo howdy greetings morning afternoon evening night good goodnight bye goodbye cya
    thanks thank thx ty cheers please pls ok okay k kk fine great cool nice sure yes yeah yep yup no nope
    nah alright right got it lol haha hmm hm oh ah wow welcome sorry np
    """
)


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def words(text: str) -> list[str]:
    """The words of ``text``, case-folded, in order, without repeats."""
    return list(dict.fromkeys(w.casefold() for w in _WORD.findall(text or "")))


def keywords(text: str) -> list[str]:
    """The words of ``text`` that say what it is about (no stopwords or small talk)."""
    out = [
        w for w in words(text) if w not in STOPWORDS and w not in SMALL_TALK and (len(w) > 1 or w.isdigit())
    ]
    return out[:MAX_TERMS]


def is_trivial(query: str) -> bool:
    """True for a query not worth a recall: empty, a slash command, or only greetings and filler."""
    text = (query or "").strip()
    return not text or text.startswith("/") or not keywords(text)


def match_expression(terms: Iterable[str]) -> str:
    """An FTS5 MATCH expression: each term as a quoted string, joined with OR ("" for no terms)."""
    quoted = ['"' + term.replace('"', '""') + '"' for term in terms if term]
    return " OR ".join(quoted)


def is_locked(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "database is locked" / "busy" (worth another attempt)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    message = str(exc).lower()
    return "locked" in message or "busy" in message


_DEADLINE = threading.local()


def retry_locked(fn: Callable[[], T]) -> T:
    """Call ``fn``; while it fails with "database is locked", wait and call it again, within
    :data:`LOCK_BUDGET` seconds in all.  A retry inside another (opening the file inside a
    write) shares the outer one's deadline instead of adding its own."""
    outer = getattr(_DEADLINE, "value", None)
    deadline = outer if outer is not None else time.monotonic() + LOCK_BUDGET
    _DEADLINE.value = deadline
    try:
        pause = RETRY_PAUSE
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not is_locked(exc) or time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
    finally:
        _DEADLINE.value = outer


_FTS5: bool | None = None
_FTS5_LOCK = threading.Lock()


def has_fts5() -> bool:
    """Whether this Python's sqlite3 was built with FTS5 (checked once per process)."""
    global _FTS5
    with _FTS5_LOCK:
        if _FTS5 is None:
            try:
                probe = sqlite3.connect(":memory:")
                try:
                    probe.execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
                    _FTS5 = True
                finally:
                    probe.close()
            except sqlite3.Error:
                _FTS5 = False
        return _FTS5


def _row(row: sqlite3.Row) -> dict[str, Any]:
    out = {
        "id": row["id"],
        "content": row["content"],
        "created_at": row["created_at"],
        "session_id": row["session_id"],
        "kind": row["kind"],
        "tags": [t for t in row["tags"].split(",") if t],
        "source": row["source"],
    }
    if "score" in row.keys():  # noqa: SIM118 - sqlite3.Row has keys(), not __contains__ for names
        out["score"] = round(-float(row["score"]), 6)
    return out


def normalize_tags(tags: Any) -> list[str]:
    """Tags from a list of strings or one comma-separated string; raises ValueError otherwise."""
    if tags is None or tags == "":
        return []
    if isinstance(tags, str):
        items = tags.split(",")
    elif isinstance(tags, list | tuple) and all(isinstance(t, str) for t in tags):
        items = list(tags)
    else:
        raise ValueError("'tags' must be a list of strings or a comma-separated string")
    return list(dict.fromkeys(" ".join(t.replace(",", " ").split()) for t in items if t.strip()))


class MemoryStore:
    """One memory database file; the folder and the file are created on first use."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None

    # -- connection ------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        with self._lock:
            if self._conn is None:
                self._conn = retry_locked(self._open)
            return self._conn

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            str(self.path),
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,  # autocommit; transactions are explicit
            check_same_thread=False,  # shared by threads, serialised by self._lock
        )
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            self._transaction(conn, self._create_schema)
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _create_schema(conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version >= SCHEMA_VERSION:
            return
        for statement in SCHEMA:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @staticmethod
    def _transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            conn.execute("BEGIN IMMEDIATE")
            result = fn(conn)
            conn.execute("COMMIT")
            return result
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in a write transaction, retried while the database is locked."""
        with self._lock:
            return retry_locked(lambda: self._transaction(self._connection(), fn))

    def read(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        """Rows of one SELECT, retried while the database is locked."""
        with self._lock:
            return retry_locked(lambda: self._connection().execute(sql, tuple(params)).fetchall())

    def close(self) -> None:
        """Close the connection (the next use opens it again)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # -- operations -----------------------------------------------------------------

    def add(
        self,
        content: str,
        *,
        session_id: str = "",
        kind: str = "note",
        tags: Iterable[str] = (),
        source: str = "",
    ) -> dict[str, Any]:
        """Store one memory; returns it as a dict (with its ``id``)."""
        created_at = now_iso()
        tag_text = ",".join(tags)

        def insert(conn: sqlite3.Connection) -> int:
            cursor = conn.execute(
                "INSERT INTO memories (session_id, kind, content, tags, created_at, source)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, kind, content, tag_text, created_at, source),
            )
            return int(cursor.lastrowid or 0)

        new_id = self.write(insert)
        return {
            "id": new_id,
            "content": content,
            "created_at": created_at,
            "session_id": session_id,
            "kind": kind,
            "tags": [t for t in tag_text.split(",") if t],
            "source": source,
        }

    def search(self, terms: Iterable[str], limit: int = 5) -> list[dict[str, Any]]:
        """The memories matching any of ``terms``, best first (bm25), at most ``limit``."""
        expression = match_expression(terms)
        if not expression or not self.path.exists():
            return []
        limit = max(1, min(int(limit), MAX_LIMIT))
        rows = self.read(
            "SELECT m.id, m.session_id, m.kind, m.content, m.tags, m.created_at, m.source,"
            " bm25(memories_fts, 1.0, 0.5) AS score"
            " FROM memories_fts JOIN memories AS m ON m.id = memories_fts.rowid"
            " WHERE memories_fts MATCH ? ORDER BY score, m.id DESC LIMIT ?",
            (expression, limit),
        )
        return [_row(r) for r in rows]

    def recent(self, limit: int = 10) -> list[dict[str, Any]]:
        """The newest memories, newest first."""
        if not self.path.exists():
            return []
        rows = self.read(
            "SELECT id, session_id, kind, content, tags, created_at, source FROM memories"
            " ORDER BY id DESC LIMIT ?",
            (max(1, min(int(limit), MAX_LIMIT)),),
        )
        return [_row(r) for r in rows]

    def stats(self) -> dict[str, Any]:
        """Counts and sizes; does not create the database when there is none yet."""
        out: dict[str, Any] = {
            "path": str(self.path),
            "exists": self.path.exists(),
            "memories": 0,
            "sessions": 0,
            "by_kind": {},
            "oldest": None,
            "newest": None,
            "bytes": 0,
        }
        if not out["exists"]:
            return out
        total, sessions, oldest, newest = self.read(
            "SELECT count(*), count(DISTINCT session_id), min(created_at), max(created_at) FROM memories"
        )[0]
        by_kind = self.read("SELECT kind, count(*) FROM memories GROUP BY kind ORDER BY kind")
        out.update(
            memories=total,
            sessions=sessions,
            oldest=oldest,
            newest=newest,
            by_kind={kind: n for kind, n in by_kind},
            bytes=sum(
                p.stat().st_size
                for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
                if p.exists()
            ),
        )
        return out

    def forget_session(self, session_id: str) -> int:
        """Delete every memory of one session; returns how many."""
        if not self.path.exists():
            return 0
        return self.write(
            lambda conn: conn.execute("DELETE FROM memories WHERE session_id = ?", (session_id,)).rowcount
        )

    def clear(self) -> int:
        """Delete every memory; returns how many."""
        if not self.path.exists():
            return 0
        return self.write(lambda conn: conn.execute("DELETE FROM memories").rowcount)
