"""The one hook engine (kernel/hooks.py) through real kernels: the async bridge, the async path,
monitors, spec registration and the registry (k.pm) seen from a host.

The pluggy-conformance module compares plugin code against plain pluggy; the
adversarial module throws hostile callbacks.  This one covers what only the
kernel has: where coroutines run, what a monitor that fails does, how
``ctx.add_hookspecs`` and ``k.pm.add_hookspecs`` differ, and the one-registry
view of every plugin style.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pluggy
import pytest

from kernel import Kernel, PluginError, hookimpl, hookspec

SESSION = {"session_id": "s-1", "model": "m-1", "platform": "cli"}
REQUEST = contextvars.ContextVar("REQUEST", default="unset")


def hermes(**hooks: Callable[..., Any]) -> types.SimpleNamespace:
    """A runtime Hermes-style plugin object registering ``hooks`` (name -> callback)."""

    def register(ctx: Any) -> None:
        for name, fn in hooks.items():
            ctx.register_hook(name, fn)

    return types.SimpleNamespace(register=register)


# --------------------------------------------------------------------------
# Where coroutines run
# --------------------------------------------------------------------------


def test_a_callbacks_loop_bound_objects_survive_from_call_to_call(make_kernel: Callable[..., Kernel]) -> None:
    """An async callback that keeps an ``asyncio.Lock`` (bound to the loop of its first call) works
    on every later sync call, from the main thread, from another thread and from inside a running
    loop: every sync call runs it on the kernel's one event loop."""
    state: dict[str, Any] = {}
    loops: list[Any] = []

    async def guarded(**kwargs: Any) -> str:
        lock = state.setdefault("lock", asyncio.Lock())
        async with lock:
            loops.append(asyncio.get_running_loop())
            return "ok"

    k = make_kernel()
    k.register(hermes(on_session_start=guarded), name="locker")
    assert k.invoke_hook("on_session_start", **SESSION) == ["ok"]

    box: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: box.update(r=k.invoke_hook("on_session_start", **SESSION)))
    worker.start()
    worker.join(10)
    assert box["r"] == ["ok"]

    async def inside_a_running_loop() -> list[Any]:
        return k.invoke_hook("on_session_start", **SESSION)  # a sync call from async code

    assert asyncio.run(inside_a_running_loop()) == ["ok"]
    assert len(loops) == 3 and len(set(map(id, loops))) == 1
    assert k.plugin("locker").hook_errors == {}


def test_a_coroutine_sees_the_callers_context_variables(make_kernel: Callable[..., Kernel]) -> None:
    """The kernel's loop runs a callback's coroutine in a copy of the caller's context."""

    async def reads(**kwargs: Any) -> str:
        return REQUEST.get()

    k = make_kernel()
    k.register(hermes(on_session_start=reads), name="reader")
    token = REQUEST.set("request-42")
    try:
        assert k.invoke_hook("on_session_start", **SESSION) == ["request-42"]
    finally:
        REQUEST.reset(token)


def test_a_sync_hook_call_from_a_coroutine_on_the_kernel_loop_does_not_deadlock(
    make_kernel: Callable[..., Kernel],
) -> None:
    """An async callback (running on the kernel's loop) that fires another hook synchronously,
    whose own callback is async too, gets its answer instead of waiting for itself."""
    k = make_kernel()

    async def inner(**kwargs: Any) -> str:
        return "inner"

    async def outer(**kwargs: Any) -> str:
        nested = k.invoke_hook("on_session_end", session_id="s", completed=True, interrupted=False)
        return f"outer+{nested[0]}"

    k.register(hermes(on_session_start=outer, on_session_end=inner), name="nesting")
    assert k.invoke_hook("on_session_start", **SESSION) == ["outer+inner"]


