"""Nothing lost on the way in or out of the gateway; message ids that join alike stay apart.

Faults a crashing host and a misbehaving platform really produce: an ingress killed while it queues
its spool with Redis still down, a reply bigger than the ingress reads back, message ids that join
alike (a platform delivering one message twice: test_gateway_duplicates.py).  Redis is a real
redis-server on 127.0.0.1; the process faults (SIGKILL) hit real
``hermes-kernel gateway run`` subprocesses; the platform is the line chat of tests/gateways/test_gateway.py (a
real TCP server the test runs); the model is the bundled ``scripted`` one, and a plugin appends one line
per turn the model runs, so that turns are counted, not guessed.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import until, write_plugin
from redis_server import RedisServer
from test_gateway import ChatClient, ChatServer, platform_plugin
from test_gateway_scale import ECHO_PLUGIN, Deployment, collect, log_text, no_more_replies, parse

from kernel import Kernel
from kernel.base.safe_yaml import utf8_size
from kernel.gateway.broker import MAX_REPLY_BYTES, Inbound, fit_reply
from kernel.testing import write_script

DEADLINE = 60.0


def run(coro: Any) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, DEADLINE * 4)

    return asyncio.run(bounded())


def turns(path: Path) -> list[str]:
    """The user messages the model was run for, one per turn (the echo plugin's records)."""
    if not path.is_file():
        return []
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]


def gateway_home(
    root: Path, port: int, *, broker: dict[str, Any] | None = None, delay: float = 0.0, **linechat: Any
) -> Path:
    """A home with the line chat platform, the echo plugin (turns recorded in ``started.jsonl``) and
    the scripted model; with ``broker``, a scaled-out gateway in one process (``--role all``)."""
    home = root / "home"
    home.mkdir()
    platform_plugin(home, "linechat")
    started = repr(str(home / "started.jsonl"))
    write_plugin(home / "plugins", "echo", ECHO_PLUGIN.replace("@STARTED@", started))
    script = write_script(home, [{"text": "ok", "delay_s": delay}] * 50)
    gateway: dict[str, Any] = {"platforms": {"linechat": {"enabled": True, "port": port, **linechat}}}
    if broker is not None:
        gateway["broker"] = broker
    config = {"model": {"provider": "scripted", "script": str(script)}, "gateway": gateway}
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return home


async def serve(kernel: Kernel, server: ChatServer) -> asyncio.Task[None]:
    task = asyncio.create_task(kernel.gateway.run())
    await until(lambda: server.bots or task.done(), "the platform to connect", DEADLINE)
    if task.done():
        task.result()
    return task


async def stop(kernel: Kernel, task: asyncio.Task[None]) -> None:
    kernel.gateway.stop()
    await asyncio.wait_for(task, DEADLINE)


def redelivered(server: ChatServer, message_id: str, chat: str, user: str, text: str) -> None:
    """The platform hands the bot a message again, with the id it had the first time."""
    for bot in server.bots:
        bot.write(f"{message_id}|{chat}|{user}|{text}\n".encode())


# -- the spool ---------------------------------------------------------------------------------------


def test_an_ingress_killed_while_redis_is_still_down_keeps_its_spool(tmp_path: Path) -> None:
    """Five messages wait in the spool; the ingress starts while Redis is down, reads the spool and is
    SIGKILLed: the spool still holds the five.  With Redis back, a new ingress and a worker answer
    each of them once, in order, and the spool is gone."""
    data = tmp_path / "redis"
    data.mkdir()
    own = RedisServer(data).start()
    d = Deployment(tmp_path, own, delay=0.01)

    async def scenario() -> None:
        server = await ChatServer().start()
        d.port = server.port
        home = d.home("ingress")
        spool = home / "gateway" / f"spool-{d.prefix}.jsonl"
        spool.parent.mkdir(parents=True)
        messages = [
            Inbound(platform="linechat", chat_id="#sp", text=f"spooled {n}", message_id=f"s{n}")
            for n in range(5)
        ]
        spool.write_text("".join(m.dumps() + "\n" for m in messages), encoding="utf-8")
        own.stop()
        doomed = d.start("ingress", "ingress")
        await until(
            # It read its spool and tries to queue the first message (the broker is unreachable).
            lambda: "queue a message" in log_text(home) or doomed.poll() is not None,
            "the ingress to try to queue its spool",
            DEADLINE,
        )
        doomed.kill()
        doomed.wait()
        assert spool.is_file(), "the spool was removed before Redis had its messages"
        kept = [json.loads(line) for line in spool.read_text(encoding="utf-8").splitlines()]
        assert [(m["message_id"], m["text"]) for m in kept] == [(m.message_id, m.text) for m in messages]

        client = await ChatClient.open(server)
        own.start()
        await d.ingress(server)
        await d.worker("w", concurrency=1)
        got = [(r["reply_to"], parse(r)["text"], parse(r)["turn"]) for r in await collect(client, 5)]
        assert got == [(f"s{n}", f"spooled {n}", n + 1) for n in range(5)]
        await no_more_replies(client, 1.0)
        assert not spool.exists()
        client.close()
        await server.close()

    try:
        run(scenario())
    finally:
        d.stop_all()
        own.stop()


