"""The bundled ``sqlite`` memory provider (extensions/memory/sqlite), through a real kernel.

Every test uses real SQLite files in a temporary home and the checkout's real ``extensions/``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, REPO, cli_env, run_json, write_plugin

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.providers import MemoryProvider
from kernel.providers.manager import ProviderSelectionError
from kernel.testing import scripted_config, write_script

EXTENSIONS = REPO / "extensions"
SQLITE = {"memory": {"provider": "sqlite"}}
TOOLS = ("memory_search", "memory_store")


@pytest.fixture
def kernel(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Kernel]]:
    """``kernel(config=SQLITE, home=home)``: a loaded kernel over the real bundled extensions."""
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(EXTENSIONS))
    made: list[Kernel] = []

    def make(config: dict[str, Any] | None = SQLITE, at: Path | None = None) -> Kernel:
        k = Kernel(home=at or home, config=config)
        made.append(k)
        k.load()
        return k

    yield make
    for k in made:
        k.shutdown()


def db_file(home: Path) -> Path:
    return home / "memory" / "memory.db"


def db_rows(home: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows read straight from the database file, bypassing the provider."""
    conn = sqlite3.connect(str(db_file(home)))
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def store(k: Kernel, content: str, **args: Any) -> dict[str, Any]:
    session_id = args.pop("session_id", "test")
    result = run_json(k.tools.dispatch("memory_store", {"content": content, **args}, session_id=session_id))
    assert result.get("stored") is True, result
    return result


def search(k: Kernel, query: str, **args: Any) -> dict[str, Any]:
    result = run_json(k.tools.dispatch("memory_search", {"query": query, **args}))
    assert "error" not in result, result
    return result


def snippets(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.startswith("- ")]


def plugin_module(provider: Any, name: str) -> Any:
    """A sibling module of the provider's (e.g. its constants), as the kernel imported it."""
    package = type(provider).__module__.rsplit(".", 1)[0]
    return sys.modules[f"{package}.{name}"]


# --------------------------------------------------------------------------
# Selection and tools
# --------------------------------------------------------------------------


def test_sqlite_is_the_active_memory_provider(kernel, home: Path) -> None:
    k = kernel()
    memory = k.providers.memory()
    assert isinstance(memory, MemoryProvider)
    assert memory.name == "sqlite"
    assert memory.is_available() is True
    assert k.slots.get("memory", "sqlite").plugin == "memory/sqlite"

    info = k.plugin("memory/sqlite")
    assert info.enabled and info.error is None, info
    assert info.kind == "backend"
    assert info.warnings == [], info.warnings
    assert sorted(info.tools) == sorted(TOOLS)

    schemas = {s.get("function", s)["name"]: s.get("function", s) for s in k.tools.schemas()}
    for name in TOOLS:
        assert name in schemas
    assert schemas["memory_search"]["parameters"]["required"] == ["query"]
    assert set(schemas["memory_search"]["parameters"]["properties"]) == {"query", "limit"}
    assert schemas["memory_store"]["parameters"]["required"] == ["content"]
    assert {"content", "tags", "kind"} <= set(schemas["memory_store"]["parameters"]["properties"])
    assert k.tools.get("memory_search").plugin == "memory/sqlite"

    block = memory.system_prompt_block()
    assert "memory_search" in block and "memory_store" in block
    # Nothing is written until the provider is first used.
    assert not (home / "memory").exists()


def test_tools_exist_only_while_sqlite_is_active(kernel, home: Path) -> None:
    k = kernel(config=None)
    assert "sqlite" in k.slots.providers("memory")
    assert k.plugin("memory/sqlite").enabled
    assert k.providers.memory() is None
    names = {s.get("function", s)["name"] for s in k.tools.schemas()}
    assert not names & set(TOOLS), names
    assert "unknown tool" in run_json(k.tools.dispatch("memory_search", {"query": "x"}))["error"]
    assert not (home / "memory").exists()

    other = home.parent / "other-home"
    other.mkdir()
    active = kernel(at=other)
    names = {s.get("function", s)["name"] for s in active.tools.schemas()}
    assert set(TOOLS) <= names


