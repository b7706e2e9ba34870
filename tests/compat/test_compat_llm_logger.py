"""hermes-llm-api-call-logger 1.1.3 through hermes-kernel: ``pre/post_api_request`` and ``/calls``.

The logger pairs each ``pre_api_request`` with its ``post_api_request`` (by
``api_request_id``), writes one SQLite row per model call and reports them with
the ``/calls`` slash command.  The model calls here are real: the bundled
``openai-compatible`` provider posting to a chat-completions server on
127.0.0.1, driven by the kernel's agent loop.  The database lives in the test's
tmp dir (``LLM_API_CALL_DATA_DIR``, read when the module is imported, i.e. when
the kernel loads it), never under the real home.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from local_server import LocalServer, Reply

from kernel import Kernel
from kernel.agent import AgentError, AgentSession

PACKAGE = "hermes-llm-api-call-logger"
PLUGIN = "llm-api-call-logger"
MODEL = "local-model"


def completion(
    content: str | None, *, tool_calls: list[dict[str, Any]] | None = None, usage: tuple[int, int]
) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    prompt, output = usage
    return Reply(
        200,
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": MODEL,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
            ],
            "usage": {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output},
        },
    )


@pytest.fixture
def model_server() -> Iterator[LocalServer]:
    with LocalServer() as server:
        yield server


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "llm-log"
    monkeypatch.setenv("LLM_API_CALL_DATA_DIR", str(path))
    monkeypatch.delenv("OBSERVABILITY_DATA_DIR", raising=False)
    for name in ("HERMES_PROFILE", "HERMES_KANBAN_WORKSPACE", "HERMES_KANBAN_TASK", "HERMES_ACTIVE_SKILL"):
        monkeypatch.delenv(name, raising=False)
    return path


@pytest.fixture
def kernel(
    compat_kernel: Callable[..., Kernel],
    model_server: LocalServer,
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Kernel:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = {
        "provider": "openai-compatible",
        "base_url": model_server.base_url,
        "model": MODEL,
        "max_retries": 0,
    }
    return compat_kernel(PACKAGE, config={"model": model})


def db_rows(data_dir: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(data_dir / "llm-call-log.db")
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("select * from llm_api_calls order by id")]
    finally:
        conn.close()


def latest_rows(text: str | None) -> list[list[str]]:
    """The rows of ``/calls latest``: id, date, time, model, input, out, total, time(s), status."""
    assert text is not None
    return [line.split() for line in text.splitlines() if line.strip()[:1].isdigit()]


def run_turn(kernel: Kernel, server: LocalServer) -> tuple[AgentSession, Any]:
    """One user turn: the model calls the calculator, then answers; two model requests."""
    server.program(
        completion(
            None,
            tool_calls=[
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "calculate", "arguments": json.dumps({"expression": "6*7"})},
                }
            ],
            usage=(40, 9),
        ),
        completion("It is 42.", usage=(61, 4)),
    )
    session = AgentSession(kernel, session_id="logged-session")
    turn = session.run("What is 6*7?")
    return session, turn


def test_loads_with_its_hooks_and_command_and_its_database_in_the_sandbox(
    kernel: Kernel, data_dir: Path
) -> None:
    info = kernel.plugin(PLUGIN)
    assert info.enabled and info.error is None and info.source == "entrypoint"
    assert info.hooks == ["pre_api_request", "post_api_request", "on_session_end"]
    assert info.commands == ["calls"]
    command = kernel.commands.get("calls")
    assert command is not None and command.plugin == PLUGIN
    assert command.description == "LLM call log: status/latest/summary"
    # register() created the database where it was told to, not under ~/.hermes.
    assert (data_dir / "llm-call-log.db").is_file()
    assert not (Path.home() / ".hermes").exists()
    assert kernel.commands.run("/calls latest") == "(no records)"


def test_real_model_calls_are_logged_and_shown_by_the_calls_command(
    kernel: Kernel, model_server: LocalServer, data_dir: Path
) -> None:
    session, turn = run_turn(kernel, model_server)
    assert turn.reply == "It is 42."
    assert json.loads(turn.tool_calls[0].result)["result"] == 42
    assert len(model_server.posts()) == 2
    # on_session_end (end of the run) flushed the queue synchronously.
    rows = db_rows(data_dir)
    assert len(rows) == 2
    for row in rows:
        assert row["session_id"] == "logged-session"
        assert (row["model"], row["provider"]) == (MODEL, "openai-compatible")
        assert row["base_url"] == model_server.base_url
        assert row["api_mode"] == "chat_completions"
        assert row["api_request_id"]
    assert [(r["completion_tokens"], r["total_tokens"]) for r in rows] == [(9, 49), (4, 65)]
    # The request and response as they went over the wire.
    first_request = json.loads(rows[0]["raw_request"])
    assert first_request["model"] == MODEL
    assert first_request["messages"][-1] == {"role": "user", "content": "What is 6*7?"}
    assert any(t["function"]["name"] == "calculate" for t in first_request["tools"])
    second_request = json.loads(rows[1]["raw_request"])
    assert second_request["messages"][-1]["role"] == "tool"
    assert json.loads(rows[1]["raw_response"])["choices"][0]["message"]["content"] == "It is 42."
    assert rows[0]["api_request_id"] != rows[1]["api_request_id"]

    latest = kernel.commands.run("/calls latest 5")
    assert latest is not None and latest.startswith("**Last 2 API Calls**")
    table = latest_rows(latest)
    assert [(r[0], r[3], r[5], r[6]) for r in table] == [("2", MODEL, "4", "65"), ("1", MODEL, "9", "49")]
    status = kernel.commands.run("/calls status")
    assert f"| Path | `{data_dir / 'llm-call-log.db'}` |" in status
    assert "| Records | 2 |" in status
    assert "| Total Tokens | 114 |" in status
    detail = kernel.commands.run("/calls show 1")
    assert detail.startswith("## Call #1")
    assert "| Session | logged-session |" in detail and f"| Base URL | {model_server.base_url} |" in detail
    day = rows[0]["created_at"][:10]
    summary = kernel.commands.run(f"/calls summary {day}")
    assert f"**LLM Call Summary — {day}**" in summary
    assert "| API Requests | 2 |" in summary and "| openai-compatible | 2 | 114 |" in summary
    session.close()
    assert kernel.plugin(PLUGIN).hook_errors == {}


def test_the_api_hooks_carry_what_hermes_sends(
    kernel: Kernel, model_server: LocalServer, data_dir: Path
) -> None:
    """What Hermes passes and the logger stores: ``turn_id``, ``message_count`` and ``tool_count`` on
    ``pre_api_request``; usage with ``prompt_tokens``, ``finish_reason`` and ``api_duration`` (seconds)
    on ``post_api_request``.  ``/calls latest`` shows the input tokens and the finish reason."""
    session, turn = run_turn(kernel, model_server)
    session.close()
    rows = db_rows(data_dir)
    assert [r["prompt_tokens"] for r in rows] == [40, 61]
    assert [r["finish_reason"] for r in rows] == ["tool_calls", "stop"]
    assert all(r["api_duration"] > 0 for r in rows)
    assert [r["message_count"] for r in rows] == [2, 4]  # system + user; then + assistant + tool
    assert [r["turn_id"] for r in rows] == [turn.turn_id] * 2
    assert [r["tool_count"] for r in rows] == [len(kernel.tools.schemas())] * 2
    [row] = latest_rows(kernel.commands.run("/calls latest 1"))
    assert (row[4], row[5], row[6], row[8]) == ("61", "4", "65", "stop")


def test_a_failed_model_call_is_not_logged_and_breaks_nothing(
    kernel: Kernel, model_server: LocalServer, data_dir: Path
) -> None:
    model_server.program(Reply(400, {"error": {"message": "bad request"}}))
    session = AgentSession(kernel, session_id="failing")
    with pytest.raises(AgentError, match="HTTP 400"):
        session.run("hello")
    assert db_rows(data_dir) == []
    assert kernel.commands.run("/calls latest") == "(no records)"
    assert kernel.plugin(PLUGIN).hook_errors == {}


def test_its_data_dir_can_come_from_the_kernel_config(
    compat_kernel: Callable[..., Kernel], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the env var the logger reads ``observability.<plugin>.data_dir`` in the home's config.yaml."""
    monkeypatch.delenv("LLM_API_CALL_DATA_DIR", raising=False)
    monkeypatch.delenv("OBSERVABILITY_DATA_DIR", raising=False)
    target = tmp_path / "from-config"
    k = compat_kernel(PACKAGE, config={"observability": {PLUGIN: {"data_dir": str(target)}}})
    assert k.plugin(PLUGIN).enabled
    assert (target / "llm-call-log.db").is_file()
    assert f"| Path | `{target / 'llm-call-log.db'}` |" in k.commands.run("/calls status")
    assert not (Path.home() / ".hermes").exists()
