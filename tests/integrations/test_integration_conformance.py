"""One plugin set, every host: the reference loop, each framework adapter and the MCP server fire the same
hooks in the same order and give the same guard outcome, where the host has the lifecycle point.

The same two plugins (a tool with a guard that blocks one argument, and a plugin that observes every hook)
run under ``AgentSession`` (a host model scripted by a ``ChatTransport``), pydantic-ai (its
``FunctionModel``), the OpenAI Agents SDK (its ``agents.testing.ScriptedModel``), LangGraph (LangChain's
``GenericFakeChatModel`` in a messages graph) and ``hermes-kernel mcp serve`` (a real subprocess and the
``mcp`` client).  In every one the model (or the MCP client) asks for the tool twice — once with the
blocked argument, once with an allowed one — then answers.  The documented differences: an MCP
connection has no model turn (no ``pre_llm_call``, ``post_llm_call``, ``transform_llm_output``) and ends
with one ``on_session_end``; the frameworks call their own model, so no ``pre_api_request`` fires there
(those hooks are left out of the comparison).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_env, write_plugin

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.providers import ChatResult, ToolCall, Usage
from kernel.testing import HookRecorder

GUARDED = """
import json
import os

try:
    import hook_sink
except ImportError:  # in the MCP server's process: the test reads a file instead
    hook_sink = None

def note(*item):
    if hook_sink is not None:
        hook_sink.calls.append(item)
    else:
        with open(os.environ["CONFORMANCE_LOG"], "a", encoding="utf-8") as f:
            f.write(json.dumps(item) + "\\n")

def lookup(args, **kw):
    note("handler", args.get("key"))
    return json.dumps({"found": args.get("key")})

def guard(tool_name, args, **kw):
    if args.get("key") == "secret":
        return {"action": "block", "message": "the guard keeps secrets"}

def register(ctx):
    key = {"key": {"type": "string"}}
    schema = {"description": "Look a key up.",
              "parameters": {"type": "object", "properties": key, "required": ["key"]}}
    ctx.register_tool("lookup", "guarded", schema, lookup)
    ctx.register_hook("pre_tool_call", guard)
