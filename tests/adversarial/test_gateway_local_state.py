"""Damaged local state and hostile member records do not stop the gateway (issue 27).

* A ``gateway/sessions.db`` that is not a usable database (garbage bytes, a truncated file, a directory
  in its place; one that turns bad while the gateway runs) is moved aside, kept, and a fresh store
  answers the chats: a real gateway with the line chat platform of tests/gateways/test_gateway.py and the
  bundled ``scripted`` model answers a person over a real socket.
* ``hermes-kernel gateway status`` (a real subprocess) prints every member record it can read and marks
  the others, with hostile records written straight into a real redis-server.
* A SIGKILLed worker (a real ``gateway run --role worker`` subprocess) is pruned from the members once
  silent longer than ``gateway.broker.forget_after``, by a live worker's heartbeat.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from conftest import CLI, agent_log, cli_env, run_cli, until, wait_for
from redis_server import RedisServer
from test_gateway import ChatClient, ChatServer, chat_config, platform_plugin

from kernel.core.kernel import Kernel
from kernel.gateway.sessions import SessionState, SqliteSessionStore

DEADLINE = 60.0  # seconds; only reached when something hangs


@pytest.fixture
def hermes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "hermes"
    path.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(path))
    return path


@pytest.fixture
def kernels() -> Iterator[Callable[..., Kernel]]:
    made: list[Kernel] = []

    def make(home: Path, config: dict[str, Any]) -> Kernel:
        k = Kernel(home=home, config=config)
        made.append(k)
        k.load()
        return k

    yield make
    for k in made:
        k.shutdown()


def log_lines(home: Path, event: str) -> list[str]:
    """The lines of the kernel's log (``<home>/logs/agent.log``) recording ``event``."""
    return [line for line in agent_log(home).splitlines() if f" {event} " in line]


# -- a damaged sessions.db -------------------------------------------------------------------------


def _garbage(path: Path) -> bytes:
    data = os.urandom(8192)
    path.write_bytes(data)
    return data


