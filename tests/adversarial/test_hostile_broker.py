"""Hostile input to the scaled-out gateway: what comes back from Redis or a session file is untrusted.

A real redis-server (the ``redis_server`` fixture) and real SQLite files.  Every case is something a
broken deployment, another program sharing the Redis, or a hostile chat can produce: nested JSON deep
enough to blow the stack, records that are not what the kernel wrote, surrogates and NUL bytes in
chat text, a message too big, a retried submission, a password in an error text.
"""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import until
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis_server import RedisServer

from kernel.gateway.broker import (
    MAX_MESSAGE_BYTES,
    STALE,
    BrokerSettings,
    Inbound,
    Lease,
    Outbound,
    mask_secrets,
)
from kernel.gateway.redis_broker import RedisBroker
from kernel.gateway.sessions import MAX_STATE_DEPTH, SessionState, SessionStoreError, SqliteSessionStore


class Log:
    """A stand-in for the kernel's structured logger that keeps what it was told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))

    info = warning

    def named(self, event: str) -> list[dict[str, Any]]:
        return [fields for name, fields in self.events if name == event]


def broker(server: RedisServer, log: Log | None = None, **options: Any) -> RedisBroker:
    return RedisBroker(BrokerSettings(url=server.url, prefix=f"h{uuid.uuid4().hex[:8]}", **options), log=log)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


# -- records read back ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "[" * 200_000 + "]" * 200_000,
        '{"a":' * 100_000 + "1" + "}" * 100_000,
        '"' + "\\" * 10 + '"' + "{" * (MAX_STATE_DEPTH + 1),
    ],
    ids=["deep-list", "deep-object", "deep-after-escapes"],
)
def test_deeply_nested_records_are_refused_before_json_recurses(text: str) -> None:
    for load in (SessionState.loads, Inbound.loads, Outbound.loads):
        with pytest.raises(ValueError, match=r"nested deeper|larger than"):
            load(text)


def test_braces_inside_strings_do_not_count_as_nesting() -> None:
    state = SessionState("s1", [{"role": "user", "content": "{" * 10_000 + '\\"[' * 500}], 1)
    assert SessionState.loads(state.dumps()) == state


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ("[]", "not a JSON object"),
        ('{"messages": []}', "no session_id"),
        ('{"session_id": "", "messages": []}', "no session_id"),
        ('{"session_id": "s", "messages": {}}', "'messages' is not a list"),
        ('{"session_id": "s", "messages": [1]}', "'messages' is not a list"),
        ('{"session_id": "s", "messages": [], "turns": true}', "'turns'"),
        ('{"session_id": "s", "messages": [], "turns": -1}', "'turns'"),
        ('{"session_id": "s", "messages": [], "turns": 1.5}', "'turns'"),
        ("not json at all", "Expecting value"),
    ],
)
def test_a_session_record_that_is_not_the_kernels_is_refused_saying_why(record: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        SessionState.loads(record)


def test_a_record_larger_than_the_bound_is_refused_unread() -> None:
    with pytest.raises(ValueError, match="larger than"):
        SessionState.loads(" " * (32 * 1024 * 1024 + 1))
    with pytest.raises(ValueError, match="larger than"):
        Inbound.loads(" " * (MAX_MESSAGE_BYTES + 1))


def test_a_conversation_that_cannot_be_json_is_not_saved_and_says_so() -> None:
    with pytest.raises(SessionStoreError, match="cannot be saved as JSON"):
        SessionState("s", [{"role": "user", "content": math.nan}]).dumps()
    with pytest.raises(SessionStoreError, match="cannot be saved as JSON"):
        SessionState("s", [{"role": "user", "content": object()}]).dumps()  # type: ignore[dict-item]
    with pytest.raises(SessionStoreError, match="larger than"):
        SessionState("s", [{"role": "user", "content": "x" * (33 * 1024 * 1024)}]).dumps()


@given(st.text())
@settings(max_examples=200, deadline=None)
def test_any_chat_text_survives_a_session_round_trip_exactly(text: str) -> None:
    """Surrogates, NUL bytes and every other code point: the JSON is ASCII, read back equal."""
    state = SessionState("s", [{"role": "user", "content": text}], 1)
    dumped = state.dumps()
    assert dumped.isascii()
    assert SessionState.loads(dumped) == state


def test_an_unreadable_sqlite_record_is_kept_aside_and_the_chat_starts_over(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    log = Log()
    store = SqliteSessionStore(path, log=log)
    store.save_now("irc:#a", SessionState("s1", [{"role": "user", "content": "hi"}], 1))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE sessions SET state = ? WHERE key = ?", ("[" * 10_000, "irc:#a"))
    assert store.load_now("irc:#a") is None
    (warning,) = log.named("gateway_session_unreadable")
    assert warning["key"] == "irc:#a" and "nested deeper" in warning["problem"]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT key, state FROM unreadable").fetchall() == [("irc:#a", "[" * 10_000)]
    store.save_now("irc:#a", SessionState("s2", [], 0))
    assert store.load_now("irc:#a") == SessionState("s2", [], 0)
    store.close()


# -- through a real Redis --------------------------------------------------------------------------


def test_an_unreadable_redis_session_is_renamed_not_deleted(redis_server: RedisServer) -> None:
    log = Log()
    b = broker(redis_server, log)
    raw = redis_server.client()

    async def scenario() -> None:
        await b.open()
        store = b.session_store()
        raw.set(b.k_session("irc:#x"), '{"session_id": 7}')
        assert await store.load("irc:#x") is None
        (kept,) = raw.keys(f"{b.settings.prefix}:session-unreadable:irc:#x:*")
        assert raw.get(kept) == '{"session_id": 7}'
        assert raw.get(b.k_session("irc:#x")) is None
        assert log.named("gateway_session_unreadable")[0]["kept_in"] == kept
        await b.aclose()

    run(scenario())


def test_a_message_that_is_not_the_kernels_is_acknowledged_unanswered_and_the_chat_goes_on(
    redis_server: RedisServer,
) -> None:
    """Another program wrote garbage into a chat's stream: the worker gets it marked unreadable, the
    hand-back acknowledges it (no reply), and the chat's next message comes next."""
    log = Log()
    b = broker(redis_server, log)
    raw = redis_server.client()

    async def scenario() -> None:
        await b.open()
        assert await b.submit(Inbound(platform="irc", chat_id="#g", text="first"))
        raw.xadd(b.k_chat("irc:#g"), {"m": "[" * 5000})  # behind the first
        assert await b.submit(Inbound(platform="irc", chat_id="#g", text="third"))
        (lease,) = await b.take("w", 4, block=1)
        assert lease.message is not None and lease.message.text == "first"
        following = await b.finish("w", lease, None)
        assert isinstance(following, Inbound) and following.message_type == "unreadable"
        assert log.named("gateway_message_unreadable")
        lease.message = following
        following = await b.finish("w", lease, None)
        assert isinstance(following, Inbound) and following.text == "third"
        lease.message = following
        assert await b.finish("w", lease, None) is None
        status = await b.status()
        assert (status["pending"], status["queued"]) == (0, 0)
        await b.aclose()

    run(scenario())


