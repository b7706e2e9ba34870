"""The OpenAI Agents SDK adapter (kernel/integrations/openai_agents.py) through real kernels.

Every test loads a real kernel over plugin folders it writes in a temporary home (the bundled
directory is empty), and drives ``agents.Runner`` with :class:`OfflineModel`, a ``Model`` of the SDK
answering from a script: it records what the SDK handed it (the input items, the tools' names), so
the tests assert what the model actually received.  Tracing is off in every run: nothing leaves the
machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, FunctionTool, RunConfig
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from conftest import REPO, TURN_HOOKS, write_plugin
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.integrations.openai_agents import HermesAgentsSession
from kernel.providers import ChatResult, ToolCall
from kernel.providers import Usage as KernelUsage

OFFLINE = RunConfig(tracing_disabled=True)
#: A safety net for the waits on events: a run that never gets there fails instead of hanging.
DEADLINE = 60

HOOKS = TURN_HOOKS

# Records every turn hook as (plugin, hook, kwargs); its pre_llm_call gives a context naming the session.
RECORDER = """
import hook_sink

HOOKS = {hooks!r}


def recorder(hook):
    def record(**kwargs):
        hook_sink.calls.append(({name!r}, hook, dict(kwargs)))
        if hook == "pre_llm_call":
            return {{"context": "{name} knows " + kwargs["session_id"]}}
    return record


def register(ctx):
    for hook in HOOKS:
        ctx.register_hook(hook, recorder(hook))
"""

# The tool the model calls; its handler records what it was called with.
POWER = """
import json
import hook_sink

SCHEMA = {
    "name": "power",
    "description": "base to the power exp",
    "parameters": {
        "type": "object",
        "properties": {"base": {"type": "integer"}, "exp": {"type": "integer"}},
        "required": ["base", "exp"],
    },
}


def power(args, **kw):
    hook_sink.calls.append(("handler", "power", {"args": args, **kw}))
    return json.dumps({"result": args["base"] ** args["exp"]})


def register(ctx):
    ctx.register_tool(name="power", toolset="maths", schema=SCHEMA, handler=power)
"""

GUARD = """
def register(ctx):
    def guard(tool_name, args, **kw):
        if tool_name == "power":
            return {"action": "block", "message": "no powers today"}
    ctx.register_hook("pre_tool_call", guard)
"""

# A Hermes memory provider: the plugin folder only defines the class (no plugin.yaml).
NOTES_MEMORY = """
from agent.memory_provider import MemoryProvider


class NotesMemory(MemoryProvider):
    def __init__(self):
        self.calls = []

    @property
    def name(self):
        return "notes"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        self.calls.append(("initialize", session_id))

    def get_tool_schemas(self):
        return []

    def handle_tool_call(self, tool_name, args, **kwargs):
        return "{}"

    def prefetch(self, query, *, session_id=""):
        self.calls.append(("prefetch", query, session_id))
        return "RECALLED: the user's favourite colour is teal"

    def sync_turn(self, user_content, assistant_content, *, session_id="", **kwargs):
        self.calls.append(("sync_turn", user_content, assistant_content, session_id))

    def on_session_end(self, messages):
        self.calls.append(("on_session_end", [m["role"] for m in messages]))
