"""A message delivered twice: one turn, and the duplicate gets the first reply.

A platform (or a client whose request, or whose ingress, died) hands the gateway a message id it has
seen already.  While the first delivery's turn runs, the duplicate waits for it: the one reply, sent
to the chat with that message id, answers both.  Once answered, the duplicate gets the first reply
sent again.  Either way no second turn runs and the conversation holds one exchange.  The platform is
the line chat of tests/gateways/test_gateway.py (a real TCP server) or the bundled HTTP platform (real
``gateway run`` subprocesses); Redis is a real redis-server; a plugin appends one line per turn.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest
from conftest import until, write_plugin
from redis_server import RedisServer
from test_gateway import ChatClient, ChatServer
from test_gateway_scale import ECHO_PLUGIN, REPLY, no_more_replies, parse
from test_http_platform import Gateways, gateways  # noqa: F401 - the fixture

from adversarial.test_gateway_nothing_lost import DEADLINE, gateway_home, redelivered, run, serve, stop, turns
from kernel import Kernel


@pytest.mark.parametrize("scaled_out", [False, True], ids=["one-process", "redis"])
def test_a_duplicate_in_progress_waits_and_one_after_the_answer_gets_the_first_reply(
    tmp_path: Path, redis_server: RedisServer, scaled_out: bool
) -> None:
    """m1 delivered again while its turn runs: the one reply answers both.  Delivered again after it
    was answered: the first reply is sent again (the same text, the same turn).  One turn ran; the
    chat's next message is turn 2."""
    broker = {"url": redis_server.url, "prefix": f"u{uuid.uuid4().hex[:8]}"} if scaled_out else None

    async def scenario() -> None:
        server = await ChatServer().start()
        home = gateway_home(tmp_path, server.port, broker=broker, delay=0.5)
        started = home / "started.jsonl"
        client = await ChatClient.open(server)
        with Kernel(home=home) as k:
            task = await serve(k, server)
            await client.say("#dup", "cy", "hello")
            await until(lambda: turns(started) == ["hello"], "the turn to start")
            redelivered(server, "m1", "#dup", "cy", "hello")  # while its turn runs
            first = await client.reply(DEADLINE)
            assert (first["reply_to"], parse(first)["text"], parse(first)["turn"]) == ("m1", "hello", 1)
            await no_more_replies(client, 1.0)
            redelivered(server, "m1", "#dup", "cy", "hello")  # after it was answered
            again = await client.reply(DEADLINE)
            assert (again["chat"], again["reply_to"], again["text"]) == ("#dup", "m1", first["text"])
            got = parse(await client.ask("#dup", "cy", "next"))
            assert (got["text"], got["turn"]) == ("next", 2)
            await no_more_replies(client, 1.0)
            await stop(k, task)
        assert turns(started) == ["hello", "next"]
        client.close()
        await server.close()

    run(scenario())


def test_one_process_keeps_a_bounded_number_of_reply_bytes(tmp_path: Path) -> None:
    """The replies kept for duplicates are bounded in bytes: the oldest are forgotten first."""
    from kernel.gateway import duplicates

    with Kernel(home=tmp_path / "home") as k:
        recent = k.gateway.recent
        size = duplicates.KEPT_REPLY_BYTES // 4 + 1
        for n in range(8):
            recent.seen_before("p", "c", f"m{n}")
            recent.keep_reply("p", "c", f"m{n}", "x" * size)
        kept = [n for n in range(8) if recent.kept_reply("p", "c", f"m{n}") is not None]
        assert kept == [5, 6, 7]
        assert recent.kept_bytes <= duplicates.KEPT_REPLY_BYTES


def _turn_log(home: Path) -> Path:
    """Rewrite the home's echo plugin to record each turn in ``started.jsonl``."""
    started = home / "started.jsonl"
    write_plugin(home / "plugins", "echo", ECHO_PLUGIN.replace("@STARTED@", repr(str(started))))
    return started


@pytest.mark.parametrize("scaled_out", [False, True], ids=["one-process", "redis"])
def test_a_re_post_of_an_answered_message_id_with_wait_returns_the_first_reply(
    gateways: Gateways,  # noqa: F811
    redis_server: RedisServer,
    scaled_out: bool,
) -> None:
    """A client POSTs m1 and gives up waiting; the reply is written meanwhile.  Scaled out, the ingress
    is then SIGKILLed and another one started (nothing of the first delivery is left in memory).  The
    client POSTs m1 again with ``?wait``: 200 with the first reply; no second turn ran."""
    script = [{"text": "ok", "delay_s": 0.3}] * 10
    if scaled_out:
        broker = {"url": redis_server.url, "prefix": f"h{uuid.uuid4().hex[:8]}", "claim_after": 30.0}
        entry = gateways.home("ingress", {}, script, broker=broker)
        worker_home = gateways.home("worker", None, script, broker=broker)
        started = _turn_log(worker_home)
        gateways.start(worker_home, "--role", "worker")
        proc = gateways.start(entry, "--role", "ingress")
    else:
        entry = gateways.home("gw", {}, script)
        started = _turn_log(entry)
        proc = gateways.start(entry)

    async def scenario() -> None:
        url = await gateways.url(proc)
        body = {"chat_id": "carol", "text": "hello", "message_id": "m1"}
        async with httpx.AsyncClient(timeout=DEADLINE) as client:
            gave_up = await client.post(f"{url}/v1/messages?wait=0.05", json=body)
            assert gave_up.status_code == 202
            polled = await client.get(f"{url}/v1/chats/carol/replies", params={"wait": 30})
            first = polled.json()["replies"][0]["text"]
            assert REPLY.match(first)["turn"] == "1"
            if scaled_out:
                proc.kill()
                proc.wait(timeout=30)
                (entry / "gateway.out").rename(entry / "gateway.out.first")  # the next address only
                again = gateways.start(entry, "--role", "ingress")
                url2 = await gateways.url(again)
            else:
                url2 = url
            answer = await client.post(f"{url2}/v1/messages?wait=30", json=body)
            assert answer.status_code == 200, answer.text
            assert answer.json()["reply"] == first
            nxt = await client.post(
                f"{url2}/v1/messages?wait=30", json={"chat_id": "carol", "text": "next", "message_id": "m2"}
            )
            assert REPLY.match(nxt.json()["reply"])["turn"] == "2"
        assert turns(started) == ["hello", "next"]

    run(scenario())
    for each in gateways.procs:
        assert "Traceback" not in gateways.output(each), gateways.output(each)
