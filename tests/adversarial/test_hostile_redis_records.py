"""Hostile records in the gateway's Redis: what is read back is untrusted, and a chat's records are its own.

A real redis-server (the ``redis_server`` fixture); the broker through its own API, or real
``hermes-kernel gateway run`` processes (tests/gateways/test_gateway_scale.py's ``Deployment``) and an
in-process worker.  Every case is something another program sharing the Redis, a hand-edited key or a hostile
payload can produce: a key of the wrong type under the prefix, a message naming another chat, chat
and message ids made to collide, messages removed behind the gateway's back, a Redis user refused a
command.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import until
from redis_server import RedisServer
from test_gateway import ChatClient, ChatServer
from test_gateway_scale import DEADLINE, Deployment, in_process_home, log_text, parse

from kernel.gateway.broker import BrokerSettings, Inbound, Outbound, chat_key
from kernel.gateway.redis_broker import RedisBroker
from kernel.gateway.sessions import SessionState


class Log:
    """A stand-in for the kernel's structured logger that keeps what it was told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))

    info = error = warning

    def named(self, event: str) -> list[dict[str, Any]]:
        return [fields for name, fields in self.events if name == event]


def broker(server: RedisServer, log: Log | None = None, **options: Any) -> RedisBroker:
    return RedisBroker(BrokerSettings(url=server.url, prefix=f"h{uuid.uuid4().hex[:8]}", **options), log=log)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, DEADLINE * 2))


@pytest.fixture
def deployment(tmp_path: Path, redis_server: RedisServer) -> Iterator[Deployment]:
    """Real gateway processes (tests/gateways/test_gateway_scale.py), all stopped at the end."""
    made = Deployment(tmp_path, redis_server, delay=0.01)
    yield made
    made.stop_all()


def set_aside(raw: Any, b: RedisBroker, key: str) -> list[str]:
    """The quarantine keys holding what was at ``key``."""
    name = key[len(b.settings.prefix) + 1 :]
    return sorted(raw.keys(f"{b.settings.prefix}:quarantine:{name}:*"))


# -- a key of the wrong type -------------------------------------------------------------------------


def _plant(raw: Any, key: str, kind: str) -> None:
    if kind == "hash":
        raw.hset(key, "not", "ours")
    elif kind == "list":
        raw.rpush(key, "not", "ours")
    else:
        raw.set(key, "not ours")


@pytest.mark.parametrize(
    ("where", "kind"),
    [
        ("session", "hash"),
        ("chat", "string"),
        ("count", "list"),
        ("active", "string"),
        ("attempts", "list"),
        ("ready", "string"),
        ("out", "hash"),
        ("sent", "hash"),
    ],
)
def test_a_key_of_the_wrong_type_is_set_aside_and_the_message_is_answered(
    redis_server: RedisServer, where: str, kind: str
) -> None:
    """Each key the broker reads or writes, made the wrong type by someone else: it is moved to
    ``P:quarantine:...`` (its content kept, logged once with the key) and the message goes through —
    queued, taken, answered, its session saved."""
    log = Log()
    b = broker(redis_server, log, claim_after=0.2)
    raw = redis_server.client()
    message = Inbound(platform="irc", chat_id="#w", text="hello", message_id="m1")
    key = {
        "session": b.k_session(message.chat_key),
        "chat": b.k_chat(message.chat_key),
        "count": b.k_count,
        "active": b.k_active,
        "attempts": b.k_attempts,
        "ready": b.k_ready,
        "out": b.k_out("irc"),
        "sent": b.k_sent(message.reply_key),
    }[where]

    async def scenario() -> None:
        if where == "ready":
            _plant(raw, key, kind)  # before the groups are made
        await b.open()
        if where != "ready":
            _plant(raw, key, kind)
        assert await b.submit(message)
        await asyncio.sleep(0.3)  # past claim_after: the take also looks for chats to take over
        b._claim_checked = 0.0
        (lease,) = await b.take("w", 4, block=1)
        assert lease.message is not None and lease.message.text == "hello"
        reply = Outbound("irc", "#w", "hi back", "m1", lease.message.reply_key)
        state = SessionState("s1", [{"role": "user", "content": "hello"}], 1).dumps()
        assert await b.finish("w", lease, reply, (message.chat_key, state)) is None
        ((entry, back),) = await b.replies("irc", block=1)
        assert back == reply
        await b.sent("irc", entry)
        assert raw.get(b.k_session(message.chat_key)) == state
        (kept,) = set_aside(raw, b, key)
        assert raw.type(kept) == ("list" if kind == "list" else kind)
        assert [e["key"] for e in log.named("gateway_record_set_aside")] == [key]
        status = await b.status()
        assert (status["pending"], status["queued"]) == (0, 0)
        await b.aclose()

    run(scenario())


