"""IRC without I/O: lines parsed and written, the bounded line buffer, the registration and session state.

Nothing here opens a socket, sleeps or touches asyncio: bytes and :class:`IrcMessage` objects go in,
lines to send and :class:`Privmsg` events come out (the protocol is RFC 1459 / RFC 2812).
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .text import CONTROL_RE, LINE_LIMIT, clean_lines, irc_lower, split_to_bytes, strip_formatting

log = logging.getLogger(__name__)

#: The longest line read from the server, CR LF included: IRCv3's 8191 bytes of message tags plus
#: the 512 of the line itself.  A longer line is dropped whole (with one warning) and reading goes on.
MAX_INCOMING_LINE = 8191 + LINE_LIMIT
#: The longest host name the relayed prefix is assumed to carry when the server has not told us ours.
HOST_ROOM = 63
#: How many other nicks are tried before registration gives up.
MAX_NICK_ATTEMPTS = 12
#: How many channel messages' senders are kept for the replies' ``<sender>: ``.
MAX_SENDERS = 256

_ADDRESSED_RE = re.compile(r"^\s*([^\s:,]+)\s*[:,]\s*(.*)$", re.DOTALL)
# Numeric replies that end a registration attempt (banned, throttled, server full...).
_FATAL = frozenset({"463", "464", "465", "466"})
_NICK_REFUSED = frozenset({"433", "436", "437", "432"})
_CANNOT_JOIN = frozenset({"403", "405", "471", "473", "474", "475", "477"})


class IrcError(Exception):
    """The server refused us or broke the protocol (the message says how)."""


class LineBuffer:
    """Splits received bytes into lines of at most ``limit`` bytes; longer ones are dropped whole.

    The buffer never holds more than ``limit`` plus one :meth:`feed`: the bytes of a line that grows
    past the limit are thrown away as they come, up to its newline.  ``on_overlong(size)`` is called
    once for each dropped line, with its size in bytes (at the end, what arrived of it).
    """

    def __init__(self, limit: int, on_overlong: Callable[[int], None]) -> None:
        self._limit = limit
        self._on_overlong = on_overlong
        self._buffer = bytearray()
        self._dropping = 0  # bytes dropped so far of the current overlong line (0: none)

    def feed(self, data: bytes) -> None:
        """Take bytes as they were read."""
        self._buffer += data

    def pop(self) -> bytes | None:
        """The next whole line with its line end; ``None`` until more bytes are fed."""
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                if len(self._buffer) > self._limit:
                    self._dropping += len(self._buffer)
                    self._buffer.clear()
                return None
            line = bytes(self._buffer[: end + 1])
            del self._buffer[: end + 1]
            size, self._dropping = self._dropping + len(line), 0
            if size > self._limit:
                self._on_overlong(size)
                continue
            return line

    def end(self) -> bytes:
        """At the end of the stream: what is left without a line end (``b""`` when it was dropped)."""
        rest, dropped = bytes(self._buffer), self._dropping
        self._buffer.clear()
        self._dropping = 0
        if dropped:
            self._on_overlong(dropped + len(rest))
            return b""
        return rest

    def __len__(self) -> int:
        return len(self._buffer)


# -- messages ------------------------------------------------------------------------------


@dataclass
class IrcMessage:
    """One line from the server: ``[@tags] [:prefix] COMMAND params... [:trailing]``."""

    command: str
    params: list[str] = field(default_factory=list)
    prefix: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    raw: str = ""

    @property
    def nick(self) -> str | None:
        """The sender's nick (the prefix up to ``!``), or ``None`` for the server's own lines."""
        if not self.prefix:
            return None
        return self.prefix.split("!", 1)[0].split("@", 1)[0]

    def param(self, index: int, default: str = "") -> str:
        """The parameter at ``index``, or ``default`` when there are fewer."""
        return self.params[index] if len(self.params) > index else default


def parse_line(line: str) -> IrcMessage | None:
    """Parse one line (without its CR LF); ``None`` for an empty or malformed one."""
    raw, rest = line, line.strip("\r\n")
    tags: dict[str, str] = {}
    if rest.startswith("@"):
        tag_text, _, rest = rest.partition(" ")
        for item in tag_text[1:].split(";"):
            key, _, value = item.partition("=")
            if key:
                tags[key] = value
        rest = rest.lstrip(" ")
    prefix = None
    if rest.startswith(":"):
        prefix, _, rest = rest[1:].partition(" ")
        rest = rest.lstrip(" ")
    if " :" in rest:
        head, _, trailing = rest.partition(" :")
        params = head.split()
        params.append(trailing)
    elif rest.startswith(":"):
        params = [rest[1:]]
    else:
        params = rest.split()
    if not params:
        return None
    command = params.pop(0)
    if not command or command.startswith(":"):
        return None
    return IrcMessage(command=command.upper(), params=params, prefix=prefix or None, tags=tags, raw=raw)


def arg(text: str) -> str:
    """``text`` as an IRC parameter: the trailing form (``:text``) when it needs it."""
    return f":{text}" if (not text or " " in text or text.startswith(":")) else text


def private_chat(message: IrcMessage) -> str:
    """The chat of a private message: ``nick!identity``, where the identity is the services
    account when the server says (IRCv3 ``account`` tag), else ``user@host`` from the prefix.

    Keyed by the identity, a conversation is not continued by whoever takes a departed user's nick.
    Without a ``user@host`` in the prefix (a server that sends bare nicks) it is the nick alone.
    """
    nick = message.nick or ""
    account = message.tags.get("account")
    if account and account != "*":
        return f"{nick}!account:{account}"
    prefix = message.prefix or ""
    if "!" in prefix and "@" in prefix:
        return f"{nick}!{prefix.split('!', 1)[1]}"
    return nick


def alternative_nick(base: str, attempt: int, limit: int | None = None) -> str:
    """The nick for registration attempt ``attempt``: base, ``base_``, ``base__``, ``base1``, ``base2``...

    With a length ``limit``, the base is shortened so that the suffix still fits.
    """
    suffix = ("", "_", "__")[attempt] if attempt < 3 else str(attempt - 2)
    if limit is not None and len(base) + len(suffix) > limit:
        base = base[: max(1, limit - len(suffix))]
    return base + suffix


def pong(message: IrcMessage) -> str:
    """The answer to a server's ``PING``."""
    return f"PONG {arg(message.param(0))}"


