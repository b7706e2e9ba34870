"""The IRC platform's adapter: the asyncio connection, and the glue to the gateway's BasePlatformAdapter.

What it does (the lines themselves are :mod:`.protocol`'s, the settings :mod:`.settings`'):

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
from typing import Any

from kernel.gateway import (
    BasePlatformAdapter,
    MessageEvent,
    MessageType,
    PlatformConfig,
    SendResult,
    SessionSource,
)

from .protocol import (
    MAX_INCOMING_LINE,
    IrcError,
    IrcMessage,
    LineBuffer,
    Privmsg,
    Registration,
    Session,
    TokenBucket,
    arg,
    parse_line,
    pong,
)
from .settings import IrcSettings
from .text import decode_line, encode_line

# Loaded as a plugin, the module lives under the kernel's plugin package: its records go to agent.log.
log = logging.getLogger(__name__)

#: How much is asked of the socket at once (the reader's buffer holds at most a line plus this).
READ_CHUNK = 64 * 1024
#: How many incoming messages may be with the gateway at once; more are dropped (and logged).
MAX_PENDING = 64
#: A connection that lasted this long resets the reconnection backoff.
STABLE_AFTER = 60.0

__all__ = ["MAX_INCOMING_LINE", "IrcAdapter", "IrcError", "IrcSettings", "LineReader"]


class LineReader:
    """Lines from an asyncio stream through a :class:`~.protocol.LineBuffer` of ``limit`` bytes.

    Cancelling :meth:`readline` loses nothing: the bytes read stay in the buffer.
    """

    def __init__(self, reader: asyncio.StreamReader, limit: int, on_overlong: Any) -> None:
        self._reader = reader
        self._lines = LineBuffer(limit, on_overlong)
        self._eof = False

    async def readline(self) -> bytes:
        """The next line with its line end; at the end of the stream what is left, then ``b""``."""
        while True:
            line = self._lines.pop()
            if line is not None:
                return line
            if self._eof:
                return self._lines.end()
            data = await self._reader.read(READ_CHUNK)
            if data:
                self._lines.feed(data)
            else:
                self._eof = True


class IrcAdapter(BasePlatformAdapter):
    """The gateway's IRC platform (settings: :class:`IrcSettings`, documented in ``docs/irc.md``)."""

    MAX_MESSAGE_LENGTH = 400
    #: The adapter reconnects by itself; the gateway only watches it.
    reconnects_itself = True

    def __init__(self, config: PlatformConfig, platform: Any = None) -> None:
        super().__init__(config, platform or "irc")
        self.settings = IrcSettings.from_config(config)
        self.max_message_length = self.settings.max_message_length
        s = self.settings
        self.session = Session(s.nick, s.ignore_nicks, s.username, s.encoding)
        self.bucket = TokenBucket(self.settings.flood_burst, self.settings.flood_interval, time.monotonic())
        #: Registrations so far (1 after connecting, +1 per reconnection).
        self.connections = 0
        #: Why the last connection attempt failed (``None`` after a success).
        self.last_error: str | None = None
        #: Why the connection last dropped.
        self.last_drop: str | None = None
        self._reader: LineReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._runner: asyncio.Task[None] | None = None
        self._closing = False
        self._connected_event: asyncio.Event | None = None
        self._send_lock: asyncio.Lock | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ids = itertools.count(1)
        self._connected_at = 0.0

    @property
    def nick(self) -> str:
        """The nick the server knows us by (after a collision it is not the configured one)."""
        return self.session.nick

    @property
    def joined(self) -> set[str]:
        """The channels we are in (as the server names them)."""
        return self.session.joined

    @property
    def pings_answered(self) -> int:
        """Server PINGs answered."""
        return self.session.pings_answered

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
                self._write(f"QUIT {arg(self.settings.quit_message)}")
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
        return self.settings.where

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
        registration = Registration(s.nick, s.username, s.realname, s.password)
        for line in registration.start():
            self._write(line)
        await self._drain()
        while not registration.done:
            message = await self._read_message()
            if message is None:
                raise IrcError("the server closed the connection during registration")
            if message.command == "PING":
                self._write(pong(message))
                self.session.pings_answered += 1
                continue
            lines = registration.handle(message)
            for line in lines:
                self._write(line)
            if lines:
                await self._drain()
        self.session.nick = registration.nick
        if registration.mask_room is not None:
            self.session.mask_room = registration.mask_room

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
        while True:
            message = await self._read_message(keepalive=self.settings.ping_interval)
            if message is None:
                return "the server closed the connection"
            if message.command == "ERROR":
                return f"the server said: {message.param(0)}"
            lines, privmsg = self.session.handle(message)
            for line in lines:
                self._write(line)
            if privmsg is not None:
                self._on_privmsg(privmsg)

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
            message = parse_line(decode_line(data, self.settings.encoding))
            if message is not None:
                return message

    def _overlong(self, size: int) -> None:
        log.warning(
            "irc: %s sent a line of %s bytes (IRC lines are at most %s, tags included); it was dropped",
            self._where(),
            f"{size:,}",
            f"{MAX_INCOMING_LINE:,}",
        )

    def is_channel(self, target: str) -> bool:
        """Whether ``target`` names a channel (by the server's channel prefixes)."""
        return self.session.is_channel(target)

    def addressed_text(self, text: str) -> str | None:
        """The text after ``<our nick>:`` or ``<our nick>,``; ``None`` when the line is not for us."""
        return self.session.addressed_text(text)

    def _on_privmsg(self, privmsg: Privmsg) -> None:
        message_id = privmsg.message_id or f"irc-{next(self._ids)}"
        if privmsg.chat_type == "channel":
            self.session.remember_sender(message_id, privmsg.sender)
        event = MessageEvent(
            text=privmsg.text,
            message_type=MessageType.COMMAND if privmsg.text.startswith("/") else MessageType.TEXT,
            source=SessionSource(
                platform=self.platform,
                chat_id=privmsg.chat_id,
                chat_type=privmsg.chat_type,
                user_id=privmsg.sender,
                user_name=privmsg.sender,
                chat_name=privmsg.chat_id,
            ),
            message_id=message_id,
            raw_message=privmsg.raw,
        )
        if len(self._tasks) >= MAX_PENDING:
            log.warning(
                "irc: %d messages already waiting for answers; dropped one from %s",
                MAX_PENDING,
                privmsg.sender,
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
                await self._take()
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
        return self.session.privmsg_texts(
            target, content, reply_to, prefix=s.reply_prefix, keep=s.keep_formatting
        )

    def line_budget(self, target: str) -> int:
        """The bytes of text one ``PRIVMSG`` to ``target`` may carry (see :meth:`.Session.line_budget`)."""
        return self.session.line_budget(target)

    async def _take(self) -> None:
        """Wait until the token bucket lets a line go."""
        while (wait := self.bucket.reserve(time.monotonic())) > 0:
            await asyncio.sleep(wait)

    async def _send_paced(self, line: str) -> None:
        await self._take()
        self._write(line)
        await self._drain()

    def _write(self, line: str) -> None:
        writer = self._writer
        if writer is None or writer.is_closing():
            raise IrcError("the connection is closed")
        writer.write(encode_line(line, self.settings.encoding))

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


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