def test_a_token_naming_no_chat_of_the_gateways_is_dropped_and_the_others_are_served(
    redis_server: RedisServer,
) -> None:
    """Tokens another program put in ``P:ready``: one without a platform, one of a chat id too long.
    They are dropped (acknowledged and deleted, logged); the real chat is taken."""
    log = Log()
    b = broker(redis_server, log)
    raw = redis_server.client()

    async def scenario() -> None:
        await b.open()
        raw.xadd(b.k_ready, {"chat": "nocolon"})
        raw.xadd(b.k_ready, {"chat": "irc:" + "x" * 5000})
        await b.submit(Inbound(platform="irc", chat_id="#real", text="x"))
        leases = await b.take("w", 4, block=1)
        assert [lease.chat_key for lease in leases] == ["irc:#real"]
        assert raw.xlen(b.k_ready) == 1
        assert len(log.named("gateway_token_set_aside")) == 2
        await b.aclose()

    run(scenario())


def test_wrong_typed_records_stop_no_worker_and_every_chat_is_answered(deployment: Deployment) -> None:
    """Through real processes: the counter is a list, one chat's session is a hash, another chat's
    stream is a string (its token waiting).  Every one of the four chats is answered, in its own
    conversation; the records are kept under ``P:quarantine:``; the worker's heartbeat shows no error."""
    d = deployment
    raw = d.redis.client()
    p = d.prefix

    async def scenario() -> None:
        raw.rpush(f"{p}:count", "not", "a", "counter")
        raw.hset(f"{p}:session:linechat:#s1", "not", "a session")
        raw.set(f"{p}:chat:linechat:#s2", "not a stream")
        raw.hset(f"{p}:active", "linechat:#s2", "0-1")
        server = await ChatServer().start()
        worker = await d.worker("w", concurrency=2)
        raw.xadd(f"{p}:ready", {"chat": "linechat:#s2"})
        await d.ingress(server)
        client = await ChatClient.open(server)
        chats = ["#s1", "#s2", "#ok1", "#ok2"]
        for chat in chats:
            await client.say(chat, "ann", f"hello from {chat}")
        replies = [parse(await client.reply(20)) for _ in chats]
        assert sorted((r["chat"], r["text"], r["turn"]) for r in replies) == sorted(
            (chat, f"hello from {chat}", 1) for chat in chats
        )
        for name in ("count", "session:linechat:#s1", "chat:linechat:#s2"):
            assert raw.keys(f"{p}:quarantine:{name}:*"), name
        assert "gateway_record_set_aside" in log_text(worker.home) + log_text(d.root / "ingress")
        (row,) = d.status()["broker"]["workers"]
        assert row["error"] is None and worker.poll() is None
        client.close()
        await server.close()

    run(scenario())


# -- a worker whose loop fails ----------------------------------------------------------------------------


