"""hermes-apertis-provider 1.1.0 and hermes-nanogpt-provider 0.4.6: model provider profiles.

* apertis: entry point in ``hermes_agent.model_providers`` naming a zero-argument
  ``register()`` that calls the module-level ``providers.register_provider``;
  the module imports ``providers`` and ``providers.base`` at import time.
* nanogpt: a *general* plugin (``hermes_agent.plugins``) whose
  ``register(_ctx=None)`` calls ``providers.register_provider``; at import it
  needs ``hermes_cli.plugins.PluginContext`` (a real class: it is used in a
  ``PluginContext | None`` annotation) and calls
  ``hermes_cli.config.get_env_value``.

Both are reached on a local chat-completions server: apertis through
``APERTIS_BASE_URL``, nanogpt through ``model.base_url`` (it has no URL
variable).  nanogpt's model list lives only on nano-gpt.com, so nothing here
ever asks a profile for its models.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from local_server import LocalServer, Reply, Seen

from kernel.agent import AgentSession
from kernel.providers import ProviderProfile
from kernel.testing import HookRecorder

APERTIS = "hermes-apertis-provider"
NANOGPT = "hermes-nanogpt-provider"
PLUGIN_OF = {"apertis": "apertis", "nanogpt": "nanogpt-provider"}


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # pragma: no cover - shown on failure only
        pytest.fail(f"not JSON: {text!r}")


def _completion(seen: Seen) -> Reply:
    """A chat completion that names the model it was asked for and the last user message."""
    body = seen.json
    users = [m for m in body["messages"] if m["role"] == "user"]
    text = f"{body['model']} heard: {users[-1]['content'] if users else ''}"
    return Reply(
        200,
        {
            "id": "chatcmpl-compat",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15},
        },
    )


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(default=_completion) as local:
        yield local


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch, server: LocalServer) -> None:
    """Fake keys, and every URL the two packages read pointed at the local server."""
    monkeypatch.setenv("APERTIS_API_KEY", "fake-apertis-key")
    monkeypatch.setenv("APERTIS_BASE_URL", server.base_url)
    monkeypatch.setenv("NANOGPT_API_KEY", "fake-nanogpt-key")


def _only_chat_completions(server: LocalServer) -> None:
    """The packages made no request of their own (no model listing, nothing but the chat call)."""
    assert server.seen, "the local server got no request"
    assert {(s.method, s.path) for s in server.seen} == {("POST", "/v1/chat/completions")}


def test_both_profiles_are_in_the_catalog_attributed_to_their_plugins(
    compat_kernel: Any, keys: None, server: LocalServer
) -> None:
    k = compat_kernel(APERTIS, NANOGPT)

    # apertis is a model-provider entry point: imported on the first provider lookup, not at load().
    apertis_info = k.plugin("apertis")
    assert apertis_info.kind == "model-provider"
    assert apertis_info.source == "entrypoint"
    assert apertis_info.deferred is True
    nanogpt_info = k.plugin("nanogpt-provider")
    assert nanogpt_info.enabled, nanogpt_info.error
    assert nanogpt_info.source == "entrypoint"

    names = [p.name for p in k.providers.list_providers()]
    assert {"apertis", "nanogpt"} <= set(names)
    apertis_info = k.plugin("apertis")
    assert apertis_info.enabled, apertis_info.error
    assert apertis_info.deferred is False
    assert apertis_info.error is None

    entries = {e.profile.name: e for e in k.providers.catalog.entries()}
    for provider, plugin in PLUGIN_OF.items():
        assert entries[provider].plugin == plugin
        assert entries[provider].source == "entrypoint"
        # The shim's ProviderProfile is the kernel's own class.
        assert isinstance(entries[provider].profile, ProviderProfile)
    # Nothing went to a process-wide catalog or a stray record.
    assert "compat:hermes" not in [p.name for p in k.plugins]

    apertis = k.providers.get_provider_profile("apertis-ai")
    assert apertis.name == "apertis"
    assert k.providers.get_provider_profile("apertis-api") is apertis
    assert apertis.display_name == "Apertis AI"
    assert apertis.base_url == "https://api.apertis.ai/v1"
    # APERTIS_BASE_URL (one of the profile's env_vars) overrides its public URL.
    assert apertis.credentials() == ("fake-apertis-key", server.base_url)

    nanogpt = k.providers.get_provider_profile("nanogpt")
    assert nanogpt.display_name == "NanoGPT"
    assert nanogpt.supports_vision is True
    assert nanogpt.fallback_models == ("hermes-medium",)
    # NANOGPT_MODEL_LIST_ENDPOINT is a setting, not a key: only NANOGPT_API_KEY is asked for.
    assert nanogpt.key_vars() == ["NANOGPT_API_KEY"]


def test_apertis_answers_a_turn_from_the_local_server(
    compat_kernel: Any, keys: None, server: LocalServer
) -> None:
    k = compat_kernel(APERTIS, config={"model": {"provider": "apertis", "model": "gpt-5.4-mini"}})
    recorder = HookRecorder().attach(k)

    with AgentSession(k, session_id="apertis-turn") as session:
        turn = session.run("Say hi to Apertis")
    assert turn.reply == "gpt-5.4-mini heard: Say hi to Apertis"
    assert turn.usage["input_tokens"] == 11
    assert turn.usage["output_tokens"] == 4

    [request] = server.posts()
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer fake-apertis-key"
    assert request.json["model"] == "gpt-5.4-mini"
    assert request.json["messages"][-1] == {"role": "user", "content": "Say hi to Apertis"}
    _only_chat_completions(server)

    [pre] = recorder.of("pre_api_request")
    [post] = recorder.of("post_api_request")
    for event in (pre, post):
        assert event["provider"] == "apertis"
        assert event["base_url"] == server.base_url
        assert event["model"] == "gpt-5.4-mini"
    # The key is never handed to hooks.
    assert "fake-apertis-key" not in json.dumps([pre, post], default=str)


def test_apertis_by_alias_through_a_ctx_free_model_client(
    compat_kernel: Any, keys: None, server: LocalServer
) -> None:
    k = compat_kernel(APERTIS, config={"model": {"provider": "apertis-ai", "model": "claude-sonnet-4-6"}})
    client = k.providers.model()
    assert client.provider == "apertis"
    result = client.complete([{"role": "user", "content": "ping"}])
    assert result.text == "claude-sonnet-4-6 heard: ping"
    [request] = server.posts()
    assert request.headers["authorization"] == "Bearer fake-apertis-key"
    _only_chat_completions(server)


def test_nanogpt_answers_a_turn_from_the_local_server(
    compat_kernel: Any, keys: None, server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read through hermes_cli.config.get_env_value when the package is imported; never used as the key.
    monkeypatch.setenv("NANOGPT_MODEL_LIST_ENDPOINT", "paid")
    k = compat_kernel(
        NANOGPT,
        config={"model": {"provider": "nanogpt", "base_url": server.base_url, "model": "hermes-medium"}},
    )
    profile = k.providers.get_provider_profile("nanogpt")
    assert profile.models_url == "https://nano-gpt.com/api/paid/v1/models"
    assert profile.credentials(k.providers.model_config())[0] == "fake-nanogpt-key"

    with AgentSession(k, session_id="nanogpt-turn") as session:
        first = session.run("Hello NanoGPT")
        second = session.run("And again")
    assert first.reply == "hermes-medium heard: Hello NanoGPT"
    assert second.reply == "hermes-medium heard: And again"

    requests = server.posts()
    assert len(requests) == 2
    for request in requests:
        assert request.path == "/v1/chat/completions"
        assert request.headers["authorization"] == "Bearer fake-nanogpt-key"
        assert request.json["model"] == "hermes-medium"
    # The second request carries the whole conversation.
    assert [m["role"] for m in requests[1].json["messages"]] == ["system", "user", "assistant", "user"]
    _only_chat_completions(server)

    direct = k.providers.model().complete([{"role": "user", "content": "direct"}])
    assert direct.text == "hermes-medium heard: direct"
    assert direct.provider == "nanogpt"


def test_providers_list_json_in_a_subprocess_lists_both(
    compat_kernel: Any, compat_site: Path, hermes_home: Path, keys: None
) -> None:
    # Writes config.yaml (the other packages disabled, nanogpt selected) in the sandboxed home.
    k = compat_kernel(
        APERTIS,
        NANOGPT,
        config={
            "model": {"provider": "nanogpt", "base_url": "http://127.0.0.1:9/v1", "model": "hermes-medium"}
        },
    )
    k.shutdown()
    env = {name: value for name, value in os.environ.items() if name != "HERMES_BUNDLED_PLUGINS"}
    env.update(
        HERMES_HOME=str(hermes_home),
        PYTHONPATH=os.pathsep.join([str(compat_site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        PYTHONDONTWRITEBYTECODE="1",
    )
    done = subprocess.run(
        [sys.executable, "-m", "kernel", "providers", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = {(r["slot"], r["name"]): r for r in _json(done.stdout)}
    apertis = rows[("model_provider", "apertis")]
    nanogpt = rows[("model_provider", "nanogpt")]
    assert apertis["plugin"] == "apertis"
    assert nanogpt["plugin"] == "nanogpt-provider"
    assert apertis["available"] is True and apertis["active"] is False
    assert nanogpt["available"] is True and nanogpt["active"] is True
    assert nanogpt["reason"] == ""
