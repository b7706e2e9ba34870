"""``kernel.integrations.pydantic_ai``: the kernel as a pydantic-ai capability, through real kernels.

Every test loads a real ``Kernel`` over directory plugins written into a temporary home and drives a
real pydantic-ai ``Agent`` with pydantic-ai's own offline ``FunctionModel``: the model function records
every request it gets, so the tests assert what the model actually received (the context on the user
prompt, the tools' JSON results, injected messages), what the saved history holds, and which hooks
fired, with which arguments, in which order.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import TURN_HOOKS, agent_log, cli_env, run_probe
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.integrations import HostSessionError
from kernel.integrations.pydantic_ai import HermesCapability, hermes_toolset
from kernel.providers import ChatResult, ToolCall, Usage
from kernel.testing import HookRecorder

HOOKS = TURN_HOOKS

# Both record every hook they get; a_plugin also owns the tools and the guard, b_plugin the transform.
# b_plugin is written first: the order the hooks fire in is the plugins' alphabetical one.
B_PLUGIN = (
    f"HOOKS = {HOOKS!r}\n"
    + """
import hook_sink

def _record(hook):
    def callback(**kw):
        hook_sink.calls.append(("b", hook, kw.get("session_id")))
        if hook == "pre_llm_call":
            return f"b context for {kw['session_id']}"
        if hook == "transform_llm_output":
            return kw["response_text"].upper()
    return callback

def register(ctx):
    for hook in HOOKS:
        ctx.register_hook(hook, _record(hook))
"""
)

A_PLUGIN = (
    f"HOOKS = {HOOKS!r}\n"
    + """
import json
import hook_sink

def _record(hook):
    def callback(**kw):
        hook_sink.calls.append(("a", hook, kw.get("session_id")))
        if hook == "pre_llm_call":
            return f"a context for {kw['session_id']}"
    return callback

def lookup(args, **kw):
    hook_sink.calls.append(("lookup", args, kw.get("session_id"), kw.get("tool_call_id"), kw.get("turn_id")))
    return json.dumps({"found": args["key"], "session": kw.get("session_id")})

def guard(tool_name, args, **kw):
    if args.get("key") == "forbidden":
        return {"action": "block", "message": "a_plugin refuses forbidden keys"}

CTX = []

def note(args, **kw):
    barrier = getattr(hook_sink, "barrier", None)
    if barrier is not None:
        barrier.wait()  # both sessions are inside a tool call at once
    CTX[0].inject_message(f"note for {kw['session_id']}")
    return json.dumps({"noted": kw["session_id"]})

def roles(args, **kw):
    for role, content in args["messages"]:
        CTX[0].inject_message(content, role=role)
    return json.dumps({"queued": len(args["messages"])})

def register(ctx):
    CTX.append(ctx)
    for hook in HOOKS:
        ctx.register_hook(hook, _record(hook))
    ctx.register_hook("pre_tool_call", guard)
    schema = {"description": "Look a key up.",
              "parameters": {"type": "object", "properties": {"key": {"type": "string"}},
                             "required": ["key"]}}
    ctx.register_tool("lookup", "a", schema, lookup)
    ctx.register_tool("note", "a", {"description": "Leave a note.", "parameters": {"type": "object"}}, note)
    ctx.register_tool("roles", "a", {"description": "Queue.", "parameters": {"type": "object"}}, roles)
"""
)

MEMORY = """
from agent.memory_provider import MemoryProvider
import hook_sink


class Notes(MemoryProvider):
    @property
    def name(self):
        return "notes"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        hook_sink.calls.append(("memory", "initialize", session_id))

    def get_tool_schemas(self):
        return []

    def system_prompt_block(self):
        return "Notes memory is on."

    def on_turn_start(self, turn_number, message, **kwargs):
        hook_sink.calls.append(("memory", "on_turn_start", turn_number, message))

    def prefetch(self, query, *, session_id=""):
        hook_sink.calls.append(("memory", "prefetch", query, session_id))
        return "recalled: the user drinks tea"

    def sync_turn(self, user_content, assistant_content, *, session_id="", **kwargs):
        hook_sink.calls.append(("memory", "sync_turn", user_content, assistant_content, session_id))
"""

ASKER = """
import json

CTX = []

def ask(args, **kw):
    answer = CTX[0].llm.complete([{"role": "system", "content": "be brief"},
                                  {"role": "user", "content": args["q"]}])
    return json.dumps({"answer": answer.text})