def test_ainvoke_runs_sync_callbacks_off_the_loop_and_async_ones_on_it(
    make_kernel: Callable[..., Kernel],
) -> None:
    """Under ``ainvoke_hook`` a blocking sync callback runs on a worker thread (the loop's other
    tasks keep running meanwhile); an async callback runs on the caller's loop."""
    seen: dict[str, Any] = {}

    def blocking(**kwargs: Any) -> str:
        seen["sync_thread"] = threading.get_ident()
        release.wait(5)
        return "sync"

    async def on_loop(**kwargs: Any) -> str:
        seen["async_loop"] = asyncio.get_running_loop()
        return "async"

    k = make_kernel()
    k.register(hermes(on_session_start=blocking), name="a_blocking")
    k.register(hermes(on_session_start=on_loop), name="b_async")
    release = threading.Event()

    async def main() -> list[Any]:
        seen["loop"] = asyncio.get_running_loop()
        seen["loop_thread"] = threading.get_ident()

        async def ticker() -> None:
            # Runs only if the loop is free while the blocking callback waits.
            await asyncio.sleep(0.05)
            seen["ticked"] = True
            release.set()

        tick = asyncio.create_task(ticker())
        results = await k.ainvoke_hook("on_session_start", **SESSION)
        await tick
        return results

    assert asyncio.run(main()) == ["sync", "async"]
    assert seen["ticked"] is True
    assert seen["sync_thread"] != seen["loop_thread"]
    assert seen["async_loop"] is seen["loop"]


def test_ainvoke_runs_a_run_of_sync_callbacks_in_one_thread_hop_with_the_same_outcome(
    make_kernel: Callable[..., Kernel],
) -> None:
    """Consecutive sync callbacks share one worker thread and one context (not one each), as they share
    the caller's in the sync path: what the first sets, the next sees; a failing one in the run is
    disabled and the rest still answer, in order, around an async one that runs on the loop, and a sync
    one that returns an awaitable is awaited on the loop."""
    threads: list[tuple[str, int]] = []
    seen: dict[str, str] = {}

    def sync(name: str) -> Callable[..., str]:
        def callback(**kwargs: Any) -> str:
            threads.append((name, threading.get_ident()))
            seen[name] = REQUEST.get()
            REQUEST.set(f"set by {name}")
            return name

        return callback

    def failing(**kwargs: Any) -> str:
        raise RuntimeError("the third one fails")

    async def on_loop(**kwargs: Any) -> str:
        threads.append(("async", threading.get_ident()))
        return "async"

    async def later() -> str:
        return "awaited"

    class Plugin:
        def register(self, ctx: Any) -> None:
            ctx.register_hook("on_session_start", sync("one"))
            ctx.register_hook("on_session_start", sync("two"))
            ctx.register_hook("on_session_start", failing)
            ctx.register_hook("on_session_start", sync("four"))
            ctx.register_hook("on_session_start", on_loop)
            ctx.register_hook("on_session_start", sync("six"))
            ctx.register_hook("on_session_start", lambda **kw: later())

    k = make_kernel()
    k.register(Plugin(), name="plugin")

    async def main() -> tuple[list[Any], int]:
        return await k.ainvoke_hook("on_session_start", **SESSION), threading.get_ident()

    results, loop_thread = asyncio.run(main())
    assert results == ["one", "two", "four", "async", "six", "awaited"]
    by_name = dict(threads)
    assert by_name["async"] == loop_thread
    assert by_name["one"] == by_name["two"] == by_name["four"] != loop_thread  # one hop for the first run
    assert by_name["six"] != loop_thread
    # A failure is judged on the loop thread: the run after it is a hop of its own.
    assert seen == {"one": "unset", "two": "set by one", "four": "unset", "six": "unset"}
    assert [cb.error is not None for cb in k.hook_callbacks("on_session_start")].count(True) == 1
    # The sync path agrees (the failed callback stays disabled).
    assert k.invoke_hook("on_session_start", **SESSION) == results


def test_ainvoke_sees_spec_defaults_firstresult_and_wrappers(make_kernel: Callable[..., Kernel]) -> None:
    """The async path has the same semantics as the sync one (one engine)."""

    class Specs:
        @hookspec(firstresult=True)
        def engine_pick(self, value, bonus=10):
            """Pick one answer."""

    class Wrap:
        @hookimpl(wrapper=True)
        def engine_pick(self, value):
            result = yield
            return f"[{result}]"

    class Answer:
        def __init__(self, tag: str) -> None:
            self.tag = tag

        @hookimpl
        def engine_pick(self, value, bonus):
            return f"{self.tag}:{value + bonus}"

    k = make_kernel()
    k.pm.add_hookspecs(Specs)
    k.pm.register(Answer("beta"), name="beta")
    k.pm.register(Answer("alpha"), name="alpha")
    k.pm.register(Wrap(), name="wrap")
    assert k.pm.hook.engine_pick(value=1) == "[alpha:11]"
    assert k.invoke_hook("engine_pick", value=1) == ["[alpha:11]"]
    assert asyncio.run(k.ainvoke_hook("engine_pick", value=2)) == ["[alpha:12]"]


# --------------------------------------------------------------------------
# Monitors
# --------------------------------------------------------------------------


