"""The scaled-out gateway: one ingress, workers in other processes, a real Redis between them.

Every process is a real ``hermes-kernel gateway run --role ...`` subprocess with a home of its own (as
on separate machines); Redis is a real redis-server on 127.0.0.1 and a random port (the module's
``redis_server`` fixture, unpacked into .venv/debs by ``make test-deps``), each test under a prefix of
its own.  The platform is the line chat of tests/gateways/test_gateway.py: a real TCP chat server the test
runs, and a person's client.  The model is the bundled ``scripted`` one with a ``delay_s`` per turn;
the ``echo`` plugin makes every reply say which message it answers, which turn of its conversation
that is, and which process ran it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import cli_env, end_processes, run_cli, start_gateway, until, write_plugin
from redis_server import RedisServer
from test_gateway import ChatClient, ChatServer, platform_plugin

from kernel.testing import write_script

DEADLINE = 60.0  # seconds; only reached when something hangs
DRAIN_BOUND = 20.0  # a stop that waits for nothing ends well within the 30 s drain timeout

ECHO_PLUGIN = r'''
"""Every reply says: the model's text | the message | the turn of the conversation | this process."""

import json
import os

STARTED = @STARTED@
_asked = {}


def _pre(session_id=None, user_message=None, conversation_history=None, **_):
    users = [m for m in conversation_history or [] if m.get("role") == "user"]
    _asked[session_id] = (user_message, len(users) + 1)
    if STARTED:
        with open(STARTED, "a", encoding="utf-8") as out:
            out.write(json.dumps({"pid": os.getpid(), "text": user_message}) + "\n")


def _transform(response_text=None, session_id=None, **_):
    text, turn = _asked.pop(session_id, ("?", 0))
    return f"{response_text} | {text} | turn {turn} | pid {os.getpid()}"


def register(ctx):
    ctx.register_hook("pre_llm_call", _pre)
    ctx.register_hook("transform_llm_output", _transform)
