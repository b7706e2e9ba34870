"""``kernel.integrations.HostSession``: the turn lifecycle for hosts that run their own model loop.

Real kernels over real plugin directories in a temporary home; the hooks are watched by
``kernel.testing.HookRecorder`` (an ordinary plugin that sorts after every other) and by the plugins'
own records.  The reference loop (``AgentSession``) runs on ``HostSession``, so the same hooks with the
same arguments are compared between the two.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import write_plugin

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.integrations import HostSession, HostSessionError, host_model
from kernel.providers import ChatResult, ProviderError, Usage
from kernel.testing import HookRecorder

# Two plugins, named so that the alphabetical order differs from the order they are written in.
ZED = """
import hook_sink

def context(**kw):
    hook_sink.calls.append(("zed", "pre_llm_call"))
    return "zed says hi"

def register(ctx):
    ctx.register_hook("pre_llm_call", context)
    ctx.register_hook("transform_llm_output", lambda response_text, **kw: response_text.upper())
"""
ALPHA = """
import json
import hook_sink

def lookup(args, **kw):
    hook_sink.calls.append(("alpha", "lookup", kw.get("session_id"), kw.get("tool_call_id")))
    return json.dumps({"found": args.get("key")})

def guard(tool_name, args, **kw):
    ids = (kw.get("session_id"), kw.get("turn_id"), kw.get("tool_call_id"))
    hook_sink.calls.append(("alpha", "pre_tool_call", *ids))
    if args.get("key") == "forbidden":
        return {"action": "block", "message": "alpha says no"}

def context(**kw):
    hook_sink.calls.append(("alpha", "pre_llm_call"))
    return "alpha context"

def register(ctx):
    schema = {"description": "Look a key up.",
              "parameters": {"type": "object", "properties": {"key": {"type": "string"}}}}
    ctx.register_tool("lookup", "alpha", schema, lookup)
    ctx.register_hook("pre_llm_call", context)
    ctx.register_hook("pre_tool_call", guard)
"""

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

    def on_turn_start(self, turn_number, message, **kwargs):
        hook_sink.calls.append(("memory", "on_turn_start", turn_number, message))

    def prefetch(self, query, *, session_id=""):
        hook_sink.calls.append(("memory", "prefetch", query, session_id))
        return "recalled: tea"

    def sync_turn(self, user_content, assistant_content, *, session_id="", **kwargs):
        hook_sink.calls.append(("memory", "sync_turn", user_content, assistant_content, session_id))

    def queue_prefetch(self, query, *, session_id=""):
        hook_sink.calls.append(("memory", "queue_prefetch", query, session_id))

    def on_session_end(self, messages):
        hook_sink.calls.append(("memory", "on_session_end", len(messages)))
"""


@pytest.fixture
def kernel(home: Path, bundled: Path, sink: Any) -> Callable[..., Kernel]:
    """``kernel(config=None, memory=False)``: alpha and zed (and the notes memory), loaded."""
    made: list[Kernel] = []

    def make(config: dict[str, Any] | None = None, *, memory: bool = False) -> Kernel:
        write_plugin(home / "plugins", "zed", ZED)
        write_plugin(home / "plugins", "alpha", ALPHA)
        config = dict(config or {})
        if memory:
            write_plugin(home / "plugins", "memory/notes", MEMORY, manifest="")
            config["memory"] = {"provider": "notes"}
        k = Kernel(home, config=config)
        made.append(k)
        k.load()
        assert all(p.enabled for p in k.plugins), [(p.name, p.error) for p in k.plugins]
        return k

    yield make
    for k in made:
        k.shutdown()