def register(ctx):
    CTX.append(ctx)
    schema = {"description": "Ask the model.", "parameters": {"type": "object"}}
    ctx.register_tool("ask", "asker", schema, ask)
"""


class Replies:
    """A host model for the reference loop: a tool call, then a reply."""

    def __init__(self, tool_calls: list[ToolCall], reply: str) -> None:
        self.answers = [("", tool_calls), (reply, [])]

    def complete(self, messages: Any, **kwargs: Any) -> ChatResult:
        reply, tool_calls = self.answers.pop(0)
        return ChatResult(reply, tool_calls, Usage(), "replies", "host", "stop", {})


class Script:
    """A ``FunctionModel`` function that answers with ``steps`` in turn and records every request."""

    def __init__(self, *steps: ModelResponse | BaseException) -> None:
        self.steps = list(steps)
        self.seen: list[list[ModelMessage]] = []
        self.infos: list[AgentInfo] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        self.infos.append(info)
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step

    @property
    def model(self) -> FunctionModel:
        return FunctionModel(self)


def calls(*items: tuple[str, str, str]) -> ModelResponse:
    """A response that calls tools: ``(name, raw JSON arguments, tool call id)`` each."""
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=cid) for name, args, cid in items])


def text(reply: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(reply)])


def prompts(messages: list[ModelMessage]) -> list[Any]:
    """The user prompt parts' contents, in order."""
    return [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]


def returns(messages: list[ModelMessage]) -> dict[str, Any]:
    """Tool call id -> the tool return part the model got for it."""
    return {
        p.tool_call_id: p
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }


def manifest(name: str, tools: list[str] | None = None, hooks: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"name": name, "version": "1.0", "provides_tools": tools or [], "provides_hooks": list(hooks)}


@pytest.fixture
def kernel(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: Any
) -> Callable[..., Kernel]:
    """``kernel(config=None, memory=False, asker=False)``: b_plugin and a_plugin (and more), loaded."""

    def make(config: dict[str, Any] | None = None, *, memory: bool = False, asker: bool = False) -> Kernel:
        plugin_dir("b_plugin", B_PLUGIN, manifest=manifest("b_plugin", hooks=HOOKS))
        plugin_dir("a_plugin", A_PLUGIN, manifest=manifest("a_plugin", ["lookup", "note", "roles"], HOOKS))
        config = dict(config or {})
        if memory:
            plugin_dir("memory/notes", MEMORY, manifest="")
            config["memory"] = {"provider": "notes"}
        if asker:
            plugin_dir("asker", ASKER, manifest=manifest("asker", ["ask"]))
        k = make_kernel(config)
        assert all(p.enabled for p in k.plugins), [(p.name, p.error) for p in k.plugins]
        return k

    return make


async def reached(event: asyncio.Event, run: asyncio.Task[Any]) -> None:
    """Wait until ``event`` is set, failing (instead of hanging) when ``run`` ends before it is."""
    waiter = asyncio.ensure_future(event.wait())
    await asyncio.wait({waiter, run}, return_when=asyncio.FIRST_COMPLETED)
    if not event.is_set():
        waiter.cancel()
        pytest.fail(f"the run ended before the model was called: {run.exception()!r}")


def hook_calls(sink: Any) -> list[tuple[str, str]]:
    return [(c[0], c[1]) for c in sink.calls if c[0] in ("a", "b")]


# --------------------------------------------------------------------------
# A run is a turn
# --------------------------------------------------------------------------


def test_the_context_reaches_every_model_request_and_stays_out_of_the_saved_history(
    kernel: Callable[..., Kernel], sink: Any
) -> None:
    k = kernel()
    script = Script(calls(("lookup", '{"key": "k1"}', "call-1")), text("found k1"))
    with HermesCapability(k, session_id="s-1") as hermes:
        result = Agent(script.model, capabilities=[hermes]).run_sync("What is k1?")
    context = "a context for s-1\n\nb context for s-1"
    # Both model requests of the run carry the context on the run's user prompt.
    assert [prompts(seen) for seen in script.seen] == [[f"What is k1?\n\n{context}"]] * 2
    # The kernel's JSON result, as the pipeline returned it, came back to the model for its call id.
    (back,) = returns(script.seen[1]).values()
    assert back.tool_call_id == "call-1" and json.loads(back.content) == {"found": "k1", "session": "s-1"}
    # The handler ran in the session's turn, under pydantic-ai's tool call id.
    ((_, args, session_id, call_id, turn_id),) = [c for c in sink.calls if c[0] == "lookup"]
    assert (args, session_id, call_id) == ({"key": "k1"}, "s-1", "call-1") and turn_id.startswith("turn-")
    # The saved history is the user's own prompt.
    assert prompts(result.all_messages()) == ["What is k1?"]
    # The model was given the kernel's schema as it is.
    (tool,) = [t for t in script.infos[0].function_tools if t.name == "lookup"]
    assert tool.parameters_json_schema == k.tools.get("lookup").schema["parameters"]
    assert result.output == "FOUND K1"  # b_plugin's transform_llm_output