def test_store_then_search_through_dispatch(kernel, home: Path) -> None:
    k = kernel()
    first = store(k, "The staging database password rotates every 30 days", tags=["ops", "security"])
    second = store(k, "Alice prefers tea over coffee in the afternoon", kind="preference", session_id="s2")
    store(k, "The office plants need water on Mondays", tags="home, chores")

    assert db_file(home).is_file()
    assert first["id"] != second["id"]
    assert first["tags"] == ["ops", "security"]
    assert second["kind"] == "preference" and second["session_id"] == "s2"

    found = search(k, "which password rotates?")
    assert found["count"] == len(found["results"]) >= 1
    top = found["results"][0]
    assert top["id"] == first["id"]
    assert top["content"] == "The staging database password rotates every 30 days"
    assert top["session_id"] == "test"
    assert top["created_at"] == first["created_at"]
    assert {"id", "content", "created_at", "session_id"} <= set(top)

    # Tags are searchable; the limit is honoured.
    assert [r["id"] for r in search(k, "chores")["results"]] == [first["id"] + 2]
    for i in range(8):
        store(k, f"kiwi fact number {i}")
    assert search(k, "kiwi", limit=3)["count"] == 3
    assert search(k, "nothing like this exists")["count"] == 0

    rows = db_rows(home, "SELECT session_id, kind, source FROM memories WHERE id = ?", (second["id"],))
    assert rows == [("s2", "preference", "memory_store")]


@pytest.mark.parametrize(
    ("tool", "args", "fragment"),
    [
        ("memory_search", {}, "query"),
        ("memory_search", {"query": "   "}, "query"),
        ("memory_search", {"query": "x", "limit": 0}, "limit"),
        ("memory_search", {"query": "x", "limit": "many"}, "limit"),
        ("memory_store", {}, "content"),
        ("memory_store", {"content": 42}, "content"),
        ("memory_store", {"content": "x", "tags": {"a": 1}}, "tags"),
        ("memory_store", {"content": "x", "kind": ["list"]}, "kind"),
    ],
)
def test_bad_tool_arguments_are_json_errors(kernel, tool: str, args: dict[str, Any], fragment: str) -> None:
    k = kernel()
    result = run_json(k.tools.dispatch(tool, args))
    assert fragment in result["error"], result


def test_handle_tool_call_never_raises(kernel, home: Path) -> None:
    memory = kernel().providers.memory()
    assert "no tool" in run_json(memory.handle_tool_call("memory_delete", {}))["error"]
    assert "error" in run_json(memory.handle_tool_call("memory_search", "not json"))
    assert "error" in run_json(memory.handle_tool_call("memory_search", ["query"]))
    # The database cannot be created: <home>/memory is a file.
    (home / "memory").write_text("in the way", encoding="utf-8")
    result = run_json(memory.handle_tool_call("memory_store", {"content": "hello"}))
    assert "memory_store failed" in result["error"], result
    assert memory.prefetch("anything about databases") == ""


# --------------------------------------------------------------------------
# Turns and recall
# --------------------------------------------------------------------------


def test_sync_turn_and_prefetch_recall_the_most_relevant_snippet(kernel) -> None:
    memory = kernel().providers.memory()
    fillers = [
        ("Can we move the project meeting?", "Sure, the project meeting moves to Thursday."),
        ("What is the project budget?", "The project budget for this quarter is 40k."),
        ("Who owns the project roadmap?", "Dana owns the project roadmap and the project wiki."),
        ("Book a room for the project retro", "Room 4B is booked for the project retro."),
    ]
    for user, assistant in fillers:
        memory.sync_turn(user, assistant, session_id="old")
    memory.sync_turn(
        "Which time series store did we pick for zeppelin?",
        "For zeppelin we picked ClickHouse; Postgres was too slow for the telemetry volume.",
        session_id="old",
    )

    recalled = memory.prefetch("remind me what the zeppelin project uses for telemetry", session_id="new")
    lines = snippets(recalled)
    assert len(lines) >= 2, recalled  # the fillers match "project" too ...
    assert "ClickHouse" in lines[0], recalled  # ... but the rare words win
    assert "User: Which time series store" in lines[0]

    assert memory.prefetch("what is the weather on mars?") == ""  # nothing matches
    for trivial in ("", "   ", "hi", "Hello!", "thanks, ok", "good morning :)", "/help zeppelin"):
        assert memory.prefetch(trivial) == "", trivial


