"""hermes-kernel gateway benchmark (``make bench-gateway``): the scaled-out gateway under load.

Every gateway process is a real ``python -m kernel gateway run --role ...`` with a home of its own (as
on separate machines), on this machine; the broker is a real redis-server on 127.0.0.1 (the one
``make test-deps`` unpacks into .venv/debs, run by tests/redis_server.py with its append-only file,
``appendfsync everysec`` by default as in Redis, ``--appendfsync always`` for an fsync per write); the
platform is the line chat of tests/test_gateway.py (a TCP chat server this script runs, and a person's
client); the model is the bundled ``scripted`` one, every turn ``ok`` after a fixed
wait (200 ms).  A small probe plugin in every home records when each turn starts and ends.

A. Throughput: one ingress and 1, 2, 4 workers, each ``--concurrency 1`` (so N workers run N turns at
   once).  Once every worker said it is connected to Redis and the ingress's bot is on the chat
   server, 400 messages from 40 chats (10 each) are sent in one burst, interleaved (round 1 of every
   chat, then round 2, ...).  Throughput is messages/s from the first message the chat server received
   to the last reply it got; latency runs from the chat server's receipt of a message to its reply
   (p50, p99).  A message with no reply within a generous deadline is lost; a second reply with the
   same ``reply_to`` is a duplicate.  Each configuration has a fresh Redis prefix.
B. Broker overhead at light load: one chat, 30 messages one after another (each sent once the previous
   one was answered, after 2 warm-up messages in another chat), through the broker (an ingress and
   one worker) and without one (``--role all``, everything in one process); the difference of the
   p50 latencies is the broker's overhead per message.

Targets (the issue): 4 workers >= 3.5x the throughput of 1 worker; broker overhead <= 5 ms per message
at p50.  The script reports whether they were met and exits 0 either way; it exits non-zero only when
the benchmark itself is not sound (a process did not start, a reply was not the scripted one).

Usage::

    python tests/benchmarks/bench_gateway.py [--quick] [--json FILE] [--workers 1,2,4]
        [--messages 400] [--chats 40] [--turn 0.2] [--light 30] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the chat server, Redis, the CLI

from conftest import CLI, cli_env, write_plugin
from redis_server import REDIS_SERVER, RedisServer
from test_gateway import ChatClient, ChatServer, platform_plugin

from kernel.testing import write_script

THROUGHPUT_TARGET = 3.5  # the most workers measured (4) / 1 worker
OVERHEAD_TARGET_MS = 5.0  # broker - no broker, p50, at light load
REPLY = "ok"  # what every scripted turn says
WARM_UP = 2  # messages answered before the light-load measure (in a chat of their own)
READY_DEADLINE = 120.0  # seconds for a process to connect (a hang guard, not a measure)
LIGHT_DEADLINE = 60.0  # seconds for one reply at light load
LOG_TAIL = 40  # lines of each log shown when the benchmark fails
WORKER_READY = re.compile(r"gateway: worker \S+ connected to ")
PLATFORM_READY = "hermes-kernel gateway: connected linechat"

PROBE_PLUGIN = r'''
"""The benchmark's probe: when each turn starts and ends (time.monotonic(), the same clock in every
process of the machine), one JSON line each, appended to RECORDS."""

import json
import os
import time

RECORDS = @RECORDS@


def _write(kind, text):
    line = json.dumps({"at": time.monotonic(), "kind": kind, "text": text, "pid": os.getpid()})
    with open(RECORDS, "a", encoding="utf-8") as out:
        out.write(line + "\n")


def _pre(user_message=None, **_):
    _write("start", user_message)


def _post(user_message=None, **_):
    _write("end", user_message)


def register(ctx):
    ctx.register_hook("pre_llm_call", _pre)
    ctx.register_hook("post_llm_call", _post)
'''


class BenchError(RuntimeError):
    """The benchmark is not sound (a process did not start or ended); its numbers would be meaningless."""


# ---------------------------------------------------------------------------
# The chat server, timing every message and reply
# ---------------------------------------------------------------------------


class BenchServer(ChatServer):
    """:class:`ChatServer` that also records, by message id (``m<n>``), when each message arrived
    (``received_at``), its chat and text, and when each reply to it came (``replies``: a list of
    ``(time, text)``, more than one for a duplicate).  ``time.monotonic()`` throughout."""

    def __init__(self) -> None:
        super().__init__()
        self.received_at: dict[str, float] = {}
        self.chat_of: dict[str, str] = {}
        self.text_of: dict[str, str] = {}
        self.replies: dict[str, list[tuple[float, str]]] = {}
        self.reply_order: list[str] = []
        self._changed = asyncio.Event()

    async def _user(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.users.append(writer)
        try:
            while line := await reader.readline():
                now = time.monotonic()
                self.received += 1
                message_id = f"m{self.received}"
                chat, _user, text = line.decode().rstrip("\n").split("|", 2)
                self.received_at[message_id] = now
                self.chat_of[message_id], self.text_of[message_id] = chat, text
                for bot in list(self.bots):
                    bot.write(f"{message_id}|".encode() + line)
                self._changed.set()
        finally:
            self.users.remove(writer)
            self._changed.set()

    async def _bot(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.joins += 1
        self.bots.append(writer)
        self._changed.set()
        try:
            while line := await reader.readline():
                now = time.monotonic()
                verb, _, payload = line.decode().rstrip("\n").partition(" ")
                if verb == "SAY":
                    reply = json.loads(payload)
                    self.said.append(reply)
                    key = str(reply.get("reply_to"))
                    self.replies.setdefault(key, []).append((now, str(reply.get("text"))))
                    self.reply_order.append(key)
                    for user in list(self.users):
                        user.write(payload.encode() + b"\n")
                    self._changed.set()
        finally:
            self.bots.remove(writer)
            self.leaves += 1
            self._changed.set()

    async def wait_until(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Wait for ``condition()`` (checked at every message, reply and bot connection); ``False``
        after ``timeout`` seconds."""
        give_up = time.monotonic() + timeout
        while not condition():
            left = give_up - time.monotonic()
            if left <= 0:
                return False
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)
        return True