def test_hooks_fire_in_plugin_order_with_the_reference_loops_argument_names(
    kernel: Callable[..., Kernel], sink: Any
) -> None:
    k = kernel()
    recorder = HookRecorder().attach(k)
    k.providers.use_model(Replies([ToolCall("c-0", "lookup", '{"key": "k"}')], "done"))
    reference = AgentSession(k)
    assert reference.run("look k up").reply == "DONE"
    reference.close()
    k.providers.use_model(None)
    expected = {c.hook: set(c.kwargs) for c in recorder.calls if c.hook in HOOKS}
    recorder.clear()
    sink.calls.clear()

    script = Script(calls(("lookup", '{"key": "k"}', "c-1")), text("done"))
    hermes = HermesCapability(k)
    result = Agent(script.model, capabilities=[hermes]).run_sync("look k up")
    assert hook_calls(sink) == [(plugin, hook) for hook in HOOKS for plugin in ("a", "b")]
    assert {c[2] for c in sink.calls if c[0] in ("a", "b")} == {hermes.session_id}
    assert {c.hook: set(c.kwargs) for c in recorder.calls if c.hook in HOOKS} == expected
    (pre,) = recorder.of("pre_llm_call")
    assert (pre["user_message"], pre["is_first_turn"], pre["platform"]) == ("look k up", True, "pydantic-ai")
    (post,) = recorder.of("post_llm_call")
    assert post["assistant_response"] == "done" and post["turn_id"] == pre["turn_id"]
    assert [m["role"] for m in post["conversation_history"]] == ["user", "assistant", "tool", "assistant"]
    (tool,) = recorder.of("pre_tool_call")
    assert (tool["tool_call_id"], tool["turn_id"], tool["args"]) == ("c-1", pre["turn_id"], {"key": "k"})
    (end,) = recorder.of("on_session_end")
    assert (end["completed"], end["interrupted"]) == (True, False)
    assert result.output == "DONE"
    recorder.clear()
    hermes.close()
    assert recorder.names() == ["on_session_end", "on_session_finalize"]


def test_several_runs_are_turns_of_one_session(kernel: Callable[..., Kernel]) -> None:
    k = kernel()
    recorder = HookRecorder().attach(k)
    script = Script(text("one"), text("two"), text("three"))
    hermes = HermesCapability(k, session_id="s-2")
    agent = Agent(script.model, capabilities=[hermes])
    first = agent.run_sync("first question")
    second = agent.run_sync("second question", message_history=first.all_messages())
    agent.run_sync("a fresh start")  # no message history: the model sees no earlier turn, nor do the hooks
    hermes.close()
    assert recorder.names().count("on_session_start") == 1
    assert [c["is_first_turn"] for c in recorder.of("pre_llm_call")] == [True, False, False]
    assert len({c["turn_id"] for c in recorder.of("pre_llm_call")}) == 3
    assert recorder.of("pre_llm_call")[2]["conversation_history"] == []
    # The second run's model saw the first prompt as the user wrote it and the context on its own only.
    context = "a context for s-2\n\nb context for s-2"
    assert prompts(script.seen[1]) == ["first question", f"second question\n\n{context}"]
    assert recorder.of("pre_llm_call")[1]["conversation_history"] == [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "one"},
    ]
    assert prompts(second.all_messages()) == ["first question", "second question"]
    assert [o.output for o in (first, second)] == ["ONE", "TWO"]
    assert {c["session_id"] for c in recorder.of("pre_llm_call")} == {"s-2"}