def test_prefetch_is_short(kernel) -> None:
    memory = kernel().providers.memory()
    constants = plugin_module(memory, "provider")
    for i in range(20):
        memory.sync_turn(f"tell me about kiwi number {i}", "Kiwis are fruit and birds. " * 40)
    recalled = memory.prefetch("kiwi")
    assert 1 <= len(snippets(recalled)) <= constants.PREFETCH_LIMIT
    assert len(recalled) <= constants.PREFETCH_MAX_CHARS


def test_session_bookkeeping(kernel, home: Path) -> None:
    memory = kernel().providers.memory()
    memory.initialize("sess-9", hermes_home=str(home), platform="cli")
    memory.sync_turn("my locker code is 4411", "Got it: locker code 4411.")
    memory.sync_turn("", "")  # nothing to store
    stored = run_json(memory.handle_tool_call("memory_store", {"content": "the bike is blue"}))
    assert stored["session_id"] == "sess-9"
    memory.on_session_end([{"role": "user", "content": "bye"}])
    assert db_rows(home, "SELECT session_id, kind, content FROM memories ORDER BY id") == [
        ("sess-9", "turn", "User: my locker code is 4411\nAssistant: Got it: locker code 4411."),
        ("sess-9", "note", "the bike is blue"),
    ]
    # shutdown() closes the connection; the next use opens it again.
    memory.shutdown()
    assert "4411" in snippets(memory.prefetch("locker code"))[0]


# --------------------------------------------------------------------------
# Hostile queries
# --------------------------------------------------------------------------

HOSTILE = [
    '"AND OR NOT * ( ) : ^',
    '"',
    '"""',
    "*",
    "AND",
    "a OR",
    "NOT NOT",
    "NEAR(alpha beta, 2)",
    "content:secret",
    "{content tags}: x",
    "-alpha +beta",
    "alpha*",
    "^start",
    "'; DROP TABLE memories; --",
    "') OR 1=1 --",
    'x" OR content:* OR "',
    "Robert'); DROP TABLE students;--",
    "\\ \\\\ %_ \x00",
    "café naïve 東京 🚀",
]