def test_a_turn_fires_the_lifecycle_in_order_and_the_context_rides_on_the_user_message(
    kernel: Callable[..., Kernel], sink: Any
) -> None:
    k = kernel(memory=True)
    recorder = HookRecorder().attach(k)
    with HostSession(k, session_id="s-1", model="m-1", platform="embed") as session:
        turn = session.begin_turn("What do I drink?")
        assert (turn.session_id, turn.is_first_turn, turn.number) == ("s-1", True, 1)
        # The recall, then the hooks' context in plugin order, a blank line between each.
        assert turn.context == "recalled: tea\n\nalpha context\n\nzed says hi"
        assert turn.user_content == "What do I drink?\n\n" + turn.context
        result = session.dispatch("lookup", {"key": "k1"}, tool_call_id="call-7")
        assert json.loads(result) == {"found": "k1"}
        blocked = session.dispatch("lookup", {"key": "forbidden"}, tool_call_id="call-8")
        assert json.loads(blocked) == {"error": "alpha says no"}
        reply = session.end_turn("you drink tea")
        assert reply == "YOU DRINK TEA"  # zed's transform_llm_output
    assert recorder.names() == [
        "on_session_start",
        "pre_llm_call",
        "pre_tool_call",
        "post_tool_call",
        "transform_tool_result",
        "pre_tool_call",
        "post_tool_call",  # observers hear of the blocked call too
        "post_llm_call",
        "transform_llm_output",
        "on_session_end",
        "on_session_end",  # at close, as the reference loop does
        "on_session_finalize",
    ]
    memory = [c[1:] for c in sink.calls if c[0] == "memory"]
    assert memory == [
        ("initialize", "s-1"),
        ("on_turn_start", 1, "What do I drink?"),
        ("prefetch", "What do I drink?", "s-1"),
        ("sync_turn", "What do I drink?", "YOU DRINK TEA", "s-1"),
        ("queue_prefetch", "What do I drink?", "s-1"),
        ("on_session_end", 2),  # the session's own transcript: the user message and the reply
    ]
    # pre_llm_call in alphabetical plugin order, whatever order the plugins were written in.
    assert [c[0] for c in sink.calls if c[1:] == ("pre_llm_call",)] == ["alpha", "zed"]
    # The tool call carried the session's ids.
    assert ("alpha", "pre_tool_call", "s-1", turn.turn_id, "call-7") in sink.calls
    assert [c for c in sink.calls if c[1] == "lookup"] == [("alpha", "lookup", "s-1", "call-7")]  # not call-8
    pre = recorder.of("pre_llm_call")[0]
    assert pre["user_message"] == "What do I drink?" and pre["platform"] == "embed" and pre["model"] == "m-1"
    assert recorder.of("post_llm_call")[0]["assistant_response"] == "you drink tea"
    assert recorder.of("on_session_finalize")[0]["session_id"] == "s-1"


def test_the_hooks_get_the_same_arguments_as_in_the_reference_loop(kernel: Callable[..., Kernel]) -> None:
    k = kernel()
    host_model(k, lambda messages: "a reply")
    recorder = HookRecorder().attach(k)
    agent = AgentSession(k)
    agent.run("hello")
    agent.close()
    reference = {c.hook: set(c.kwargs) for c in recorder.calls}
    recorder.clear()
    with HostSession(k) as session:
        session.begin_turn("hello")
        session.end_turn("a reply")
    hosted = {c.hook: set(c.kwargs) for c in recorder.calls}
    for hook in (
        "on_session_start",
        "pre_llm_call",
        "post_llm_call",
        "transform_llm_output",
        "on_session_end",
    ):
        assert hosted[hook] == reference[hook], hook
    assert hosted["on_session_finalize"] == reference["on_session_finalize"]


def test_later_turns_are_not_first_and_see_the_conversation_so_far(kernel: Callable[..., Kernel]) -> None:
    k = kernel()
    recorder = HookRecorder().attach(k)
    with HostSession(k) as session:
        session.begin_turn("one")
        session.end_turn("first reply")
        second = session.begin_turn("two")
        session.end_turn("second reply")
    assert not second.is_first_turn and second.number == 2
    assert recorder.names().count("on_session_start") == 1
    history = recorder.of("pre_llm_call")[1]["conversation_history"]
    assert history == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "first reply"},  # as the model said it, as in the reference loop
    ]
    # A history the host gives is what the hooks see instead.
    given = [{"role": "user", "content": "earlier"}]
    with HostSession(k) as other:
        other.begin_turn("now", history=given)
        given.append({"role": "user", "content": "changed afterwards"})
        other.end_turn("ok")
    assert recorder.of("pre_llm_call")[-1]["conversation_history"] == [{"role": "user", "content": "earlier"}]


