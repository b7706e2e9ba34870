"""The kernel's event bus (``k.events``): ordered, wildcards, isolated, strong, async-aware, per kernel."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import agent_log

from kernel import Kernel

Log = list[tuple[str, str, dict[str, Any]]]


def recorder(log: Log, label: str, answer: Any = None) -> Callable[[str, dict[str, Any]], Any]:
    def receive(name: str, context: dict[str, Any]) -> Any:
        log.append((label, name, context))
        return answer

    return receive


def labels(log: Log) -> list[str]:
    return [label for label, _, _ in log]


def test_receivers_are_called_in_connection_order(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    log: Log = []
    order = [f"r{i}" for i in range(25)]
    functions = [recorder(log, label) for label in order]
    for function in functions:
        k.events.connect("agent:start", function)
    k.events.emit("agent:start", {"session_id": "s1"})
    assert labels(log) == order
    assert all(name == "agent:start" and ctx == {"session_id": "s1"} for _, name, ctx in log)
    assert [r.receiver for r in k.events.receivers("agent:start")] == functions


def test_the_same_function_connected_twice_is_called_twice(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    log: Log = []
    receive = recorder(log, "twice")
    k.events.connect("x:y", receive)
    k.events.connect("x:y", recorder(log, "between"))
    k.events.connect("x:y", receive)
    k.events.emit("x:y")
    assert labels(log) == ["twice", "between", "twice"]


def test_exact_receivers_come_before_prefix_wildcards(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    log: Log = []
    # Wildcards connected first still run after every exact-name receiver.
    k.events.connect("agent:*", recorder(log, "wild-1"))
    k.events.connect("agent:end", recorder(log, "exact-1"))
    k.events.connect("agent:*", recorder(log, "wild-2"))
    k.events.connect("agent:end", recorder(log, "exact-2"))
    k.events.connect("session:*", recorder(log, "other-prefix"))
    k.events.connect("agent:start", recorder(log, "other-name"))

    k.events.emit("agent:end", {"response": "hi"})
    assert labels(log) == ["exact-1", "exact-2", "wild-1", "wild-2"]
    assert {name for _, name, _ in log} == {"agent:end"}  # wildcard receivers learn the real name
    assert [r.owner for r in k.events.receivers("agent:end")] == ["host"] * 4

    log.clear()
    k.events.emit("session:start")
    assert labels(log) == ["other-prefix"]

    log.clear()
    k.events.emit("agentless")  # no colon: no wildcard applies
    k.events.emit("nobody:listens")
    assert log == []


def test_a_failing_receiver_is_logged_and_the_rest_still_run(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    k = make_kernel()
    log: Log = []

    def broken(name: str, context: dict[str, Any]) -> None:
        raise RuntimeError("receiver exploded")

    def exits(name: str, context: dict[str, Any]) -> None:
        raise SystemExit(3)

    k.events.connect("agent:step", recorder(log, "before"))
    k.events.connect("agent:step", broken, owner="plugin-broken")
    k.events.connect("agent:step", exits, owner="plugin-exits")
    k.events.connect("agent:*", recorder(log, "after"))

    k.events.emit("agent:step", {"iteration": 1})
    assert labels(log) == ["before", "after"]
    assert k.events.emit_collect("agent:step") == []
    text = agent_log(home)
    failures = [line for line in text.splitlines() if "event_receiver_failed" in line]
    assert any("plugin-broken" in line and "receiver exploded" in line for line in failures), text
    assert any("plugin-exits" in line and "SystemExit" in line for line in failures), text
    # A failing receiver stays connected: events are news, the next one may go better.
    assert len(k.events.receivers("agent:step")) == 4


def test_keyboard_interrupt_in_a_receiver_propagates(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()

    def interrupt(name: str, context: dict[str, Any]) -> None:
        raise KeyboardInterrupt

    k.events.connect("agent:start", interrupt)
    with pytest.raises(KeyboardInterrupt):
        k.events.emit("agent:start")


def test_receivers_get_their_own_copy_of_the_context(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    seen: list[dict[str, Any]] = []

    def meddle(name: str, context: dict[str, Any]) -> None:
        context["session_id"] = "changed"
        context["extra"] = True

    k.events.connect("session:start", meddle)
    k.events.connect("session:start", lambda name, context: seen.append(context))
    original = {"session_id": "s1"}
    k.events.emit("session:start", original)
    assert seen == [{"session_id": "s1"}]
    assert original == {"session_id": "s1"}
    k.events.emit("session:start")  # no context: an empty dict
    assert seen[-1] == {}


def test_emit_collect_returns_the_non_none_answers_in_call_order(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    log: Log = []
    k.events.connect("command:*", recorder(log, "wild", "from wildcard"))
    k.events.connect("command:run", recorder(log, "a", {"answer": 1}))
    k.events.connect("command:run", recorder(log, "none", None))
    k.events.connect("command:run", recorder(log, "zero", 0))
    k.events.connect("command:run", recorder(log, "b", "two"))
    assert k.events.emit_collect("command:run", {"text": "/x"}) == [{"answer": 1}, 0, "two", "from wildcard"]
    assert labels(log) == ["a", "none", "zero", "b", "wild"]
    assert k.events.emit("command:run") is None
    assert k.events.emit_collect("command:unheard") == ["from wildcard"]
    assert k.events.emit_collect("silence") == []


def test_async_receivers_are_awaited_by_emit_and_aemit(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    order: list[str] = []

    async def slow(name: str, context: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        order.append(f"async:{context['n']}")
        return f"async answer {context['n']}"

    def sync(name: str, context: dict[str, Any]) -> str:
        order.append(f"sync:{context['n']}")
        return f"sync answer {context['n']}"

    async def failing(name: str, context: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        raise ValueError("async receiver failed")

    k.events.connect("agent:end", slow)
    k.events.connect("agent:end", failing, owner="bad-async")
    k.events.connect("agent:end", sync)

    # From synchronous code: the coroutine is run to completion before the next receiver.
    k.events.emit("agent:end", {"n": 1})
    assert order == ["async:1", "sync:1"]
    assert k.events.emit_collect("agent:end", {"n": 2}) == ["async answer 2", "sync answer 2"]

    # From async code: awaited on the caller's loop.
    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()
        loops: list[Any] = []

        async def which_loop(name: str, context: dict[str, Any]) -> None:
            loops.append(asyncio.get_running_loop())

        k.events.connect("agent:end", which_loop)
        answers = await k.events.aemit("agent:end", {"n": 3})
        assert loops == [loop]
        return answers

    assert asyncio.run(main()) == ["async answer 3", "sync answer 3"]
    assert order[-2:] == ["async:3", "sync:3"]
    assert "async receiver failed" in agent_log(k.home)


def test_receivers_are_held_strongly(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    calls: list[str] = []

    class Listener:
        def on_event(self, name: str, context: dict[str, Any]) -> None:
            calls.append(f"method:{name}")

    k.events.connect("agent:start", lambda name, context: calls.append(f"lambda:{name}"))
    k.events.connect("agent:start", Listener().on_event)  # the only reference to the object
    gc.collect()
    gc.collect()
    k.events.emit("agent:start")
    assert calls == ["lambda:agent:start", "method:agent:start"]


def test_connect_refuses_what_cannot_be_called(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    with pytest.raises(TypeError, match="agent:start"):
        k.events.connect("agent:start", "not a function")  # type: ignore[arg-type]
    assert k.events.receivers("agent:start") == []


def test_disconnect_owner_removes_only_that_owners_receivers(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    log: Log = []
    k.events.connect("agent:start", recorder(log, "a-exact"), owner="plugin-a")
    k.events.connect("agent:start", recorder(log, "b-exact"), owner="plugin-b")
    k.events.connect("agent:*", recorder(log, "a-wild"), owner="plugin-a")
    k.events.connect("session:end", recorder(log, "a-session"), owner="plugin-a")
    k.events.connect("agent:*", recorder(log, "host-wild"))

    k.events.disconnect_owner("plugin-a")
    k.events.emit("agent:start")
    k.events.emit("session:end")
    assert labels(log) == ["b-exact", "host-wild"]
    assert [r.owner for r in k.events.receivers("agent:start")] == ["plugin-b", "host"]

    k.events.disconnect_owner("nobody")  # harmless
    k.events.disconnect_owner("plugin-b")
    k.events.disconnect_owner("host")
    log.clear()
    k.events.emit("agent:start")
    assert log == []
    # Connecting again after a disconnect works.
    k.events.connect("agent:start", recorder(log, "again"), owner="plugin-a")
    k.events.emit("agent:start")
    assert labels(log) == ["again"]


def test_two_kernels_do_not_share_receivers(tmp_path: Path, bundled: Path) -> None:
    log: Log = []
    with Kernel(home=tmp_path / "one") as one, Kernel(home=tmp_path / "two") as two:
        one.events.connect("agent:start", recorder(log, "one"))
        one.events.connect("agent:*", recorder(log, "one-wild"))
        two.events.connect("agent:start", recorder(log, "two"))
        one.events.emit("agent:start")
        assert labels(log) == ["one", "one-wild"]
        log.clear()
        two.events.emit("agent:start")
        assert labels(log) == ["two"]
        one.events.disconnect_owner("host")
        log.clear()
        two.events.emit("agent:start")
        assert labels(log) == ["two"]
        assert one.events.receivers("agent:start") == []