'''

REPLY = re.compile(r"^(?P<model>.*) \| (?P<text>.*) \| turn (?P<turn>\d+) \| pid (?P<pid>\d+)$")


def parse(reply: dict[str, Any]) -> dict[str, Any]:
    found = REPLY.match(reply["text"])
    assert found, f"not an echo reply: {reply!r}"
    return {**found.groupdict(), "turn": int(found["turn"]), "pid": int(found["pid"]), "chat": reply["chat"]}


class Deployment:
    """Homes and processes of one scaled-out gateway; every process is stopped at the end."""

    def __init__(
        self, root: Path, redis: RedisServer, *, delay: float, claim_after: float = 30.0, **broker: Any
    ):
        self.root = root
        self.redis = redis
        self.prefix = f"t{uuid.uuid4().hex[:8]}"
        self.delay = delay
        self.broker = {"url": redis.url, "prefix": self.prefix, "claim_after": claim_after, **broker}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.started = root / "started.jsonl"
        self.port = 0

    def home(self, name: str, *, concurrency: int = 2, extra: dict[str, Any] | None = None) -> Path:
        home = self.root / name
        if home.exists():
            return home
        home.mkdir()
        platform_plugin(home, "linechat")
        write_plugin(home / "plugins", "echo", ECHO_PLUGIN.replace("@STARTED@", repr(str(self.started))))
        script = write_script(home, [{"text": "ok", "delay_s": self.delay}] * 300)
        config = {
            "model": {"provider": "scripted", "script": str(script)},
            "gateway": {
                "platforms": {"linechat": {"enabled": True, "port": self.port}},
                "broker": self.broker,
                "worker": {"concurrency": concurrency},
                **(extra or {}),
            },
        }
        (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        return home

    def start(self, name: str, role: str, **options: Any) -> subprocess.Popen[bytes]:
        home = self.home(name, **options)
        proc = start_gateway(home, "--role", role)
        self.procs.append(proc)
        return proc

    @staticmethod
    def output(proc: subprocess.Popen[bytes]) -> str:
        return (proc.home / "gateway.out").read_text(encoding="utf-8", errors="replace")  # type: ignore[attr-defined]

    async def ready(self, proc: subprocess.Popen[bytes], line: str) -> None:
        await until(
            lambda: line in self.output(proc) or proc.poll() is not None,
            f"'{line}' from the gateway",
            DEADLINE,
        )
        assert proc.poll() is None, f"the gateway ended ({proc.returncode}):\n{self.output(proc)}"

    async def worker(self, name: str, **options: Any) -> subprocess.Popen[bytes]:
        proc = self.start(name, "worker", **options)
        await self.ready(proc, " connected to ")
        return proc

    async def ingress(
        self, server: ChatServer, name: str = "ingress", **options: Any
    ) -> subprocess.Popen[bytes]:
        self.port = server.port
        before = len(server.bots)
        proc = self.start(name, "ingress", **options)
        await until(
            lambda: len(server.bots) > before or proc.poll() is not None, "the ingress to connect", DEADLINE
        )
        assert proc.poll() is None, self.output(proc)
        return proc

    def status(self, name: str = "status") -> dict[str, Any]:
        home = self.home(name)
        proc = run_cli(home, "gateway", "status", "--json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def status_text(self, name: str = "status") -> str:
        proc = run_cli(self.home(name), "gateway", "status")
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    async def replies_acknowledged(self, platform: str = "linechat") -> None:
        """Wait until the ingress has acknowledged every reply it sent: a SIGKILL before that is the
        documented window in which the next ingress sends a reply again."""
        from kernel.gateway.redis_broker import INGRESS

        stream = f"{self.prefix}:out:{platform}"
        raw = self.redis.client()

        def pending() -> int:
            return int(raw.xpending(stream, INGRESS)["pending"]) if raw.exists(stream) else 0

        await until(lambda: pending() == 0, "the ingress to acknowledge its replies", DEADLINE)

    def stop_all(self) -> None:
        end_processes(self.procs)


@pytest.fixture
def deploy(tmp_path: Path, redis_server: RedisServer) -> Iterator[Any]:
    made: list[Deployment] = []

    def make(**options: Any) -> Deployment:
        deployment = Deployment(tmp_path, redis_server, **options)
        made.append(deployment)
        return deployment

    yield make
    for deployment in made:
        deployment.stop_all()


def run(coro: Any) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, DEADLINE * 4)

    return asyncio.run(bounded())


async def collect(client: ChatClient, count: int, deadline: float = DEADLINE) -> list[dict[str, Any]]:
    return [await client.reply(deadline) for _ in range(count)]


async def no_more_replies(client: ChatClient, wait: float) -> None:
    """Nothing else arrives within ``wait`` seconds (a duplicate would)."""
    try:
        line = await asyncio.wait_for(client.reader.readline(), wait)
    except TimeoutError:
        return
    pytest.fail(f"an extra reply arrived: {line!r}")


def test_an_ingress_and_two_workers_answer_many_chats_each_in_order(deploy: Any) -> None:
    """8 chats × 5 messages sent at once: every message answered exactly once, each chat's replies in
    order with the turn numbers 1..5 (the conversation went on from Redis whichever worker ran the
    turn), both workers answering, and Redis left with nothing queued."""
    d = deploy(delay=0.05)

    async def scenario() -> None:
        server = await ChatServer().start()
        workers = [await d.worker("w1", concurrency=2), await d.worker("w2", concurrency=2)]
        await d.ingress(server)
        client = await ChatClient.open(server)
        chats = [f"#c{n}" for n in range(8)]
        for turn in range(1, 6):
            for chat in chats:
                await client.say(chat, "ann", f"{chat} says {turn}")
        replies = [parse(r) for r in await collect(client, 40)]
        await no_more_replies(client, 1.0)
        by_chat: dict[str, list[dict[str, Any]]] = {}
        for reply in replies:
            by_chat.setdefault(reply["chat"], []).append(reply)
        assert sorted(by_chat) == sorted(chats)
        for chat, got in by_chat.items():
            assert [r["text"] for r in got] == [f"{chat} says {n}" for n in range(1, 6)]
            assert [r["turn"] for r in got] == [1, 2, 3, 4, 5]
        assert {r["pid"] for r in replies} == {w.pid for w in workers}
        status = d.status()
        assert status["broker"]["queued"] == 0 and status["broker"]["pending"] == 0
        client.close()
        await server.close()

    run(scenario())


def test_messages_of_one_chat_are_answered_one_at_a_time_in_order_across_workers(deploy: Any) -> None:
    """Ten messages of one chat sent at once with three workers ready: answered in the order sent,
    never two at a time (the turns' start records never overlap another turn of the chat)."""
    d = deploy(delay=0.1)

    async def scenario() -> None:
        server = await ChatServer().start()
        for name in ("w1", "w2", "w3"):
            await d.worker(name, concurrency=4)
        await d.ingress(server)
        client = await ChatClient.open(server)
        for n in range(10):
            await client.say("#one", "bo", f"message {n}")
        replies = [parse(r) for r in await collect(client, 10)]
        assert [r["text"] for r in replies] == [f"message {n}" for n in range(10)]
        assert [r["turn"] for r in replies] == list(range(1, 11))
        assert [json.loads(line)["text"] for line in d.started.read_text().splitlines()] == [
            f"message {n}" for n in range(10)
        ]
        client.close()
        await server.close()

    run(scenario())


def test_a_worker_killed_mid_turn_has_its_message_answered_once_by_another(deploy: Any) -> None:
    """SIGKILL the worker in the middle of a turn: after claim_after the other worker takes the chat
    over, answers the message (once), and the conversation goes on."""
    d = deploy(delay=1.5, claim_after=1.0)

    async def scenario() -> None:
        server = await ChatServer().start()
        doomed = await d.worker("doomed", concurrency=1)
        await d.ingress(server)
        client = await ChatClient.open(server)
        await client.say("#k", "cy", "hello")
        await until(
            lambda: d.started.is_file() and str(doomed.pid) in d.started.read_text(), "the turn to start"
        )
        doomed.kill()
        doomed.wait()
        survivor = await d.worker("survivor", concurrency=1)
        got = parse(await client.reply(DEADLINE))
        assert (got["text"], got["pid"], got["turn"]) == ("hello", survivor.pid, 1)
        await no_more_replies(client, 2.5)
        got = parse(await client.ask("#k", "cy", "again"))
        assert (got["text"], got["pid"], got["turn"]) == ("again", survivor.pid, 2)
        status = d.status()
        assert status["broker"]["pending"] == 0 and status["broker"]["queued"] == 0
        client.close()
        await server.close()

    run(scenario())


def test_a_worker_silent_past_claim_after_then_waking_up_does_not_answer_twice(deploy: Any) -> None:
    """SIGSTOP the worker mid-turn, let another take the chat over and answer, then SIGCONT the first:
    it finishes its turn, but its reply is dropped (the chat is no longer its): one reply in all."""
    d = deploy(delay=1.0, claim_after=1.0)

    async def scenario() -> None:
        server = await ChatServer().start()
        sleeper = await d.worker("sleeper", concurrency=1)
        await d.ingress(server)
        client = await ChatClient.open(server)
        await client.say("#z", "di", "are you there")
        await until(
            lambda: d.started.is_file() and str(sleeper.pid) in d.started.read_text(), "the turn to start"
        )
        os.kill(sleeper.pid, signal.SIGSTOP)
        try:
            other = await d.worker("other", concurrency=1)
            got = parse(await client.reply(DEADLINE))
            assert (got["text"], got["pid"]) == ("are you there", other.pid)
        finally:
            os.kill(sleeper.pid, signal.SIGCONT)
        await until(
            lambda: "gateway_chat_taken_over" in log_text(sleeper.home), "the woken worker to give up"
        )
        await no_more_replies(client, 1.5)
        client.close()
        await server.close()

    run(scenario())


def log_text(home: Path) -> str:
    logs = home / "logs"
    return (
        "".join(p.read_text(encoding="utf-8", errors="replace") for p in logs.glob("*.log"))
        if logs.is_dir()
        else ""
    )


def test_a_restarted_worker_continues_the_conversation(deploy: Any) -> None:
    """Two turns, SIGTERM the only worker (it drains and exits 0), start it again: the third message is
    turn 3 of the same conversation, and the model was sent the first two."""
    d = deploy(delay=0.05)

    async def scenario() -> None:
        server = await ChatServer().start()
        worker = await d.worker("w", concurrency=1)
        await d.ingress(server)
        client = await ChatClient.open(server)
        assert parse(await client.ask("#r", "ed", "one"))["turn"] == 1
        assert parse(await client.ask("#r", "ed", "two"))["turn"] == 2
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=DEADLINE) == 0, d.output(worker)
        again = await d.worker("w", concurrency=1)
        got = parse(await client.ask("#r", "ed", "three"))
        assert (got["turn"], got["pid"]) == (3, again.pid)
        client.close()
        await server.close()

    run(scenario())


def test_sigterm_lets_the_turn_in_progress_answer_before_the_worker_exits(deploy: Any) -> None:
    d = deploy(delay=1.5)

    async def scenario() -> None:
        server = await ChatServer().start()
        worker = await d.worker("w", concurrency=1)
        await d.ingress(server)
        client = await ChatClient.open(server)
        await client.say("#t", "fay", "slow one")
        await until(lambda: d.started.is_file(), "the turn to start")
        worker.send_signal(signal.SIGTERM)
        got = parse(await client.reply(DEADLINE))
        assert (got["text"], got["pid"]) == ("slow one", worker.pid)
        assert worker.wait(timeout=DEADLINE) == 0, d.output(worker)
        assert "gateway: stopped" in d.output(worker)
        client.close()
        await server.close()

    run(scenario())


def test_redis_restarted_mid_run_loses_nothing(deploy: Any, redis_server: RedisServer) -> None:
    """Messages sent while Redis is down are kept by the ingress and queued when it is back; the worker
    reconnects by itself; every message is answered once, in order.  While Redis is down, gateway
    status says it is not reachable."""
    d = deploy(delay=0.05)

    async def scenario() -> None:
        server = await ChatServer().start()
        await d.worker("w", concurrency=2)
        await d.ingress(server)
        client = await ChatClient.open(server)
        assert parse(await client.ask("#x", "gus", "before"))["turn"] == 1
        redis_server.stop()
        try:
            for n in range(5):
                await client.say("#x", "gus", f"during {n}")
            await client.say("#y", "hal", "another chat")
            statuses: list[Any] = []

            async def broker_seen_down() -> bool:
                statuses.append(await asyncio.to_thread(d.status))
                return statuses[-1]["broker"]["connected"] is False

            while not await broker_seen_down():
                assert len(statuses) < 600, "the status never showed the broker down"
                await asyncio.sleep(0.1)
            down = statuses[-1]
            assert down["broker"]["connected"] is False and down["broker"]["error"]
        finally:
            redis_server.start()
        replies = [parse(r) for r in await collect(client, 6)]
        x = [r for r in replies if r["chat"] == "#x"]
        assert [r["text"] for r in x] == [f"during {n}" for n in range(5)]
        assert [r["turn"] for r in x] == [2, 3, 4, 5, 6]
        assert [r["text"] for r in replies if r["chat"] == "#y"] == ["another chat"]
        await no_more_replies(client, 1.0)
        client.close()
        await server.close()

    run(scenario())


def test_gateway_status_json_shows_the_broker_workers_and_the_work(
    deploy: Any, redis_server: RedisServer
) -> None:
    """With a password in the URL: the status shows it masked (never the password), both workers with
    their host, pid and heartbeat, the ingress, and ``pending`` (taken) and ``queued`` (waiting) while a
    slow turn holds the only worker's slot."""
    secret = RedisServer(
        redis_server.directory.parent / f"secret-{uuid.uuid4().hex[:6]}", password="hunter2-s3cret"
    )
    secret.directory.mkdir()
    secret.start()
    try:
        d = deploy(delay=2.0)
        d.broker["url"] = secret.url

        async def scenario() -> None:
            server = await ChatServer().start()
            worker = await d.worker("w", concurrency=1)
            await d.ingress(server)
            client = await ChatClient.open(server)
            await client.say("#s", "ivy", "first")
            await client.say("#s", "ivy", "second")
            await client.say("#other", "jo", "third")
            await until(lambda: d.started.is_file(), "the turn to start")
            status = await asyncio.to_thread(d.status)
            broker = status["broker"]
            assert "hunter2-s3cret" not in json.dumps(status)
            assert broker["url"] == f"redis://***@127.0.0.1:{secret.port}/0"
            assert broker["connected"] is True and broker["prefix"] == d.prefix
            assert (broker["pending"], broker["queued"]) == (1, 2)
            (row,) = broker["workers"]
            assert row["pid"] == worker.pid and row["host"] and row["alive"] is True
            assert abs(time.time() - row["last_heartbeat"]) < 60
            assert [r["role"] for r in broker["ingresses"]] == ["ingress"]
            assert status["sessions"] == {"store": "redis", "url": broker["url"]}
            text = await asyncio.to_thread(d.status_text)
            assert f"broker: {broker['url']} connected" in text and "queued 2, being answered 1" in text
            assert f"pid {worker.pid}" in text and "hunter2-s3cret" not in text
            for output in (d.output(p) for p in d.procs):
                assert "hunter2-s3cret" not in output
            for home in (p.home for p in d.procs):  # type: ignore[attr-defined]
                assert "hunter2-s3cret" not in log_text(home)
            await collect(client, 3)
            client.close()
            await server.close()

        run(scenario())
    finally:
        secret.stop()


def test_past_max_pending_the_ingress_answers_busy(deploy: Any) -> None:
    """No worker runs and max_pending is 2: the first two messages are queued, the third is answered
    "busy" at once; when a worker starts, the two queued ones are answered."""
    d = deploy(delay=0.01, max_pending=2)

    async def scenario() -> None:
        server = await ChatServer().start()
        await d.ingress(server)
        client = await ChatClient.open(server)
        for n in range(3):
            await client.say("#b", "kim", f"m{n}")
        busy = await client.reply(DEADLINE)
        assert "too many messages" in busy["text"] and busy["reply_to"] == "m3"
        await d.worker("w")
        assert [parse(r)["text"] for r in await collect(client, 2)] == ["m0", "m1"]
        client.close()
        await server.close()

    run(scenario())


@pytest.mark.parametrize("role", ["worker", "ingress"])
def test_a_role_that_needs_a_broker_without_one_says_so(tmp_path: Path, role: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    proc = run_cli(home, "gateway", "run", "--role", role)
    assert proc.returncode == 2, proc
    assert f"the {role} role needs a broker" in proc.stderr and "--broker URL" in proc.stderr


def test_a_broker_url_that_is_not_redis_is_refused_with_the_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    proc = run_cli(home, "gateway", "run", "--role", "worker", "--broker", "nats://user:pw-secret@host:4222")
    assert proc.returncode == 2
    assert "redis://" in proc.stderr
    assert "pw-secret" not in proc.stderr and "nats://***@host:4222" in proc.stderr
    assert "--broker" in proc.stderr


def test_the_redis_client_is_not_imported_without_a_broker(tmp_path: Path) -> None:
    """A single-process gateway (and gateway status) never imports the Redis client."""
    home = tmp_path / "home"
    home.mkdir()
    probe = (
        "import sys\nfrom kernel import Kernel\nk = Kernel()\nk.load()\nk.gateway.status()\n"
        "k.gateway.store_description(k.gateway.broker_settings())\nprint('redis' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], env=cli_env(home), capture_output=True, text=True)
    assert proc.stdout.strip() == "False", proc.stderr


# ---------------------------------------------------------------------------
# In one process (--role all with a broker): hooks, the spool, hostile events
# ---------------------------------------------------------------------------

HOOKS_PLUGIN = r'''
"""Appends one JSON line per on_session_start / on_session_finalize call to RECORDS."""

