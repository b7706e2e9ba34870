"""An IRC client for the gateway, on asyncio streams and nothing beyond the standard library.

What it does (the protocol is RFC 1459 / RFC 2812):

* registers with ``PASS`` (when a server password is set), ``NICK`` and ``USER``
  and waits for the welcome (``001``); a nick in use (``433``) is retried as
  ``nick_``, ``nick__``, ``nick1``, ``nick2``...; a nick too long for the server
  (``432``) is shortened;
* joins the configured channels, answers every ``PING`` at once and pings a
  silent server itself (``ping_interval``) to notice a dead connection;
* hands the gateway each ``PRIVMSG`` addressed to it — ``<nick>: text`` or
  ``<nick>, text`` in a channel, anything in private — as a :class:`MessageEvent`,
  in a task of its own so the connection keeps being served while the agent thinks;
* sends text as ``PRIVMSG`` lines: one per line of the text, cut so that the line
  the server relays stays within IRC's 512 bytes, control characters removed,
  paced by a token bucket (``flood_burst`` lines at once, then one every
  ``flood_interval`` seconds);
* reconnects by itself when the connection drops (the server closes it, sends
  ``ERROR``, or stops answering), waiting longer after each failed attempt, and
  joins its channels again; :meth:`IrcAdapter.disconnect` sends ``QUIT`` and stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import re
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kernel.gateway import BasePlatformAdapter, MessageEvent, MessageType, SendResult, SessionSource
from kernel.gateway.config import PlatformConfig

# Loaded as a plugin, the module lives under the kernel's plugin package: its records go to agent.log.
log = logging.getLogger(__name__)

#: IRC's limit for one line, CR LF included.
LINE_LIMIT = 512
#: The longest line read from the server, CR LF included: IRCv3's 8191 bytes of message tags plus
#: the 512 of the line itself.  A longer line is dropped whole (with one warning) and reading goes on.
MAX_INCOMING_LINE = 8191 + LINE_LIMIT
#: How much is asked of the socket at once (the reader's buffer holds at most a line plus this).
READ_CHUNK = 64 * 1024
#: The longest host name the relayed prefix is assumed to carry when the server has not told us ours.
HOST_ROOM = 63
#: How many other nicks are tried before registration gives up.
MAX_NICK_ATTEMPTS = 12
#: How many incoming messages may be with the gateway at once; more are dropped (and logged).
MAX_PENDING = 64
#: A connection that lasted this long resets the reconnection backoff.
STABLE_AFTER = 60.0

_NICK_RE = re.compile(r"^[A-Za-z\[\]\\^_`{|}][A-Za-z0-9\[\]\\^_`{|}-]*$")
_NEWLINE_RE = re.compile(r"\r\n|[\r\n\x0b\x0c\x1c\x85\u2028\u2029]")
#: The formatting codes IRC clients understand: bold, colour, reset, monospace, reverse, italic,
#: strike-through, underline (``keep_formatting: true`` keeps them in what the bot sends).
FORMATTING = "\x02\x03\x04\x0f\x11\x16\x1d\x1e\x1f"
_COLOUR_RE = re.compile(r"\x03(?:\d{1,2}(?:,\d{1,2})?)?|\x04(?:[0-9A-Fa-f]{6}(?:,[0-9A-Fa-f]{6})?)?")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROL_KEEP_FORMATTING_RE = re.compile(r"[\x00-\x01\x05-\x0e\x10\x12-\x15\x17-\x1c\x7f-\x9f]")
_ADDRESSED_RE = re.compile(r"^\s*([^\s:,]+)\s*[:,]\s*(.*)$", re.DOTALL)
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class IrcError(Exception):
    """The server refused us or broke the protocol (the message says how)."""


class LineReader:
    """Lines from an asyncio stream, each at most ``limit`` bytes; longer ones are dropped whole.

    The buffer never holds more than ``limit`` plus one read: the bytes of a line
    that grows past the limit are thrown away as they come, up to its newline.
    ``on_overlong(size)`` is called once for each dropped line, with its size in
    bytes (at the end of the stream, what arrived of it).  Cancelling
    :meth:`readline` loses nothing.
    """

    def __init__(self, reader: asyncio.StreamReader, limit: int, on_overlong: Callable[[int], None]) -> None:
        self._reader = reader
        self._limit = limit
        self._on_overlong = on_overlong
        self._buffer = bytearray()
        self._dropping = 0  # bytes dropped so far of the current overlong line (0: none)
        self._eof = False

    async def readline(self) -> bytes:
        """The next line with its line end; at the end of the stream what is left, then ``b""``."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                size, self._dropping = self._dropping + len(line), 0
                if size > self._limit:
                    self._on_overlong(size)
                    continue
                return line
            if len(self._buffer) > self._limit:
                self._dropping += len(self._buffer)
                self._buffer.clear()
            if self._eof:
                rest, dropped = bytes(self._buffer), self._dropping
                self._buffer.clear()
                self._dropping = 0
                if dropped:
                    self._on_overlong(dropped + len(rest))
                    return b""
                return rest
            data = await self._reader.read(READ_CHUNK)
            if data:
                self._buffer += data
            else:
                self._eof = True