# -- state ---------------------------------------------------------------------------------


class Registration:
    """Registering a connection: ``PASS``/``NICK``/``USER``, then another nick until the welcome.

    :meth:`handle` answers the lines to send for each message; :attr:`done` turns true at the
    welcome (``001``), with :attr:`nick` and :attr:`mask_room` (the length of our ``user@host``).
    A refusal raises :class:`IrcError`.
    """

    def __init__(self, nick: str, username: str, realname: str, password: str | None = None) -> None:
        self._base, self._username, self._realname, self._password = nick, username, realname, password
        self._attempt = 0
        self._limit: int | None = None
        self.candidate = alternative_nick(nick, 0)
        self.nick = nick
        self.mask_room: int | None = None
        self.done = False

    def start(self) -> list[str]:
        """The lines that open the registration."""
        lines = [f"PASS {arg(self._password)}"] if self._password else []
        return [*lines, f"NICK {self.candidate}", f"USER {self._username} 0 * {arg(self._realname)}"]

    def handle(self, message: IrcMessage) -> list[str]:
        """The lines to send in answer to ``message`` (``PING`` is the session's, not answered here)."""
        command = message.command
        if command == "001":
            self.nick = message.param(0) or self.candidate
            mask = message.params[-1].rsplit(" ", 1)[-1] if message.params else ""
            if "!" in mask and "@" in mask:
                self.mask_room = len(mask.split("!", 1)[1])
            self.done = True
        elif command in _NICK_REFUSED:
            if command == "432":  # erroneous nickname: here, too long for the server
                if len(self.candidate) <= 1:
                    raise IrcError(f"the server refuses the nick {self.candidate!r}: {message.params[-1]}")
                self._limit = len(self.candidate) - 1
            else:
                self._attempt += 1
            if self._attempt > MAX_NICK_ATTEMPTS or (self._limit is not None and self._limit < 1):
                raise IrcError(f"no free nick found (last tried {self.candidate!r})")
            previous, self.candidate = (
                self.candidate,
                alternative_nick(self._base, self._attempt, self._limit),
            )
            log.info("irc: nick %s refused (%s); trying %s", previous, command, self.candidate)
            return [f"NICK {self.candidate}"]
        elif command == "ERROR":
            raise IrcError(f"the server said: {message.param(0)}")
        elif command in _FATAL:
            raise IrcError(
                f"the server refused us ({command}): {message.params[-1] if message.params else ''}"
            )
        return []


