"""Hostile plugins against the kernel's containment rules.

Every plugin here misbehaves on purpose: its hook callbacks raise ``Exception``
and ``BaseException`` subclasses (some whose ``__str__`` raises too), return
coroutines or awaitables that fail when awaited, return objects that fail when
rendered or compared, mutate the arguments they are given, or never answer.
Tool handlers and ``check_fn`` predicates do the same.

The contract under test (the kernel's containment spec):

* a failing callback is logged once (plugin, hook, error), disabled for the
  life of the kernel and named in ``k.plugin(name).hook_errors`` and in
  ``hermes-kernel plugins list``; the call goes on without it and the other
  plugins' callbacks still run, their results returned in plugin order;
* ``KeyboardInterrupt`` in the main thread and a real cancellation of the
  calling task propagate; every other ``BaseException`` is a plugin failure;
* ``pre_tool_call`` fails closed: a failed guard blocks that one call;
* each ``pre_tool_call`` callback gets arguments it cannot change for the
  others or for the handler;
* ``plugins.hook_timeout`` bounds every callback, including a coroutine that a
  sync callback returns;
* ``k.tools.dispatch`` always returns a JSON string and ``k.tools.schemas()``
  never raises, whatever a handler or a ``check_fn`` does.

Plugins are registered at run time with ``k.register(obj, name=...)`` (a
Hermes-style object with ``register(ctx)``, or an object of ``@hookimpl``
methods); the CLI test and the agent-turn test use real plugin directories and
the bundled plugins.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import subprocess
import tempfile
import threading
import time
import types
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import CLI, REPO, agent_log, cli_env, run_json, write_plugin
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel import Kernel, hookimpl

SESSION = {"session_id": "s-1", "model": "m-1", "platform": "cli"}

LLM_CALL = {
    "session_id": "s-1",
    "task_id": None,
    "turn_id": "t-1",
    "user_message": "hello",
    "conversation_history": [],
    "is_first_turn": True,
    "model": "m-1",
    "platform": "cli",
    "parent_session_id": None,
    "sender_id": None,
}

_TOOL_CONTEXT = {
    "tool_name": "probe",
    "args": {"q": 1},
    "result": '{"ok": true}',
    "task_id": None,
    "session_id": "s-1",
    "tool_call_id": "call-1",
    "turn_id": "t-1",
    "api_request_id": None,
    "status": "ok",
    "error_type": None,
    "error_message": None,
}
POST_TOOL_CALL = {**_TOOL_CONTEXT, "duration_ms": 3}
TRANSFORM_TOOL_RESULT = dict(_TOOL_CONTEXT)

# Kwargs for a direct ``invoke_hook`` of each observer hook used below.
HOOK_KWARGS: dict[str, dict[str, Any]] = {
    "on_session_start": SESSION,
    "post_tool_call": POST_TOOL_CALL,
    "transform_tool_result": TRANSFORM_TOOL_RESULT,
    "pre_llm_call": LLM_CALL,
}

PROBE_SCHEMA = {
    "description": "Echo the arguments back.",
    "parameters": {"type": "object", "properties": {"q": {"type": "integer"}}},
}


def plugin_order(name: str) -> tuple[str, str]:
    """The documented call order of plugins: alphabetical ignoring case, then exact."""
    return (name.casefold(), name)


# --------------------------------------------------------------------------
# Hostile objects
# --------------------------------------------------------------------------


class Boom(BaseException):
    """A custom BaseException subclass: neither an Exception nor one of Python's own."""


class StrBomb(Exception):
    """An exception that cannot be rendered: ``str()`` and ``repr()`` raise."""

    def __str__(self) -> str:
        raise RuntimeError("StrBomb.__str__ refuses")

    def __repr__(self) -> str:
        raise RuntimeError("StrBomb.__repr__ refuses")


class BaseStrBomb(BaseException):
    """A BaseException subclass that cannot be rendered either."""

    def __str__(self) -> str:
        raise RuntimeError("BaseStrBomb.__str__ refuses")

    def __repr__(self) -> str:
        raise RuntimeError("BaseStrBomb.__repr__ refuses")


class Unprintable:
    """An object that fails when rendered, formatted, compared or hashed."""

    def __str__(self) -> str:
        raise RuntimeError("Unprintable.__str__ refuses")

    def __repr__(self) -> str:
        raise RuntimeError("Unprintable.__repr__ refuses")

    def __format__(self, spec: str) -> str:
        raise RuntimeError("Unprintable.__format__ refuses")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("Unprintable.__eq__ refuses")

    def __ne__(self, other: object) -> bool:
        raise RuntimeError("Unprintable.__ne__ refuses")

    def __hash__(self) -> int:
        raise RuntimeError("Unprintable.__hash__ refuses")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise RuntimeError("Unprintable cannot be pickled or copied")


class UnprintableStr(str):
    """A ``str`` subclass whose rendering methods raise (its text is valid JSON)."""

    def __str__(self) -> str:
        raise RuntimeError("UnprintableStr.__str__ refuses")

    def __repr__(self) -> str:
        raise RuntimeError("UnprintableStr.__repr__ refuses")

    def __format__(self, spec: str) -> str:
        raise RuntimeError("UnprintableStr.__format__ refuses")


class BoolBomb:
    """A value whose truth cannot be tested: ``__bool__`` raises the given exception."""

    def __init__(self, exc: Callable[[], BaseException]) -> None:
        self.exc = exc

    def __bool__(self) -> bool:
        raise self.exc()


class FailingAwaitable:
    """An awaitable whose ``__await__`` raises the given exception."""

    def __init__(self, exc: Callable[[], BaseException]) -> None:
        self.exc = exc

    def __await__(self) -> Iterator[Any]:
        raise self.exc()