def test_a_monitor_that_raises_is_removed_and_hooks_keep_working(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    """A hook-call monitor is not a plugin callback, but a raising one must not break every hook
    call either: it is logged and removed; the call it was watching returns normally."""
    k = make_kernel()
    k.register(hermes(on_session_start=lambda **kw: "x"), name="plain")
    seen: list[str] = []

    def bad_before(hook_name: str, methods: Any, kwargs: Any) -> None:
        raise RuntimeError("monitor broke")

    k.pm.add_hookcall_monitoring(bad_before, lambda *a: None)
    k.pm.add_hookcall_monitoring(lambda name, methods, kwargs: seen.append(name), lambda *a: None)
    assert k.invoke_hook("on_session_start", **SESSION) == ["x"]
    assert k.invoke_hook("on_session_start", **SESSION) == ["x"]
    assert seen == ["on_session_start", "on_session_start"]
    assert len(k._hooks.monitors) == 1
    assert "monitor broke" in (home / "logs" / "agent.log").read_text(encoding="utf-8")


def test_monitoring_off_again_restores_the_fast_path(make_kernel: Callable[..., Kernel]) -> None:
    """While a monitor is on, plain chains leave the fast table; the undo puts them back."""
    k = make_kernel()
    k.register(hermes(post_tool_call=lambda **kw: None), name="watcher")
    assert "post_tool_call" in k._hooks.fast
    undo = k.pm.add_hookcall_monitoring(lambda *a: None, lambda *a: None)
    assert "post_tool_call" not in k._hooks.fast
    undo()
    assert "post_tool_call" in k._hooks.fast


# --------------------------------------------------------------------------
# Specs declared by plugins
# --------------------------------------------------------------------------


class LateSpecs:
    @hookspec
    def engine_late(self, value):
        """Declared after another plugin implemented it."""


class NotFitting:
    @hookimpl
    def engine_late(self, other):
        return other


def test_ctx_add_hookspecs_disables_an_unfitting_impl_of_another_plugin(
    make_kernel: Callable[..., Kernel],
) -> None:
    """``ctx.add_hookspecs`` never fails the declaring plugin for another plugin's impl: that impl
    is disabled (named in its hook_errors); the declaring plugin loads and its own impls work."""
    k = make_kernel()
    k.pm.register(NotFitting(), name="a_unfitting")

    def register(ctx: Any) -> None:
        ctx.add_hookspecs(LateSpecs)
        ctx.register_hook("engine_late", lambda value, **kw: f"declarer:{value}")

    k.register(types.SimpleNamespace(register=register), name="b_declarer")
    assert k.plugin("b_declarer").enabled
    assert list(k.plugin("a_unfitting").hook_errors) == ["engine_late"]
    assert k.invoke_hook("engine_late", value=3) == ["declarer:3"]
    assert k.pm.hook.engine_late(value=3) == ["declarer:3"]


def test_pm_add_hookspecs_raises_as_pluggy_does_and_still_contains(
    make_kernel: Callable[..., Kernel],
) -> None:
    """``k.pm.add_hookspecs`` raises pluggy's ``PluginValidationError`` for the unfitting impl (a
    host calling pluggy's API gets pluggy's answer), and that impl is disabled all the same."""
    k = make_kernel()
    k.pm.register(NotFitting(), name="unfitting")
    with pytest.raises(pluggy.PluginValidationError):
        k.pm.add_hookspecs(LateSpecs)
    assert list(k.plugin("unfitting").hook_errors) == ["engine_late"]
    assert k.invoke_hook("engine_late", value=1) == []


def test_add_hookspecs_with_no_hook_is_a_clear_register_failure(make_kernel: Callable[..., Kernel]) -> None:
    """A plugin that declares a class without any hookspec fails to load with pluggy's message."""
    k = make_kernel()

    def register(ctx: Any) -> None:
        ctx.add_hookspecs(type("Empty", (), {}))

    with pytest.raises(PluginError, match="did not find any 'hermes' hooks"):
        k.register(types.SimpleNamespace(register=register), name="empty")


# --------------------------------------------------------------------------
# The registry from a host's side
# --------------------------------------------------------------------------


def test_every_plugin_style_is_in_one_registry(make_kernel: Callable[..., Kernel], plugin_dir: Any) -> None:
    """A directory plugin (its module), a runtime Hermes-style object and a pluggy object are all
    in ``k.pm`` under their names, and their callbacks are impls of the right object."""
    plugin_dir(
        "dirplug",
        "def cb(**kwargs):\n    return 'dir'\n\n"
        "def register(ctx):\n    ctx.register_hook('on_session_start', cb)\n",
        manifest={"name": "dirplug", "provides_hooks": ["on_session_start"]},
    )
    k = make_kernel()
    runtime = hermes(on_session_start=lambda **kw: "runtime")

    class Native:
        @hookimpl
        def on_session_start(self, session_id):
            return "native"

    native = Native()
    k.register(runtime, name="runtime")
    k.pm.register(native, name="native")
    module = k.pm.get_plugin("dirplug")
    assert isinstance(module, types.ModuleType) and module.__name__.endswith(".dirplug")
    assert k.pm.get_plugin("runtime") is runtime
    assert k.pm.get_name(native) == "native"
    impls = {impl.plugin_name: impl.plugin for impl in k.pm.hook.on_session_start.get_hookimpls()}
    assert impls == {"dirplug": module, "runtime": runtime, "native": native}
    assert k.pm.hook.on_session_start(**SESSION) == ["dir", "native", "runtime"]
    assert k.invoke_hook("on_session_start", **SESSION) == ["dir", "native", "runtime"]
    # pluggy's own list is kept in reverse call order, as pluggy iterates it.
    order = [impl.plugin_name for impl in k.pm.hook.on_session_start.get_hookimpls()]
    assert order == ["runtime", "native", "dirplug"]


def test_a_function_entry_or_surface_is_a_named_handle(make_kernel: Callable[..., Kernel]) -> None:
    """A plugin whose target is a function is registered as a small handle named after it."""

    def register(ctx: Any) -> None:
        ctx.register_hook("on_session_start", lambda **kw: "fn")

    k = make_kernel()
    k.register(register, name="fnplug")
    handle = k.pm.get_plugin("fnplug")
    assert handle is not None and handle.__name__ == "fnplug" and "fnplug" in repr(handle)
    assert k.pm.get_hookcallers(handle) == [k.pm.hook.on_session_start]


def test_plugin_error_is_a_value_error_and_names_the_plugin(make_kernel: Callable[..., Kernel]) -> None:
    """Registration errors are ``ValueError``s, as pluggy's own are, so pluggy-style hosts catch them."""
    k = make_kernel()
    k.pm.register(types.SimpleNamespace(), name="taken")
    with pytest.raises(ValueError, match="taken"):
        k.pm.register(types.SimpleNamespace(), name="taken")
    k.shutdown()
    with pytest.raises(PluginError, match="shut down"):
        k.pm.register(types.SimpleNamespace(), name="late")
    assert issubclass(PluginError, ValueError)


def test_nameless_registrations_of_one_class_get_numbered_names(make_kernel: Callable[..., Kernel]) -> None:
    """Two name-less objects of one class: ``module.Class`` and ``module.Class#2``, in every run."""

    class Thing:
        pass

    k = make_kernel()
    first, second = Thing(), Thing()
    base = f"{__name__}.{Thing.__qualname__}"
    assert k.pm.register(first) == base
    assert k.pm.register(second) == f"{base}#2"
    assert k.pm.get_plugin(base) is first


def test_pm_hook_calls_are_bounded_by_the_hook_timeout_too(make_kernel: Callable[..., Kernel]) -> None:
    """``plugins.hook_timeout`` applies to ``k.pm.hook.<name>(...)`` as to ``invoke_hook``: a late
    callback is left out, disabled, and the other plugins' results come back."""
    never = threading.Event()
    k = make_kernel(config={"plugins": {"hook_timeout": 0.3}})
    k.register(hermes(on_session_start=lambda **kw: never.wait()), name="a_stuck")
    k.register(hermes(on_session_start=lambda **kw: "on time"), name="b_fine")
    assert k.pm.hook.on_session_start(**SESSION) == ["on time"]
    assert k.plugin("a_stuck").hook_errors["on_session_start"].startswith("HookTimeout")
    never.set()


def test_has_callbacks_says_whether_a_hook_would_reach_anything(make_kernel: Callable[..., Kernel]) -> None:
    """The tool pipeline skips copying arguments for ``post_tool_call`` / ``transform_tool_result`` when
    nothing hears them."""
    k = make_kernel()
    assert not k.has_callbacks("post_tool_call")
    k.register(hermes(post_tool_call=lambda **kw: None), name="observer")
    assert k.has_callbacks("post_tool_call")
    k.unregister("observer")
    assert not k.has_callbacks("post_tool_call")
    assert not k.has_callbacks("transform_tool_result")


def test_native_impls_on_the_fast_path_keep_pluggy_s_arguments_order_and_containment(
    make_kernel: Callable[..., Kernel],
) -> None:
    """``k.pm.hook.<name>`` calls a plain chain of pluggy-native impls with their own arguments, by
    position: the results in the kernel's order, a raising impl disabled while the others answer, an impl
    asking for an argument the call lacks failed with the argument named, and the running kernel set."""
    from kernel.core.api import running_kernel

    class Spec:
        @hookspec
        def native_probe(self, a: int, b: int) -> int:  # type: ignore[empty-body]
            """A hook for this test."""

    seen: list[object] = []

    class Adds:
        @hookimpl
        def native_probe(self, a: int, b: int) -> int:
            seen.append(running_kernel())
            return a + b

    class Breaks:
        @hookimpl
        def native_probe(self, a: int) -> int:
            raise RuntimeError("broken on purpose")

    k = make_kernel()
    k.pm.add_hookspecs(Spec)
    for name, plugin in (("adds", Adds()), ("breaks", Breaks())):
        k.pm.register(plugin, name)
    assert k.host.engine.chains["native_probe"].native is not None  # the path this test is about
    assert k.pm.hook.native_probe(a=2, b=3) == [5]
    assert seen == [k]
    assert k.pm.hook.native_probe(a=4, b=1) == [5]  # the failed impls stay disabled
    assert k.plugin("breaks").disabled_hooks == ["native_probe"]
    assert "broken on purpose" in k.plugin("breaks").hook_errors["native_probe"]
    assert k.plugin("adds").disabled_hooks == []
    with pytest.warns(UserWarning, match="cannot be found in this hook call"):  # pluggy's own warning
        assert k.pm.hook.native_probe(a=1) == []
    assert "did not provide argument(s): b" in k.plugin("adds").hook_errors["native_probe"]


def test_invoke_hook_and_pre_llm_context_call_native_impls_as_pluggy_does_and_as_a_plain_chain_would(
    make_kernel: Callable[..., Kernel],
) -> None:
    """A plain chain of pluggy-native impls, through ``k.invoke_hook`` and ``k.pre_llm_context`` (the
    path that calls them with their own arguments): what each takes (none, one, several), results in
    the kernel's order, ``None`` left out, a coroutine's result awaited, a raising impl disabled while
    the others answer, a non-text context piece read as the kernel reads it, the running kernel set."""
    from kernel.core.api import running_kernel

    seen: list[object] = []

    class Alpha:
        @hookimpl
        def post_tool_call(self, tool_name: str, result: str) -> str:
            seen.append(running_kernel())
            return f"alpha:{tool_name}:{result}"

        @hookimpl
        def pre_llm_call(self, user_message: str) -> str:
            return f"alpha saw {user_message}"

    class Bravo:
        @hookimpl
        def post_tool_call(self) -> None:
            return None

        @hookimpl
        def pre_llm_call(self, session_id: str) -> dict[str, str]:
            return {"context": f"bravo in {session_id}"}

    class Charlie:
        @hookimpl
        def post_tool_call(self, tool_name: str) -> Any:
            async def later() -> str:
                return f"charlie:{tool_name}"

            return later()

        @hookimpl
        def pre_llm_call(self) -> str:
            raise RuntimeError("broken on purpose")

    k = make_kernel()
    for name, plugin in (("charlie", Charlie()), ("alpha", Alpha()), ("bravo", Bravo())):
        k.register(plugin, name=name)
    for hook in ("post_tool_call", "pre_llm_call"):
        assert k.host.engine.chains[hook].native is not None  # the path this test is about
    call = {
        "tool_name": "tool",
        "args": {},
        "result": "r",
        "task_id": "",
        "session_id": "s1",
        "tool_call_id": "",
    }
    assert k.invoke_hook("post_tool_call", **call) == ["alpha:tool:r", "charlie:tool"]
    assert seen == [k]
    text = k.pre_llm_context(session_id="s1", user_message="hi", conversation_history=[], is_first_turn=True)
    assert text == "alpha saw hi\n\nbravo in s1"
    assert k.plugin("charlie").disabled_hooks == ["pre_llm_call"]
    assert "broken on purpose" in k.plugin("charlie").hook_errors["pre_llm_call"]
    assert k.pre_llm_context(session_id="s2", user_message="again") == "alpha saw again\n\nbravo in s2"
