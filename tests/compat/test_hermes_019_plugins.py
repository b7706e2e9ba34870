"""Plugins written the way published Hermes Agent 0.19 plugins are, loaded through the real kernel.

Each uses a name Hermes 0.19 has and the kernel lacked: a provider profile with 0.19's fields and
``OMIT_TEMPERATURE`` (the request is recorded by a real HTTP server on 127.0.0.1), a platform plugin
importing ``ProcessingOutcome`` and the media helpers of ``gateway.platforms.base`` to build its
adapter, and a context engine built on ``agent.context_compressor``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kernel import Kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from local_server import LocalServer, Reply

USER = [{"role": "user", "content": "hello"}]


def chat_body(text: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer() as running:
        yield running


PROVIDER = """
from providers import register_provider
from providers.base import OMIT_TEMPERATURE, ProviderProfile


class ReasonerProfile(ProviderProfile):
    def get_max_tokens(self, model):
        return 4096 if model and model.endswith("-long") else 256

    def default_vision_model(self):
        return "reasoner-eyes"


register_provider(ReasonerProfile(
    name="reasoner",
    display_name="Reasoner",
    env_vars=("REASONER_API_KEY",),
    base_url="{base_url}",
    supports_vision=True,
    supports_vision_tool_messages=False,
    fixed_temperature=OMIT_TEMPERATURE,
))
"""


def test_a_provider_profile_with_omit_temperature_sends_no_temperature(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], server: LocalServer
) -> None:
    plugin_dir(
        "model-providers/reasoner",
        PROVIDER.replace("{base_url}", server.base_url),
        manifest={"name": "reasoner", "kind": "model-provider", "version": "1"},
    )
    k = make_kernel(config={"model": {"provider": "reasoner", "model": "r1-long", "api_key": "k"}})
    profile = k.providers.get_provider_profile("reasoner")
    assert profile.get_hostname() == "127.0.0.1"
    assert profile.default_vision_model() == "reasoner-eyes"
    assert profile.supports_vision_tool_messages is False

    server.program(Reply(body=chat_body("one")), Reply(body=chat_body("two")))
    client = k.providers.model()
    assert client.complete(USER, temperature=0.7).text == "one"
    assert client.complete(USER, model="r1").text == "two"
    first, second = (seen.json for seen in server.seen)
    assert "temperature" not in first and "temperature" not in second
    # get_max_tokens(model) picks the cap when the call gives none.
    assert first["max_tokens"] == 4096 and second["max_tokens"] == 256


def test_a_fixed_number_still_replaces_the_temperature(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], server: LocalServer
) -> None:
    plugin_dir(
        "model-providers/reasoner",
        PROVIDER.replace("{base_url}", server.base_url).replace("=OMIT_TEMPERATURE", "=0.25"),
        manifest={"name": "reasoner", "kind": "model-provider", "version": "1"},
    )
    k = make_kernel(config={"model": {"provider": "reasoner", "model": "r1", "api_key": "k"}})
    server.program(Reply(body=chat_body("one")))
    k.providers.model().complete(USER, temperature=0.9)
    assert server.seen[0].json["temperature"] == 0.25


def test_omit_temperature_is_one_object_through_copies() -> None:
    import copy
    import pickle

    from kernel.providers.profile import OMIT_TEMPERATURE, ProviderProfile

    profile = ProviderProfile(name="p", fixed_temperature=OMIT_TEMPERATURE)
    assert copy.deepcopy(profile).fixed_temperature is OMIT_TEMPERATURE
    assert pickle.loads(pickle.dumps(OMIT_TEMPERATURE)) is OMIT_TEMPERATURE


EMAIL_PLATFORM = """
from gateway.config import Platform, PlatformConfig
from gateway.platforms.base import (
    BasePlatformAdapter,
    ProcessingOutcome,
    SendResult,
    cache_document_from_bytes,
    cache_media_bytes,
    classify_send_error,
    validate_inbound_media_size,
    validate_media_delivery_path,
)


class EmailAdapter(BasePlatformAdapter):
    def __init__(self, config):
        super().__init__(config, Platform("email"))
        self.outcomes = []

    async def connect(self, *, is_reconnect=False):
        return True

    async def disconnect(self):
        return None

    async def send(self, chat_id, content, reply_to=None, metadata=None):
        return SendResult(success=True, message_id="m1")

    async def get_chat_info(self, chat_id):
        return {"name": chat_id, "type": "dm"}

    def receive_attachment(self, name, data):
        validate_inbound_media_size(len(data), media_type="attachment")
        return cache_media_bytes(data, filename=name)

    async def on_processing_complete(self, event, outcome):
        self.outcomes.append(ProcessingOutcome(outcome))


