"""The chaos test: a scaled-out gateway on the HTTP platform keeps its promises while its parts die.

One ingress and three workers, each a real ``hermes-kernel gateway run --role ...`` subprocess with a
home of its own, on a real redis-server (append-only file on, every write synced).  A driver posts
50 chats × 10 messages with httpx — the chats at once, each chat's messages in order, a message posted
again with the same ``message_id`` whenever its request fails or its wait runs out — while a seeded
chaos task SIGKILLs a worker (and starts a replacement), SIGSTOPs another past ``claim_after`` then
SIGCONTs it, restarts Redis once (same port, its data kept) and SIGKILLs the ingress once (a new one
takes the same HTTP port).  The model is the bundled ``scripted`` one (20 ms turns); the ``echo`` plugin
makes every reply say which message it answers and which turn of its conversation it is, and appends
each turn it starts to its worker's ``started.jsonl``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import end_processes, start_gateway, write_plugin
from redis_server import RedisServer, free_port
from test_gateway_scale import ECHO_PLUGIN, REPLY, log_text

from kernel.gateway.sessions import SessionState
from kernel.testing import write_script

CHATS = 50
MESSAGES = 10
TURN = 0.15  # seconds per model call: the traffic outlasts the faults
CLAIM_AFTER = 5.0  # a silent worker's chats are taken over after this
STOPPED_FOR = CLAIM_AFTER + 1.5  # a SIGSTOPped worker stays stopped past claim_after
WAIT = 8.0  # ?wait of each POST; a reply not there by then is asked for again
RUN_DEADLINE = 80.0  # the whole drive; only reached when something hangs
SEED = 27


class Cluster:
    """The homes and processes of one scaled-out gateway; every process is killed at the end (by pid)."""

    def __init__(self, root: Path, redis: RedisServer, http_port: int) -> None:
        self.root = root
        self.redis = redis
        self.http_port = http_port
        self.prefix = f"x{uuid.uuid4().hex[:8]}"
        self.broker = {"url": redis.url, "prefix": self.prefix, "claim_after": CLAIM_AFTER}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.homes: list[Path] = []

    def home(self, name: str, *, ingress: bool) -> Path:
        home = self.root / name
        home.mkdir()
        started = repr(str(home / "started.jsonl"))
        write_plugin(home / "plugins", "echo", ECHO_PLUGIN.replace("@STARTED@", started))
        script = write_script(home, [{"text": "ok", "delay_s": TURN}] * (CHATS * MESSAGES + 50))
        platforms = {"http": {"enabled": True, "port": self.http_port}} if ingress else {}
        config = {
            "model": {"provider": "scripted", "script": str(script)},
            "plugins": {"enabled": ["echo"]},
            "gateway": {"platforms": platforms, "broker": self.broker, "worker": {"concurrency": 4}},
        }
        (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        self.homes.append(home)
        return home

    def start(self, name: str, role: str) -> subprocess.Popen[bytes]:
        home = self.home(name, ingress=role == "ingress")
        proc = start_gateway(home, "--role", role)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        end_processes(self.procs)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    redis = RedisServer(tmp_path / "redis").start()
    made = Cluster(tmp_path, redis, free_port())
    try:
        yield made
    finally:
        made.stop_all()
        redis.stop()


async def listening(client: httpx.AsyncClient, url: str) -> None:
    """Return once the ingress at ``url`` answers its health check (a minute at most)."""
    for _ in range(600):
        with contextlib.suppress(httpx.HTTPError):
            if (await client.get(f"{url}/v1/health")).status_code == 200:
                return
        await asyncio.sleep(0.1)


async def drive_chat(
    client: httpx.AsyncClient, url: str, chat: str, got: dict[str, list[str]], posts: dict[str, int]
) -> None:
    """Post the chat's messages in order, each until a reply comes back (the same id each time)."""
    for n in range(MESSAGES):
        body = {"chat_id": chat, "text": f"{chat}/{n}", "message_id": f"{chat}-{n}"}
        while True:
            posts[body["message_id"]] = posts.get(body["message_id"], 0) + 1
            try:
                answer = await client.post(f"{url}/v1/messages", params={"wait": WAIT}, json=body)
            except httpx.HTTPError:
                await asyncio.sleep(0.2)  # the ingress is down: a client tries again a bit later
                continue
            if answer.status_code == 200:
                got.setdefault(body["message_id"], []).append(answer.json()["reply"])
                break
            if answer.status_code == 503:
                await asyncio.sleep(0.2)


