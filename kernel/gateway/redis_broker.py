"""The gateway's broker on Redis: Streams with consumer groups for the work, strings for the sessions.

Keys, each starting with ``gateway.broker.prefix`` (``P``):

* ``P:chat:<platform>:<chat>`` — a stream per chat: its messages not yet answered, oldest first.
* ``P:ready`` — a stream of chat tokens, read by the consumer group ``workers``.  A chat has one token
  while it has messages (``P:active`` says which chats have one); the worker whose pending entry it is
  holds the chat and answers its messages one by one.  A token left unacknowledged ``claim_after``
  seconds without its holder's heartbeat is taken over (``XAUTOCLAIM``).
* ``P:out:<platform>`` — the replies for the ingress holding that platform (consumer group ``ingress``);
  ``P:sent:<platform>:<chat>:<message>`` marks a message answered (a day), so a second reply to it is
  dropped (the platform and chat escaped by :func:`~kernel.gateway.broker.key_part`).
* ``P:seen:<platform>:<chat>:<message>`` — a message id queued (a day): delivered again, it is not
  queued again; ``P:answer:<...>`` keeps its first reply (an hour) to send again to such a duplicate.
* ``P:count`` — messages accepted and not yet answered (``max_pending`` bounds it);
  ``P:members`` — the gateway processes and their heartbeats; ``P:session:<platform>:<chat>`` — the
  chats' states (``gateway.sessions.store: redis``).

A key of a type the gateway never writes there is moved to ``P:quarantine:<key>:<time>`` (logged), and
the step done again; a message whose payload names another chat than its stream's is not answered.

Every step that must not be half done (queue a message and schedule its chat; hand a reply back,
save the session, acknowledge the message and take the next one) is one Lua script, atomic in Redis.
Run Redis with ``appendonly yes`` for nothing accepted to survive a Redis restart (docs/scale-out.md).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis
import tenacity
from redis import exceptions as rexc
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.client import NEVER_DECODE

from .broker import (
    MAX_CHAT_ID,
    STALE,
    Broker,
    BrokerSettings,
    BrokerUnavailable,
    Inbound,
    Lease,
    Member,
    Outbound,
    chat_key,
    key_part,
    mask_secrets,
    split_chat_key,
)
from .sessions import SessionState, SessionStore, SessionStoreError, _warn_unreadable, read_json_object

T = TypeVar("T")

WORKERS = "workers"
INGRESS = "ingress"
#: How long a message stays marked answered (the window in which a late second reply is dropped).
SENT_TTL = 24 * 3600
#: How long a message id stays known once queued (``P:seen:<message>``): delivered again within it,
#: the message is not queued again (one turn, one reply per message id).
SEEN_TTL = SENT_TTL
#: How long a message's first reply is kept (``P:answer:<message>``, at most a reply record) to be
#: sent again to a duplicate delivery of the message; later, a duplicate gets nothing (logged).
ANSWER_TTL = 3600
#: Undelivered replies kept per platform (P:undelivered:<platform>, the oldest trimmed first).
UNDELIVERED_KEPT = 10_000
RETRY_FIRST = 0.1
RETRY_MAX = 5.0

#: Checks the types of a script's keys before it writes anything: a key of another type (written by
#: someone else) makes the script fail with MISTYPED, untouched, for the broker to set it aside.
_TYPED = """
local function mistyped(kinds)
  for i, kind in ipairs(kinds) do
    local found = redis.call('TYPE', KEYS[i])['ok']
    if kind ~= '' and found ~= 'none' and found ~= kind then
      return redis.error_reply('MISTYPED ' .. KEYS[i] .. ' is a ' .. found .. ', not a ' .. kind)
    end
  end
  return nil
end
"""

#: The messages really queued: the lengths of the streams of the chats that have a token (``P:count``
#: is set to it).  The counter is repaired with it whenever it reads full, missing or garbled.
_RECOUNT = """
local function recount(active, count, chats)
  local n = 0
  local names = redis.pcall('HKEYS', active)
  if type(names) == 'table' and not names['err'] then
    for _, chat in ipairs(names) do
      local len = redis.pcall('XLEN', chats .. chat)
      if type(len) == 'number' then n = n + len end
    end
  end
  redis.call('SET', count, n)
  return n