def test_a_turn_that_did_not_complete_fires_only_on_session_end(
    kernel: Callable[..., Kernel], sink: Any
) -> None:
    k = kernel(memory=True)
    recorder = HookRecorder().attach(k)
    session = HostSession(k)
    session.begin_turn("will fail")
    recorder.clear()
    sink.calls.clear()
    assert session.end_turn("partial", completed=False, interrupted=True) == "partial"
    assert recorder.names() == ["on_session_end"]
    end = recorder.of("on_session_end")[0]
    assert (end["completed"], end["interrupted"]) == (False, True)
    assert not [c for c in sink.calls if c[0] == "memory"]  # no sync_turn for a failed turn
    # The session goes on.
    turn = session.begin_turn("again")
    assert not turn.is_first_turn
    session.end_turn("fine")
    session.close()


def test_out_of_order_use_is_a_clear_error(kernel: Callable[..., Kernel]) -> None:
    k = kernel()
    session = HostSession(k, session_id="s-9")
    with pytest.raises(HostSessionError, match="no turn in progress"):
        session.end_turn("nothing began")
    session.begin_turn("one")
    with pytest.raises(HostSessionError, match="still in progress"):
        session.begin_turn("two")
    recorder = HookRecorder().attach(k)
    session.close()  # ends the open turn first, not completed
    assert recorder.names() == ["on_session_end", "on_session_end", "on_session_finalize"]
    assert recorder.of("on_session_end")[0]["completed"] is False
    session.close()  # idempotent
    assert recorder.names().count("on_session_finalize") == 1
    with pytest.raises(HostSessionError, match="s-9 is closed"):
        session.begin_turn("after close")
    with pytest.raises(TypeError, match="user_message must be a str"):
        HostSession(k).begin_turn(b"bytes")  # type: ignore[arg-type]


def test_start_opens_the_session_before_any_turn(kernel: Callable[..., Kernel]) -> None:
    k = kernel()
    recorder = HookRecorder().attach(k)
    session = HostSession(k, platform="mcp")
    session.start()
    session.start()
    assert recorder.names() == ["on_session_start"]
    turn = session.begin_turn("first")
    assert turn.is_first_turn  # still the first turn, but the session had started already
    assert recorder.names().count("on_session_start") == 1
    session.end_turn("ok")
    session.close()
    # A session that started but ran no turn still ends and is finalized under its id; a host ending
    # on Ctrl-C says so.
    recorder.clear()
    idle = HostSession(k, session_id="idle", platform="mcp")
    idle.start()
    idle.close(completed=False, interrupted=True)
    assert recorder.names() == ["on_session_start", "on_session_end", "on_session_finalize"]
    end = recorder.of("on_session_end")[0]
    assert (end["session_id"], end["completed"], end["interrupted"]) == ("idle", False, True)
    assert recorder.of("on_session_finalize")[0]["session_id"] == "idle"
    # One never started is finalized without an id, and hears no session end.
    recorder.clear()
    HostSession(k).close()
    assert recorder.names() == ["on_session_finalize"]
    assert recorder.of("on_session_finalize")[0]["session_id"] is None


