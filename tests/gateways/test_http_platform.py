"""The bundled HTTP platform (extensions/platforms/http) through a real ``hermes-kernel gateway run``.

Each gateway is a real subprocess with the bundled ``scripted`` model, listening on 127.0.0.1 and a
port it picks (``port: 0``, printed on start); the tests talk to it with httpx.  The scale-out test runs
one ingress holding the platform and two workers on a real redis-server (tests/redis_server.py).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import end_processes, start_gateway, until, write_plugin
from test_gateway_scale import ECHO_PLUGIN, REPLY

from kernel.testing import write_script

DEADLINE = 60.0  # seconds; only reached when something hangs
LISTENING = re.compile(r"http: listening on (http://127\.0\.0\.1:\d+)")


class Gateways:
    """``gateway run`` subprocesses, each with a home of its own; every one is stopped at the end."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[subprocess.Popen[bytes]] = []

    def home(self, name: str, http: dict[str, Any] | None, replies: list[Any], **gateway: Any) -> Path:
        home = self.root / name
        home.mkdir()
        write_plugin(home / "plugins", "echo", ECHO_PLUGIN.replace("@STARTED@", "None"))
        script = write_script(home, replies)
        platforms = {"http": {"enabled": True, "port": 0, **(http or {})}} if http is not None else {}
        config = {
            "model": {"provider": "scripted", "script": str(script)},
            "plugins": {"enabled": ["echo"]},
            "gateway": {"platforms": platforms, **gateway},
        }
        (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        return home

    def start(self, home: Path, *args: str) -> subprocess.Popen[bytes]:
        proc = start_gateway(home, *args)
        self.procs.append(proc)
        return proc

    @staticmethod
    def output(proc: subprocess.Popen[bytes]) -> str:
        return (proc.home / "gateway.out").read_text(encoding="utf-8", errors="replace")  # type: ignore[attr-defined]

    async def url(self, proc: subprocess.Popen[bytes]) -> str:
        """The address the platform printed once listening."""
        await until(
            lambda: LISTENING.search(self.output(proc)) or proc.poll() is not None,
            "the HTTP platform",
            DEADLINE,
        )
        found = LISTENING.search(self.output(proc))
        assert found and proc.poll() is None, self.output(proc)
        return found[1]

    def stop_all(self) -> None:
        end_processes(self.procs)


@pytest.fixture
def gateways(tmp_path: Path) -> Iterator[Gateways]:
    made = Gateways(tmp_path)
    yield made
    made.stop_all()


def run(coro: Any) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, DEADLINE * 4)

    return asyncio.run(bounded())


async def replies_of(client: httpx.AsyncClient, url: str, chat: str, count: int) -> list[dict[str, Any]]:
    """The chat's replies, long-polled until there are ``count``."""
    found: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    give_up = loop.time() + DEADLINE
    while len(found) < count:
        assert loop.time() < give_up, f"only {len(found)} of {count} replies in {chat}: {found}"
        after = found[-1]["seq"] if found else 0
        answer = await client.get(f"{url}/v1/chats/{chat}/replies", params={"after": after, "wait": 5})
        assert answer.status_code == 200, answer.text
        found.extend(answer.json()["replies"])
    return found


