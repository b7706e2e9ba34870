"""The broker between a gateway's ingress and its workers: what any broker must do, and its settings.

The ingress (the process holding the platform connections) :meth:`~Broker.submit`\\ s every incoming
message; a worker :meth:`~Broker.take`\\ s a *chat* — the right to answer its messages, one at a
time, in order — runs each turn and :meth:`~Broker.finish`\\ es it, which hands the reply back to the
ingress, acknowledges the message and gives the chat's next one, in one step.  A chat a worker holds
longer than ``claim_after`` seconds without a heartbeat (the worker died, or stopped answering) is
taken over by another worker, which answers its unacknowledged message again; a reply is sent to the
chat once, whoever wrote it (:meth:`~Broker.finish` refuses a stale worker's, and the ingress drops
a reply whose incoming message was answered already).

:mod:`kernel.gateway.redis_broker` implements it on Redis Streams; another engine (NATS JetStream,
say) would implement the same class.  Nothing here imports a client library.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..base.redact import mask_url, mask_urls
from ..base.safe_yaml import utf8_size
from .sessions import read_json_object

if TYPE_CHECKING:
    from .sessions import SessionStore

#: The largest incoming message (its JSON, in bytes) the ingress queues; a bigger one is answered.
MAX_MESSAGE_BYTES = 1024 * 1024
#: The longest chat id accepted (a key of the broker).
MAX_CHAT_ID = 512
#: The longest reply (its text, in UTF-8 bytes) handed to a platform; a longer one is cut to fit by
#: :func:`fit_reply`, with :data:`TRUNCATED_NOTICE` at its end (in one process and scaled out alike).
MAX_REPLY_BYTES = 4 * 1024 * 1024
TRUNCATED_NOTICE = "[reply truncated: {left_out} bytes left out]"
#: The largest reply record the ingress reads back: a :data:`MAX_REPLY_BYTES` text with every byte
#: written as a 6-byte JSON escape, beside a message's chat and message ids (twice each), and room.
MAX_REPLY_RECORD_BYTES = 6 * MAX_REPLY_BYTES + 2 * MAX_MESSAGE_BYTES + 65536

# What the gateway answers by itself.
BUSY_REPLY = "Sorry, too many messages are waiting to be answered; please try again in a moment."
TOO_LONG_REPLY = "Sorry, that message is too long to be answered."
FAILED_REPLY = "Sorry, that failed ({error}); the details are in the gateway's log."
GAVE_UP_REPLY = (
    "Sorry, that message could not be answered: the workers that took it stopped before answering, "
    "{attempts} times. The details are in the gateway's log."
)
#: How many workers may take a message and vanish before it is answered with :data:`GAVE_UP_REPLY`
#: instead (a message whose turn kills the worker must not kill every worker in turn).
MAX_ATTEMPTS = 3

DEFAULT_PREFIX = "hermes"
DEFAULT_CLAIM_AFTER = 30.0
DEFAULT_MAX_PENDING = 10000
#: A member silent this many ``claim_after`` periods is removed from the members (``forget_after``).
FORGET_AFTER_CLAIMS = 10
SCHEMES = ("redis", "rediss", "unix")


class BrokerError(Exception):
    """A broker that cannot be used: bad settings, an unknown kind, or a missing client library."""


class BrokerUnavailable(BrokerError):
    """The broker could not be reached before the gateway was asked to stop."""


@dataclass(frozen=True)
class BrokerSettings:
    """``gateway.broker`` in config.yaml (or ``--broker URL``)."""

    url: str
    prefix: str = DEFAULT_PREFIX
    claim_after: float = DEFAULT_CLAIM_AFTER
    max_pending: int = DEFAULT_MAX_PENDING
    #: Seconds a member may go without a heartbeat before it is removed from the members
    #: (``None``: :data:`FORGET_AFTER_CLAIMS` × ``claim_after``).
    forget_after: float | None = None

    @property
    def masked_url(self) -> str:
        return mask_url(self.url)

    @property
    def forget_seconds(self) -> float:
        """How long a silent member stays listed: ``forget_after``, else 10 × ``claim_after``."""
        return self.forget_after if self.forget_after is not None else FORGET_AFTER_CLAIMS * self.claim_after

    @classmethod
    def from_config(
        cls, raw: Any, url: str | None = None, where: str = "config.yaml"
    ) -> BrokerSettings | None:
        """The settings from the ``gateway.broker`` section (``url`` overrides its ``url``).

        ``None`` when there is no broker; :class:`BrokerError` naming the key and the fix otherwise.
        """
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise BrokerError(
                f"{where}: 'gateway.broker' must be a mapping (url, prefix, claim_after, max_pending, "
                "forget_after)"
            )
        given = "--broker URL" if url is not None else f"{where}: 'gateway.broker.url'"
        url = url if url is not None else raw.get("url")
        if url is None or url == "":
            return None
        if not isinstance(url, str):
            raise BrokerError(f"{given} must be a URL such as redis://127.0.0.1:6379/0")
        scheme = urlsplit(url).scheme
        if scheme not in SCHEMES:
            raise BrokerError(
                f"{given} ({mask_url(url)}) must start with "
                f"{', '.join(s + '://' for s in SCHEMES)} — the broker is Redis"
            )
        prefix = raw.get("prefix", DEFAULT_PREFIX)
        if not isinstance(prefix, str) or not re.fullmatch(r"[A-Za-z0-9_.\-]{1,64}", prefix):
            raise BrokerError(
                f"{where}: 'gateway.broker.prefix' must be 1 to 64 letters, digits, '_', '.' or '-' "
                f"(e.g. prefix: hermes), not {prefix!r}"
            )
        claim_after = _number(raw.get("claim_after", DEFAULT_CLAIM_AFTER), 0.1, 86400.0)
        if claim_after is None:
            raise BrokerError(
                f"{where}: 'gateway.broker.claim_after' must be seconds from 0.1 to 86400 (e.g. 30)"
            )
        max_pending = raw.get("max_pending", DEFAULT_MAX_PENDING)
        if type(max_pending) is not int or max_pending < 1:
            raise BrokerError(f"{where}: 'gateway.broker.max_pending' must be a whole number of at least 1")
        forget_after = raw.get("forget_after")
        if forget_after is not None:
            forget_after = _number(forget_after, claim_after, 30 * 86400.0)
            if forget_after is None:
                raise BrokerError(
                    f"{where}: 'gateway.broker.forget_after' must be seconds from claim_after "
                    f"({claim_after:g}) to 2592000 (30 days), e.g. {FORGET_AFTER_CLAIMS * claim_after:g}"
                )
        return cls(
            url=url,
            prefix=prefix,
            claim_after=claim_after,
            max_pending=max_pending,
            forget_after=forget_after,
        )


def _number(value: Any, low: float, high: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and low <= value <= high else None


def mask_secrets(text: str, url: str) -> str:
    """``text`` with every URL masked and the password of ``url`` (if any) replaced by ``***``."""
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        text = text.replace(password, "***")
    return mask_urls(text)


# -- what travels through the broker ---------------------------------------------------------------


@dataclass
class Inbound:
    """One incoming message, as the ingress queues it."""

    platform: str
    chat_id: str
    text: str
    message_id: str | None = None
    user_id: str | None = None
    user_name: str | None = None
    chat_type: str = "dm"
    chat_name: str | None = None
    thread_id: str | None = None
    reply_to_message_id: str | None = None
    message_type: str = "text"
    timestamp: float = 0.0
    #: When the ingress accepted it (wall clock), for latency figures.
    accepted_at: float = field(default_factory=time.time)
    #: A unique id the ingress gives it: the reply's key when the platform gave no ``message_id``.
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: Set by the broker when the message is read back (its position in the chat's queue).
    broker_id: str = ""

    @property
    def chat_key(self) -> str:
        return chat_key(self.platform, self.chat_id)

    @property
    def reply_key(self) -> str:
        """What identifies this message's reply: its chat and the platform's message id, else :attr:`uid`
        (the platform and chat id escaped: no two (chat, message) pairs give one key)."""
        return f"{key_part(self.platform)}:{key_part(self.chat_id)}:{self.message_id or self.uid}"

    def dumps(self) -> str:
        return json.dumps({name: getattr(self, name) for name in _INBOUND_FIELDS})

    @classmethod
    def loads(cls, text: str | bytes, broker_id: str = "") -> Inbound:
        """Read a queued message back; ``ValueError`` when it is not one."""
        data = read_json_object(text, MAX_MESSAGE_BYTES)
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data and k != "broker_id"}
        for name in ("platform", "chat_id", "text"):
            if not isinstance(known.get(name), str):
                raise ValueError(f"'{name}' is not a string")
        for name in ("chat_type", "message_type", "uid"):
            if name in known and not isinstance(known[name], str):
                raise ValueError(f"'{name}' is not a string")
        for name in ("message_id", "user_id", "user_name", "chat_name", "thread_id", "reply_to_message_id"):
            if not isinstance(known.get(name), str | None):
                raise ValueError(f"'{name}' is neither a string nor null")
        for name in ("timestamp", "accepted_at"):
            if name in known and (isinstance(known[name], bool) or not isinstance(known[name], int | float)):
                raise ValueError(f"'{name}' is not a number")
        message = cls(**known)
        message.broker_id = broker_id
        return message


#: What :meth:`Inbound.dumps` writes (every field is a string, a number or null: no copy needed).
_INBOUND_FIELDS = tuple(name for name in Inbound.__dataclass_fields__ if name != "broker_id")


@dataclass
class Outbound:
    """A reply a worker hands back, for the ingress to send."""

    platform: str
    chat_id: str
    text: str
    reply_to: str | None
    #: The incoming message's :attr:`Inbound.reply_key`: a second reply with it is not sent.
    key: str
    accepted_at: float = 0.0
    worker: str = ""

    def dumps(self) -> str:
        return json.dumps({name: getattr(self, name) for name in self.__dataclass_fields__})

    @classmethod
    def loads(cls, text: str | bytes) -> Outbound:
        data = read_json_object(text, MAX_REPLY_RECORD_BYTES)
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        for name in ("platform", "chat_id", "text", "key"):
            if not isinstance(known.get(name), str):
                raise ValueError(f"'{name}' is not a string")
        return cls(**known)


def key_part(text: str) -> str:
    """``text`` made safe as one ``:``-separated part of a key: ``%`` and ``:`` escaped (``%25``, ``%3A``)."""
    return text.replace("%", "%25").replace(":", "%3A")


def chat_key(platform: str, chat_id: str) -> str:
    """``<platform>:<chat id>``, the platform escaped (:func:`key_part`): one key per chat."""
    return f"{key_part(platform)}:{chat_id}"


def split_chat_key(key: str) -> tuple[str, str] | None:
    """The ``(platform, chat id)`` of a :func:`chat_key`; ``None`` when ``key`` is not one."""
    platform, colon, chat_id = key.partition(":")
    if not colon or not platform or not chat_id or len(chat_id) > MAX_CHAT_ID:
        return None
    return re.sub("%(25|3A)", lambda m: "%" if m[1] == "25" else ":", platform), chat_id


def fit_reply(text: str, limit: int = MAX_REPLY_BYTES) -> str:
    """``text`` when it takes at most ``limit`` UTF-8 bytes; else its beginning, cut between two
    characters, followed by :data:`TRUNCATED_NOTICE` saying how many bytes were left out, all within
    ``limit``."""
    if utf8_size(text) <= limit:
        return text
    data = text.encode("utf-8", "surrogatepass")
    # The notice for the whole text is the longest it can be: what is kept leaves room for it.
    room = limit - len(("\n\n" + TRUNCATED_NOTICE.format(left_out=len(data))).encode())
    cut = max(room, 0)
    while cut > 0 and data[cut] & 0xC0 == 0x80:  # a continuation byte: inside a character
        cut -= 1
    kept = data[:cut].decode("utf-8", "surrogatepass")
    return f"{kept}\n\n{TRUNCATED_NOTICE.format(left_out=len(data) - cut)}"


@dataclass
class Lease:
    """A chat a worker holds: its token in the broker, and the message to answer now (``None``: none left)."""

    token: str
    chat_key: str
    message: Inbound | None
    #: When the worker took the chat (monotonic clock).
    taken_at: float = field(default_factory=time.monotonic)
    #: The chat's session record (JSON) read with the lease, when the broker is also the session
    #: store (``prefetched``): a round trip saved.
    session: str | None = None
    prefetched: bool = False
    #: How many workers have taken :attr:`message` (1, and one more each time a silent worker's chat
    #: is taken over before the message was answered).
    attempts: int = 1


@dataclass
class Member:
    """A gateway process, as the broker lists it (``gateway status``)."""

    id: str
    role: str
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    concurrency: int = 0
    started: float = field(default_factory=time.time)
    heartbeat: float = 0.0
    busy: int = 0
    #: Why the process's loop is failing now (``None``: it is not); ``gateway status`` shows it.
    error: str | None = None

    def dumps(self) -> str:
        return json.dumps({name: getattr(self, name) for name in self.__dataclass_fields__})


def member_id(role: str) -> str:
    """A process's id in the broker: ``<host>-<pid>-<random>`` (unique across restarts)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