def test_a_spooled_message_queued_twice_after_a_kill_is_answered_once(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """An ingress killed after Redis acknowledged a spooled message but before the spool was removed
    queues it again at its next start: it is answered once, one turn."""
    prefix = f"q{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        server = await ChatServer().start()
        home = gateway_home(tmp_path, server.port, broker={"url": redis_server.url, "prefix": prefix})
        spool = home / "gateway" / f"spool-{prefix}.jsonl"
        spool.parent.mkdir(parents=True)
        message = Inbound(platform="linechat", chat_id="#twice", text="only once", message_id="t1")
        spool.write_text(message.dumps() + "\n" + message.dumps() + "\n", encoding="utf-8")
        client = await ChatClient.open(server)
        with Kernel(home=home) as k:
            task = await serve(k, server)
            got = parse(await client.reply(DEADLINE))
            assert (got["text"], got["turn"]) == ("only once", 1)
            await no_more_replies(client, 1.0)
            assert parse(await client.ask("#twice", "al", "next"))["turn"] == 2
            await stop(k, task)
        assert turns(home / "started.jsonl") == ["only once", "next"]
        client.close()
        await server.close()

    run(scenario())


# -- replies bigger than the ingress reads -----------------------------------------------------------

BIG_REPLY_PLUGIN = r'''
"""The reply to "big" is SIZE bytes of UTF-8: "ab" and a euro sign (3 bytes), over and over."""

SIZE = @SIZE@


def _transform(response_text=None, **_):
    return ("ab\u20ac" * (SIZE // 5 + 1))[: SIZE * 3 // 5]


def register(ctx):
    ctx.register_hook("transform_llm_output", _transform)
'''

NOTICE = re.compile(r"\[reply truncated: (\d+) bytes left out\]$")
PIECE = 20_000  # characters per message the line chat takes here (its lines stay under 64 KiB)


@pytest.mark.parametrize("scaled_out", [False, True], ids=["one-process", "redis"])
def test_a_reply_bigger_than_the_bound_is_delivered_truncated_with_a_notice(
    tmp_path: Path, redis_server: RedisServer, scaled_out: bool
) -> None:
    """A 5 MiB reply: the user gets its first part (at most the bound, cut between characters, in
    pieces no longer than the platform takes) ending with a notice of how many bytes were left out —
    the same in one process and through Redis, where the chat's next message is answered after it."""
    size = 5 * 1024 * 1024
    original = ("ab\u20ac" * (size // 5 + 1))[: size * 3 // 5]
    broker = {"url": redis_server.url, "prefix": f"b{uuid.uuid4().hex[:8]}"} if scaled_out else None

    async def scenario() -> None:
        server = await ChatServer().start()
        home = gateway_home(tmp_path, server.port, broker=broker, max_length=PIECE)
        write_plugin(home / "plugins", "bigreply", BIG_REPLY_PLUGIN.replace("@SIZE@", str(size)))
        client = await ChatClient.open(server)
        with Kernel(home=home) as k:
            task = await serve(k, server)
            await client.say("#big", "bo", "big")
            pieces = []
            while not pieces or not NOTICE.search(pieces[-1]):
                reply = await client.reply(DEADLINE)
                assert reply["chat"] == "#big" and reply["reply_to"] == "m1"
                pieces.append(reply["text"])
            await stop(k, task)
        assert all(len(piece) <= PIECE for piece in pieces)
        text = "".join(pieces)
        notice = NOTICE.search(text)
        assert notice is not None
        body = text[: notice.start()].rstrip("\n")
        assert original.startswith(body) and len(body) > 0
        assert int(notice[1]) == utf8_size(original) - utf8_size(body)
        assert utf8_size(body) + utf8_size(notice[0]) <= MAX_REPLY_BYTES
        assert "gateway_reply_unreadable" not in log_text(home)
        client.close()
        await server.close()

    run(scenario())


def test_fit_reply_cuts_between_characters_and_keeps_what_fits() -> None:
    small = "héllo"
    assert fit_reply(small) == small
    exact = "x" * MAX_REPLY_BYTES
    assert fit_reply(exact) == exact
    for filler in ("\u20ac", "\U0001f600", "a\u00e9"):
        text = filler * (MAX_REPLY_BYTES // len(filler.encode()) + 7)
        fitted = fit_reply(text)
        assert utf8_size(fitted) <= MAX_REPLY_BYTES
        notice = NOTICE.search(fitted)
        assert notice is not None
        body = fitted[: notice.start()].rstrip("\n")
        assert text.startswith(body)
        assert int(notice[1]) == utf8_size(text) - utf8_size(body)


# -- one turn per message id -------------------------------------------------------------------------


@pytest.mark.parametrize("scaled_out", [False, True], ids=["one-process", "redis"])
def test_message_ids_that_join_alike_do_not_collide(
    tmp_path: Path, redis_server: RedisServer, scaled_out: bool
) -> None:
    """Chat ``a`` / message ``b:1`` and chat ``a:b`` / message ``1`` are two messages: both answered."""
    broker = {"url": redis_server.url, "prefix": f"c{uuid.uuid4().hex[:8]}"} if scaled_out else None

    async def scenario() -> None:
        server = await ChatServer().start()
        home = gateway_home(tmp_path, server.port, broker=broker)
        client = await ChatClient.open(server)
        with Kernel(home=home) as k:
            task = await serve(k, server)
            redelivered(server, "b:1", "a", "ed", "first")
            redelivered(server, "1", "a:b", "ed", "second")
            got = sorted((r["chat"], r["reply_to"], parse(r)["text"]) for r in await collect(client, 2))
            assert got == [("a", "b:1", "first"), ("a:b", "1", "second")]
            await stop(k, task)
        client.close()
        await server.close()

    run(scenario())


def test_message_keys_are_collision_free() -> None:
    """The key a message id is remembered under (:attr:`Inbound.reply_key`) is one per triple."""
    parts = [("irc", "a", "b:1"), ("irc", "a:b", "1"), ("irc:a", "b", "1"), ("i", "rc:a:b", "1")]
    keys = {Inbound(platform=p, chat_id=c, text="", message_id=m).reply_key for p, c, m in parts}
    assert len(keys) == len(parts)


# -- a reply the platform never takes ----------------------------------------------------------------


@pytest.mark.parametrize("scaled_out", [False, True], ids=["one-process", "redis"])
def test_a_reply_the_platform_refuses_is_tried_again_then_kept_and_the_others_go_on(
    tmp_path: Path, redis_server: RedisServer, scaled_out: bool
) -> None:
    """Every send to one chat fails (the platform no longer has it): the reply is tried three times,
    then kept — in ``P:undelivered:<platform>`` through Redis, in ``gateway/undelivered.jsonl`` in one
    process — never dropped as if sent; the next chat's reply goes out as usual."""
    prefix = f"u{uuid.uuid4().hex[:8]}"
    broker = {"url": redis_server.url, "prefix": prefix} if scaled_out else None

    async def scenario() -> None:
        server = await ChatServer().start()
        home = gateway_home(tmp_path, server.port, broker=broker, refuse=["#gone"])
        client = await ChatClient.open(server)
        with Kernel(home=home) as k:
            task = await serve(k, server)
            await client.say("#gone", "go", "lost?")
            await client.say("#fine", "fi", "hello")
            got = parse(await client.reply(DEADLINE))
            assert (got["chat"], got["text"]) == ("#fine", "hello")
            if scaled_out:
                raw = redis_server.client()
                await until(
                    lambda: raw.xlen(f"{prefix}:undelivered:linechat") == 1, "the reply kept", DEADLINE
                )
                [(_entry, fields)] = raw.xrange(f"{prefix}:undelivered:linechat")
                kept = json.loads(fields["r"])
                assert raw.xlen(f"{prefix}:out:linechat") == 0
            else:
                path = home / "gateway" / "undelivered.jsonl"
                await until(path.is_file, "the reply kept", DEADLINE)
                kept = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
            assert (
                kept["chat_id"] == "#gone"
                and parse({"text": kept["text"], "chat": "#gone"})["text"] == "lost?"
            )
            adapter = k.gateway.adapters["linechat"]
            assert adapter.refused == 3  # type: ignore[attr-defined]
            await stop(k, task)
        assert "gateway_reply_undeliverable" in log_text(home)
        await no_more_replies(client, 0.3)
        client.close()
        await server.close()

    run(scenario())