def test_a_token_that_is_not_the_kernels_is_dropped(redis_server: RedisServer) -> None:
    b = broker(redis_server)
    raw = redis_server.client()

    async def scenario() -> None:
        await b.open()
        raw.xadd(b.k_ready, {"something": "else"})
        assert await b.take("w", 4, block=0.2) == []
        assert (await b.status())["pending"] == 0
        await b.aclose()

    run(scenario())


def test_a_retried_submit_is_queued_once(redis_server: RedisServer) -> None:
    """The submit ran in Redis but its answer was lost (a dropped connection): the retry with the same
    message is not queued a second time."""
    b = broker(redis_server)

    async def scenario() -> None:
        await b.open()
        message = Inbound(platform="irc", chat_id="#r", text="once")
        assert await b.submit(message) and await b.submit(message)
        (lease,) = await b.take("w", 4, block=1)
        assert await b.finish("w", lease, None) is None
        assert (await b.status())["queued"] == 0
        await b.aclose()

    run(scenario())


def test_past_max_pending_nothing_is_queued(redis_server: RedisServer) -> None:
    b = broker(redis_server, max_pending=3)

    async def scenario() -> None:
        await b.open()
        accepted = [await b.submit(Inbound(platform="irc", chat_id=f"#{n}", text="x")) for n in range(5)]
        assert accepted == [True, True, True, False, False]
        assert (await b.status())["queued"] == 3
        await b.aclose()

    run(scenario())