def test_a_worker_whose_loop_fails_backs_off_says_so_in_its_heartbeat_and_recovers(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """The worker's Redis user is refused XREADGROUP (an ACL: a real failure that is not "unreachable").
    The worker does not end: it logs the failure, retries with a bounded backoff, and its member record
    (what ``gateway status`` shows) carries the error.  Once the command is allowed again the waiting
    message is answered and the error is cleared."""
    from kernel import Kernel

    raw = redis_server.client()
    user, password = f"u{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    raw.acl_setuser(
        user, enabled=True, passwords=[f"+{password}"], keys=["*"], commands=["+@all", "-xreadgroup"]
    )
    url = f"redis://{user}:{password}@127.0.0.1:{redis_server.port}/0"
    prefix = f"g{uuid.uuid4().hex[:8]}"
    home = in_process_home(tmp_path, url, 1, prefix=prefix)
    cfg = (home / "config.yaml").read_text().replace("claim_after: 5", "claim_after: 1")
    (home / "config.yaml").write_text(cfg)

    def members() -> list[dict[str, Any]]:
        return [json.loads(v) for v in raw.hvals(f"{prefix}:members")]

    async def scenario() -> None:
        b = RedisBroker(BrokerSettings(url=redis_server.url, prefix=prefix))
        await b.open()
        await b.submit(Inbound(platform="linechat", chat_id="#late", text="waiting"))
        try:
            with Kernel(home=home) as k:
                task = asyncio.create_task(k.gateway.run(role="worker"))
                await until(
                    lambda: any("xreadgroup" in (m.get("error") or "") for m in members()) or task.done(),
                    "the heartbeat to report the failure",
                    DEADLINE,
                )
                assert not task.done()
                assert "gateway_worker_loop_failed" in log_text(home)
                raw.acl_setuser(user, commands=["+xreadgroup"])
                replies: list[Any] = []
                while not replies:
                    replies = await b.replies("linechat", block=1.0)
                assert parse({"text": replies[0][1].text, "chat": "#late"})["text"] == "waiting"
                await until(
                    lambda: all(m.get("error") is None for m in members()),
                    "the error to be cleared",
                    DEADLINE,
                )
                k.gateway.stop()
                await asyncio.wait_for(task, DEADLINE)
        finally:
            raw.acl_deluser(user)
            await b.aclose()

    run(scenario())


# -- a chat's records belong to that chat -------------------------------------------------------------