def test_a_message_is_answered_in_the_request_or_by_polling(gateways: Gateways) -> None:
    home = gateways.home("gw", {}, ["Hello from the scripted model!", "second", "third"])
    proc = gateways.start(home)

    async def scenario() -> None:
        url = await gateways.url(proc)
        async with httpx.AsyncClient(timeout=DEADLINE) as client:
            held = await client.post(f"{url}/v1/messages?wait=30", json={"chat_id": "alice", "text": "hi"})
            assert held.status_code == 200, held.text
            body = held.json()
            assert body["message_id"].startswith("http-")
            assert REPLY.match(body["reply"])["model"] == "Hello from the scripted model!"

            posted = await client.post(
                f"{url}/v1/messages",
                json={"chat_id": "alice", "text": "again", "message_id": "m-2", "user": "al"},
            )
            assert (posted.status_code, posted.json()) == (202, {"message_id": "m-2"})
            replies = await replies_of(client, url, "alice", 2)
            assert [r["reply_to"] for r in replies] == [body["message_id"], "m-2"]
            second = REPLY.match(replies[1]["text"])
            assert (second["model"], second["text"], second["turn"]) == ("second", "again", "2")
            assert replies[0]["seq"] < replies[1]["seq"]

            # A chat id that needs quoting in the path; another chat's conversation starts at turn 1.
            chat = "team/α #1"
            held = await client.post(f"{url}/v1/messages?wait=30", json={"chat_id": chat, "text": "yo"})
            assert REPLY.match(held.json()["reply"])["turn"] == "1"
            quoted = httpx.URL(f"{url}/v1/chats/").join("team%2F%CE%B1%20%231/replies")
            polled = (await client.get(quoted)).json()
            assert [r["text"] for r in polled["replies"]] == [held.json()["reply"]]

        proc.terminate()
        assert await asyncio.to_thread(proc.wait, 30) == 0, gateways.output(proc)

    run(scenario())
    output = gateways.output(proc)
    assert "Traceback" not in output, output


def test_a_wait_that_runs_out_answers_202_and_the_reply_is_kept(gateways: Gateways) -> None:
    home = gateways.home("gw", {}, [{"text": "slow", "delay_s": 1.5}])
    proc = gateways.start(home)

    async def scenario() -> None:
        url = await gateways.url(proc)
        async with httpx.AsyncClient(timeout=DEADLINE) as client:
            held = await client.post(f"{url}/v1/messages?wait=0.2", json={"chat_id": "bob", "text": "hi"})
            assert held.status_code == 202
            assert held.json()["reply"] is None
            replies = await replies_of(client, url, "bob", 1)
            assert replies[0]["reply_to"] == held.json()["message_id"]
            assert REPLY.match(replies[0]["text"])["model"] == "slow"

    run(scenario())


def test_scaled_out_the_ingress_holds_the_port_and_each_message_is_answered_once_in_order(
    gateways: Gateways, redis_server: Any
) -> None:
    broker = {"url": redis_server.url, "prefix": f"t{uuid.uuid4().hex[:8]}", "claim_after": 30.0}
    turns = [{"text": "ok", "delay_s": 0.05}] * 40
    ingress_home = gateways.home("ingress", {}, turns, broker=broker)
    worker_homes = [gateways.home(f"worker{i}", None, turns, broker=broker) for i in (1, 2)]
    workers = [gateways.start(home, "--role", "worker") for home in worker_homes]
    ingress = gateways.start(ingress_home, "--role", "ingress")
    chats = [f"chat-{i}" for i in range(5)]

    async def scenario() -> None:
        url = await gateways.url(ingress)
        for worker in workers:
            await until(lambda w=worker: " connected to " in gateways.output(w), "a worker", DEADLINE)
        async with httpx.AsyncClient(timeout=DEADLINE) as client:
            for n in range(3):
                posts = [
                    client.post(
                        f"{url}/v1/messages",
                        json={"chat_id": chat, "text": f"{chat} m{n}", "message_id": f"{n}"},
                    )
                    for chat in chats
                ]
                for answer in await asyncio.gather(*posts):
                    assert answer.status_code == 202, answer.text
            for chat in chats:
                replies = await replies_of(client, url, chat, 3)
                parsed = [REPLY.match(r["text"]) for r in replies]
                assert [p["text"] for p in parsed] == [f"{chat} m{n}" for n in range(3)], replies
                assert [p["turn"] for p in parsed] == ["1", "2", "3"]
                assert [r["reply_to"] for r in replies] == ["0", "1", "2"]
            # Nothing answered twice: no further reply comes to any chat.
            for chat in chats:
                more = await client.get(
                    f"{url}/v1/chats/{chat}/replies", params={"after": 10**9, "wait": 0.5}
                )
                assert more.json()["replies"] == []
            last = await client.get(f"{url}/v1/chats/{chats[0]}/replies")
            assert len(last.json()["replies"]) == 3

    run(scenario())
    for worker in workers:
        assert "listening on" not in gateways.output(worker), gateways.output(worker)
    for proc in [ingress, *workers]:
        assert "Traceback" not in gateways.output(proc), gateways.output(proc)