class HostileDecision(dict):
    """A ``pre_tool_call`` decision dict that cannot be read, compared, copied or shown."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("HostileDecision refuses to be read")

    __getitem__ = _refuse
    __contains__ = _refuse
    __iter__ = _refuse
    __len__ = _refuse
    __eq__ = _refuse
    __ne__ = _refuse
    __repr__ = _refuse
    __str__ = _refuse
    __reduce_ex__ = _refuse
    __copy__ = _refuse
    __deepcopy__ = _refuse
    get = _refuse
    keys = _refuse
    items = _refuse
    values = _refuse
    copy = _refuse
    __hash__ = None  # type: ignore[assignment]


async def failing_coroutine(exc: Callable[[], BaseException]) -> Any:
    """A coroutine that raises ``exc()`` once it is awaited."""
    await asyncio.sleep(0)
    raise exc()


# The exceptions a callback raises, by name (test ids and hypothesis draws use the names).
RAISED: dict[str, Callable[[], BaseException]] = {
    "ValueError": lambda: ValueError("plain failure 4711"),
    "StrBomb": StrBomb,
    "SystemExit": lambda: SystemExit(3),
    "GeneratorExit": GeneratorExit,
    "Boom": lambda: Boom("custom base exception"),
    "BaseStrBomb": BaseStrBomb,
    "CancelledError": asyncio.CancelledError,
}
HOSTILE_RAISED = [name for name in RAISED if name != "ValueError"]


# --------------------------------------------------------------------------
# Plugin builders
# --------------------------------------------------------------------------


def hermes_plugin(*hooks: tuple[str, Callable[..., Any]]) -> types.SimpleNamespace:
    """A Hermes-style plugin object whose ``register(ctx)`` registers each ``(hook, callback)``."""

    def register(ctx: Any) -> None:
        for hook, callback in hooks:
            ctx.register_hook(hook, callback)

    return types.SimpleNamespace(register=register)


def returning(value: Any, calls: list[str] | None = None, tag: str = "") -> Callable[..., Any]:
    """A Hermes callback returning ``value`` (recording ``tag`` in ``calls`` when given)."""

    def callback(**kwargs: Any) -> Any:
        if calls is not None:
            calls.append(tag)
        return value

    return callback


def acting(body: Callable[[], Any], *, is_async: bool = False) -> Callable[..., Any]:
    """A Hermes callback that runs ``body()`` (a sync or an ``async def`` callback)."""
    if is_async:

        async def async_callback(**kwargs: Any) -> Any:
            await asyncio.sleep(0)
            return body()

        return async_callback

    def callback(**kwargs: Any) -> Any:
        return body()

    return callback


def native_plugin(hook: str, body: Callable[[], Any], *, is_async: bool = False, **opts: Any) -> object:
    """A pluggy-native plugin: one ``@hookimpl`` method named ``hook`` that runs ``body()``."""
    if is_async:

        async def impl(self: Any, session_id: Any) -> Any:
            await asyncio.sleep(0)
            return body()

    else:

        def impl(self: Any, session_id: Any) -> Any:
            return body()

    marked = hookimpl(**opts)(impl) if opts else hookimpl(impl)
    return type(f"Native_{hook}", (), {hook: marked})()


def raiser(kind: str, calls: list[str] | None = None, tag: str = "") -> Callable[[], Any]:
    """A body that raises a fresh ``RAISED[kind]`` exception."""

    def body() -> Any:
        if calls is not None:
            calls.append(tag)
        raise RAISED[kind]()

    return body


def tool_plugin(
    name: str,
    handler: Callable[..., Any],
    *,
    check_fn: Callable[[], Any] | None = None,
    is_async: bool = False,
) -> types.SimpleNamespace:
    """A plugin registering one tool ``name`` with ``handler`` (and ``check_fn``)."""

    def register(ctx: Any) -> None:
        ctx.register_tool(
            name, "adversarial", dict(PROBE_SCHEMA), handler, check_fn=check_fn, is_async=is_async
        )

    return types.SimpleNamespace(register=register)


def echo_handler(calls: list[dict[str, Any]]) -> Callable[..., str]:
    """A well-behaved tool handler: records and echoes its arguments."""

    def handler(args: dict[str, Any], **kwargs: Any) -> str:
        calls.append(copy.deepcopy(args))
        return json.dumps({"echo": args}, sort_keys=True)

    return handler


_LEVEL = re.compile(r"\[\s*(warning|error|critical)\s*\]", re.IGNORECASE)


def failure_lines(home: Path, plugin: str, hook: str) -> list[str]:
    """The warning-or-worse lines of ``<home>/logs/agent.log`` that name both ``plugin`` and ``hook``."""
    return [
        line
        for line in agent_log(home).splitlines()
        if _LEVEL.search(line) and _word(plugin).search(line) and _word(hook).search(line)
    ]


def _word(text: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){re.escape(text)}(?![\w-])")


def run_async(make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """``asyncio.run(make())``; an exception escaping the coroutine becomes an ``AssertionError``.

    Needed for test isolation, not for the assertions: when the main task of
    ``asyncio.run`` ends with an exception whose ``repr`` raises, asyncio
    cannot restore its SIGINT handler, and every later ``asyncio.run`` in the
    process fails.  ``KeyboardInterrupt`` passes through unchanged.
    """

    async def main() -> Any:
        try:
            return await make()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            raise EscapedError(f"{type(exc).__name__} escaped from the kernel") from None

    return asyncio.run(main())


class EscapedError(AssertionError):
    """An exception that escaped from the kernel inside :func:`run_async`."""


def schema_names(k: Kernel) -> list[str]:
    return [s["function"]["name"] for s in k.tools.schemas()]


# --------------------------------------------------------------------------
# Raising callbacks: every style, every kind of exception
# --------------------------------------------------------------------------

STYLES = ["hermes-sync", "hermes-async", "native-sync", "native-async"]


def offender(style: str, hook: str, body: Callable[[], Any]) -> object:
    """The hostile plugin object for ``style`` ("hermes"/"native", "sync"/"async")."""
    flavour, mode = style.split("-")
    if flavour == "hermes":
        return hermes_plugin((hook, acting(body, is_async=mode == "async")))
    return native_plugin(hook, body, is_async=mode == "async")


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("kind", list(RAISED))
def test_raising_callback_is_logged_once_disabled_and_skipped(
    make_kernel: Callable[..., Kernel], home: Path, kind: str, style: str
) -> None:
    """A callback raising any non-interrupt exception, even one that cannot be rendered, is contained.

    The plugins on both sides of it still answer, in plugin order; the
    offender is called once, named in ``hook_errors`` (with its exception's
    class) and logged once, however often the hook fires afterwards.
    """
    hook = "on_session_start"
    calls: list[str] = []
    k = make_kernel()
    k.register(hermes_plugin((hook, returning("from-a", calls, "a"))), name="a_good")
    k.register(offender(style, hook, raiser(kind, calls, "m")), name="m_hostile")
    k.register(hermes_plugin((hook, returning("from-z", calls, "z"))), name="z_good")

    assert k.invoke_hook(hook, **SESSION) == ["from-a", "from-z"]
    assert k.invoke_hook(hook, **SESSION) == ["from-a", "from-z"]
    assert calls == ["a", "m", "z", "a", "z"]

    info = k.plugin("m_hostile")
    assert info.enabled
    assert info.disabled_hooks == [hook]
    assert kind in info.hook_errors[hook]
    assert k.plugin("a_good").hook_errors == {}
    assert k.plugin("z_good").hook_errors == {}
    assert len(failure_lines(home, "m_hostile", hook)) == 1, agent_log(home)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync-callback", "async-callback"])
@pytest.mark.parametrize("kind", list(RAISED))
def test_raising_callback_is_contained_under_ainvoke_hook(
    make_kernel: Callable[..., Kernel], kind: str, is_async: bool
) -> None:
    """Inside ``await k.ainvoke_hook(...)`` a callback's own exception, CancelledError included, is contained.

    The awaiting task is not being cancelled, so a ``CancelledError`` the
    callback raises by itself is a plugin failure: the task finishes normally
    with the other plugins' results.
    """
    hook = "on_session_start"
    k = make_kernel()
    k.register(hermes_plugin((hook, returning("from-a"))), name="a_good")
    k.register(hermes_plugin((hook, acting(raiser(kind), is_async=is_async))), name="m_hostile")
    k.register(native_plugin(hook, lambda: "from-z", is_async=True), name="z_good")

    async def host() -> tuple[list[Any], bool]:
        results = await k.ainvoke_hook(hook, **SESSION)
        task = asyncio.current_task()
        assert task is not None
        return results, task.cancelling() > 0

    results, cancelling = run_async(host)
    assert results == ["from-a", "from-z"]
    assert not cancelling
    assert kind in k.plugin("m_hostile").hook_errors[hook]
    assert run_async(host)[0] == ["from-a", "from-z"]


def test_keyboard_interrupt_in_a_worker_thread_is_a_plugin_failure(
    make_kernel: Callable[..., Kernel],
) -> None:
    """``KeyboardInterrupt`` is the user's only in the main thread: raised in another thread, it is contained.

    The thread calling ``k.invoke_hook`` sees no exception and gets the other
    plugins' results; the offender is disabled.
    """
    hook = "on_session_start"
    k = make_kernel()
    k.register(hermes_plugin((hook, returning("from-a"))), name="a_good")

    def interrupt(**kwargs: Any) -> None:
        raise KeyboardInterrupt

    k.register(hermes_plugin((hook, interrupt)), name="m_interrupter")
    k.register(hermes_plugin((hook, returning("from-z"))), name="z_good")

    box: dict[str, Any] = {}

    def host() -> None:
        try:
            box["results"] = k.invoke_hook(hook, **SESSION)
        except BaseException as exc:  # what must not happen
            box["error"] = type(exc).__name__

    worker = threading.Thread(target=host, name="not-main")
    worker.start()
    worker.join(30)
    assert not worker.is_alive()
    assert "error" not in box, box
    assert box["results"] == ["from-a", "from-z"]
    assert "KeyboardInterrupt" in k.plugin("m_interrupter").hook_errors[hook]


@pytest.mark.parametrize("native", [False, True], ids=["hermes", "native"])
def test_keyboard_interrupt_in_the_main_thread_propagates(
    make_kernel: Callable[..., Kernel], native: bool
) -> None:
    """The positive side: ``KeyboardInterrupt`` raised in the main thread ends the call and is no failure."""
    hook = "on_session_start"
    k = make_kernel()

    def interrupt() -> None:
        raise KeyboardInterrupt

    plugin = native_plugin(hook, interrupt) if native else hermes_plugin((hook, acting(interrupt)))
    k.register(plugin, name="interrupter")
    assert threading.current_thread() is threading.main_thread()
    with pytest.raises(KeyboardInterrupt):
        k.invoke_hook(hook, **SESSION)
    with pytest.raises(KeyboardInterrupt):
        k.invoke_hook(hook, **SESSION)
    assert k.plugin("interrupter").hook_errors == {}


@pytest.mark.parametrize("shape", ["async-callback", "sync-returns-coroutine"])
def test_cancelling_the_awaiting_task_propagates(make_kernel: Callable[..., Kernel], shape: str) -> None:
    """Cancelling a task that awaits ``k.ainvoke_hook`` on a slow callback ends the task cancelled.

    A real cancellation belongs to the caller: it is not swallowed and the
    slow callback is not held responsible for it.
    """
    hook = "on_session_start"
    k = make_kernel()
    k.register(hermes_plugin((hook, returning("from-a"))), name="a_good")

    async def host() -> asyncio.Task[list[Any]]:
        started = asyncio.Event()

        async def slow() -> str:
            started.set()
            await asyncio.sleep(10)
            return "too late"

        if shape == "async-callback":

            async def callback(**kwargs: Any) -> str:
                return await slow()

        else:

            def callback(**kwargs: Any) -> Coroutine[Any, Any, str]:  # type: ignore[misc]
                return slow()

        k.register(hermes_plugin((hook, callback)), name="m_slow")
        task = asyncio.create_task(k.ainvoke_hook(hook, **SESSION))
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()
        await asyncio.wait({task}, timeout=5)
        return task

    task = run_async(host)
    assert task.done()
    assert task.cancelled()
    assert k.plugin("m_slow").hook_errors == {}


# --------------------------------------------------------------------------
# Results that fail when awaited or rendered
# --------------------------------------------------------------------------

FAILING_RESULTS: dict[str, Callable[[], Any]] = {
    "coroutine-raising-ValueError": lambda: failing_coroutine(RAISED["ValueError"]),
    "coroutine-raising-StrBomb": lambda: failing_coroutine(StrBomb),
    "coroutine-raising-Boom": lambda: failing_coroutine(RAISED["Boom"]),
    "coroutine-raising-CancelledError": lambda: failing_coroutine(asyncio.CancelledError),
    "awaitable-raising-RuntimeError": lambda: FailingAwaitable(lambda: RuntimeError("no await")),
    "awaitable-raising-BaseStrBomb": lambda: FailingAwaitable(BaseStrBomb),
}


@pytest.mark.parametrize("host", ["invoke", "ainvoke"])
@pytest.mark.parametrize("result", list(FAILING_RESULTS))
def test_sync_callback_returning_a_failing_awaitable_is_disabled(
    make_kernel: Callable[..., Kernel], home: Path, result: str, host: str
) -> None:
    """A sync callback whose return value fails when awaited is a failing callback.

    Coroutines and other awaitables returned by sync callbacks are awaited;
    when that fails the callback is disabled and the others' results stand.
    """
    hook = "on_session_start"
    calls: list[str] = []
    k = make_kernel()
    k.register(hermes_plugin((hook, returning("from-a"))), name="a_good")

    def hostile(**kwargs: Any) -> Any:
        calls.append("m")
        return FAILING_RESULTS[result]()

    k.register(hermes_plugin((hook, hostile)), name="m_hostile")
    k.register(hermes_plugin((hook, returning("from-z"))), name="z_good")

    def call() -> list[Any]:
        if host == "invoke":
            return k.invoke_hook(hook, **SESSION)
        return run_async(lambda: k.ainvoke_hook(hook, **SESSION))

    assert call() == ["from-a", "from-z"]
    assert call() == ["from-a", "from-z"]
    assert calls == ["m"]
    assert list(k.plugin("m_hostile").hook_errors) == [hook]
    assert len(failure_lines(home, "m_hostile", hook)) == 1, agent_log(home)


UNRENDERABLE_CONTEXT: dict[str, Callable[[], Any]] = {
    "context-dict": lambda: {"context": Unprintable()},
}


@pytest.mark.parametrize("host", ["sync", "async"])
@pytest.mark.parametrize("value", list(UNRENDERABLE_CONTEXT))
def test_pre_llm_call_result_that_cannot_be_rendered_is_disabled(
    make_kernel: Callable[..., Kernel], value: str, host: str
) -> None:
    """A ``pre_llm_call`` answer whose text cannot be produced contributes nothing and is disabled.

    Both a bare object whose ``__str__`` raises and ``{"context": obj}`` with
    such an object count as failing callbacks (the containment spec names
    both): the offender is named in ``hook_errors``, and the other plugins'
    context pieces are merged as usual, in plugin order.
    """
    hook = "pre_llm_call"
    k = make_kernel()
    k.register(hermes_plugin((hook, returning("first piece"))), name="a_good")
    k.register(hermes_plugin((hook, acting(UNRENDERABLE_CONTEXT[value]))), name="m_hostile")
    k.register(hermes_plugin((hook, returning({"context": "second piece"}))), name="z_good")

    def merged() -> str:
        if host == "sync":
            return k.pre_llm_context(**LLM_CALL)
        return run_async(lambda: k.apre_llm_context(**LLM_CALL))

    assert merged() == "first piece\n\nsecond piece"
    assert list(k.plugin("m_hostile").hook_errors) == [hook]
    assert merged() == "first piece\n\nsecond piece"
    assert k.plugin("a_good").hook_errors == {} and k.plugin("z_good").hook_errors == {}


@pytest.mark.parametrize("host", ["sync", "async"])
def test_pre_llm_call_result_of_another_type_is_ignored_unread(
    make_kernel: Callable[..., Kernel], host: str
) -> None:
    """Only a string or ``{"context": ...}`` is context, as in Hermes: any other object is left out
    without being rendered, so its raising ``__str__`` never runs and nobody is disabled.  A
    ``str`` subclass is read as the text it holds, without calling any of its methods."""
    hook = "pre_llm_call"
    k = make_kernel()
    k.register(hermes_plugin((hook, returning("first piece"))), name="a_good")
    k.register(hermes_plugin((hook, acting(Unprintable))), name="m_other_type")
    k.register(hermes_plugin((hook, acting(lambda: UnprintableStr("second")))), name="s_subclass")
    k.register(hermes_plugin((hook, acting(lambda: {"context": UnprintableStr("third")}))), name="t_dict")

    def merged() -> str:
        if host == "sync":
            return k.pre_llm_context(**LLM_CALL)
        return run_async(lambda: k.apre_llm_context(**LLM_CALL))

    assert merged() == "first piece\n\nsecond\n\nthird"
    assert merged() == "first piece\n\nsecond\n\nthird"
    for name in ("m_other_type", "s_subclass", "t_dict"):
        assert k.plugin(name).hook_errors == {}


# --------------------------------------------------------------------------
# pluggy wrappers
# --------------------------------------------------------------------------


class WrapperFailsBeforeYield:
    @hookimpl(wrapper=True)
    def on_session_start(self, session_id: str) -> Iterator[None]:
        raise Boom("the wrapper fails before the call")
        yield  # makes this a generator, as pluggy requires


class WrapperFailsAfterYield:
    @hookimpl(wrapper=True)
    def on_session_start(self, session_id: str) -> Iterator[None]:
        yield
        raise StrBomb()


class OldStyleWrapperFails:
    @hookimpl(hookwrapper=True)
    def on_session_start(self, session_id: str) -> Iterator[None]:
        yield
        raise BaseStrBomb()


@pytest.mark.parametrize(
    "wrapper",
    [WrapperFailsBeforeYield, WrapperFailsAfterYield, OldStyleWrapperFails],
    ids=["wrapper-before-yield", "wrapper-after-yield", "hookwrapper-after-yield"],
)
def test_failing_pluggy_wrapper_is_disabled_and_the_call_goes_on(
    make_kernel: Callable[..., Kernel], wrapper: type
) -> None:
    """A pluggy wrapper that raises is a failing callback like any other.

    The plain callbacks still answer, in plugin order, and the wrapper's
    plugin is named in ``hook_errors``.
    """
    hook = "on_session_start"
    k = make_kernel()
    k.register(hermes_plugin((hook, returning("from-a"))), name="a_good")
    k.register(wrapper(), name="m_wrapper")
    k.register(native_plugin(hook, lambda: "from-z"), name="z_good")

    assert k.invoke_hook(hook, **SESSION) == ["from-a", "from-z"]
    assert hook in k.plugin("m_wrapper").hook_errors
    assert k.invoke_hook(hook, **SESSION) == ["from-a", "from-z"]


# --------------------------------------------------------------------------
# pre_tool_call: fail closed, isolated arguments
# --------------------------------------------------------------------------


def guarded_kernel(
    make_kernel: Callable[..., Kernel], guard: object
) -> tuple[Kernel, list[dict[str, Any]], list[dict[str, Any]]]:
    """A kernel with tool ``probe``, the hostile guard ``m_guard`` and a well-behaved ``z_guard``.

    Returns the kernel, the handler's calls and what ``z_guard`` saw.
    """
    handled: list[dict[str, Any]] = []
    seen_by_z: list[dict[str, Any]] = []
    k = make_kernel()
    k.register(tool_plugin("probe", echo_handler(handled)), name="toolbox")
    k.register(guard, name="m_guard")

    def z_guard(tool_name: str, args: dict[str, Any]) -> None:
        seen_by_z.append(copy.deepcopy(args))

    k.register(hermes_plugin(("pre_tool_call", z_guard)), name="z_guard")
    return k, handled, seen_by_z


def assert_blocked_once_then_open(
    k: Kernel, home: Path, handled: list[dict[str, Any]], seen_by_z: list[dict[str, Any]]
) -> None:
    """The first call is blocked naming ``m_guard``; the guard is disabled; the second call runs."""
    blocked = k.tools.dispatch("probe", {"q": 1}, session_id="s-1")
    assert type(blocked) is str
    error = run_json(blocked)
    assert set(error) >= {"error"}, error
    assert "m_guard" in error["error"]
    assert handled == []
    info = k.plugin("m_guard")
    assert info.disabled_hooks == ["pre_tool_call"]
    logged = failure_lines(home, "m_guard", "pre_tool_call")
    assert logged, agent_log(home)

    passed = k.tools.dispatch("probe", {"q": 2}, session_id="s-1")
    assert run_json(passed) == {"echo": {"q": 2}}
    assert handled == [{"q": 2}]
    # The other guard ran on both calls, and the failure was not logged again.
    assert seen_by_z == [{"q": 1}, {"q": 2}]
    assert failure_lines(home, "m_guard", "pre_tool_call") == logged
    assert k.plugin("z_guard").hook_errors == {}


@pytest.mark.parametrize("native", [False, True], ids=["hermes", "native"])
@pytest.mark.parametrize("kind", HOSTILE_RAISED)
def test_raising_guard_blocks_the_call_then_is_disabled(
    make_kernel: Callable[..., Kernel], home: Path, kind: str, native: bool
) -> None:
    """``pre_tool_call`` fails closed: a guard raising anything but an interrupt blocks that one call."""
    guard = (
        native_plugin("pre_tool_call", raiser(kind))
        if native
        else hermes_plugin(("pre_tool_call", acting(raiser(kind))))
    )
    k, handled, seen_by_z = guarded_kernel(make_kernel, guard)
    assert_blocked_once_then_open(k, home, handled, seen_by_z)
    assert kind in k.plugin("m_guard").hook_errors["pre_tool_call"]


class Uncopyable:
    """A value that cannot be copied or pickled (``copy.deepcopy`` raises)."""

    def __deepcopy__(self, memo: Any) -> Any:
        raise TypeError("Uncopyable cannot be deep-copied")

    def __copy__(self) -> Any:
        raise TypeError("Uncopyable cannot be copied")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("Uncopyable cannot be pickled")


class EvilAction:
    """A decision ``action`` value that cannot be compared, hashed or shown."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("EvilAction.__eq__ refuses")

    def __ne__(self, other: object) -> bool:
        raise RuntimeError("EvilAction.__ne__ refuses")

    def __hash__(self) -> int:
        raise RuntimeError("EvilAction.__hash__ refuses")

    def __repr__(self) -> str:
        raise RuntimeError("EvilAction.__repr__ refuses")

    __str__ = __repr__


