"""A key read from a provider's own variable goes to that provider's hosts only.

A Hermes home often has ``OPENAI_API_KEY`` (or ``OPENROUTER_API_KEY``) in its ``.env`` and a
``model.provider: custom`` pointing at some other server.  Hermes Agent 0.19 sends such a key only
to the vendor it belongs to; the kernel must do the same, whatever path builds the model client:
``hermes-kernel run``, ``k.providers.model()``, a plugin's override through ``k.providers.client()``.
Only an explicitly configured key (``model.api_key``, or ``model.api_key_env`` naming the variable)
goes to any other host.

Every model call here reaches a real server on 127.0.0.1 that records the ``Authorization`` header;
the consequence asserted is what that server received.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import REPO, agent_log, cli_env, run_json, write_plugin
from local_server import LocalServer, Reply

from kernel import Kernel
from kernel.providers.hermes_config import builtin_profile
from kernel.providers.manager import ProviderSelectionError

OPENAI_KEY = "sk-test-openai-key-destination-7731"
ROUTER_KEY = "sk-or-test-key-destination-4410"
ACME_KEY = "sk-acme-key-destination-9902"
VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL", "ACME_API_KEY")
USER = [{"role": "user", "content": "hi"}]


def reply(text: str = "ok") -> Reply:
    message = {"role": "assistant", "content": text}
    body = {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return Reply(200, body)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(default=reply()) as running:
        yield running


@pytest.fixture
def providers(bundled: Path) -> Path:
    """The real bundled model providers, alone in the bundled folder."""
    shutil.copytree(REPO / "extensions" / "model-providers", bundled / "model-providers")
    return bundled


def cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in cli_env(home).items() if k not in VARS}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "kernel", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def authorization(server: LocalServer) -> list[str | None]:
    return [seen.headers.get("authorization") for seen in server.seen]


# -------------------------------------------------------------------------- through the real CLI


def test_a_hermes_home_with_provider_custom_never_sends_openai_api_key_elsewhere(
    home: Path, server: LocalServer
) -> None:
    (home / "config.yaml").write_text(
        f"model:\n  provider: custom\n  default: local-model\n  base_url: {server.base_url}\n",
        encoding="utf-8",
    )
    (home / ".env").write_text(f"OPENAI_API_KEY={OPENAI_KEY}\n", encoding="utf-8")
    run = cli(home, "run", "hi", OPENROUTER_API_KEY=ROUTER_KEY)
    assert run.returncode == 0, run.stderr[-3000:]
    assert server.seen, "the turn reached the local server"
    assert authorization(server) == [None] * len(server.seen)
    for seen in server.seen:
        assert OPENAI_KEY not in seen.raw.decode() and ROUTER_KEY not in seen.raw.decode()
    assert OPENAI_KEY not in run.stdout + run.stderr
    log = agent_log(home)
    assert "model_key_withheld" in log and "OPENAI_API_KEY" in log and OPENAI_KEY not in log


def test_the_variable_and_the_url_both_from_the_environment_still_keep_the_key(
    home: Path, server: LocalServer
) -> None:
    """OPENAI_BASE_URL on a local server next to OPENAI_API_KEY: the key is OpenAI's, it stays."""
    (home / "config.yaml").write_text("model:\n  provider: openai-compatible\n  model: m\n", encoding="utf-8")
    run = cli(home, "run", "hi", OPENAI_API_KEY=OPENAI_KEY, OPENAI_BASE_URL=server.base_url)
    assert run.returncode == 0, run.stderr[-3000:]
    assert server.seen and authorization(server) == [None] * len(server.seen)


def test_an_explicit_key_goes_to_the_configured_endpoint(home: Path, server: LocalServer) -> None:
    (home / "config.yaml").write_text(
        "model:\n  provider: custom\n  default: m\n"
        f"  base_url: {server.base_url}\n  api_key_env: OPENAI_API_KEY\n",
        encoding="utf-8",
    )
    run = cli(home, "run", "hi", OPENAI_API_KEY=OPENAI_KEY)
    assert run.returncode == 0, run.stderr[-3000:]
    assert authorization(server)[0] == f"Bearer {OPENAI_KEY}"
    doctor = run_json(cli(home, "doctor", "--json", OPENAI_API_KEY=OPENAI_KEY).stdout)
    assert doctor["errors"] == 0, doctor
    assert not [f for f in doctor["findings"] if "api_key_env" in f["problem"]], doctor
    assert "model_key_withheld" not in agent_log(home)


# -------------------------------------------------------------------------- through the kernel


