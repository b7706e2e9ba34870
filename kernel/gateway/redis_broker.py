"""The gateway's broker on Redis: Streams with consumer groups for the work, strings for the sessions.

Keys, each starting with ``gateway.broker.prefix`` (``P``):

* ``P:chat:<platform>:<chat>`` — a stream per chat: its messages not yet answered, oldest first.
* ``P:ready`` — a stream of chat tokens, read by the consumer group ``workers``.  A chat has one token
  while it has messages (``P:active`` says which chats have one); the worker whose pending entry it is
  holds the chat and answers its messages one by one.  A token left unacknowledged ``claim_after``
  seconds without its holder's heartbeat is taken over (``XAUTOCLAIM``).
* ``P:out:<platform>`` — the replies for the ingress holding that platform (consumer group ``ingress``);
  ``P:sent:<message>`` marks a message answered (a day), so a second reply to it is dropped.
* ``P:count`` — messages accepted and not yet answered (``max_pending`` bounds it);
  ``P:members`` — the gateway processes and their heartbeats; ``P:session:<platform>:<chat>`` — the
  chats' states (``gateway.sessions.store: redis``).

Every step that must not be half done (queue a message and schedule its chat; hand a reply back,
save the session, acknowledge the message and take the next one) is one Lua script, atomic in Redis.
Run Redis with ``appendonly yes`` for nothing accepted to survive a Redis restart (docs/scale-out.md).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis
import tenacity
from redis import exceptions as rexc
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from .broker import (
    STALE,
    Broker,
    BrokerSettings,
    BrokerUnavailable,
    Inbound,
    Lease,
    Member,
    Outbound,
    mask_secrets,
)
from .sessions import SessionState, SessionStore, SessionStoreError, _warn_unreadable

T = TypeVar("T")

WORKERS = "workers"
INGRESS = "ingress"
#: How long a message stays marked answered (the window in which a late second reply is dropped).
SENT_TTL = 24 * 3600
#: How long ``P:ready`` ids of submissions are remembered (a retried submit is not queued twice).
SEEN_TTL = 3600
RETRY_FIRST = 0.1
RETRY_MAX = 5.0

_SUBMIT = """
-- KEYS: chat stream, ready stream, active hash, count, seen
-- ARGV: chat key, payload, max_pending
if redis.call('EXISTS', KEYS[5]) == 1 then return 'seen' end
if tonumber(redis.call('GET', KEYS[4]) or '0') >= tonumber(ARGV[3]) then return false end
local id = redis.call('XADD', KEYS[1], '*', 'm', ARGV[2])
redis.call('INCR', KEYS[4])
redis.call('SET', KEYS[5], id, 'EX', SEEN_TTL)
if redis.call('HSETNX', KEYS[3], ARGV[1], id) == 1 then
  redis.call('XADD', KEYS[2], '*', 'chat', ARGV[1])
end
return id
""".replace("SEEN_TTL", str(SEEN_TTL))

_OWNED = """
local function owned(ready, group, worker, token)
  local p = redis.call('XPENDING', ready, group, token, token, 1)
  return #p > 0 and p[1][2] == worker
end
"""

_FINISH = (
    _OWNED
    + """
-- KEYS: ready, chat stream, active, count, out stream, session key, sent marker, attempts
-- ARGV: group, worker, token, message id or '', reply or '', chat key, session or ''
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) then return {-1} end
if ARGV[4] ~= '' then
  if redis.call('XDEL', KEYS[2], ARGV[4]) == 0 then return {-1} end
  redis.call('HDEL', KEYS[8], ARGV[4])
  if tonumber(redis.call('DECR', KEYS[4])) < 0 then redis.call('SET', KEYS[4], 0) end
  -- The message's first reply is the one sent: a second one (the same message queued twice by a
  -- platform that delivered it twice) is dropped here.
  if ARGV[5] ~= '' and redis.call('SET', KEYS[7], '1', 'NX', 'EX', SENT_TTL) then
    redis.call('XADD', KEYS[5], '*', 'r', ARGV[5])
  end
  if ARGV[7] ~= '' then redis.call('SET', KEYS[6], ARGV[7]) end
end
local nxt = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
if #nxt == 0 then
  redis.call('DEL', KEYS[2])
  redis.call('HDEL', KEYS[3], ARGV[6])
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
  redis.call('XDEL', KEYS[1], ARGV[3])
  return {0}
