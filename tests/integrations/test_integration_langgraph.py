"""The LangGraph adapter (kernel/integrations/langgraph.py) through real kernels and real graphs.

Every test writes its plugins into a temporary home, loads a real kernel, and runs a real LangGraph
graph (the prebuilt ReAct agent, or a small StateGraph) on LangChain's own fake chat model: a
``GenericFakeChatModel`` taught ``bind_tools`` and recording what it was given.  Nothing touches the
network.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, TURN_HOOKS, run_probe
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import create_react_agent
from langgraph.warnings import LangGraphDeprecatedSinceV10
from pydantic import Field

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.integrations.langgraph import HermesGraphSession, HermesTool
from kernel.testing import scripted_config, write_script

# -- the model, the graph ---------------------------------------------------------------


class ScriptedChat(GenericFakeChatModel):
    """LangChain's generic fake chat model, able to take tools, recording every input it gets."""

    inputs: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[list[dict[str, Any]]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        schemas = [convert_to_openai_tool(t) for t in tools]
        self.bound.append(schemas)
        return self.bind(tools=schemas, **kwargs)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.inputs.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def chat(*turns: AIMessage | str) -> ScriptedChat:
    return ScriptedChat(messages=iter(turns))


def calling(*calls: tuple[str, dict[str, Any], str], text: str = "") -> AIMessage:
    """An AI message asking for ``(name, args, id)`` tool calls."""
    return AIMessage(content=text, tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in calls])


def react(model: ScriptedChat, tools: Any) -> Any:
    """LangGraph's prebuilt ReAct agent (it warns that it moved to ``langchain.agents``, not installed)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
        return create_react_agent(model, tools)


def seen(messages: list[BaseMessage]) -> list[tuple[str, Any]]:
    """``(type, content)`` of each message: what a model was shown."""
    return [(m.type, m.content) for m in messages]


# -- the plugins ------------------------------------------------------------------------

HOOKS = (*TURN_HOOKS, "on_session_finalize")

# Records every hook of HOOKS as (plugin, hook, kwargs); its pre_llm_call adds a context.
RECORDER = """
import hook_sink

HOOKS = {hooks!r}


def register(ctx):
    def recorder(hook):
        def record(**kw):
            hook_sink.calls.append(({name!r}, hook, kw))
            if hook == "pre_llm_call":
                return {{"context": "[context of {name}]"}}
        return record

    for hook in HOOKS:
        ctx.register_hook(hook, recorder(hook))
"""

ADD_SCHEMA = {
    "name": "add",
    "description": "Add two numbers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
}

TOOLS = f"""
import json
import hook_sink


def add(args, **kw):
    hook_sink.calls.append(("tools", "add", {{"args": dict(args), **kw}}))
    return json.dumps({{"sum": args["a"] + args["b"]}})


def register(ctx):
    ctx.register_tool("add", "demo", {ADD_SCHEMA!r}, add)