# -- the interface ---------------------------------------------------------------------------------

#: What :meth:`Broker.finish` returns when the chat was taken over by another worker meanwhile.
STALE = object()


class Broker(ABC):
    """A broker: the inbox of chats for the workers, the replies for the ingress, the workers' list.

    Every method retries while the broker is unreachable (with backoff, saying so in the log and in
    :attr:`connected` / :attr:`last_error`) until it succeeds or :meth:`stop_retrying` is called,
    then raises :class:`BrokerUnavailable`.
    """

    settings: BrokerSettings
    connected: bool = False
    last_error: str | None = None

    @abstractmethod
    async def open(self) -> None:
        """Connect, and make the streams and groups the gateway needs (idempotent)."""

    @abstractmethod
    async def aclose(self) -> None:
        """Close the connections."""

    @abstractmethod
    def stop_retrying(self) -> None:
        """Make calls that wait for an unreachable broker give up (at shutdown)."""

    # the ingress's side

    @abstractmethod
    async def submit(self, message: Inbound, *, resend: bool = True) -> bool:
        """Queue ``message`` behind its chat's; ``False`` (nothing queued) past ``max_pending``.

        A message id queued before is not queued again (no second turn): answered, its first reply is
        handed back again (a new reply entry) when ``resend`` (a platform's duplicate delivery, not a
        spool read again); in progress, its reply to come answers it."""

    @abstractmethod
    async def replies(self, platform: str, *, block: float) -> list[tuple[str, Outbound | None]]:
        """The platform's replies not yet sent (those of before a restart first), waiting up to ``block``
        seconds for one; ``None`` for an entry that cannot be read (acknowledge it, it is logged)."""

    @abstractmethod
    async def was_sent(self, key: str) -> bool:
        """Whether the message ``key`` has had its reply handed back (only its first one is kept)."""

    @abstractmethod
    async def sent(self, platform: str, entry: str) -> None:
        """Record the reply ``entry`` as sent: it is dropped from the platform's replies."""

    @abstractmethod
    async def set_aside_reply(self, platform: str, entry: str, reply: Outbound, error: str) -> None:
        """Move the reply ``entry``, which the platform never took, out of the platform's replies into
        its undelivered ones (kept for inspection, with ``error``)."""

    @abstractmethod
    async def hold_platform(self, platform: str, member: str, ttl: float) -> str | None:
        """Take, or keep for ``ttl`` more seconds, the right to connect ``platform`` (one ingress per
        platform); ``None`` when ``member`` holds it now, else the id of the ingress that does."""

    @abstractmethod
    async def drop_platform(self, platform: str, member: str) -> None:
        """Give the platform up (a clean stop: a standby ingress takes it at once)."""

    # the worker's side

    @abstractmethod
    async def take(self, worker: str, count: int, *, block: float) -> list[Lease]:
        """Up to ``count`` chats for ``worker``: chats taken over from silent workers first, then new
        ones, waiting up to ``block`` seconds."""

    @abstractmethod
    async def finish(
        self,
        worker: str,
        lease: Lease,
        reply: Outbound | None,
        session: tuple[str, str] | None = None,
    ) -> Inbound | object | None:
        """Hand ``reply`` back and acknowledge ``lease.message`` (saving ``session``, ``(chat key, state
        JSON)``, in the same step when the store is the broker's); the chat's next message, ``None``
        when none is left (the chat is given up), or :data:`STALE` when another worker took the chat
        over meanwhile (nothing was written).  A reply to a message (``reply.key``) that already had
        one is not handed back."""

    @abstractmethod
    async def release(self, worker: str, lease: Lease) -> None:
        """Give a held chat back at once (at shutdown) so that another worker goes on with it."""

    @abstractmethod
    async def heartbeat(self, member: Member, leases: list[Lease]) -> set[str]:
        """Say ``member`` is alive and still holds ``leases``; the tokens it no longer holds."""

    @abstractmethod
    async def leave(self, member: Member) -> None:
        """Remove ``member`` from the list (a clean stop)."""

    @abstractmethod
    async def status(self) -> dict[str, Any]:
        """``gateway status --json``'s ``broker`` object (the URL masked)."""

    @abstractmethod
    def session_store(self) -> SessionStore:
        """A session store kept in the broker's server (``gateway.sessions.store: redis``)."""