# -- settings ---------------------------------------------------------------------------


@dataclass(frozen=True)
class IrcSettings:
    """The adapter's settings, read from ``gateway.platforms.irc`` (see ``docs/irc.md``)."""

    server: str
    port: int = 6667
    tls: bool = False
    tls_verify: bool = True
    tls_ca_file: str | None = None
    password: str | None = None
    nick: str = "hermes"
    username: str = "hermes"
    realname: str = "Hermes agent"
    channels: tuple[tuple[str, str | None], ...] = ()
    encoding: str = "utf-8"
    flood_burst: int = 4
    flood_interval: float = 0.5
    connect_timeout: float = 30.0
    reconnect_delay: float = 2.0
    reconnect_max_delay: float = 300.0
    ping_interval: float = 120.0
    ping_timeout: float = 60.0
    quit_message: str = "Goodbye"
    reply_prefix: bool = True
    keep_formatting: bool = False
    ignore_nicks: tuple[str, ...] = ()
    max_message_length: int = 400

    @classmethod
    def from_config(cls, config: PlatformConfig | Mapping[str, Any]) -> IrcSettings:
        """Read and check the settings; a :class:`ValueError` names the key that is wrong."""
        if isinstance(config, PlatformConfig):
            data: dict[str, Any] = dict(config.extra)
            if config.token and not data.get("password"):
                data["password"] = config.token
        else:
            data = dict(config)
            data.update(data.pop("extra", None) or {})
        server = _text(data, "server") or _text(data, "host")
        if not server:
            raise ValueError("gateway.platforms.irc: 'server' (the IRC server's host name) is not set")
        port_value = data.get("port")
        match = re.match(r"^\[([^\]]+)\](?::(\d+))?$", server) or re.match(r"^([^:]+):(\d+)$", server)
        if match:
            server = match.group(1)
            if port_value in (None, "") and match.group(2):
                port_value = match.group(2)
        tls = _bool(data, "tls", False)
        port = _int(data, "port", 6697 if tls else 6667, value=port_value, low=1, high=65535)
        nick = _text(data, "nick") or cls.nick
        if not _NICK_RE.match(nick):
            raise ValueError(f"gateway.platforms.irc: 'nick' {nick!r} is not a valid IRC nickname")
        username = _text(data, "username") or nick
        if re.search(r"[\s@\x00-\x1f]", username):
            raise ValueError(f"gateway.platforms.irc: 'username' {username!r} may not hold spaces or '@'")
        encoding = _text(data, "encoding") or "utf-8"
        try:
            "".encode(encoding)
        except LookupError:
            raise ValueError(f"gateway.platforms.irc: unknown 'encoding' {encoding!r}") from None
        return cls(
            server=server,
            port=port,
            tls=tls,
            tls_verify=_bool(data, "tls_verify", True),
            tls_ca_file=_text(data, "tls_ca_file"),
            password=_text(data, "password", strip=False),
            nick=nick,
            username=username,
            realname=_clean(_text(data, "realname") or cls.realname) or cls.realname,
            channels=tuple(_channels(data.get("channels"))),
            encoding=encoding,
            flood_burst=_int(data, "flood_burst", cls.flood_burst, low=1, high=1000),
            flood_interval=_float(data, "flood_interval", cls.flood_interval, low=0.0),
            connect_timeout=_float(data, "connect_timeout", cls.connect_timeout, low=0.1),
            reconnect_delay=_float(data, "reconnect_delay", cls.reconnect_delay, low=0.01),
            reconnect_max_delay=_float(data, "reconnect_max_delay", cls.reconnect_max_delay, low=0.01),
            ping_interval=_float(data, "ping_interval", cls.ping_interval, low=0.0),
            ping_timeout=_float(data, "ping_timeout", cls.ping_timeout, low=0.1),
            quit_message=_clean(_text(data, "quit_message") or "") or cls.quit_message,
            reply_prefix=_bool(data, "reply_prefix", True),
            keep_formatting=_bool(data, "keep_formatting", False),
            ignore_nicks=tuple(_names(data.get("ignore_nicks"), "ignore_nicks")),
            max_message_length=_int(data, "max_message_length", cls.max_message_length, low=16),
        )