def test_a_stale_worker_cannot_hand_back_release_or_keep_a_chat(redis_server: RedisServer) -> None:
    """Worker a held the chat; b took it over after claim_after.  Every write of a's is refused, and its
    heartbeat says it lost the chat instead of taking it back."""
    b = broker(redis_server, claim_after=0.2)

    async def scenario() -> None:
        from kernel.gateway.broker import Member

        await b.open()
        await b.submit(Inbound(platform="irc", chat_id="#s", text="hello"))
        (mine,) = await b.take("a", 1, block=1)
        await asyncio.sleep(0.3)
        b._claim_checked = 0.0
        (theirs,) = await b.take("b", 1, block=0.2)
        assert theirs.token == mine.token and theirs.message.text == "hello"
        reply = Outbound("irc", "#s", "late", None, mine.message.reply_key)
        assert await b.finish("a", mine, reply, ("irc:#s", SessionState("x", [], 9).dumps())) is STALE
        await b.release("a", mine)
        assert await b.heartbeat(Member(id="a", role="worker"), [mine]) == {mine.token}
        assert await b.replies("irc", block=0.1) == []
        assert redis_server.client().get(b.k_session("irc:#s")) is None
        assert await b.finish("b", theirs, None) is None
        await b.aclose()

    run(scenario())


@given(text=st.text(max_size=300), chat=st.text(min_size=1, max_size=40))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_text_and_chat_id_go_through_redis_unchanged(
    redis_server: RedisServer, text: str, chat: str
) -> None:
    """Surrogates, NUL bytes, colons and newlines in a chat id or a message: what the worker takes is
    what the ingress queued, and the reply comes back the same."""
    b = broker(redis_server)

    async def scenario() -> None:
        await b.open()
        sent = Inbound(platform="irc", chat_id=chat, text=text, message_id="\x00" + text[:5])
        assert await b.submit(sent)
        (lease,) = await b.take("w", 1, block=1)
        got = lease.message
        assert got is not None and (got.chat_id, got.text, got.message_id) == (chat, text, sent.message_id)
        reply = Outbound("irc", chat, text, got.message_id, got.reply_key)
        assert await b.finish("w", lease, reply) is None
        ((entry, back),) = await b.replies("irc", block=0.5)
        assert back == reply
        await b.sent("irc", entry)
        assert await b.was_sent(sent.reply_key)
        assert await b.replies("irc", block=0.1) == []
        await b.aclose()

    run(scenario())


def test_a_password_never_reaches_an_error_text_or_the_status(tmp_path: Path) -> None:
    """Nothing listens on the port: the status says why, with the URL masked."""
    url = "redis://:s3cret-pw@127.0.0.1:9/0"
    b = RedisBroker(BrokerSettings(url=url))
    status = run(b.status())
    assert status["connected"] is False and status["error"]
    assert "s3cret-pw" not in json.dumps(status) and status["url"] == "redis://***@127.0.0.1:9/0"
    assert (
        mask_secrets(f"failed for {url} with s3cret-pw", url)
        == "failed for redis://***@127.0.0.1:9/0 with ***"
    )