def register(ctx):
    ctx.register_platform(name="email", label="Email", adapter_factory=lambda cfg: EmailAdapter(cfg))
"""


def test_a_platform_plugin_importing_processing_outcome_builds_its_adapter(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], home: Path, tmp_path: Path
) -> None:
    import asyncio

    plugin_dir(
        "platforms/email", EMAIL_PLATFORM, manifest={"name": "email", "kind": "platform", "version": "1"}
    )
    k = make_kernel(
        config={"plugins": {"enabled": ["platforms/email"]}, "gateway": {"max_inbound_media_bytes": 64}}
    )
    spec = k.platforms.get("email")
    from gateway.config import PlatformConfig
    from gateway.platforms import base

    adapter = spec.adapter_factory(PlatformConfig(enabled=True))
    assert isinstance(adapter, base.BasePlatformAdapter)

    cached = adapter.receive_attachment("report.pdf", b"%PDF-1.4 tiny")
    assert cached.kind == "document" and cached.media_type == "application/pdf"
    saved = Path(cached.path)
    assert saved.read_bytes() == b"%PDF-1.4 tiny"
    assert saved.parent == home / "cache" / "documents" and saved.name.endswith("report.pdf")
    assert home / "cache" / "documents" == base.DOCUMENT_CACHE_DIR
    with pytest.raises(ValueError, match="max_inbound_media_bytes"):
        adapter.receive_attachment("big.png", b"x" * 65)

    asyncio.run(adapter.on_processing_complete(None, "failure"))
    assert adapter.outcomes == [base.ProcessingOutcome.FAILURE]
    assert base.classify_send_error(None, "429 Too Many Requests") == "rate_limited"
    assert base.is_chat_level_not_found(None, "Bad Request: chat not found") is True
    assert base.is_chat_level_not_found(None, "message to edit not found") is False
    assert base.utf16_len("a\N{GRINNING FACE}") == 3
    assert base.safe_url_for_log("https://user:pw@host.example/p?token=s#f") == "https://host.example/p"

    # Delivery: a file of the home's cache is fine; a credential never is.
    assert base.validate_media_delivery_path(str(saved)) == str(saved.resolve())
    secret = Path.home() / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("key")
    assert base.validate_media_delivery_path(str(secret)) is None
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"png")
    assert base.validate_media_delivery_path(str(outside)) == str(outside.resolve())
    old = base.cache_document_from_bytes(b"old", "old.txt")
    os_time = Path(old).stat().st_mtime - 48 * 3600
    import os

    os.utime(old, (os_time, os_time))
    assert base.cleanup_document_cache(24) == 1 and not Path(old).exists() and saved.exists()


def test_strict_media_delivery_takes_only_the_caches_and_allowed_folders(
    make_kernel: Callable[..., Kernel], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_kernel()
    from gateway.platforms.base import cache_image_from_bytes, validate_media_delivery_path

    monkeypatch.setenv("HERMES_MEDIA_DELIVERY_STRICT", "1")
    inside = cache_image_from_bytes(b"\x89PNG", ".png")
    outside = tmp_path / "elsewhere" / "x.png"
    outside.parent.mkdir()
    outside.write_bytes(b"png")
    assert validate_media_delivery_path(inside) == inside
    assert validate_media_delivery_path(str(outside)) is None
    monkeypatch.setenv("HERMES_MEDIA_ALLOW_DIRS", str(outside.parent))
    assert validate_media_delivery_path(str(outside)) == str(outside.resolve())


ENGINE = """
from agent.context_compressor import SUMMARY_PREFIX, ContextCompressor


class KeepItShort(ContextCompressor):
    @property
    def name(self):
        return "keep-short"


def register(ctx):
    ctx.register_context_engine(KeepItShort(model="m", protect_first_n=1, protect_last_n=2))
"""


def test_a_context_engine_built_on_agent_context_compressor(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir("keep-short", ENGINE)
    k = make_kernel(config={"plugins": {"enabled": ["keep-short"]}, "context": {"engine": "keep-short"}})
    engine = k.providers.context_engine()
    assert engine is not None and engine.name == "keep-short"
    from agent.context_compressor import SUMMARY_PREFIX

    conversation = [{"role": "user", "content": f"message number {i}"} for i in range(8)]
    squeezed = engine.compress(conversation, force=True)
    assert squeezed[0] == conversation[0] and squeezed[-2:] == conversation[-2:]
    assert len(squeezed) == 4 and squeezed[1]["content"].startswith(SUMMARY_PREFIX)
    assert "message number 4" in squeezed[1]["content"]
    assert engine.compression_count == 1