"""


# --------------------------------------------------------------------------
# The offline model
# --------------------------------------------------------------------------

#: A step of the script: a reply text, a list of ``(name, arguments, call_id)`` tool calls, an exception
#: to raise, or an async function of the input (plain JSON) returning one of those.
Step = Any


class OfflineModel(Model):
    """The SDK's ``Model`` interface answered from ``steps``, one per call, recording each call's input."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.inputs: list[list[dict[str, Any]]] = []
        self.tool_names: list[list[str]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        seen = plain(input)
        self.inputs.append(seen)
        self.tool_names.append([t.name for t in tools])
        step = self.steps.pop(0)
        if callable(step):
            step = await step(seen)
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, str):
            output: list[Any] = [reply_item(step)]
        else:
            output = [
                ResponseFunctionToolCall(type="function_call", id=cid, call_id=cid, name=name, arguments=args)
                for name, args, cid in step
            ]
        return ModelResponse(output=output, usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the offline model does not stream")


def reply_item(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        type="message",
        id="msg",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def plain(value: Any) -> Any:
    """The SDK's input items as plain JSON data."""
    return json.loads(json.dumps(value, default=lambda o: o.model_dump(exclude_none=True)))


def outputs(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The ``function_call_output`` items of a model input: call id -> the decoded output."""
    return {i["call_id"]: json.loads(i["output"]) for i in items if i.get("type") == "function_call_output"}


def users(items: Sequence[dict[str, Any]]) -> list[str]:
    return [i["content"] for i in items if i.get("role") == "user"]


def power_call(cid: str, base: int = 2, exp: int = 16) -> tuple[str, str, str]:
    return ("power", json.dumps({"base": base, "exp": exp}), cid)


# --------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------


@pytest.fixture
def plugins(plugin_dir: Callable[..., Path]) -> Callable[..., None]:
    """``plugins(*names)``: write the named plugins (``a_rec``, ``b_rec``, ``power``, ``guard``)."""
    sources = {
        "a_rec": RECORDER.format(name="a_rec", hooks=HOOKS),
        "b_rec": RECORDER.format(name="b_rec", hooks=HOOKS),
        "power": POWER,
        "guard": GUARD,
    }

    def write(*names: str) -> None:
        for name in names:
            plugin_dir(name, sources[name])

    return write


def sink_calls(sink: types.ModuleType, *, hook: str | None = None) -> list[tuple[str, str, dict[str, Any]]]:
    return [c for c in sink.calls if hook is None or c[1] == hook]


def kwargs_of(sink: types.ModuleType, hook: str, plugin: str = "a_rec") -> list[dict[str, Any]]:
    return [kw for who, name, kw in sink.calls if name == hook and who == plugin]


def handler_calls(sink: types.ModuleType) -> list[dict[str, Any]]:
    return [kw for who, _name, kw in sink.calls if who == "handler"]


# --------------------------------------------------------------------------
# A turn: the context in, the tool through the kernel, the reply out
# --------------------------------------------------------------------------


def test_a_turn_gives_the_model_the_context_and_the_kernel_tool_result_under_the_sdk_call_id(
    make_kernel: Callable[..., Kernel], plugins: Callable[..., None], sink: types.ModuleType
) -> None:
    plugins("a_rec", "b_rec", "power")
    k = make_kernel()
    model = OfflineModel([power_call("call_sdk_1")], "2**16 = 65536.")
    with HermesAgentsSession(k) as hermes:
        tools = hermes.tools()
        assert [(t.name, t.description, t.strict_json_schema) for t in tools] == [
            ("power", "base to the power exp", False)
        ]
        assert isinstance(tools[0], FunctionTool)
        assert tools[0].params_json_schema == k.tools.schemas()[0]["function"]["parameters"]
        agent = Agent(name="maths", model=model, tools=tools)

        result = asyncio.run(hermes.run(agent, "What is 2**16?", run_config=OFFLINE))

    sid = hermes.session_id
    assert result.final_output == "2**16 = 65536."
    # The user's text, then the merged context (plugin order), as the one user message of the first call.
    context = f"a_rec knows {sid}\n\nb_rec knows {sid}"
    assert model.inputs[0] == [{"role": "user", "content": f"What is 2**16?\n\n{context}"}]
    assert model.tool_names == [["power"], ["power"]]
    # The second call sees the kernel's JSON result as the output of the SDK's call.
    assert outputs(model.inputs[1]) == {"call_sdk_1": {"result": 65536}}
    (handled,) = handler_calls(sink)
    assert handled["args"] == {"base": 2, "exp": 16}
    assert (handled["session_id"], handled["tool_call_id"]) == (sid, "call_sdk_1")
    (pre_llm,) = kwargs_of(sink, "pre_llm_call")
    for hook in ("pre_tool_call", "post_tool_call"):
        (seen,) = kwargs_of(sink, hook)
        assert (seen["tool_name"], seen["tool_call_id"], seen["session_id"]) == ("power", "call_sdk_1", sid)
        assert seen["turn_id"] == pre_llm["turn_id"] and seen["turn_id"].startswith("turn-")
    (post_tool,) = kwargs_of(sink, "post_tool_call")
    assert json.loads(post_tool["result"]) == {"result": 65536} and post_tool["status"] == "ok"
    (post_llm,) = kwargs_of(sink, "post_llm_call")
    assert post_llm["assistant_response"] == "2**16 = 65536."
    assert post_llm["user_message"] == "What is 2**16?"
    assert post_llm["turn_id"] == pre_llm["turn_id"]
    assert [m["role"] for m in post_llm["conversation_history"]] == ["user", "assistant", "tool", "assistant"]
    (start,) = kwargs_of(sink, "on_session_start")
    assert (start["session_id"], start["platform"]) == (sid, "openai-agents")


class ScriptedTransport:
    """A host model for AgentSession (``k.providers.use_model``): one tool call, then a reply."""

    model = "transport"

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        self.calls += 1
        calls = [ToolCall("call_1", "power", '{"base": 2, "exp": 16}')] if self.calls == 1 else []
        text = "" if calls else "2**16 = 65536."
        return ChatResult(text, calls, KernelUsage(), "transport", "host", None, {})


def test_hooks_fire_in_plugin_order_with_the_same_arguments_as_the_reference_loop(
    make_kernel: Callable[..., Kernel], plugins: Callable[..., None], sink: types.ModuleType
) -> None:
    plugins("b_rec", "a_rec", "power")  # written out of order: the kernel orders plugins by name
    k = make_kernel()
    hermes = HermesAgentsSession(k)
    agent = Agent(
        name="maths", model=OfflineModel([power_call("c1")], "2**16 = 65536."), tools=hermes.tools()
    )
    asyncio.run(hermes.run(agent, "What is 2**16?", run_config=OFFLINE))
    hermes.close()
    ours = list(sink.calls)

    sink.calls.clear()
    reference = make_kernel()
    reference.providers.use_model(ScriptedTransport())
    session = AgentSession(reference)
    assert session.run("What is 2**16?").reply == "2**16 = 65536."
    session.close()
    theirs = list(sink.calls)

    def order(calls: list[tuple[str, str, dict[str, Any]]]) -> list[tuple[str, str]]:
        return [(hook, who) for who, hook, _kw in calls if who != "handler"]

    turn = [(hook, who) for hook in HOOKS for who in ("a_rec", "b_rec")]
    closing = [("on_session_end", "a_rec"), ("on_session_end", "b_rec")]
    assert order(ours) == turn + closing
    assert order(ours) == order(theirs)
    names = [(hook, sorted(kw)) for who, hook, kw in ours if who != "handler"]
    assert names == [(hook, sorted(kw)) for who, hook, kw in theirs if who != "handler"]


# --------------------------------------------------------------------------
# The memory
# --------------------------------------------------------------------------


def test_memory_recall_reaches_the_model_and_sync_turn_sees_the_turn(
    home: Path, make_kernel: Callable[..., Kernel]
) -> None:
    write_plugin(home / "plugins", "memory/notes", NOTES_MEMORY, manifest="")
    k = make_kernel({"memory": {"provider": "notes"}})
    memory = k.providers.memory()
    model = OfflineModel("Teal, as you said.")
    hermes = HermesAgentsSession(k)
    result = hermes.run_sync(Agent(name="a", model=model), "What is my favourite colour?", run_config=OFFLINE)
    assert result.final_output == "Teal, as you said."
    sid = hermes.session_id

    (sent,) = users(model.inputs[0])
    assert sent.startswith("What is my favourite colour?\n\n")
    assert "RECALLED: the user's favourite colour is teal" in sent
    calls = [c for c in memory.calls if c[0] in ("initialize", "prefetch", "sync_turn")]
    assert calls == [
        ("initialize", sid),
        ("prefetch", "What is my favourite colour?", sid),
        ("sync_turn", "What is my favourite colour?", "Teal, as you said.", sid),
    ]
    hermes.close()
    assert memory.calls[-1] == ("on_session_end", ["user", "assistant"])


# --------------------------------------------------------------------------
# The reply
# --------------------------------------------------------------------------


def test_a_transformed_reply_replaces_the_final_output_and_the_history_keeps_the_models(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir(
        "shout",
        "def register(ctx):\n"
        "    shout = lambda response_text, **kw: response_text.upper() + '!'\n"
        "    ctx.register_hook('transform_llm_output', shout)\n",
    )
    k = make_kernel()
    model = OfflineModel("hello there", "again")
    with HermesAgentsSession(k) as hermes:
        agent = Agent(name="a", model=model)
        result = asyncio.run(hermes.run(agent, "hi", run_config=OFFLINE))
        assert result.final_output == "HELLO THERE!"
        asyncio.run(hermes.run(agent, "and?", run_config=OFFLINE))
    assistant = [i for i in model.inputs[1] if i.get("role") == "assistant"]
    assert [part["text"] for i in assistant for part in i["content"]] == ["hello there"]


# --------------------------------------------------------------------------
# Hostile cases
# --------------------------------------------------------------------------


def test_a_guards_block_is_the_tools_output_and_the_handler_never_runs(
    make_kernel: Callable[..., Kernel], plugins: Callable[..., None], sink: types.ModuleType
) -> None:
    plugins("a_rec", "guard", "power")
    k = make_kernel()
    model = OfflineModel([power_call("call_x")], "I could not compute it.")
    with HermesAgentsSession(k) as hermes:
        agent = Agent(name="a", model=model, tools=hermes.tools())
        result = asyncio.run(hermes.run(agent, "What is 2**16?", run_config=OFFLINE))
    assert result.final_output == "I could not compute it."
    assert outputs(model.inputs[1]) == {"call_x": {"error": "no powers today"}}
    assert handler_calls(sink) == []
    (pre,) = kwargs_of(sink, "pre_tool_call")
    assert pre["tool_call_id"] == "call_x"
    (post,) = kwargs_of(sink, "post_tool_call")  # observers hear of the blocked call, under its id
    assert (post["tool_call_id"], post["status"]) == ("call_x", "blocked")


def test_unknown_tools_and_malformed_arguments_are_error_outputs_and_the_run_goes_on(
    make_kernel: Callable[..., Kernel],
    plugins: Callable[..., None],
    plugin_dir: Callable[..., Path],
    sink: types.ModuleType,
) -> None:
    plugins("power")
    plugin_dir(
        "other",
        "def register(ctx):\n"
        "    ctx.register_tool(name='other', toolset='x', schema={'name': 'other', 'description': 'o',"
        " 'parameters': {'type': 'object', 'properties': {}}}, handler=lambda args, **kw: '{}')\n",
    )
    k = make_kernel()
    calls = [
        ("pwoer", "{}", "c_unknown"),
        ("power", "{not json", "c_bad_json"),
        ("power", "[2, 16]", "c_not_object"),
        ("other", "{}", "c_not_given"),
    ]
    model = OfflineModel(calls, "Sorry, those failed.")
    with HermesAgentsSession(k) as hermes:
        power_only = [t for t in hermes.tools() if t.name == "power"]
        agent = Agent(name="a", model=model, tools=power_only)
        result = asyncio.run(hermes.run(agent, "try things", run_config=OFFLINE))
    assert result.final_output == "Sorry, those failed."
    seen = outputs(model.inputs[1])
    assert set(seen) == {"c_unknown", "c_bad_json", "c_not_object", "c_not_given"}
    assert all(set(v) == {"error"} for v in seen.values()), seen
    assert "unknown tool 'pwoer'" in seen["c_unknown"]["error"]
    assert "did you mean 'power'" in seen["c_unknown"]["error"]
    assert "not valid JSON" in seen["c_bad_json"]["error"]
    assert "must be a JSON object" in seen["c_not_object"]["error"]
    assert "not among this agent's tools" in seen["c_not_given"]["error"]
    assert handler_calls(sink) == []


class ModelDown(Exception):
    pass


def test_a_run_whose_model_raises_ends_the_turn_not_completed_and_the_next_turn_works(
    make_kernel: Callable[..., Kernel], plugins: Callable[..., None], sink: types.ModuleType
) -> None:
    plugins("a_rec")
    k = make_kernel()
    boom = ModelDown("the model is down")
    model = OfflineModel(boom, "Back again.")
    hermes = HermesAgentsSession(k)
    agent = Agent(name="a", model=model)
    with pytest.raises(ModelDown) as raised:
        asyncio.run(hermes.run(agent, "first try", run_config=OFFLINE))
    assert raised.value is boom
    assert [hook for _who, hook, _kw in sink.calls] == ["on_session_start", "pre_llm_call", "on_session_end"]
    (end,) = kwargs_of(sink, "on_session_end")
    assert (end["completed"], end["interrupted"]) == (False, False)
    assert hermes.session.turn is None

    sink.calls.clear()
    result = asyncio.run(hermes.run(agent, "second try", run_config=OFFLINE))
    assert result.final_output == "Back again."
    # The failed turn left nothing behind: the second run starts from its own message.
    assert users(model.inputs[1]) == [f"second try\n\na_rec knows {hermes.session_id}"]
    (post,) = kwargs_of(sink, "post_llm_call")
    assert (post["user_message"], post["assistant_response"]) == ("second try", "Back again.")
    (end,) = kwargs_of(sink, "on_session_end")
    assert end["completed"] is True
    hermes.close()


def test_a_cancelled_run_ends_the_turn_interrupted_and_the_session_stays_usable(
    make_kernel: Callable[..., Kernel], plugins: Callable[..., None], sink: types.ModuleType
) -> None:
    plugins("a_rec")
    k = make_kernel()

    async def scenario() -> tuple[bool, str]:
        called, never = asyncio.Event(), asyncio.Event()

        async def hang(_input: Any) -> Step:
            called.set()
            await never.wait()
            return "unreachable"

        model = OfflineModel(hang, "Here now.")
        hermes = HermesAgentsSession(k)
        agent = Agent(name="a", model=model)
        task = asyncio.create_task(hermes.run(agent, "slow question", run_config=OFFLINE))
        await asyncio.wait_for(called.wait(), DEADLINE)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        ended = kwargs_of(sink, "on_session_end")
        assert [(e["completed"], e["interrupted"]) for e in ended] == [(False, True)]
        result = await hermes.run(agent, "quick question", run_config=OFFLINE)
        hermes.close()
        return bool(model.steps), str(result.final_output)

    left, reply = asyncio.run(scenario())
    assert (left, reply) == (False, "Here now.")
    assert [(e["completed"], e["interrupted"]) for e in kwargs_of(sink, "on_session_end")] == [
        (False, True),
        (True, False),
        (True, False),  # on close
    ]


# Injects a message for the conversation whose turn is beginning (no session id: the call's own).
INJECTOR = """
def register(ctx):
    def pre_llm_call(session_id, user_message, **kw):
        ctx.inject_message("note for " + user_message)
    ctx.register_hook("pre_llm_call", pre_llm_call)
"""


def test_two_sessions_on_one_kernel_run_concurrently_and_keep_ids_contexts_and_messages_apart(
    make_kernel: Callable[..., Kernel],
    plugins: Callable[..., None],
    plugin_dir: Callable[..., Path],
    sink: types.ModuleType,
) -> None:
    plugins("a_rec", "power")
    plugin_dir("injector", INJECTOR)
    k = make_kernel()
    one, two = (
        HermesAgentsSession(k, session_id="session-one"),
        HermesAgentsSession(k, session_id="session-two"),
    )

    async def scenario() -> list[Any]:
        both_in = asyncio.Event()
        arrived: list[str] = []

        async def respond(seen: list[dict[str, Any]]) -> Step:
            who = users(seen)[0].split()[0]  # "one" or "two"
            if not outputs(seen):
                arrived.append(who)
                if len(arrived) == 2:
                    both_in.set()
                # Each run waits inside the model until the other is there too.
                await asyncio.wait_for(both_in.wait(), DEADLINE)
                return [power_call(f"call-{who}", exp=1 if who == "one" else 2)]
            return f"{who} done"

        # One agent for both, made with the first session's tools: a tool runs for the session running it.
        model = OfflineModel(*[respond] * 4)
        agent = Agent(name="shared", model=model, tools=one.tools())
        results = await asyncio.gather(
            one.run(agent, "one asks", run_config=OFFLINE), two.run(agent, "two asks", run_config=OFFLINE)
        )
        return [r.final_output for r in results] + [model.inputs]

    reply_one, reply_two, inputs = asyncio.run(scenario())
    assert (reply_one, reply_two) == ("one done", "two done")
    first_calls = [i for i in inputs if not outputs(i)]
    for sid, who in (("session-one", "one"), ("session-two", "two")):
        (seen,) = [i for i in first_calls if users(i)[0].startswith(who)]
        assert users(seen) == [f"{who} asks\n\na_rec knows {sid}", f"note for {who} asks"]
        (pre,) = [kw for kw in kwargs_of(sink, "pre_tool_call") if kw["tool_call_id"] == f"call-{who}"]
        (pre_llm,) = [kw for kw in kwargs_of(sink, "pre_llm_call") if kw["session_id"] == sid]
        assert (pre["session_id"], pre["turn_id"]) == (sid, pre_llm["turn_id"])
        (handled,) = [kw for kw in handler_calls(sink) if kw["tool_call_id"] == f"call-{who}"]
        assert (handled["session_id"], handled["task_id"]) == (sid, sid)
    by_call = {cid: out for i in inputs for cid, out in outputs(i).items()}
    assert by_call == {"call-one": {"result": 2}, "call-two": {"result": 4}}
    assert {kw["session_id"] for kw in kwargs_of(sink, "post_llm_call")} == {"session-one", "session-two"}
    one.close()
    two.close()


# --------------------------------------------------------------------------
# The conversation carried over
# --------------------------------------------------------------------------


def test_the_second_turn_gets_the_first_turns_items_with_the_users_own_text(
    make_kernel: Callable[..., Kernel], plugins: Callable[..., None], sink: types.ModuleType
) -> None:
    plugins("a_rec", "power")
    k = make_kernel()
    model = OfflineModel([power_call("c1")], "65536.", "1024.")
    with HermesAgentsSession(k) as hermes:
        sid = hermes.session_id
        agent = Agent(name="a", model=model, tools=hermes.tools())
        asyncio.run(hermes.run(agent, "What is 2**16?", run_config=OFFLINE))
        asyncio.run(hermes.run(agent, "And 2**10?", run_config=OFFLINE))

    second = model.inputs[2]
    assert [i.get("type") or i.get("role") for i in second] == [
        "user",
        "function_call",
        "function_call_output",
        "message",
        "user",
    ]
    assert second[0] == {"role": "user", "content": "What is 2**16?"}
    assert (second[1]["call_id"], second[1]["name"]) == ("c1", "power")
    assert outputs(second) == {"c1": {"result": 65536}}
    assert second[3]["content"][0]["text"] == "65536."
    assert second[4] == {"role": "user", "content": f"And 2**10?\n\na_rec knows {sid}"}
    # The hooks see the conversation as chat messages, the user's own text in it.
    first_pre, second_pre = kwargs_of(sink, "pre_llm_call")
    assert first_pre["conversation_history"] == [] and first_pre["is_first_turn"] is True
    history = second_pre["conversation_history"]
    assert second_pre["is_first_turn"] is False
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[0]["content"] == "What is 2**16?"
    assert history[1]["tool_calls"][0]["id"] == "c1"
    assert json.loads(history[2]["content"]) == {"result": 65536}


def test_a_message_injected_between_runs_reaches_the_next_run(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    model = OfflineModel("first", "second")
    hermes = HermesAgentsSession(k)
    other = HermesAgentsSession(k)
    agent = Agent(name="a", model=model)
    hermes.run_sync(agent, "one", run_config=OFFLINE)
    assert k.inject_message("remember the milk", session_id=hermes.session_id)
    assert k.inject_message("not yours", session_id=other.session_id)
    hermes.run_sync(agent, "two", run_config=OFFLINE)
    assert users(model.inputs[1]) == ["one", "two", "remember the milk"]
    assert other.session.take_injected() == [{"role": "user", "content": "not yours"}]
    hermes.close()
    other.close()


# --------------------------------------------------------------------------
# From sync code; without the SDK
# --------------------------------------------------------------------------


def test_run_sync_runs_the_turn_and_refuses_a_running_loop(
    make_kernel: Callable[..., Kernel], plugins: Callable[..., None], sink: types.ModuleType
) -> None:
    plugins("a_rec", "power")
    k = make_kernel()
    model = OfflineModel([power_call("sync_1")], "done")
    hermes = HermesAgentsSession(k)
    agent = Agent(name="a", model=model, tools=hermes.tools())
    assert hermes.run_sync(agent, "go", run_config=OFFLINE).final_output == "done"
    assert outputs(model.inputs[1]) == {"sync_1": {"result": 65536}}
    assert [kw["tool_call_id"] for kw in kwargs_of(sink, "post_tool_call")] == ["sync_1"]

    async def inside() -> None:
        hermes.run_sync(agent, "again")

    with pytest.raises(RuntimeError, match="await run"):
        asyncio.run(inside())
    assert hermes.session.turn is None and hermes.session.turns == 1
    hermes.close()


def run_isolated(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=120
    )


def test_importing_the_adapter_without_the_sdk_names_the_extra_and_the_kernel_does_not_import_it() -> None:
    proc = run_isolated(
        """
        import sys
        import kernel, kernel.integrations
        print("agents imported:", "agents" in sys.modules)
        sys.modules["agents"] = None
        try:
            import kernel.integrations.openai_agents
        except ImportError as exc:
            print("ImportError:", exc)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert "agents imported: False" in proc.stdout
    assert (
        "ImportError: kernel.integrations.openai_agents needs openai-agents: "
        "pip install 'hermes-kernel[openai-agents]'"
    ) in proc.stdout