UNREADABLE_DECISIONS: dict[str, Callable[[], Any]] = {
    "dict-subclass-raising-on-read": lambda: HostileDecision(action="modify", args={"q": 99}),
    "action-that-cannot-be-compared": lambda: {"action": EvilAction(), "message": "x"},
    "modify-carrying-a-lock": lambda: {"action": "modify", "args": {"x": threading.Lock()}},
    "modify-carrying-an-uncopyable": lambda: {"action": "modify", "args": {"x": Uncopyable()}},
    "coroutine-raising-StrBomb": lambda: failing_coroutine(StrBomb),
    "awaitable-raising-Boom": lambda: FailingAwaitable(RAISED["Boom"]),
}


@pytest.mark.parametrize("decision", list(UNREADABLE_DECISIONS))
def test_unreadable_decision_blocks_the_call_then_is_disabled(
    make_kernel: Callable[..., Kernel], home: Path, decision: str
) -> None:
    """A guard whose decision cannot be read, compared, copied or awaited has failed: the call is blocked."""
    guard = hermes_plugin(("pre_tool_call", acting(UNREADABLE_DECISIONS[decision])))
    k, handled, seen_by_z = guarded_kernel(make_kernel, guard)
    assert_blocked_once_then_open(k, home, handled, seen_by_z)