async def chaos(
    cluster: Cluster,
    workers: list[subprocess.Popen[bytes]],
    ingress: list[Any],
    victims: set[int],
    answered: Any,
) -> list[str]:
    """The faults, each at a seeded time of its own (they overlap): what was done and how many
    messages were answered by then (for the checks and the report); the workers killed or stopped are
    added to ``victims``."""
    rng = random.Random(SEED)
    done: list[str] = []
    start = time.monotonic()

    async def at(offset: float) -> None:
        await asyncio.sleep(max(0.0, start + offset - time.monotonic()))

    def note(what: str) -> None:
        done.append(f"{what} at {time.monotonic() - start:.1f} s, {answered()} answered")

    killed, stopped = rng.sample(range(len(workers)), 2)

    async def kill_a_worker() -> None:
        await at(rng.uniform(1.0, 2.0))
        victim = workers[killed]
        victims.add(victim.pid)
        victim.kill()
        await asyncio.to_thread(victim.wait, 30)
        workers.append(cluster.start("worker-replacement", "worker"))
        note(f"SIGKILL worker {victim.pid} (replaced)")

    async def pause_a_worker() -> None:
        await at(rng.uniform(2.0, 3.0))
        paused = workers[stopped]
        victims.add(paused.pid)
        os.kill(paused.pid, signal.SIGSTOP)
        note(f"SIGSTOP worker {paused.pid}")
        await asyncio.sleep(STOPPED_FOR)
        os.kill(paused.pid, signal.SIGCONT)
        note(f"SIGCONT worker {paused.pid}")

    async def restart_redis() -> None:
        await at(rng.uniform(3.5, 4.5))
        await asyncio.to_thread(cluster.redis.restart)
        note("Redis restarted")

    async def kill_the_ingress() -> None:
        await at(rng.uniform(5.0, 6.5))
        old = ingress[0]
        old.kill()
        await asyncio.to_thread(old.wait, 30)
        ingress[0] = cluster.start("ingress-2", "ingress")
        note(f"SIGKILL ingress {old.pid} (a new one started)")

    await asyncio.gather(kill_a_worker(), pause_a_worker(), restart_redis(), kill_the_ingress())
    return done


def turns_started(home: Path) -> list[dict[str, Any]]:
    path = home / "started.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_chaos_every_message_answered_once_in_order_while_processes_die(cluster: Cluster) -> None:
    began = time.monotonic()
    workers = [cluster.start(f"worker-{i}", "worker") for i in range(3)]
    ingress = [cluster.start("ingress", "ingress")]
    url = f"http://127.0.0.1:{cluster.http_port}"
    chats = [f"c{i:02d}" for i in range(CHATS)]
    got: dict[str, list[str]] = {}
    posts: dict[str, int] = {}
    victims: set[int] = set()

    async def scenario() -> list[str]:
        limits = httpx.Limits(max_connections=CHATS * 2, max_keepalive_connections=CHATS * 2)
        async with httpx.AsyncClient(timeout=WAIT + 10, limits=limits) as client:
            await listening(client, url)  # traffic starts as soon as the ingress listens; the chaos with it
            drivers = [asyncio.create_task(drive_chat(client, url, chat, got, posts)) for chat in chats]
            faults = asyncio.create_task(chaos(cluster, workers, ingress, victims, lambda: len(got)))
            try:
                async with asyncio.timeout(RUN_DEADLINE):
                    await asyncio.gather(*drivers)
                    return await faults
            finally:
                for task in [*drivers, faults]:
                    task.cancel()

    done = asyncio.run(scenario())
    elapsed = time.monotonic() - began
    # Every fault hit a gateway at work: messages were still waiting to be answered.
    by_then = [int(line.rsplit(", ", 1)[1].split()[0]) for line in done]
    assert len(by_then) == 5 and max(by_then[:4]) < CHATS * MESSAGES, done

    # Every message answered, with its own conversation's turn: in order, nothing answered twice
    # (every delivery of a message id carries the same, first, reply).
    for chat in chats:
        for n in range(MESSAGES):
            replies = got.get(f"{chat}-{n}")
            assert replies, f"{chat}-{n} never answered ({done})"
            assert len(set(replies)) == 1, f"{chat}-{n} answered differently: {replies}"
            found = REPLY.match(replies[0])
            assert found, replies[0]
            assert (found["text"], int(found["turn"])) == (f"{chat}/{n}", n + 1), (replies, done)

    # No turn ran twice for one message id on a worker that was not killed or stopped meanwhile.
    started: dict[str, list[int]] = {}
    for home in cluster.homes:
        for record in turns_started(home):
            started.setdefault(record["text"], []).append(record["pid"])
    for text, pids in started.items():
        calm = [pid for pid in pids if pid not in victims]
        assert len(calm) <= 1, f"{text} ran {len(pids)} turns on {pids} (victims {victims}, {done})"
    assert len(started) == CHATS * MESSAGES

    # Each chat's saved conversation holds its own ten messages, once each, in order.
    with cluster.redis.client() as redis:
        for chat in chats:
            raw = redis.get(f"{cluster.prefix}:session:http:{chat}")
            assert raw is not None, chat
            said = [m.get("content") for m in SessionState.loads(raw).messages if m.get("role") == "user"]
            assert said == [f"{chat}/{n}" for n in range(MESSAGES)], (chat, said)

    for proc in cluster.procs:
        home = proc.home  # type: ignore[attr-defined]
        text = (home / "gateway.out").read_text(encoding="utf-8", errors="replace") + log_text(home)
        assert "Traceback" not in text, f"{home.name}:\n{text[-4000:]}"
    again = sum(1 for count in posts.values() if count > 1)
    print(
        f"chaos: {CHATS * MESSAGES} messages in {elapsed:.1f} s, {again} posted again "
        f"({sum(posts.values())} posts); {'; '.join(done)}"
    )
