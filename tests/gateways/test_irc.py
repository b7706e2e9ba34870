"""The IRC platform (extensions/platforms/irc) against a real IRC server.

A real ngIRCd (Debian package ``ngircd``; ``make test-deps`` unpacks it into .venv/debs) is
started on 127.0.0.1 from ``tests/fixtures/irc/ngircd.conf``, once for the
module.  The tests talk to the bot through a second, raw IRC client written
here on asyncio streams, and run ``hermes-kernel gateway run`` as a
subprocess for the end-to-end check.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import itertools
import os
import re
import signal
import socket
import string
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, DEBS, cli_env, echo_bot, find_program, until
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from ports import free_port

from kernel import Kernel
from kernel.gateway import PlatformConfig, SendResult
from kernel.testing import write_script

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "irc"
PASSWORD = "letmein"
CHANNEL = "#hermes"
DEADLINE = 20.0  # seconds to wait for something that should happen (a hang guard, not a measure)


# -- the server ---------------------------------------------------------------------------


def ngircd_binary() -> str:
    """The ngircd ``make test-deps`` unpacked in .venv/debs, else the system's."""
    found = find_program("ngircd")
    if found is None:
        pytest.fail("ngircd (the IRC server these tests run) is missing: run `make test-deps`")
    return found


class Ngircd:
    """One ngIRCd process on 127.0.0.1, restartable on the same port."""

    #: Ports tried when the first start finds its port taken (as tests/redis_server.py does).
    PORT_TRIES = 5

    def __init__(self, workdir: Path, ssl_section: str = "", tls_port: int | None = None) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.tls_port = tls_port
        self.ssl_section = ssl_section
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "conf.d").mkdir(exist_ok=True)
        self.config = workdir / "ngircd.conf"
        self._write_config()
        self.log = workdir / "ngircd.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def _write_config(self) -> None:
        template = string.Template((FIXTURES / "ngircd.conf").read_text(encoding="utf-8"))
        self.config.write_text(
            template.substitute(
                port=self.port,
                password=PASSWORD,
                pidfile=self.workdir / "ngircd.pid",
                includedir=self.workdir / "conf.d",
                ssl=self.ssl_section,
            ),
            encoding="utf-8",
        )

    def start(self) -> None:
        """Start it and wait until it listens.  On its first start a port another process took in the
        meantime is given up for a new one (a restart keeps its port: the tests reconnect to it)."""
        for attempt in range(self.PORT_TRIES):
            if self._launch():
                return
            if self.starts > 1 or self.tls_port is not None or attempt == self.PORT_TRIES - 1:
                break
            self.port = free_port()
            self._write_config()
            self.starts = 0
        pytest.fail(f"ngircd exited with {self.proc.returncode if self.proc else '?'}:\n{self.log_text()}")

    def _launch(self) -> bool:
        """Run it once: ``True`` once it listens, ``False`` if it exited because its port was taken."""
        logged = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [ngircd_binary(), "--nodaemon", "--config", str(self.config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.starts += 1
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                if b"Address already in use" in self.log.read_bytes()[logged:]:
                    return False
                pytest.fail(f"ngircd exited with {self.proc.returncode}:\n{self.log_text()}")
            # Its own line, not a connection: another process may be listening on a port it lost.
            said = self.log.read_bytes()[logged:]
            ports = [p for p in (self.port, self.tls_port) if p is not None]
            if all(f"Now listening on [127.0.0.1]:{p} ".encode() in said for p in ports):
                return True
            time.sleep(0.05)
        pytest.fail(f"ngircd did not listen on port {self.port}:\n{self.log_text()}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-4000:]


def test_a_server_whose_port_was_taken_before_it_started_moves_to_another(tmp_path: Path) -> None:
    """The port is picked when the helper is made and bound when it starts: another process (a worker of
    the suite) may take it in between, and the first start then picks another port."""
    server = Ngircd(tmp_path / "ngircd")
    taken = server.port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        server.start()
        try:
            assert server.port != taken and server.starts == 1
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as conn:
                conn.sendall(b"PING :x\r\n")
                assert b" 451 " in conn.recv(512)  # an IRC server answers (not registered), not the squatter
        finally:
            server.stop()


@pytest.fixture(scope="module")
def ngircd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ngircd]:
    server = Ngircd(tmp_path_factory.mktemp("ngircd"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def ircd(ngircd: Ngircd) -> Ngircd:
    """The module's server, running (a test that stopped it and failed may have left it down)."""
    if not ngircd.running:
        ngircd.start()
    return ngircd


# -- a raw IRC client ---------------------------------------------------------------------


@dataclass
class Line:
    """One line the raw client received."""

    raw: bytes
    prefix: str
    command: str
    params: list[str] = field(default_factory=list)

    @property
    def nick(self) -> str:
        return self.prefix.split("!", 1)[0]

    @property
    def text(self) -> str:
        return self.params[-1] if self.params else ""


def parse(raw: bytes) -> Line:
    text = raw.decode("utf-8").rstrip("\r\n")  # strict: the bot must never send broken UTF-8
    prefix = ""
    if text.startswith(":"):
        prefix, text = text[1:].split(" ", 1)
    head, sep, trailing = text.partition(" :")
    params = head.split()
    if sep:
        params.append(trailing)
    return Line(raw=raw, prefix=prefix, command=params[0].upper(), params=params[1:])


class RawClient:
    """A bare IRC client: registers, answers PING, records every line it receives."""

    def __init__(self, port: int, nick: str) -> None:
        self.port = port
        self.nick = nick
        self.lines: list[Line] = []
        self._new = asyncio.Event()
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None

    async def connect(self) -> RawClient:
        reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)
        self._task = asyncio.create_task(self._read(reader))
        self.send(f"PASS {PASSWORD}", f"NICK {self.nick}", f"USER {self.nick} 0 * :raw test client")
        await self.expect(lambda m: m.command == "001")
        return self

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while raw := await reader.readline():
            line = parse(raw)
            if line.command == "PING":
                self.send(f"PONG :{line.text}")
            self.lines.append(line)
            self._new.set()

    def send(self, *lines: str) -> None:
        assert self._writer is not None
        for line in lines:
            self._writer.write(line.encode("utf-8") + b"\r\n")

    def say(self, target: str, text: str) -> None:
        self.send(f"PRIVMSG {target} :{text}")

    def mark(self) -> int:
        return len(self.lines)

    async def expect(self, match: Callable[[Line], bool], since: int = 0, timeout: float = DEADLINE) -> Line:
        """The first line from index ``since`` on that matches; fails the test after ``timeout``."""
        end = time.monotonic() + timeout
        index = since
        while True:
            while index < len(self.lines):
                if match(self.lines[index]):
                    return self.lines[index]
                index += 1
            left = end - time.monotonic()
            if left <= 0:
                seen = "\n".join(line.raw.decode("utf-8", "replace").rstrip() for line in self.lines[since:])
                pytest.fail(f"{self.nick} did not receive the expected line; received:\n{seen}")
            self._new.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._new.wait(), min(left, 0.5))

    async def privmsgs(self, sender: str, target: str, count: int, since: int) -> list[Line]:
        """The next ``count`` PRIVMSGs from ``sender`` to ``target``."""
        found: list[Line] = []
        index = since
        while len(found) < count:
            line = await self.expect(
                lambda m: m.command == "PRIVMSG" and m.nick == sender and m.params[0] == target, since=index
            )
            found.append(line)
            index = self.lines.index(line, index) + 1
        return found

    async def close(self) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self.send("QUIT :done")
            self._writer.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


# -- the adapter, as the plugin makes it --------------------------------------------------------


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    """A kernel with the checkout's bundled plugins (the IRC platform among them)."""
    home = tmp_path / "hermes"
    home.mkdir()
    k = Kernel(home=home)
    k.load()
    try:
        yield k
    finally:
        k.shutdown()


@pytest.fixture
def make_bot(kernel: Kernel) -> Callable[..., Any]:
    """``make_bot(port, **settings)``: an adapter from the irc plugin's factory, with a recording handler."""
    spec = kernel.platforms.get("irc")

    def make(port: int, **settings: Any) -> Any:
        defaults = {"password": PASSWORD, "nick": "hermesbot", "channels": [CHANNEL], "ping_interval": 300}
        return echo_bot(spec, port=port, **{**defaults, **settings})

    return make


async def sent_lines(client: RawClient, bot: Any, content: str, target: str = CHANNEL) -> list[str]:
    """``bot.send(target, content)``; the texts ``client`` receives, each checked to be clean IRC."""
    mark = client.mark()
    result = await bot.send(target, content)
    assert isinstance(result, SendResult) and result.success, result
    received = await client.privmsgs(bot.nick, target, len(result.raw_response["lines"]), since=mark)
    for line in received:
        assert len(line.raw) <= 512, line.raw  # as relayed, with the bot's nick!user@host in front
        assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in line.text), line.text
    return [line.text for line in received]


def bot_joined(nick: str, channel: str = CHANNEL) -> Callable[[Line], bool]:
    """Matches the bot's JOIN of ``channel`` or a NAMES reply listing it there."""

    def match(line: Line) -> bool:
        if line.command == "JOIN" and line.nick == nick:
            return line.params[0].lower() == channel.lower()
        if line.command == "353" and line.params[-2].lower() == channel.lower():
            return nick in [n.lstrip("~&@%+") for n in line.text.split()]
        return False

    return match


# -- the tests --------------------------------------------------------------------------------


def test_the_server_is_the_ngircd_make_test_deps_unpacked(ircd: Ngircd) -> None:
    """The tests' server runs from .venv/debs (unpacked by ``make test-deps``), not from a system install."""
    assert ircd.proc is not None
    assert Path(os.readlink(f"/proc/{ircd.proc.pid}/exe")) == (DEBS / "usr" / "sbin" / "ngircd").resolve()


def test_the_platform_is_registered_and_enabled_by_config_or_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "hermes"
    home.mkdir()

    def irc_row(config: dict[str, Any]) -> dict[str, Any]:
        with Kernel(home=home, config=config) as k:
            k.load()
            rows = {row.name: row.to_dict() for row in k.gateway.status()}
        return rows["irc"]

    assert irc_row({})["enabled"] is False
    row = irc_row({"gateway": {"platforms": {"irc": {"enabled": True, "server": "irc.example.net"}}}})
    assert (row["enabled"], row["source"], row["label"]) == (True, "config", "IRC")
    row = irc_row({"gateway": {"platforms": {"irc": {"enabled": True}}}})
    assert row["enabled"] is False and "check_fn" in row["reason"], row

    monkeypatch.setenv("IRC_SERVER", "irc.example.net:6697")
    monkeypatch.setenv("IRC_NICK", "envbot")
    monkeypatch.setenv("IRC_CHANNELS", "#one, two")
    monkeypatch.setenv("IRC_TLS", "yes")
    monkeypatch.setenv("IRC_HOME_CHANNEL", "#one")
    row = irc_row({})
    assert (row["enabled"], row["source"]) == (True, "env"), row
    with Kernel(home=home) as k:
        k.load()
        spec = k.platforms.get("irc")
        config, source, _reason = k.gateway.platform_config(spec)
        assert source == "env" and config is not None
        adapter = spec.adapter_factory(config)
        assert k.gateway.home_channel(spec, config) == "#one"
    s = adapter.settings
    assert (s.server, s.port, s.tls, s.nick) == ("irc.example.net", 6697, True, "envbot")
    assert s.channels == (("#one", None), ("#two", None))
    assert adapter.max_message_length == 400
    assert not adapter.is_connected

    with Kernel(home=home) as k:
        k.load()
        spec = k.platforms.get("irc")
        assert "plain text" in spec.platform_hint and "Markdown" in spec.platform_hint
        with pytest.raises(ValueError, match="nick"):
            spec.adapter_factory(PlatformConfig.from_dict({"server": "x", "nick": "two words"}))
        with pytest.raises(ValueError, match="flood_burst"):
            spec.adapter_factory(PlatformConfig.from_dict({"server": "x", "flood_burst": 0}))


def test_the_bot_joins_answers_addressed_and_private_messages_and_sends_clean_paced_lines(
    ircd: Ngircd, make_bot: Callable[..., Any]
) -> None:
    bot = make_bot(ircd.port, flood_burst=4, flood_interval=0.2, quit_message="see you")

    async def scenario() -> None:
        alice = await RawClient(ircd.port, "alice").connect()
        alice.send(f"JOIN {CHANNEL}")
        await alice.expect(lambda m: m.command == "JOIN" and m.nick == "alice")
        try:
            mark = alice.mark()
            assert await bot.connect() is True
            assert bot.is_connected and bot.nick == "hermesbot"
            await alice.expect(bot_joined("hermesbot"), since=mark)
            await until(lambda: CHANNEL in bot.joined, "the bot saw its own JOIN")

            # Addressed in the channel: reaches the handler, and the answer comes back to alice.
            mark = alice.mark()
            alice.say(CHANNEL, "hermesbot: hello")
            reply = await alice.expect(lambda m: m.command == "PRIVMSG" and m.nick == "hermesbot", since=mark)
            assert reply.params == [CHANNEL, "alice: echo: hello"]
            event = bot.events[-1]
            assert event.text == "hello"
            assert (event.source.chat_id, event.source.chat_type) == (CHANNEL, "channel")
            assert (event.source.user_id, event.source.user_name) == ("alice", "alice")
            assert str(event.source.platform) == "irc" and event.message_id

            # Chatter, CTCP and messages for other nicks do not reach the handler; a later
            # addressed one does (messages are handled in order, so it proves the others were dropped).
            before = len(bot.events)
            mark = alice.mark()
            for text in (
                "just chatting",
                "hermesbotty: not you",
                "someone told hermesbot: hi",
                "hermesbot:",
                "\x01ACTION waves at hermesbot\x01",
            ):
                alice.say(CHANNEL, text)
            alice.say("hermesbot", "\x01VERSION\x01")
            alice.say(CHANNEL, "hermesbot:tight")
            alice.say(CHANNEL, "HermesBot, \x02how\x02 are you?")
            await alice.expect(
                lambda m: m.nick == "hermesbot" and m.text == "alice: echo: how are you?", since=mark
            )
            assert [e.text for e in bot.events[before:]] == ["tight", "how are you?"]

            # A private message: the chat is the sender's nick and identity (user@host), the answer
            # goes to the nick and is not prefixed.
            mark = alice.mark()
            alice.say("hermesbot", "a secret")
            reply = await alice.expect(lambda m: m.command == "PRIVMSG" and m.nick == "hermesbot", since=mark)
            assert reply.params == ["alice", "echo: a secret"]
            event = bot.events[-1]
            assert (event.text, event.source.chat_type) == ("a secret", "dm")
            assert re.fullmatch(r"alice!~?alice@\S+", event.source.chat_id), event.source.chat_id

            # send(): one PRIVMSG per line, control characters removed (formatting codes too).
            content = (
                "first line\r\nsecond\x00 line\x07 with \x01bell\x01\n\n\n"
                "\x0304red\x03 and \x1fbold\x0f\x7f\tend\u2028last"
            )
            lines = ["first line", "second line with bell", "red and bold    end", "last"]
            assert await sent_lines(alice, bot, content) == lines

            # Longer lines than IRC allows are cut between words, or between characters, never inside one.
            words = " ".join(f"word{i}" for i in range(250))
            pieces = await sent_lines(alice, bot, words)
            assert len(pieces) >= 3 and " ".join(pieces) == words
            assert max(len(p.encode()) for p in pieces[:-1]) > 300  # it uses the room there is
            wide = "日本語のテキスト" * 60  # 1440 bytes of UTF-8 and nowhere to cut between words
            pieces = await sent_lines(alice, bot, wide)
            assert len(pieces) >= 3 and "".join(pieces) == wide

            # A burst: every line arrives, in order, paced by the bot's token bucket.
            await asyncio.sleep(bot.bucket.burst * bot.bucket.interval)  # let the bucket refill
            burst = [f"burst {i:02d}" for i in range(14)]
            mark, stamps_before = alice.mark(), len(bot.bucket.sent)
            result = await bot.send(CHANNEL, "\n".join(burst))
            assert result.success
            received = await alice.privmsgs("hermesbot", CHANNEL, len(burst), since=mark)
            assert [line.text for line in received] == burst
            stamps = list(bot.bucket.sent)[stamps_before:]
            assert len(stamps) == len(burst)
            interval, capacity = bot.bucket.interval, bot.bucket.burst
            assert bot.bucket.waits > 0
            for i, stamp in enumerate(stamps):
                # Line i needs i + 1 tokens: `burst` at the start plus one per interval.
                assert stamp - stamps[0] >= (i + 1 - capacity) * interval - 0.01, (i, stamps)
            assert all(b >= a for a, b in itertools.pairwise(stamps))

            # ngIRCd pings an idle client after 5 s and drops it 5 s after an unanswered PING:
            # a second PING means the first PONG was accepted, on the same connection.
            await until(lambda: bot.pings_answered >= 2, "the server pinged the bot twice", deadline=40)
            assert bot.is_connected and bot.connections == 1

            mark = alice.mark()
            await bot.disconnect()
            quit_line = await alice.expect(
                lambda m: m.command == "QUIT" and m.nick == "hermesbot", since=mark
            )
            assert "see you" in quit_line.text
            assert not bot.is_connected
            failed = await bot.send(CHANNEL, "anyone?")
            assert not failed.success and failed.retryable
        finally:
            await bot.disconnect()
            await alice.close()

    asyncio.run(scenario())


def test_whoever_takes_a_departed_users_nick_gets_a_chat_of_their_own(
    ircd: Ngircd, make_bot: Callable[..., Any]
) -> None:
    """alice talks to the bot in private and leaves; mallory takes the nick ``alice`` and writes:
    that is another chat (another session), so mallory cannot continue alice's conversation."""
    bot = make_bot(ircd.port)

    async def scenario() -> None:
        assert await bot.connect() is True
        try:
            alice = await RawClient(ircd.port, "alice").connect()
            mark = alice.mark()
            alice.say("hermesbot", "remember my secret")
            await alice.expect(lambda m: m.command == "PRIVMSG" and m.nick == "hermesbot", since=mark)
            first = bot.events[-1].source.chat_id
            await alice.close()
            mallory = await RawClient(ircd.port, "mallory").connect()
            mark = mallory.mark()
            mallory.send("NICK alice")
            await mallory.expect(lambda m: m.command == "NICK", since=mark)
            mark = mallory.mark()
            mallory.say("hermesbot", "what was my secret?")
            reply = await mallory.expect(
                lambda m: m.command == "PRIVMSG" and m.nick == "hermesbot", since=mark
            )
            assert reply.params[0] == "alice"  # answered, at the nick
            second = bot.events[-1].source.chat_id
            assert first.split("!")[0] == second.split("!")[0] == "alice"
            assert first != second, (first, second)
            await mallory.close()
        finally:
            await bot.disconnect()

    asyncio.run(scenario())


def test_a_taken_nick_is_replaced_by_a_suffixed_one(ircd: Ngircd, make_bot: Callable[..., Any]) -> None:
    async def scenario() -> None:
        holders = [await RawClient(ircd.port, nick).connect() for nick in ("hermes", "hermes_", "hermesbot")]
        carol = await RawClient(ircd.port, "carol").connect()
        carol.send(f"JOIN {CHANNEL}")
        await carol.expect(lambda m: m.command == "JOIN" and m.nick == "carol")
        bots = [make_bot(ircd.port, nick="hermes"), make_bot(ircd.port, nick="hermesbot")]
        try:
            # "hermes" and "hermes_" are taken: the bot registers as "hermes__".
            mark = carol.mark()
            assert await bots[0].connect()
            assert bots[0].nick == "hermes__"
            await carol.expect(bot_joined("hermes__"), since=mark)
            # "hermesbot" is taken and "hermesbot_" is longer than ngIRCd's 9 characters (432):
            # the bot shortens it to "hermesbo_".
            mark = carol.mark()
            assert await bots[1].connect()
            assert bots[1].nick == "hermesbo_"
            await carol.expect(bot_joined("hermesbo_"), since=mark)

            # Each answers to the nick it has, not the one it asked for.
            mark = carol.mark()
            carol.say(CHANNEL, "hermes: not the bot")
            carol.say(CHANNEL, "hermesbot: not the bot either")
            carol.say(CHANNEL, "hermes__: first")
            carol.say(CHANNEL, "hermesbo_: second")
            first = await carol.expect(lambda m: m.command == "PRIVMSG" and m.nick == "hermes__", since=mark)
            second = await carol.expect(
                lambda m: m.command == "PRIVMSG" and m.nick == "hermesbo_", since=mark
            )
            assert (first.text, second.text) == ("carol: echo: first", "carol: echo: second")
            assert [e.text for e in bots[0].events] == ["first"]
            assert [e.text for e in bots[1].events] == ["second"]
        finally:
            for bot in bots:
                await bot.disconnect()
            for client in (*holders, carol):
                await client.close()

    asyncio.run(scenario())


def test_the_bot_reconnects_and_rejoins_after_a_server_restart(
    ircd: Ngircd, make_bot: Callable[..., Any]
) -> None:
    bot = make_bot(ircd.port, reconnect_delay=0.2, reconnect_max_delay=1.0)

    async def scenario() -> None:
        alice = await RawClient(ircd.port, "alice").connect()
        try:
            assert await bot.connect()
            await until(lambda: CHANNEL in bot.joined, "the bot joined")
            assert bot.connections == 1

            await asyncio.to_thread(ircd.stop)
            await until(lambda: not bot.is_connected, "the bot noticed the server went away")
            failed = await bot.send(CHANNEL, "is anyone there?")
            assert not failed.success and failed.retryable, failed
            await alice.close()

            await asyncio.to_thread(ircd.start)
            await until(lambda: bot.is_connected and bot.connections == 2, "the bot reconnected")
            await until(lambda: CHANNEL in bot.joined, "the bot joined its channel again")
            alice = await RawClient(ircd.port, "alice").connect()
            alice.send(f"JOIN {CHANNEL}")
            await alice.expect(bot_joined("hermesbot"))  # listed in the channel's NAMES

            mark = alice.mark()
            alice.say(CHANNEL, "hermesbot: are you back?")
            reply = await alice.expect(lambda m: m.command == "PRIVMSG" and m.nick == "hermesbot", since=mark)
            assert reply.params == [CHANNEL, "alice: echo: are you back?"]
        finally:
            await bot.disconnect()
            await alice.close()

    asyncio.run(scenario())


def test_a_server_that_stops_answering_is_left_and_reconnected(
    ircd: Ngircd, make_bot: Callable[..., Any]
) -> None:
    bot = make_bot(
        ircd.port,
        ping_interval=1,
        ping_timeout=1,
        connect_timeout=1,
        reconnect_delay=0.2,
        reconnect_max_delay=0.5,
    )
    assert ircd.proc is not None
    pid = ircd.proc.pid

    async def scenario() -> None:
        try:
            assert await bot.connect()
            await until(lambda: CHANNEL in bot.joined, "the bot joined")
            os.kill(pid, signal.SIGSTOP)  # the socket stays open, but nothing answers any more
            try:
                await until(lambda: not bot.is_connected, "the bot gave up on the silent server")
                assert "no answer from the server" in (bot.last_drop or ""), bot.last_drop
            finally:
                os.kill(pid, signal.SIGCONT)
            await until(lambda: bot.is_connected and bot.connections == 2, "the bot reconnected")
            await until(lambda: CHANNEL in bot.joined, "the bot joined its channel again")
        finally:
            await bot.disconnect()

    asyncio.run(scenario())


def test_a_refused_server_password_fails_the_connect(ircd: Ngircd, make_bot: Callable[..., Any]) -> None:
    bot = make_bot(ircd.port, password="wrong")

    async def scenario() -> None:
        try:
            assert await bot.connect() is False
            assert not bot.is_connected
            assert "password" in (bot.last_error or "").lower(), bot.last_error
        finally:
            await bot.disconnect()

    asyncio.run(scenario())


def write_self_signed_certificate(cert: Path, key: Path) -> None:
    """A certificate for 127.0.0.1 and localhost, valid for two days, made with ``cryptography`` (installed
    with the dev extras, through ``mcp``): no openssl program needed."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(private.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(private.public_key()), critical=False
        )
        .sign(private, hashes.SHA256())
    )
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))


def test_tls_with_the_servers_certificate(tmp_path: Path, make_bot: Callable[..., Any]) -> None:
    workdir = tmp_path / "tls"
    workdir.mkdir()
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    write_self_signed_certificate(cert, key)
    tls_port = free_port()
    ssl_section = f"[SSL]\n\tCertFile = {cert}\n\tKeyFile = {key}\n\tPorts = {tls_port}\n"
    server = Ngircd(workdir, ssl_section=ssl_section, tls_port=tls_port)
    server.start()
    good = make_bot(tls_port, tls=True, tls_ca_file=str(cert))
    untrusted = make_bot(tls_port, tls=True, nick="stranger", connect_timeout=5)

    async def scenario() -> None:
        try:
            assert await good.connect(), good.last_error
            await until(lambda: CHANNEL in good.joined, "the bot joined over TLS")
            assert good.connections == 1
            # Without the CA file the self-signed certificate is refused (verification is on by default).
            assert await untrusted.connect() is False
            assert "CERTIFICATE_VERIFY_FAILED" in (untrusted.last_error or ""), untrusted.last_error
        finally:
            await good.disconnect()
            await untrusted.disconnect()

    try:
        asyncio.run(scenario())
    finally:
        server.stop()


def test_deliver_sends_to_the_home_channel(ircd: Ngircd, tmp_path: Path) -> None:
    irc = {
        "enabled": True,
        "server": "127.0.0.1",
        "port": ircd.port,
        "password": PASSWORD,
        "nick": "herald",
        "channels": ["#news"],
        "home_channel": "#news",
    }
    home = tmp_path / "hermes"
    home.mkdir()

    async def scenario() -> None:
        erin = await RawClient(ircd.port, "erin").connect()
        try:
            erin.send("JOIN #news")
            await erin.expect(lambda m: m.command == "JOIN" and m.nick == "erin")
            mark = erin.mark()
            with Kernel(home=home, config={"gateway": {"platforms": {"irc": irc}}}) as k:
                k.load()
                results = await asyncio.to_thread(k.gateway.deliver, "irc", "Nightly build:\tgreen.\x07")
            assert [r.success for r in results] == [True]
            line = await erin.expect(lambda m: m.command == "PRIVMSG" and m.nick == "herald", since=mark)
            assert line.params == ["#news", "Nightly build:    green."]
            await erin.expect(lambda m: m.command == "QUIT" and m.nick == "herald", since=mark)
        finally:
            await erin.close()

    asyncio.run(scenario())


def test_gateway_run_chats_with_the_scripted_model_over_irc(ircd: Ngircd, tmp_path: Path) -> None:
    home = tmp_path / "gateway-home"
    home.mkdir()
    script = write_script(home, ["Hello from the scripted model!"])
    config = {
        "model": {"provider": "scripted", "script": str(script)},
        "gateway": {
            "platforms": {
                "irc": {
                    "enabled": True,
                    "server": "127.0.0.1",
                    "port": ircd.port,
                    "password": PASSWORD,
                    "nick": "hermesgw",
                    "channels": ["#gateway"],
                    "flood_interval": 0.05,
                }
            }
        },
    }
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    out = tmp_path / "gateway.out"

    async def scenario(proc: subprocess.Popen[bytes]) -> None:
        dave = await RawClient(ircd.port, "dave").connect()
        try:
            dave.send("JOIN #gateway")
            joined = bot_joined("hermesgw", "#gateway")
            end = time.monotonic() + 60
            while not any(joined(line) for line in dave.lines):
                if proc.poll() is not None:
                    pytest.fail(f"the gateway exited with {proc.returncode}:\n{out.read_text()}")
                if time.monotonic() > end:
                    pytest.fail(f"the gateway's bot never joined #gateway:\n{out.read_text()}")
                await asyncio.sleep(0.1)

            mark = dave.mark()
            dave.say("#gateway", "hermesgw: hi")
            reply = await dave.expect(lambda m: m.command == "PRIVMSG" and m.nick == "hermesgw", since=mark)
            assert reply.params == ["#gateway", "dave: Hello from the scripted model!"]

            mark = dave.mark()
            dave.say("#gateway", "hermesgw: /help")
            first = await dave.expect(lambda m: m.command == "PRIVMSG" and m.nick == "hermesgw", since=mark)
            assert first.text.startswith("dave: ")
            await dave.expect(
                lambda m: m.nick == "hermesgw" and m.text.lstrip().startswith("/help"), since=mark
            )
            await dave.expect(
                lambda m: m.nick == "hermesgw" and m.text.lstrip().startswith("/model"), since=mark
            )

            mark = dave.mark()
            proc.send_signal(signal.SIGTERM)
            await dave.expect(lambda m: m.command == "QUIT" and m.nick == "hermesgw", since=mark)
            code = await asyncio.to_thread(proc.wait, 30)
            assert code == 0, out.read_text()
        finally:
            await dave.close()

    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [*CLI, "gateway", "run"], env=cli_env(home), stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        asyncio.run(scenario(proc))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    output = out.read_text()
    assert "starting irc" in output and "stopped" in output, output