def test_guards_change_the_arguments_only_by_decisions(
    make_kernel: Callable[..., Kernel],
) -> None:
    """Each ``pre_tool_call`` callback gets its own copy of the arguments; changing it in place is
    that callback's decision (see tests/adversarial/test_inplace_edits.py).

    ``a_mutator`` (first in order) rewrites, deep-mutates and then clears the
    ``args`` it was given: an edit to ``{}``, which ``b_guard`` and
    ``c_modifier`` see; the caller's dict is untouched, and the handler runs
    with the edited arguments plus what ``c_modifier``'s ``modify`` added.
    """
    original = {"expression": "2+2", "opts": {"deep": [1, 2]}}
    given = copy.deepcopy(original)
    handled: list[dict[str, Any]] = []
    seen: dict[str, list[dict[str, Any]]] = {"a": [], "b": [], "c": []}
    k = make_kernel()
    k.register(tool_plugin("calc_probe", echo_handler(handled)), name="toolbox")

    def mutate(args: dict[str, Any], **kwargs: Any) -> None:
        seen["a"].append(copy.deepcopy(args))
        args["opts"]["deep"].append("mutated")
        args["expression"] = "9*9"
        args["injected"] = True
        args.clear()

    class Guard:
        @hookimpl
        def pre_tool_call(self, tool_name: str, args: dict[str, Any]) -> None:
            seen["b"].append(copy.deepcopy(args))

    def modify(args: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        seen["c"].append(copy.deepcopy(args))
        return {"action": "modify", "args": {"extra": "from-c"}}

    k.register(hermes_plugin(("pre_tool_call", mutate)), name="a_mutator")
    k.register(Guard(), name="b_guard")
    k.register(hermes_plugin(("pre_tool_call", modify)), name="c_modifier")

    result = run_json(k.tools.dispatch("calc_probe", given, session_id="s-1"))
    assert seen == {"a": [original], "b": [{}], "c": [{}]}
    assert handled == [{"extra": "from-c"}]
    assert result == {"echo": {"extra": "from-c"}}
    assert given == original
    for name in ("a_mutator", "b_guard", "c_modifier"):
        assert k.plugin(name).hook_errors == {}


# --------------------------------------------------------------------------
# plugins.hook_timeout
# --------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["invoke", "ainvoke"])
@pytest.mark.parametrize("shape", ["sync-returns-coroutine", "async-callback"])
def test_hook_timeout_bounds_a_late_callback(
    make_kernel: Callable[..., Kernel], host: str, shape: str
) -> None:
    """``plugins.hook_timeout`` bounds each callback, including a coroutine a sync callback returns.

    The late answer is not used, the call returns without waiting for it,
    and the late callback is disabled; the prompt plugin's answer stands.
    """
    hook = "on_session_start"
    calls: list[str] = []
    k = make_kernel(config={"plugins": {"hook_timeout": 0.5}})

    async def sleeper() -> str:
        await asyncio.sleep(5)
        calls.append("late finished")
        return "late answer"

    if shape == "sync-returns-coroutine":

        def late(**kwargs: Any) -> Any:
            calls.append("late")
            return sleeper()

    else:

        async def late(**kwargs: Any) -> Any:  # type: ignore[misc]
            calls.append("late")
            return await sleeper()

    k.register(hermes_plugin((hook, late)), name="a_late")
    k.register(hermes_plugin((hook, returning("prompt answer"))), name="b_prompt")

    def call() -> list[Any]:
        if host == "invoke":
            return k.invoke_hook(hook, **SESSION)
        return run_async(lambda: k.ainvoke_hook(hook, **SESSION))

    start = time.monotonic()
    first = call()
    elapsed = time.monotonic() - start
    assert first == ["prompt answer"]
    assert "late answer" not in first
    assert elapsed < 4.0, elapsed  # deliberately loose: the callback sleeps 5 s
    assert hook in k.plugin("a_late").hook_errors
    assert call() == ["prompt answer"]
    assert calls.count("late") == 1


# --------------------------------------------------------------------------
# Tool handlers and check_fn
# --------------------------------------------------------------------------


def raising_handler(exc: Callable[[], BaseException]) -> Callable[..., Any]:
    def handler(args: dict[str, Any], **kwargs: Any) -> Any:
        raise exc()

    return handler


def returning_handler(make: Callable[[], Any]) -> Callable[..., Any]:
    def handler(args: dict[str, Any], **kwargs: Any) -> Any:
        return make()

    return handler


async def async_boom_handler(args: dict[str, Any], **kwargs: Any) -> Any:
    await asyncio.sleep(0)
    raise Boom("async handler")


# name -> (handler, whether the result must be an error object)
HOSTILE_HANDLERS: dict[str, tuple[Callable[..., Any], bool]] = {
    "raises-exception-with-raising-str": (raising_handler(StrBomb), True),
    "raises-BaseException-subclass": (raising_handler(RAISED["Boom"]), True),
    "raises-BaseException-with-raising-str": (raising_handler(BaseStrBomb), True),
    "raises-SystemExit": (raising_handler(RAISED["SystemExit"]), True),
    "raises-GeneratorExit": (raising_handler(GeneratorExit), True),
    "raises-CancelledError": (raising_handler(asyncio.CancelledError), True),
    "async-handler-raises-BaseException": (async_boom_handler, True),
    "returns-object-with-raising-str-and-repr": (returning_handler(Unprintable), True),
    "returns-dict-holding-such-an-object": (returning_handler(lambda: {"x": Unprintable()}), True),
    "returns-coroutine-raising-StrBomb": (returning_handler(lambda: failing_coroutine(StrBomb)), True),
    "returns-coroutine-raising-Boom": (returning_handler(lambda: failing_coroutine(RAISED["Boom"])), True),
    "returns-failing-awaitable": (returning_handler(lambda: FailingAwaitable(BaseStrBomb)), True),
    "returns-non-json-object": (returning_handler(lambda: {1, 2, 3}), True),
    "returns-str-subclass-with-raising-str": (returning_handler(lambda: UnprintableStr('{"ok": 1}')), False),
}


@pytest.mark.parametrize("behaviour", list(HOSTILE_HANDLERS))
def test_dispatch_of_a_hostile_handler_returns_a_json_error(
    make_kernel: Callable[..., Kernel], behaviour: str
) -> None:
    """Whatever a handler raises or returns, ``k.tools.dispatch`` returns a plain JSON string.

    An error object for every failure; ``post_tool_call`` observers see the
    call as an error; the host and the other plugins' tools carry on.
    """
    handler, is_error = HOSTILE_HANDLERS[behaviour]
    observed: list[tuple[str, str]] = []
    steady_calls: list[dict[str, Any]] = []
    k = make_kernel()
    k.register(tool_plugin("hostile_tool", handler), name="hostile")
    k.register(tool_plugin("steady_tool", echo_handler(steady_calls)), name="steady")

    def observe(tool_name: str, status: str, result: str) -> None:
        assert type(result) is str
        observed.append((tool_name, status))

    k.register(hermes_plugin(("post_tool_call", observe)), name="observer")

    for _ in range(2):
        out = k.tools.dispatch("hostile_tool", {"q": 1}, session_id="s-1")
        assert type(out) is str
        parsed = json.loads(out)
        if is_error:
            assert isinstance(parsed, dict) and "error" in parsed, parsed
            assert "hostile_tool" in parsed["error"]
    if is_error:
        # The first call ran the handler and failed; whether the kernel then keeps
        # running the handler or holds the tool back, no call is reported as a success.
        assert observed[:1] == [("hostile_tool", "error")]
        assert all(status == "error" for _, status in observed), observed
    assert k.plugin("observer").hook_errors == {}

    assert run_json(k.tools.dispatch("steady_tool", {"q": 7})) == {"echo": {"q": 7}}
    assert steady_calls == [{"q": 7}]
    assert "steady_tool" in schema_names(k)


def raising_check(exc: Callable[[], BaseException]) -> Callable[[], Any]:
    def check() -> Any:
        raise exc()

    return check


HOSTILE_CHECKS: dict[str, Callable[[], Any]] = {
    "raises-ValueError": raising_check(RAISED["ValueError"]),
    "raises-exception-with-raising-str": raising_check(StrBomb),
    "raises-BaseException-subclass": raising_check(RAISED["Boom"]),
    "raises-BaseException-with-raising-str": raising_check(BaseStrBomb),
    "raises-SystemExit": raising_check(RAISED["SystemExit"]),
    "raises-GeneratorExit": raising_check(GeneratorExit),
    "raises-CancelledError": raising_check(asyncio.CancelledError),
    "result-bool-raises-Exception": lambda: BoolBomb(lambda: ValueError("no truth")),
    "result-bool-raises-BaseException": lambda: BoolBomb(BaseStrBomb),
}


@pytest.mark.parametrize("check", list(HOSTILE_CHECKS))
def test_hostile_check_fn_makes_the_tool_unavailable(make_kernel: Callable[..., Kernel], check: str) -> None:
    """A ``check_fn`` that raises, or whose answer cannot be tested for truth, hides its tool.

    ``k.tools.schemas()`` never raises and still lists the other plugins'
    tools; dispatching the hidden tool returns a JSON error without running
    its handler.
    """
    gated_calls: list[dict[str, Any]] = []
    steady_calls: list[dict[str, Any]] = []
    k = make_kernel()
    k.register(
        tool_plugin("gated_tool", echo_handler(gated_calls), check_fn=HOSTILE_CHECKS[check]), name="gated"
    )
    k.register(tool_plugin("steady_tool", echo_handler(steady_calls)), name="steady")

    for _ in range(2):
        names = schema_names(k)
        assert "gated_tool" not in names
        assert "steady_tool" in names
        out = k.tools.dispatch("gated_tool", {"q": 1})
        assert type(out) is str
        assert "error" in run_json(out)
    assert gated_calls == []
    assert run_json(k.tools.dispatch("steady_tool", {"q": 2})) == {"echo": {"q": 2}}


# --------------------------------------------------------------------------
# The CLI names the offenders
# --------------------------------------------------------------------------

HOSTILE_SLOT_PLUGIN = """
class BaseStrBomb(BaseException):
    def __str__(self):
        raise RuntimeError("no str")
    __repr__ = __str__

def register(ctx):
    def offer(register):
        raise BaseStrBomb()
    ctx.register_hook("register_memory_providers", offer)
"""

NATIVE_SLOT_PLUGIN = """
from kernel import hookimpl

@hookimpl
def register_image_gen_providers(register):
    raise GeneratorExit
"""

CALM_SLOT_PLUGIN = """
from pathlib import Path

def register(ctx):
    def offer(register):
        (ctx.home / "calm-ran").write_text("yes", encoding="utf-8")
    ctx.register_hook("register_memory_providers", offer)
"""


def test_plugins_list_names_the_offenders(home: Path) -> None:
    """``hermes-kernel plugins list`` survives hostile load-time callbacks and names them.

    Two plugins' provider-slot callbacks (fired while the kernel loads) raise
    a BaseException with an unrenderable message and ``GeneratorExit``; the
    listing still succeeds, in text and as JSON (the second run from the
    saved state), the offenders stay enabled with their disabled hook named,
    and the calm plugin's callback, called after theirs, still ran.
    """
    plugins = home / "plugins"
    write_plugin(plugins, "hostile_slots", HOSTILE_SLOT_PLUGIN)
    write_plugin(plugins, "native_slots", NATIVE_SLOT_PLUGIN)
    write_plugin(plugins, "zz_calm", CALM_SLOT_PLUGIN)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, *args], env=cli_env(home), capture_output=True, text=True, timeout=120, check=False
        )

    text = cli("plugins", "list", "--refresh")
    assert text.returncode == 0, text.stderr
    assert (home / "calm-ran").is_file()
    lines = text.stdout.splitlines()
    for name, hook in (
        ("hostile_slots", "register_memory_providers"),
        ("native_slots", "register_image_gen_providers"),
    ):
        row = next(i for i, line in enumerate(lines) if line.split() and line.split()[0] == name)
        notes = []
        for line in lines[row + 1 :]:
            if not line.startswith(" "):
                break
            notes.append(line)
        assert any(hook in note and "disabled" in note for note in notes), text.stdout

    as_json = cli("plugins", "list", "--refresh", "--json")
    assert as_json.returncode == 0, as_json.stderr
    by_name = {p["name"]: p for p in json.loads(as_json.stdout)}
    assert by_name["hostile_slots"]["enabled"] is True
    assert "register_memory_providers" in by_name["hostile_slots"]["hook_errors"]
    assert "BaseStrBomb" in by_name["hostile_slots"]["hook_errors"]["register_memory_providers"]
    assert by_name["native_slots"]["enabled"] is True
    assert "GeneratorExit" in by_name["native_slots"]["hook_errors"]["register_image_gen_providers"]
    assert by_name["zz_calm"]["hook_errors"] == {}