def test_fts_syntax_and_sql_in_queries_break_nothing(kernel, home: Path) -> None:
    k = kernel()
    memory = k.providers.memory()
    bobby = store(k, "Little Bobby Tables: Robert'); DROP TABLE students;-- was his full name")
    store(k, "We met at the café near the naïve art museum in 東京")
    store(k, "alpha and beta are the two release channels")
    before = db_rows(home, "SELECT count(*) FROM memories")[0][0]
    # A query's syntax cannot widen the match: only its words count.
    assert search(k, 'zzzq" OR content:* OR "')["count"] == 0
    assert search(k, "zzzq OR *")["count"] == 0
    assert search(k, "Robert'); DROP TABLE students;--")["results"][0]["id"] == bobby["id"]
    assert "東京" in search(k, "cafe")["results"][0]["content"]  # diacritics folded

    for query in HOSTILE:
        result = run_json(k.tools.dispatch("memory_search", {"query": query}))
        assert "error" not in result, (query, result)
        assert isinstance(result["results"], list)
        assert isinstance(memory.prefetch(query), str)
        assert isinstance(k.tools.dispatch("memory_store", {"content": query, "tags": [query]}), str)

    # The tables are intact and every hostile store landed as plain text.
    tables = {r[0] for r in db_rows(home, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"memories", "memories_fts"} <= tables
    assert db_rows(home, "SELECT count(*) FROM memories")[0][0] == before + len(HOSTILE)
    assert db_rows(home, "SELECT content FROM memories WHERE id = ?", (bobby["id"],))[0][0].startswith(
        "Little Bobby"
    )


# --------------------------------------------------------------------------
# Persistence and concurrency
# --------------------------------------------------------------------------


def test_data_persists_across_kernels(kernel, home: Path) -> None:
    first = kernel()
    store(first, "The wifi password of the lake house is heron-42")
    old_provider = first.providers.memory()
    old_provider.sync_turn("where is the spare key?", "Under the blue flower pot.")
    first.shutdown()

    second = kernel()
    assert second.providers.memory() is not old_provider
    assert "heron-42" in search(second, "lake house wifi")["results"][0]["content"]
    assert "flower pot" in snippets(second.providers.memory().prefetch("spare key"))[0]


def test_threads_of_one_process_lose_nothing(kernel, home: Path) -> None:
    k = kernel()
    errors: list[str] = []

    def writer(n: int) -> None:
        for i in range(50):
            result = json.loads(k.tools.dispatch("memory_store", {"content": f"thread {n} item {i}"}))
            if not result.get("stored"):
                errors.append(str(result))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert db_rows(home, "SELECT count(*) FROM memories")[0][0] == 200


WRITER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from kernel import Kernel

    tag, rendezvous = sys.argv[1], Path(sys.argv[2])
    k = Kernel(config={"memory": {"provider": "sqlite"}})
    k.load()
    (rendezvous / f"ready-{tag}").touch()
    while not (rendezvous / "go").exists():
        time.sleep(0.002)
    for i in range(200):
        result = json.loads(
            k.tools.dispatch("memory_store", {"content": f"writer {tag} entry {i} tok{tag}n{i}"},
                             session_id=f"writer-{tag}")
        )
        if not result.get("stored"):
            sys.exit(f"store {i} failed: {result}")
    k.shutdown()
    print("wrote 200")
    """
)


def test_concurrent_writers_from_two_processes_lose_nothing(kernel, home: Path, tmp_path: Path) -> None:
    rendezvous = tmp_path / "rendezvous"
    rendezvous.mkdir()
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(EXTENSIONS))
    procs = {
        tag: subprocess.Popen(
            [sys.executable, "-c", WRITER, tag, str(rendezvous)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    }
    # Both writers are loaded and waiting; then they start together (and race to create the schema).
    while not all((rendezvous / f"ready-{tag}").exists() for tag in procs):
        crashed = {tag: p for tag, p in procs.items() if p.poll() is not None}
        assert not crashed, {tag: p.communicate() for tag, p in crashed.items()}
        time.sleep(0.01)
    assert not (home / "memory").exists()
    (rendezvous / "go").touch()
    outputs = {tag: p.communicate() for tag, p in procs.items()}
    for tag, p in procs.items():
        assert p.returncode == 0, (tag, outputs[tag])
        assert "wrote 200" in outputs[tag][0]

    assert db_rows(home, "SELECT count(*) FROM memories")[0][0] == 400
    per_session = dict(db_rows(home, "SELECT session_id, count(*) FROM memories GROUP BY session_id"))
    assert per_session == {"writer-a": 200, "writer-b": 200}
    assert db_rows(home, "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'writer'")[0][0] == 400
    conn = sqlite3.connect(str(db_file(home)))
    try:
        conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
    finally:
        conn.close()

    k = kernel()
    for tag in procs:
        for i in range(200):
            results = search(k, f"tok{tag}n{i}", limit=2)["results"]
            assert [r["content"] for r in results] == [f"writer {tag} entry {i} tok{tag}n{i}"]


# --------------------------------------------------------------------------
# Selection errors and availability
# --------------------------------------------------------------------------

UNAVAILABLE_PLUGIN = """
from kernel.providers import MemoryProvider


class FrobMemory(MemoryProvider):
    name = "frob"

    def is_available(self):
        return False

    def unavailable_reason(self):
        return "FROB_URL is not set"

    def initialize(self, session_id, **kwargs):
        pass

    def get_tool_schemas(self):
        return [{"name": "frob_recall", "description": "x", "parameters": {"type": "object"}}]


def register(ctx):
    ctx.register_memory_provider(FrobMemory())
"""


def test_unknown_provider_name_lists_sqlite(kernel) -> None:
    k = kernel(config={"memory": {"provider": "nope"}})
    with pytest.raises(ProviderSelectionError) as caught:
        k.providers.memory()
    assert "nope" in str(caught.value) and "sqlite" in str(caught.value)
    assert any("nope" in problem for problem in k.problems), k.problems
    names = {s.get("function", s)["name"] for s in k.tools.schemas()}
    assert not names & set(TOOLS)


def test_an_unavailable_provider_is_reported_with_its_reason(kernel, home: Path) -> None:
    write_plugin(home / "plugins", "memory/frob", UNAVAILABLE_PLUGIN)
    k = kernel(config={"memory": {"provider": "frob"}})
    with pytest.raises(ProviderSelectionError) as caught:
        k.providers.memory()
    assert "FROB_URL is not set" in str(caught.value)
    rows = {(r.slot, r.name): r for r in k.providers.status()}
    frob = rows[("memory", "frob")]
    assert (frob.active, frob.available, frob.reason) == (True, False, "FROB_URL is not set")
    sqlite = rows[("memory", "sqlite")]
    assert (sqlite.active, sqlite.available) == (False, True)
    names = {s.get("function", s)["name"] for s in k.tools.schemas()}
    assert "frob_recall" not in names and not names & set(TOOLS)

    (home / "config.yaml").write_text(yaml.safe_dump({"memory": {"provider": "frob"}}), encoding="utf-8")
    proc = subprocess.run([*CLI, "providers", "list"], env=cli_env(home), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "FROB_URL is not set" in proc.stdout


# --------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------


def _select_sqlite(home: Path) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump(SQLITE), encoding="utf-8")


def _cli(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *argv], env=cli_env(home), capture_output=True, text=True)


def test_providers_list_shows_sqlite_active_and_available(home: Path) -> None:
    _select_sqlite(home)
    proc = _cli(home, "providers", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = [r for r in run_json(proc.stdout) if r["slot"] == "memory" and r["name"] == "sqlite"]
    assert rows == [
        {
            "slot": "memory",
            "name": "sqlite",
            "plugin": "memory/sqlite",
            "active": True,
            "available": True,
            "reason": "",
            "endpoint": "",
        }
    ]


def test_sqlite_commands(kernel, home: Path) -> None:
    _select_sqlite(home)
    k = kernel(config=None)  # config.yaml selects sqlite
    store(k, "The zeppelin launch is planned for March", session_id="keep")
    store(k, "Throwaway note about zeppelin drafts", session_id="drop")
    k.providers.memory().sync_turn("hello zeppelin", "hi!", session_id="drop")
    k.shutdown()

    stats = _cli(home, "sqlite", "stats")
    assert stats.returncode == 0, stats.stdout + stats.stderr
    assert str(db_file(home)) in stats.stdout
    assert "memories: 3" in stats.stdout
    as_json = run_json(_cli(home, "sqlite", "stats", "--json").stdout)
    assert as_json["memories"] == 3 and as_json["by_kind"] == {"note": 2, "turn": 1}

    found = _cli(home, "sqlite", "search", "zeppelin", "launch", "--limit", "1")
    assert found.returncode == 0, found.stdout + found.stderr
    assert "The zeppelin launch is planned for March" in found.stdout
    assert "Throwaway" not in found.stdout
    results = run_json(_cli(home, "sqlite", "search", "zeppelin", "--json").stdout)
    assert len(results) == 3

    forget = _cli(home, "sqlite", "forget", "--session", "drop")
    assert forget.returncode == 0 and "deleted 2" in forget.stdout, forget.stdout + forget.stderr
    assert db_rows(home, "SELECT session_id FROM memories") == [("keep",)]

    refused = _cli(home, "sqlite", "clear")
    assert refused.returncode != 0 and "--yes" in refused.stderr
    assert db_rows(home, "SELECT count(*) FROM memories") == [(1,)]
    cleared = _cli(home, "sqlite", "clear", "--yes")
    assert cleared.returncode == 0 and "deleted 1" in cleared.stdout, cleared.stdout + cleared.stderr
    assert db_rows(home, "SELECT count(*) FROM memories") == [(0,)]


def test_sqlite_is_not_a_command_unless_active(home: Path) -> None:
    proc = _cli(home, "sqlite", "stats")
    assert proc.returncode != 0
    assert "unknown command 'sqlite'" in proc.stderr
    assert "sqlite" not in _cli(home, "--help").stdout
    assert not (home / "memory").exists()

    _select_sqlite(home)
    assert "sqlite" in _cli(home, "--help").stdout


def test_register_cli_sets_func_for_every_action(
    kernel, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The provider's cli.py on its own: each action is reachable through ``args.func``."""
    k = kernel()
    store(k, "Parsnips grow best in loose soil")
    name, register_cli = k.providers.memory_cli()
    assert name == "sqlite"
    parser = argparse.ArgumentParser(prog="hermes-kernel")
    register_cli(parser.add_subparsers().add_parser("sqlite"))
    monkeypatch.setenv("HERMES_HOME", str(home))

    def run(*argv: str) -> tuple[int, str]:
        args = parser.parse_args(["sqlite", *argv])
        code = args.func(args)
        return code, capsys.readouterr().out

    assert run("stats") == run()  # the bare command shows the statistics
    code, out = run("search", "parsnip")
    assert code == 0 and "Parsnips grow best" in out
    code, out = run("forget", "--session", "test")
    assert code == 0 and "deleted 1 memory" in out
    with pytest.raises(SystemExit):
        parser.parse_args(["sqlite", "search", "x", "--limit", "0"])


def test_sqlite_without_fts5_is_reported_unavailable(kernel, monkeypatch: pytest.MonkeyPatch) -> None:
    k = kernel()
    memory = k.providers.memory()
    monkeypatch.setattr(plugin_module(memory, "store"), "_FTS5", False)  # as if sqlite3 lacked FTS5
    assert memory.is_available() is False
    with pytest.raises(ProviderSelectionError) as caught:
        k.providers.memory()
    assert "FTS5" in str(caught.value)
    row = next(r for r in k.providers.status() if r.slot == "memory" and r.name == "sqlite")
    assert not row.available and "FTS5" in row.reason


# --------------------------------------------------------------------------
# /new and /reset: the provider follows the new session id (issue 16)
# --------------------------------------------------------------------------


def test_after_a_reset_notes_are_stored_under_the_new_session(kernel, home: Path) -> None:
    k = kernel(config={**SQLITE, **scripted_config(write_script(home, ["Hello!"]))})
    session = AgentSession(k, session_id="before-reset")
    session.run("hi there")
    memory = k.providers.memory()
    assert memory.session_id == "before-reset"
    new = session.reset("new")
    assert memory.session_id == new  # on_session_switch, not a second initialize
    # No session in the call: the provider's own session id is used.
    stored = run_json(k.tools.dispatch("memory_store", {"content": "A note written after the reset"}))
    assert stored["stored"] is True and stored["session_id"] == new
    rows = dict(db_rows(home, "SELECT content, session_id FROM memories"))
    assert rows["A note written after the reset"] == new
    assert rows["User: hi there\nAssistant: Hello!"] == "before-reset"
    session.close()
