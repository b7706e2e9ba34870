"""``HostSession`` against hostile plugins, providers and hosts: the turn contains them, the session goes on.

Real kernels over real plugin directories in a temporary home.  Each test names the promise it attacks:
a plugin's failure never ends the host's turn (only Ctrl-C and cancellation go through, and then the turn
is ended as not completed); odd text travels unchanged; two kernels and two sessions stay apart.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import write_plugin
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel import Kernel
from kernel.integrations import HostSession, host_model
from kernel.providers import ProviderError
from kernel.testing import HookRecorder


@pytest.fixture
def kernel(home: Path, bundled: Path) -> Callable[..., Kernel]:
    made: list[Kernel] = []

    def make(plugins: dict[str, str], config: dict[str, Any] | None = None, at: Path | None = None) -> Kernel:
        root = at or home
        for name, code in plugins.items():
            write_plugin(root / "plugins", name, code, manifest="" if name.startswith("memory/") else None)
        k = Kernel(root, config=config)
        made.append(k)
        k.load()
        return k

    yield make
    for k in made:
        k.shutdown()


INTERRUPTING = """
def register(ctx):
    def stop(**kw):
        raise KeyboardInterrupt
    ctx.register_hook("pre_llm_call", stop)
"""


def test_ctrl_c_in_a_hook_ends_the_turn_not_completed_and_the_session_goes_on(
    kernel: Callable[..., Kernel],
) -> None:
    k = kernel({"stopper": INTERRUPTING})
    recorder = HookRecorder().attach(k)
    session = HostSession(k)
    with pytest.raises(KeyboardInterrupt):
        session.begin_turn("hello")
    assert session.turn is None
    end = recorder.of("on_session_end")
    assert [(e["completed"], e["interrupted"]) for e in end] == [(False, True)]
    k.unregister("stopper")
    turn = session.begin_turn("again")
    assert session.end_turn("fine") == "fine" and turn.number == 2
    session.close()


FAILING = """
class Exit(BaseException):
    pass

def register(ctx):
    def exits(**kw):
        raise SystemExit(3)
    def base(**kw):
        raise Exit("a BaseException of the plugin's own")
    def bad_str(**kw):
        class Evil(Exception):
            def __str__(self):
                raise RuntimeError("no __str__ for you")
        raise Evil()
    ctx.register_hook("pre_llm_call", exits)
    ctx.register_hook("pre_llm_call", base)
    ctx.register_hook("post_llm_call", bad_str)
    ctx.register_hook("on_session_start", base)
    ctx.register_hook("transform_llm_output", bad_str)
"""


def test_hooks_raising_systemexit_baseexceptions_and_unprintable_errors_are_contained(
    kernel: Callable[..., Kernel],
) -> None:
    k = kernel({"failing": FAILING})
    with HostSession(k) as session:
        turn = session.begin_turn("hello")
        assert turn.context == "" and turn.user_content == "hello"
        assert session.end_turn("reply") == "reply"
    disabled = {
        cb.hook for cb in k.hook_callbacks("pre_llm_call") + k.hook_callbacks("post_llm_call") if cb.error
    }
    assert disabled == {"pre_llm_call", "post_llm_call"}


MEMORY = """
from agent.memory_provider import MemoryProvider


class Fails(BaseException):
    pass


class Broken(MemoryProvider):
    @property
    def name(self):
        return "broken"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        raise RuntimeError("initialize fails")

    def get_tool_schemas(self):
        return []

    def on_turn_start(self, turn_number, message, **kwargs):
        raise Fails("on_turn_start fails")

    def prefetch(self, query, *, session_id=""):
        raise SystemExit("prefetch exits")

    def sync_turn(self, user_content, assistant_content, *, session_id="", **kwargs):
        raise MemoryError("sync fails")

    def queue_prefetch(self, query, *, session_id=""):
        raise RuntimeError("queue fails")

    def on_session_end(self, messages):
        raise RuntimeError("end fails")
"""


def test_a_memory_provider_whose_every_method_fails_never_stops_a_turn(kernel: Callable[..., Kernel]) -> None:
    k = kernel({"memory/broken": MEMORY}, config={"memory": {"provider": "broken"}})
    assert k.providers.memory() is not None
    recorder = HookRecorder().attach(k)
    session = HostSession(k)
    turn = session.begin_turn("hello")
    assert turn.context == ""
    assert session.end_turn("reply") == "reply"
    session.close()
    assert recorder.names().count("on_session_finalize") == 1


def test_a_cancelled_async_turn_ends_not_completed_and_re_raises(
    kernel: Callable[..., Kernel], sink: Any
) -> None:
    hanging = """
