"""Secrets under the names people actually give them stay out of ``agent.log`` and the chat.

The key names below leaked before: camelCase, compound and header-style names
(``apiKey``, ``accessToken``, ``clientSecret``, ``x-api-key``, ``Authorization``...)
did not match the word list, in log fields and in the ``/config`` chat command.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import agent_log

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.base.redact import is_secret_key
from kernel.cli.chat import install_host_commands

LEAKED_BEFORE = [
    "apiKey",
    "accessToken",
    "clientSecret",
    "x-api-key",
    "Authorization",
    "refreshToken",
    "privateKey",
    "OPENAI_API_KEY",
    "APIKey",
    "HTTPAuthorizationHeader",
    "db.password",
    "auth_token",
]
NOT_SECRETS = [
    "input_tokens",
    "max_tokens",
    "prompt_tokens",
    "model",
    "keyboard",
    "api_base",
    "monkey",
    "author",
]


@pytest.mark.parametrize("name", LEAKED_BEFORE)
def test_secret_names_are_recognised(name: str) -> None:
    assert is_secret_key(name)


@pytest.mark.parametrize("name", NOT_SECRETS)
def test_ordinary_names_are_not_secrets(name: str) -> None:
    assert not is_secret_key(name)


def test_secrets_are_redacted_in_log_fields_at_any_depth(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    """Top-level fields and fields nested in mappings and lists are redacted; the rest is kept."""
    k = make_kernel()
    values = {name: f"VALUE-{i}-s3cr3t" for i, name in enumerate(LEAKED_BEFORE)}
    k.log.warning("request_failed", **{n.replace("-", "_").replace(".", "_"): v for n, v in values.items()})
    k.log.warning(
        "request_failed_nested", headers=dict(values), attempts=[{"apiKey": "NESTED-s3cr3t"}], model="m-1"
    )
    text = agent_log(home)
    assert "s3cr3t" not in text, text
    assert "m-1" in text and "request_failed_nested" in text


def test_the_config_chat_command_hides_every_such_name(home: Path, bundled: Path) -> None:
    """``/config`` shows the configuration with every secret-named value hidden."""
    secrets = {name: f"CHAT-{i}-s3cr3t" for i, name in enumerate(LEAKED_BEFORE)}
    with Kernel(
        home=home, config={"model": {"provider": "x", "headers": secrets, "name": "visible-model"}}
    ) as k:
        k.load()
        session = AgentSession(k)
        install_host_commands(k, session)
        shown = k.commands.run("/config") or ""
    assert "visible-model" in shown
    assert "s3cr3t" not in shown, shown


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:KEY123@api.example.test/v1", "https://***@api.example.test/v1"),
        ("http://127.0.0.1:9/v1?api-key=KEY123&model=m", "http://127.0.0.1:9/v1?api-key=***&model=m"),
        ("https://h.test/v1?key=KEY123&sig=KEY123", "https://h.test/v1?key=***&sig=***"),
        ("https://plain.test/v1", "https://plain.test/v1"),
    ],
)
def test_urls_are_shown_without_their_credentials(url: str, shown: str) -> None:
    from kernel.base.redact import mask_url, mask_urls

    assert mask_url(url) == shown
    assert mask_urls(f"request to {url} failed") == f"request to {shown} failed"


def test_a_key_in_the_model_url_is_never_printed_or_logged(home: Path, bundled: Path) -> None:
    """``model.base_url`` carrying a key (user info and a query parameter) to a server that is not
    there: ``hermes-kernel run`` fails, and neither its output nor ``agent.log`` shows the key."""
    import socket
    import subprocess

    from conftest import CLI, cli_env

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://agent:KEYINURL42@127.0.0.1:{port}/v1?api-key=KEYINQUERY42"
    (home / "config.yaml").write_text(
        f"model:\n  provider: openai-compatible\n  base_url: '{url}'\n  model: m\n", encoding="utf-8"
    )
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(Path(__file__).parents[2] / "extensions"))
    proc = subprocess.run([*CLI, "run", "hello"], capture_output=True, text=True, env=env, timeout=120)
    shown = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "KEYINURL42" not in shown and "KEYINQUERY42" not in shown, shown
    log = home / "logs" / "agent.log"
    text = log.read_text(encoding="utf-8") if log.exists() else ""
    assert "KEYINURL42" not in text and "KEYINQUERY42" not in text, text