def test_a_call_waiting_for_an_unreachable_broker_gives_up_when_told(tmp_path: Path) -> None:
    """The retries go on while Redis is down, and end with BrokerUnavailable once the gateway stops."""
    from kernel.gateway.broker import BrokerUnavailable

    log = Log()
    b = RedisBroker(BrokerSettings(url="redis://127.0.0.1:9/0"), log=log)

    async def scenario() -> None:
        call = asyncio.create_task(b.submit(Inbound(platform="irc", chat_id="#d", text="x")))
        await until(lambda: log.named("gateway_broker_retry"), "a retry of the call")
        assert not call.done() and b.connected is False and b.last_error
        b.stop_retrying()
        with pytest.raises(BrokerUnavailable, match="could not be reached to queue a message"):
            await asyncio.wait_for(call, 10)
        assert log.named("gateway_broker_retry")[0]["broker"] == "redis://127.0.0.1:9/0"

    run(scenario())


def test_a_lease_without_a_message_gives_the_chat_up(redis_server: RedisServer) -> None:
    """A chat whose stream was emptied behind the kernel's back (FLUSH of one key): taken, given up."""
    b = broker(redis_server)
    raw = redis_server.client()

    async def scenario() -> None:
        await b.open()
        await b.submit(Inbound(platform="irc", chat_id="#e", text="x"))
        raw.delete(b.k_chat("irc:#e"))
        (lease,) = await b.take("w", 1, block=1)
        assert lease.message is None
        assert await b.finish("w", Lease(lease.token, lease.chat_key, None), None) is None
        assert raw.hget(b.k_active, "irc:#e") is None
        await b.aclose()

    run(scenario())


def test_a_message_the_platform_delivered_twice_gets_one_reply(redis_server: RedisServer) -> None:
    """The platform's message m7 submitted twice (two deliveries): queued once, so answered once, and
    only that reply is handed back to the ingress."""
    b = broker(redis_server)

    async def scenario() -> None:
        await b.open()
        for _ in range(2):
            assert await b.submit(Inbound(platform="irc", chat_id="#d", text="hi", message_id="m7"))
        (lease,) = await b.take("w", 1, block=1)
        assert lease.message is not None
        reply = Outbound("irc", "#d", f"answer to {lease.message.uid}", "m7", lease.message.reply_key)
        assert await b.finish("w", lease, reply) is None  # no second copy queued behind it
        replies = await b.replies("irc", block=0.2)
        assert len(replies) == 1 and replies[0][1] is not None and replies[0][1].reply_to == "m7"
        await b.aclose()

    run(scenario())


def test_each_takeover_of_an_unanswered_message_counts_an_attempt(redis_server: RedisServer) -> None:
    """A message whose workers keep vanishing: every takeover adds one to its attempts (what the worker
    uses to give up after MAX_ATTEMPTS), and answering it clears the count."""
    b = broker(redis_server, claim_after=0.2)
    raw = redis_server.client()

    async def scenario() -> None:
        await b.open()
        await b.submit(Inbound(platform="irc", chat_id="#p", text="poison"))
        seen = []
        for worker in "abcd":
            b._claim_checked = 0.0
            (lease,) = await b.take(worker, 1, block=1)
            seen.append(lease.attempts)
            await asyncio.sleep(0.3)
        assert seen == [1, 2, 3, 4]
        assert await b.finish("d", lease, None) is None
        assert raw.hlen(b.k_attempts) == 0
        await b.aclose()

    run(scenario())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("message_id", {"a": 1}),
        ("user_id", 5),
        ("chat_type", None),
        ("timestamp", "now"),
        ("accepted_at", True),
    ],
)
def test_a_queued_message_with_fields_of_the_wrong_kind_is_refused(field: str, value: Any) -> None:
    record = json.loads(Inbound(platform="irc", chat_id="#c", text="t").dumps())
    record[field] = value
    with pytest.raises(ValueError, match=field):
        Inbound.loads(json.dumps(record))