"""


def recorder(plugin_dir: Callable[..., Path], name: str) -> None:
    plugin_dir(name, RECORDER.format(name=name, hooks=HOOKS))


def hook_calls(sink: types.ModuleType, hook: str) -> list[dict[str, Any]]:
    return [kw for _plugin, name, kw in sink.calls if name == hook]


def handler_calls(sink: types.ModuleType) -> list[dict[str, Any]]:
    return [kw for plugin, _name, kw in sink.calls if plugin == "tools"]


@pytest.fixture
def calc_kernel(plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: Any) -> Kernel:
    """A kernel with the ``add`` tool and one recorder plugin."""
    plugin_dir("tools", TOOLS)
    recorder(plugin_dir, "rec")
    return make_kernel()


# --------------------------------------------------------------------------
# The hooks: where, in which order, with which arguments
# --------------------------------------------------------------------------


def test_hooks_fire_in_plugin_order_with_the_arguments_agent_session_gives(
    plugin_dir: Callable[..., Path],
    make_kernel: Callable[..., Kernel],
    sink: Any,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The reference loop needs a model: the checkout's bundled scripted one.
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(REPO / "extensions"))
    recorder(plugin_dir, "zeta")  # written first, fires last: the order is the plugins' names
    recorder(plugin_dir, "alpha")
    plugin_dir("tools", TOOLS)
    turn = [{"text": "", "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, "5"]
    k = make_kernel(scripted_config(write_script(home, turn)))

    reference_session = AgentSession(k)
    reference_session.run("add 2 and 3")
    reference_session.close()
    reference = [(p, h, sorted(kw)) for p, h, kw in sink.calls if p != "tools"]
    sink.calls.clear()

    model = chat(calling(("add", {"a": 2, "b": 3}, "call-add")), "5")
    with HermesGraphSession(k) as hermes:
        state = hermes.invoke(react(model, hermes.tool_node()), "add 2 and 3")
    graph = [(p, h, sorted(kw)) for p, h, kw in sink.calls if p != "tools"]

    assert state["messages"][-1].content == "5"
    assert graph == reference
    expected = [*HOOKS[:-1], "on_session_end", "on_session_finalize"]  # on_session_end: turn, then close
    assert [(p, h) for p, h, _ in graph] == [(p, h) for h in expected for p in ("alpha", "zeta")]
    start = hook_calls(sink, "on_session_start")[0]
    assert (start["session_id"], start["platform"]) == (hermes.session_id, "langgraph")
    ends = hook_calls(sink, "on_session_end")
    assert [(e["completed"], e["interrupted"]) for e in ends] == [(True, False)] * 4


def test_the_context_reaches_the_model_and_the_tool_result_comes_back(calc_kernel: Kernel, sink: Any) -> None:
    model = chat(calling(("add", {"a": 1, "b": 2}, "call-add-1")), "It is 3.")
    with HermesGraphSession(calc_kernel, session_id="s-calc") as hermes:
        state = hermes.invoke(react(model, hermes.tool_node()), "What is 1 + 2?")

    # The model was offered the kernel's tool, with the kernel's description and schema.
    (offered,) = model.bound
    assert offered == [{"type": "function", "function": ADD_SCHEMA}]
    first, second = model.inputs
    assert seen(first) == [("human", "What is 1 + 2?\n\n[context of rec]")]
    # The tool result the model got is the kernel's JSON, under LangChain's tool call id.
    result = second[-1]
    assert isinstance(result, ToolMessage)
    assert (result.tool_call_id, result.name, result.status) == ("call-add-1", "add", "success")
    assert json.loads(result.content) == {"sum": 3}
    # The ids reached the pipeline: the hooks and the handler.
    (pre,) = hook_calls(sink, "pre_tool_call")
    (llm,) = hook_calls(sink, "pre_llm_call")
    assert (pre["tool_name"], pre["args"]) == ("add", {"a": 1, "b": 2})
    assert (pre["session_id"], pre["turn_id"], pre["tool_call_id"]) == (
        "s-calc",
        llm["turn_id"],
        "call-add-1",
    )
    (post,) = hook_calls(sink, "post_tool_call")
    assert (post["tool_call_id"], post["status"], json.loads(post["result"])) == (
        "call-add-1",
        "ok",
        {"sum": 3},
    )
    (handled,) = handler_calls(sink)
    assert (handled["args"], handled["session_id"], handled["tool_call_id"]) == (
        {"a": 1, "b": 2},
        "s-calc",
        "call-add-1",
    )
    # The result state is the graph's; the turn ended with its last AI message.
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]
    assert state["messages"][-1].content == "It is 3."
    (after,) = hook_calls(sink, "post_llm_call")
    assert (after["user_message"], after["assistant_response"]) == ("What is 1 + 2?", "It is 3.")
    assert [m["role"] for m in after["conversation_history"]] == ["user", "assistant", "tool", "assistant"]
    assert after["conversation_history"][0]["content"] == "What is 1 + 2?"


def test_the_second_turn_sees_the_first_and_what_plugins_injected(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: Any
) -> None:
    plugin_dir("tools", TOOLS)
    recorder(plugin_dir, "rec")
    plugin_dir(
        "nudger",
        """
        def register(ctx):
            def after(assistant_response, **kw):
                ctx.inject_message(f"Remember: you said {assistant_response}")
            ctx.register_hook("post_llm_call", after)
        """,
    )
    k = make_kernel()
    model = chat(calling(("add", {"a": 1, "b": 2}, "c1")), "3", "Still 3.")
    with HermesGraphSession(k) as hermes:
        graph = react(model, hermes.tool_node())
        hermes.invoke(graph, "1 + 2?")
        state = hermes.invoke(graph, "Sure?")

    # The second call of the model opens turn two: the first turn as kept (the user's own text, not
    # the context), the new message with its context, then the message a plugin injected.
    opening = model.inputs[2]
    assert seen(opening) == [
        ("human", "1 + 2?"),
        ("ai", ""),
        ("tool", '{"sum": 3}'),
        ("ai", "3"),
        ("human", "Sure?\n\n[context of rec]"),
        ("human", "Remember: you said 3"),
    ]
    assert opening[1].tool_calls[0]["id"] == "c1"
    assert state["messages"][-1].content == "Still 3."
    assert seen(hermes.messages)[4:] == [
        ("human", "Sure?"),
        ("human", "Remember: you said 3"),
        ("ai", "Still 3."),
    ]
    starts, pres = hook_calls(sink, "on_session_start"), hook_calls(sink, "pre_llm_call")
    assert len(starts) == 1
    assert [p["is_first_turn"] for p in pres] == [True, False]
    assert pres[0]["turn_id"] != pres[1]["turn_id"]
    history = pres[1]["conversation_history"]
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "1 + 2?"),
        ("assistant", ""),
        ("tool", '{"sum": 3}'),
        ("assistant", "3"),
    ]


def test_a_transformed_reply_replaces_the_last_ai_message(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: Any
) -> None:
    recorder(plugin_dir, "rec")
    plugin_dir(
        "shouter",
        """
        def register(ctx):
            ctx.register_hook("transform_llm_output", lambda response_text, **kw: response_text.upper() + "!")
        """,
    )
    k = make_kernel()
    model = chat("hello there", "again")
    with HermesGraphSession(k) as hermes:
        graph = react(model, hermes.tool_node())
        state = hermes.invoke(graph, "hi")
        assert state["messages"][-1].content == "HELLO THERE!"
        assert state["messages"][0].content == "hi\n\n[context of rec]"  # what the graph was given
        assert seen(hermes.messages) == [("human", "hi"), ("ai", "HELLO THERE!")]
        hermes.invoke(graph, "and?")

    assert seen(model.inputs[1])[:2] == [("human", "hi"), ("ai", "HELLO THERE!")]
    (first, _second) = hook_calls(sink, "post_llm_call")
    assert first["assistant_response"] == "hello there"  # the hooks saw the model's own reply


# --------------------------------------------------------------------------
# Memory and ctx.llm
# --------------------------------------------------------------------------

RECALL_MEMORY = """
import hook_sink
from agent.memory_provider import MemoryProvider