def _truncated(path: Path) -> bytes:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE sessions (key TEXT PRIMARY KEY, state TEXT NOT NULL, updated REAL)")
    db.executemany("INSERT INTO sessions VALUES (?, ?, 0)", [(str(i), "x" * 300) for i in range(2000)])
    db.commit()
    db.close()
    data = path.read_bytes()[: path.stat().st_size // 3]
    path.write_bytes(data)
    return data


def _directory(path: Path) -> bytes:
    path.mkdir()
    (path / "inside.txt").write_text("kept", encoding="utf-8")
    return b""


@pytest.mark.parametrize(
    "damage", [_garbage, _truncated, _directory], ids=["garbage", "truncated", "directory"]
)
def test_a_damaged_sessions_db_is_moved_aside_and_the_chat_is_answered(
    hermes: Path, kernels: Callable[..., Kernel], damage: Callable[[Path], bytes]
) -> None:
    platform_plugin(hermes, "linechat")
    db = hermes / "gateway" / "sessions.db"
    db.parent.mkdir()
    before = damage(db)

    async def scenario() -> None:
        server = await ChatServer().start()
        config = chat_config(
            hermes, ["First.", "Second."], {"linechat": {"enabled": True, "port": server.port}}
        )
        k = kernels(hermes, config)
        task = asyncio.create_task(k.gateway.run())
        await until(lambda: server.bots or task.done(), "the platform to connect", DEADLINE)
        client = await ChatClient.open(server)
        assert (await client.ask("#c", "kim", "hello"))["text"] == "First."
        assert (await client.ask("#c", "kim", "again"))["text"] == "Second."
        client.close()
        k.gateway.stop()
        await asyncio.wait_for(task, DEADLINE)
        await server.close()

    asyncio.run(asyncio.wait_for(scenario(), DEADLINE * 2))

    (aside,) = list(db.parent.glob("sessions.db.corrupt-*[0-9]"))
    if before:
        assert aside.read_bytes() == before  # kept for inspection, untouched
    else:
        assert (aside / "inside.txt").read_text(encoding="utf-8") == "kept"
    saved = sqlite3.connect(db).execute("SELECT state FROM sessions").fetchall()
    assert [SessionState.loads(state).turns for (state,) in saved] == [2]  # the fresh store goes on
    (line,) = log_lines(hermes, "gateway_session_store_replaced")  # once, naming both files
    assert f"store={db}" in line and f"moved_to={aside}" in line


def test_a_sessions_db_damaged_while_in_use_is_moved_aside_at_the_next_failure(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    store = SqliteSessionStore(path)
    store.save_now("linechat:#c", SessionState("s1", [{"role": "user", "content": "hi"}], 1))
    # Another program writes over the file (and its journal) while the gateway holds it open.
    for name in ("sessions.db", "sessions.db-wal", "sessions.db-shm"):
        with (tmp_path / name).open("r+b") as handle:
            handle.truncate(0)
            handle.write(os.urandom(40_000))
    assert store.load_now("linechat:#c") is None  # a fresh store: the chat starts over
    store.save_now("linechat:#c", SessionState("s2", [], 1))
    assert store.load_now("linechat:#c") == SessionState("s2", [], 1)
    store.close()
    assert len(list(tmp_path.glob("sessions.db.corrupt-*[0-9]"))) == 1
    assert SqliteSessionStore(path).load_now("linechat:#c") == SessionState("s2", [], 1)


# -- gateway status and the members ----------------------------------------------------------------


def broker_home(root: Path, server: RedisServer, name: str, **broker: Any) -> Path:
    """A home whose config names the broker (and the scripted model, for a worker)."""
    home = root / name
    home.mkdir()
    (home / "script.json").write_text(json.dumps([{"text": "ok"}]), encoding="utf-8")
    config = {
        "model": {"provider": "scripted", "script": str(home / "script.json")},
        "gateway": {"broker": {"url": server.url, **broker}},
    }
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return home


def member(name: str, heartbeat: float, **fields: Any) -> str:
    record = {"id": name, "role": "worker", "host": "h1", "pid": 42, "concurrency": 1, "busy": 0}
    return json.dumps({**record, "started": heartbeat, "heartbeat": heartbeat, **fields})


HOSTILE = {
    b"huge-pid": b'{"id": "huge-pid", "role": "worker", "pid": 1e999, "heartbeat": 1}',
    b"deep": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    b"a-list": b"[1, 2, 3]",
    b"not-utf8": b'{"role": "worker", "host": "\xff\xfe"}',
    b"nan": b'{"role": "worker", "heartbeat": NaN}',
    b"negative": b'{"role": "worker", "heartbeat": -5}',
    b"huge-concurrency": b'{"role": "worker", "concurrency": 1e400}',
    b"\xff\x1b[2Jbad-id": b"{",
}


def test_gateway_status_prints_every_readable_member_and_marks_the_others(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    prefix = f"s{uuid.uuid4().hex[:8]}"
    home = broker_home(tmp_path, redis_server, "status", prefix=prefix)
    client = redis_server.client()
    now = time.time()
    client.hset(f"{prefix}:members", mapping={"good": member("good", now), **HOSTILE})

    proc = run_cli(home, "gateway", "status", "--json")
    assert proc.returncode == 0, proc.stderr
    broker = json.loads(proc.stdout)["broker"]
    assert broker["connected"] is True
    assert [row["id"] for row in broker["workers"]] == ["good"]
    marked = {entry["id"]: entry["unreadable"] for entry in broker["unreadable"]}
    shown = {key.decode("utf-8", "backslashreplace") for key in HOSTILE}
    assert set(marked) == shown and all(marked.values())
    # Nothing was deleted: what cannot be read is left for a person to look at.
    assert client.hlen(f"{prefix}:members") == 1 + len(HOSTILE)

    text = run_cli(home, "gateway", "status")
    assert text.returncode == 0, text.stderr
    assert "Traceback" not in text.stderr and "\x1b" not in text.stdout
    lines = text.stdout.splitlines()
    assert any(" good " in line and "pid 42" in line for line in lines)
    for name in ("huge-pid", "deep", "a-list", "not-utf8", "nan", "negative", "huge-concurrency"):
        assert any(f"members {name}  <unreadable: " in line for line in lines), name


def test_gateway_status_says_when_the_members_key_is_not_a_hash(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    prefix = f"s{uuid.uuid4().hex[:8]}"
    home = broker_home(tmp_path, redis_server, "status", prefix=prefix)
    redis_server.client().set(f"{prefix}:members", "not a hash")

    proc = run_cli(home, "gateway", "status", "--json")
    assert proc.returncode == 0, proc.stderr
    broker = json.loads(proc.stdout)["broker"]
    assert broker["connected"] is True and broker["workers"] == []
    assert [entry["key"] for entry in broker["unreadable"]] == [f"{prefix}:members"]
    text = run_cli(home, "gateway", "status")
    assert text.returncode == 0 and f"{prefix}:members  <unreadable: " in text.stdout


def start_worker(home: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A real ``gateway run --role worker``; returns it and its member id once it is connected."""
    out = home / "gateway.out"
    with out.open("ab") as sink:
        proc = subprocess.Popen(
            [*CLI, "gateway", "run", "--role", "worker"], env=cli_env(home), stdout=sink, stderr=sink
        )
    give_up = time.monotonic() + DEADLINE
    while " connected to " not in (text := out.read_text(encoding="utf-8", errors="replace")):
        assert proc.poll() is None and time.monotonic() < give_up, text
        time.sleep(0.05)
    line = next(line for line in text.splitlines() if " connected to " in line)
    return proc, line.split("worker ", 1)[1].split(" ", 1)[0]


def test_a_killed_worker_is_pruned_from_the_members_by_a_live_one(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    prefix = f"p{uuid.uuid4().hex[:8]}"
    broker = {"prefix": prefix, "claim_after": 0.3, "forget_after": 1.5}
    homes = [broker_home(tmp_path, redis_server, name, **broker) for name in ("one", "two")]
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    procs = []
    try:
        (killed, killed_id), (live, live_id) = [start_worker(home) for home in homes]
        procs = [killed, live]
        wait_for(lambda: {killed_id, live_id} <= set(client.hkeys(f"{prefix}:members")), "both members")
        killed.send_signal(signal.SIGKILL)
        killed.wait(DEADLINE)
        killed_at = time.time()
        wait_for(lambda: killed_id not in client.hkeys(f"{prefix}:members"), "the killed worker's pruning")
        assert time.time() - killed_at >= 1.5 - 0.4  # not before it was silent forget_after (less a beat)
        assert live_id in client.hkeys(f"{prefix}:members")
        wait_for(lambda: log_lines(homes[1], "gateway_member_pruned"), "the pruning in the live one's log")
        (pruned,) = log_lines(homes[1], "gateway_member_pruned")  # once
        assert f"member={killed_id}" in pruned
        status = json.loads(run_cli(homes[1], "gateway", "status", "--json").stdout)["broker"]
        assert [row["id"] for row in status["workers"]] == [live_id]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(DEADLINE)


def test_gateway_status_prunes_members_silent_longer_than_forget_after(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    prefix = f"s{uuid.uuid4().hex[:8]}"
    home = broker_home(tmp_path, redis_server, "status", prefix=prefix, claim_after=1, forget_after=60)
    client = redis_server.client()
    now = time.time()
    client.hset(
        f"{prefix}:members",
        mapping={"recent": member("recent", now - 50), "gone": member("gone", now - 3600)},
    )
    broker = json.loads(run_cli(home, "gateway", "status", "--json").stdout)["broker"]
    assert broker["pruned"] == ["gone"] and [row["id"] for row in broker["workers"]] == ["recent"]
    assert client.hkeys(f"{prefix}:members") in ([b"recent"], ["recent"])