# --------------------------------------------------------------------------
# A whole agent turn with a hostile plugin
# --------------------------------------------------------------------------


def test_a_hostile_plugin_does_not_break_an_agent_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin failing differently on every hook of a turn cannot stop it.

    With the bundled calculator and the ``scripted`` model, a turn that
    calls a tool still ends with the model's reply, the tool's real result,
    and the well-behaved plugin's context and reply rewrite; every hostile
    callback is named in ``hook_errors``; the next turn works as well.
    """
    from kernel.agent import AgentSession
    from kernel.testing import TestKernel

    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(REPO / "extensions"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    script = [
        {
            "text": "Let me compute 2**16.",
            "tool_calls": [{"name": "calculate", "arguments": {"expression": "2**16"}}],
        },
        "2**16 = 65536.",
        "Still 65536.",
    ]
    hostile: dict[str, Callable[..., Any]] = {
        "on_session_start": acting(raiser("BaseStrBomb")),
        "pre_llm_call": returning({"context": Unprintable()}),
        "pre_api_request": acting(raiser("SystemExit")),
        "post_api_request": acting(lambda: failing_coroutine(StrBomb)),
        "post_tool_call": acting(raiser("CancelledError")),
        "transform_tool_result": acting(lambda: FailingAwaitable(RAISED["Boom"])),
        "post_llm_call": acting(raiser("GeneratorExit")),
        "transform_llm_output": acting(raiser("Boom")),
        "on_session_end": acting(raiser("StrBomb")),
    }
    with TestKernel(tmp_path / "hermes", script=script, record=False) as tk:
        k = tk.kernel
        assert "calculate" in schema_names(k)
        k.register(hermes_plugin(*hostile.items()), name="aa_hostile")
        k.register(
            hermes_plugin(
                ("pre_llm_call", returning("GOOD CONTEXT")),
                ("transform_llm_output", lambda response_text, **kw: "GOOD: " + response_text),
            ),
            name="zz_good",
        )
        session = AgentSession(k)
        first = session.run("What is 2 to the power of 16?")
        assert first.reply == "GOOD: 2**16 = 65536."
        assert first.context == "GOOD CONTEXT"
        assert [c.name for c in first.tool_calls] == ["calculate"]
        assert json.loads(first.tool_calls[0].result)["result"] == 65536
        second = session.run("And once more?")
        assert second.reply == "GOOD: Still 65536."
        session.close()

        assert set(k.plugin("aa_hostile").hook_errors) == set(hostile)
        assert k.plugin("zz_good").hook_errors == {}


# --------------------------------------------------------------------------
# Property: any mix of behaviours on any hook
# --------------------------------------------------------------------------

PROPERTY_HOOKS = (
    "post_tool_call",
    "pre_llm_call",
    "on_session_start",
    "transform_tool_result",
    "pre_tool_call",
)
NAMES = ("alpha", "Bravo", "charlie", "Delta", "echo")
WELL_BEHAVED = frozenset({"value", "none"})
COMMON_KINDS = ("value", "none", "raise", "failing_coroutine", "failing_awaitable")
EXTRA_KINDS = {
    # A bare unrenderable object is left to the dedicated test above (see its docstring).
    "pre_llm_call": ("unprintable_context",),
    "pre_tool_call": ("hostile_decision", "lock_in_args"),
}


@dataclass(frozen=True)
class Behaviour:
    """What one plugin's callback does: ``kind`` (with ``exc`` for raising kinds), its style."""

    kind: str
    exc: str = "ValueError"
    native: bool = False
    is_async: bool = False

    @property
    def well_behaved(self) -> bool:
        return self.kind in WELL_BEHAVED

    def body(self, hook: str, plugin: str, calls: list[str]) -> Callable[[], Any]:
        def run() -> Any:
            calls.append(plugin)
            kind = self.kind
            if kind == "value":
                return good_value(hook, plugin)
            if kind == "none":
                return None
            if kind == "raise":
                raise RAISED[self.exc]()
            if kind == "failing_coroutine":
                return failing_coroutine(RAISED[self.exc])
            if kind == "failing_awaitable":
                return FailingAwaitable(RAISED[self.exc])
            if kind == "unprintable_context":
                return {"context": Unprintable()}
            if kind == "hostile_decision":
                return HostileDecision(action="modify", args={"q": 99})
            if kind == "lock_in_args":
                return {"action": "modify", "args": {"lock": threading.Lock()}}
            raise AssertionError(kind)  # pragma: no cover

        return run

    def plugin(self, hook: str, plugin: str, calls: list[str]) -> object:
        body = self.body(hook, plugin, calls)
        if self.native:
            return native_plugin(hook, body, is_async=self.is_async)
        return hermes_plugin((hook, acting(body, is_async=self.is_async)))


