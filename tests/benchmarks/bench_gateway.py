"""hermes-kernel gateway benchmark (``make bench-gateway``): the scaled-out gateway under load, over HTTP.

Every gateway process is a real ``python -m kernel gateway run --role ...`` with a home of its own (as
on separate machines), on this machine; the broker is a real redis-server on 127.0.0.1 (the one
``make test-deps`` unpacks into .venv/debs, run by tests/redis_server.py with its append-only file,
``appendfsync everysec`` by default as in Redis, ``--appendfsync always`` for an fsync per write); the
platform is the bundled HTTP one (extensions/platforms/http) on the ingress, driven by real HTTP
clients (a lean asyncio HTTP/1.1 one in this file, one keep-alive connection per chat at most): each chat
is a person who posts a message with ``POST /v1/messages?wait=S`` and posts the next once the reply
came back in the response.  The model is the bundled ``scripted`` one, every turn ``ok`` after a fixed
wait.  A small probe plugin in every home records when each turn starts and ends.

A. Scaling: one ingress and 1, 2, 4, 8, 16 workers, each ``--concurrency 1`` (N workers = N turns at
   once), a 200 ms turn; 50 messages per worker (at least 100) from 40 chats.  Throughput is messages/s
   from the first request sent to the last reply received; latency is one request's time (p50, p99).
   A message not answered within the wait is lost; after each run every chat's replies are read back
   (``GET /v1/chats/<id>/replies``): a second reply to a message is a duplicate.
B. Capacity: one ingress and 4 workers, a 1 ms turn, 2,000 messages from 40 chats.  Besides
   throughput: the CPU seconds each process used (from /proc), Redis's CPU (INFO cpu) and the commands
   Redis ran (INFO commandstats, the commands its Lua scripts call included), per message.
C. Broker overhead at light load: one chat, 30 messages one after another (after 2 warm-up messages in
   another chat), through the broker (an ingress and one worker) and without one (``--role all``);
   the difference of the p50 latencies is the broker's overhead per message.  The HTTP round trip alone
   is ``GET /v1/health`` on the same gateway (p50 of 100).
D. ``--profile``: the capacity run again with Redis's MONITOR on (every command a client sent, by
   process: the round trips per message) and cProfile in every gateway process (where their CPU goes:
   the functions that took the most, for the ingress and for the workers together).  Both slow the
   gateway down: this run's throughput is not a measure.

Targets (issue 27): 16 workers >= 14x one worker; capacity >= 1,000 messages/s with 4 workers; broker
overhead <= 2 ms per message at p50.  The script reports whether they were met and exits 0 either way;
it exits non-zero only when the benchmark itself is not sound (a process did not start, a reply was not
the scripted one).

Usage::

    python tests/benchmarks/bench_gateway.py [--quick] [--profile] [--json FILE] [--workers 1,2,4,8,16]
        [--messages N] [--chats 40] [--turn 0.2] [--capacity 2000] [--light 30] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import itertools
import json
import marshal
import os
import platform
import pstats
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: Redis, the CLI

from conftest import CLI, cli_env, write_plugin
from redis_server import REDIS_SERVER, RedisServer

from kernel.testing import write_script

SCALING_TARGET = 14.0  # 16 workers / 1 worker
SCALING_AT = 16
CAPACITY_TARGET = 1000.0  # messages/s at 1 ms turns
CAPACITY_WORKERS = 4
CAPACITY_TURN = 0.001
OVERHEAD_TARGET_MS = 2.0  # broker - no broker, p50, at light load
REPLY = "ok"  # what every scripted turn says
WARM_UP = 2  # messages answered before the light-load measure (in a chat of their own)
HEALTH_PROBES = 100  # GET /v1/health round trips timed
READY_DEADLINE = 120.0  # seconds for a process to connect (a hang guard, not a measure)
REPLY_WAIT = 60.0  # the ?wait of every POST: a message not answered by then is lost
LOG_TAIL = 40  # lines of each log shown when the benchmark fails
TOP_FUNCTIONS = 12  # rows of each profile shown
PROFILE_ENV = "BENCH_GATEWAY_PROFILE"
WORKER_READY = re.compile(r"gateway: worker \S+ connected to ")
LISTENING = re.compile(r"http: listening on (http://127\.0\.0\.1:\d+)")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: Where a profiled thread waits (for the network, a lock, a queue) rather than works: left out.
IDLE = re.compile(
    r"'poll' of 'select|'select\.select'|'acquire' of '_thread|SimpleQueue' objects|time\.sleep"
)

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

PROFILED_CLI = r'''
"""``python -m kernel ARGS`` with cProfile in every thread; SIGUSR1 writes each thread's figures to
the folder $@PROFILE_ENV@ (then ``<pid>.done``); SIGUSR2 starts the figures afresh."""

import cProfile
import marshal
import os
import runpy
import signal
import threading

FOLDER = os.environ["@PROFILE_ENV@"]
profiles = []


def profile_this_thread(*_):
    profile = cProfile.Profile()
    profiles.append(profile)
    profile.enable()  # replaces this hook in the thread


def dump(*_):
    for n, profile in enumerate(list(profiles)):
        profile.snapshot_stats()  # not disable(): that would stop the calling thread's profile only
        with open(os.path.join(FOLDER, f"{os.getpid()}-{n}.prof"), "wb") as out:
            marshal.dump(profile.stats, out)
    with open(os.path.join(FOLDER, f"{os.getpid()}.done"), "w") as out:
        out.write("done")


def clear(*_):
    for profile in list(profiles):
        profile.clear()


signal.signal(signal.SIGUSR1, dump)
signal.signal(signal.SIGUSR2, clear)
threading.setprofile(profile_this_thread)
profile_this_thread()
runpy.run_module("kernel", run_name="__main__", alter_sys=True)
'''


class BenchError(RuntimeError):
    """The benchmark is not sound (a process did not start or ended); its numbers would be meaningless."""


# ---------------------------------------------------------------------------
# The clients, timing every message and reply
# ---------------------------------------------------------------------------


class Tally:
    """By message id (``m<n>``, numbered in each chat's order): when it was sent (``received_at``), its
    chat and text, when its reply came (``replies``: ``(time, text)``; more than one for a duplicate)
    and the order of all replies (``reply_order``, by the platform's ``seq``).  ``time.monotonic()``."""

    def __init__(self) -> None:
        self.received_at: dict[str, float] = {}
        self.chat_of: dict[str, str] = {}
        self.text_of: dict[str, str] = {}
        self.replies: dict[str, list[tuple[float, str]]] = {}
        self.reply_order: list[str] = []
        self.statuses: collections.Counter[int] = collections.Counter()


def plan(messages: int, chats: int, prefix: str = "c") -> dict[str, list[tuple[str, str]]]:
    """``messages`` spread over ``chats`` chats, round 1 of every chat, then round 2, ...: for each
    chat its ``(message id, text)`` in order."""
    names = [f"{prefix}{n:02d}" for n in range(chats)]
    out: dict[str, list[tuple[str, str]]] = {name: [] for name in names}
    for i in range(messages):
        chat = names[i % chats]
        out[chat].append((f"m{i + 1}", f"{chat} message {i // chats + 1}"))
    return {chat: items for chat, items in out.items() if items}


@dataclasses.dataclass
class Answer:
    status_code: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


class LeanClient:
    """HTTP/1.1 over keep-alive asyncio connections, at most ``connections`` open: the load generator
    shares the machine with the gateway, and httpx costs more CPU per request (3.7 ms measured) than
    the gateway does per message. The HTTP platform answers with Content-Length, never chunked."""

    def __init__(self, url: str, connections: int) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.free: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.slots = asyncio.Semaphore(connections)

    async def __aenter__(self) -> LeanClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for _reader, writer in self.free:
            writer.close()
        self.free.clear()

    async def get(self, path: str, params: dict[str, Any] | None = None) -> Answer:
        return await self.request("GET", path, params, None)

    async def post(self, path: str, params: dict[str, Any] | None = None, json: Any = None) -> Answer:
        return await self.request("POST", path, params, json)

    async def request(self, method: str, path: str, params: dict[str, Any] | None, body: Any) -> Answer:
        target = f"{path}?{urllib.parse.urlencode(params)}" if params else path
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {target} HTTP/1.1\r\nHost: {self.host}\r\nContent-Length: {len(data)}\r\n"
        if body is not None:
            head += "Content-Type: application/json\r\n"
        async with self.slots:
            reader, writer = self.free.pop() if self.free else await self._open()
            writer.write(head.encode() + b"\r\n" + data)
            status_line = await asyncio.wait_for(reader.readline(), REPLY_WAIT + 30)
            if not status_line:
                raise BenchError(f"{method} {path}: the gateway closed the connection")
            length, keep = 0, True
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
                elif name.strip().lower() == "connection":
                    keep = value.strip().lower() != "close"
            text = (await reader.readexactly(length)).decode()
            if keep:
                self.free.append((reader, writer))
            else:
                writer.close()
            return Answer(int(status_line.split()[1]), text)

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(self.host, self.port)


def http_client(url: str, connections: int) -> LeanClient:
    return LeanClient(url, connections)


async def converse(client: LeanClient, tally: Tally, chat: str, items: list[tuple[str, str]]) -> None:
    """One person: each message posted once the previous one's reply came back in its response."""
    for message_id, text in items:
        body = {"chat_id": chat, "text": text, "message_id": message_id, "user": "ann"}
        tally.chat_of[message_id], tally.text_of[message_id] = chat, text
        tally.received_at[message_id] = time.monotonic()
        answer = await client.post("/v1/messages", params={"wait": REPLY_WAIT}, json=body)
        now = time.monotonic()
        tally.statuses[answer.status_code] += 1
        if answer.status_code == 200:
            tally.replies[message_id] = [(now, str(answer.json().get("reply")))]
        elif answer.status_code != 202:  # 202: not answered within the wait (lost)
            raise BenchError(f"POST /v1/messages answered {answer.status_code}: {answer.text[:200]}")


async def read_back(client: LeanClient, tally: Tally, chats: list[str]) -> None:
    """Every reply the platform kept: a second one to a message is a duplicate; ``reply_order``."""
    kept: list[dict[str, Any]] = []
    for chat in chats:
        answer = await client.get(f"/v1/chats/{chat}/replies", params={"after": 0})
        kept += answer.json()["replies"]
    kept.sort(key=lambda r: r["seq"])
    seen: set[str] = set()
    for reply in kept:
        key = str(reply.get("reply_to"))
        tally.reply_order.append(key)
        if key in seen or key not in tally.replies:
            tally.replies.setdefault(key, []).append((float("inf"), str(reply.get("text"))))
        seen.add(key)


# ---------------------------------------------------------------------------
# The gateway processes of one configuration
# ---------------------------------------------------------------------------


class Fleet:
    """The homes and the processes of one configuration, in ``root``; :meth:`stop` kills them all."""

    def __init__(
        self,
        root: Path,
        *,
        delay: float,
        turns: int,
        broker: dict[str, Any] | None,
        profile: Path | None = None,
    ) -> None:
        self.root = root
        self.delay = delay
        self.turns = turns
        self.broker = broker
        self.profile = profile
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        root.mkdir(parents=True)

    def records(self, name: str) -> Path:
        return self.root / f"{name}.turns.jsonl"

    def out(self, name: str) -> Path:
        return self.root / f"{name}.out"

    def _home(self, name: str, concurrency: int, http: bool) -> Path:
        home = self.root / name
        home.mkdir()
        probe = PROBE_PLUGIN.replace("@RECORDS@", repr(str(self.records(name))))
        manifest = {
            "name": "bench_probe",
            "version": "0.1.0",
            "provides_hooks": ["pre_llm_call", "post_llm_call"],
        }
        write_plugin(home / "plugins", "bench_probe", probe, manifest)
        # Every process plays its own copy of the script: enough turns for all the messages.
        script = write_script(home, [{"text": REPLY, "delay_s": self.delay}] * self.turns)
        platforms: dict[str, Any] = {}
        if http:
            platforms["http"] = {
                "enabled": True,
                "port": 0,
                "max_connections": 1024,
                "max_pending": 100000,
                "max_replies_per_chat": 10000,
            }
        gateway: dict[str, Any] = {"platforms": platforms, "worker": {"concurrency": concurrency}}
        if self.broker is not None:
            gateway["broker"] = self.broker
        config = {
            "model": {"provider": "scripted", "script": str(script)},
            "plugins": {"enabled": ["bench_probe"]},
            "gateway": gateway,
        }
        (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        return home

    def start(self, name: str, role: str, concurrency: int = 1) -> None:
        home = self._home(name, concurrency, http=role != "worker")
        command = [*CLI, "gateway", "run", "--role", role]
        extra = {}
        if self.profile is not None:  # the same command under cProfile
            launcher = self.root / "profiled_cli.py"
            if not launcher.is_file():  # once: a process may be reading it
                launcher.write_text(PROFILED_CLI.replace("@PROFILE_ENV@", PROFILE_ENV), encoding="utf-8")
            command = [sys.executable, str(launcher), *command[len(CLI) :]]
            extra = {PROFILE_ENV: str(self.profile)}
        if role == "worker":
            command += ["--concurrency", str(concurrency)]
        with self.out(name).open("ab") as log:
            self.procs[name] = subprocess.Popen(
                command,
                env=cli_env(home, **extra),
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

    async def all_ready(self, platform_holder: str) -> str:
        """Wait until every worker is connected to Redis and ``platform_holder`` listens; its URL."""
        waits = [
            self.ready(name, lambda text: WORKER_READY.search(text) is not None, "'worker ... connected to'")
            for name in self.procs
            if name.startswith("worker")
        ]
        waits.append(
            self.ready(platform_holder, lambda text: LISTENING.search(text) is not None, "listening")
        )
        await asyncio.gather(*waits)
        found = LISTENING.search(self.output(platform_holder))
        assert found is not None
        return found[1]

    def check_running(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise BenchError(f"{self.root.name}/{name} ended (exit {proc.returncode}) during the measure")

    def cpu_seconds(self) -> dict[str, float]:
        """User + system CPU each process has used so far (from /proc/<pid>/stat)."""
        out = {}
        for name, proc in self.procs.items():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()
                out[name] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        return out

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
# Redis: commands, CPU, and every round trip (MONITOR)
# ---------------------------------------------------------------------------


def redis_counters(redis: RedisServer) -> tuple[dict[str, int], float]:
    """Calls per command so far (the ones Lua scripts make included) and Redis's CPU seconds."""
    client = redis.client()
    try:
        stats = client.info("commandstats")
        cpu = client.info("cpu")
    finally:
        client.close()
    calls = {key.removeprefix("cmdstat_"): int(value["calls"]) for key, value in stats.items()}
    return calls, float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


MONITOR_LINE = re.compile(rb'^\+\d+\.\d+ \[\d+ ([^\]]+)\] "([^"]*)"')


class Monitor:
    """Redis's MONITOR in a thread: how many commands each client connection sent (``lua`` for the
    ones scripts ran), by command name."""

    def __init__(self, redis: RedisServer) -> None:
        self.redis = redis
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._sock = socket.create_connection(("127.0.0.1", self.redis.port))
        self._sock.settimeout(0.2)
        if self.redis.password:
            self._sock.sendall(f"AUTH {self.redis.password}\r\n".encode())
        self._sock.sendall(b"MONITOR\r\n")
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._sock is not None
        pending = b""
        while not self._stop.is_set():
            try:
                chunk = self._sock.recv(1 << 16)
            except TimeoutError:
                continue
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\r\n")
            for line in lines:
                found = MONITOR_LINE.match(line)
                if found:
                    self.counts[(found[1].decode(), found[2].decode().upper())] += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._sock is not None:
            self._sock.close()


def client_ports(pids: dict[str, int], redis_port: int) -> dict[int, str]:
    """The local port of every TCP connection to Redis's port, by the name of the process holding it."""
    inodes: dict[str, str] = {}
    for name, pid in pids.items():
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes[target[8:-1]] = name
    ports: dict[int, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(table).read_text().splitlines()[1:]:
                cols = row.split()
                local, remote, inode = cols[1], cols[2], cols[9]
                if int(remote.rpartition(":")[2], 16) == redis_port and inode in inodes:
                    ports[int(local.rpartition(":")[2], 16)] = inodes[inode]
    return ports


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


def outcome(tally: Tally, ids: list[str]) -> dict[str, Any]:
    """Latencies (ms), lost, duplicated, unexpected and out-of-order replies of the messages ``ids``."""
    wanted = set(ids)
    first = {
        m: tally.replies[m][0][0] for m in ids if tally.replies.get(m) and tally.replies[m][0][0] < 1e300
    }
    latencies = [(first[m] - tally.received_at[m]) * 1e3 for m in ids if m in first]
    bad = sum(1 for m in ids for _at, text in tally.replies.get(m, []) if text != REPLY)
    # Each chat's replies must come in the order its messages were sent.
    by_chat: dict[str, list[int]] = {}
    for key in tally.reply_order:
        if key in wanted:
            by_chat.setdefault(tally.chat_of[key], []).append(int(key[1:]))
    out_of_order = sum(1 for numbers in by_chat.values() for a, b in itertools.pairwise(numbers) if b < a)
    return {
        "answered": len(first),
        "lost": len(ids) - len(first),
        "dup": sum(len(tally.replies[m]) - 1 for m in first),
        "bad": bad,
        "unknown": sum(len(v) for k, v in tally.replies.items() if k not in tally.received_at),
        "out_of_order": out_of_order,
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "latencies_ms": latencies,
        "first_reply": first,
    }


def breakdown(tally: Tally, ids: list[str], records: list[dict[str, Any]]) -> dict[str, Any]:
    """Where each message's time went, from the probe's turn records: sent -> turn start (HTTP, the
    ingress, the queue), the turn, turn end -> reply (the way back); per process, the turns it ran
    and the gaps between its consecutive turns."""
    message_of = {tally.text_of[m]: m for m in ids if m in tally.text_of}
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
        reply = tally.replies.get(m)
        if text in starts and text in ends and reply and reply[0][0] < 1e300:
            to_start.append((starts[text] - tally.received_at[m]) * 1e3)
            turn.append((ends[text] - starts[text]) * 1e3)
            to_reply.append((reply[0][0] - ends[text]) * 1e3)
    processes = {}
    all_gaps: list[float] = []
    for name, spans in sorted(per_process.items()):
        spans.sort()
        gaps = [(b[0] - a[1]) * 1e3 for a, b in itertools.pairwise(spans)]
        all_gaps += gaps
        processes[name] = {"turns": len(spans), "gap_p50_ms": median(gaps)}
    return {
        "sent_to_turn_p50_ms": median(to_start),
        "turn_p50_ms": median(turn),
        "turn_to_reply_p50_ms": median(to_reply),
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
# A and B: many chats at once
# ---------------------------------------------------------------------------


async def run_load(
    root: Path,
    redis: RedisServer,
    fleets: list[Fleet],
    *,
    label: str,
    workers: int,
    messages: int,
    chats: int,
    delay: float,
    settings: dict[str, Any],
    log: Callable[[str], None],
    profile: bool = False,
) -> dict[str, Any]:
    """One ingress with the HTTP platform and ``workers`` workers; ``messages`` from ``chats`` chats,
    each chat's one after another; the figures, the CPU each process used and Redis's counters."""
    profile_dir = root / f"{label}.profile" if profile else None
    if profile_dir is not None:
        profile_dir.mkdir(parents=True)
    fleet = Fleet(
        root / label, delay=delay, turns=messages + 50, broker=broker_for(redis), profile=profile_dir
    )
    fleets.append(fleet)
    try:
        for n in range(1, workers + 1):
            fleet.start(f"worker{n}", "worker", concurrency=1)
        fleet.start("ingress", "ingress")
        url = await fleet.all_ready("ingress")
        conversations = plan(messages, chats)
        tally = Tally()
        async with http_client(url, len(conversations)) as client:
            # One round trip per connection first: the measure does not include opening them.
            await asyncio.gather(*(client.get("/v1/health") for _ in conversations))
            log(f"  {label}: {workers} worker(s), {messages} messages from {chats} chats ...")
            monitor = Monitor(redis) if profile else None
            cpu_before, (calls_before, redis_before) = fleet.cpu_seconds(), redis_counters(redis)
            if monitor is not None:
                monitor.start()
                for proc in fleet.procs.values():  # the profiles start now (not at the imports)
                    os.kill(proc.pid, signal.SIGUSR2)
            client_before, started = time.process_time(), time.monotonic()
            deadline = 3 * messages * max(delay, 0.01) / workers + 60
            await asyncio.wait_for(
                asyncio.gather(*(converse(client, tally, c, items) for c, items in conversations.items())),
                deadline,
            )
            elapsed, client_cpu = time.monotonic() - started, time.process_time() - client_before
            cpu_after, (calls_after, redis_after) = fleet.cpu_seconds(), redis_counters(redis)
            ports = client_ports({n: p.pid for n, p in fleet.procs.items()}, redis.port) if monitor else {}
            if monitor is not None:
                monitor.stop()
            await asyncio.sleep(settings["grace_s"])  # a duplicate would come now
            await read_back(client, tally, list(conversations))
        fleet.check_running()
        ids = [m for items in conversations.values() for m, _text in items]
        result = outcome(tally, ids)
        del result["first_reply"]
        cpu = {name: cpu_after.get(name, 0.0) - cpu_before.get(name, 0.0) for name in fleet.procs}
        calls = {k: v - calls_before.get(k, 0) for k, v in calls_after.items() if v > calls_before.get(k, 0)}
        result.update(
            label=label,
            workers=workers,
            messages=messages,
            chats=chats,
            turn_s=delay,
            elapsed_s=elapsed,
            throughput=result["answered"] / elapsed if elapsed > 0 else float("nan"),
            breakdown=breakdown(tally, ids, fleet.turn_records()),
            cpu_s={
                "ingress": cpu.get("ingress", 0.0),
                "workers": sum(v for k, v in cpu.items() if k.startswith("worker")),
                "redis": redis_after - redis_before,
                "http_clients": client_cpu,
            },
            redis_calls=calls,
        )
        if monitor is not None:
            result["round_trips"] = round_trips(monitor, ports)
            result["profile"] = await collect_profiles(fleet, profile_dir)
        return result
    finally:
        fleet.stop()


def round_trips(monitor: Monitor, ports: dict[int, str]) -> dict[str, dict[str, int]]:
    """The commands MONITOR saw, by sender (``ingress``, ``workers``, ``lua``) and name."""
    out: dict[str, dict[str, int]] = {}
    for (client, command), count in monitor.counts.items():
        if client == "lua":
            who = "lua"
        else:
            port = int(client.rpartition(":")[2]) if client.rpartition(":")[2].isdigit() else -1
            name = ports.get(port, "other")
            who = "workers" if name.startswith("worker") else name
        out.setdefault(who, {})
        out[who][command] = out[who].get(command, 0) + count
    return out


async def collect_profiles(fleet: Fleet, folder: Path | None) -> dict[str, Any]:
    """SIGUSR1 to every process, then the top functions of the ingress and of the workers together."""
    assert folder is not None
    for proc in fleet.procs.values():
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGUSR1)
    pids = {proc.pid: name for name, proc in fleet.procs.items()}
    give_up = time.monotonic() + 30
    while not all((folder / f"{pid}.done").is_file() for pid in pids):
        if time.monotonic() > give_up:
            raise BenchError(f"{fleet.root.name}: not every process wrote its profile to {folder}")
        await asyncio.sleep(0.05)
    out: dict[str, Any] = {}
    for role in ("ingress", "workers"):
        files = [
            str(path)
            for path in folder.glob("*.prof")
            if pids.get(int(path.name.split("-")[0]), "").startswith(role.rstrip("s"))
            and marshal.loads(path.read_bytes())  # a thread that ran nothing since the start: none
        ]
        stats = pstats.Stats(*files)
        rows = []
        busy = {k: v for k, v in stats.stats.items() if not IDLE.search(k[2])}  # type: ignore[attr-defined]
        total = sum(tottime for _cc, _nc, tottime, _ct, _callers in busy.values())
        for (file, line, func), (_cc, calls, tottime, cumtime, _callers) in busy.items():
            rows.append(
                {
                    "where": f"{short(file)}:{line}({func})",
                    "calls": calls,
                    "tottime_s": tottime,
                    "cumtime_s": cumtime,
                }
            )
        rows.sort(key=lambda r: r["tottime_s"], reverse=True)
        by_file: collections.Counter[str] = collections.Counter()
        for (file, _line, _func), (_cc, _nc, tottime, _ct, _callers) in busy.items():
            by_file[short(file)] += tottime
        out[role] = {
            "total_s": total,
            "top": rows[:TOP_FUNCTIONS],
            "by_file": [{"file": f, "tottime_s": t} for f, t in by_file.most_common(TOP_FUNCTIONS)],
        }
    return out


def short(file: str) -> str:
    """A profiled file's name without the machine's folders."""
    return re.sub(r"^.*?/(site-packages|lib/python3\.\d+|main)/", "", file)


# ---------------------------------------------------------------------------
# C. light load, with and without the broker
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
    name = "light-broker" if through_broker else "light-direct"
    fleet = Fleet(
        root / name,
        delay=delay,
        turns=count + WARM_UP + 50,
        broker=broker_for(redis) if through_broker else None,
    )
    fleets.append(fleet)
    try:
        if through_broker:
            fleet.start("worker1", "worker", concurrency=1)
            fleet.start("ingress", "ingress")
            url = await fleet.all_ready("ingress")
        else:
            fleet.start("gateway", "all")
            url = await fleet.all_ready("gateway")
        tally = Tally()
        async with http_client(url, 1) as client:
            log(f"  {name}: {count} messages one after another ...")
            await converse(
                client, tally, "warm-up", [(f"m{n}", f"warm-up {n}") for n in range(1, WARM_UP + 1)]
            )
            ids = [f"m{n}" for n in range(WARM_UP + 1, WARM_UP + count + 1)]
            await converse(client, tally, "light", [(m, f"light {m}") for m in ids])
            health = []
            for _ in range(HEALTH_PROBES):
                started = time.monotonic()
                answer = await client.get("/v1/health")
                health.append((time.monotonic() - started) * 1e3)
                if answer.status_code != 200:
                    raise BenchError(f"GET /v1/health answered {answer.status_code}")
            await asyncio.sleep(settings["grace_s"])
            await read_back(client, tally, ["warm-up", "light"])
        fleet.check_running()
        result = outcome(tally, ids)
        del result["first_reply"]
        result.update(
            setup="ingress + 1 worker, through Redis" if through_broker else "--role all, no broker",
            messages=count,
            health_p50_ms=median(health),
            breakdown=breakdown(tally, ids, fleet.turn_records()),
        )
        return result
    finally:
        fleet.stop()


async def run_all(
    root: Path, redis: RedisServer, fleets: list[Fleet], settings: dict[str, Any], log: Callable[[str], None]
) -> dict[str, Any]:
    chats = settings["chats"]
    log("A. scaling ...")
    burst = []
    for n in settings["workers"]:
        messages = settings["messages"] or max(100, 50 * n)
        burst.append(
            await run_load(
                root,
                redis,
                fleets,
                label=f"scaling-{n}w",
                workers=n,
                messages=messages,
                chats=chats,
                delay=settings["turn_s"],
                settings=settings,
                log=log,
            )
        )
    base = next((row for row in burst if row["workers"] == 1), None)
    for row in burst:
        row["vs_1"] = row["throughput"] / base["throughput"] if base and base["throughput"] else None
    log("B. capacity ...")
    capacity_args = {
        "workers": settings["capacity_workers"],
        "messages": settings["capacity"],
        "chats": chats,
        "delay": CAPACITY_TURN,
        "settings": settings,
        "log": log,
    }
    capacity = await run_load(root, redis, fleets, label="capacity", **capacity_args)
    profiled = None
    if settings["profile"]:
        log("D. the capacity run again, profiled ...")
        profiled = await run_load(root, redis, fleets, label="profile", profile=True, **capacity_args)
    log("C. light load ...")
    broker = await run_light(root, redis, fleets, True, settings, log)
    direct = await run_light(root, redis, fleets, False, settings, log)
    overhead = broker["p50_ms"] - direct["p50_ms"]
    most = next((row for row in burst if row["workers"] == SCALING_AT), None)
    scaling = most["vs_1"] if most is not None and base is not None else None
    targets = {
        "scaling": {
            "workers": SCALING_AT,
            "ratio": scaling,
            "target": SCALING_TARGET,
            "met": None if scaling is None else scaling >= SCALING_TARGET,
        },
        "capacity": {
            "workers": capacity["workers"],
            "throughput": capacity["throughput"],
            "target": CAPACITY_TARGET,
            "met": capacity["throughput"] >= CAPACITY_TARGET
            if capacity["workers"] == CAPACITY_WORKERS
            else None,
        },
        "overhead": {
            "p50_ms": overhead,
            "target_ms": OVERHEAD_TARGET_MS,
            "met": overhead <= OVERHEAD_TARGET_MS,
        },
    }
    return {
        "burst": burst,
        "capacity": capacity,
        "profile": profiled,
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


def print_cost(row: dict[str, Any]) -> None:
    """CPU and Redis commands per message of a load run."""
    n = max(row["answered"], 1)
    cpu = row["cpu_s"]
    print(
        "CPU per message: "
        + ", ".join(f"{who} {seconds * 1e3 / n:.2f} ms" for who, seconds in cpu.items())
        + "  (total over the run: "
        + ", ".join(f"{who} {seconds:.1f} s" for who, seconds in cpu.items())
        + f", in {row['elapsed_s']:.1f} s)"
    )
    calls = sorted(row["redis_calls"].items(), key=lambda kv: kv[1], reverse=True)
    total = sum(v for _k, v in calls)
    print(
        f"Redis commands per message (scripts' own included): {total / n:.1f} — "
        + ", ".join(f"{k} {v / n:.2f}" for k, v in calls if v / n >= 0.05)
    )


def print_profile(row: dict[str, Any]) -> None:
    n = max(row["answered"], 1)
    trips = row["round_trips"]
    print(f"round trips to Redis per message (MONITOR, {row['answered']} messages):")
    for who in ("ingress", "workers", "lua", "other"):
        commands = trips.get(who)
        if not commands:
            continue
        total = sum(commands.values())
        what = "commands run by scripts" if who == "lua" else "round trips"
        print(
            f"  {who:<8} {total / n:6.2f} {what}: "
            + ", ".join(
                f"{k} {v / n:.2f}"
                for k, v in sorted(commands.items(), key=lambda kv: -kv[1])
                if v / n >= 0.01
            )
        )
    for role in ("ingress", "workers"):
        prof = row["profile"][role]
        print(
            f"cProfile, {role} (all threads, waits left out; {prof['total_s']:.1f} s of own time, "
            f"{prof['total_s'] * 1e3 / n:.2f} ms per message): by file"
        )
        for entry in prof["by_file"]:
            print(f"  {entry['tottime_s'] / prof['total_s'] * 100:5.1f}%  {entry['file']}")
        print("  the functions taking the most own time:")
        for entry in prof["top"]:
            print(
                f"  {entry['tottime_s'] / prof['total_s'] * 100:5.1f}%  {entry['calls'] / n:7.2f} calls/msg  "
                f"{entry['where']}"
            )


def print_report(env: dict[str, Any], settings: dict[str, Any], results: dict[str, Any]) -> None:
    turn_ms = settings["turn_s"] * 1e3
    print("hermes-kernel gateway benchmark (the HTTP platform, one ingress, workers, Redis)")
    print(
        f"Python {env['python']} ({env['implementation']}), hermes-kernel {env['hermes_kernel']}, "
        f"redis-server {env['redis_server']} (appendfsync {settings['appendfsync']}), "
        f"redis-py {env['redis_py']}"
    )
    print(f"CPU count: {env['cpu_count']} (usable: {env['cpus_usable']}), {env['platform']}")
    print(f"mode: {'quick' if settings['quick'] else 'full'}")
    print()
    print(
        f"A. Scaling: one ingress (HTTP) and N workers (each --concurrency 1), a {turn_ms:.0f} ms turn; "
        f"{settings['chats']} chats at once, each posting its next message (POST /v1/messages?wait=) "
        "once the last was answered;"
    )
    print("   throughput = messages / (first request -> last reply); latency = one request's time")
    print()
    header = (
        f"{'workers':<8} {'msgs':>5} {'throughput':>11} {'vs 1 worker':>12} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'lost':>5} {'dup':>4} {'sent->turn':>11} {'turn->reply':>12} {'gap':>7}"
    )
    print(header)
    print("-" * len(header))
    for row in results["burst"]:
        ratio = f"{row['vs_1']:.2f}x" if row["vs_1"] is not None else "n/a"
        b = row["breakdown"]
        print(
            f"{row['workers']:<8} {row['messages']:>5} {row['throughput']:>9.2f}/s {ratio:>12} "
            f"{row['p50_ms']:>8.1f} {row['p99_ms']:>8.1f} {row['lost']:>5} {row['dup']:>4} "
            f"{b['sent_to_turn_p50_ms']:>8.1f} ms {b['turn_to_reply_p50_ms']:>9.1f} ms "
            f"{b['gap_between_turns_p50_ms']:>4.1f} ms"
        )
    print("(sent->turn, turn->reply: medians from the probe plugin; gap: a worker's idle time between turns)")
    print()
    cap = results["capacity"]
    print(
        f"B. Capacity: one ingress and {cap['workers']} workers, a {CAPACITY_TURN * 1e3:.0f} ms turn, "
        f"{cap['messages']} messages from {cap['chats']} chats"
    )
    print(
        f"capacity {cap['throughput']:.0f} messages/s  p50 {cap['p50_ms']:.1f} ms  "
        f"p99 {cap['p99_ms']:.1f} ms  lost {cap['lost']}  dup {cap['dup']}"
    )
    print_cost(cap)
    print()
    light = results["light"]
    print(
        f"C. Broker overhead at light load: one chat, {settings['light']} messages one after another "
        f"(after {WARM_UP} warm-up messages), a {turn_ms:.0f} ms turn"
    )
    for key in ("broker", "direct"):
        row = light[key]
        b = row["breakdown"]
        lost = f", lost {row['lost']}, dup {row['dup']}" if row["lost"] or row["dup"] else ""
        print(
            f"light  {row['setup']:<34} p50 {row['p50_ms']:7.1f} ms  p99 {row['p99_ms']:7.1f} ms  "
            f"(p50 - turn: {row['p50_ms'] - turn_ms:5.1f} ms; sent->turn {b['sent_to_turn_p50_ms']:.1f} ms, "
            f"turn->reply {b['turn_to_reply_p50_ms']:.1f} ms){lost}"
        )
    print(
        f"HTTP round trip alone (GET /v1/health, p50 of {HEALTH_PROBES}): "
        f"{light['direct']['health_p50_ms']:.2f} ms"
    )
    print(
        "broker overhead per message (p50 through the broker - p50 without): "
        f"{light['overhead_p50_ms']:.1f} ms (target <= {OVERHEAD_TARGET_MS:.0f} ms)"
    )
    print()
    if results["profile"] is not None:
        prof = results["profile"]
        print(
            f"D. Profile: the capacity run again with MONITOR and cProfile on ({prof['throughput']:.0f} "
            "messages/s: slowed by both, not a measure)"
        )
        print_profile(prof)
        print()
    for row in [*results["burst"], cap]:
        for key in ("bad", "unknown", "out_of_order"):
            if row[key]:
                print(f"WARNING: {row['label']}: {row[key]} {key.replace('_', ' ')} replies")
    targets = results["targets"]
    verdicts = []
    t = targets["scaling"]
    if t["met"] is None:
        what = f"not measured (needs --workers with 1 and {SCALING_AT})"
        print(f"target scaling: {SCALING_AT} workers >= {SCALING_TARGET:.0f}x 1 worker: {what}")
        verdicts.append(f"scaling {what}")
    else:
        mark = "met" if t["met"] else "NOT met"
        print(
            f"target scaling: {SCALING_AT} workers / 1 worker = {t['ratio']:.2f}x "
            f"(target >= {SCALING_TARGET:.0f}x): {mark}"
        )
        verdicts.append(f"scaling {mark}")
    c = targets["capacity"]
    if c["met"] is None:
        what = f"not measured (needs {CAPACITY_WORKERS} workers)"
        verdicts.append(f"capacity {what}")
    else:
        what = "met" if c["met"] else "NOT met"
        verdicts.append(f"capacity {what}")
    print(
        f"target capacity: {c['throughput']:.0f} messages/s with {c['workers']} workers at 1 ms turns "
        f"(target >= {CAPACITY_TARGET:.0f}/s with {CAPACITY_WORKERS}): {what}"
    )
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
    rows = [(r["label"], r) for r in [*results["burst"], results["capacity"]]]
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
    parser = argparse.ArgumentParser(
        description="hermes-kernel gateway benchmark (HTTP, ingress, workers, Redis)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="2 chats x 5 messages, workers 1,2, a 0.05 s turn, capacity 2 workers x 20 messages, 5 light",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run the capacity configuration again with MONITOR and cProfile",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE ('-': stdout)")
    parser.add_argument("--workers", type=workers_list, help="worker counts to measure (default 1,2,4,8,16)")
    parser.add_argument(
        "--messages", type=int, help="messages of each scaling run (default 50 per worker, >= 100)"
    )
    parser.add_argument("--chats", type=int, help="chats they come from (default 40)")
    parser.add_argument("--turn", type=float, metavar="SECONDS", help="the model turn (default 0.2)")
    parser.add_argument(
        "--capacity", type=int, metavar="N", help="messages of the capacity run (default 2000)"
    )
    parser.add_argument("--capacity-workers", type=int, metavar="N", help="its workers (default 4)")
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

    settings: dict[str, Any]
    if options.quick:
        settings = {
            "workers": [1, 2],
            "messages": 10,
            "chats": 2,
            "turn_s": 0.05,
            "capacity": 20,
            "capacity_workers": 2,
            "light": 5,
            "grace_s": 0.5,
        }
    else:
        settings = {
            "workers": [1, 2, 4, 8, 16],
            "messages": None,
            "chats": 40,
            "turn_s": 0.2,
            "capacity": 2000,
            "capacity_workers": CAPACITY_WORKERS,
            "light": 30,
            "grace_s": 1.0,
        }
    for key, value in (
        ("workers", options.workers),
        ("messages", options.messages),
        ("chats", options.chats),
        ("turn_s", options.turn),
        ("capacity", options.capacity),
        ("capacity_workers", options.capacity_workers),
        ("light", options.light),
    ):
        if value is not None:
            settings[key] = value
    if (
        (settings["messages"] is not None and settings["messages"] < 1)
        or settings["chats"] < 1
        or settings["light"] < 1
        or settings["capacity"] < 1
        or settings["capacity_workers"] < 1
        or settings["turn_s"] < 0
    ):
        parser.error(
            "--messages, --chats, --capacity, --capacity-workers and --light must be at least 1, "
            "--turn at least 0"
        )
    settings["quick"] = options.quick
    settings["profile"] = options.profile
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
    except (BenchError, TimeoutError, OSError, ValueError) as exc:
        print(f"benchmark setup error: {type(exc).__name__}: {exc}", file=sys.stderr)
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
        rows = [
            *results["burst"],
            results["capacity"],
            results["light"]["broker"],
            results["light"]["direct"],
        ]
        if results["profile"] is not None:
            rows.append(results["profile"])
        for row in rows:
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
