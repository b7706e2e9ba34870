"""The broker's one connection to Redis: calls retried while Redis is away, and keys of a foreign type
set aside (quarantined) so that a step can be done again."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis
import tenacity
from redis import exceptions as rexc
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from .broker import BrokerSettings, BrokerUnavailable, mask_secrets
from .redis_records import mistyped, retryable

T = TypeVar("T")

RETRY_FIRST = 0.1
RETRY_MAX = 5.0


class RedisLink:
    """The Redis client of a :class:`~kernel.gateway.redis_broker.RedisBroker`, with its retries."""

    def __init__(self, settings: BrokerSettings, *, log: Any = None) -> None:
        self.settings = settings
        self.log = log
        self.redis = aioredis.from_url(
            settings.url,
            decode_responses=True,
            # The retries are ours (tenacity, in call); the client's own would also turn a cancelled
            # read that races its timeout into a new read, and a stop would wait for it.
            retry=Retry(NoBackoff(), 0),
            socket_connect_timeout=5,
            socket_timeout=30,
            health_check_interval=15,
        )
        self.connected = False
        self.last_error: str | None = None
        #: Counts the connections lost: what was read on an earlier one is read again.
        self.epoch = 0
        self.stopping = False
        #: The consumer groups in use (``stream\0group``), made again when Redis comes back without them.
        self.groups: set[str] = set()
        #: What runs once a key was set aside (a stream whose chats need their tokens again).
        self.after_set_aside: dict[str, Callable[[], Awaitable[None]]] = {}

    async def make_group(self, stream: str, group: str) -> None:
        try:
            await self.redis.xgroup_create(stream, group, id="0", mkstream=True)
        except rexc.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self.groups.add(f"{stream}\0{group}")

    async def regroup(self) -> None:
        """Make the groups again (after a Redis that lost its data)."""
        for name in list(self.groups):
            stream, _, group = name.partition("\0")
            await self.make_group(stream, group)

    def stop_retrying(self) -> None:
        self.stopping = True

    async def aclose(self) -> None:
        self.stopping = True
        await self.redis.aclose()

    def masked(self, exc: BaseException) -> str:
        return mask_secrets(f"{type(exc).__name__}: {exc}", self.settings.url)

    async def typed(
        self, what: str, kinds: dict[str, str], fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any
    ) -> T:
        """:meth:`call`; when Redis refuses it for a key of the wrong type, the keys of ``kinds`` (key ->
        its Redis type) that are not what the gateway writes are set aside, and it is called again."""
        try:
            return await self.call(what, fn, *args, **kwargs)
        except rexc.ResponseError as exc:
            if not mistyped(exc) or not await self.set_aside(kinds, what):
                raise
        return await self.call(what, fn, *args, **kwargs)

    async def set_aside(self, kinds: dict[str, str], doing: str) -> bool:
        """Move each key of ``kinds`` holding another type of value to ``P:quarantine:<key>:<ns>`` (kept
        for inspection, logged once: the key is gone); whether one was moved."""
        keys = list(kinds)

        async def types() -> list[Any]:
            async with self.redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.type(key)
                return await pipe.execute()

        moved = False
        for key, found in zip(keys, await self.call("check the keys' types", types), strict=True):
            if found in ("none", kinds[key]):
                continue
            prefix = self.settings.prefix
            kept = f"{prefix}:quarantine:{key.removeprefix(prefix + ':')}:{time.time_ns()}"
            await self.call("set a record aside", self.redis.rename, key, kept)
            moved = True
            if self.log is not None:
                self.log.warning(
                    "gateway_record_set_aside",
                    key=key,
                    found=found,
                    expected=kinds[key],
                    kept_in=kept,
                    doing=doing,
                    fix=f"it was not written by the gateway: inspect {kept!r}, then delete it",
                )
            then = self.after_set_aside.get(key)
            if then is not None:
                await then()
        if moved:
            await self.regroup()
        return moved

    async def call(self, what: str, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """``await fn(*args)``, retried with backoff while Redis is unreachable (or lost its groups)."""
        if self.connected:
            # The common case costs no retry machinery: only a failure starts the retries.
            try:
                return await fn(*args, **kwargs)
            except Exception as exc:
                if not retryable(exc):
                    raise
                self.epoch += 1
        return await self._retried(what, fn, *args, **kwargs)

    async def _retried(self, what: str, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            self.epoch += 1  # what was read on the lost connection is read again
            was = self.connected
            self.connected = False
            self.last_error = self.masked(exc) if exc else "unknown"
            # A group not made yet at start (the open is under way) is not news.
            starting = state.attempt_number == 1 and "NOGROUP" in self.last_error
            loud = was or state.attempt_number in (1, 10) or state.attempt_number % 50 == 0
            if self.log is not None and loud and not starting:
                self.log.warning(
                    "gateway_broker_retry",
                    broker=self.settings.masked_url,
                    doing=what,
                    attempt=state.attempt_number,
                    error=self.last_error,
                )

        retrying = tenacity.AsyncRetrying(
            wait=tenacity.wait_exponential(multiplier=RETRY_FIRST, max=RETRY_MAX),
            retry=tenacity.retry_if_exception(retryable),
            stop=lambda _state: self.stopping,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if attempt.retry_state.attempt_number > 1:
                        await self.regroup()
                    result = await fn(*args, **kwargs)
        except Exception as exc:
            if retryable(exc):
                raise BrokerUnavailable(
                    f"the broker {self.settings.masked_url} could not be reached to {what}: "
                    f"{self.masked(exc)}"
                ) from None
            raise
        if not self.connected:
            if self.log is not None and self.last_error is not None:
                self.log.info("gateway_broker_connected", broker=self.settings.masked_url)
            self.connected = True
            self.last_error = None
        return result