class RecallMemory(MemoryProvider):
    @property
    def name(self):
        return "recall"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        hook_sink.calls.append(("memory", "initialize", {"session_id": session_id}))

    def get_tool_schemas(self):
        return []

    def prefetch(self, query, *, session_id=""):
        hook_sink.calls.append(("memory", "prefetch", {"query": query, "session_id": session_id}))
        return f"Recalled: the user asked about {query!r} before."

    def sync_turn(self, user_content, assistant_content, *, session_id="", **kwargs):
        turn = {"user": user_content, "assistant": assistant_content, "session_id": session_id}
        hook_sink.calls.append(("memory", "sync_turn", turn))
"""


def test_the_memory_recall_reaches_the_model_and_sync_turn_sees_the_turn(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: Any
) -> None:
    plugin_dir("memory/recall", RECALL_MEMORY, manifest="")
    recorder(plugin_dir, "rec")
    k = make_kernel({"memory": {"provider": "recall"}})
    model = chat("Tea, as ever.")
    with HermesGraphSession(k, session_id="s-mem") as hermes:
        hermes.invoke(react(model, hermes.tool_node()), "What do I drink?")

    (opening,) = model.inputs
    recall = "Recalled: the user asked about 'What do I drink?' before."
    assert seen(opening) == [("human", f"What do I drink?\n\n{recall}\n\n[context of rec]")]
    memory = [(name, kw) for plugin, name, kw in sink.calls if plugin == "memory"]
    assert memory == [
        ("initialize", {"session_id": "s-mem"}),
        ("prefetch", {"query": "What do I drink?", "session_id": "s-mem"}),
        ("sync_turn", {"user": "What do I drink?", "assistant": "Tea, as ever.", "session_id": "s-mem"}),
    ]


def test_ctx_llm_answers_with_the_plugin_llm(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: Any
) -> None:
    plugin_dir(
        "asker",
        """
        import json

        def register(ctx):
            def ask(args, **kw):
                result = ctx.llm.complete(
                    [
                        {"role": "system", "content": "Answer in one word."},
                        {"role": "user", "content": args["q"]},
                    ]
                )
                return json.dumps({"answer": result.text, "provider": result.provider})
            ctx.register_tool("ask", "demo", {"name": "ask", "description": "Ask the model.",
                              "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}, ask)
        """,
    )
    k = make_kernel()
    plugin_model = chat("Paris")
    model = chat(calling(("ask", {"q": "Capital of France?"}, "c-ask")), "Paris it is.")
    with HermesGraphSession(k, plugin_llm=plugin_model) as hermes:
        state = hermes.invoke(react(model, hermes.tool_node()), "Ask the model about France.")

    (asked,) = plugin_model.inputs
    assert asked == [SystemMessage("Answer in one word."), HumanMessage("Capital of France?")]
    tool_message = model.inputs[1][-1]
    assert json.loads(tool_message.content) == {"answer": "Paris", "provider": "host"}
    assert state["messages"][-1].content == "Paris it is."


# --------------------------------------------------------------------------
# Hostile cases
# --------------------------------------------------------------------------


def test_a_guard_block_reaches_the_model_as_the_tool_result_and_the_handler_never_runs(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: Any
) -> None:
    plugin_dir("tools", TOOLS)
    plugin_dir(
        "guard",
        """
        def register(ctx):
            def guard(tool_name, **kw):
                if tool_name == "add":
                    return {"action": "block", "message": "no adding today"}
            ctx.register_hook("pre_tool_call", guard)
        """,
    )
    k = make_kernel()
    model = chat(calling(("add", {"a": 1, "b": 2}, "c-blocked")), "I may not add.")
    with HermesGraphSession(k) as hermes:
        state = hermes.invoke(react(model, hermes.tool_node()), "1 + 2?")

    blocked = model.inputs[1][-1]
    assert isinstance(blocked, ToolMessage)
    assert (blocked.tool_call_id, blocked.status) == ("c-blocked", "error")
    assert json.loads(blocked.content) == {"error": "no adding today"}
    assert handler_calls(sink) == []
    assert state["messages"][-1].content == "I may not add."


def test_unknown_tools_and_malformed_arguments_are_error_results_and_the_graph_goes_on(
    calc_kernel: Kernel, sink: Any
) -> None:
    deep: dict[str, Any] = {}
    for _ in range(120):  # deeper than the kernel reads arguments
        deep = {"x": deep}
    model = chat(
        calling(
            ("no_such_tool", {}, "c-unknown"),
            ("add", {"a": 1}, "c-missing"),
            ("add", {"a": deep, "b": 1}, "c-deep"),
        ),
        "Those went wrong.",
    )
    with HermesGraphSession(calc_kernel) as hermes:
        state = hermes.invoke(react(model, hermes.tool_node()), "Try things.")

    results = {m.tool_call_id: m for m in model.inputs[1] if isinstance(m, ToolMessage)}
    assert set(results) == {"c-unknown", "c-missing", "c-deep"}
    errors = {call_id: json.loads(m.content)["error"] for call_id, m in results.items()}
    assert "unknown tool 'no_such_tool'" in errors["c-unknown"]
    assert "KeyError" in errors["c-missing"] and "'b'" in errors["c-missing"]
    assert "nested deeper than 100 levels" in errors["c-deep"]
    assert {m.status for m in results.values()} == {"error"}
    # Only the call with readable arguments reached the handler (and failed there).
    assert [h["tool_call_id"] for h in handler_calls(sink)] == ["c-missing"]
    assert state["messages"][-1].content == "Those went wrong."
    assert [e["completed"] for e in hook_calls(sink, "on_session_end")] == [True, True]


class Boom(RuntimeError):
    pass


def test_a_graph_that_raises_ends_the_turn_not_completed_and_the_next_turn_works(
    calc_kernel: Kernel, sink: Any
) -> None:
    boom = Boom("the graph broke")
    failures = [boom]
    given: list[list[BaseMessage]] = []

    def node(state: MessagesState) -> dict[str, Any]:
        given.append(list(state["messages"]))
        if failures:
            raise failures.pop()
        return {"messages": [AIMessage("Back again.")]}

    graph = StateGraph(MessagesState).add_node("model", node).add_edge(START, "model").compile()
    hermes = HermesGraphSession(calc_kernel)
    with pytest.raises(Boom) as raised:
        hermes.invoke(graph, "first try")
    assert raised.value is boom
    (ended,) = hook_calls(sink, "on_session_end")
    assert (ended["completed"], ended["interrupted"]) == (False, False)
    assert hook_calls(sink, "post_llm_call") == []
    assert hermes.messages == []  # the failed turn is not kept

    state = hermes.invoke(graph, "second try")
    assert state["messages"][-1].content == "Back again."
    assert seen(given[1]) == [("human", "second try\n\n[context of rec]")]
    assert [e["completed"] for e in hook_calls(sink, "on_session_end")] == [False, True]
    assert hook_calls(sink, "post_llm_call")[0]["user_message"] == "second try"
    hermes.close()
    assert hermes.session.closed


WAITER = """
import asyncio
import json
import hook_sink


async def wait(args, **kw):
    hook_sink.started.set()
    await hook_sink.release.wait()
    return json.dumps({"waited": True})


def register(ctx):
    ctx.register_tool("wait", "demo", {"name": "wait", "description": "Wait.",
                      "parameters": {"type": "object", "properties": {}}}, wait, is_async=True)
"""


def test_a_cancelled_invocation_ends_the_turn_interrupted_and_the_session_goes_on(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: Any
) -> None:
    plugin_dir("waiter", WAITER)
    recorder(plugin_dir, "rec")
    k = make_kernel()
    model = chat(calling(("wait", {}, "c-wait")), "Done waiting.")

    async def main() -> dict[str, Any]:
        sink.started, sink.release = asyncio.Event(), asyncio.Event()
        hermes = HermesGraphSession(k)
        graph = react(model, hermes.tool_node())
        run = asyncio.create_task(hermes.ainvoke(graph, "wait for it"))
        await sink.started.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        (ended,) = hook_calls(sink, "on_session_end")
        assert (ended["completed"], ended["interrupted"]) == (False, True)
        assert hermes.messages == []
        sink.release.set()  # the handler the cancellation left running may finish
        return await hermes.ainvoke(react(chat("Hello again."), hermes.tool_node()), "still there?")

    state = asyncio.run(main())
    assert state["messages"][-1].content == "Hello again."
    assert [e["completed"] for e in hook_calls(sink, "on_session_end")] == [False, True]


MEETING = """
import json
import hook_sink


def register(ctx):
    def context(user_message, session_id, **kw):
        ctx.inject_message(f"note for {user_message}")
        return {"context": f"context of {user_message} in {session_id}"}

    async def meet(args, **kw):
        hook_sink.calls.append(("meeting", "meet", dict(kw)))
        await hook_sink.barrier.wait()  # both sessions are in their graphs at once
        return json.dumps({"who": args["who"], "session": kw["session_id"]})

    ctx.register_hook("pre_llm_call", context)
    ctx.register_tool("meet", "demo", {"name": "meet", "description": "Meet.",
                      "parameters": {"type": "object", "properties": {"who": {"type": "string"}}}},
                      meet, is_async=True)
"""


def test_two_sessions_at_once_on_one_kernel_keep_ids_contexts_and_injected_messages_apart(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: Any
) -> None:
    plugin_dir("meeting", MEETING)
    k = make_kernel()
    models = {
        name: chat(calling(("meet", {"who": name}, f"call-{name}")), f"{name} met")
        for name in ("alpha", "beta")
    }

    async def main() -> list[dict[str, Any]]:
        sink.barrier = asyncio.Barrier(2)
        a, b = HermesGraphSession(k, session_id="s-alpha"), HermesGraphSession(k, session_id="s-beta")
        runs = [
            a.ainvoke(react(models["alpha"], a.tool_node()), "alpha"),
            b.ainvoke(react(models["beta"], b.tool_node()), "beta"),
        ]
        states = await asyncio.wait_for(asyncio.gather(*runs), timeout=120)  # a safety net only
        a.close()
        b.close()
        return states

    states = asyncio.run(main())
    for name, state in zip(("alpha", "beta"), states, strict=True):
        opening, after_tool = models[name].inputs
        assert seen(opening) == [
            ("human", f"{name}\n\ncontext of {name} in s-{name}"),
            ("human", f"note for {name}"),
        ]
        assert json.loads(after_tool[-1].content) == {"who": name, "session": f"s-{name}"}
        assert after_tool[-1].tool_call_id == f"call-{name}"
        assert state["messages"][-1].content == f"{name} met"
    other = {"alpha": "beta", "beta": "alpha"}
    for name, model in models.items():
        assert other[name] not in repr(model.inputs)
    met = sorted((kw["session_id"], kw["tool_call_id"]) for _p, name, kw in sink.calls if name == "meet")
    assert met == [("s-alpha", "call-alpha"), ("s-beta", "call-beta")]


def test_one_compiled_graph_serves_each_session_that_invokes_it(calc_kernel: Kernel, sink: Any) -> None:
    model = chat(
        calling(("add", {"a": 1, "b": 1}, "c-first")),
        "2",
        calling(("add", {"a": 2, "b": 2}, "c-second")),
        "4",
    )
    with (
        HermesGraphSession(calc_kernel, session_id="s-1") as one,
        HermesGraphSession(calc_kernel, session_id="s-2") as two,
    ):
        graph = react(model, one.tool_node())  # compiled once, with the first session's tools
        one.invoke(graph, "1 + 1")
        two.invoke(graph, "2 + 2")
        assert seen(two.messages)[0] == ("human", "2 + 2")  # each keeps its own conversation
        assert len(one.messages) == len(two.messages) == 4

    assert [(h["session_id"], h["tool_call_id"]) for h in handler_calls(sink)] == [
        ("s-1", "c-first"),
        ("s-2", "c-second"),
    ]


# --------------------------------------------------------------------------
# The tools on their own
# --------------------------------------------------------------------------


def test_the_tools_run_the_pipeline_when_invoked_directly(calc_kernel: Kernel, sink: Any) -> None:
    with HermesGraphSession(calc_kernel, session_id="s-direct") as hermes:
        (add,) = hermes.tools()
        assert isinstance(add, HermesTool) and isinstance(add, BaseTool)
        assert (add.name, add.description, add.args_schema) == (
            "add",
            "Add two numbers.",
            ADD_SCHEMA["parameters"],
        )
        assert json.loads(add.invoke({"a": 2, "b": 5})) == {"sum": 7}
        message = add.invoke({"name": "add", "args": {"a": 3, "b": 4}, "id": "direct-1", "type": "tool_call"})
        assert isinstance(message, ToolMessage)
        assert (message.tool_call_id, json.loads(message.content)) == ("direct-1", {"sum": 7})
        message = asyncio.run(
            add.ainvoke({"name": "add", "args": {"a": 1, "b": 1}, "id": "direct-2", "type": "tool_call"})
        )
        assert (message.tool_call_id, json.loads(message.content)) == ("direct-2", {"sum": 2})

    assert [(p["session_id"], p["tool_call_id"]) for p in hook_calls(sink, "pre_tool_call")] == [
        ("s-direct", ""),
        ("s-direct", "direct-1"),
        ("s-direct", "direct-2"),
    ]


# --------------------------------------------------------------------------
# Without langgraph
# --------------------------------------------------------------------------

IMPORT_PROBE = """
import json
import sys

import kernel
import kernel.integrations

loaded = sorted(name for name in ("langgraph", "langchain_core") if name in sys.modules)
for name in [n for n in sys.modules if n == sys.argv[1] or n.startswith(sys.argv[1] + ".")]:
    del sys.modules[name]
sys.modules[sys.argv[1]] = None  # as if it were not installed
try:
    import kernel.integrations.langgraph
except ImportError as exc:
    message = str(exc)
else:
    message = None
print("PROBE", json.dumps({"loaded": loaded, "message": message}))
"""


@pytest.mark.parametrize("missing", ["langgraph", "langchain_core"])
def test_importing_the_adapter_without_the_framework_names_the_extra(missing: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(REPO)}
    probe = run_probe(IMPORT_PROBE, missing, cwd=tmp_path, env=env)
    assert probe["loaded"] == []  # importing the kernel imports no framework
    assert probe["message"] is not None and "pip install 'hermes-kernel[langgraph]'" in probe["message"]
    assert sys.modules["langgraph"] is not None  # this process is untouched