"""

#: The lifecycle points compared (api hooks are the kernel model's own, absent inside a framework).
LIFECYCLE = {
    "on_session_start",
    "pre_llm_call",
    "pre_tool_call",
    "post_tool_call",
    "transform_tool_result",
    "post_llm_call",
    "transform_llm_output",
    "on_session_end",
    "on_session_finalize",
}
TURN_ONLY = {"pre_llm_call", "post_llm_call", "transform_llm_output"}
BLOCKED = {"error": "the guard keeps secrets"}
ALLOWED = {"found": "open"}
QUESTION = "look the keys up"
ANSWER = "secret is kept, open is found"


@pytest.fixture
def kernel(home: Path, bundled: Path, sink: Any) -> Callable[[], Kernel]:
    write_plugin(home / "plugins", "guarded", GUARDED)
    made: list[Kernel] = []

    def make() -> Kernel:
        k = Kernel(home)
        made.append(k)
        k.load()
        assert k.plugin("guarded").enabled, k.plugin("guarded").error
        return k

    yield make
    for k in made:
        k.shutdown()


def lifecycle(recorder: HookRecorder) -> list[str]:
    return [name for name in recorder.names() if name in LIFECYCLE]


def handled(sink: Any) -> list[Any]:
    return [key for kind, key in sink.calls if kind == "handler"]


# -- each host runs the scenario and says what the model saw of the two tool calls ------------------


def run_agent_session(k: Kernel) -> list[Any]:
    replies = iter(
        [
            [ToolCall("c1", "lookup", json.dumps({"key": "secret"}))],
            [ToolCall("c2", "lookup", json.dumps({"key": "open"}))],
            [],
        ]
    )

    class Script:
        model = "scripted-host"

        def complete(self, messages: Any, **kwargs: Any) -> ChatResult:
            calls = next(replies)
            return ChatResult("" if calls else ANSWER, calls, Usage(), "scripted-host", "host", "stop", {})

    k.providers.use_model(Script())
    session = AgentSession(k)
    result = session.run(QUESTION)
    session.close()
    assert result.reply == ANSWER
    return [json.loads(m["content"]) for m in session.messages if m["role"] == "tool"]


def run_pydantic_ai(k: Kernel) -> list[Any]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from kernel.integrations.pydantic_ai import HermesCapability

    step = iter(
        [
            ModelResponse(parts=[ToolCallPart("lookup", {"key": "secret"}, tool_call_id="c1")]),
            ModelResponse(parts=[ToolCallPart("lookup", {"key": "open"}, tool_call_id="c2")]),
            ModelResponse(parts=[TextPart(ANSWER)]),
        ]
    )
    hermes = HermesCapability(k)
    agent = Agent(FunctionModel(lambda messages, info: next(step)), capabilities=[hermes])
    result = agent.run_sync(QUESTION)
    hermes.close()
    assert result.output == ANSWER
    returns = [p.content for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    return [json.loads(r) if isinstance(r, str) else r for r in returns]


def run_openai_agents(k: Kernel) -> list[Any]:
    from agents import Agent, RunConfig
    from agents.testing import ScriptedModel, assistant_message, function_call

    from kernel.integrations.openai_agents import HermesAgentsSession

    model = ScriptedModel(
        [
            [function_call("lookup", {"key": "secret"}, call_id="c1")],
            [function_call("lookup", {"key": "open"}, call_id="c2")],
            [assistant_message(ANSWER)],
        ]
    )
    hermes = HermesAgentsSession(k)
    agent = Agent(name="conformance", model=model, tools=hermes.tools())
    result = hermes.run_sync(agent, QUESTION, run_config=RunConfig(tracing_disabled=True))
    hermes.close()
    assert result.final_output == ANSWER
    outputs = [
        i for i in result.to_input_list() if isinstance(i, dict) and i.get("type") == "function_call_output"
    ]
    return [json.loads(o["output"]) for o in outputs]


def run_langgraph(k: Kernel) -> list[Any]:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import tools_condition

    from kernel.integrations.langgraph import HermesGraphSession

    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage("", tool_calls=[{"name": "lookup", "args": {"key": "secret"}, "id": "c1"}]),
                AIMessage("", tool_calls=[{"name": "lookup", "args": {"key": "open"}, "id": "c2"}]),
                AIMessage(ANSWER),
            ]
        )
    )
    hermes = HermesGraphSession(k)
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_node("tools", hermes.tool_node())
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    state = hermes.invoke(builder.compile(), QUESTION)
    hermes.close()
    assert state["messages"][-1].content == ANSWER
    return [json.loads(m.content) for m in state["messages"] if isinstance(m, ToolMessage)]


HOSTS = {
    "pydantic-ai": run_pydantic_ai,
    "openai-agents": run_openai_agents,
    "langgraph": run_langgraph,
}


def reference(kernel: Callable[[], Kernel], sink: Any) -> list[str]:
    k = kernel()
    recorder = HookRecorder().attach(k)
    assert run_agent_session(k) == [BLOCKED, ALLOWED]
    assert handled(sink) == ["open"]
    sink.calls.clear()
    return lifecycle(recorder)


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_every_framework_fires_the_reference_loops_hooks_and_keeps_the_guards_outcome(
    host: str, kernel: Callable[[], Kernel], sink: Any
) -> None:
    expected = reference(kernel, sink)
    assert expected == [
        "on_session_start",
        "pre_llm_call",
        "pre_tool_call",
        "post_tool_call",  # the blocked call is heard of, not transformed
        "pre_tool_call",
        "post_tool_call",
        "transform_tool_result",
        "post_llm_call",
        "transform_llm_output",
        "on_session_end",
        "on_session_end",  # at close
        "on_session_finalize",
    ]
    k = kernel()
    recorder = HookRecorder().attach(k)
    assert HOSTS[host](k) == [BLOCKED, ALLOWED]  # what the model got back for each call
    assert handled(sink) == ["open"]  # the blocked call's handler never ran
    assert lifecycle(recorder) == expected
    assert {c["platform"] for c in recorder.of("pre_llm_call")} == {host}


def test_the_mcp_server_fires_the_tool_and_session_hooks_of_the_reference_loop(
    kernel: Callable[[], Kernel], sink: Any, home: Path, tmp_path: Path
) -> None:
    """Over real stdio, with the ``mcp`` client; the plugins record into a file (another process)."""
    expected = [name for name in reference(kernel, sink) if name not in TURN_ONLY]
    # One on_session_end: an MCP connection has no turn of its own to end before the session does.
    expected.remove("on_session_end")
    record = tmp_path / "hooks.jsonl"
    write_plugin(
        home / "plugins",
        "zz_recorder",
        f"""
import json, os

HOOKS = {sorted(LIFECYCLE)!r}

def register(ctx):
    for hook in HOOKS:
        def record(_hook=hook, **kw):
            with open(os.environ["CONFORMANCE_LOG"], "a", encoding="utf-8") as f:
                f.write(json.dumps(["hook", _hook, kw.get("session_id")]) + "\\n")
        ctx.register_hook(hook, record)
""",
    )

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def talk() -> list[Any]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "kernel", "mcp", "serve"],
            env=cli_env(home, CONFORMANCE_LOG=str(record)),
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            first = await client.call_tool("lookup", {"key": "secret"})
            second = await client.call_tool("lookup", {"key": "open"})
        return [(r.isError, json.loads(r.content[0].text)) for r in (first, second)]

    assert asyncio.run(asyncio.wait_for(talk(), 120)) == [(True, BLOCKED), (False, ALLOWED)]
    # The server process has ended by now (stdio_client waits for it); its hooks are all on record.
    lines = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    fired = [(hook, session) for kind, hook, *session in lines if kind == "hook"]
    assert [hook for hook, _session in fired] == expected
    assert len({tuple(session) for _hook, session in fired}) == 1  # one connection, one session
    assert [key for kind, key, *_ in lines if kind == "handler"] == ["open"]  # never the blocked call
