"""Plugins written against Hermes Agent 0.19's contract, loaded through the real kernel: a platform
adapter that builds events and results the 0.19 way, a memory provider that reads ``sync_turn``'s
``messages``, a context engine using 0.19's memory helpers, and media backends calling the save
helpers with Hermes' parameter names."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from pathlib import Path

from kernel import Kernel
from kernel.host import HostSession

PLATFORM = """
from gateway.config import Platform
from gateway.platforms.base import (
    MEDIA_TAG_CLEANUP_RE,
    BasePlatformAdapter,
    MessageEvent,
    MessageType,
    SendResult,
)


class ChatAdapter(BasePlatformAdapter):
    def __init__(self, config):
        super().__init__(config, Platform("chat"))
        self.sent = []

    async def connect(self, *, is_reconnect=False):
        return True

    async def disconnect(self):
        return None

    async def send(self, chat_id, content, reply_to=None, metadata=None):
        self.sent.append((chat_id, content))
        return SendResult(True, "m%d" % len(self.sent), None, None, False, None, [], None)

    async def get_chat_info(self, chat_id):
        return {"name": chat_id, "type": "dm"}

    def inbound(self, text, raw):
        source = self.build_source("c1", chat_type="group", user_id="u1", guild_id="g9")
        # Hermes 0.19's positional order: text, type, source, raw_message, message_id.
        return MessageEvent(text, MessageType.TEXT, source, raw, "41")


def register(ctx):
    ctx.register_platform(name="chat", label="Chat", adapter_factory=lambda cfg: ChatAdapter(cfg))
"""


def test_a_platform_plugin_builds_0_19_events_and_uses_the_adapter_defaults(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], home: Path
) -> None:
    plugin_dir("platforms/chat", PLATFORM, manifest={"name": "chat", "kind": "platform", "version": "1"})
    k = make_kernel(config={"plugins": {"enabled": ["platforms/chat"]}})
    from gateway.config import PlatformConfig

    adapter = k.platforms.get("chat").adapter_factory(PlatformConfig(enabled=True))
    event = adapter.inbound("/Reset@bot  keep —all", {"update": 7})
    assert event.raw_message == {"update": 7} and event.message_id == "41"
    assert event.source.chat_type == "group" and event.source.guild_id == "g9"
    assert event.is_command() is True
    assert event.get_command() == "reset" and event.get_command_args() == "keep --all"
    assert adapter.inbound("/tmp/notes.txt is here", None).get_command() is None
    assert adapter.inbound("hello", None).is_command() is False

    photo = home / "cache" / "images" / "cat.png"
    photo.parent.mkdir(parents=True)
    photo.write_bytes(b"\x89PNG")
    reply = f"Here it is\n[[audio_as_voice]]\nMEDIA:{photo}\n"
    media, text = adapter.extract_media(reply)
    assert media == [(str(photo), True)] and text == "Here it is"
    assert adapter.strip_media_directives_for_display(reply) == "Here it is"
    assert adapter.filter_media_delivery_paths([(str(photo), False), ("/etc/shadow", False)]) == [
        (str(photo.resolve()), False)
    ]
    from gateway.platforms.base import MEDIA_TAG_CLEANUP_RE

    assert MEDIA_TAG_CLEANUP_RE.search(reply)["path"] == str(photo)

    result = asyncio.run(adapter.send_image("c1", "https://img.example/x.png", caption="look"))
    assert result.success and result.retry_after is None and result.continuation_message_ids == []
    asyncio.run(adapter.send_clarify("c1", "Which?", ["tea", "coffee"], "q1", "s1"))
    assert adapter.sent == [("c1", "look\nhttps://img.example/x.png"), ("c1", "Which?\n1. tea\n2. coffee")]
    assert asyncio.run(adapter.edit_message("c1", "m1", "new")).success is False
    pieces = adapter.truncate_message("```py\n" + "x = 1\n" * 30 + "```", 60)
    assert len(pieces) > 1 and all(len(p) <= 60 and p.startswith("```py") for p in pieces)
    assert all(p.rstrip().endswith("```") for p in pieces)

    adapter._pending_messages["s1"] = event
    assert adapter.has_pending_interrupt("s1") and adapter.get_pending_message("s1") is event
    assert not adapter.has_pending_interrupt("s1")


MEMORY = """
from agent.memory_provider import MemoryProvider

SEEN = []


class Journal(MemoryProvider):
    @property
    def name(self):
        return "journal"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        pass

    def get_tool_schemas(self):
        return []

    def sync_turn(self, user_content, assistant_content, *, session_id="", messages=None):
        SEEN.append((user_content, assistant_content, messages))