import json

RECORDS = @RECORDS@


def _record(hook):
    def callback(**kwargs):
        with open(RECORDS, "a", encoding="utf-8") as out:
            out.write(json.dumps({"hook": hook, "session_id": kwargs.get("session_id"),
                                  "reason": kwargs.get("reason")}) + "\n")
    return callback


def register(ctx):
    ctx.register_hook("on_session_start", _record("on_session_start"))
    ctx.register_hook("on_session_finalize", _record("on_session_finalize"))
'''


def in_process_home(
    root: Path, url: str, port: int, *, delay: float = 0.0, prefix: str | None = None
) -> Path:
    home = root / "home"
    if not home.exists():
        home.mkdir()
        platform_plugin(home, "linechat")
        write_plugin(home / "plugins", "echo", ECHO_PLUGIN.replace("@STARTED@", "None"))
        write_plugin(
            home / "plugins", "hooks", HOOKS_PLUGIN.replace("@RECORDS@", repr(str(home / "hooks.jsonl")))
        )
    script = write_script(home, [{"text": "ok", "delay_s": delay}] * 50)
    config = {
        "model": {"provider": "scripted", "script": str(script)},
        "gateway": {
            "platforms": {"linechat": {"enabled": True, "port": port}},
            "broker": {"url": url, "prefix": prefix or f"p{uuid.uuid4().hex[:8]}", "claim_after": 5},
        },
    }
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return home


def hook_records(home: Path) -> list[dict[str, Any]]:
    path = home / "hooks.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


async def serve(kernel: Any, server: ChatServer) -> asyncio.Task[None]:
    task = asyncio.create_task(kernel.gateway.run())
    await until(lambda: server.bots or task.done(), "the platform to connect", DEADLINE)
    if task.done():
        task.result()
    return task


async def stop(kernel: Any, task: asyncio.Task[None]) -> None:
    kernel.gateway.stop()
    await asyncio.wait_for(task, DEADLINE)


def test_with_a_broker_new_finalizes_once_and_a_stop_finalizes_nothing(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """/new finalizes the chat's session once (on the worker that runs it); stopping the gateway does
    not (the sessions go on elsewhere); the next run goes on with the same session, and
    on_session_start fired once per session id."""
    from kernel import Kernel

    async def scenario() -> None:
        server = await ChatServer().start()
        home = in_process_home(tmp_path, redis_server.url, server.port, prefix="fin")
        client = await ChatClient.open(server)
        for round_ in range(2):
            with Kernel(home=home) as k:
                task = await serve(k, server)
                assert parse(await client.ask("#f", "lu", f"hello {round_}"))["turn"] == round_ + 1
                if round_ == 0:
                    assert (await client.ask("#f", "lu", "/new"))["text"] == "Started a new conversation."
                    assert parse(await client.ask("#f", "lu", "after new"))["turn"] == 1
                await stop(k, task)
        records = hook_records(home)
        finals = [r for r in records if r["hook"] == "on_session_finalize"]
        starts = [r["session_id"] for r in records if r["hook"] == "on_session_start"]
        assert len(finals) == 1 and finals[0]["reason"] == "new"
        assert len(starts) == len(set(starts)) == 2 and finals[0]["session_id"] == starts[0]
        client.close()
        await server.close()

    run(scenario())


def test_messages_accepted_while_redis_is_down_survive_a_stop_in_the_spool(tmp_path: Path) -> None:
    """Redis goes down; two messages arrive; the gateway is stopped before Redis is back: they are
    written to the spool file, and the next run (Redis back) answers them, in order."""
    from kernel import Kernel

    data = tmp_path / "redis"
    data.mkdir()
    own = RedisServer(data).start()
    try:

        async def scenario() -> None:
            server = await ChatServer().start()
            home = in_process_home(tmp_path, own.url, server.port, prefix="spool")
            client = await ChatClient.open(server)
            with Kernel(home=home) as k:
                task = await serve(k, server)
                assert parse(await client.ask("#s", "mo", "up"))["turn"] == 1
                own.stop()
                await client.say("#s", "mo", "down 1")
                await client.say("#s", "mo", "down 2")
                await until(lambda: server.received == 3, "the messages to reach the bot")
                await asyncio.sleep(0.5)
                await stop(k, task)
            spool = home / "gateway" / "spool-spool.jsonl"
            assert [json.loads(line)["text"] for line in spool.read_text().splitlines()] == [
                "down 1",
                "down 2",
            ]
            assert "gateway_messages_spooled" in log_text(home)
            own.start()
            with Kernel(home=home) as k:
                task = await serve(k, server)
                got = [parse(r) for r in await collect(client, 2)]
                assert [(r["text"], r["turn"]) for r in got] == [("down 1", 2), ("down 2", 3)]
                assert not spool.exists()
                await stop(k, task)
            client.close()
            await server.close()

        run(scenario())
    finally:
        own.stop()


BIG_PLUGIN = r"""
def _dispatch(event, gateway, session_store):
    if event.text == "expand":
        return {"action": "rewrite", "text": "x" * (2 * 1024 * 1024)}
    return None


def register(ctx):
    ctx.register_hook("pre_gateway_dispatch", _dispatch)
"""


def test_a_message_too_big_for_the_broker_is_answered_not_queued(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A message of 2 MiB (a plugin's rewrite makes it) or a chat id of 600 characters: answered that it
    is too long, nothing queued; the chat's next message is its first turn."""
    from kernel import Kernel

    async def scenario() -> None:
        server = await ChatServer().start()
        home = in_process_home(tmp_path, redis_server.url, server.port)
        write_plugin(home / "plugins", "big", BIG_PLUGIN)
        client = await ChatClient.open(server)
        with Kernel(home=home) as k:
            task = await serve(k, server)
            reply = await client.ask("#big", "nu", "expand")
            assert (
                reply["text"] == "Sorry, that message is too long to be answered."
                and reply["reply_to"] == "m1"
            )
            long_chat = "#" + "c" * 600
            reply = await client.ask(long_chat, "nu", "hello")
            assert reply["text"] == "Sorry, that message is too long to be answered."
            assert reply["chat"] == long_chat
            assert parse(await client.ask("#big", "nu", "small"))["turn"] == 1
            await stop(k, task)
        client.close()
        await server.close()

    run(scenario())


POISON_PLUGIN = r'''
"""A message that kills the worker running it."""