async def discard_replies(client: ChatClient) -> None:
    """Read the person's copy of the replies (the server times them; this keeps its buffer empty)."""
    while await client.reader.readline():
        pass


async def teardown(
    server: BenchServer, client: ChatClient | None, drain: asyncio.Task[None] | None, fleet: Fleet
) -> None:
    """Kill the processes, then close the chat server once its connections have ended (a handler
    still running at the end of ``asyncio.run`` would be cancelled, and asyncio logs that)."""
    if drain is not None:
        drain.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await drain
    if client is not None:
        client.close()
    fleet.stop()
    await server.wait_until(lambda: not server.users and not server.bots, 5.0)
    await server.close()


# ---------------------------------------------------------------------------
# The gateway processes of one configuration
# ---------------------------------------------------------------------------


class Fleet:
    """The homes and the processes of one configuration, in ``root``; :meth:`stop` kills them all."""

    def __init__(
        self, root: Path, *, delay: float, turns: int, port: int, broker: dict[str, Any] | None
    ) -> None:
        self.root = root
        self.delay = delay
        self.turns = turns
        self.port = port
        self.broker = broker
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        root.mkdir(parents=True)

    def records(self, name: str) -> Path:
        return self.root / f"{name}.turns.jsonl"

    def out(self, name: str) -> Path:
        return self.root / f"{name}.out"

    def _home(self, name: str, concurrency: int) -> Path:
        home = self.root / name
        home.mkdir()
        platform_plugin(home, "linechat")
        probe = PROBE_PLUGIN.replace("@RECORDS@", repr(str(self.records(name))))
        manifest = {
            "name": "bench_probe",
            "version": "0.1.0",
            "provides_hooks": ["pre_llm_call", "post_llm_call"],
        }
        write_plugin(home / "plugins", "bench_probe", probe, manifest)
        # Every process plays its own copy of the script: enough turns for all the messages.
        script = write_script(home, [{"text": REPLY, "delay_s": self.delay}] * self.turns)
        gateway: dict[str, Any] = {
            "platforms": {"linechat": {"enabled": True, "port": self.port}},
            "worker": {"concurrency": concurrency},
        }
        if self.broker is not None:
            gateway["broker"] = self.broker
        config = {"model": {"provider": "scripted", "script": str(script)}, "gateway": gateway}
        (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        return home

    def start(self, name: str, role: str, concurrency: int = 1) -> None:
        home = self._home(name, concurrency)
        command = [*CLI, "gateway", "run", "--role", role]
        if role == "worker":
            command += ["--concurrency", str(concurrency)]
        with self.out(name).open("ab") as log:
            self.procs[name] = subprocess.Popen(
                command,
                env=cli_env(home),
                cwd=home,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a ^C reaches the benchmark only, which kills them all
            )

    def output(self, name: str) -> str:
        return self.out(name).read_text(encoding="utf-8", errors="replace")

    async def ready(self, name: str, found: Callable[[str], bool], what: str) -> None:
        proc = self.procs[name]
        give_up = time.monotonic() + READY_DEADLINE
        while not found(self.output(name)):
            if proc.poll() is not None:
                raise BenchError(f"{self.root.name}/{name} ended (exit {proc.returncode}) before {what}")
            if time.monotonic() > give_up:
                raise BenchError(f"{self.root.name}/{name}: no {what} within {READY_DEADLINE:.0f} s")
            await asyncio.sleep(0.05)

    async def all_ready(self, server: BenchServer, platform_holder: str) -> None:
        """Every worker connected to Redis, and ``platform_holder``'s bot on the chat server."""
        waits = [
            self.ready(name, lambda text: WORKER_READY.search(text) is not None, "'worker ... connected to'")
            for name in self.procs
            if name.startswith("worker")
        ]
        waits.append(self.ready(platform_holder, lambda text: PLATFORM_READY in text, f"'{PLATFORM_READY}'"))
        await asyncio.gather(*waits)
        if not await server.wait_until(lambda: len(server.bots) >= 1, READY_DEADLINE):
            raise BenchError(f"{self.root.name}: the bot did not join the chat server")

    def check_running(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise BenchError(f"{self.root.name}/{name} ended (exit {proc.returncode}) during the measure")

    def turn_records(self) -> list[dict[str, Any]]:
        rows = []
        for name in self.procs:
            path = self.records(name)
            if path.is_file():
                for line in path.read_text(encoding="utf-8").splitlines():
                    rows.append({**json.loads(line), "process": name})
        return rows

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)


# ---------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linear between the closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def outcome(server: BenchServer, ids: list[str]) -> dict[str, Any]:
    """Latencies (ms), lost, duplicated and unexpected replies of the messages ``ids``."""
    wanted = set(ids)
    first = {m: server.replies[m][0][0] for m in ids if server.replies.get(m)}
    latencies = [(first[m] - server.received_at[m]) * 1e3 for m in ids if m in first]
    bad = sum(1 for m in ids for _at, text in server.replies.get(m, []) if text != REPLY)
    # Each chat's replies must come in the order its messages were sent.
    by_chat: dict[str, list[int]] = {}
    for key in server.reply_order:
        if key in wanted:
            by_chat.setdefault(server.chat_of[key], []).append(int(key[1:]))
    out_of_order = sum(1 for numbers in by_chat.values() for a, b in itertools.pairwise(numbers) if b < a)
    return {
        "answered": len(first),
        "lost": len(ids) - len(first),
        "dup": sum(len(server.replies[m]) - 1 for m in first),
        "bad": bad,
        "unknown": sum(len(v) for k, v in server.replies.items() if k not in server.received_at),
        "out_of_order": out_of_order,
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "latencies_ms": latencies,
        "first_reply": first,
    }


def breakdown(server: BenchServer, ids: list[str], records: list[dict[str, Any]]) -> dict[str, Any]:
    """Where each message's time went, from the probe's turn records: received -> turn start (the
    queue and the way in), the turn, turn end -> reply (the way back); per process, the turns it ran,
    the time it spent in them and the gaps between its consecutive turns."""
    message_of = {server.text_of[m]: m for m in ids}
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    per_process: dict[str, list[tuple[float, float]]] = {}
    opened: dict[tuple[str, str], float] = {}
    for row in sorted(records, key=lambda r: r["at"]):
        key = (row["process"], row["text"])
        if row["kind"] == "start":
            opened[key] = row["at"]
            starts.setdefault(row["text"], row["at"])
        elif key in opened:
            ends.setdefault(row["text"], row["at"])
            per_process.setdefault(row["process"], []).append((opened.pop(key), row["at"]))
    to_start, turn, to_reply = [], [], []
    for text, m in message_of.items():
        reply = server.replies.get(m)
        if text in starts and text in ends and reply:
            to_start.append((starts[text] - server.received_at[m]) * 1e3)
            turn.append((ends[text] - starts[text]) * 1e3)
            to_reply.append((reply[0][0] - ends[text]) * 1e3)
    processes = {}
    for name, spans in sorted(per_process.items()):
        spans.sort()
        gaps = [(b[0] - a[1]) * 1e3 for a, b in itertools.pairwise(spans)]
        processes[name] = {
            "turns": len(spans),
            "in_turns_s": sum(e - s for s, e in spans),
            "span_s": spans[-1][1] - spans[0][0],
            "gap_p50_ms": median(gaps),
            "gap_max_ms": max(gaps) if gaps else float("nan"),
        }
    all_gaps = []
    for spans in per_process.values():
        all_gaps += [(b[0] - a[1]) * 1e3 for a, b in itertools.pairwise(spans)]
    return {
        "received_to_turn_p50_ms": median(to_start),
        "turn_p50_ms": median(turn),
        "turn_to_reply_p50_ms": median(to_reply),
        "turn_to_reply_p99_ms": percentile(to_reply, 99),
        "gap_between_turns_p50_ms": median(all_gaps),
        "processes": processes,
    }


def broker_for(redis: RedisServer) -> dict[str, Any]:
    return {
        "url": redis.url,
        "prefix": f"bench{uuid.uuid4().hex[:8]}",
        "claim_after": 30,
        "max_pending": 100000,
    }


# ---------------------------------------------------------------------------
# A. the burst
# ---------------------------------------------------------------------------


async def run_burst(
    root: Path,
    redis: RedisServer,
    fleets: list[Fleet],
    workers: int,
    settings: dict[str, Any],
    log: Callable[[str], None],
) -> dict[str, Any]:
    messages, chats, delay = settings["messages"], settings["chats"], settings["turn_s"]
    server = await BenchServer().start()
    fleet = Fleet(
        root / f"burst-{workers}w",
        delay=delay,
        turns=messages + 50,
        port=server.port,
        broker=broker_for(redis),
    )
    fleets.append(fleet)
    client = drain = None
    try:
        for n in range(1, workers + 1):
            fleet.start(f"worker{n}", "worker", concurrency=1)
        fleet.start("ingress", "ingress")
        await fleet.all_ready(server, "ingress")
        client = await ChatClient.open(server)
        drain = asyncio.create_task(discard_replies(client))
        names = [f"#c{n:02d}" for n in range(chats)]
        log(f"  {workers} worker(s): sending {messages} messages from {chats} chats at once ...")
        for i in range(messages):  # round 1 of every chat, then round 2, ...
            chat = names[i % chats]
            await client.say(chat, "ann", f"{chat} message {i // chats + 1}")
        ids = [f"m{n}" for n in range(1, messages + 1)]
        # Generous: three times the ideal time, plus a minute.
        deadline = 3 * messages * delay / workers + 60
        await server.wait_until(
            lambda: server.received >= messages and all(server.replies.get(m) for m in ids), deadline
        )
        await asyncio.sleep(settings["grace_s"])  # a duplicate would come now
        fleet.check_running()
        result = outcome(server, ids)
        first_sent = min(server.received_at[m] for m in ids)
        last_reply = max(result["first_reply"].values(), default=first_sent)
        elapsed = last_reply - first_sent
        result.update(
            workers=workers,
            messages=messages,
            chats=chats,
            elapsed_s=elapsed,
            throughput=result["answered"] / elapsed if elapsed > 0 else float("nan"),
            breakdown=breakdown(server, ids, fleet.turn_records()),
        )
        del result["first_reply"]
        return result
    finally:
        await teardown(server, client, drain, fleet)


# ---------------------------------------------------------------------------
# B. light load, with and without the broker
# ---------------------------------------------------------------------------


async def run_light(
    root: Path,
    redis: RedisServer,
    fleets: list[Fleet],
    through_broker: bool,
    settings: dict[str, Any],
    log: Callable[[str], None],
) -> dict[str, Any]:
    count, delay = settings["light"], settings["turn_s"]
    server = await BenchServer().start()
    name = "light-broker" if through_broker else "light-direct"
    fleet = Fleet(
        root / name,
        delay=delay,
        turns=count + WARM_UP + 50,
        port=server.port,
        broker=broker_for(redis) if through_broker else None,
    )
    fleets.append(fleet)
    client = drain = None
    try:
        if through_broker:
            fleet.start("worker1", "worker", concurrency=1)
            fleet.start("ingress", "ingress")
            await fleet.all_ready(server, "ingress")
        else:
            fleet.start("gateway", "all")
            await fleet.all_ready(server, "gateway")
        client = await ChatClient.open(server)
        drain = asyncio.create_task(discard_replies(client))
        log(f"  {name}: {count} messages one after another ...")
        for n in range(1, WARM_UP + count + 1):
            chat = "#warm-up" if n <= WARM_UP else "#light"
            await client.say(chat, "bo", f"{chat} message {n}")
            if not await server.wait_until(lambda n=n: bool(server.replies.get(f"m{n}")), LIGHT_DEADLINE):
                fleet.check_running()
                break  # counted as lost
        await asyncio.sleep(settings["grace_s"])
        fleet.check_running()
        ids = [f"m{n}" for n in range(WARM_UP + 1, WARM_UP + count + 1)]
        result = outcome(server, ids)
        del result["first_reply"]
        result.update(
            setup="ingress + 1 worker, through Redis" if through_broker else "--role all, no broker",
            messages=count,
            breakdown=breakdown(server, ids, fleet.turn_records()),
        )
        return result
    finally:
        await teardown(server, client, drain, fleet)


async def run_all(
    root: Path, redis: RedisServer, fleets: list[Fleet], settings: dict[str, Any], log: Callable[[str], None]
) -> dict[str, Any]:
    log("A. burst ...")
    burst = [await run_burst(root, redis, fleets, n, settings, log) for n in settings["workers"]]
    base = next((row for row in burst if row["workers"] == 1), None)
    for row in burst:
        row["vs_1"] = row["throughput"] / base["throughput"] if base and base["throughput"] else None
    log("B. light load ...")
    broker = await run_light(root, redis, fleets, True, settings, log)
    direct = await run_light(root, redis, fleets, False, settings, log)
    overhead = broker["p50_ms"] - direct["p50_ms"]
    most = max(burst, key=lambda row: row["workers"])
    scaling = most["vs_1"] if base is not None and most is not base else None
    targets = {
        "throughput": {
            "workers": most["workers"],
            "ratio": scaling,
            "target": THROUGHPUT_TARGET,
            "met": None if scaling is None or most["workers"] != 4 else scaling >= THROUGHPUT_TARGET,
        },
        "overhead": {
            "p50_ms": overhead,
            "target_ms": OVERHEAD_TARGET_MS,
            "met": overhead <= OVERHEAD_TARGET_MS,
        },
    }
    return {
        "burst": burst,
        "light": {
            "broker": broker,
            "direct": direct,
            "overhead_p50_ms": overhead,
            "broker_p50_minus_turn_ms": broker["p50_ms"] - settings["turn_s"] * 1e3,
            "direct_p50_minus_turn_ms": direct["p50_ms"] - settings["turn_s"] * 1e3,
        },
        "targets": targets,
    }


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def environment(redis: RedisServer) -> dict[str, Any]:
    try:
        kernel_version = metadata.version("hermes-kernel")
    except metadata.PackageNotFoundError:
        kernel_version = "not installed"
    client = redis.client()
    try:
        redis_version = client.info("server")["redis_version"]
    finally:
        client.close()
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "hermes_kernel": kernel_version,
        "redis_server": redis_version,
        "redis_py": metadata.version("redis"),
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "platform": platform.platform(),
    }