def _text(data: Mapping[str, Any], key: str, strip: bool = True) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"gateway.platforms.irc: '{key}' must be a string, not {type(value).__name__}")
    text = str(value)
    if strip:
        text = text.strip()
    return text or None


def _bool(data: Mapping[str, Any], key: str, default: bool) -> bool:
    value = data.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"gateway.platforms.irc: '{key}' must be true or false, not {value!r}")


def _number(data: Mapping[str, Any], key: str, default: Any, kind: type, value: Any = None) -> Any:
    value = data.get(key) if value is None else value
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise ValueError(f"gateway.platforms.irc: '{key}' must be a number, not {value!r}")
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"gateway.platforms.irc: '{key}' must be a number, not {value!r}") from None


def _int(
    data: Mapping[str, Any], key: str, default: int, *, value: Any = None, low: int, high: int = 10**9
) -> int:
    number = _number(data, key, default, int, value)
    if not low <= number <= high:
        raise ValueError(f"gateway.platforms.irc: '{key}' must be between {low} and {high}, not {number}")
    return number


def _float(data: Mapping[str, Any], key: str, default: float, *, low: float) -> float:
    number = _number(data, key, default, float)
    if not number >= low:
        raise ValueError(f"gateway.platforms.irc: '{key}' must be at least {low}, not {number}")
    return number


