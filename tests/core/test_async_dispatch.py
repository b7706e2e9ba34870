"""``await k.tools.adispatch(...)`` and ``await session.arun(...)``: async hosts keep their loop running.

Plugin ``slow`` has a sync tool that blocks until the host's loop, still
running, sets ``hook_sink.gate``; a coroutine tool that reports which loop
awaited it; and a ``pre_tool_call`` guard that blocks ``forbidden``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.testing import scripted_config, write_script

EXTENSIONS = Path(__file__).resolve().parents[2] / "extensions"

SLOW = """
import asyncio
import json
import hook_sink

SCHEMA = {"description": "d", "parameters": {"type": "object", "properties": {}}}


def blocking(args, **kw):
    hook_sink.calls.append(("blocking", kw.get("session_id")))
    ok = hook_sink.gate.wait(20)
    return json.dumps({"released": ok})


async def on_loop(args, **kw):
    await asyncio.sleep(0)
    hook_sink.calls.append(("on_loop", asyncio.get_running_loop()))
    return json.dumps({"ok": True})


def forbidden(args, **kw):
    return json.dumps({"ran": True})


def before_model(**kw):
    hook_sink.calls.append(("pre_llm_call", hook_sink.gate.wait(20)))


def guard(tool_name, **kw):
    if tool_name == "forbidden":
        return {"action": "block", "message": "not from here"}


def register(ctx):
    ctx.register_tool("blocking", "t", SCHEMA, blocking)
    ctx.register_tool("on_loop", "t", SCHEMA, on_loop)
    ctx.register_tool("forbidden", "t", SCHEMA, forbidden)
    ctx.register_hook("pre_tool_call", guard)
    ctx.register_hook("pre_llm_call", before_model)
"""


@pytest.fixture
def slow(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., object], sink: types.ModuleType
) -> Kernel:
    """A kernel with plugin ``slow``; ``hook_sink.gate`` is the event its blocking code waits for."""
    plugin_dir("slow", SLOW)
    sink.gate = threading.Event()
    return make_kernel()


def test_a_blocking_tool_does_not_stall_the_callers_loop(slow: Kernel, sink: types.ModuleType) -> None:
    k = slow

    async def host() -> tuple[str, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                if ticks == 5:
                    sink.gate.set()  # only a running loop gets here
                await asyncio.sleep(0.01)

        beat = asyncio.create_task(ticker())
        try:
            with k.tools.call_context(session_id="host-session"):
                result = await k.tools.adispatch("blocking", {})
        finally:
            beat.cancel()
        return result, ticks

    result, ticks = asyncio.run(host())
    assert json.loads(result) == {"released": True}, "the loop stalled: the gate was never set"
    assert ticks >= 5
    assert ("blocking", "host-session") in sink.calls, "the caller's context variables reach the handler"


def test_a_coroutine_tool_is_awaited_on_the_callers_loop(slow: Kernel, sink: types.ModuleType) -> None:
    k = slow

    async def host() -> tuple[str, asyncio.AbstractEventLoop]:
        return await k.tools.adispatch("on_loop", {}), asyncio.get_running_loop()

    result, loop = asyncio.run(host())
    assert json.loads(result) == {"ok": True}
    assert sink.calls == [("on_loop", loop)]
    # The sync dispatch of the same tool awaits it on the kernel's own loop instead.
    assert json.loads(k.tools.dispatch("on_loop", {})) == {"ok": True}
    assert sink.calls[-1][1] is not loop


def test_the_guards_hold_for_adispatch_and_unknown_tools_answer_an_error(
    slow: Kernel, sink: types.ModuleType
) -> None:
    k = slow

    async def host() -> tuple[str, str]:
        return await k.tools.adispatch("forbidden", {}), await k.tools.adispatch("nope", "{}")

    blocked, unknown = asyncio.run(host())
    assert json.loads(blocked) == json.loads(k.tools.dispatch("forbidden", {}))
    assert "not from here" in blocked
    assert "unknown tool" in json.loads(unknown)["error"]


def test_session_arun_keeps_the_loop_running(
    make_kernel: Callable[..., Kernel],
    plugin_dir: Callable[..., object],
    sink: types.ModuleType,
    home: Path,
    bundled: Path,
) -> None:
    """The turn's ``pre_llm_call`` hook blocks until the caller's loop, still running, opens the gate."""
    shutil.copytree(EXTENSIONS / "model-providers", bundled / "model-providers")
    plugin_dir("slow", SLOW)
    sink.gate = threading.Event()
    k = make_kernel(config=scripted_config(write_script(home, ["Hello from arun."])))
    session = AgentSession(k)

    async def host() -> str:
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, sink.gate.set)
        result = await session.arun("hi")
        return result.reply

    assert asyncio.run(host()) == "Hello from arun."
    assert ("pre_llm_call", True) in sink.calls
    session.close()