def register(ctx):
    ctx.register_memory_provider(Journal())
"""


def test_a_memory_provider_gets_the_conversation_in_sync_turn(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir("memory/journal", MEMORY, manifest="")
    k = make_kernel(config={"memory": {"provider": "journal"}})
    history = [
        {"role": "user", "content": "what time is it"},
        {"role": "assistant", "tool_calls": [{"id": "t1", "function": {"name": "clock"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "noon"},
        {"role": "assistant", "content": "noon"},
    ]
    with HostSession(k, session_id="s-1", model="m", platform="embed") as session:
        session.begin_turn("what time is it")
        session.end_turn("noon", history=history)
    import sys

    seen = next(m for n, m in sys.modules.items() if n.endswith("journal")).SEEN
    assert len(seen) == 1 and seen[0][:2] == ("what time is it", "noon")
    assert seen[0][2] == history and seen[0][2] is not history


ENGINE = """
from agent.context_engine import MEMORY_CONTEXT_MAX_CHARS, ContextEngine, sanitize_memory_context


class Keeper(ContextEngine):
    @property
    def name(self):
        return "keeper"

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False, memory_context=""):
        note = sanitize_memory_context(memory_context)
        return [{"role": "system", "content": note}] + messages[-1:]

    def update_from_response(self, usage):
        pass


def register(ctx):
    ctx.register_context_engine(Keeper())
"""


def test_a_context_engine_uses_0_19s_memory_helpers_and_tool_names(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir("keeper", ENGINE)
    k = make_kernel(config={"plugins": {"enabled": ["keeper"]}, "context": {"engine": "keeper"}})
    engine = k.providers.context_engine()
    assert engine is not None and engine.name == "keeper", [(p.name, p.error) for p in k.plugins]
    memory = "  api_key=sk-live-0123456789abcdef " + "remember tea. " * 1000
    squeezed = engine.compress([{"role": "user", "content": "hi"}], memory_context=memory)
    note = squeezed[0]["content"]
    assert "sk-live-0123456789abcdef" not in note
    assert len(note) <= 6_000 and note.endswith("remember tea.")
    # Hermes calls engine tools by keyword with its parameter names.
    assert "no tool 'recall'" in engine.handle_tool_call(name="recall", args={})
    assert engine.has_content_to_compress([]) is True
    assert engine.should_defer_preflight_to_real_usage(10) is False
    engine.update_model("m2", 64_000, base_url="http://127.0.0.1:1/v1", api_key="k", provider="p")
    assert engine.context_length == 64_000


MEDIA = """
from agent.image_gen_provider import VALID_ASPECT_RATIOS, normalize_reference_images, save_b64_image
from agent.video_gen_provider import save_b64_video, save_bytes_video
from agent.web_search_provider import get_provider_env

SAVED = {}


def register(ctx):
    SAVED["ratios"] = VALID_ASPECT_RATIOS
    SAVED["refs"] = normalize_reference_images(value=[" a.png ", "", "b.png"])
    SAVED["image"] = save_b64_image(b64_data="{png}", prefix="shot", extension="webp")
    SAVED["video"] = save_b64_video("{mp4}", extension="webm")
    SAVED["raw"] = save_bytes_video(raw=b"\\x00\\x00\\x00\\x18ftypmp42", prefix="clip")
    SAVED["key"] = get_provider_env("SEARCHY_API_KEY")
"""


def test_media_backends_call_the_save_helpers_with_hermes_parameter_names(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], home: Path
) -> None:
    png = base64.b64encode(b"\x89PNG fake").decode()
    mp4 = base64.b64encode(b"not really a video").decode()
    plugin_dir("media", MEDIA.replace("{png}", png).replace("{mp4}", mp4))
    (home / ".env").write_text("SEARCHY_API_KEY= from-dotenv \n")
    k = make_kernel(config={"plugins": {"enabled": ["media"]}})
    assert all(p.enabled for p in k.plugins), [(p.name, p.error) for p in k.plugins]
    import sys

    saved = next(m for n, m in sys.modules.items() if n.endswith("media") and hasattr(m, "SAVED")).SAVED
    assert saved["ratios"] == ("landscape", "square", "portrait")
    assert saved["refs"] == ["a.png", "b.png"]
    assert saved["image"].parent == home / "cache" / "images" and saved["image"].suffix == ".webp"
    assert saved["image"].name.startswith("shot") and saved["image"].read_bytes() == b"\x89PNG fake"
    assert saved["video"].parent == home / "cache" / "videos" and saved["video"].suffix == ".webm"
    assert saved["raw"].suffix == ".mp4" and saved["raw"].name.startswith("clip")
    assert saved["key"] == "from-dotenv"