def _names(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.replace(",", " ").split()
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    raise ValueError(f"gateway.platforms.irc: '{key}' must be a list of names or a comma-separated string")


def _channels(value: Any) -> Iterable[tuple[str, str | None]]:
    """``["#a", "#b key"]`` or ``"#a, #b"``: (channel, key) pairs; a bare name gets a ``#``."""
    if isinstance(value, str):
        entries = [e for e in value.split(",") if e.strip()]
    else:
        entries = _names(value, "channels")
    seen: set[str] = set()
    for entry in entries:
        parts = entry.split()
        name, key = parts[0], (parts[1] if len(parts) > 1 else None)
        if name[0] not in "#&+!":
            name = "#" + name
        if re.search(r"[\x00-\x20,\x07]", name) or len(parts) > 2:
            raise ValueError(f"gateway.platforms.irc: bad channel {entry!r} (write '#name' or '#name key')")
        if name.lower() not in seen:
            seen.add(name.lower())
            yield name, key


# -- text ----------------------------------------------------------------------------------


def strip_formatting(text: str) -> str:
    """``text`` without IRC colour and formatting codes."""
    text = _COLOUR_RE.sub("", text)
    return text.translate({ord(c): None for c in FORMATTING})


def _clean(line: str, keep_formatting: bool = False) -> str:
    """One line without control characters (tabs become spaces); formatting codes only when kept."""
    line = line.replace("\t", "    ")
    if keep_formatting:
        return _CONTROL_KEEP_FORMATTING_RE.sub("", line)
    return _CONTROL_RE.sub("", strip_formatting(line))


def clean_lines(text: str, keep_formatting: bool = False) -> list[str]:
    """The lines IRC can carry of ``text``: split at every line break, cleaned, blank ones dropped."""
    lines = (_clean(line, keep_formatting).rstrip() for line in _NEWLINE_RE.split(text))
    return [line for line in lines if line.strip()]


def split_to_bytes(line: str, budget: int, encoding: str = "utf-8") -> list[str]:
    """``line`` in pieces of at most ``budget`` encoded bytes, cut between words when possible.

    Never cuts inside a character.
    """
    budget = max(budget, 8)
    pieces: list[str] = []
    while line:
        if len(line.encode(encoding, "replace")) <= budget:
            pieces.append(line)
            break
        used = cut = 0
        for ch in line:
            size = len(ch.encode(encoding, "replace"))
            if used + size > budget:
                break
            used += size
            cut += 1
        space = line.rfind(" ", 0, cut + 1)
        if space > cut // 2:
            cut = space
        piece = line[:cut].rstrip()
        if piece:
            pieces.append(piece)
        line = line[cut:].lstrip()
    return pieces


def irc_lower(text: str, casemapping: str = "rfc1459") -> str:
    """IRC's case folding: ASCII, plus ``[]\\~`` as the upper case of ``{}|^`` under rfc1459."""
    text = text.lower()
    if casemapping == "ascii":
        return text
    table = {"[": "{", "]": "}", "\\": "|"}
    if casemapping != "strict-rfc1459":
        table["~"] = "^"
    return text.translate(str.maketrans(table))


# -- the protocol ------------------------------------------------------------------------


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


def _arg(text: str) -> str:
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


class TokenBucket:
    """Flood control: ``burst`` lines at once, then one line every ``interval`` seconds.

    ``sent`` keeps the (monotonic) times of the most recent lines let through.
    """

    def __init__(self, burst: int, interval: float) -> None:
        self.burst = max(1, int(burst))
        self.interval = max(0.0, float(interval))
        self.tokens = float(self.burst)
        self._stamp = time.monotonic()
        self.sent: deque[float] = deque(maxlen=1024)
        self.waits = 0

    def _refill(self, now: float) -> None:
        if self.interval <= 0:
            self.tokens = float(self.burst)
        else:
            self.tokens = min(float(self.burst), self.tokens + (now - self._stamp) / self.interval)
        self._stamp = now

    async def take(self) -> None:
        """Wait until a line may go, and count it."""
        while True:
            now = time.monotonic()
            self._refill(now)
            if self.tokens >= 1.0:
                self.tokens -= 1.0
                self.sent.append(now)
                return
            self.waits += 1
            await asyncio.sleep((1.0 - self.tokens) * self.interval)


# -- the adapter --------------------------------------------------------------------------


class IrcAdapter(BasePlatformAdapter):
    """The gateway's IRC platform (settings: :class:`IrcSettings`, documented in ``docs/irc.md``)."""

    MAX_MESSAGE_LENGTH = 400
    #: The adapter reconnects by itself; the gateway only watches it.
    reconnects_itself = True

    def __init__(self, config: PlatformConfig, platform: Any = None) -> None:
        super().__init__(config, platform or "irc")
        self.settings = IrcSettings.from_config(config)
        self.max_message_length = self.settings.max_message_length
        #: The nick the server knows us by (after a collision it is not the configured one).
        self.nick = self.settings.nick
        self.bucket = TokenBucket(self.settings.flood_burst, self.settings.flood_interval)
        #: Registrations so far (1 after connecting, +1 per reconnection).
        self.connections = 0
        #: Server PINGs answered.
        self.pings_answered = 0
        #: The channels we are in (as the server names them).
        self.joined: set[str] = set()
        #: Why the last connection attempt failed (``None`` after a success).
        self.last_error: str | None = None
        #: Why the connection last dropped.
        self.last_drop: str | None = None
        self._casemapping = "rfc1459"
        self._chantypes = "#&"
        self._mask_room: int | None = None  # len("user@host") the server showed in its welcome
        self._reader: LineReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._runner: asyncio.Task[None] | None = None
        self._closing = False
        self._connected_event: asyncio.Event | None = None
        self._send_lock: asyncio.Lock | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ids = itertools.count(1)
        self._senders: OrderedDict[str, str] = OrderedDict()
        self._connected_at = 0.0

    # -- connecting --------------------------------------------------------------------

    async def connect(self, *, is_reconnect: bool = False) -> bool:
        """Connect, register and join; ``False`` (and :attr:`last_error`) when that fails.

        Once connected, a dropped connection is re-established by the adapter
        itself; calling ``connect`` again meanwhile waits for that.
        """
        if self._runner is not None and not self._runner.done():
            if not self.is_connected:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._event().wait(), self.settings.connect_timeout)
            return self.is_connected
        self._closing = False
        try:
            await self._open()
        except (TimeoutError, OSError, IrcError, UnicodeError) as exc:
            self.last_error = _describe(exc)
            log.warning("irc: cannot connect to %s: %s", self._where(), self.last_error)
            self._mark_disconnected()
            await self._close_transport()
            return False
        self._runner = asyncio.create_task(self._run(), name=f"irc-{self.settings.server}")
        return True

    async def disconnect(self) -> None:
        """Send ``QUIT``, close the connection and stop reconnecting."""
        self._closing = True
        runner, self._runner = self._runner, None
        writer = self._writer
        if writer is not None and not writer.is_closing():
            try:
                self._write(f"QUIT {_arg(self.settings.quit_message)}")
                await asyncio.wait_for(writer.drain(), 2.0)
                if runner is not None and not runner.done():
                    # The server closes the connection once it has read QUIT; the reader sees that.
                    await asyncio.wait_for(asyncio.shield(runner), 3.0)
            except (TimeoutError, OSError, IrcError):
                pass
        if runner is not None and not runner.done():
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner
        await self._close_transport()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self.joined.clear()
        self._mark_disconnected()

    def _event(self) -> asyncio.Event:
        if self._connected_event is None:
            self._connected_event = asyncio.Event()
        return self._connected_event

    def _mark_connected(self) -> None:
        super()._mark_connected()
        self._event().set()

    def _mark_disconnected(self) -> None:
        super()._mark_disconnected()
        self._event().clear()

    def _where(self) -> str:
        scheme = "ircs" if self.settings.tls else "irc"
        return f"{scheme}://{self.settings.server}:{self.settings.port}"

    async def _open(self) -> None:
        """Open the connection, register and join the channels (within ``connect_timeout``)."""
        s = self.settings
        ssl_context = None
        if s.tls:
            import ssl

            ssl_context = ssl.create_default_context(cafile=s.tls_ca_file)
            if not s.tls_verify:
                ssl_context.check_hostname = False
                ssl_context.verify_mode = ssl.CERT_NONE
        async with asyncio.timeout(s.connect_timeout):
            reader, writer = await asyncio.open_connection(
                s.server, s.port, ssl=ssl_context, server_hostname=s.server if ssl_context else None
            )
            self._reader, self._writer = LineReader(reader, MAX_INCOMING_LINE, self._overlong), writer
            await self._register()
        self.connections += 1
        self._connected_at = time.monotonic()
        self.last_error = None
        self._mark_connected()
        log.info("irc: connected to %s as %s", self._where(), self.nick)
        for channel, key in s.channels:
            await self._send_paced(f"JOIN {channel} {key}" if key else f"JOIN {channel}")

    async def _register(self) -> None:
        s = self.settings
        if s.password:
            self._write(f"PASS {_arg(s.password)}")
        attempt, limit = 0, None
        candidate = alternative_nick(s.nick, attempt, limit)
        self._write(f"NICK {candidate}")
        self._write(f"USER {s.username} 0 * {_arg(s.realname)}")
        await self._drain()
        while True:
            message = await self._read_message()
            if message is None:
                raise IrcError("the server closed the connection during registration")
            command = message.command
            if command == "PING":
                self._write(f"PONG {_arg(message.param(0))}")
                self.pings_answered += 1
            elif command == "001":
                self.nick = message.param(0) or candidate
                mask = message.params[-1].rsplit(" ", 1)[-1] if message.params else ""
                if "!" in mask and "@" in mask:
                    self._mask_room = len(mask.split("!", 1)[1])
                return
            elif command in ("433", "436", "437", "432"):
                if command == "432":  # erroneous nickname: here, too long for the server
                    if len(candidate) <= 1:
                        raise IrcError(f"the server refuses the nick {candidate!r}: {message.params[-1]}")
                    limit = len(candidate) - 1
                else:
                    attempt += 1
                if attempt > MAX_NICK_ATTEMPTS or (limit is not None and limit < 1):
                    raise IrcError(f"no free nick found (last tried {candidate!r})")
                previous, candidate = candidate, alternative_nick(s.nick, attempt, limit)
                log.info("irc: nick %s refused (%s); trying %s", previous, command, candidate)
                self._write(f"NICK {candidate}")
                await self._drain()
            elif command == "ERROR":
                raise IrcError(f"the server said: {message.param(0)}")
            elif command in _FATAL:
                raise IrcError(
                    f"the server refused us ({command}): {message.params[-1] if message.params else ''}"
                )

    # -- the running connection -----------------------------------------------------------

    async def _run(self) -> None:
        """Serve the connection; when it drops, reconnect with growing delays until :meth:`disconnect`."""
        s = self.settings
        delay = s.reconnect_delay
        while not self._closing:
            try:
                reason = await self._serve()
            except (TimeoutError, OSError, IrcError, ValueError) as exc:
                reason = _describe(exc)
            except Exception as exc:  # a bug here must not leave a dead connection marked as alive
                log.exception("irc: the connection to %s failed unexpectedly", self._where())
                reason = _describe(exc)
            if self._closing:
                break
            lasted = time.monotonic() - self._connected_at
            self._mark_disconnected()
            self.joined.clear()
            await self._close_transport()
            self.last_error = self.last_drop = reason
            if lasted >= STABLE_AFTER:
                delay = s.reconnect_delay
            log.warning("irc: disconnected from %s (%s); reconnecting", self._where(), reason)
            while not self._closing:
                await asyncio.sleep(delay * random.uniform(1.0, 1.25))  # noqa: S311 - jitter, not secrets
                delay = min(delay * 2, s.reconnect_max_delay)
                try:
                    await self._open()
                    break
                except Exception as exc:
                    self.last_error = _describe(exc)
                    log.warning("irc: reconnecting to %s failed: %s", self._where(), self.last_error)
                    self._mark_disconnected()
                    await self._close_transport()

    async def _serve(self) -> str:
        """Read and act on lines until the connection ends; returns why it ended."""
        s = self.settings
        while True:
            message = await self._read_message(keepalive=s.ping_interval)
            if message is None:
                return "the server closed the connection"
            if message.command == "ERROR":
                return f"the server said: {message.param(0)}"
            self._on_message(message)

    async def _read_message(self, keepalive: float = 0.0) -> IrcMessage | None:
        """The next parsed line; ``None`` at the end of the stream.

        With ``keepalive``, a silence that long is answered with a ``PING`` of
        ours, and a further ``ping_timeout`` of silence is an error.
        """
        reader = self._reader
        if reader is None:
            return None
        pinged = False
        while True:
            try:
                if keepalive > 0:
                    wait = self.settings.ping_timeout if pinged else keepalive
                    data = await asyncio.wait_for(reader.readline(), wait)
                else:
                    data = await reader.readline()
            except TimeoutError:
                if pinged:
                    raise IrcError(f"no answer from the server for {self.settings.ping_timeout:g}s") from None
                pinged = True
                self._write("PING :hermes-keepalive")
                await self._drain()
                continue
            if not data:
                return None
            pinged = False
            message = parse_line(self._decode(data))
            if message is not None:
                return message

    def _overlong(self, size: int) -> None:
        log.warning(
            "irc: %s sent a line of %s bytes (IRC lines are at most %s, tags included); it was dropped",
            self._where(),
            f"{size:,}",
            f"{MAX_INCOMING_LINE:,}",
        )

    def _decode(self, data: bytes) -> str:
        try:
            return data.decode(self.settings.encoding)
        except UnicodeDecodeError:
            return data.decode("latin-1")

    def _on_message(self, message: IrcMessage) -> None:
        command = message.command
        if command == "PING":
            self._write(f"PONG {_arg(message.param(0))}")
            self.pings_answered += 1
        elif command == "PRIVMSG":
            self._on_privmsg(message)
        elif command == "005":
            self._on_isupport(message.params[1:-1])
        elif command == "NICK" and self._is_me(message.nick):
            self.nick = message.param(0) or self.nick
        elif command == "JOIN" and self._is_me(message.nick):
            self.joined.add(message.param(0))
        elif command == "PART" and self._is_me(message.nick):
            self._forget_channel(message.param(0))
        elif command == "KICK" and self._is_me(message.param(1)):
            self._forget_channel(message.param(0))
            log.warning("irc: kicked from %s by %s: %s", message.param(0), message.nick, message.param(2))
        elif command in ("403", "405", "471", "473", "474", "475", "477"):
            log.warning("irc: cannot join %s: %s", message.param(1), message.params[-1])

    def _on_isupport(self, tokens: list[str]) -> None:
        for token in tokens:
            key, _, value = token.partition("=")
            if key == "CASEMAPPING" and value:
                self._casemapping = value.lower()
            elif key == "CHANTYPES" and value:
                self._chantypes = value

    def _forget_channel(self, channel: str) -> None:
        folded = irc_lower(channel, self._casemapping)
        self.joined = {c for c in self.joined if irc_lower(c, self._casemapping) != folded}

    def _is_me(self, nick: str | None) -> bool:
        return bool(nick) and irc_lower(nick, self._casemapping) == irc_lower(self.nick, self._casemapping)

    def is_channel(self, target: str) -> bool:
        return bool(target) and target[0] in self._chantypes

    def addressed_text(self, text: str) -> str | None:
        """The text after ``<our nick>:`` or ``<our nick>,``; ``None`` when the line is not for us."""
        match = _ADDRESSED_RE.match(text)
        if match is None or not self._is_me(match.group(1)):
            return None
        return match.group(2).strip()

    def _on_privmsg(self, message: IrcMessage) -> None:
        sender = message.nick
        if not sender or self._is_me(sender) or len(message.params) < 2:
            return
        folded = irc_lower(sender, self._casemapping)
        if any(irc_lower(n, self._casemapping) == folded for n in self.settings.ignore_nicks):
            return
        target, text = message.params[0], message.params[1]
        if text.startswith("\x01"):
            return  # CTCP (ACTION, VERSION, ...): not a message for the agent
        text = _CONTROL_RE.sub("", strip_formatting(text.replace("\t", " ")))
        if self.is_channel(target):
            body = self.addressed_text(text)
            chat_id, chat_type = target, "channel"
        elif self._is_me(target):
            body = self.addressed_text(text)
            body = text.strip() if body is None else body
            chat_id, chat_type = private_chat(message), "dm"
        else:
            return
        if not body:
            return
        message_id = message.tags.get("msgid") or f"irc-{next(self._ids)}"
        if chat_type == "channel":
            self._senders[message_id] = sender
            while len(self._senders) > 256:
                self._senders.popitem(last=False)
        event = MessageEvent(
            text=body,
            message_type=MessageType.COMMAND if body.startswith("/") else MessageType.TEXT,
            source=SessionSource(
                platform=self.platform,
                chat_id=chat_id,
                chat_type=chat_type,
                user_id=sender,
                user_name=sender,
                chat_name=chat_id,
            ),
            message_id=message_id,
            raw_message=message.raw,
        )
        if len(self._tasks) >= MAX_PENDING:
            log.warning(
                "irc: %d messages already waiting for answers; dropped one from %s", MAX_PENDING, sender
            )
            return
        task = asyncio.create_task(self._dispatch(event), name=f"irc-message-{message_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _dispatch(self, event: MessageEvent) -> None:
        try:
            await self.handle_message(event)
        except Exception:
            log.exception("irc: handling a message from %s failed", event.chat_id)

    # -- sending --------------------------------------------------------------------------

    async def send(
        self,
        chat_id: str,
        content: str,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SendResult:
        """Send ``content`` to a channel or a nick, one ``PRIVMSG`` per line, paced.

        In a channel, a reply (``reply_to`` naming a message the adapter handed
        over) starts with ``<sender>: `` unless ``reply_prefix`` is off.
        """
        target = (chat_id or "").strip()
        if not self.is_channel(target):
            target = target.split("!", 1)[0]  # a private chat: nick!identity
        if not target or re.search(r"[\s,\x00-\x1f]", target):
            return SendResult(success=False, error=f"not a channel or nick: {chat_id!r}")
        lines = self.format_lines(target, content, reply_to)
        if not lines:
            return SendResult(
                success=False, error="nothing to send (empty after removing control characters)"
            )
        if self._send_lock is None:
            self._send_lock = asyncio.Lock()
        async with self._send_lock:
            for index, line in enumerate(lines):
                if not self.is_connected or self._writer is None:
                    error = f"not connected to {self._where()}" + (
                        f" (sent {index} of {len(lines)} lines)" if index else ""
                    )
                    return SendResult(success=False, error=error, retryable=True)
                await self.bucket.take()
                try:
                    self._write(f"PRIVMSG {target} :{line}")
                    await self._drain()
                except (OSError, IrcError) as exc:
                    return SendResult(success=False, error=_describe(exc), retryable=True)
        return SendResult(
            success=True, message_id=f"irc-out-{next(self._ids)}", raw_response={"lines": lines}
        )

    def format_lines(self, target: str, content: str, reply_to: str | None = None) -> list[str]:
        """The ``PRIVMSG`` texts :meth:`send` would send to ``target`` for ``content``."""
        s = self.settings
        lines = clean_lines(content or "", s.keep_formatting)
        if not lines:
            return []
        sender = self._senders.pop(reply_to, None) if reply_to else None
        if sender and s.reply_prefix and self.is_channel(target):
            lines[0] = f"{sender}: {lines[0]}"
        budget = self.line_budget(target)
        return [piece for line in lines for piece in split_to_bytes(line, budget, s.encoding)]

    def line_budget(self, target: str) -> int:
        """The bytes of text one ``PRIVMSG`` to ``target`` may carry.

        Counts what the server puts in front when it relays the line:
        ``:nick!user@host PRIVMSG target :`` and the closing CR LF.
        """
        encoding = self.settings.encoding
        mask_room = max(self._mask_room or 0, len(self.settings.username) + 1 + 1 + HOST_ROOM)
        around = f":{self.nick}! PRIVMSG {target} :".encode(encoding, "replace")
        return LINE_LIMIT - 2 - len(around) - mask_room

    async def _send_paced(self, line: str) -> None:
        await self.bucket.take()
        self._write(line)
        await self._drain()

    def _write(self, line: str) -> None:
        writer = self._writer
        if writer is None or writer.is_closing():
            raise IrcError("the connection is closed")
        data = line.encode(self.settings.encoding, "replace")[: LINE_LIMIT - 2] + b"\r\n"
        writer.write(data)

    async def _drain(self) -> None:
        writer = self._writer
        if writer is not None:
            await writer.drain()

    async def _close_transport(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is None:
            return
        writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.wait_closed(), 2.0)

    async def get_chat_info(self, chat_id: str) -> dict[str, Any]:
        return {"id": chat_id, "name": chat_id, "type": "channel" if self.is_channel(chat_id) else "dm"}


# Numeric replies that end a registration attempt (banned, throttled, server full...).
_FATAL = frozenset({"463", "464", "465", "466"})


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