@dataclass(frozen=True)
class Privmsg:
    """A message for the agent: ``text`` from ``sender`` in ``chat_id`` (``channel`` or ``dm``)."""

    sender: str
    chat_id: str
    chat_type: str
    text: str
    message_id: str | None
    raw: str


class Session:
    """What a registered connection knows: our nick, the channels we are in, the server's case
    mapping and channel prefixes; :meth:`handle` turns each message into lines to send and, for a
    message addressed to us, a :class:`Privmsg`."""

    def __init__(
        self, nick: str, ignore_nicks: tuple[str, ...] = (), username: str = "", encoding: str = "utf-8"
    ) -> None:
        self.nick = nick
        self.ignore_nicks = ignore_nicks
        self.username = username or nick
        self.encoding = encoding
        self.joined: set[str] = set()
        self.casemapping = "rfc1459"
        self.chantypes = "#&"
        #: Server PINGs answered.
        self.pings_answered = 0
        #: ``len("user@host")`` as the server showed it in its welcome (``None``: not shown).
        self.mask_room: int | None = None
        self._senders: OrderedDict[str, str] = OrderedDict()

    def handle(self, message: IrcMessage) -> tuple[list[str], Privmsg | None]:
        """The lines to send in answer to ``message``, and the message for the agent it carries."""
        command = message.command
        if command == "PING":
            self.pings_answered += 1
            return [pong(message)], None
        if command == "PRIVMSG":
            return [], self._privmsg(message)
        if command == "005":
            self._isupport(message.params[1:-1])
        elif command == "NICK" and self.is_me(message.nick):
            self.nick = message.param(0) or self.nick
        elif command == "JOIN" and self.is_me(message.nick):
            self.joined.add(message.param(0))
        elif command == "PART" and self.is_me(message.nick):
            self._forget_channel(message.param(0))
        elif command == "KICK" and self.is_me(message.param(1)):
            self._forget_channel(message.param(0))
            log.warning("irc: kicked from %s by %s: %s", message.param(0), message.nick, message.param(2))
        elif command in _CANNOT_JOIN:
            log.warning("irc: cannot join %s: %s", message.param(1), message.params[-1])
        return [], None

    def _isupport(self, tokens: list[str]) -> None:
        for token in tokens:
            key, _, value = token.partition("=")
            if key == "CASEMAPPING" and value:
                self.casemapping = value.lower()
            elif key == "CHANTYPES" and value:
                self.chantypes = value

    def _forget_channel(self, channel: str) -> None:
        folded = irc_lower(channel, self.casemapping)
        self.joined = {c for c in self.joined if irc_lower(c, self.casemapping) != folded}

    def is_me(self, nick: str | None) -> bool:
        """Whether ``nick`` is ours (under the server's case mapping)."""
        return bool(nick) and irc_lower(nick, self.casemapping) == irc_lower(self.nick, self.casemapping)

    def is_channel(self, target: str) -> bool:
        """Whether ``target`` names a channel (by the server's channel prefixes)."""
        return bool(target) and target[0] in self.chantypes

    def addressed_text(self, text: str) -> str | None:
        """The text after ``<our nick>:`` or ``<our nick>,``; ``None`` when the line is not for us."""
        match = _ADDRESSED_RE.match(text)
        if match is None or not self.is_me(match.group(1)):
            return None
        return match.group(2).strip()

    def _privmsg(self, message: IrcMessage) -> Privmsg | None:
        sender = message.nick
        if not sender or self.is_me(sender) or len(message.params) < 2:
            return None
        folded = irc_lower(sender, self.casemapping)
        if any(irc_lower(n, self.casemapping) == folded for n in self.ignore_nicks):
            return None
        target, text = message.params[0], message.params[1]
        if text.startswith("\x01"):
            return None  # CTCP (ACTION, VERSION, ...): not a message for the agent
        text = CONTROL_RE.sub("", strip_formatting(text.replace("\t", " ")))
        if self.is_channel(target):
            body = self.addressed_text(text)
            chat_id, chat_type = target, "channel"
        elif self.is_me(target):
            body = self.addressed_text(text)
            body = text.strip() if body is None else body
            chat_id, chat_type = private_chat(message), "dm"
        else:
            return None
        if not body:
            return None
        return Privmsg(sender, chat_id, chat_type, body, message.tags.get("msgid") or None, message.raw)

    def remember_sender(self, message_id: str, sender: str) -> None:
        """Keep who sent channel message ``message_id``, for the reply's ``<sender>: `` (the last 256)."""
        self._senders[message_id] = sender
        while len(self._senders) > MAX_SENDERS:
            self._senders.popitem(last=False)

    def privmsg_texts(
        self,
        target: str,
        content: str,
        reply_to: str | None = None,
        *,
        prefix: bool = True,
        keep: bool = False,
    ) -> list[str]:
        """The ``PRIVMSG`` texts for ``content`` to ``target``: clean lines, each cut to fit in one
        relayed line; a reply in a channel starts with ``<sender>: `` when ``prefix`` is on."""
        lines = clean_lines(content or "", keep)
        if not lines:
            return []
        sender = self._senders.pop(reply_to, None) if reply_to else None
        if sender and prefix and self.is_channel(target):
            lines[0] = f"{sender}: {lines[0]}"
        budget = self.line_budget(target)
        return [piece for line in lines for piece in split_to_bytes(line, budget, self.encoding)]

    def line_budget(self, target: str) -> int:
        """The bytes of text one ``PRIVMSG`` to ``target`` may carry.

        Counts what the server puts in front when it relays the line:
        ``:nick!user@host PRIVMSG target :`` and the closing CR LF.
        """
        mask_room = max(self.mask_room or 0, len(self.username) + 1 + 1 + HOST_ROOM)
        around = f":{self.nick}! PRIVMSG {target} :".encode(self.encoding, "replace")
        return LINE_LIMIT - 2 - len(around) - mask_room


class TokenBucket:
    """Flood control: ``burst`` lines at once, then one line every ``interval`` seconds.

    The caller tells the time: :meth:`reserve` lets a line go (answering 0) or says how long to wait.
    ``sent`` keeps the (monotonic) times of the most recent lines let through.
    """

    def __init__(self, burst: int, interval: float, now: float) -> None:
        self.burst = max(1, int(burst))
        self.interval = max(0.0, float(interval))
        self.tokens = float(self.burst)
        self._stamp = now
        self.sent: deque[float] = deque(maxlen=1024)
        self.waits = 0

    def reserve(self, now: float) -> float:
        """0 when a line may go at ``now`` (and it is counted), else the seconds to wait first."""
        if self.interval <= 0:
            self.tokens = float(self.burst)
        else:
            self.tokens = min(float(self.burst), self.tokens + (now - self._stamp) / self.interval)
        self._stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            self.sent.append(now)
            return 0.0
        self.waits += 1
        return (1.0 - self.tokens) * self.interval