end
"""

_SUBMIT = (
    _TYPED
    + _RECOUNT
    + """
-- KEYS: chat stream, ready stream, active hash, count, seen, answer, out stream
-- ARGV: chat key, payload, max_pending, the chat streams' key prefix, '1' to send an answer again
local bad = mistyped({'stream', 'stream', 'hash', 'string', 'string', 'string', 'stream'})
if bad then return bad end
if redis.call('EXISTS', KEYS[5]) == 1 then
  -- A duplicate: answered, its first reply goes out again (a new entry, not through P:sent); in
  -- progress, the reply to come answers it.
  local answer = redis.call('GET', KEYS[6])
  if answer and ARGV[5] == '1' then
    redis.call('XADD', KEYS[7], '*', 'r', answer)
    return 'resent'
  end
  return 'seen'
end
local count = tonumber(redis.call('GET', KEYS[4]) or '')
if count == nil or count >= tonumber(ARGV[3]) then count = recount(KEYS[3], KEYS[4], ARGV[4]) end
if count >= tonumber(ARGV[3]) then return false end
local id = redis.call('XADD', KEYS[1], '*', 'm', ARGV[2])
redis.call('INCR', KEYS[4])
redis.call('SET', KEYS[5], id, 'EX', SEEN_TTL)
if redis.call('HSETNX', KEYS[3], ARGV[1], id) == 1 then
  redis.call('XADD', KEYS[2], '*', 'chat', ARGV[1])
end
return id
""".replace("SEEN_TTL", str(SEEN_TTL))
)

_COUNT = (
    _RECOUNT
    + """
-- KEYS: active, count; ARGV: the chat streams' key prefix
return recount(KEYS[1], KEYS[2], ARGV[1])
"""
)

_OWNED = """
local function owned(ready, group, worker, token)
  local p = redis.call('XPENDING', ready, group, token, token, 1)
  return #p > 0 and p[1][2] == worker
end
"""

_FINISH = (
    _OWNED
    + _TYPED
    + """