def test_a_queued_message_naming_another_chat_is_set_aside_and_touches_neither(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A payload in chat #a's stream says it is chat #b's.  The worker answers nothing into #b and
    writes neither chat's conversation with it: #b's conversation goes on at turn 2 with its own
    message, #a has no session, and the log names the foreign record."""
    from kernel import Kernel

    prefix = f"g{uuid.uuid4().hex[:8]}"
    home = in_process_home(tmp_path, redis_server.url, 1, prefix=prefix)
    raw = redis_server.client()

    async def scenario() -> None:
        b = RedisBroker(BrokerSettings(url=redis_server.url, prefix=prefix))
        await b.open()
        with Kernel(home=home) as k:
            task = asyncio.create_task(k.gateway.run(role="worker"))
            await b.submit(Inbound(platform="linechat", chat_id="#b", text="hello", message_id="m1"))
            got: list[Outbound] = []

            async def replies(count: int) -> None:
                while len(got) < count:
                    for entry, reply in await b.replies("linechat", block=0.5):
                        assert reply is not None
                        got.append(reply)
                        await b.sent("linechat", entry)

            await asyncio.wait_for(replies(1), DEADLINE)
            evil = Inbound(platform="linechat", chat_id="#b", text="evil", message_id="m2")
            raw.xadd(b.k_chat("linechat:#a"), {"m": evil.dumps()})
            raw.hset(b.k_active, "linechat:#a", "0-1")
            raw.xadd(b.k_ready, {"chat": "linechat:#a"})
            await until(lambda: raw.hlen(b.k_active) == 0 or task.done(), "#a to be done", DEADLINE)
            await b.submit(Inbound(platform="linechat", chat_id="#b", text="again", message_id="m3"))
            await asyncio.wait_for(replies(2), DEADLINE)
            await asyncio.sleep(0.2)
            got.extend(reply for _e, reply in await b.replies("linechat", block=0.2) if reply)
            answered = [(r.chat_id, parse({"text": r.text, "chat": r.chat_id})) for r in got]
            assert [(chat, a["text"], a["turn"]) for chat, a in answered] == [
                ("#b", "hello", 1),
                ("#b", "again", 2),
            ]
            assert raw.get(b.k_session("linechat:#a")) is None
            k.gateway.stop()
            await asyncio.wait_for(task, DEADLINE)
        assert "gateway_message_foreign" in log_text(home)
        await b.aclose()

    run(scenario())


def test_chat_and_message_ids_made_to_collide_get_a_reply_each(redis_server: RedisServer) -> None:
    """Chat ``a`` / message ``b:1`` and chat ``a:b`` / message ``1`` (and a platform named with a colon):
    each message's reply is handed back, none dropped as "answered already"."""
    b = broker(redis_server)
    pairs = [("irc", "a", "b:1"), ("irc", "a:b", "1"), ("irc:a", "b", "1"), ("irc", "a%3Ab", "1")]

    async def scenario() -> None:
        await b.open()
        for platform, chat, message_id in pairs:
            assert await b.submit(Inbound(platform=platform, chat_id=chat, text="t", message_id=message_id))
        leases = await b.take("w", 8, block=1)
        assert len(leases) == len(pairs)
        for lease in leases:
            m = lease.message
            assert m is not None
            reply = Outbound(m.platform, m.chat_id, f"to {m.chat_id}", m.message_id, m.reply_key)
            assert await b.finish("w", lease, reply) is None
        got = [r for platform in ("irc", "irc:a") for _e, r in await b.replies(platform, block=0.3)]
        assert sorted((r.platform, r.chat_id) for r in got if r) == sorted((p, c) for p, c, _m in pairs)
        await b.aclose()

    assert len({chat_key(p, c) for p, c, _m in pairs}) == len(pairs)
    assert len({Inbound(platform=p, chat_id=c, text="", message_id=m).reply_key for p, c, m in pairs}) == 4
    run(scenario())


def test_two_chats_whose_messages_share_a_stream_id_count_their_attempts_apart(
    redis_server: RedisServer,
) -> None:
    """Stream ids are per stream: two chats' messages can both be ``5-0``.  Each takeover counts an
    attempt for that chat's message only."""
    b = broker(redis_server, claim_after=0.2)
    raw = redis_server.client()

    async def scenario() -> None:
        await b.open()
        for chat in ("irc:#x", "irc:#y"):
            platform, _, chat_id = chat.partition(":")
            raw.xadd(
                b.k_chat(chat), {"m": Inbound(platform=platform, chat_id=chat_id, text="t").dumps()}, id="5-0"
            )
            raw.hset(b.k_active, chat, "5-0")
            raw.xadd(b.k_ready, {"chat": chat})
        assert len(await b.take("a", 4, block=1)) == 2
        await asyncio.sleep(0.3)
        b._claim_checked = 0.0
        taken = await b.take("b", 4, block=0.2)
        assert sorted(lease.attempts for lease in taken) == [2, 2]
        await b.aclose()

    run(scenario())


# -- the pending counter cannot drift -------------------------------------------------------------------


def test_messages_removed_behind_the_gateways_back_do_not_leave_it_busy_forever(
    redis_server: RedisServer,
) -> None:
    """At ``max_pending``, a chat's stream is deleted (and another's entries trimmed) by someone else:
    the next message is queued, not refused, and the status counts what is really there."""
    b = broker(redis_server, max_pending=3)
    raw = redis_server.client()

    async def scenario() -> None:
        await b.open()
        for text in ("1", "2"):
            assert await b.submit(Inbound(platform="irc", chat_id="#gone", text=text))
        assert await b.submit(Inbound(platform="irc", chat_id="#trim", text="3"))
        assert not await b.submit(Inbound(platform="irc", chat_id="#new", text="refused"))
        raw.delete(b.k_chat("irc:#gone"))
        raw.xtrim(b.k_chat("irc:#trim"), maxlen=0)
        assert await b.submit(Inbound(platform="irc", chat_id="#new", text="queued"))
        assert (await b.status())["queued"] == 1
        await b.aclose()

    run(scenario())