def good_value(hook: str, plugin: str) -> Any:
    """What a well-behaved ``plugin`` answers on ``hook``."""
    if hook == "pre_tool_call":
        return {"action": "modify", "args": {f"by_{plugin}": True, "last": plugin}}
    return f"{hook} from {plugin}"


@st.composite
def behaviours(draw: st.DrawFn, hook: str) -> Behaviour:
    kind = draw(st.sampled_from(COMMON_KINDS + EXTRA_KINDS.get(hook, ())))
    exc = (
        draw(st.sampled_from(list(RAISED)))
        if kind in ("raise", "failing_coroutine", "failing_awaitable")
        else "ValueError"
    )
    # An async callback is an ``async def`` doing the same; only for plain answers and raising.
    is_async = draw(st.booleans()) if kind in ("value", "none", "raise") else False
    return Behaviour(kind=kind, exc=exc, native=draw(st.booleans()), is_async=is_async)


@dataclass(frozen=True)
class Scenario:
    hook: str
    registration_order: tuple[str, ...]
    behaviours: tuple[tuple[str, Behaviour], ...]
    via_async: bool


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    hook = draw(st.sampled_from(PROPERTY_HOOKS))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=2, max_size=4, unique=True))
    order = tuple(draw(st.permutations(names)))
    assigned = tuple((name, draw(behaviours(hook))) for name in sorted(names, key=plugin_order))
    via_async = draw(st.booleans()) if hook != "pre_tool_call" else False
    return Scenario(hook, order, assigned, via_async)