def test_injected_messages_reach_only_their_session(home: Path, kernel: Callable[..., Kernel]) -> None:
    write_plugin(
        home / "plugins",
        "relay",
        """
def register(ctx):
    def note(user_message, **kw):
        ctx.inject_message(f"note for {kw['session_id']}")
    ctx.register_hook("pre_llm_call", note)
""",
    )
    k = kernel()
    alice, bob = HostSession(k, session_id="alice"), HostSession(k, session_id="bob")
    alice.begin_turn("hi")
    bob.begin_turn("hi")
    assert alice.take_injected() == [{"role": "user", "content": "note for alice"}]
    assert alice.take_injected() == []
    assert bob.take_injected() == [{"role": "user", "content": "note for bob"}]
    # With two sessions open and none in progress, a message cannot say whose it is: refused.
    assert k.inject_message("whose?") is False
    alice.close()
    assert k.inject_message("for bob, the only one left") is True
    assert bob.take_injected() == [{"role": "user", "content": "for bob, the only one left"}]
    bob.end_turn("ok")
    bob.close()


def test_a_reset_starts_a_new_session_and_finalizes_the_old(kernel: Callable[..., Kernel]) -> None:
    k = kernel()
    recorder = HookRecorder().attach(k)
    session = HostSession(k, session_id="old")
    session.begin_turn("one")
    session.end_turn("reply")
    new = session.reset("new")
    assert new != "old" and session.session_id == new and session.turns == 0
    finalize = recorder.of("on_session_finalize")[0]
    assert (finalize["session_id"], finalize["new_session_id"], finalize["reason"]) == ("old", new, "new")
    assert recorder.of("on_session_reset")[0]["old_session_id"] == "old"
    assert session.begin_turn("again").is_first_turn
    assert recorder.names().count("on_session_start") == 2
    session.end_turn("fine")
    session.close()