def print_report(env: dict[str, Any], settings: dict[str, Any], results: dict[str, Any]) -> None:
    turn_ms = settings["turn_s"] * 1e3
    print("hermes-kernel gateway benchmark")
    print(
        f"Python {env['python']} ({env['implementation']}), hermes-kernel {env['hermes_kernel']}, "
        f"redis-server {env['redis_server']} (appendfsync {settings['appendfsync']}), "
        f"redis-py {env['redis_py']}"
    )
    print(f"CPU count: {env['cpu_count']} (usable: {env['cpus_usable']}), {env['platform']}")
    print(f"mode: {'quick' if settings['quick'] else 'full'}")
    print()
    print(
        f"A. Burst: one ingress and N workers (separate processes, each --concurrency 1: N workers = "
        f"N turns at once), a {turn_ms:.0f} ms model turn;"
    )
    print(
        f"   {settings['messages']} messages from {settings['chats']} chats sent at once, interleaved; "
        "throughput = messages / (first message received -> last reply);"
    )
    print(
        "   latency = the chat server's receipt of a message -> its reply; lost = no reply in time; "
        "dup = a second reply to a message"
    )
    print()
    header = (
        f"{'workers':<8} {'msgs':>5} {'chats':>6} {'throughput':>11} {'vs 1 worker':>12} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'lost':>5} {'dup':>4}"
    )
    print(header)
    print("-" * len(header))
    for row in results["burst"]:
        ratio = f"{row['vs_1']:.2f}x" if row["vs_1"] is not None else "n/a"
        print(
            f"{row['workers']:<8} {row['messages']:>5} {row['chats']:>6} {row['throughput']:>9.2f}/s "
            f"{ratio:>12} {row['p50_ms']:>8.1f} {row['p99_ms']:>8.1f} {row['lost']:>5} {row['dup']:>4}"
            + (
                f"  (target >= {THROUGHPUT_TARGET}x)"
                if row["workers"] == 4 and row["vs_1"] is not None
                else ""
            )
        )
    print()
    print("where the time goes (probe plugin: each turn's start and end in the worker; medians):")
    header = (
        f"{'workers':<8} {'ideal/s':>8} {'received->turn':>15} {'turn ms':>8} {'turn->reply':>12} "
        f"{'gap between turns':>18}  turns per worker"
    )
    print(header)
    print("-" * len(header))
    for row in results["burst"]:
        b = row["breakdown"]
        ideal = row["workers"] / settings["turn_s"]
        per_worker = " ".join(str(p["turns"]) for p in b["processes"].values())
        print(
            f"{row['workers']:<8} {ideal:>8.2f} {b['received_to_turn_p50_ms']:>12.1f} ms "
            f"{b['turn_p50_ms']:>8.1f} {b['turn_to_reply_p50_ms']:>9.1f} ms "
            f"{b['gap_between_turns_p50_ms']:>15.1f} ms  {per_worker}"
        )
    for row in results["burst"]:
        for key in ("bad", "unknown", "out_of_order"):
            if row[key]:
                print(f"WARNING: {row['workers']} worker(s): {row[key]} {key.replace('_', ' ')} replies")
    print()
    light = results["light"]
    print(
        f"B. Broker overhead at light load: one chat, {settings['light']} messages one after another "
        f"(after {WARM_UP} warm-up messages), a {turn_ms:.0f} ms turn"
    )
    for key in ("broker", "direct"):
        row = light[key]
        b = row["breakdown"]
        lost = f", lost {row['lost']}, dup {row['dup']}" if row["lost"] or row["dup"] else ""
        print(
            f"light  {row['setup']:<34} p50 {row['p50_ms']:7.1f} ms  p99 {row['p99_ms']:7.1f} ms  "
            f"(p50 - turn: {row['p50_ms'] - turn_ms:5.1f} ms; "
            f"received->turn {b['received_to_turn_p50_ms']:.1f} ms, turn {b['turn_p50_ms']:.1f} ms, "
            f"turn->reply {b['turn_to_reply_p50_ms']:.1f} ms){lost}"
        )
    print(
        "broker overhead per message (p50 through the broker - p50 without): "
        f"{light['overhead_p50_ms']:.1f} ms (target <= {OVERHEAD_TARGET_MS:.0f} ms)"
    )
    print(f"broker case p50 latency - {turn_ms:.0f} ms turn: {light['broker_p50_minus_turn_ms']:.1f} ms")
    print()
    targets = results["targets"]
    verdicts = []
    t = targets["throughput"]
    if t["met"] is None:
        what = "not measured (needs --workers with 1 and 4)"
        print(f"target throughput: 4 workers >= {THROUGHPUT_TARGET}x 1 worker: {what}")
        verdicts.append(f"throughput {what}")
    else:
        mark = "met" if t["met"] else "NOT met"
        print(
            f"target throughput: {t['workers']} workers / 1 worker = {t['ratio']:.2f}x "
            f"(target >= {THROUGHPUT_TARGET}x): {mark}"
        )
        verdicts.append(f"throughput {mark}")
    o = targets["overhead"]
    mark = "met" if o["met"] else "NOT met"
    print(
        f"target broker overhead: {o['p50_ms']:.1f} ms per message at p50 "
        f"(target <= {OVERHEAD_TARGET_MS:.0f} ms): {mark}"
    )
    verdicts.append(f"broker overhead {mark}")
    print(f"targets: {'; '.join(verdicts)}")


