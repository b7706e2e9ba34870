"""Compound secret names, in any case, are secrets; token counts are not; depth hides nothing.

Before: ``is_secret_key`` split names only at separators and camelCase humps,
so lowercase compounds (``apitoken``, ``accesstoken``, ``clientsecret``,
``privatekey``) leaked into ``agent.log`` and the chat's ``/config``;
``redacted()`` returned anything nested deeper than 20 levels as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import agent_log
from hypothesis import given
from hypothesis import strategies as st

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.base.redact import is_secret_key, redact_text, redacted
from kernel.cli.chat import install_host_commands

COMPOUNDS = [
    "apitoken",
    "accesstoken",
    "clientsecret",
    "authtoken",
    "privatekey",
    "apikey",
    "APITOKEN",
    "Accesstoken",
    "github_apitoken",
    "dbpassword",
    "secretkey",
    "api_keys",
    "refresh_tokens",
    "accesstokens",
    "token2",
    "OPENAI_APIKEY_2",
    "signing_key",
]
NOT_SECRETS = [
    "input_tokens",
    "max_tokens",
    "num_tokens",
    "tokenizer",
    "token_count",
    "tokenCount",
    "tokencount",
    "maxtokens",
    "total_tokens",
    "keyboard",
    "monkey",
    "author",
    "cache_key",
    "chat_key",
    "secretary",
    "passwordless",
]

SECRET_WORDS = ["token", "secret", "password", "passwd", "passphrase", "credential", "apikey", "privatekey"]
PREFIXES = ["api", "access", "client", "auth", "refresh", "session", "db", "user", "my", "x", "github", "bot"]
COUNTERS = ["input", "output", "prompt", "completion", "max", "num", "total", "cached", "reasoning"]


@pytest.mark.parametrize("name", COMPOUNDS)
def test_compound_names_are_secrets(name: str) -> None:
    assert is_secret_key(name)


@pytest.mark.parametrize("name", NOT_SECRETS)
def test_counts_and_lookalikes_are_not_secrets(name: str) -> None:
    assert not is_secret_key(name)


def _cased(word: str, style: int) -> str:
    return [word.lower(), word.upper(), word.capitalize(), word][style]


@given(
    prefix=st.sampled_from(PREFIXES),
    word=st.sampled_from(SECRET_WORDS),
    glue=st.sampled_from(["", "_", "-", ".", " "]),
    style=st.integers(0, 3),
    suffix=st.sampled_from(["", "1", "_2"]),
)
def test_a_secret_word_ending_a_name_makes_it_secret(
    prefix: str, word: str, glue: str, style: int, suffix: str
) -> None:
    assert is_secret_key(_cased(prefix + glue + word, style) + suffix)


@given(
    counter=st.sampled_from(COUNTERS),
    glue=st.sampled_from(["", "_", "-"]),
    style=st.integers(0, 3),
)
def test_token_counts_in_any_form_are_not_secrets(counter: str, glue: str, style: int) -> None:
    assert not is_secret_key(_cased(f"{counter}{glue}tokens", style))
    assert not is_secret_key(_cased(f"token{glue}count", style))


def test_compound_names_are_redacted_in_agent_log(make_kernel: Callable[..., Kernel], home: Path) -> None:
    k = make_kernel()
    k.log.warning(
        "request_failed",
        apitoken="LOG-1-s3cr3t",
        clientsecret="LOG-2-s3cr3t",
        headers={"accesstoken": "LOG-3-s3cr3t", "privatekey": ["LOG-4-s3cr3t"]},
        input_tokens=1234,
        token_count=5678,
    )
    text = agent_log(home)
    assert "s3cr3t" not in text, text
    assert "input_tokens=1234" in text and "token_count=5678" in text


def test_compound_names_are_hidden_by_the_config_chat_command(home: Path, bundled: Path) -> None:
    secrets = {name: f"CHAT-{i}-s3cr3t" for i, name in enumerate(COMPOUNDS)}
    config = {"model": {"provider": "x", "name": "visible-model", "max_tokens": 777}, "extra": secrets}
    with Kernel(home=home, config=config) as k:
        k.load()
        session = AgentSession(k)
        install_host_commands(k, session)
        shown = k.commands.run("/config") or ""
    assert "visible-model" in shown and "777" in shown
    assert "s3cr3t" not in shown, shown


def _nest(depth: int, leaf: Any) -> Any:
    value = leaf
    for level in range(depth):
        value = {"level": value} if level % 2 else [value]
    return value


@pytest.mark.parametrize("depth", [19, 20, 21, 22, 40, 200])
def test_a_secret_at_any_depth_is_not_shown(depth: int) -> None:
    out = repr(redacted(_nest(depth, {"api_key": "DEEP-s3cr3t", "model": "m"})))
    assert "DEEP-s3cr3t" not in out


def test_a_deep_secret_in_a_log_field_is_not_written(make_kernel: Callable[..., Kernel], home: Path) -> None:
    k = make_kernel()
    k.log.warning("deep_field", payload=_nest(60, {"password": "DEEP-LOG-s3cr3t"}))
    text = agent_log(home)
    assert "deep_field" in text and "DEEP-LOG-s3cr3t" not in text


def test_a_self_containing_mapping_is_redacted_and_bounded() -> None:
    loop: dict[str, Any] = {"token": "LOOP-s3cr3t"}
    loop["again"] = loop
    out = repr(redacted(loop))
    assert "LOOP-s3cr3t" not in out and len(out) < 10_000


@pytest.mark.parametrize(
    "text",
    [
        "connect failed: apitoken=TXT-s3cr3t host=h",
        "{'clientSecret': 'TXT-s3cr3t', 'model': 'm'}",
        '{"accesstoken": "TXT-s3cr3t"}',
        "Authorization: Bearer TXT-s3cr3t-0123456789",
        "ValueError: password=TXT-s3cr3t",
    ],
)
def test_secret_names_in_free_text_are_redacted(text: str) -> None:
    assert "TXT-s3cr3t" not in redact_text(text)


def test_prose_about_a_secret_is_kept() -> None:
    text = "model.api_key: expected a string, got int; max_tokens=100"
    assert redact_text(text) == text


def test_a_long_word_after_a_secret_is_redacted_in_linear_time() -> None:
    """Free text with a long unbroken word (a log line quoting a blob, a memory provider's flood):
    the name search used to be tried at every character of the word, each try running to its end —
    quadratic, 8 minutes for 200,000 characters.  2,000,000 characters must be done well within the
    deadline (a hang guard, not a speed measure: the quadratic search takes hours here)."""
    import subprocess
    import sys

    code = (
        "from kernel.base.redact import redact_text\n"
        "text = 'api_key=sk-live-0123456789abcdef seen ' + 'x' * 2_000_000 + ' token=abcdef123456'\n"
        "out = redact_text(text)\n"
        "assert 'sk-live' not in out and 'abcdef123456' not in out, out[:80]\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