def test_a_memory_providers_recall_reaches_the_model_and_sync_turn_sees_the_turn(
    kernel: Callable[..., Kernel], sink: Any
) -> None:
    k = kernel(memory=True)
    script = Script(text("you drink tea"), text("still tea"))
    with HermesCapability(k, session_id="s-3") as hermes:
        agent = Agent(script.model, capabilities=[hermes])
        agent.run_sync("What do I drink?")
        agent.run_sync("And now?")
    assert prompts(script.seen[0]) == [
        "What do I drink?\n\nrecalled: the user drinks tea\n\na context for s-3\n\nb context for s-3"
    ]
    # Its system prompt block is the run's instructions.
    assert [info.instructions for info in script.infos] == ["Notes memory is on."] * 2
    memory = [c[1:] for c in sink.calls if c[0] == "memory"]
    assert memory == [
        ("initialize", "s-3"),
        ("on_turn_start", 1, "What do I drink?"),
        ("prefetch", "What do I drink?", "s-3"),
        ("sync_turn", "What do I drink?", "YOU DRINK TEA", "s-3"),  # the reply as shown
        ("on_turn_start", 2, "And now?"),
        ("prefetch", "And now?", "s-3"),
        ("sync_turn", "And now?", "STILL TEA", "s-3"),
    ]


def test_ctx_llm_answers_with_the_plugin_llm(kernel: Callable[..., Kernel]) -> None:
    k = kernel(asker=True)
    heard = Script(text("pong from the plugin model"))
    script = Script(calls(("ask", '{"q": "ping"}', "c-ask")), text("asked"))
    hermes = HermesCapability(k, plugin_llm=heard.model)
    Agent(script.model, capabilities=[hermes]).run_sync("ask it")
    # The plugin's question reached the plugin_llm as pydantic-ai messages.
    ((request,),) = heard.seen
    assert isinstance(request, ModelRequest)
    assert [(type(p), p.content) for p in request.parts] == [
        (SystemPromptPart, "be brief"),
        (UserPromptPart, "ping"),
    ]
    # Its answer is what the tool returned to the main model.
    assert json.loads(returns(script.seen[1])["c-ask"].content) == {"answer": "pong from the plugin model"}
    hermes.close()
    # Closed, the capability's model is no longer the kernel's: ctx.llm has no model to answer with.
    failed = json.loads(k.tools.dispatch("ask", {"q": "again"}))
    assert "error" in failed and heard.seen == [[request]]


# --------------------------------------------------------------------------
# Hostile cases
# --------------------------------------------------------------------------


def test_a_guards_block_is_the_tools_result_and_the_handler_never_runs(
    kernel: Callable[..., Kernel], sink: Any
) -> None:
    k = kernel()
    recorder = HookRecorder().attach(k)
    script = Script(calls(("lookup", '{"key": "forbidden"}', "c-no")), text("refused"))
    with HermesCapability(k) as hermes:
        result = Agent(script.model, capabilities=[hermes]).run_sync("get it")
    back = returns(script.seen[1])["c-no"]
    assert json.loads(back.content) == {"error": "a_plugin refuses forbidden keys"}
    assert back.outcome == "success"  # a result like any other: the run went on
    assert not [c for c in sink.calls if c[0] == "lookup"]
    (post,) = recorder.of("post_tool_call")
    assert post["status"] == "blocked" and post["tool_call_id"] == "c-no"
    assert result.output == "REFUSED"


def test_unknown_tools_and_malformed_arguments_are_error_results_and_the_run_goes_on(
    kernel: Callable[..., Kernel], sink: Any
) -> None:
    k = kernel()
    recorder = HookRecorder().attach(k)
    script = Script(
        calls(
            ("lookup", '{"key": "k1"', "c-broken"),  # not JSON
            ("lookup", '["k1"]', "c-list"),  # JSON, not an object
            ("lookup", '{"key": 7}', "c-typed"),  # wrong type: the handler's own business
            ("no_such_tool", "{}", "c-unknown"),
        ),
        text("carried on"),
    )
    with HermesCapability(k) as hermes:
        result = Agent(script.model, capabilities=[hermes]).run_sync("break things")
    back = returns(script.seen[1])
    broken, listed = json.loads(back["c-broken"].content), json.loads(back["c-list"].content)
    assert broken["error"].startswith("tool 'lookup': arguments are not valid JSON")
    assert listed == {"error": "tool 'lookup': arguments must be a JSON object, not list"}
    # No pydantic validation in the way: the kernel ran the call with the model's arguments.
    assert json.loads(back["c-typed"].content) == {"found": 7, "session": hermes.session_id}
    assert [c[1] for c in sink.calls if c[0] == "lookup"] == [{"key": 7}]
    # An unknown name is answered by pydantic-ai itself, naming the kernel's tools; no tool hook fires.
    unknown = back["c-unknown"]
    assert unknown.outcome == "retried" and "'lookup'" in unknown.content and "'note'" in unknown.content
    assert [c["tool_call_id"] for c in recorder.of("pre_tool_call")] == ["c-typed"]
    assert result.output == "CARRIED ON"