def unsound(results: dict[str, Any]) -> list[str]:
    """Why the figures cannot be trusted: a reply that was not the scripted one (the script ran out,
    a turn failed) or a reply to a message never sent."""
    problems = []
    rows = [(f"{r['workers']} worker(s)", r) for r in results["burst"]]
    rows += [(r["setup"], r) for r in (results["light"]["broker"], results["light"]["direct"])]
    for label, row in rows:
        if row["bad"]:
            problems.append(f"{label}: {row['bad']} replies were not {REPLY!r}")
        if row["unknown"]:
            problems.append(f"{label}: {row['unknown']} replies to messages never sent")
    return problems


def print_log_tails(root: Path) -> None:
    """The last lines of every process's output and kernel log (after a failure)."""
    for path in sorted([*root.glob("*/*.out"), *root.glob("*/*/logs/*.log"), *root.glob("redis/*.log")]):
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        print(f"--- {path.relative_to(root)} (last {LOG_TAIL} lines)", file=sys.stderr)
        for line in lines[-LOG_TAIL:]:
            print(f"    {line}", file=sys.stderr)


def workers_list(text: str) -> list[int]:
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError("worker counts must be at least 1")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="hermes-kernel gateway benchmark (ingress, workers, Redis)")
    parser.add_argument(
        "--quick", action="store_true", help="2 chats x 5 messages, workers 1,2, a 0.05 s turn, 5 light"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE ('-': stdout)")
    parser.add_argument("--workers", type=workers_list, help="worker counts to measure (default 1,2,4)")
    parser.add_argument("--messages", type=int, help="messages of the burst (default 400)")
    parser.add_argument("--chats", type=int, help="chats they come from (default 40)")
    parser.add_argument("--turn", type=float, metavar="SECONDS", help="the model turn (default 0.2)")
    parser.add_argument("--light", type=int, metavar="N", help="messages at light load (default 30)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (homes, logs)")
    parser.add_argument(
        "--appendfsync",
        choices=("everysec", "always"),
        default="everysec",
        help="Redis's append-only file sync (default everysec, Redis's own default; always: an fsync "
        "per write, nothing lost even if the Redis machine fails)",
    )
    options = parser.parse_args(argv)

    if options.quick:
        settings: dict[str, Any] = {
            "workers": [1, 2],
            "messages": 10,
            "chats": 2,
            "turn_s": 0.05,
            "light": 5,
            "grace_s": 1.0,
        }
    else:
        settings = {
            "workers": [1, 2, 4],
            "messages": 400,
            "chats": 40,
            "turn_s": 0.2,
            "light": 30,
            "grace_s": 2.0,
        }
    for key, value in (
        ("workers", options.workers),
        ("messages", options.messages),
        ("chats", options.chats),
        ("turn_s", options.turn),
        ("light", options.light),
    ):
        if value is not None:
            settings[key] = value
    if settings["messages"] < 1 or settings["chats"] < 1 or settings["light"] < 1 or settings["turn_s"] < 0:
        parser.error("--messages, --chats and --light must be at least 1, --turn at least 0")
    settings["quick"] = options.quick
    settings["concurrency_per_worker"] = 1
    settings["appendfsync"] = options.appendfsync

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if not REDIS_SERVER.is_file():
        print(f"benchmark setup error: {REDIS_SERVER} is missing: run `make test-deps`", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="hermes-bench-gateway-"))
    fleets: list[Fleet] = []
    redis = RedisServer(root / "redis", appendfsync=options.appendfsync)
    failed = True
    try:
        redis.start()
        env = environment(redis)
        results = asyncio.run(run_all(root, redis, fleets, settings, log))
        failed = False
    except BenchError as exc:
        print(f"benchmark setup error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        failed = False
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        for fleet in fleets:
            fleet.stop()
        redis.stop()
        if failed:
            print_log_tails(root)
        if options.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print_report(env, settings, results)
    if options.json:
        for row in [*results["burst"], results["light"]["broker"], results["light"]["direct"]]:
            row["latencies_ms"] = [round(v, 3) for v in row["latencies_ms"]]
        document = json.dumps({"environment": env, "settings": settings, **results}, indent=2)
        if options.json == "-":
            print(document)
        else:
            Path(options.json).write_text(document + "\n", encoding="utf-8")
    problems = unsound(results)
    for problem in problems:
        print(f"benchmark not sound: {problem}", file=sys.stderr)
    return 2 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