import os


def _pre(user_message=None, **_):
    if user_message == "die":
        os._exit(1)


def register(ctx):
    ctx.register_hook("pre_llm_call", _pre)
'''


def test_a_message_that_kills_every_worker_is_given_up_after_three_attempts(deploy: Any) -> None:
    """Each worker that takes "die" dies in its turn; the fourth is told the message was tried three
    times and answers that it could not be, without running it; the chat goes on."""
    d = deploy(delay=0.01, claim_after=0.5)

    async def scenario() -> None:
        server = await ChatServer().start()
        write_plugin(d.home("w") / "plugins", "poison", POISON_PLUGIN)
        await d.ingress(server)
        client = await ChatClient.open(server)
        await client.say("#p", "ro", "die")
        for _ in range(3):
            doomed = d.start("w", "worker", concurrency=1)
            assert await asyncio.to_thread(doomed.wait, DEADLINE) == 1
        survivor = await d.worker("w", concurrency=1)
        reply = await client.reply(DEADLINE)
        assert "could not be answered" in reply["text"] and "3 times" in reply["text"]
        assert reply["reply_to"] == "m1"
        got = parse(await client.ask("#p", "ro", "hello"))
        assert (got["text"], got["turn"], got["pid"]) == ("hello", 1, survivor.pid)
        assert "gateway_message_given_up" in log_text(survivor.home)
        client.close()
        await server.close()

    run(scenario())


def test_a_chat_whose_messages_were_removed_behind_the_gateways_back_is_given_up(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Someone deleted a chat's stream in Redis while its token waited: the worker that takes the token
    finds no message, gives the chat up (nothing stays pending) and goes on with the other chats; the
    count of queued messages is taken from the streams, so the removed one is not counted."""
    from kernel import Kernel
    from kernel.gateway.broker import BrokerSettings, Inbound
    from kernel.gateway.redis_broker import RedisBroker

    prefix = f"g{uuid.uuid4().hex[:8]}"
    home = in_process_home(tmp_path, redis_server.url, 1, prefix=prefix)
    raw = redis_server.client()

    async def scenario() -> None:
        broker = RedisBroker(BrokerSettings(url=redis_server.url, prefix=prefix))
        await broker.open()
        await broker.submit(Inbound(platform="linechat", chat_id="#gone", text="lost"))
        await broker.submit(Inbound(platform="linechat", chat_id="#kept", text="kept"))
        raw.delete(broker.k_chat("linechat:#gone"))
        with Kernel(home=home) as k:
            task = asyncio.create_task(k.gateway.run(role="worker"))
            await until(
                lambda: raw.hlen(broker.k_active) == 0 or task.done(), "both chats to be done", DEADLINE
            )
            replies = await broker.replies("linechat", block=1.0)
            assert [(r.chat_id, parse({"text": r.text, "chat": r.chat_id})["text"]) for _e, r in replies] == [
                ("#kept", "kept")
            ]
            status = await broker.status()
            assert (status["pending"], status["queued"]) == (0, 0)
            k.gateway.stop()
            await asyncio.wait_for(task, DEADLINE)
        await broker.aclose()

    run(scenario())


def test_a_second_ingress_for_a_platform_waits_as_its_standby_and_takes_over(deploy: Any) -> None:
    """One platform connection only: a second ingress says it is standby and does not connect; when the
    first is SIGKILLed, the standby connects once the first's hold lapses (claim_after) and answers;
    a SIGTERMed ingress hands over at once."""
    # A hold of 3 s, renewed every second: a busy machine does not make it lapse by accident.
    d = deploy(delay=0.01, claim_after=3.0)

    async def scenario() -> None:
        server = await ChatServer().start()
        await d.worker("w", concurrency=2)
        first = await d.ingress(server, "first")
        second = d.start("second", "ingress")
        await d.ready(second, "linechat: standby: ingress ")
        await asyncio.sleep(4.0)  # longer than the hold: it is renewed, the standby keeps waiting
        assert server.joins == 1 and len(server.bots) == 1
        client = await ChatClient.open(server)
        assert parse(await client.ask("#h", "sy", "one"))["turn"] == 1
        await d.replies_acknowledged()
        first.kill()
        first.wait()
        await until(lambda: len(server.bots) == 1 and server.joins == 2, "the standby to connect", DEADLINE)
        assert parse(await client.ask("#h", "sy", "two"))["turn"] == 2
        third = d.start("third", "ingress")
        await d.ready(third, "linechat: standby: ingress ")
        second.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(second.wait, DEADLINE) == 0
        await until(lambda: server.joins == 3 and len(server.bots) == 1, "the third to take over", 10)
        assert parse(await client.ask("#h", "sy", "three"))["turn"] == 3
        await no_more_replies(client, 0.5)
        fourth = d.start("fourth", "ingress")
        await d.ready(fourth, "linechat: standby: ingress ")
        started = time.monotonic()
        fourth.send_signal(signal.SIGTERM)  # a standby stops at once: nothing of its own to drain
        assert await asyncio.to_thread(fourth.wait, DEADLINE) == 0
        assert time.monotonic() - started < DRAIN_BOUND, "a standby's stop waited for a drain"
        client.close()
        await server.close()

    run(scenario())
