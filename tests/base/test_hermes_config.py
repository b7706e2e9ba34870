"""A Hermes Agent home's model settings carry over (issue 28): ``model.default`` is the model name,
Hermes' provider names reach their OpenAI-compatible endpoints, Hermes-only keys are accepted silently.

Everything runs through real ``hermes-kernel`` subprocesses; the only model calls go to a real HTTP
server on 127.0.0.1 that the test starts (hosted endpoints are checked as resolved, never called).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import cli_env, run_json
from local_server import LocalServer, Reply

#: The variables of hosted providers: cleared for every child so the machine's keys never count.
KEY_VARS = (
    "OPENROUTER_API_KEY",
    "OPENROUTER_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "NOUS_API_KEY",
    "DEEPSEEK_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "XAI_API_KEY",
    "ANTHROPIC_API_KEY",
)
SECRET = "sk-or-v1-test-0123456789abcdef"


def cli(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``hermes-kernel ARGS`` against ``home``, with none of the machine's provider variables."""
    env = {k: v for k, v in cli_env(home).items() if k not in KEY_VARS}
    return subprocess.run(
        [sys.executable, "-m", "kernel", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def write_config(home: Path, config: dict[str, Any], dotenv: str = "") -> None:
    (home / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    if dotenv:
        (home / ".env").write_text(dotenv, encoding="utf-8")


def log_text(home: Path) -> str:
    """``<home>/logs/agent.log`` (empty when nothing was logged)."""
    log = home / "logs" / "agent.log"
    return log.read_text(encoding="utf-8") if log.exists() else ""


def reply(text: str) -> Reply:
    body = {
        "id": "c1",
        "object": "chat.completion",
        "model": "whatever",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    return Reply(200, body)


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(default=Reply(418, {"error": {"message": "no reply programmed"}})) as running:
        yield running


def model_row(home: Path) -> dict[str, Any]:
    proc = cli(home, "providers", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = [r for r in run_json(proc.stdout) if r["slot"] == "model_provider" and r["active"]]
    assert len(rows) == 1, rows
    return rows[0]


# --------------------------------------------------------------------------- model.default


def test_model_default_is_the_model_name_sent(home: Path, server: LocalServer) -> None:
    server.program(reply("hello from the server"))
    write_config(
        home, {"model": {"default": "hermes-picked-model", "provider": "custom", "base_url": server.base_url}}
    )
    proc = cli(home, "run", "hi")
    assert proc.returncode == 0, proc.stderr
    assert "hello from the server" in proc.stdout
    assert [seen.json["model"] for seen in server.seen] == ["hermes-picked-model"]


def test_model_model_wins_over_model_default(home: Path, server: LocalServer) -> None:
    server.program(reply("ok"))
    write_config(
        home,
        {
            "model": {
                "default": "hermes-one",
                "model": "kernel-one",
                "provider": "custom",
                "base_url": server.base_url,
            }
        },
    )
    proc = cli(home, "run", "hi")
    assert proc.returncode == 0, proc.stderr
    assert [seen.json["model"] for seen in server.seen] == ["kernel-one"]


def test_model_name_is_read_last_as_hermes_reads_it(home: Path, server: LocalServer) -> None:
    server.program(reply("ok"), reply("ok"))
    write_config(home, {"model": {"name": "named-model", "provider": "custom", "base_url": server.base_url}})
    assert cli(home, "run", "hi").returncode == 0
    write_config(
        home,
        {
            "model": {
                "name": "named-model",
                "default": "default-model",
                "provider": "custom",
                "base_url": server.base_url,
            }
        },
    )
    assert cli(home, "run", "hi").returncode == 0
    assert [seen.json["model"] for seen in server.seen] == ["named-model", "default-model"]


def test_a_plain_string_model_section_is_the_model_name(home: Path) -> None:
    """Older Hermes homes write ``model: <name>``; with no provider there is still nothing to call."""
    write_config(home, {"model": "just-a-name"})
    proc = cli(home, "chat", stdin="/model\n")
    assert proc.returncode == 0, proc.stderr
    assert "Model: none" in proc.stdout  # no provider configured: the name alone does not make a model


# --------------------------------------------------------------------------- Hermes' provider names


def test_custom_with_its_base_url_reaches_that_server_with_model_api_key(
    home: Path, server: LocalServer
) -> None:
    server.program(reply("custom says hi"))
    write_config(
        home,
        {
            "model": {
                "default": "local-model",
                "provider": "custom",
                "base_url": server.base_url,
                "api_key": SECRET,
            }
        },
    )
    proc = cli(home, "run", "hi")
    assert proc.returncode == 0, proc.stderr
    assert "custom says hi" in proc.stdout
    (seen,) = server.seen
    assert seen.path.endswith("/chat/completions")
    assert seen.headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in proc.stdout + proc.stderr
    assert SECRET not in log_text(home)


@pytest.mark.parametrize(
    ("provider", "variable", "endpoint"),
    [
        ("openrouter", "OPENROUTER_API_KEY", "https://openrouter.ai/api/v1"),
        ("openai", "OPENAI_API_KEY", "https://api.openai.com/v1"),
        ("nous", "NOUS_API_KEY", "https://inference-api.nousresearch.com/v1"),
        ("deepseek", "DEEPSEEK_API_KEY", "https://api.deepseek.com/v1"),
        ("gemini", "GEMINI_API_KEY", "https://generativelanguage.googleapis.com/v1beta/openai"),
        ("xai", "XAI_API_KEY", "https://api.x.ai/v1"),
    ],
)
def test_hermes_provider_names_resolve_to_their_endpoint_with_the_key_from_dotenv(
    home: Path, provider: str, variable: str, endpoint: str
) -> None:
    write_config(
        home, {"model": {"default": "some/model", "provider": provider}}, dotenv=f"{variable}={SECRET}\n"
    )
    row = model_row(home)
    assert row["name"] == provider
    assert row["available"] is True, row
    assert row["endpoint"] == endpoint
    chat = cli(home, "chat", stdin="/model\n")
    assert chat.returncode == 0, chat.stderr
    assert f"Model: {provider} / some/model" in chat.stdout
    assert "Model: none" not in chat.stdout
    everything = chat.stdout + chat.stderr + json.dumps(row)
    assert SECRET not in everything
    assert SECRET not in log_text(home)


def test_hermes_aliases_resolve_like_their_provider(home: Path) -> None:
    write_config(home, {"model": {"default": "x", "provider": "OR"}}, dotenv=f"OPENROUTER_API_KEY={SECRET}\n")
    row = model_row(home)
    assert (row["name"], row["endpoint"], row["available"]) == (
        "openrouter",
        "https://openrouter.ai/api/v1",
        True,
    )


def test_model_base_url_overrides_a_hermes_providers_endpoint(home: Path, server: LocalServer) -> None:
    """``hermes setup`` writes the URL next to the provider: that URL is the one called (the key of
    OPENROUTER_API_KEY goes to another host only when ``model.api_key_env`` names it)."""
    server.program(reply("routed"))
    model = {"default": "m", "provider": "openrouter", "base_url": server.base_url}
    write_config(
        home,
        {"model": {**model, "api_key_env": "OPENROUTER_API_KEY"}},
        dotenv=f"OPENROUTER_API_KEY={SECRET}\n",
    )
    proc = cli(home, "run", "hi")
    assert proc.returncode == 0, proc.stderr
    (seen,) = server.seen
    assert seen.headers["authorization"] == f"Bearer {SECRET}"
    assert seen.json["model"] == "m"


def test_chat_on_a_hermes_home_without_the_key_names_the_model_and_the_variable(home: Path) -> None:
    write_config(home, {"model": {"default": "anthropic/claude-sonnet-4", "provider": "openrouter"}})
    proc = cli(home, "chat", stdin="/model\n")
    assert proc.returncode == 0, proc.stderr
    assert "Model: none" not in proc.stdout
    assert "Model: openrouter / anthropic/claude-sonnet-4" in proc.stdout
    assert "OPENROUTER_API_KEY" in proc.stdout


def test_a_hermes_provider_without_an_openai_compatible_endpoint_fails_naming_it_the_file_and_fix(
    home: Path,
) -> None:
    write_config(
        home,
        {"model": {"default": "claude-sonnet-4", "provider": "anthropic"}},
        dotenv="ANTHROPIC_API_KEY=k\n",
    )
    config_file = str(home / "config.yaml")
    run = cli(home, "run", "hi")
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    for text in ("'anthropic'", config_file, "openrouter"):
        assert text in run.stderr, run.stderr
    doctor = cli(home, "doctor", "--json")
    report = run_json(doctor.stdout)
    found = [f for f in report["findings"] if "anthropic" in f["problem"]]
    assert found, report
    assert found[0]["level"] == "error"
    assert config_file in found[0]["problem"] + found[0]["fix"]


def test_a_plugin_offering_a_hermes_name_wins_over_the_built_in_endpoint(home: Path) -> None:
    plugin = home / "plugins" / "my-router"
    plugin.mkdir(parents=True)
    (plugin / "plugin.yaml").write_text("name: my-router\nkind: model-provider\n", encoding="utf-8")
    (plugin / "__init__.py").write_text(
        "from kernel.providers import ProviderProfile, register_provider\n"
        "register_provider(ProviderProfile(name='openrouter', base_url='http://127.0.0.1:9/v1',"
        " auth_type='none'))\n",
        encoding="utf-8",
    )
    write_config(
        home, {"model": {"default": "m", "provider": "openrouter"}, "plugins": {"enabled": ["my-router"]}}
    )
    row = model_row(home)
    assert (row["plugin"], row["endpoint"]) == ("my-router", "http://127.0.0.1:9/v1")


# --------------------------------------------------------------------------- Hermes-only keys

HERMES_SETUP_CONFIG = """\
model:
  default: anthropic/claude-sonnet-4
  provider: openrouter
  base_url: https://openrouter.ai/api/v1
  api_mode: chat_completions
  context_length: 200000
providers: {}
fallback_providers: []
toolsets:
- hermes-cli
agent:
  max_turns: 90
  reasoning_effort: medium
  verify_on_stop: false
terminal:
  backend: local
  cwd: .
  timeout: 180
  persistent_shell: true
display:
  compact: false
  personality: kawaii
  show_reasoning: false
  skin: default
compression:
  enabled: true
  threshold: 0.5
memory:
  memory_enabled: true
  user_profile_enabled: true
  memory_char_limit: 2200
delegation:
  max_iterations: 50
approvals:
  mode: manual
security:
  redact_secrets: true
checkpoints:
  enabled: false
timezone: ''
_config_version: 33
"""


def test_a_hermes_setup_config_loads_without_a_config_warning(home: Path) -> None:
    (home / "config.yaml").write_text(HERMES_SETUP_CONFIG, encoding="utf-8")
    (home / ".env").write_text(f"OPENROUTER_API_KEY={SECRET}\n", encoding="utf-8")
    doctor = cli(home, "doctor", "--json")
    report = run_json(doctor.stdout)
    config_findings = [f for f in report["findings"] if f["area"] == "config"]
    assert config_findings == [], config_findings
    assert [f for f in report["findings"] if f["area"] == "provider" and f["level"] == "error"] == []
    chat = cli(home, "chat", stdin="/model\n")
    assert "Model: openrouter / anthropic/claude-sonnet-4" in chat.stdout
    assert "config_problem" not in log_text(home)


def test_keys_neither_ours_nor_hermes_still_warn(home: Path) -> None:
    config = yaml.safe_load(HERMES_SETUP_CONFIG)
    config["modle"] = {"x": 1}
    config["model"]["defualt"] = "typo"
    write_config(home, config)
    report = run_json(cli(home, "doctor", "--json").stdout)
    messages = " ".join(f["problem"] for f in report["findings"])
    assert "'modle'" in messages
    assert "'model.defualt'" in messages and "'model.default'" in messages