def must_not_raise(call: Callable[[], Any]) -> Any:
    """``call()``; any exception escaping the host call fails the property with its class name."""
    try:
        return call()
    except EscapedError as exc:
        raise AssertionError(f"the host call raised: {exc}") from None
    except BaseException as exc:
        raise AssertionError(f"the host call raised {type(exc).__name__}") from None


@settings(
    max_examples=30,
    deadline=None,
    database=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios())
def test_property_hostile_plugins_never_break_a_hook_call(bundled: Path, scenario: Scenario) -> None:
    """For any mix of 2-4 plugins, each well-behaved or hostile, on any of five hooks:

    the host call never raises; its result holds exactly the well-behaved
    plugins' values in alphabetical plugin order (for ``pre_tool_call``: the
    call is blocked while a hostile guard is live, then runs with the
    well-behaved guards' modifications merged in order); every hostile plugin
    is named in ``hook_errors``, logged once and never called again, and no
    well-behaved plugin is.
    """
    hook = scenario.hook
    plan = dict(scenario.behaviours)
    in_order = [name for name, _ in scenario.behaviours]
    hostile = {name for name, b in plan.items() if not b.well_behaved}
    valued = [name for name in in_order if plan[name].kind == "value"]
    calls: list[str] = []

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        k = Kernel(home=home)
        try:
            k.load()
            handled: list[dict[str, Any]] = []
            if hook == "pre_tool_call":
                k.register(tool_plugin("probe", echo_handler(handled)), name="toolbox")
            for name in scenario.registration_order:
                k.register(plan[name].plugin(hook, name, calls), name=name)

            def host_call() -> Any:
                if hook == "pre_tool_call":
                    return k.tools.dispatch("probe", {"q": 1}, session_id="s-1")
                if hook == "pre_llm_call":
                    if scenario.via_async:
                        return run_async(lambda: k.apre_llm_context(**LLM_CALL))
                    return k.pre_llm_context(**LLM_CALL)
                if scenario.via_async:
                    return run_async(lambda: k.ainvoke_hook(hook, **HOOK_KWARGS[hook]))
                return k.invoke_hook(hook, **HOOK_KWARGS[hook])

            first = must_not_raise(host_call)
            logged = {name: failure_lines(home, name, hook) for name in hostile}
            second = must_not_raise(host_call)

            if hook == "pre_tool_call":
                merged: dict[str, Any] = {"q": 1}
                for name in valued:
                    merged.update(good_value(hook, name)["args"])
                assert type(first) is str and type(second) is str
                if hostile:
                    error = run_json(first)
                    assert "error" in error, error
                    assert any(name in error["error"] for name in hostile), error
                else:
                    assert run_json(first) == {"echo": merged}
                assert run_json(second) == {"echo": merged}
                assert handled == ([merged] if hostile else [merged, merged])
            elif hook == "pre_llm_call":
                expected = "\n\n".join(good_value(hook, name) for name in valued)
                assert first == expected
                assert second == expected
            else:
                expected_list = [good_value(hook, name) for name in valued]
                assert first == expected_list
                assert second == expected_list

            for name in in_order:
                errors = k.plugin(name).hook_errors
                if name in hostile:
                    assert list(errors) == [hook], (name, plan[name], errors)
                    assert calls.count(name) == 1, (name, plan[name])
                    assert logged[name], (name, agent_log(home))
                    assert failure_lines(home, name, hook) == logged[name]
                    if hook != "pre_tool_call":
                        assert len(logged[name]) == 1, logged[name]
                else:
                    assert errors == {}, (name, plan[name], errors)
                    assert calls.count(name) == 2, (name, plan[name])
        finally:
            k.shutdown()
