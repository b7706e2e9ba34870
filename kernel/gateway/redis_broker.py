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
import time
from typing import Any

from redis import exceptions as rexc
from redis.client import NEVER_DECODE

from .broker import (
    MAX_CHAT_ID,
    STALE,
    Broker,
    BrokerSettings,
    Inbound,
    Lease,
    Member,
    Outbound,
    key_part,
    split_chat_key,
)
from .redis_link import RedisLink
from .redis_records import MAX_MEMBERS, entries, member_row, mistyped, read_message, shown
from .redis_scripts import (
    COUNT,
    DROP,
    FINISH,
    FORGET,
    HEARTBEAT,
    HOLD,
    INGRESS,
    RELEASE,
    SUBMIT,
    UNDELIVERED_KEPT,
    WORKERS,
)
from .redis_sessions import RedisSessionStore
from .sessions import SessionStore

__all__ = ["INGRESS", "WORKERS", "RedisBroker", "RedisSessionStore"]


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
        self.link = RedisLink(settings, log=log)
        self._redis = self.link.redis
        self._submit = self._redis.register_script(SUBMIT)
        self._count = self._redis.register_script(COUNT)
        self._finish = self._redis.register_script(FINISH)
        self._release = self._redis.register_script(RELEASE)
        self._heartbeat = self._redis.register_script(HEARTBEAT)
        self._hold = self._redis.register_script(HOLD)
        self._drop = self._redis.register_script(DROP)
        self._forget = self._redis.register_script(FORGET)
        self._forgot_at = 0.0
        self._told: set[str] = set()  # what was logged about the members already (once each)
        self._claim_checked = 0.0
        self._pel_read: dict[str, int] = {}
        self.link.groups.add(f"{self.k_ready}\0{WORKERS}")
        # P:ready set aside: every chat that has messages gets a token again.
        self.link.after_set_aside[self.k_ready] = self._reschedule

    @property
    def connected(self) -> bool:
        """Whether Redis answered the last call (the link's own state)."""
        return self.link.connected

    @connected.setter
    def connected(self, value: bool) -> None:
        self.link.connected = value

    @property
    def last_error(self) -> str | None:
        """Why Redis did not answer, while it does not."""
        return self.link.last_error

    @last_error.setter
    def last_error(self, value: str | None) -> None:
        self.link.last_error = value

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

    def stop_retrying(self) -> None:
        self.link.stop_retrying()

    async def aclose(self) -> None:
        await self.link.aclose()

    async def open(self) -> None:
        await self.link.call("connect", self._redis.ping)
        await self.link.typed(
            "create the streams", {self.k_ready: "stream"}, self.link.make_group, self.k_ready, WORKERS
        )

    async def _reschedule(self) -> None:
        """A new token for every chat that has one (after ``P:ready`` itself was set aside)."""
        await self.link.call("make the ready stream again", self.link.make_group, self.k_ready, WORKERS)
        chats = await self.link.call("list the chats", self._redis.hkeys, self.k_active)
        for chat in chats:
            await self.link.call("reschedule a chat", self._redis.xadd, self.k_ready, {"chat": chat})

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
        result = await self.link.typed(
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
        if f"{stream}\0{INGRESS}" not in self.link.groups:
            await self.link.typed(
                "create the reply stream", {stream: "stream"}, self.link.make_group, stream, INGRESS
            )
        entries: list[tuple[str, dict[str, str]]] = []
        if self._pel_read.get(stream) != self.link.epoch:
            # What this ingress read before (a restart, a lost connection) and did not finish.
            entries = await self.link.typed(
                "read replies", {stream: "stream"}, self._read, stream, INGRESS, platform, "0", 100, None
            )
            if not entries:
                self._pel_read[stream] = self.link.epoch
        if not entries:
            entries = await self.link.typed(
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
        return entries(result)

    async def was_sent(self, key: str) -> bool:
        return bool(await self.link.call("check a reply", self._redis.exists, self.k_sent(key)))

    async def sent(self, platform: str, entry: str) -> None:
        async def mark() -> None:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.xack(self.k_out(platform), INGRESS, entry)
                pipe.xdel(self.k_out(platform), entry)
                await pipe.execute()

        await self.link.call("mark a reply sent", mark)

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
        await self.link.typed("set an undelivered reply aside", {stream: "stream"}, move)

    def k_ingress(self, platform: str) -> str:
        return f"{self.settings.prefix}:ingress:{key_part(platform)}"

    async def hold_platform(self, platform: str, member: str, ttl: float) -> str | None:
        key = self.k_ingress(platform)
        holder = await self.link.typed(
            "hold the platform", {key: "string"}, self._hold, keys=[key], args=[member, int(ttl * 1000)]
        )
        return holder or None

    async def drop_platform(self, platform: str, member: str) -> None:
        await self.link.call(
            "give the platform up", self._drop, keys=[self.k_ingress(platform)], args=[member]
        )

    # -- the worker's side --------------------------------------------------------------

    async def take(self, worker: str, count: int, *, block: float) -> list[Lease]:
        tokens: list[tuple[str, dict[str, str]]] = []
        taken_over: set[str] = set()
        now = time.monotonic()
        if now - self._claim_checked >= min(self.settings.claim_after / 2, 5.0):
            self._claim_checked = now
            claimed = await self.link.typed(
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
            tokens.extend(entries([[self.k_ready, claimed[1]]]) if claimed else [])
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
                await self.link.typed(
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

        found = await self.link.call("read the chats' messages", heads)
        for index, (_token, chat) in enumerate(good):
            for offset, key, kind in ((0, self.k_chat(chat), "stream"), (1, self.k_session(chat), "string")):
                if isinstance(found[2 * index + offset], Exception):
                    if not mistyped(found[2 * index + offset]):
                        raise found[2 * index + offset]
                    await self.link.set_aside({key: kind}, "read the chats' messages")
                    found[2 * index + offset] = [] if offset == 0 else None
        leases = []
        for index, (token, chat) in enumerate(good):
            head, session = found[2 * index], found[2 * index + 1]
            message = read_message(chat, head[0][0], head[0][1].get("m", ""), self._log) if head else None
            leases.append(Lease(token, chat, message, session=session, prefetched=True))
        again = [lease for lease in leases if lease.token in taken_over and lease.message is not None]
        if again:

            async def count_attempts() -> list[Any]:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for lease in again:
                        assert lease.message is not None
                        pipe.hincrby(self.k_attempts, f"{lease.message.broker_id} {lease.chat_key}", 1)
                    return await pipe.execute()

            counted = await self.link.typed("count the attempts", {self.k_attempts: "hash"}, count_attempts)
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

        await self.link.call("drop a bad token", drop)

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
        result = await self.link.typed(
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
        return read_message(chat, result[1], result[2], self._log)

    async def release(self, worker: str, lease: Lease) -> None:
        await self.link.typed(
            "give a chat back",
            {self.k_ready: "stream"},
            self._release,
            keys=[self.k_ready],
            args=[WORKERS, worker, lease.token, lease.chat_key],
        )

    async def heartbeat(self, member: Member, leases: list[Lease]) -> set[str]:
        member.heartbeat = time.time()
        lost = await self.link.typed(
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
                self._tell("prune", "gateway_members_not_pruned", error=self.link.masked(exc))
        return set(lost or [])

    async def leave(self, member: Member) -> None:
        await self.link.typed("leave", {self.k_members: "hash"}, self._redis.hdel, self.k_members, member.id)

    # -- the members -----------------------------------------------------------------------

    def _tell(self, once: str, event: str, **fields: Any) -> None:
        if self._log is not None and once not in self._told:
            self._told.add(once)
            self._log.warning(event, **fields)

    async def _read_members(self) -> tuple[dict[bytes, bytes], str | None]:
        """Up to :data:`MAX_MEMBERS` member records, as bytes (a record need not be UTF-8), and what
        is wrong with the members' key itself (``None``: nothing)."""
        found = str(await self._redis.type(self.k_members))  # the client decodes: a str already
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
                name = shown(key)
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
            info["error"] = self.link.masked(exc)
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
            name = shown(key)
            if name in pruned:
                continue
            try:
                row = {"id": name, **member_row(record)}
            except (ValueError, RecursionError) as exc:
                unreadable.append({"key": self.k_members, "id": name, "unreadable": shown(str(exc))})
                continue
            row["alive"] = now - row["last_heartbeat"] <= stale_after
            info["ingresses" if row["role"] == "ingress" else "workers"].append(row)
        for rows in (info["workers"], info["ingresses"]):
            rows.sort(key=lambda r: (r["host"], r["pid"], r["id"]))
        return info

    def session_store(self) -> SessionStore:
        return RedisSessionStore(self)
