"""The bundled IRC plugin's sans-I/O parts (``protocol.py``, ``text.py``, ``settings.py``): bytes and
messages in, lines and events out, no socket, no event loop.

The modules are the ones a kernel loads from the checkout's ``extensions/platforms/irc``.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from kernel import Kernel


@pytest.fixture(scope="module")
def irc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ModuleType]]:
    home: Path = tmp_path_factory.mktemp("hermes")
    with Kernel(home=home) as k:
        k.load()
        package = k.platforms.get("irc").adapter_factory.__module__
        yield {
            name: importlib.import_module(f"{package}.{name}") for name in ("protocol", "settings", "text")
        }


def test_lines_split_across_reads_come_out_whole_and_in_order(irc: dict[str, ModuleType]) -> None:
    dropped: list[int] = []
    buffer = irc["protocol"].LineBuffer(64, dropped.append)
    out: list[bytes] = []
    for chunk in (b"PING :a", b"bc\r", b"\nPRIVMSG #x :h", b"i\r\n:srv 001 me :hi\r\nPART"):
        buffer.feed(chunk)
        while (line := buffer.pop()) is not None:
            out.append(line)
    assert out == [b"PING :abc\r\n", b"PRIVMSG #x :hi\r\n", b":srv 001 me :hi\r\n"]
    assert buffer.end() == b"PART" and buffer.end() == b"" and dropped == []


def test_an_oversized_line_is_dropped_whole_and_the_buffer_stays_bounded(irc: dict[str, ModuleType]) -> None:
    dropped: list[int] = []
    buffer = irc["protocol"].LineBuffer(64, dropped.append)
    buffer.feed(b"PING :ok\r\n")
    assert buffer.pop() == b"PING :ok\r\n"
    for _ in range(100):  # 100 reads of 50 bytes, no newline: never more than limit + one read held
        buffer.feed(b"x" * 50)
        assert buffer.pop() is None
        assert len(buffer) <= 64 + 50
    buffer.feed(b"ERROR :tail of the long line\r\nPING :next\r\n")
    assert buffer.pop() == b"PING :next\r\n"  # the tail was no line of its own
    assert dropped == [5000 + len(b"ERROR :tail of the long line\r\n")]
    buffer.feed(b"y" * 100)
    assert buffer.pop() is None and buffer.end() == b"" and dropped[-1] == 100


def test_parsed_lines_become_registration_lines_and_events(irc: dict[str, ModuleType]) -> None:
    p = irc["protocol"]
    registration = p.Registration("bot", "bot", "Hermes agent", password="s3 cret")
    assert registration.start() == ["PASS :s3 cret", "NICK bot", "USER bot 0 * :Hermes agent"]
    assert registration.handle(p.parse_line(":srv 433 * bot :in use")) == ["NICK bot_"]
    assert registration.handle(p.parse_line(":srv 001 bot_ :Welcome bot_!~bot@host.example")) == []
    assert (
        registration.done
        and registration.nick == "bot_"
        and registration.mask_room == len("~bot@host.example")
    )
    with pytest.raises(p.IrcError, match="464"):
        p.Registration("bot", "bot", "x").handle(p.parse_line(":srv 464 * :Password incorrect"))

    session = p.Session("bot_", ignore_nicks=("spammer",))
    assert session.handle(p.parse_line("PING :token here")) == (["PONG :token here"], None)
    session.handle(p.parse_line(":bot_!u@h JOIN #Room"))
    assert session.joined == {"#Room"}
    _, event = session.handle(p.parse_line("@msgid=42 :alice!a@h PRIVMSG #room :BOT_: \x02hi\x02 there"))
    assert (event.sender, event.chat_id, event.chat_type, event.text, event.message_id) == (
        "alice",
        "#room",
        "channel",
        "hi there",
        "42",
    )
    _, private = session.handle(p.parse_line(":bob!b@h PRIVMSG bot_ :hello"))
    assert (private.chat_id, private.chat_type, private.text) == ("bob!b@h", "dm", "hello")
    for line in (
        ":alice!a@h PRIVMSG #room :chatter",
        ":spammer!s@h PRIVMSG bot_ :buy",
        ":x PRIVMSG bot_ :\x01VERSION\x01",
    ):
        assert session.handle(p.parse_line(line)) == ([], None)
    session.handle(p.parse_line(":op!o@h KICK #ROOM bot_ :bye"))
    assert session.joined == set()


def test_outgoing_text_fits_the_relayed_line_and_replies_name_the_sender(irc: dict[str, ModuleType]) -> None:
    p = irc["protocol"]
    session = p.Session("bot", username="bot")
    session.remember_sender("m1", "alice")
    texts = session.privmsg_texts("#room", "ok\x07\n\n" + "日本語" * 200, reply_to="m1")
    assert texts[0] == "alice: ok"
    for text in texts:
        relayed = f":bot!bot@{'h' * 63} PRIVMSG #room :{text}\r\n".encode()
        assert len(relayed) <= p.LINE_LIMIT
    assert "".join(texts[1:]) == "日本語" * 200
    bucket = p.TokenBucket(2, 1.0, now=100.0)
    assert [bucket.reserve(100.0), bucket.reserve(100.0)] == [0.0, 0.0]
    assert bucket.reserve(100.0) == pytest.approx(1.0) and bucket.reserve(101.0) == 0.0
    assert list(bucket.sent) == [100.0, 100.0, 101.0] and bucket.waits == 1


def test_every_setting_the_adapter_reads_is_a_key_of_the_config_schema(irc: dict[str, ModuleType]) -> None:
    """The IRC keys are checked in config.yaml by the schema beside the plugin (config_schema.json, which
    the kernel joins to its own) and read by settings.py: the two lists are the same, so a new setting
    cannot be added to one of them only."""
    import dataclasses

    from kernel.core.services import config_schema_for

    schema = config_schema_for().build()
    fragment = schema["properties"]["gateway"]["properties"]["platforms"]["properties"]["irc"]
    beside = Path(irc["settings"].__file__).with_name("config_schema.json")
    assert fragment == json.loads(beside.read_text(encoding="utf-8"))
    read = {f.name for f in dataclasses.fields(irc["settings"].IrcSettings)} | {"host"}
    platform_keys = {"enabled", "token", "api_key", "home_channel", "extra"}
    assert set(fragment["properties"]) - platform_keys == read
