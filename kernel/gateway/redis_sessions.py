"""The chats' states kept in the broker's Redis (``gateway.sessions.store: redis``)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from .sessions import SessionState, SessionStore, SessionStoreError, _warn_unreadable

if TYPE_CHECKING:
    from .broker import BrokerSettings
    from .redis_link import RedisLink


class RedisBroker(Protocol):
    """What the store uses of :class:`~kernel.gateway.redis_broker.RedisBroker`, which makes it."""

    @property
    def settings(self) -> BrokerSettings: ...
    @property
    def link(self) -> RedisLink: ...
    def k_session(self, key: str) -> str: ...


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
        raw = await broker.link.call("read a session", broker.link.redis.get, where)
        if raw is None:
            return None
        try:
            return SessionState.loads(raw)
        except (ValueError, RecursionError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        kept = f"{broker.settings.prefix}:session-unreadable:{key}:{int(time.time())}"
        await broker.link.call("keep an unreadable session aside", broker.link.redis.rename, where, kept)
        _warn_unreadable(broker.link.log, broker.settings.masked_url, where, problem, kept)
        return None

    async def save(self, key: str, state: SessionState) -> None:
        try:
            text = state.dumps()
        except SessionStoreError:
            raise
        broker = self.broker
        await broker.link.call("save a session", broker.link.redis.set, broker.k_session(key), text)
