"""The reference agent loop (kernel/agent.py) through real kernels.

Every test loads a real kernel with the bundled plugins of the checkout (the calculator, the
``scripted`` model, the sqlite memory, the compressor), writes its own plugins into a temporary
home, and watches the turn through ``kernel.testing.HookRecorder`` and the kernel's event bus.
The last tests talk to a real OpenAI-compatible HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, agent_log
from local_server import LocalServer, Reply, Seen

from kernel.agent import AgentError, AgentSession, TurnResult
from kernel.testing import TestKernel, write_plugin

CALC = {"name": "calculate", "arguments": {"expression": "2**16"}}
TOOL_TURN = {"text": "Let me compute 2**16.", "tool_calls": [CALC]}
ONE_TOOL_TURN = [TOOL_TURN, "2**16 = 65536."]

FIRST_TURN_HOOKS = [
    "on_session_start",
    "pre_llm_call",
    "pre_api_request",
    "post_api_request",
    "pre_tool_call",
    "post_tool_call",
    "transform_tool_result",
    "pre_api_request",
    "post_api_request",
    "pre_verify",  # the turn ran a tool and is about to end
    "post_llm_call",
    "transform_llm_output",
    "on_session_end",
]


@pytest.fixture(autouse=True)
def bundled_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkout's own bundled plugins: calculator, scripted model, sqlite memory, compressor."""
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(REPO / "extensions"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def hermes(tmp_path: Path) -> Path:
    path = tmp_path / "hermes"
    path.mkdir()
    return path


@pytest.fixture
def harness(hermes: Path) -> Iterator[Callable[..., TestKernel]]:
    """``harness(config=None, script=None)``: a loaded TestKernel in ``hermes``, shut down afterwards."""
    made: list[TestKernel] = []

    def make(config: dict[str, Any] | None = None, *, script: Any = None) -> TestKernel:
        tk = TestKernel(hermes, config, script=script)
        made.append(tk)
        return tk

    yield make
    for tk in made:
        tk.close()


def plugin(home: Path, name: str, code: str) -> Path:
    return write_plugin(home, name, code, {"name": name, "version": "1.0.0"})


def collect_events(tk: TestKernel, *patterns: str) -> list[tuple[str, dict[str, Any], str | None]]:
    """``(event, context, last hook fired before it)`` for every event matching ``patterns``."""
    seen: list[tuple[str, dict[str, Any], str | None]] = []
    recorder = tk.recorder
    assert recorder is not None

    def receiver(name: str, context: dict[str, Any]) -> None:
        names = recorder.names()
        seen.append((name, context, names[-1] if names else None))

    for pattern in patterns:
        tk.kernel.events.connect(pattern, receiver, owner="test")
    return seen


# --------------------------------------------------------------------------
# Where each hook fires
# --------------------------------------------------------------------------


def test_every_hook_fires_in_its_place_for_a_turn_with_a_tool_call(
    harness: Callable[..., TestKernel],
) -> None:
    tk = harness(script=[*ONE_TOOL_TURN, "Still 65536."])
    rec = tk.recorder
    assert rec is not None
    session = tk.session()

    first = session.run("What is 2 to the power of 16?")
    assert rec.names() == FIRST_TURN_HOOKS
    assert isinstance(first, TurnResult)
    assert first.reply == "2**16 = 65536."
    assert first.session_id == session.session_id
    assert first.iterations == 2
    assert first.stopped is None
    assert [(c.id, c.name, json.loads(c.arguments)) for c in first.tool_calls] == [
        ("call_1", "calculate", {"expression": "2**16"})
    ]
    assert json.loads(first.tool_calls[0].result)["result"] == 65536
    assert first.usage["output_tokens"] > 0 and first.usage["input_tokens"] > 0
    assert json.loads(json.dumps(first.to_dict()))["tool_calls"][0]["name"] == "calculate"

    (start,) = rec.of("on_session_start")
    assert start["session_id"] == session.session_id and start["platform"] == "cli"
    (pre,) = rec.of("pre_llm_call")
    assert pre["user_message"] == "What is 2 to the power of 16?"
    assert pre["is_first_turn"] is True
    assert pre["turn_id"] == first.turn_id
    assert pre["session_id"] == session.session_id
    assert pre["conversation_history"] == []
    api = rec.of("pre_api_request")
    assert [a["session_id"] for a in api] == [session.session_id] * 2
    assert [a["api_mode"] for a in api] == ["scripted"] * 2
    assert len({a["api_request_id"] for a in api}) == 2
    assert [p["api_request_id"] for p in rec.of("post_api_request")] == [a["api_request_id"] for a in api]
    (tool,) = rec.of("pre_tool_call")
    assert tool["tool_name"] == "calculate"
    assert tool["args"] == {"expression": "2**16"}
    assert (tool["session_id"], tool["turn_id"], tool["tool_call_id"]) == (
        session.session_id,
        first.turn_id,
        "call_1",
    )
    (post_tool,) = rec.of("post_tool_call")
    assert json.loads(post_tool["result"])["result"] == 65536 and post_tool["status"] == "ok"
    (post,) = rec.of("post_llm_call")
    assert post["assistant_response"] == "2**16 = 65536."
    assert post["user_message"] == "What is 2 to the power of 16?"
    assert post["turn_id"] == first.turn_id
    assert [m["role"] for m in post["conversation_history"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    (transform,) = rec.of("transform_llm_output")
    assert transform["response_text"] == "2**16 = 65536."
    (end,) = rec.of("on_session_end")
    assert (end["session_id"], end["completed"], end["interrupted"]) == (session.session_id, True, False)

    # A second turn: no on_session_start; pre_llm_call sees the first turn in its copy of the history.
    rec.clear()
    second = session.run("And once more?")
    assert rec.names() == [
        "pre_llm_call",
        "pre_api_request",
        "post_api_request",
        "post_llm_call",
        "transform_llm_output",
        "on_session_end",
    ]
    assert second.reply == "Still 65536."
    assert second.turn_id != first.turn_id
    assert second.session_id == first.session_id
    (pre,) = rec.of("pre_llm_call")
    assert pre["is_first_turn"] is False
    assert [m["role"] for m in pre["conversation_history"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]

    rec.clear()
    session.close()
    # On exit: on_session_end once more (the hook fires at the end of each run and on exit), then finalize.
    assert rec.names() == ["on_session_end", "on_session_finalize"]
    (ended,) = rec.of("on_session_end")
    assert (ended["completed"], ended["interrupted"]) == (True, False)
    (final,) = rec.of("on_session_finalize")
    assert final["session_id"] == first.session_id
    assert final["reason"] == "exit"
    session.close()  # idempotent
    assert rec.names() == ["on_session_end", "on_session_finalize"]
    with pytest.raises(AgentError, match="closed"):
        session.run("anyone there?")


def test_a_session_as_context_manager_is_finalized(harness: Callable[..., TestKernel]) -> None:
    tk = harness(script=["hello"])
    with tk.session(platform="irc", sender_id="nick") as session:
        assert session.run("hi").reply == "hello"
    assert tk.recorder is not None
    (final,) = tk.recorder.of("on_session_finalize")
    assert final["platform"] == "irc" and final["session_id"] == session.session_id
    (pre,) = tk.recorder.of("pre_llm_call")
    assert (pre["platform"], pre["sender_id"]) == ("irc", "nick")


def test_transform_llm_output_replaces_the_reply(hermes: Path, harness: Callable[..., TestKernel]) -> None:
    plugin(
        hermes,
        "shouter",
        """
        def register(ctx):
            ctx.register_hook("transform_llm_output", lambda response_text, **kw: response_text.upper() + "!")
        """,
    )
    plugin(
        hermes,
        "abstainer",  # sorts first; returning None leaves the reply to the next plugin
        """
        def register(ctx):
            ctx.register_hook("transform_llm_output", lambda **kw: None)
        """,
    )
    tk = harness(script=["quiet words"])
    result = tk.session().run("say something")
    assert result.reply == "QUIET WORDS!"
    assert tk.recorder is not None
    # post_llm_call saw the model's own words: it fires before the transformation.
    assert tk.recorder.of("post_llm_call")[0]["assistant_response"] == "quiet words"


def test_reset_fires_on_session_reset_with_the_old_and_new_ids(harness: Callable[..., TestKernel]) -> None:
    tk = harness(script=["one", "two"])
    rec = tk.recorder
    assert rec is not None
    session = tk.session()
    session.run("first")
    old = session.session_id
    rec.clear()

    new = session.reset("new")
    assert new == session.session_id != old
    # The session that ends is finalised first (issue 16; Hermes' /new does the same), then the reset.
    assert rec.names() == ["on_session_finalize", "on_session_reset"]
    (final,) = rec.of("on_session_finalize")
    assert final == {
        "session_id": old,
        "platform": "cli",
        "reason": "new",
        "old_session_id": old,
        "new_session_id": new,
        "telemetry_schema_version": "hermes.observer.v1",
    }
    (reset,) = rec.of("on_session_reset")
    assert reset == {
        "session_id": new,
        "platform": "cli",
        "reason": "new",
        "old_session_id": old,
        "new_session_id": new,
        "telemetry_schema_version": "hermes.observer.v1",
    }
    assert session.messages == []

    rec.clear()
    result = session.run("again")
    assert result.session_id == new
    # The new session starts afresh: on_session_start again, first turn again.
    assert rec.names()[0] == "on_session_start"
    assert rec.of("on_session_start")[0]["session_id"] == new
    assert rec.of("pre_llm_call")[0]["is_first_turn"] is True
    assert rec.of("pre_llm_call")[0]["conversation_history"] == []


# --------------------------------------------------------------------------
# Injected context: the user's message, never the system prompt; copies of the history
# --------------------------------------------------------------------------

CONTEXT_PLUGIN = """
def register(ctx):
    def pre_llm_call(user_message, is_first_turn, **kw):
        return {"context": f"CTX[{user_message}] first={is_first_turn}"}
    ctx.register_hook("pre_llm_call", pre_llm_call)
"""


def test_pre_llm_call_context_is_appended_to_the_user_message(
    hermes: Path, harness: Callable[..., TestKernel]
) -> None:
    plugin(hermes, "injector", CONTEXT_PLUGIN)
    tk = harness(script=["reply one", "reply two"])
    session = tk.session()

    one = session.run("alpha")
    assert one.context == "CTX[alpha] first=True"
    two = session.run("beta")
    assert two.context == "CTX[beta] first=False"

    system, user1, _assistant1, user2, _assistant2 = session.messages
    assert system["role"] == "system"
    assert "CTX[" not in system["content"]
    assert user1 == {"role": "user", "content": "alpha\n\nCTX[alpha] first=True"}
    assert user2 == {"role": "user", "content": "beta\n\nCTX[beta] first=False"}

    # What the model was sent is the same: the context sits in the user's message of that turn.
    assert tk.recorder is not None
    sent = [a["request_messages"] for a in tk.recorder.of("pre_api_request")]
    assert sent[0] == session.messages[:2]
    assert sent[1] == session.messages[:4]
    assert all("CTX[" not in m[0]["content"] for m in sent)
    # post_llm_call gets the user's own words, without the injected context.
    assert [p["user_message"] for p in tk.recorder.of("post_llm_call")] == ["alpha", "beta"]


def test_memory_prefetch_and_hook_context_go_into_the_user_message(
    hermes: Path, harness: Callable[..., TestKernel]
) -> None:
    plugin(hermes, "injector", CONTEXT_PLUGIN)
    tk = harness({"memory": {"provider": "sqlite"}}, script=["Noted.", "You like ultramarine."])
    session = tk.session()
    session.run("My favourite colour is ultramarine.")
    result = session.run("Which colour is my favourite?")

    assert "ultramarine" in result.context
    assert "CTX[Which colour is my favourite?]" in result.context
    user = session.messages[-2]
    assert user["role"] == "user"
    assert user["content"].startswith("Which colour is my favourite?\n\n")
    assert "ultramarine" in user["content"] and "CTX[" in user["content"]
    system = session.messages[0]
    assert system["role"] == "system"
    # The memory tells the model it exists in the system prompt, but recalled text never goes there.
    assert "memory" in system["content"].lower()
    assert "ultramarine" not in system["content"] and "CTX[" not in system["content"]


def test_hooks_get_copies_of_the_history(hermes: Path, harness: Callable[..., TestKernel]) -> None:
    plugin(
        hermes,
        "vandal",
        """
        def register(ctx):
            def wreck(conversation_history, **kw):
                conversation_history.clear()
                conversation_history.append({"role": "system", "content": "VANDALISED"})
            ctx.register_hook("pre_llm_call", wreck)
            ctx.register_hook("post_llm_call", wreck)
        """,
    )
    tk = harness(script=[*ONE_TOOL_TURN, "second reply"])
    session = tk.session()
    session.run("first question")
    after_first = [dict(m) for m in session.messages]
    assert [m["role"] for m in after_first] == ["system", "user", "assistant", "tool", "assistant"]
    session.run("second question")
    assert session.messages[:5] == after_first
    assert [m["role"] for m in session.messages] == [*(m["role"] for m in after_first), "user", "assistant"]
    assert all("VANDALISED" not in str(m.get("content")) for m in session.messages)
    assert tk.recorder is not None
    last_request = tk.recorder.of("pre_api_request")[-1]["request_messages"]
    assert last_request == session.messages[:-1]
    # The vandal's hooks were called (and did not fail): the copies were really handed out.
    assert tk.kernel.plugin("vandal").disabled_hooks == []


# --------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------


def test_memory_stores_each_turn_and_a_later_turn_recalls_it(harness: Callable[..., TestKernel]) -> None:
    tk = harness(
        {"memory": {"provider": "sqlite"}},
        script=[
            "I will remember that your locker code is 4711.",
            "Understood.",
            "Your locker code is 4711.",
        ],
    )
    memory = tk.kernel.providers.memory()
    assert memory is not None and memory.name == "sqlite"

    with tk.session() as session:
        first = session.run("Please remember: my locker code is 4711.")
        assert first.context == ""  # nothing was stored before the first turn
        stats = memory.store.stats()
        assert stats["memories"] == 1 and stats["by_kind"] == {"turn": 1}
        session.run("Thanks, that is all for now.")
        assert memory.store.stats()["memories"] == 2
        stored = json.loads(tk.kernel.tools.dispatch("memory_search", {"query": "locker code"}))
        assert stored["count"] >= 1
        assert "User: Please remember: my locker code is 4711." in stored["results"][0]["content"]
        assert "Assistant: I will remember" in stored["results"][0]["content"]
        assert stored["results"][0]["session_id"] == session.session_id

    # A later session: the prefetch of its first turn recalls the fact.
    with tk.session() as later:
        result = later.run("What is my locker code?")
    assert "4711" in result.context
    assert "locker code is 4711" in later.messages[1]["content"]
    assert memory.store.stats()["memories"] == 3


# --------------------------------------------------------------------------
# The context engine
# --------------------------------------------------------------------------

ENGINE_PLUGIN = """
from kernel.providers import ContextEngine


class TestEngine(ContextEngine):
    name = "test"

    def __init__(self):
        super().__init__(1000)
        self.armed = False
        self.consulted = 0
        self.compressed = []
        self.usages = []

    def should_compress(self, prompt_tokens=None):
        self.consulted += 1
        return self.armed

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False, **kw):
        self.compressed.append(messages)
        return [messages[0], {"role": "user", "content": f"SUMMARY of {len(messages) - 1} messages"}]

    def update_from_response(self, usage):
        self.usages.append(usage)
        self.armed = True  # compress before every later call


def register(ctx):
    ctx.register_context_engine(TestEngine())
"""


def test_the_context_engine_is_consulted_before_each_model_call(
    hermes: Path, harness: Callable[..., TestKernel]
) -> None:
    plugin(hermes, "test-engine", ENGINE_PLUGIN)
    tk = harness({"context": {"engine": "test"}}, script=ONE_TOOL_TURN)
    engine = tk.kernel.providers.context_engine()
    assert engine is not None and engine.name == "test"
    session = tk.session()
    result = session.run("What is 2**16?")
    assert result.reply == "2**16 = 65536."

    # Two model calls, two consultations; the second found the engine armed and compressed.
    assert engine.consulted == 2
    assert len(engine.usages) == 2 and all("input_tokens" in u for u in engine.usages)
    (compressed,) = engine.compressed
    assert [m["role"] for m in compressed] == ["system", "user", "assistant", "tool"]

    assert tk.recorder is not None
    sent = [a["request_messages"] for a in tk.recorder.of("pre_api_request")]
    assert [m["role"] for m in sent[0]] == ["system", "user"]
    assert sent[1] == [compressed[0], {"role": "user", "content": "SUMMARY of 3 messages"}]
    # The session continues from the compressed conversation.
    assert session.messages == [*sent[1], {"role": "assistant", "content": "2**16 = 65536."}]


# --------------------------------------------------------------------------
# The iteration cap
# --------------------------------------------------------------------------


def test_the_iteration_cap_stops_a_model_that_keeps_calling_tools(
    hermes: Path, harness: Callable[..., TestKernel]
) -> None:
    tk = harness({"agent": {"max_iterations": 3}}, script=[TOOL_TURN] * 6)
    session = tk.session()
    assert session.max_iterations == 3
    result = session.run("Compute forever")

    assert result.stopped == "max_iterations"
    assert result.iterations == 3
    assert len(result.tool_calls) == 3
    assert "3 iterations" in result.reply and "agent.max_iterations" in result.reply
    assert tk.recorder is not None
    assert len(tk.recorder.of("pre_api_request")) == 3  # no fourth model call
    assert tk.recorder.of("on_session_end")[-1]["completed"] is True
    (line,) = [line for line in agent_log(hermes).splitlines() if "agent_iteration_cap" in line]
    assert "warning" in line and "max_iterations=3" in line and session.session_id in line

    # The argument wins over the config; without either the default applies.
    assert AgentSession(tk.kernel, max_iterations=2).max_iterations == 2


def test_the_default_iteration_cap_and_a_normal_turn_is_not_stopped(
    harness: Callable[..., TestKernel],
) -> None:
    tk = harness(script=["done"])
    session = tk.session()
    assert session.max_iterations == 20
    result = session.run("hi")
    assert result.stopped is None and result.iterations == 1


# --------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------


def test_events_are_emitted_at_the_matching_points(harness: Callable[..., TestKernel]) -> None:
    tk = harness(script=[*ONE_TOOL_TURN, "plain"])
    seen = collect_events(tk, "session:*", "agent:*")
    session = tk.session()

    first = session.run("What is 2**16?")
    assert [(name, last) for name, _, last in seen] == [
        ("session:start", "on_session_start"),
        ("agent:start", "on_session_start"),
        ("agent:step", "post_api_request"),
        ("agent:step", "post_api_request"),
        ("agent:end", "on_session_end"),
    ]
    start, agent_start, step1, step2, end = (context for _, context, _ in seen)
    assert start["session_id"] == session.session_id and start["platform"] == "cli"
    assert agent_start["message"] == "What is 2**16?"
    assert (step1["iteration"], step1["tool_names"]) == (1, ["calculate"])
    assert (step2["iteration"], step2["tool_names"]) == (2, [])
    assert end["response"] == first.reply
    assert "error" not in end

    seen.clear()
    session.run("again")
    assert [name for name, _, _ in seen] == ["agent:start", "agent:step", "agent:end"]

    seen.clear()
    old = session.session_id
    new = session.reset()
    assert [name for name, _, _ in seen] == ["session:reset"]
    assert seen[0][1]["old_session_id"] == old and seen[0][1]["session_id"] == new

    seen.clear()
    session.close()
    assert [(name, last) for name, _, last in seen] == [("session:end", "on_session_finalize")]
    assert seen[0][1]["session_id"] == new


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


def test_no_model_configured_is_an_agent_error(harness: Callable[..., TestKernel]) -> None:
    tk = harness()
    seen = collect_events(tk, "session:*", "agent:*")
    session = tk.session()
    with pytest.raises(AgentError, match=r"no model provider configured.*model\.provider"):
        session.run("hello?")
    assert tk.recorder is not None and tk.recorder.names() == []
    assert seen == []
    assert session.messages == []


def test_an_unknown_model_provider_is_an_agent_error(harness: Callable[..., TestKernel]) -> None:
    tk = harness({"model": {"provider": "nonesuch"}})
    with pytest.raises(AgentError, match=r"nonesuch.*available: .*scripted"):
        tk.session().run("hello?")


def test_a_scripted_model_without_its_script_file_is_an_agent_error(hermes: Path) -> None:
    config = {"model": {"provider": "scripted", "script": "missing.yaml"}}
    with TestKernel(hermes, config) as tk, pytest.raises(AgentError, match=r"missing\.yaml"):
        tk.session().run("hello?")


def test_an_interrupted_turn_ends_the_run_as_interrupted(
    hermes: Path, harness: Callable[..., TestKernel]
) -> None:
    plugin(
        hermes,
        "stopper",
        """
        def register(ctx):
            def stop(args, **kw):
                raise KeyboardInterrupt
            ctx.register_tool("stop_now", "test", {"name": "stop_now", "description": "stop",
                              "parameters": {"type": "object", "properties": {}}}, stop)
        """,
    )
    tk = harness(script=[{"tool_calls": [{"name": "stop_now"}]}, "never reached"])
    seen = collect_events(tk, "agent:end")
    with pytest.raises(KeyboardInterrupt):
        tk.session().run("go")
    assert tk.recorder is not None
    (end,) = tk.recorder.of("on_session_end")
    assert (end["completed"], end["interrupted"]) == (False, True)
    assert tk.recorder.of("post_llm_call") == []
    assert "KeyboardInterrupt" in seen[0][1]["error"]


# --------------------------------------------------------------------------
# Against a real OpenAI-compatible server on 127.0.0.1
# --------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(default=Reply(418, {"error": {"message": "no reply programmed"}})) as chat:
        yield chat


def server_config(server: LocalServer, **extra: Any) -> dict[str, Any]:
    model = {
        "provider": "openai-compatible",
        "base_url": server.base_url,
        "model": "local-model",
        "timeout": 10,
    }
    return {"model": {**model, **extra}}


def completion(message: dict[str, Any], usage: tuple[int, int]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "local-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def test_a_tool_call_round_trip_through_a_local_http_server(
    server: LocalServer, harness: Callable[..., TestKernel]
) -> None:
    def respond(seen: Seen) -> Reply:
        tool_results = [m for m in seen.json["messages"] if m["role"] == "tool"]
        if not tool_results:
            call = {
                "id": "call_xyz",
                "type": "function",
                "function": {"name": "calculate", "arguments": json.dumps({"expression": "6 * 7"})},
            }
            return Reply(
                200, completion({"role": "assistant", "content": None, "tool_calls": [call]}, (30, 5))
            )
        value = json.loads(tool_results[-1]["content"])["result"]
        return Reply(200, completion({"role": "assistant", "content": f"6 * 7 = {value}"}, (50, 7)))

    server.set_default(respond)
    tk = harness(server_config(server))
    session = tk.session()
    result = session.run("What is six times seven?")

    assert result.reply == "6 * 7 = 42"
    assert [(c.id, c.name) for c in result.tool_calls] == [("call_xyz", "calculate")]
    assert json.loads(result.tool_calls[0].result)["result"] == 42
    assert (result.usage["input_tokens"], result.usage["output_tokens"]) == (80, 12)

    assert [s.path for s in server.seen] == ["/v1/chat/completions"] * 2
    first, second = (s.json for s in server.seen)
    assert first["model"] == "local-model"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "calculate" in {t["function"]["name"] for t in first["tools"]}
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call_xyz"
    assert second["messages"][-1]["role"] == "tool" and second["messages"][-1]["tool_call_id"] == "call_xyz"
    assert json.loads(second["messages"][-1]["content"])["result"] == 42

    rec = tk.recorder
    assert rec is not None
    assert rec.names() == FIRST_TURN_HOOKS
    assert {a["api_mode"] for a in rec.of("pre_api_request")} == {"chat_completions"}
    assert {a["base_url"] for a in rec.of("pre_api_request")} == {server.base_url}
    assert rec.of("api_request_error") == []
    assert rec.of("post_llm_call")[0]["assistant_response"] == "6 * 7 = 42"


def test_a_500_storm_is_an_agent_error_and_the_run_ends_incomplete(
    server: LocalServer, harness: Callable[..., TestKernel]
) -> None:
    server.set_default(Reply(500, {"error": {"message": "the GPU is on fire"}}, {"Retry-After": "0"}))
    tk = harness(server_config(server, max_retries=2))
    seen = collect_events(tk, "agent:*")
    session = tk.session()
    with pytest.raises(AgentError, match=r"500.*the GPU is on fire"):
        session.run("hello?")

    assert len(server.seen) == 3  # the first attempt and two retries
    rec = tk.recorder
    assert rec is not None
    assert [e["attempt"] for e in rec.of("api_request_error")] == [1, 2, 3]
    assert {e["status_code"] for e in rec.of("api_request_error")} == {500}
    assert rec.of("post_api_request") == []
    assert rec.of("post_llm_call") == []
    assert rec.of("transform_llm_output") == []
    (end,) = rec.of("on_session_end")
    assert (end["completed"], end["interrupted"]) == (False, False)
    assert rec.names()[-1] == "on_session_end"
    assert [name for name, _, _ in seen] == ["agent:start", "agent:end"]
    assert "500" in seen[-1][1]["error"]


VERIFIER = """
import hook_sink

def register(ctx):
    def verify(**kwargs):
        hook_sink.calls.append(dict(kwargs))
        if kwargs["attempt"] == 0:
            return {"action": "continue", "message": "  run the check once more  "}
        if kwargs["attempt"] == 1:
            return {"decision": "block", "reason": "and tidy up"}
        return {"action": "continue", "message": "   "}  # blank: lets the turn finish
    ctx.register_hook("pre_verify", verify)
"""


def test_pre_verify_keeps_a_turn_that_ran_tools_going(
    hermes: Path, harness: Callable[..., TestKernel], sink: Any
) -> None:
    """Hermes' verification gate: each ``continue`` (or Claude Code's ``block``) appends its message as a
    user message and calls the model again, up to ``agent.max_verify_nudges``; a turn without tools
    never asks."""
    plugin(hermes / "plugins", "verifier", VERIFIER)
    path_call = {"name": "calculate", "arguments": {"expression": "1+1", "path": "notes/a.txt"}}
    tk = harness(
        script=[{"text": "computing", "tool_calls": [path_call]}, "first answer", "second", "third", "plain"]
    )
    session = tk.session()
    result = session.run("add")
    assert result.reply == "third"
    assert [c["attempt"] for c in sink.calls] == [0, 1, 2]
    first = sink.calls[0]
    assert first["final_response"] == "first answer" and first["changed_paths"] == ["notes/a.txt"]
    assert first["session_id"] == session.session_id and first["platform"] == "cli"
    assert first["coding"] is False and isinstance(first["model"], str)
    users = [m["content"] for m in session.messages if m["role"] == "user"]
    assert users[-2:] == ["run the check once more", "and tidy up"]
    sink.calls.clear()
    assert session.run("again").reply == "plain"  # no tool ran in this turn: no gate
    assert sink.calls == []


def test_pre_verify_is_bounded_by_max_verify_nudges(
    hermes: Path, harness: Callable[..., TestKernel], sink: Any
) -> None:
    plugin(hermes / "plugins", "verifier", VERIFIER)
    tk = harness({"agent": {"max_verify_nudges": 1}}, script=[*ONE_TOOL_TURN, "after one nudge"])
    result = tk.session().run("go")
    assert result.reply == "after one nudge" and [c["attempt"] for c in sink.calls] == [0]
    sink.calls.clear()
    tk2 = harness({"agent": {"max_verify_nudges": 0}}, script=ONE_TOOL_TURN)
    assert tk2.session().run("go").reply == "2**16 = 65536."
    assert sink.calls == []


SUBAGENT_WATCH = """
import hook_sink

def register(ctx):
    ctx.register_hook("subagent_start", lambda **kw: hook_sink.calls.append(("start", dict(kw))))
    ctx.register_hook("subagent_stop", lambda **kw: hook_sink.calls.append(("stop", dict(kw))))
"""


def test_delegate_runs_a_sub_agent_and_fires_subagent_start_and_stop(
    hermes: Path, harness: Callable[..., TestKernel], sink: Any
) -> None:
    """``AgentSession.delegate``: a fresh session runs the goal as one turn; the hooks carry both the
    kernel's argument names and Hermes' (``child_goal``, ``parent_turn_id``, ``child_subagent_id``)."""
    plugin(hermes / "plugins", "watch", SUBAGENT_WATCH)
    tk = harness(script=["parent reply", *ONE_TOOL_TURN])
    parent = tk.session()
    parent.run("hello")
    result = parent.delegate("What is 2**16?", role="calculator")
    assert result.reply == "2**16 = 65536." and result.session_id != parent.session_id
    (kind_a, start), (kind_b, stop) = sink.calls
    assert (kind_a, kind_b) == ("start", "stop")
    assert start["parent_session_id"] == parent.session_id
    assert start["child_session_id"] == result.session_id
    assert start["goal"] == start["child_goal"] == "What is 2**16?"
    assert start["child_role"] == "calculator" and start["parent_turn_id"].startswith("turn")
    assert start["child_subagent_id"] == f"{parent.session_id}/sub-1" and start["parent_subagent_id"] == ""
    assert stop["child_status"] == "completed" and stop["child_summary"] == "2**16 = 65536."
    assert [h["tool"] for h in stop["tool_call_history"]] == ["calculate"]
    assert isinstance(stop["duration_ms"], int) and stop["child_session_id"] == result.session_id
    assert parent.messages[-1]["content"] == "parent reply"  # the parent's conversation is its own


def test_a_failing_sub_agent_is_reported_failed_and_raises(
    hermes: Path, harness: Callable[..., TestKernel], sink: Any
) -> None:
    plugin(hermes / "plugins", "watch", SUBAGENT_WATCH)
    tk = harness({"model": {"provider": "nonesuch"}})  # the child's model cannot be had
    parent = tk.session()
    with pytest.raises(AgentError):
        parent.delegate("anything")
    (_, stop) = sink.calls[-1]
    assert stop["child_status"] == "failed" and stop["child_summary"] is None