import asyncio
import hook_sink

def register(ctx):
    async def forever(**kw):
        hook_sink.entered.set()
        await asyncio.Event().wait()
    ctx.register_hook("pre_llm_call", forever)
"""
    k = kernel({"hanging": hanging})
    recorder = HookRecorder().attach(k)
    session = HostSession(k)

    async def main() -> None:
        sink.entered = asyncio.Event()
        task = asyncio.create_task(session.abegin_turn("hello"))
        await sink.entered.wait()  # the hook is waiting on this loop: cancel the host's run now
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert session.turn is None
    assert [(e["completed"], e["interrupted"]) for e in recorder.of("on_session_end")] == [(False, True)]
    k.unregister("hanging")
    session.begin_turn("next")
    assert session.end_turn("ok") == "ok"
    session.close()


def test_a_host_model_raising_ctrl_c_goes_through_and_anything_else_is_a_provider_error(
    kernel: Callable[..., Kernel],
) -> None:
    k = kernel({})

    def interrupt(messages: list[dict[str, Any]]) -> str:
        raise KeyboardInterrupt

    host_model(k, interrupt)
    with pytest.raises(KeyboardInterrupt):
        k.providers.model().complete([{"role": "user", "content": "x"}])

    class Odd(Exception):
        def __str__(self) -> str:
            raise RuntimeError("unprintable")

    def odd(messages: list[dict[str, Any]]) -> str:
        raise Odd()

    host_model(k, odd)
    with pytest.raises(ProviderError, match="the host's model failed: Odd"):
        k.providers.model().complete([{"role": "user", "content": "x"}])
    host_model(k, lambda messages: b"bytes")
    with pytest.raises(ProviderError, match="returned bytes, not a str"):
        k.providers.model().complete([{"role": "user", "content": "x"}])


ECHO = """
import hook_sink

def register(ctx):
    ctx.register_hook("pre_llm_call", lambda user_message, **kw: hook_sink.calls.append(user_message))
"""


def test_any_text_travels_unchanged(kernel: Callable[..., Kernel], sink: Any) -> None:
    """Surrogates, NUL bytes, lone combining marks: the hooks get the user's text as it was, the model's
    user message is it, and the reply comes back unchanged."""
    k = kernel({"echo": ECHO})

    @settings(max_examples=80, deadline=None)
    @given(text=st.text(alphabet=st.characters(min_codepoint=0, exclude_categories=()), max_size=200))
    def check(text: str) -> None:
        sink.calls.clear()
        with HostSession(k) as session:
            turn = session.begin_turn(text)
            assert sink.calls == [text]
            assert turn.user_content == text
            assert session.end_turn(text) == text

    check()


def test_two_kernels_in_one_process_keep_their_sessions_apart(
    tmp_path: Path, kernel: Callable[..., Kernel], sink: Any
) -> None:
    tagger = """
import hook_sink

def register(ctx):
    def tag(**kw):
        hook_sink.calls.append(kw["session_id"])
        ctx.inject_message("from tenant a")
        return "tenant context"
    ctx.register_hook("pre_llm_call", tag)
"""
    homes = [tmp_path / "tenant-a", tmp_path / "tenant-b"]
    for h in homes:
        h.mkdir()
    a = kernel({"tagger": tagger}, at=homes[0])
    b = kernel({}, at=homes[1])
    one, two = HostSession(a, session_id="same-id"), HostSession(b, session_id="same-id")
    turn_a = one.begin_turn("hi")
    turn_b = two.begin_turn("hi")
    assert turn_a.context == "tenant context" and turn_b.context == ""
    assert one.take_injected() == [{"role": "user", "content": "from tenant a"}]
    assert two.take_injected() == []  # the other kernel's message never crosses over
    assert sink.calls == ["same-id"]  # tenant b's session never reached tenant a's plugin
    for s in (one, two):
        s.end_turn("ok")
        s.close()


def test_a_huge_history_is_copied_for_the_hooks_not_shared(kernel: Callable[..., Kernel]) -> None:
    mutator = """
def register(ctx):
    def mutate(conversation_history, **kw):
        conversation_history.clear()
    ctx.register_hook("pre_llm_call", mutate)
    ctx.register_hook("post_llm_call", mutate)
"""
    k = kernel({"mutator": mutator})
    history = [{"role": "user", "content": "x" * 1000} for _ in range(2000)]
    with HostSession(k) as session:
        session.begin_turn("hello", history=history)
        session.end_turn("reply", history=history)
        assert len(history) == 2000 and len(session.history) == 2000
    assert json.dumps(history[0])  # untouched