def test_a_run_that_raises_ends_the_turn_not_completed_and_the_next_run_works(
    kernel: Callable[..., Kernel], sink: Any
) -> None:
    k = kernel(memory=True)
    recorder = HookRecorder().attach(k)
    boom = RuntimeError("the model is down")
    script = Script(boom, text("back up"))
    hermes = HermesCapability(k, session_id="s-4")
    agent = Agent(script.model, capabilities=[hermes])
    with pytest.raises(RuntimeError) as raised:
        agent.run_sync("first try")
    assert raised.value is boom
    assert recorder.names() == ["on_session_start", "pre_llm_call", "on_session_end"]
    (end,) = recorder.of("on_session_end")
    assert (end["completed"], end["interrupted"]) == (False, False)
    assert not [c for c in sink.calls if c[:2] == ("memory", "sync_turn")]
    recorder.clear()
    assert agent.run_sync("second try").output == "BACK UP"
    (pre,) = recorder.of("pre_llm_call")
    assert pre["is_first_turn"] is False and recorder.names().count("on_session_start") == 0
    assert [c[2] for c in sink.calls if c[:2] == ("memory", "sync_turn")] == ["second try"]
    hermes.close()


def test_a_cancelled_run_ends_the_turn_interrupted(kernel: Callable[..., Kernel]) -> None:
    k = kernel()
    recorder = HookRecorder().attach(k)
    hermes = HermesCapability(k)

    async def main() -> str:
        started = asyncio.Event()

        async def hang(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            started.set()
            await asyncio.Event().wait()
            raise AssertionError("never reached")

        run = asyncio.create_task(Agent(FunctionModel(hang), capabilities=[hermes]).run("wait"))
        await reached(started, run)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        again = await Agent(Script(text("fine")).model, capabilities=[hermes]).run("again")
        return again.output

    assert asyncio.run(main()) == "FINE"
    ends = recorder.of("on_session_end")
    assert [(e["completed"], e["interrupted"]) for e in ends] == [(False, True), (True, False)]
    hermes.close()


def test_a_second_run_while_one_is_in_progress_is_refused_and_the_first_goes_on(
    kernel: Callable[..., Kernel],
) -> None:
    k = kernel()
    recorder = HookRecorder().attach(k)
    hermes = HermesCapability(k, session_id="s-5")

    async def main() -> str:
        started, go_on = asyncio.Event(), asyncio.Event()

        async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            if not started.is_set():  # only the first run waits: a run that was let in must not hang
                started.set()
                await go_on.wait()
            return text(f"done: {prompts(messages)[-1]}")

        agent = Agent(FunctionModel(slow), capabilities=[hermes])
        first = asyncio.create_task(agent.run("first"))
        await reached(started, first)
        try:
            with pytest.raises(HostSessionError, match="still in progress"):
                await agent.run("second")
        finally:
            go_on.set()
        return (await first).output

    assert asyncio.run(main()) == "DONE: FIRST\n\nA CONTEXT FOR S-5\n\nB CONTEXT FOR S-5"
    assert [c["user_message"] for c in recorder.of("pre_llm_call")] == ["first"]
    assert [(e["completed"], e["interrupted"]) for e in recorder.of("on_session_end")] == [(True, False)]
    hermes.close()


def test_two_capabilities_run_concurrently_apart(kernel: Callable[..., Kernel], sink: Any) -> None:
    k = kernel()
    recorder = HookRecorder().attach(k)
    sink.barrier = threading.Barrier(2, timeout=60)  # a safety net against a hang, not a timing
    seen: dict[str, list[list[ModelMessage]]] = {"ann": [], "ben": []}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        name = str(prompts(messages)[0]).split()[2]
        seen[name].append(list(messages))
        if len(seen[name]) == 1:
            return calls(("note", "{}", f"call-{name}"))
        return text(f"answer for {name}")

    agent = Agent(FunctionModel(model))  # one agent; each run gets its own capability
    ann, ben = HermesCapability(k, session_id="ann-s"), HermesCapability(k, session_id="ben-s")

    async def both() -> list[Any]:
        return list(
            await asyncio.gather(
                agent.run("question of ann", capabilities=[ann]),
                agent.run("question of ben", capabilities=[ben]),
            )
        )

    ann_result, ben_result = asyncio.run(both())
    for name, result in (("ann", ann_result), ("ben", ben_result)):
        sid = f"{name}-s"
        context = f"a context for {sid}\n\nb context for {sid}"
        first, second = seen[name]
        assert prompts(first) == [f"question of {name}\n\n{context}"]
        # The injected note reached the next request of its own run only, after the tool's result.
        assert prompts(second) == [f"question of {name}\n\n{context}", f"note for {sid}"]
        assert json.loads(returns(second)[f"call-{name}"].content) == {"noted": sid}
        assert result.output == f"ANSWER FOR {name.upper()}"
    for call in recorder.of("pre_tool_call"):
        assert call["tool_call_id"] == f"call-{call['session_id'][:3]}"
    for call in recorder.of("post_llm_call"):
        assert call["user_message"] == f"question of {call['session_id'][:3]}"
    assert len({c["turn_id"] for c in recorder.of("pre_llm_call")}) == 2
    ann.close()
    ben.close()


def test_injected_messages_keep_their_roles_in_the_next_request(
    kernel: Callable[..., Kernel], home: Path
) -> None:
    k = kernel()
    queued = [["user", "u1"], ["assistant", "a1"], ["system", "s1"], ["assistant", "a2"]]
    script = Script(calls(("roles", json.dumps({"messages": queued}), "c-r")), text("seen"))
    with HermesCapability(k) as hermes:
        result = Agent(script.model, capabilities=[hermes]).run_sync("queue some")
    # In the saved history: the tool's result, then the messages with their roles, in order.
    tail = result.all_messages()[2:-1]
    assert [type(m) for m in tail] == [ModelRequest, ModelRequest, ModelResponse, ModelRequest]
    assert [(type(p), p.content) for m in tail for p in m.parts] == [
        (ToolReturnPart, '{"queued": 4}'),
        (UserPromptPart, "u1"),
        (TextPart, "a1"),
        (SystemPromptPart, "s1"),
    ]
    # The model got them in its next request (pydantic-ai writes a system note there as tagged user text).
    assert [type(m) for m in script.seen[1][2:]] == [ModelRequest, ModelResponse, ModelRequest]
    assert prompts(script.seen[1])[1:] == ["u1", "<system>s1</system>"]
    # An assistant message last cannot end a request: it waits for one, and this run had no more.
    assert "inject_message_undelivered" in agent_log(home)
    assert result.output == "SEEN"


def test_the_toolset_alone_dispatches_without_turn_hooks(kernel: Callable[..., Kernel]) -> None:
    k = kernel()
    recorder = HookRecorder().attach(k)
    script = Script(calls(("lookup", '{"key": "k9"}', "c-9")), text("ok"))
    tools = hermes_toolset(k)
    result = Agent(script.model, toolsets=[tools]).run_sync("plain")
    back = json.loads(returns(script.seen[1])["c-9"].content)
    assert back == {"found": "k9", "session": tools.session.session_id}
    assert recorder.names() == ["pre_tool_call", "post_tool_call", "transform_tool_result"]
    assert prompts(script.seen[0]) == ["plain"] and result.output == "ok"
    tools.close()
    assert recorder.names()[-1] == "on_session_finalize"


def test_importing_without_pydantic_ai_names_the_extra(home: Path, tmp_path: Path) -> None:
    code = (
        "import json, sys\n"
        "import kernel, kernel.integrations\n"
        "loaded = 'pydantic_ai' in sys.modules\n"
        "sys.modules['pydantic_ai'] = None\n"
        "try:\n"
        "    import kernel.integrations.pydantic_ai\n"
        "except ImportError as exc:\n"
        "    print('PROBE ' + json.dumps([loaded, str(exc)]))\n"
    )
    loaded, message = run_probe(code, cwd=tmp_path, env=cli_env(home))
    assert loaded is False  # importing the kernel imports no framework
    assert message == (
        "kernel.integrations.pydantic_ai needs pydantic-ai: pip install 'hermes-kernel[pydantic-ai]'"
    )