end
return {1, nxt[1][1], nxt[1][2][2]}
""".replace("SENT_TTL", str(SENT_TTL))
)

_RELEASE = (
    _OWNED
    + """
-- KEYS: ready; ARGV: group, worker, token, chat key
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
redis.call('XADD', KEYS[1], '*', 'chat', ARGV[4])
return 1
"""
)

_HEARTBEAT = (
    _OWNED
    + """
-- KEYS: ready, members; ARGV: group, worker, member, tokens...
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
local lost = {}
for i = 4, #ARGV do
  if owned(KEYS[1], ARGV[1], ARGV[2], ARGV[i]) then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
  else
    table.insert(lost, ARGV[i])
  end
end
return lost
"""
)


_HOLD = """
-- KEYS: the platform's lease; ARGV: member, ttl in ms
local holder = redis.call('GET', KEYS[1])
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return false
end
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return false
end
return holder
"""

_DROP = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, rexc.ResponseError):
        text = str(exc)
        return text.startswith(("NOGROUP", "LOADING", "MASTERDOWN", "TRYAGAIN", "BUSY"))
    return isinstance(exc, rexc.ConnectionError | rexc.TimeoutError | OSError)


class RedisBroker(Broker):
    """:class:`~kernel.gateway.broker.Broker` on one Redis server (``redis://``, ``rediss://``, ``unix://``)."""

    def __init__(self, settings: BrokerSettings, *, log: Any = None) -> None:
        self.settings = settings
        self._log = log
        p = settings.prefix
        self.k_ready, self.k_active, self.k_count, self.k_members = (
            f"{p}:ready",
            f"{p}:active",
            f"{p}:count",
            f"{p}:members",
        )
        self.k_attempts = f"{p}:attempts"  # message id -> how many times a chat was taken over with it
        self._redis = aioredis.from_url(
            settings.url,
            decode_responses=True,
            # The retries are ours (tenacity, in _call); the client's own would also turn a cancelled
            # read that races its timeout into a new read, and a stop would wait for it.
            retry=Retry(NoBackoff(), 0),
            socket_connect_timeout=5,
            socket_timeout=30,
            health_check_interval=15,
        )
        self._submit = self._redis.register_script(_SUBMIT)
        self._finish = self._redis.register_script(_FINISH)
        self._release = self._redis.register_script(_RELEASE)
        self._heartbeat = self._redis.register_script(_HEARTBEAT)
        self._hold = self._redis.register_script(_HOLD)
        self._drop = self._redis.register_script(_DROP)
        self._stopping = False
        self._claim_checked = 0.0
        self._epoch = 0
        self._pel_read: dict[str, int] = {}
        self.connected = False
        self.last_error: str | None = None
        # The consumer groups this broker uses, made again when Redis comes back without them.
        self._groups: set[str] = {f"{self.k_ready}\0{WORKERS}"}

    def k_chat(self, chat_key: str) -> str:
        return f"{self.settings.prefix}:chat:{chat_key}"

    def k_out(self, platform: str) -> str:
        return f"{self.settings.prefix}:out:{platform}"

    def k_sent(self, key: str) -> str:
        return f"{self.settings.prefix}:sent:{key}"

    def k_session(self, chat_key: str) -> str:
        return f"{self.settings.prefix}:session:{chat_key}"

    # -- connecting and retrying -------------------------------------------------------

    async def open(self) -> None:
        await self._call("connect", self._redis.ping)
        await self._call("create the streams", self._make_group, self.k_ready, WORKERS)

    async def _make_group(self, stream: str, group: str) -> None:
        try:
            await self._redis.xgroup_create(stream, group, id="0", mkstream=True)
        except rexc.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._groups.add(f"{stream}\0{group}")

    async def _regroup(self) -> None:
        """Make the groups again (after a Redis that lost its data)."""
        for name in list(self._groups):
            stream, _, group = name.partition("\0")
            await self._make_group(stream, group)

    def stop_retrying(self) -> None:
        self._stopping = True

    async def aclose(self) -> None:
        self._stopping = True
        await self._redis.aclose()

    def _masked(self, exc: BaseException) -> str:
        return mask_secrets(f"{type(exc).__name__}: {exc}", self.settings.url)

    async def _call(self, what: str, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """``await fn(*args)``, retried with backoff while Redis is unreachable (or lost its groups)."""
        if self.connected:
            # The common case costs no retry machinery: only a failure starts the retries.
            try:
                return await fn(*args, **kwargs)
            except Exception as exc:
                if not _retryable(exc):
                    raise
                self._epoch += 1
        return await self._retried(what, fn, *args, **kwargs)

    async def _retried(self, what: str, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            self._epoch += 1  # what was read on the lost connection is read again
            was = self.connected
            self.connected = False
            self.last_error = self._masked(exc) if exc else "unknown"
            # A group not made yet at start (the open is under way) is not news.
            starting = state.attempt_number == 1 and "NOGROUP" in self.last_error
            loud = was or state.attempt_number in (1, 10) or state.attempt_number % 50 == 0
            if self._log is not None and loud and not starting:
                self._log.warning(
                    "gateway_broker_retry",
                    broker=self.settings.masked_url,
                    doing=what,
                    attempt=state.attempt_number,
                    error=self.last_error,
                )

        retrying = tenacity.AsyncRetrying(
            wait=tenacity.wait_exponential(multiplier=RETRY_FIRST, max=RETRY_MAX),
            retry=tenacity.retry_if_exception(_retryable),
            stop=lambda _state: self._stopping,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if attempt.retry_state.attempt_number > 1:
                        await self._regroup()
                    result = await fn(*args, **kwargs)
        except Exception as exc:
            if _retryable(exc):
                raise BrokerUnavailable(
                    f"the broker {self.settings.masked_url} could not be reached to {what}: "
                    f"{self._masked(exc)}"
                ) from None
            raise
        if not self.connected:
            if self._log is not None and self.last_error is not None:
                self._log.info("gateway_broker_connected", broker=self.settings.masked_url)
            self.connected = True
            self.last_error = None
        return result

    # -- the ingress's side -------------------------------------------------------------

    async def submit(self, message: Inbound) -> bool:
        key = message.chat_key
        seen = f"{self.settings.prefix}:seen:{message.uid}"
        result = await self._call(
            "queue a message",
            self._submit,
            keys=[self.k_chat(key), self.k_ready, self.k_active, self.k_count, seen],
            args=[key, message.dumps(), self.settings.max_pending],
        )
        return result is not None

    async def replies(self, platform: str, *, block: float) -> list[tuple[str, Outbound | None]]:
        stream = self.k_out(platform)
        if f"{stream}\0{INGRESS}" not in self._groups:
            await self._call("create the reply stream", self._make_group, stream, INGRESS)
        entries: list[tuple[str, dict[str, str]]] = []
        if self._pel_read.get(stream) != self._epoch:
            # What this ingress read before (a restart, a lost connection) and did not finish.
            entries = await self._call("read replies", self._read, stream, INGRESS, platform, "0", 100, None)
            if not entries:
                self._pel_read[stream] = self._epoch
        if not entries:
            entries = await self._call(
                "read replies", self._read, stream, INGRESS, platform, ">", 100, int(block * 1000)
            )
        out: list[tuple[str, Outbound | None]] = []
        for entry, fields in entries:
            try:
                out.append((entry, Outbound.loads((fields or {}).get("r", ""))))
            except (ValueError, RecursionError) as exc:
                if self._log is not None:
                    self._log.warning(
                        "gateway_reply_unreadable", stream=stream, entry=entry, problem=str(exc)
                    )
                out.append((entry, None))
        return out

    async def _read(
        self, stream: str, group: str, consumer: str, start: str, count: int, block: int | None
    ) -> list[tuple[str, dict[str, str]]]:
        result = await self._redis.xreadgroup(group, consumer, {stream: start}, count=count, block=block)
        return _entries(result)

    async def was_sent(self, key: str) -> bool:
        return bool(await self._call("check a reply", self._redis.exists, self.k_sent(key)))

    async def sent(self, platform: str, entry: str) -> None:
        async def mark() -> None:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.xack(self.k_out(platform), INGRESS, entry)
                pipe.xdel(self.k_out(platform), entry)
                await pipe.execute()

        await self._call("mark a reply sent", mark)

    def k_ingress(self, platform: str) -> str:
        return f"{self.settings.prefix}:ingress:{platform}"

    async def hold_platform(self, platform: str, member: str, ttl: float) -> str | None:
        holder = await self._call(
            "hold the platform", self._hold, keys=[self.k_ingress(platform)], args=[member, int(ttl * 1000)]
        )
        return holder or None

    async def drop_platform(self, platform: str, member: str) -> None:
        await self._call("give the platform up", self._drop, keys=[self.k_ingress(platform)], args=[member])

    # -- the worker's side --------------------------------------------------------------

    async def take(self, worker: str, count: int, *, block: float) -> list[Lease]:
        tokens: list[tuple[str, dict[str, str]]] = []
        taken_over: set[str] = set()
        now = time.monotonic()
        if now - self._claim_checked >= min(self.settings.claim_after / 2, 5.0):
            self._claim_checked = now
            claimed = await self._call(
                "take over chats",
                self._redis.xautoclaim,
                self.k_ready,
                WORKERS,
                worker,
                min_idle_time=int(self.settings.claim_after * 1000),
                start_id="0-0",
                count=count,
            )
            tokens.extend(_entries([[self.k_ready, claimed[1]]]) if claimed else [])
            taken_over = {token for token, _fields in tokens}
            if tokens and self._log is not None:
                self._log.warning(
                    "gateway_chats_taken_over",
                    worker=worker,
                    chats=[fields.get("chat") for _, fields in tokens if fields],
                    claim_after=self.settings.claim_after,
                )
        if len(tokens) < count:
            tokens.extend(
                await self._call(
                    "take chats",
                    self._read,
                    self.k_ready,
                    WORKERS,
                    worker,
                    ">",
                    count - len(tokens),
                    max(1, int(block * 1000)) if not tokens else None,
                )
            )
        good = []
        for token, fields in tokens:
            chat = (fields or {}).get("chat")
            if chat:
                good.append((token, chat))
            else:  # not a token this broker wrote: acknowledged, not served
                await self._call("drop a bad token", self._redis.xack, self.k_ready, WORKERS, token)
        if not good:
            return []

        async def heads() -> list[Any]:
            # Each chat's first message and its session, in one round trip.
            async with self._redis.pipeline(transaction=False) as pipe:
                for _token, chat in good:
                    pipe.xrange(self.k_chat(chat), "-", "+", count=1)
                    pipe.get(self.k_session(chat))
                return await pipe.execute()

        found = await self._call("read the chats' messages", heads)
        leases = []
        for index, (token, chat) in enumerate(good):
            head, session = found[2 * index], found[2 * index + 1]
            message = self._message(chat, head[0][0], head[0][1].get("m", "")) if head else None
            leases.append(Lease(token, chat, message, session=session, prefetched=True))
        again = [lease for lease in leases if lease.token in taken_over and lease.message is not None]
        if again:

            async def count() -> list[Any]:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for lease in again:
                        assert lease.message is not None
                        pipe.hincrby(self.k_attempts, lease.message.broker_id, 1)
                    return await pipe.execute()

            for lease, before in zip(again, await self._call("count the attempts", count), strict=True):
                lease.attempts = 1 + int(before)
        return leases

    def _message(self, chat: str, entry: str, payload: str) -> Inbound:
        try:
            return Inbound.loads(payload, broker_id=entry)
        except (ValueError, TypeError, RecursionError) as exc:
            if self._log is not None:
                self._log.warning("gateway_message_unreadable", chat=chat, entry=entry, problem=str(exc))
            platform, _, chat_id = chat.partition(":")
            broken = Inbound(platform=platform, chat_id=chat_id, text="", broker_id=entry)
            broken.message_type = "unreadable"
            return broken

    async def finish(
        self,
        worker: str,
        lease: Lease,
        reply: Outbound | None,
        session: tuple[str, str] | None = None,
    ) -> Inbound | object | None:
        message = lease.message
        chat = lease.chat_key
        result = await self._call(
            "hand a reply back",
            self._finish,
            keys=[
                self.k_ready,
                self.k_chat(chat),
                self.k_active,
                self.k_count,
                self.k_out(reply.platform if reply is not None else chat.partition(":")[0]),
                self.k_session(session[0] if session is not None else chat),
                self.k_sent(reply.key if reply is not None else ""),
                self.k_attempts,
            ],
            args=[
                WORKERS,
                worker,
                lease.token,
                message.broker_id if message is not None else "",
                reply.dumps() if reply is not None else "",
                chat,
                session[1] if session is not None else "",
            ],
        )
        state = int(result[0])
        if state < 0:
            return STALE
        if state == 0:
            return None
        return self._message(chat, result[1], result[2])

    async def release(self, worker: str, lease: Lease) -> None:
        await self._call(
            "give a chat back",
            self._release,
            keys=[self.k_ready],
            args=[WORKERS, worker, lease.token, lease.chat_key],
        )

    async def heartbeat(self, member: Member, leases: list[Lease]) -> set[str]:
        member.heartbeat = time.time()
        lost = await self._call(
            "send a heartbeat",
            self._heartbeat,
            keys=[self.k_ready, self.k_members],
            args=[WORKERS, member.id, member.dumps(), *[lease.token for lease in leases]],
        )
        return set(lost or [])

    async def leave(self, member: Member) -> None:
        await self._call("leave", self._redis.hdel, self.k_members, member.id)

    # -- status ---------------------------------------------------------------------------

    async def status(self) -> dict[str, Any]:
        settings = self.settings
        info: dict[str, Any] = {
            "url": settings.masked_url,
            "prefix": settings.prefix,
            "claim_after": settings.claim_after,
            "max_pending": settings.max_pending,
            "connected": False,
            "error": None,
            "workers": [],
            "ingresses": [],
            "pending": None,
            "queued": None,
        }
        try:
            async with asyncio.timeout(5):
                await self._redis.ping()
                members = await self._redis.hgetall(self.k_members)
                count = int(await self._redis.get(self.k_count) or 0)
                try:
                    pending = int((await self._redis.xpending(self.k_ready, WORKERS))["pending"])
                except rexc.ResponseError:  # no group yet: nothing was ever taken
                    pending = 0
        except (Exception, TimeoutError) as exc:
            info["error"] = self._masked(exc)
            return info
        info["connected"] = True
        info["pending"] = pending
        info["queued"] = max(count - pending, 0)
        now = time.time()
        stale_after = max(3 * settings.claim_after, 30.0)
        for raw in members.values():
            try:
                member = json.loads(raw)
                row = {
                    "id": str(member["id"]),
                    "role": str(member.get("role", "")),
                    "host": str(member.get("host", "")),
                    "pid": int(member.get("pid", 0)),
                    "concurrency": int(member.get("concurrency", 0)),
                    "busy": int(member.get("busy", 0)),
                    "started": float(member.get("started", 0)),
                    "last_heartbeat": float(member.get("heartbeat", 0)),
                }
            except (ValueError, TypeError, KeyError):
                continue
            row["alive"] = now - row["last_heartbeat"] <= stale_after
            info["ingresses" if row["role"] == "ingress" else "workers"].append(row)
        for rows in (info["workers"], info["ingresses"]):
            rows.sort(key=lambda r: (r["host"], r["pid"], r["id"]))
        return info

    def session_store(self) -> SessionStore:
        return RedisSessionStore(self)


class RedisSessionStore(SessionStore):
    """The chats' states as strings in the broker's Redis (``P:session:<chat>``)."""

    kind = "redis"
    #: A worker hands its state to :meth:`RedisBroker.finish`, saved with the reply in one step.
    atomic_with_replies = True

    def __init__(self, broker: RedisBroker) -> None:
        self.broker = broker

    def describe(self) -> dict[str, Any]:
        return {"store": self.kind, "url": self.broker.settings.masked_url}

    async def load(self, key: str) -> SessionState | None:
        broker = self.broker
        where = broker.k_session(key)
        raw = await broker._call("read a session", broker._redis.get, where)
        if raw is None:
            return None
        try:
            return SessionState.loads(raw)
        except (ValueError, RecursionError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        kept = f"{broker.settings.prefix}:session-unreadable:{key}:{int(time.time())}"
        await broker._call("keep an unreadable session aside", broker._redis.rename, where, kept)
        _warn_unreadable(broker._log, broker.settings.masked_url, where, problem, kept)
        return None

    async def save(self, key: str, state: SessionState) -> None:
        try:
            text = state.dumps()
        except SessionStoreError:
            raise
        broker = self.broker
        await broker._call("save a session", broker._redis.set, broker.k_session(key), text)


def _entries(result: Any) -> list[tuple[str, dict[str, str]]]:
    """The entries of an ``XREADGROUP`` / ``XAUTOCLAIM`` answer, RESP2 or RESP3 shaped."""
    if not result:
        return []
    streams = result.items() if isinstance(result, dict) else result
    entries: list[tuple[str, dict[str, str]]] = []
    for item in streams:
        rows = item[1]
        if rows and isinstance(rows[0], list) and rows[0] and isinstance(rows[0][0], list | tuple):
            rows = rows[0]  # RESP3 wraps a stream's entries once more
        for row in rows or []:
            entry, fields = row[0], row[1]
            if isinstance(fields, list):
                fields = dict(zip(fields[::2], fields[1::2], strict=False))
            entries.append((entry, fields or {}))
    return entries