def test_the_async_turn_awaits_async_hooks_on_the_callers_loop(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    write_plugin(
        home / "plugins",
        "waiter",
        """
import asyncio, threading, hook_sink

async def context(**kw):
    await asyncio.sleep(0)
    hook_sink.calls.append(("waiter", threading.get_ident(), id(asyncio.get_running_loop())))
    return "awaited context"

def register(ctx):
    ctx.register_hook("pre_llm_call", context)
""",
    )
    k = kernel()
    seen: dict[str, Any] = {}

    async def main() -> None:
        seen["loop"], seen["thread"] = id(asyncio.get_running_loop()), threading.get_ident()
        session = HostSession(k)
        turn = await session.abegin_turn("async hello")
        seen["context"] = turn.context
        seen["result"] = await session.adispatch("lookup", {"key": "a"}, tool_call_id="c1")
        seen["reply"] = await session.aend_turn("done")
        session.close()

    import hook_sink

    asyncio.run(main())
    assert seen["context"] == "alpha context\n\nawaited context\n\nzed says hi"
    assert json.loads(seen["result"]) == {"found": "a"}
    assert seen["reply"] == "DONE"
    waiter = [c for c in hook_sink.calls if c[0] == "waiter"]
    assert waiter == [("waiter", seen["thread"], seen["loop"])]


def test_two_sessions_run_concurrently_apart(kernel: Callable[..., Kernel]) -> None:
    k = kernel()
    recorder = HookRecorder().attach(k)

    async def one(name: str) -> tuple[str, str]:
        session = HostSession(k, session_id=name)
        turn = await session.abegin_turn(f"question of {name}")
        await asyncio.sleep(0)
        result = await session.adispatch("lookup", {"key": name}, tool_call_id=f"call-{name}")
        reply = await session.aend_turn(f"answer for {name}")
        session.close()
        return turn.user_content, json.loads(result)["found"] + "|" + reply

    async def both() -> list[tuple[str, str]]:
        return list(await asyncio.gather(one("ann"), one("ben")))

    (ann_content, ann), (ben_content, ben) = asyncio.run(both())
    assert ann_content.startswith("question of ann") and ben_content.startswith("question of ben")
    assert (ann, ben) == ("ann|ANSWER FOR ANN", "ben|ANSWER FOR BEN")
    for call in recorder.of("post_llm_call"):
        assert call["user_message"] == f"question of {call['session_id']}"
    for call in recorder.of("pre_tool_call"):
        assert call["tool_call_id"] == f"call-{call['session_id']}"


def test_ctx_llm_and_the_reference_loop_answer_with_the_hosts_model(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    write_plugin(
        home / "plugins",
        "asker",
        """
import json

def ask(args, **kw):
    return json.dumps({"answer": ctx_holder[0].llm.complete([{"role": "user", "content": args["q"]}]).text})

ctx_holder = []

def register(ctx):
    ctx_holder.append(ctx)
    ctx.register_tool("ask", "asker", {"description": "ask the model", "parameters": {"type": "object"}}, ask)
""",
    )
    k = kernel()
    recorder = HookRecorder().attach(k)
    seen: list[list[dict[str, Any]]] = []

    async def model(messages: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return f"host model heard: {messages[-1]['content']}"

    host_model(k, model, model="host-llm")
    assert json.loads(k.tools.dispatch("ask", {"q": "ping"})) == {"answer": "host model heard: ping"}
    assert seen == [[{"role": "user", "content": "ping"}]]
    # The call went through the api hooks with the host's names.
    assert [c["provider"] for c in recorder.of("pre_api_request")] == ["host"]
    assert recorder.of("post_api_request")[0]["model"] == "host-llm"
    # The reference loop uses it too, with the merged context on the user's message.
    agent = AgentSession(k)
    assert agent.run("hello").reply == "HOST MODEL HEARD: HELLO\n\nALPHA CONTEXT\n\nZED SAYS HI"
    agent.close()


def test_a_failing_host_model_is_a_provider_error_for_ctx_llm(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    k = kernel()
    recorder = HookRecorder().attach(k)

    class Broken:
        model = "broken"

        def complete(self, messages: Any, **kwargs: Any) -> ChatResult:
            raise SystemExit("the host model exits")

    k.providers.use_model(Broken())
    client = k.providers.model()
    with pytest.raises(ProviderError, match="the host's model failed: SystemExit"):
        client.complete([{"role": "user", "content": "x"}])
    assert [c["error"] for c in recorder.of("api_request_error")] == [
        "the host's model failed: SystemExit('the host model exits')"
    ]

    class WrongType:
        def complete(self, messages: Any, **kwargs: Any) -> Any:
            return {"text": "a dict, not a ChatResult"}

    k.providers.use_model(WrongType())
    with pytest.raises(ProviderError, match="returned dict, not a ChatResult"):
        k.providers.model().complete([{"role": "user", "content": "x"}])
    with pytest.raises(TypeError, match="needs a ChatTransport"):
        k.providers.use_model(object())  # type: ignore[arg-type]
    # None goes back to config.yaml's model: none is configured here.
    k.providers.use_model(None)
    with pytest.raises(ValueError, match="no model provider configured"):
        k.providers.model()


def test_a_full_chat_transport_is_used_as_given(kernel: Callable[..., Kernel]) -> None:
    k = kernel()
    calls: list[dict[str, Any]] = []

    class Transport:
        model = "own"
        provider = "my-provider"

        def complete(self, messages: Any, **kwargs: Any) -> ChatResult:
            calls.append(kwargs)
            return ChatResult(
                "from the transport", [], Usage(input_tokens=3), "own", "my-provider", "stop", {}
            )

    k.providers.use_model(Transport())
    agent = AgentSession(k)
    result = agent.run("hi")
    agent.close()
    assert result.reply == "FROM THE TRANSPORT"
    assert result.usage["input_tokens"] == 3
    assert calls and calls[0]["session_id"] == agent.session_id and calls[0]["tools"]


def test_sync_host_model_calls_run_from_inside_a_running_loop(kernel: Callable[..., Kernel]) -> None:
    """A sync ``complete`` of an async call made while a loop runs in the caller's thread (a sync tool
    handler of an async host) runs the coroutine on a thread of its own instead of failing."""
    k = kernel()

    async def model(messages: list[dict[str, Any]]) -> str:
        await asyncio.sleep(0)
        return "async answer"

    host_model(k, model)

    async def main() -> str:
        return k.providers.model().complete([{"role": "user", "content": "x"}]).text

    assert asyncio.run(main()) == "async answer"
    assert k.providers.model().complete([{"role": "user", "content": "x"}]).text == "async answer"
    with pytest.raises(TypeError, match="needs a callable"):
        host_model(k, "not callable")  # type: ignore[arg-type]


def test_first_text_and_read_hook_are_public(home: Path, kernel: Callable[..., Kernel]) -> None:
    write_plugin(
        home / "plugins",
        "answers",
        """
class Hostile(str):
    def __str__(self):
        raise RuntimeError("no")

def register(ctx):
    ctx.register_hook("transform_llm_output", lambda **kw: 42)
    ctx.register_hook("transform_llm_output", lambda **kw: "")
    ctx.register_hook("transform_llm_output", lambda **kw: "the replacement")
""",
    )
    k = kernel()
    assert k.first_text(
        "transform_llm_output", response_text="x", session_id="s", model=None, platform="p"
    ) == ("the replacement")

    def read(value: Any) -> Any:
        if value == 42:
            raise ValueError("this reader refuses 42")
        return value

    answers = k.read_hook(
        "transform_llm_output", read, response_text="x", session_id="s", model=None, platform="p"
    )
    assert "the replacement" in answers and 42 not in answers
    # The callback whose answer could not be read is disabled, as a raising hook is.
    assert any(cb.error for cb in k.hook_callbacks("transform_llm_output") if cb.plugin == "answers")


def test_an_async_turn_of_sync_hooks_runs_off_the_loop_in_one_hop(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    """With no async callback among the turn's hooks, ``abegin_turn`` runs its steps on one worker thread
    and in one context, as the sync turn does: what ``on_session_start`` sets, ``pre_llm_call`` sees."""
    write_plugin(
        home / "plugins",
        "probe",
        """
import contextvars, threading, hook_sink

MARK = contextvars.ContextVar("probe_mark", default="unset")

def start(**kw):
    hook_sink.calls.append(("probe", "start", threading.get_ident()))
    MARK.set("set at session start")

def context(**kw):
    hook_sink.calls.append(("probe", "context", threading.get_ident(), MARK.get()))
    return "probe context"

def register(ctx):
    ctx.register_hook("on_session_start", start)
    ctx.register_hook("pre_llm_call", context)
""",
    )
    k = kernel()
    import hook_sink

    async def main() -> tuple[int, str]:
        session = HostSession(k)
        turn = await session.abegin_turn("hello")
        await session.aend_turn("ok")
        session.close()
        return threading.get_ident(), turn.context

    loop_thread, context = asyncio.run(main())
    assert "probe context" in context
    probe = [c for c in hook_sink.calls if c[0] == "probe"]
    (_, _, start_thread), (_, _, context_thread, mark) = probe
    assert start_thread == context_thread != loop_thread
    assert mark == "set at session start"


def test_a_cancelled_async_turn_of_sync_hooks_is_ended_interrupted(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    """Cancelling ``abegin_turn`` while a sync hook runs on the worker: the hook finishes (a thread cannot
    be stopped), the turn it began is ended as interrupted, the caller gets the cancellation, and the
    session takes its next turn."""
    write_plugin(
        home / "plugins",
        "slow",
        """
import hook_sink

def context(**kw):
    hook_sink.entered.set()
    hook_sink.release.wait(60)
    return "slow context"

def register(ctx):
    ctx.register_hook("pre_llm_call", context)
""",
    )
    k = kernel()
    recorder = HookRecorder().attach(k)
    session = HostSession(k)
    import hook_sink

    hook_sink.entered, hook_sink.release = threading.Event(), threading.Event()

    async def main() -> None:
        task = asyncio.create_task(session.abegin_turn("hello"))
        await asyncio.to_thread(hook_sink.entered.wait, 60)
        task.cancel()
        await asyncio.sleep(0)
        hook_sink.release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert session.turn is None
    ends = [(e["completed"], e["interrupted"]) for e in recorder.of("on_session_end")]
    assert ends == [(False, True)]
    k.unregister("slow")
    session.begin_turn("next")
    assert session.end_turn("fine") == "FINE"
    session.close()
