"""lossless-hermes-py 0.1.6: the LCM context engine, selected with ``context.engine: lossless-hermes``.

The engine subclasses ``agent.context_engine.ContextEngine`` (served by the
kernel's import shim), reads ``prompt_tokens`` from the usage the host hands
to ``update_from_response``, decides in ``should_compress()`` against its own
threshold (``LCM_CONTEXT_THRESHOLD`` x the context length), ingests the
conversation into SQLite in ``compress()`` and offers ``lcm_*`` tools through
``get_tool_schemas()`` / ``handle_tool_call()``.  Its database goes under
``$HERMES_HOME`` (or ``LCM_DATABASE_PATH``).
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from local_server import LocalServer, Reply, Seen

from kernel.agent import AgentSession
from kernel.testing import write_script

ENGINE = "lossless-hermes"
PACKAGE = "lossless-hermes-py"
LCM_TOOLS = ["lcm_grep", "lcm_describe", "lcm_expand"]


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # pragma: no cover - shown on failure only
        pytest.fail(f"not JSON: {text!r}")


@pytest.fixture(autouse=True)
def close_lcm_database(compat_site: Path) -> Iterator[None]:
    """The package keeps one SQLite connection per process: close it before its modules are dropped."""
    yield
    module = sys.modules.get("lossless_hermes")
    if module is not None:
        module.close_database()


class CompressSpy:
    """Records each ``compress`` call of the real engine and hands it on unchanged."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.real = engine.compress
        self.calls: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
        engine.compress = self

    def __call__(self, messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        before = [dict(m) for m in messages]
        after = self.real(messages, *args, **kwargs)
        self.calls.append((before, list(after)))
        return after


def lcm_messages(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("select role, content from messages order by seq").fetchall()


def test_selected_engine_compresses_a_small_context_and_its_tools_work(
    compat_kernel: Any, hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The engine's own knob: compress once the prompt reaches 0.0001 x 128000 = 12 tokens.
    monkeypatch.setenv("LCM_CONTEXT_THRESHOLD", "0.0001")
    script = write_script(
        hermes_home,
        [
            "Noted: you like bananas.",
            {"tool_calls": [{"name": "lcm_grep", "arguments": {"query": "bananas"}}]},
            "You like bananas.",
        ],
    )
    k = compat_kernel(
        PACKAGE,
        config={"model": {"provider": "scripted", "script": str(script)}, "context": {"engine": ENGINE}},
    )
    info = k.plugin(ENGINE)
    assert info.enabled, info.error
    assert info.source == "entrypoint"
    engine = k.providers.context_engine()
    assert engine is not None and engine.name == ENGINE
    assert type(engine).__module__ == "lossless_hermes"  # the package's own class, not a stand-in
    assert k.slots.get("context_engine", ENGINE).plugin == ENGINE
    assert engine.threshold_tokens == 12

    # get_tool_schemas() became tools of the plugin, in the engine's toolset.
    for name in LCM_TOOLS:
        tool = k.tools.get(name)
        assert tool.plugin == ENGINE
        assert tool.toolset == f"context-{ENGINE}"
    assert set(LCM_TOOLS) <= set(info.tools)

    spy = CompressSpy(engine)
    session = AgentSession(k, session_id="fruit")
    first = session.run("I like bananas very much, please remember that for later")
    assert first.reply == "Noted: you like bananas."
    # The first call had nothing to go on; the engine was then told the prompt size, as prompt_tokens.
    assert spy.calls == []
    assert first.usage["input_tokens"] > 12
    assert engine.last_prompt_tokens == first.usage["input_tokens"]
    assert engine.should_compress() is True

    second = session.run("What fruit do I like?")
    assert second.reply == "You like bananas."
    # Consulted before each model call of the turn: it compressed the conversation every time.
    assert len(spy.calls) == second.iterations == 2
    before, after = spy.calls[0]
    assert [m["role"] for m in before] == ["system", "user", "assistant", "user"]
    assert [(m["role"], m["content"]) for m in after] == [(m["role"], m["content"]) for m in before]

    # Its tool ran inside the turn through k.tools.dispatch and found what compress() stored.
    [call] = second.tool_calls
    assert call.name == "lcm_grep"
    found = _json(call.result)
    assert found["results_count"] == 2
    assert any("<mark>bananas</mark>" in r["snippet"] for r in found["results"])

    # The database is in the sandboxed home and holds the conversation compress() ingested.
    db = hermes_home / "lcm.db"
    assert db.is_file()
    assert not (Path.home() / ".hermes").exists()
    assert ("user", "I like bananas very much, please remember that for later") in lcm_messages(db)

    described = _json(k.tools.dispatch("lcm_describe", {}, session_id="fruit"))
    assert described["conversation_id"] == 1
    assert described["message_count"] >= 4
    grep = _json(k.tools.dispatch("lcm_grep", {"query": "bananas", "limit": 1}, session_id="fruit"))
    assert grep["results_count"] == 1
    session.close()


def test_the_engine_decides_a_short_conversation_needs_no_compression(
    compat_kernel: Any, hermes_home: Path
) -> None:
    script = write_script(hermes_home, ["Hello.", "Hello again."])
    k = compat_kernel(
        PACKAGE,
        config={"model": {"provider": "scripted", "script": str(script)}, "context": {"engine": ENGINE}},
    )
    engine = k.providers.context_engine()
    assert engine.threshold_tokens == 96_000  # plugin.yaml: context_threshold 0.75 of 128000
    spy = CompressSpy(engine)
    with AgentSession(k, session_id="short") as session:
        session.run("hi")
        session.run("hi again")
        assert engine.last_prompt_tokens > 0
        assert engine.should_compress() is False
    assert spy.calls == []


def test_prompt_tokens_reported_by_a_real_endpoint_trigger_compression(
    compat_kernel: Any, hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = hermes_home / "state" / "lcm.db"
    db.parent.mkdir()
    monkeypatch.setenv("LCM_DATABASE_PATH", str(db))

    def answer(seen: Seen) -> Reply:
        users = [m for m in seen.json["messages"] if m["role"] == "user"]
        body = {
            "id": "chatcmpl-lcm",
            "object": "chat.completion",
            "model": "local-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"answer {len(users)}"},
                    "finish_reason": "stop",
                }
            ],
            # A long conversation, as the endpoint counts it: above 0.75 x 128000.
            "usage": {"prompt_tokens": 120_000, "completion_tokens": 3, "total_tokens": 120_003},
        }
        return Reply(200, body)

    with LocalServer(default=answer) as server:
        k = compat_kernel(
            PACKAGE,
            config={
                "model": {
                    "provider": "openai-compatible",
                    "base_url": server.base_url,
                    "model": "local-model",
                    "timeout": 10,
                },
                "context": {"engine": ENGINE},
            },
        )
        engine = k.providers.context_engine()
        spy = CompressSpy(engine)
        with AgentSession(k, session_id="long") as session:
            assert session.run("first question about kiwis").reply == "answer 1"
            assert engine.last_prompt_tokens == 120_000
            assert engine.last_completion_tokens == 3
            assert session.run("second question").reply == "answer 2"
        requests = server.posts()

    assert len(spy.calls) == 1
    # What the endpoint got on the second call is what compress() returned.
    _before, after = spy.calls[0]
    assert requests[1].json["messages"] == after
    assert [m["role"] for m in after] == ["system", "user", "assistant", "user"]
    assert db.is_file()
    assert not (hermes_home / "lcm.db").exists()
    assert ("user", "first question about kiwis") in lcm_messages(db)
