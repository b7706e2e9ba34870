"""Hostile Hermes-style ``model:`` sections: a model name that is not a string, provider names with
NUL, lone surrogates or terminal escapes, and values of a megabyte.

Each runs through real ``hermes-kernel`` subprocesses (``chat``, ``run``, ``doctor``, ``providers
list``) against a home written by the test; model calls, when any, go to a real server on 127.0.0.1.
Consequences asserted: nothing crashes (no traceback, a documented exit code), nothing hostile is
sent to the model or printed raw, the output stays small, and the finding names the key and the file.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_env, run_json
from local_server import LocalServer, Reply

KEY_VARS = ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")
HUGE = 1024 * 1024
#: More than any honest message about the config, far less than the hostile value.
OUTPUT_CAP = 20_000


def cli(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in cli_env(home).items() if k not in KEY_VARS}
    return subprocess.run(
        [sys.executable, "-m", "kernel", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
        check=False,
    )


def write_yaml(home: Path, text: str) -> None:
    (home / "config.yaml").write_text(text, encoding="utf-8")


def reply(text: str) -> Reply:
    body = {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return Reply(200, body)


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(default=Reply(418, {"error": {"message": "no reply programmed"}})) as running:
        yield running


def no_crash(proc: subprocess.CompletedProcess[str]) -> str:
    """The child's whole output, after checking it ended on its own terms and stayed small."""
    assert proc.returncode in (0, 1), (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    out = proc.stdout + proc.stderr
    assert len(out) < OUTPUT_CAP, len(out)
    return out


def findings(home: Path) -> list[dict[str, Any]]:
    proc = cli(home, "doctor", "--json")
    no_crash(proc)
    return run_json(proc.stdout)["findings"]


# --------------------------------------------------------------------------- model.default not a string


@pytest.mark.parametrize("value", ["[a, b]", "{x: 1}", "true", "12", "null"])
def test_a_non_string_model_default_is_never_sent_and_is_reported(
    home: Path, server: LocalServer, value: str
) -> None:
    write_yaml(home, f"model:\n  provider: custom\n  base_url: {server.base_url}\n  default: {value}\n")
    run = cli(home, "run", "hi")
    out = no_crash(run)
    assert run.returncode == 1
    assert server.seen == [], "nothing may be sent without a model name"
    assert "model.default" in out or value == "null"
    if value != "null":
        found = [f for f in findings(home) if "model.default" in f["problem"]]
        assert found and found[0]["level"] == "error", found
        assert str(home / "config.yaml") in found[0]["fix"] + found[0]["subject"]


def test_model_model_is_used_when_model_default_is_junk(home: Path, server: LocalServer) -> None:
    server.program(reply("fine"))
    write_yaml(
        home, f"model:\n  provider: custom\n  base_url: {server.base_url}\n  model: good\n  default: [1, 2]\n"
    )
    run = cli(home, "run", "hi")
    assert run.returncode == 0, run.stderr
    assert [s.json["model"] for s in server.seen] == ["good"]


@pytest.mark.parametrize("name", [r"a\0b", r"bad\udcffname", r"\e[31mred", r"two\nlines"])
def test_a_model_name_with_control_characters_or_surrogates_is_refused(
    home: Path, server: LocalServer, name: str
) -> None:
    write_yaml(home, f'model:\n  provider: custom\n  base_url: {server.base_url}\n  default: "{name}"\n')
    run = cli(home, "run", "hi")
    out = no_crash(run)
    assert run.returncode == 1
    assert server.seen == []
    assert "\x00" not in out and "\x1b" not in out
    assert "model.default" in out


def test_a_huge_model_default_is_refused_without_being_echoed(home: Path, server: LocalServer) -> None:
    write_yaml(home, f"model:\n  provider: custom\n  base_url: {server.base_url}\n  default: {'m' * HUGE}\n")
    for args in (("run", "hi"), ("chat",), ("doctor",), ("providers", "list")):
        no_crash(cli(home, *args, stdin="/model\n"))
    assert server.seen == []
    run = cli(home, "run", "hi")
    assert run.returncode == 1 and "model.default" in run.stderr


# --------------------------------------------------------------------------- hostile provider names


@pytest.mark.parametrize(
    "provider", [r"open\0router", r"\udcff\udc80", r"\e[2J\e[31mopenrouter", r"\u202eretuorrnepo"]
)
def test_hostile_provider_names_are_reported_escaped_and_nothing_crashes(home: Path, provider: str) -> None:
    write_yaml(home, f'model:\n  provider: "{provider}"\n  default: m\n')
    outputs = [
        no_crash(cli(home, *args, stdin="/model\n/status\n"))
        for args in (("chat",), ("run", "hi"), ("doctor",), ("doctor", "--json"), ("providers", "list"))
    ]
    for out in outputs:
        assert "\x00" not in out and "\x1b" not in out and "\u202e" not in out
    assert "model.provider" in outputs[1]  # run's reason names the key


def test_a_huge_provider_name_is_not_echoed_whole(home: Path) -> None:
    write_yaml(home, f"model:\n  provider: {'p' * HUGE}\n  default: m\n")
    for args in (
        ("chat",),
        ("run", "hi"),
        ("doctor",),
        ("doctor", "--json"),
        ("providers", "list", "--json"),
    ):
        no_crash(cli(home, *args, stdin="/model\n"))
    log = home / "logs" / "agent.log"
    assert not log.exists() or log.stat().st_size < 20 * OUTPUT_CAP


def test_a_hermes_provider_name_with_a_non_string_type_is_reported(home: Path) -> None:
    write_yaml(home, "model:\n  provider: [openrouter]\n  default: m\n")
    run = cli(home, "run", "hi")
    out = no_crash(run)
    assert run.returncode == 1 and "model.provider" in out