-- KEYS: ready, chat stream, active, count, out stream, session key, sent marker, attempts, answer
-- ARGV: group, worker, token, message id or '', reply or '', chat key, session or ''
local bad = mistyped({'stream', 'stream', 'hash', 'string', 'stream', 'string', 'string', 'hash', 'string'})
if bad then return bad end
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) then return {-1} end
if ARGV[4] ~= '' then
  if redis.call('XDEL', KEYS[2], ARGV[4]) == 0 then return {-1} end
  redis.call('HDEL', KEYS[8], ARGV[4] .. ' ' .. ARGV[6])
  local count = tonumber(redis.call('GET', KEYS[4]) or '')
  if count == nil then
    redis.call('DEL', KEYS[4])  -- garbled: the next submit counts again
  elseif count > 0 then
    redis.call('DECR', KEYS[4])
  else
    redis.call('SET', KEYS[4], 0)
  end
  -- The message's first reply is the one sent: a second one (the same message queued twice by a
  -- platform that delivered it twice) is dropped here.
  if ARGV[5] ~= '' and redis.call('SET', KEYS[7], '1', 'NX', 'EX', SENT_TTL) then
    redis.call('XADD', KEYS[5], '*', 'r', ARGV[5])
    redis.call('SET', KEYS[9], ARGV[5], 'EX', ANSWER_TTL)  -- for a duplicate delivery
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
""".replace("SENT_TTL", str(SENT_TTL)).replace("ANSWER_TTL", str(ANSWER_TTL))
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

_FORGET = """
-- KEYS: members; ARGV: member, its record as read (a member that beat since is kept)
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
"""

#: The largest member record read back (its JSON, in bytes), and the most members read.
MAX_MEMBER_BYTES = 64 * 1024
MAX_MEMBERS = 1000
#: The longest member id or problem shown by ``gateway status`` (characters).
SHOWN = 200


def member_row(record: bytes | str) -> dict[str, Any]:
    """A member record as ``gateway status`` shows it (no ``id``); ``ValueError`` saying what is wrong."""
    if isinstance(record, bytes):
        try:
            record = record.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("not UTF-8 text") from None
    data = read_json_object(record, MAX_MEMBER_BYTES)
    row: dict[str, Any] = {}
    for name in ("role", "host"):
        value = data.get(name, "")
        if not isinstance(value, str):
            raise ValueError(f"'{name}' is not a string")
        row[name] = value[:SHOWN]
    for name in ("pid", "concurrency", "busy"):
        value = data.get(name, 0)
        if type(value) is not int or not 0 <= value < 2**63:
            raise ValueError(f"'{name}' is not a whole number")
        row[name] = value
    for name, shown in (("started", "started"), ("heartbeat", "last_heartbeat")):
        value = data.get(name, 0)
        if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
            raise ValueError(f"'{name}' is not a time")
        row[shown] = float(value)
    error = data.get("error")
    row["error"] = str(error)[:500] if error else None
    return row


def _shown(value: bytes | str) -> str:
    text = value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."


def _mistyped(exc: BaseException) -> bool:
    """Whether Redis refused a command (or a script refused to start) for a key of the wrong type."""
    if not isinstance(exc, rexc.ResponseError):
        return False
    text = str(exc)
    return text.startswith("MISTYPED") or "WRONGTYPE" in text


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
        self._count = self._redis.register_script(_COUNT)
        self._finish = self._redis.register_script(_FINISH)
        self._release = self._redis.register_script(_RELEASE)
        self._heartbeat = self._redis.register_script(_HEARTBEAT)
        self._hold = self._redis.register_script(_HOLD)
        self._drop = self._redis.register_script(_DROP)
        self._forget = self._redis.register_script(_FORGET)
        self._forgot_at = 0.0
        self._told: set[str] = set()  # what was logged about the members already (once each)
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
        return f"{self.settings.prefix}:out:{key_part(platform)}"

    def k_sent(self, key: str) -> str:
        return f"{self.settings.prefix}:sent:{key}"

    def k_answer(self, key: str) -> str:
        return f"{self.settings.prefix}:answer:{key}"

    def k_session(self, chat_key: str) -> str:
        return f"{self.settings.prefix}:session:{chat_key}"

    # -- connecting and retrying -------------------------------------------------------

    async def open(self) -> None:
        await self._call("connect", self._redis.ping)
        await self._typed(
            "create the streams", {self.k_ready: "stream"}, self._make_group, self.k_ready, WORKERS
        )

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

    async def _typed(
        self, what: str, kinds: dict[str, str], fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any
    ) -> T:
        """:meth:`_call`; when Redis refuses it for a key of the wrong type, the keys of ``kinds`` (key ->
        its Redis type) that are not what the gateway writes are set aside, and it is called again."""
        try:
            return await self._call(what, fn, *args, **kwargs)
        except rexc.ResponseError as exc:
            if not _mistyped(exc) or not await self._set_aside(kinds, what):
                raise
        return await self._call(what, fn, *args, **kwargs)

    async def _set_aside(self, kinds: dict[str, str], doing: str) -> bool:
        """Move each key of ``kinds`` holding another type of value to ``P:quarantine:<key>:<ns>`` (kept
        for inspection, logged once: the key is gone); whether one was moved."""
        keys = list(kinds)

        async def types() -> list[Any]:
            async with self._redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.type(key)
                return await pipe.execute()

        moved = False
        for key, found in zip(keys, await self._call("check the keys' types", types), strict=True):
            if found in ("none", kinds[key]):
                continue
            prefix = self.settings.prefix
            kept = f"{prefix}:quarantine:{key.removeprefix(prefix + ':')}:{time.time_ns()}"
            await self._call("set a record aside", self._redis.rename, key, kept)
            moved = True
            if self._log is not None:
                self._log.warning(
                    "gateway_record_set_aside",
                    key=key,
                    found=found,
                    expected=kinds[key],
                    kept_in=kept,
                    doing=doing,
                    fix=f"it was not written by the gateway: inspect {kept!r}, then delete it",
                )
            if key == self.k_ready:
                await self._reschedule()
        if moved:
            await self._regroup()
        return moved

    async def _reschedule(self) -> None:
        """A new token for every chat that has one (after ``P:ready`` itself was set aside)."""
        await self._call("make the ready stream again", self._make_group, self.k_ready, WORKERS)
        chats = await self._call("list the chats", self._redis.hkeys, self.k_active)
        for chat in chats:
            await self._call("reschedule a chat", self._redis.xadd, self.k_ready, {"chat": chat})

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

    async def submit(self, message: Inbound, *, resend: bool = True) -> bool:
        key = message.chat_key
        # One key per message id (the uid when the platform gave none): a message the platform
        # delivers again, or a spool queued again after a kill, is not queued a second time; a
        # delivery again of an answered one gets its first reply again (``resend``).
        seen = f"{self.settings.prefix}:seen:{message.reply_key}"
        keys = [
            self.k_chat(key),
            self.k_ready,
            self.k_active,
            self.k_count,
            seen,
            self.k_answer(message.reply_key),
            self.k_out(message.platform),
        ]
        result = await self._typed(
            "queue a message",
            dict(
                zip(keys, ("stream", "stream", "hash", "string", "string", "string", "stream"), strict=True)
            ),
            self._submit,
            keys=keys,
            args=[
                key,
                message.dumps(),
                self.settings.max_pending,
                f"{self.settings.prefix}:chat:",
                "1" if resend else "",
            ],
        )
        if result in ("seen", "resent") and self._log is not None:
            self._log.info(
                "gateway_message_duplicate",
                platform=message.platform,
                chat=message.chat_id[:MAX_CHAT_ID],
                message=(message.message_id or message.uid)[:MAX_CHAT_ID],
                detail="its first reply sent again"
                if result == "resent"
                else "queued already: no second turn; the first reply answers it",
            )
        return result is not None

    async def replies(self, platform: str, *, block: float) -> list[tuple[str, Outbound | None]]:
        stream = self.k_out(platform)
        if f"{stream}\0{INGRESS}" not in self._groups:
            await self._typed(
                "create the reply stream", {stream: "stream"}, self._make_group, stream, INGRESS
            )
        entries: list[tuple[str, dict[str, str]]] = []
        if self._pel_read.get(stream) != self._epoch:
            # What this ingress read before (a restart, a lost connection) and did not finish.
            entries = await self._typed(
                "read replies", {stream: "stream"}, self._read, stream, INGRESS, platform, "0", 100, None
            )
            if not entries:
                self._pel_read[stream] = self._epoch
        if not entries:
            entries = await self._typed(
                "read replies",
                {stream: "stream"},
                self._read,
                stream,
                INGRESS,
                platform,
                ">",
                100,
                int(block * 1000),
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

    def k_undelivered(self, platform: str) -> str:
        return f"{self.settings.prefix}:undelivered:{key_part(platform)}"

    async def set_aside_reply(self, platform: str, entry: str, reply: Outbound, error: str) -> None:
        async def move() -> None:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.xadd(
                    self.k_undelivered(platform),
                    {"r": reply.dumps(), "error": error[:2000], "at": str(time.time())},
                    maxlen=UNDELIVERED_KEPT,
                    approximate=True,
                )
                pipe.xack(self.k_out(platform), INGRESS, entry)
                pipe.xdel(self.k_out(platform), entry)
                await pipe.execute()

        stream = self.k_undelivered(platform)
        await self._typed("set an undelivered reply aside", {stream: "stream"}, move)

    def k_ingress(self, platform: str) -> str:
        return f"{self.settings.prefix}:ingress:{key_part(platform)}"

    async def hold_platform(self, platform: str, member: str, ttl: float) -> str | None:
        key = self.k_ingress(platform)
        holder = await self._typed(
            "hold the platform", {key: "string"}, self._hold, keys=[key], args=[member, int(ttl * 1000)]
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
            claimed = await self._typed(
                "take over chats",
                {self.k_ready: "stream"},
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
                await self._typed(
                    "take chats",
                    {self.k_ready: "stream"},
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
            if isinstance(chat, str) and split_chat_key(chat) is not None:
                good.append((token, chat))
            else:  # not a token this broker wrote: acknowledged and removed, not served
                await self._drop_token(token, chat)
        if not good:
            return []

        async def heads() -> list[Any]:
            # Each chat's first message and its session, in one round trip.
            async with self._redis.pipeline(transaction=False) as pipe:
                for _token, chat in good:
                    pipe.xrange(self.k_chat(chat), "-", "+", count=1)
                    pipe.get(self.k_session(chat))
                return await pipe.execute(raise_on_error=False)

        found = await self._call("read the chats' messages", heads)
        for index, (_token, chat) in enumerate(good):
            for offset, key, kind in ((0, self.k_chat(chat), "stream"), (1, self.k_session(chat), "string")):
                if isinstance(found[2 * index + offset], Exception):
                    if not _mistyped(found[2 * index + offset]):
                        raise found[2 * index + offset]
                    await self._set_aside({key: kind}, "read the chats' messages")
                    found[2 * index + offset] = [] if offset == 0 else None
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
                        pipe.hincrby(self.k_attempts, f"{lease.message.broker_id} {lease.chat_key}", 1)
                    return await pipe.execute()

            counted = await self._typed("count the attempts", {self.k_attempts: "hash"}, count)
            for lease, before in zip(again, counted, strict=True):
                lease.attempts = 1 + int(before)
        return leases

    async def _drop_token(self, token: str, chat: Any) -> None:
        if self._log is not None:
            self._log.warning(
                "gateway_token_set_aside",
                stream=self.k_ready,
                entry=token,
                chat=str(chat)[:200],
                detail="not a chat token of the gateway's: removed, not served",
            )

        async def drop() -> None:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.xack(self.k_ready, WORKERS, token)
                pipe.xdel(self.k_ready, token)
                await pipe.execute()

        await self._call("drop a bad token", drop)

    def _message(self, chat: str, entry: Any, payload: Any) -> Inbound:
        """The message of the chat ``chat``'s stream entry; one marked ``unreadable`` (answered with
        nothing, acknowledged) when the payload is not the kernel's or names another chat."""
        platform, chat_id = split_chat_key(chat) or ("", chat)
        try:
            message = Inbound.loads(payload, broker_id=entry)
        except (ValueError, TypeError, RecursionError) as exc:
            if self._log is not None:
                self._log.warning("gateway_message_unreadable", chat=chat, entry=entry, problem=str(exc))
        else:
            if (message.platform, message.chat_id) == (platform, chat_id):
                return message
            if self._log is not None:
                self._log.warning(
                    "gateway_message_foreign",
                    chat=chat,
                    entry=entry,
                    names=chat_key(message.platform, message.chat_id)[:200],
                    detail="a message in this chat's queue names another chat: set aside, not answered",
                )
        broken = Inbound(platform=platform, chat_id=chat_id, text="", broker_id=str(entry))
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
        # The stream's chat is the one answered and whose session is written, whatever a payload says.
        keys = [
            self.k_ready,
            self.k_chat(chat),
            self.k_active,
            self.k_count,
            self.k_out((split_chat_key(chat) or (chat, ""))[0]),
            self.k_session(chat),
            self.k_sent(reply.key if reply is not None else ""),
            self.k_attempts,
            self.k_answer(reply.key if reply is not None else ""),
        ]
        result = await self._typed(
            "hand a reply back",
            dict(
                zip(
                    keys,
                    ("stream", "stream", "hash", "string", "stream", "string", "string", "hash", "string"),
                    strict=False,
                )
            ),
            self._finish,
            keys=keys,
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
        await self._typed(
            "give a chat back",
            {self.k_ready: "stream"},
            self._release,
            keys=[self.k_ready],
            args=[WORKERS, worker, lease.token, lease.chat_key],
        )

    async def heartbeat(self, member: Member, leases: list[Lease]) -> set[str]:
        member.heartbeat = time.time()
        lost = await self._typed(
            "send a heartbeat",
            {self.k_ready: "stream", self.k_members: "hash"},
            self._heartbeat,
            keys=[self.k_ready, self.k_members],
            args=[WORKERS, member.id, member.dumps(), *[lease.token for lease in leases]],
        )
        forget = self.settings.forget_seconds
        if time.monotonic() - self._forgot_at >= min(forget / 4, 60.0):
            self._forgot_at = time.monotonic()
            try:
                async with asyncio.timeout(5):
                    await self._forget_silent(await self._read_members())
            except (Exception, TimeoutError) as exc:  # the heartbeat was sent: pruning waits for the next
                self._tell("prune", "gateway_members_not_pruned", error=self._masked(exc))
        return set(lost or [])

    async def leave(self, member: Member) -> None:
        await self._typed("leave", {self.k_members: "hash"}, self._redis.hdel, self.k_members, member.id)

    # -- the members -----------------------------------------------------------------------

    def _tell(self, once: str, event: str, **fields: Any) -> None:
        if self._log is not None and once not in self._told:
            self._told.add(once)
            self._log.warning(event, **fields)

    async def _read_members(self) -> tuple[dict[bytes, bytes], str | None]:
        """Up to :data:`MAX_MEMBERS` member records, as bytes (a record need not be UTF-8), and what
        is wrong with the members' key itself (``None``: nothing)."""
        found = await self._redis.type(self.k_members)
        if found not in ("hash", "none"):
            return {}, f"{self.k_members} is a {found}, not a hash (not written by the gateway)"
        records: dict[bytes, bytes] = {}
        cursor: Any = 0
        while True:
            cursor, chunk = await self._redis.execute_command(
                "HSCAN", self.k_members, cursor, "COUNT", 200, **{NEVER_DECODE: True}
            )
            records.update(chunk)
            if int(cursor) == 0:
                return records, None
            if len(records) >= MAX_MEMBERS:
                return records, f"more than {MAX_MEMBERS} members: the first {len(records)} shown"

    async def _forget_silent(self, members: tuple[dict[bytes, bytes], str | None]) -> list[str]:
        """Remove the members silent for longer than ``forget_after`` (logged once, by whoever removes
        them); the ids removed.  A record that cannot be read is left for a person to look at."""
        forget, now, gone = self.settings.forget_seconds, time.time(), []
        for key, record in members[0].items():
            try:
                row = member_row(record)
            except (ValueError, RecursionError):
                continue
            if now - row["last_heartbeat"] <= forget:
                continue
            if await self._forget(keys=[self.k_members], args=[key, record]):
                name = _shown(key)
                gone.append(name)
                if self._log is not None:
                    self._log.warning(
                        "gateway_member_pruned",
                        member=name,
                        role=row["role"],
                        host=row["host"],
                        pid=row["pid"],
                        silent_for=round(now - row["last_heartbeat"], 1),
                        forget_after=forget,
                    )
        return gone

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
            "forget_after": settings.forget_seconds,
            "unreadable": [],
            "pruned": [],
        }
        try:
            async with asyncio.timeout(5):
                await self._redis.ping()
                members = await self._read_members()
                info["pruned"] = await self._forget_silent(members)
                # Counted again from the chats' streams: what vanished behind the gateway's back is not.
                count = int(
                    await self._count(
                        keys=[self.k_active, self.k_count], args=[f"{self.settings.prefix}:chat:"]
                    )
                )
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
        unreadable, pruned = info["unreadable"], set(info["pruned"])
        if members[1] is not None:
            unreadable.append({"key": self.k_members, "id": None, "unreadable": members[1]})
        for key, record in members[0].items():
            name = _shown(key)
            if name in pruned:
                continue
            try:
                row = {"id": name, **member_row(record)}
            except (ValueError, RecursionError) as exc:
                unreadable.append({"key": self.k_members, "id": name, "unreadable": _shown(str(exc))})
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