@pytest.mark.parametrize("name", ["custom", "openai-compatible", "LOCAL", "vllm"])
def test_openai_api_key_is_withheld_from_a_custom_endpoint_by_every_name(
    name: str,
    server: LocalServer,
    providers: Path,
    make_kernel: Callable[..., Kernel],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    k = make_kernel(config={"model": {"provider": name, "model": "m", "base_url": server.base_url}})
    assert k.providers.model().complete(USER).text == "ok"
    # A plugin's own model override takes the same road.
    other = {"provider": name, "model": "other", "base_url": server.base_url}
    assert k.providers.client(other).complete(USER).text == "ok"
    assert authorization(server) == [None, None]


def test_model_api_key_is_sent_to_a_custom_endpoint(
    server: LocalServer, providers: Path, make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    config = {"model": {"provider": "custom", "model": "m", "base_url": server.base_url, "api_key": "sk-own"}}
    k = make_kernel(config=config)
    k.providers.model().complete(USER)
    assert authorization(server) == ["Bearer sk-own"]


def test_openrouter_key_does_not_follow_a_moved_endpoint(
    server: LocalServer, providers: Path, make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``openrouter`` needs a key: with model.base_url elsewhere it is unavailable, and says why."""
    monkeypatch.setenv("OPENROUTER_API_KEY", ROUTER_KEY)
    k = make_kernel(config={"model": {"provider": "openrouter", "model": "m", "base_url": server.base_url}})
    with pytest.raises(ProviderSelectionError) as caught:
        k.providers.model()
    message = str(caught.value)
    assert "OPENROUTER_API_KEY" in message and "openrouter.ai" in message and "127.0.0.1" in message
    assert "api_key" in message and ROUTER_KEY not in message
    assert server.seen == []


def test_a_vendor_key_follows_the_vendors_own_url_variable_but_openai_base_url_is_no_mirror(
    server: LocalServer, providers: Path, make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENROUTER_BASE_URL is an OpenRouter mirror the user set (Hermes sends the key there too);
    OPENAI_BASE_URL names any compatible server in the kernel, so OPENAI_API_KEY never follows it."""
    monkeypatch.setenv("OPENROUTER_API_KEY", ROUTER_KEY)
    monkeypatch.setenv("OPENROUTER_BASE_URL", server.base_url)
    k = make_kernel(config={"model": {"provider": "openrouter", "model": "m"}})
    k.providers.model().complete(USER)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    k2 = make_kernel(config={"model": {"provider": "openai", "model": "m", "base_url": server.base_url}})
    with pytest.raises(ProviderSelectionError, match="OPENAI_API_KEY"):
        k2.providers.model()
    k3 = make_kernel(config={"model": {"provider": "openai-compatible", "model": "m"}})
    k3.providers.model().complete(USER)
    assert authorization(server) == [f"Bearer {ROUTER_KEY}", None]


@pytest.mark.parametrize(
    ("url", "sent"),
    [
        ("https://api.openai.com/v1", True),
        ("https://API.OpenAI.com./v1", True),
        ("https://eu.api.openai.com/v1", True),
        ("https://my-resource.openai.azure.com/openai/v1", True),
        ("https://api.openai.com.evil.test/v1", False),
        ("https://evilopenai.com/v1", False),
        ("https://api.openai.com@evil.test/v1", False),
        ("http://127.0.0.1:8080/v1", False),
        ("http://localhost/v1", False),
        ("not a url", False),
    ],
)
def test_openai_api_key_goes_to_openai_hosts_only(url: str, sent: bool) -> None:
    profile = builtin_profile("openai")
    assert profile is not None
    key, base_url = profile.credentials({"base_url": url}, environ={"OPENAI_API_KEY": OPENAI_KEY})
    assert base_url == url and (key == OPENAI_KEY) is sent


def test_openrouter_key_goes_to_openrouter_only() -> None:
    profile = builtin_profile("openrouter")
    assert profile is not None
    environ = {"OPENROUTER_API_KEY": ROUTER_KEY, "OPENAI_API_KEY": OPENAI_KEY}
    assert profile.credentials({}, environ)[0] == ROUTER_KEY
    assert profile.credentials({"base_url": "https://example.test/v1"}, environ)[0] is None
    ok, reason = profile.availability({"base_url": "https://example.test/v1"}, environ)
    assert not ok and "OPENROUTER_API_KEY" in reason and ROUTER_KEY not in reason


# -------------------------------------------------------------------------- plugin profiles


ACME = """\
from kernel.providers import ProviderProfile, register_provider

register_provider(ProviderProfile(
    name="acme",
    env_vars=("ACME_API_KEY",),
    base_url="https://api.acme.example/v1",
    auth_type="api_key_optional",
))
register_provider(ProviderProfile(
    name="borrower",
    env_vars=("OPENAI_API_KEY",),
    base_url="https://api.borrower.example/v1",
    auth_type="api_key_optional",
))
"""


def test_a_plugin_profile_gets_its_own_key_but_never_a_vendors(
    server: LocalServer,
    home: Path,
    bundled: Path,
    make_kernel: Callable[..., Kernel],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ACME_API_KEY is the plugin's own: it goes where the user points that provider.  A plugin
    profile listing OPENAI_API_KEY is held to the same rule as the bundled ones."""
    manifest = {"name": "acme", "version": "1.0.0", "kind": "model-provider"}
    write_plugin(home / "plugins" / "model-providers", "acme", ACME, manifest=manifest)
    monkeypatch.setenv("ACME_API_KEY", ACME_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    k = make_kernel(config={"model": {"provider": "acme", "model": "m", "base_url": server.base_url}})
    k.providers.model().complete(USER)
    borrower = {"provider": "borrower", "model": "m", "base_url": server.base_url}
    k.providers.client(borrower).complete(USER)
    profile = k.providers.get_provider_profile("borrower")
    assert profile.credentials({}, {"OPENAI_API_KEY": OPENAI_KEY}) == (
        None,
        "https://api.borrower.example/v1",
    )
    assert authorization(server) == [f"Bearer {ACME_KEY}", None]
