"""An IRC server that sends lines far over any IRC limit, at registration and later.

The server is our own asyncio server on 127.0.0.1 (a real IRC server never sends such lines),
speaking just enough IRC for the bundled adapter: ``NICK``/``USER`` answered by ``001``, ``JOIN``
echoed, ``PRIVMSG`` both ways.  Each overlong line is padded with spaces and ends in
``ERROR :...``: a reader that drops only the start of such a line and then reads its tail as a
line of its own acts on that ``ERROR`` (a failed ``connect()``, a dropped connection).  The
adapter must drop the whole line with one warning naming the server and the size, keep its
buffer bounded, and read on with the next line.
"""

from __future__ import annotations

import asyncio
import logging
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from conftest import echo_bot

DEADLINE = 20.0  # a hang guard, not a measure
NICK = "hermesbot"
CHANNEL = "#hermes"
TAIL = b"ERROR :the tail of a dropped line\r\n"
CHUNK = b" " * 65536


class HostileServer:
    """A one-client-at-a-time IRC server on 127.0.0.1 that records every line it receives."""

    def __init__(self, registration_flood: int) -> None:
        self.registration_flood = registration_flood
        self.connections = 0
        self.lines: list[bytes] = []
        self.writer: asyncio.StreamWriter | None = None
        self._changed = asyncio.Condition()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> HostileServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writer = writer
        registered = False
        while line := await reader.readline():
            async with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
            words = line.split()
            seen = {entry.split()[0] for entry in self.lines if entry.split()}
            if not registered and {b"NICK", b"USER"} <= seen:
                registered = True
                await send_overlong(writer, self.registration_flood)
                writer.write(f":evil 001 {NICK} :Welcome {NICK}!bot@127.0.0.1\r\n".encode())
            elif words[:1] == [b"JOIN"]:
                writer.write(f":{NICK}!bot@127.0.0.1 JOIN {words[1].decode()}\r\n".encode())
            elif words[:1] == [b"PING"]:
                writer.write(b":evil PONG " + line.split(None, 1)[1])
            elif words[:1] == [b"QUIT"]:
                writer.close()
                return
            await writer.drain()

    async def expect(self, match: Callable[[bytes], bool]) -> bytes:
        """The first line received that ``match``es, waiting for it (bounded)."""
        async with asyncio.timeout(DEADLINE):
            async with self._changed:
                while True:
                    for line in self.lines:
                        if match(line):
                            return line
                    await self._changed.wait()


async def send_overlong(writer: asyncio.StreamWriter, size: int) -> None:
    """A line with no newline for ``size`` bytes (spaces after a NOTICE, sent in chunks), then its tail."""
    writer.write(b":evil NOTICE " + NICK.encode() + b" :")
    left = size
    while left > 0:
        writer.write(CHUNK[:left])
        left -= len(CHUNK)
        await writer.drain()
    writer.write(TAIL)


def make_bot(irc_spec: Any, port: int) -> Any:
    return echo_bot(
        irc_spec,
        port=port,
        nick=NICK,
        channels=[CHANNEL],
        ping_interval=300,
        connect_timeout=DEADLINE,
        reconnect_delay=0.05,
    )


def overlong_warnings(caplog: pytest.LogCaptureFixture, bot: Any) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == type(bot).__module__ and r.levelno == logging.WARNING and " line" in r.getMessage()
    ]


@pytest.mark.parametrize("flood", [70_000, 300_000])
def test_an_overlong_line_during_registration_is_dropped_whole(
    irc_spec: Any, flood: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The 70 KB line arrives between USER and the welcome: ``connect()`` succeeds, its tail is no line."""
    caplog.set_level(logging.WARNING)

    async def scenario() -> tuple[bool, Any, int]:
        server = await HostileServer(flood).start()
        bot = make_bot(irc_spec, server.port)
        try:
            connected = await bot.connect()
            if connected:
                await server.expect(lambda line: line.startswith(b"JOIN"))
            return connected, bot, server.connections
        finally:
            await bot.disconnect()
            await server.close()

    connected, bot, connections = asyncio.run(scenario())
    assert connected is True, bot.last_error
    assert (bot.connections, connections) == (1, 1)
    warned = overlong_warnings(caplog, bot)
    assert len(warned) == 1, [r.getMessage() for r in warned]
    text = warned[0].getMessage()
    size = len(b":evil NOTICE " + NICK.encode() + b" :") + flood + len(TAIL)
    assert f"{size:,}" in text and "127.0.0.1" in text


def test_a_ten_megabyte_line_without_newline_is_dropped_and_reading_goes_on(
    irc_spec: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """On a registered connection, 10 MB with no newline cost bounded memory, one warning, and no
    reconnection; the PRIVMSG that follows reaches the handler and is answered, and so does one
    carrying the most tags IRCv3 allows."""
    caplog.set_level(logging.WARNING)
    flood = 10_000_000

    async def scenario() -> tuple[bytes, int, Any, int]:
        server = await HostileServer(0).start()
        bot = make_bot(irc_spec, server.port)
        try:
            assert await bot.connect() is True, bot.last_error
            await server.expect(lambda line: line.startswith(b"JOIN"))
            assert server.writer is not None
            tracemalloc.start()
            try:
                await send_overlong(server.writer, flood)
                server.writer.write(b":alice!a@127.0.0.1 PRIVMSG " + NICK.encode() + b" :hello\r\n")
                # A line as long as IRCv3 allows (8191 bytes of tags) is no overlong line.
                tags = b"@label=" + b"t" * (8191 - 8) + b" "
                server.writer.write(tags + b":bob!b@127.0.0.1 PRIVMSG " + NICK.encode() + b" :tagged\r\n")
                await server.writer.drain()
                reply = await server.expect(lambda line: line.startswith(b"PRIVMSG alice "))
                await server.expect(lambda line: line.startswith(b"PRIVMSG bob "))
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            return reply, peak, bot, server.connections
        finally:
            await bot.disconnect()
            await server.close()

    reply, peak, bot, connections = asyncio.run(scenario())
    assert reply == b"PRIVMSG alice :echo: hello\r\n"
    assert [e.text for e in bot.events] == ["hello", "tagged"]
    assert (bot.connections, connections) == (1, 1), "the tail of the dropped line was read as ERROR"
    assert peak < 2 * 1024 * 1024, f"reading a 10 MB line took {peak:,} bytes"
    warned = overlong_warnings(caplog, bot)
    assert len(warned) == 1, [r.getMessage() for r in warned]
    size = len(b":evil NOTICE " + NICK.encode() + b" :") + flood + len(TAIL)
    assert f"{size:,}" in warned[0].getMessage() and "127.0.0.1" in warned[0].getMessage()
