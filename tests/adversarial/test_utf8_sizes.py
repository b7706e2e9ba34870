"""Size limits count UTF-8 bytes of the text, not its ``\\uXXXX``-escaped JSON.

The gateway's messages are bounded at 1 MiB and its saved conversations at 32 MiB.  Measured on
ASCII-escaped JSON, a Chinese character counts 6 bytes instead of 3, so a 0.72 MB message was
refused as "over 1 MiB".  Each case: a CJK text under the bound passes (queued, read back, answered),
one over it is refused, and a lone surrogate (which a chat platform can hand over) neither crashes
nor escapes the bound.  A real redis-server (the ``redis_server`` fixture) and the real line-chat
platform of tests/gateways/test_gateway.py for the ingress; the records themselves are read back as a broker
would hand them (text and bytes).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import write_plugin
from hypothesis import given, settings
from hypothesis import strategies as st
from redis_server import RedisServer
from test_gateway import ChatClient, ChatServer, platform_plugin
from test_gateway_scale import run, serve, stop

from kernel.base.safe_yaml import json_text_size, utf8_size
from kernel.gateway.broker import MAX_MESSAGE_BYTES, Inbound, Outbound
from kernel.gateway.sessions import MAX_STATE_BYTES, SessionState, SessionStoreError
from kernel.testing import write_script

MIB = 1024 * 1024
HAN = "汉"  # 3 bytes in UTF-8, 6 characters as a JSON escape
UNDER = HAN * 240_000  # 720,000 bytes: 0.72 MB, 1.44 MB escaped
OVER = HAN * (int(1.1 * MIB) // 3)  # 1.1 MiB


def inbound(text: str) -> Inbound:
    return Inbound(platform="linechat", chat_id="#c", text=text)


def test_the_measure_is_utf8_bytes_and_survives_lone_surrogates() -> None:
    assert utf8_size(HAN) == 3 and utf8_size("é") == 2 and utf8_size("😀") == 4
    assert utf8_size("\ud800") == 3 and utf8_size("\udfff\ud800") == 6
    assert utf8_size(b"\xe6\xb1\x89") == 3
    assert json_text_size(json.dumps({"t": UNDER})) == len('{"t": ""}') + 720_000
    for text, size in [("😀", 4), ("\ud800", 3), ("\udc00\ud800", 6), ("é", 2), ("\x00", 6), ("\x7f", 1)]:
        assert json_text_size(json.dumps(text)) == json_text_size(json.dumps(text).encode()) == size + 2
    assert json_text_size(json.dumps(HAN, ensure_ascii=False).encode()) == 5
    # An escaped backslash followed by "u00e9" is eight characters of text, not an escape.
    assert json_text_size(json.dumps("\\u00e9")) == len(json.dumps("\\u00e9"))


@given(st.text())
@settings(max_examples=300, deadline=None)
def test_the_count_is_the_utf8_size_of_the_unescaped_json(text: str) -> None:
    written = json.dumps({"text": text})
    assert json_text_size(written) == utf8_size(json.dumps({"text": text}, ensure_ascii=False))


def test_a_072_mb_chinese_message_is_read_back_whole() -> None:
    message = inbound(UNDER)
    for record in (message.dumps(), message.dumps().encode("ascii")):
        assert Inbound.loads(record).text == UNDER
    assert (
        Outbound.loads(
            json.dumps({"platform": "p", "chat_id": "c", "text": UNDER * 4, "key": "k", "reply_to": None})
        ).text
        == UNDER * 4
    )


def test_a_chinese_message_over_1_mib_is_refused() -> None:
    with pytest.raises(ValueError, match="larger than"):
        Inbound.loads(inbound(OVER).dumps())
    with pytest.raises(ValueError, match="larger than"):
        Inbound.loads(inbound(OVER).dumps().encode("ascii"))
    # Written without escapes, its bytes are what is counted.
    raw = json.dumps({"platform": "p", "chat_id": "c", "text": OVER}, ensure_ascii=False).encode()
    with pytest.raises(ValueError, match="larger than"):
        Inbound.loads(raw)


def test_lone_surrogates_are_counted_not_crashed_on() -> None:
    text = "\ud800" * (MAX_MESSAGE_BYTES // 3 - 1000)  # escaped: twice the bound
    assert Inbound.loads(inbound(text).dumps()).text == text
    with pytest.raises(ValueError, match="larger than"):
        Inbound.loads(inbound(text + "\udc00" * 2000).dumps())


def test_a_chinese_conversation_under_32_mib_is_saved_and_read_back() -> None:
    content = HAN * (6 * MIB)  # 18 MiB of UTF-8, 36 MiB escaped
    state = SessionState("s", [{"role": "user", "content": content}], 1)
    assert SessionState.loads(state.dumps()) == state
    with pytest.raises(SessionStoreError, match="larger than"):
        SessionState("s", [{"role": "user", "content": HAN * (MAX_STATE_BYTES // 3 + 1)}]).dumps()


# --------------------------------------------------------------------------- the ingress


SIZES_PLUGIN = r'''
"""Rewrites a few words into big texts, and records what the model is asked."""

import json

RECORD = @RECORD@
TEXTS = {"under": "汉" * 240_000, "over": "汉" * (int(1.1 * 1024 * 1024) // 3), "lone": "\ud800 alone"}


def _dispatch(event, gateway, session_store):
    if event.text in TEXTS:
        return {"action": "rewrite", "text": TEXTS[event.text]}
    return None


def _pre(user_message=None, **_):
    with open(RECORD, "a", encoding="utf-8") as out:
        out.write(json.dumps({"length": len(user_message), "head": user_message[:6]}) + "\n")


def register(ctx):
    ctx.register_hook("pre_gateway_dispatch", _dispatch)
    ctx.register_hook("pre_llm_call", _pre)
'''


def sizes_home(root: Path, url: str, port: int) -> Path:
    home = root / "home"
    home.mkdir()
    platform_plugin(home, "linechat")
    write_plugin(home / "plugins", "sizes", SIZES_PLUGIN.replace("@RECORD@", repr(str(root / "asked.jsonl"))))
    script = write_script(home, [{"text": "ok"}] * 10)
    config = {
        "model": {"provider": "scripted", "script": str(script)},
        "gateway": {
            "platforms": {"linechat": {"enabled": True, "port": port}},
            "broker": {"url": url, "prefix": f"u{uuid.uuid4().hex[:8]}", "claim_after": 5},
        },
    }
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return home


def test_the_ingress_queues_a_072_mb_chinese_message_and_refuses_11_mib(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    from kernel import Kernel

    async def scenario() -> None:
        server = await ChatServer().start()
        home = sizes_home(tmp_path, redis_server.url, server.port)
        client = await ChatClient.open(server)
        with Kernel(home=home) as k:
            task = await serve(k, server)
            assert (await client.ask("#u", "nu", "under"))["text"] == "ok"
            too_long = "Sorry, that message is too long to be answered."
            assert (await client.ask("#u", "nu", "over"))["text"] == too_long
            assert (await client.ask("#u", "nu", "lone"))["text"] == "ok"
            await stop(k, task)
        client.close()
        await server.close()

    run(scenario())
    asked = [json.loads(line) for line in (tmp_path / "asked.jsonl").read_text().splitlines()]
    assert asked == [{"length": 240_000, "head": HAN * 6}, {"length": 7, "head": "\ud800 alon"}]
