"""The hook-calling machinery, through a real Kernel loading real plugin directories.

Plugins are written as directories under the test's home (or the bundled
directory) and loaded by ``k.load()``; pluggy-native plugins use
``kernel.hookimpl``.  Callbacks report what they saw into ``hook_sink``, a
throw-away module the test puts in ``sys.modules`` before loading.
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import agent_log, run_json, write_plugin

from kernel import Kernel, PluginError, hookimpl

SESSION = {"session_id": "s-1", "model": "m-1", "platform": "cli"}


def manifest(name: str, hooks: tuple[str, ...] = (), tools: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"name": name, "version": "0.1.0", "provides_hooks": list(hooks), "provides_tools": list(tools)}


def returning_plugin(hook: str, *values: str) -> str:
    """Plugin code registering one Hermes callback per value, each returning that value."""
    lines = ["def register(ctx):"]
    for i, value in enumerate(values):
        lines.append(f"    def cb_{i}(**kwargs):")
        lines.append(f"        return {value!r}")
        lines.append(f"    ctx.register_hook({hook!r}, cb_{i})")
    if not values:
        lines.append("    pass")
    return "\n".join(lines) + "\n"


class Native:
    """A pluggy-native plugin object whose on_session_start returns ``value``."""

    def __init__(self, value: str) -> None:
        self.value = value

    @hookimpl
    def on_session_start(self, session_id: str) -> str:
        return self.value


# --------------------------------------------------------------------------
# Order
# --------------------------------------------------------------------------


def test_alphabetical_order_across_every_source(
    plugin_dir: Callable[..., Path], bundled: Path, make_kernel: Callable[..., Kernel]
) -> None:
    hook = "on_session_start"
    # A bundled plugin, capitalised: a plain (case-sensitive) sort would put it first.
    write_plugin(bundled, "delta", returning_plugin(hook, "Delta"), manifest("Delta", (hook,)))
    # User plugins, written in non-alphabetical order; "alpha" registers two callbacks whose
    # function names sort opposite to their registration order.
    plugin_dir("charlie", returning_plugin(hook, "charlie"), manifest=manifest("charlie", (hook,)))
    plugin_dir(
        "alpha",
        f"""
        def register(ctx):
            def zz(**kwargs):
                return "alpha-1"
            def aa(**kwargs):
                return "alpha-2"
            ctx.register_hook({hook!r}, zz)
            ctx.register_hook({hook!r}, aa)
        """,
        manifest=manifest("alpha", (hook,)),
    )
    k = make_kernel()
    assert {p.name: p.source for p in k.plugins} == {"alpha": "user", "charlie": "user", "Delta": "bundled"}
    assert k.invoke_hook(hook, **SESSION) == ["alpha-1", "alpha-2", "charlie", "Delta"]

    # A runtime plugin (k.register) and one registered directly on pluggy's manager.
    k.register(Native("Bravo"), name="Bravo")
    k.pm.register(Native("echo"), name="echo")
    assert k.plugin("Bravo").source == "runtime"
    assert k.plugin("echo").source == "pluggy"
    assert k.invoke_hook(hook, **SESSION) == ["alpha-1", "alpha-2", "Bravo", "charlie", "Delta", "echo"]
    assert [p.name for p in k.plugins] == ["alpha", "Bravo", "charlie", "Delta", "echo"]
    assert [cb.plugin for cb in k.hook_callbacks(hook)] == [
        "alpha",
        "alpha",
        "Bravo",
        "charlie",
        "Delta",
        "echo",
    ]


def test_order_holds_after_runtime_registration(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    hook = "on_session_end"
    plugin_dir("beta", returning_plugin(hook, "beta"), manifest=manifest("beta", (hook,)))
    k = make_kernel()
    args = {"session_id": "s", "completed": True, "interrupted": False, "model": None, "platform": None}
    assert k.invoke_hook(hook, **args) == ["beta"]

    def hermes_style(value: str) -> types.SimpleNamespace:
        def register(ctx: Any) -> None:
            ctx.register_hook(hook, lambda **kwargs: value)

        return types.SimpleNamespace(register=register)

    k.register(hermes_style("gamma"), name="gamma")
    assert k.invoke_hook(hook, **args) == ["beta", "gamma"]
    k.register(hermes_style("alpha"), name="alpha")
    assert k.invoke_hook(hook, **args) == ["alpha", "beta", "gamma"]


def test_tryfirst_and_trylast_tiers(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    hook = "on_session_start"
    plugin_dir("mike", returning_plugin(hook, "mike"), manifest=manifest("mike", (hook,)))
    plugin_dir(
        "zulu",
        """
        from kernel import hookimpl

        @hookimpl(tryfirst=True)
        def on_session_start(session_id):
            return "zulu-first"
        """,
        manifest=manifest("zulu", ("on_session_start",)),
    )
    plugin_dir(
        "aardvark",
        """
        from kernel import hookimpl

        @hookimpl(trylast=True)
        def on_session_start(session_id):
            return "aardvark-last"
        """,
        manifest=manifest("aardvark", ("on_session_start",)),
    )
    k = make_kernel()

    class Plain:
        @hookimpl
        def on_session_start(self, session_id: str) -> str:
            return "bravo-normal"

    class Early:
        @hookimpl(tryfirst=True)
        def on_session_start(self, session_id: str) -> str:
            return "yankee-first"

    k.register(Plain(), name="bravo")
    k.register(Early(), name="yankee")
    assert k.invoke_hook(hook, **SESSION) == [
        "yankee-first",
        "zulu-first",
        "bravo-normal",
        "mike",
        "aardvark-last",
    ]


# --------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------


def test_callbacks_receive_the_kwargs_they_accept(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    hook = "on_session_start"
    plugin_dir(
        "a_wide",
        f"""
        import hook_sink

        def register(ctx):
            def everything(**kwargs):
                hook_sink.calls.append(("wide", kwargs))
            def mixed(session_id, **rest):
                hook_sink.calls.append(("mixed", {{"session_id": session_id, **rest}}))
            ctx.register_hook({hook!r}, everything)
            ctx.register_hook({hook!r}, mixed)
        """,
        manifest=manifest("a_wide", (hook,)),
    )
    plugin_dir(
        "b_narrow",
        f"""
        import hook_sink

        def register(ctx):
            def narrow(session_id, platform):
                hook_sink.calls.append(("narrow", {{"session_id": session_id, "platform": platform}}))
            def kwonly(*, model):
                hook_sink.calls.append(("kwonly", {{"model": model}}))
            def nothing():
                hook_sink.calls.append(("nothing", {{}}))
            ctx.register_hook({hook!r}, narrow)
            ctx.register_hook({hook!r}, kwonly)
            ctx.register_hook({hook!r}, nothing)
        """,
        manifest=manifest("b_narrow", (hook,)),
    )
    plugin_dir(
        "c_native",
        """
        import hook_sink
        from kernel import hookimpl

        @hookimpl
        def on_session_start(platform):
            hook_sink.calls.append(("native", {"platform": platform}))
        """,
        manifest=manifest("c_native", (hook,)),
    )
    k = make_kernel()
    for name in ("a_wide", "b_narrow", "c_native"):
        assert k.plugin(name).enabled, k.plugin(name).error

    class FullNative:
        @hookimpl
        def on_session_start(self, session_id: str, model: str, platform: str) -> None:
            sink.calls.append(
                ("full-native", {"session_id": session_id, "model": model, "platform": platform})
            )

    k.register(FullNative(), name="d_native")
    kwargs = {**SESSION, "host_extra": 42}
    assert k.invoke_hook(hook, **kwargs) == []
    # Every hook also carries Hermes' observer schema version.
    observed = {**kwargs, "telemetry_schema_version": "hermes.observer.v1"}
    assert sink.calls == [
        ("wide", observed),
        ("mixed", observed),
        ("narrow", {"session_id": "s-1", "platform": "cli"}),
        ("kwonly", {"model": "m-1"}),
        ("nothing", {}),
        ("native", {"platform": "cli"}),
        ("full-native", SESSION),
    ]
    for name in ("a_wide", "b_narrow", "c_native", "d_native"):
        assert k.plugin(name).disabled_hooks == []


# --------------------------------------------------------------------------
# Failures
# --------------------------------------------------------------------------


def test_failing_callbacks_are_disabled_and_the_rest_still_run(
    plugin_dir: Callable[..., Path],
    make_kernel: Callable[..., Kernel],
    sink: types.ModuleType,
    home: Path,
) -> None:
    hook = "on_session_start"
    plugin_dir("a_good", returning_plugin(hook, "good-a"), manifest=manifest("a_good", (hook,)))
    plugin_dir(
        "b_faulty",
        f"""
        import hook_sink

        def register(ctx):
            def broken(**kwargs):
                hook_sink.calls.append("b_faulty")
                raise ValueError("faulty value 1234")
            ctx.register_hook({hook!r}, broken)
        """,
        manifest=manifest("b_faulty", (hook,)),
    )
    plugin_dir(
        "c_quitter",
        f"""
        import hook_sink

        def register(ctx):
            def leave(**kwargs):
                hook_sink.calls.append("c_quitter")
                raise SystemExit(3)
            ctx.register_hook({hook!r}, leave)
        """,
        manifest=manifest("c_quitter", (hook,)),
    )
    plugin_dir("d_good", returning_plugin(hook, "good-d"), manifest=manifest("d_good", (hook,)))
    k = make_kernel()

    assert k.invoke_hook(hook, **SESSION) == ["good-a", "good-d"]
    assert sink.calls == ["b_faulty", "c_quitter"]

    faulty = k.plugin("b_faulty")
    assert faulty.enabled
    assert faulty.disabled_hooks == [hook]
    assert "ValueError" in faulty.hook_errors[hook]
    assert "faulty value 1234" in faulty.hook_errors[hook]
    quitter = k.plugin("c_quitter")
    assert quitter.disabled_hooks == [hook]
    assert "SystemExit" in quitter.hook_errors[hook]
    for name in ("a_good", "d_good"):
        assert k.plugin(name).disabled_hooks == []
        assert k.plugin(name).hook_errors == {}
    # The list command's data shows it as well.
    as_dict = {p.name: p.to_dict() for p in k.plugins}
    assert as_dict["b_faulty"]["disabled_hooks"] == [hook]

    # Disabled for the life of the kernel: not called again.
    assert k.invoke_hook(hook, **SESSION) == ["good-a", "good-d"]
    assert sink.calls == ["b_faulty", "c_quitter"]

    # Logged with plugin and hook names.
    text = agent_log(home)
    lines = [line for line in text.splitlines() if "b_faulty" in line and hook in line]
    assert lines, text
    assert any("faulty value 1234" in line or "ValueError" in line for line in lines), text
    assert any("c_quitter" in line and hook in line for line in text.splitlines()), text


def test_a_failure_disables_only_that_callback(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin_dir(
        "mixed",
        """
        def register(ctx):
            def bad(**kwargs):
                raise RuntimeError("only this one")
            def good(**kwargs):
                return "still here"
            ctx.register_hook("on_session_start", bad)
            ctx.register_hook("on_session_start", good)
            ctx.register_hook("on_session_reset", good)
        """,
        manifest=manifest("mixed", ("on_session_start", "on_session_reset")),
    )
    k = make_kernel()
    assert k.invoke_hook("on_session_start", **SESSION) == ["still here"]
    assert k.invoke_hook("on_session_start", **SESSION) == ["still here"]
    reset = {
        "session_id": "n",
        "platform": "cli",
        "reason": "new",
        "old_session_id": "o",
        "new_session_id": "n",
    }
    assert k.invoke_hook("on_session_reset", **reset) == ["still here"]
    info = k.plugin("mixed")
    assert info.disabled_hooks == ["on_session_start"]
    assert "RuntimeError" in info.hook_errors["on_session_start"]


def test_keyboard_interrupt_propagates(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    plugin_dir(
        "interrupter",
        """
        import hook_sink

        def register(ctx):
            def stop(**kwargs):
                hook_sink.calls.append("interrupter")
                raise KeyboardInterrupt
            ctx.register_hook("on_session_start", stop)
        """,
        manifest=manifest("interrupter", ("on_session_start",)),
    )
    k = make_kernel()
    with pytest.raises(KeyboardInterrupt):
        k.invoke_hook("on_session_start", **SESSION)
    # Not a plugin failure: nothing is disabled, and the next call raises again.
    assert k.plugin("interrupter").disabled_hooks == []
    with pytest.raises(KeyboardInterrupt):
        k.invoke_hook("on_session_start", **SESSION)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(k.ainvoke_hook("on_session_start", **SESSION))
    assert sink.calls == ["interrupter"] * 3


# --------------------------------------------------------------------------
# Async callbacks
# --------------------------------------------------------------------------

ASYNC_PLUGIN = """
import asyncio
import hook_sink

def register(ctx):
    async def slow(**kwargs):
        await asyncio.sleep(0)
        hook_sink.calls.append(("a_async", asyncio.get_running_loop()))
        return "from-async"
    ctx.register_hook("on_session_start", slow)
"""


def _async_setup(plugin_dir: Callable[..., Path]) -> None:
    plugin_dir("a_async", ASYNC_PLUGIN, manifest=manifest("a_async", ("on_session_start",)))
    plugin_dir(
        "b_sync",
        returning_plugin("on_session_start", "from-sync"),
        manifest=manifest("b_sync", ("on_session_start",)),
    )


def test_invoke_hook_runs_async_callbacks_from_sync_code(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    _async_setup(plugin_dir)
    k = make_kernel()
    assert k.invoke_hook("on_session_start", **SESSION) == ["from-async", "from-sync"]
    assert k.invoke_hook("on_session_start", **SESSION) == ["from-async", "from-sync"]
    assert len(sink.calls) == 2


def test_invoke_hook_runs_async_callbacks_inside_a_running_loop(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    _async_setup(plugin_dir)
    k = make_kernel()

    async def host() -> list[Any]:
        return k.invoke_hook("on_session_start", **SESSION)

    assert asyncio.run(host()) == ["from-async", "from-sync"]
    assert len(sink.calls) == 1
    assert k.plugin("a_async").disabled_hooks == []


def test_ainvoke_hook_awaits_on_the_callers_loop(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    _async_setup(plugin_dir)
    k = make_kernel()

    class AsyncNative:
        @hookimpl
        async def on_session_start(self, session_id: str) -> str:
            await asyncio.sleep(0)
            sink.calls.append(("c_native", asyncio.get_running_loop()))
            return f"native-async-{session_id}"

    k.register(AsyncNative(), name="c_native")

    async def host() -> tuple[list[Any], asyncio.AbstractEventLoop]:
        results = await k.ainvoke_hook("on_session_start", **SESSION)
        return results, asyncio.get_running_loop()

    results, loop = asyncio.run(host())
    assert results == ["from-async", "from-sync", "native-async-s-1"]
    assert [name for name, _ in sink.calls] == ["a_async", "c_native"]
    for _, seen in sink.calls:
        assert seen is loop


def test_failing_async_callback_is_disabled(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    plugin_dir(
        "async_bad",
        """
        import asyncio
        import hook_sink

        def register(ctx):
            async def bad_start(**kwargs):
                await asyncio.sleep(0)
                hook_sink.calls.append("start")
                raise ValueError("async start failed")
            async def bad_end(**kwargs):
                await asyncio.sleep(0)
                hook_sink.calls.append("end")
                raise LookupError("async end failed")
            ctx.register_hook("on_session_start", bad_start)
            ctx.register_hook("on_session_end", bad_end)
        """,
        manifest=manifest("async_bad", ("on_session_start", "on_session_end")),
    )
    plugin_dir(
        "ok",
        """
        def register(ctx):
            ctx.register_hook("on_session_start", lambda **kw: "ok-start")
            ctx.register_hook("on_session_end", lambda **kw: "ok-end")
        """,
        manifest=manifest("ok", ("on_session_start", "on_session_end")),
    )
    k = make_kernel()
    end = {"session_id": "s", "completed": True, "interrupted": False, "model": None, "platform": None}

    assert k.invoke_hook("on_session_start", **SESSION) == ["ok-start"]
    assert asyncio.run(k.ainvoke_hook("on_session_end", **end)) == ["ok-end"]
    info = k.plugin("async_bad")
    assert sorted(info.disabled_hooks) == ["on_session_end", "on_session_start"]
    assert "async start failed" in info.hook_errors["on_session_start"]
    assert "LookupError" in info.hook_errors["on_session_end"]

    assert k.invoke_hook("on_session_start", **SESSION) == ["ok-start"]
    assert asyncio.run(k.ainvoke_hook("on_session_end", **end)) == ["ok-end"]
    assert sink.calls == ["start", "end"]


# --------------------------------------------------------------------------
# pre_llm_context
# --------------------------------------------------------------------------


def test_pre_llm_context_merges_in_plugin_order(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    hook = "pre_llm_call"
    plugin_dir("a_text", returning_plugin(hook, "first piece"), manifest=manifest("a_text", (hook,)))
    plugin_dir(
        "b_blanks",
        """
        def register(ctx):
            for value in (None, "", "   \\n\\t ", {"context": ""}, {}, {"other": "ignored"}):
                ctx.register_hook("pre_llm_call", lambda _v=value, **kwargs: _v)
        """,
        manifest=manifest("b_blanks", (hook,)),
    )
    plugin_dir(
        "c_dict",
        """
        def register(ctx):
            ctx.register_hook("pre_llm_call", lambda **kwargs: {"context": "second piece"})
        """,
        manifest=manifest("c_dict", (hook,)),
    )
    plugin_dir(
        "d_raises",
        """
        import hook_sink

        def register(ctx):
            def boom(**kwargs):
                hook_sink.calls.append("d_raises")
                raise RuntimeError("no context for you")
            ctx.register_hook("pre_llm_call", boom)
        """,
        manifest=manifest("d_raises", (hook,)),
    )
    plugin_dir(
        "E_last",
        """
        def register(ctx):
            ctx.register_hook("pre_llm_call", lambda user_message: "third piece: " + user_message)
        """,
        manifest=manifest("E_last", (hook,)),
    )
    k = make_kernel()
    for info in k.plugins:
        assert info.enabled, info

    expected = "first piece\n\nsecond piece\n\nthird piece: hi"
    assert k.pre_llm_context(session_id="s", user_message="hi", is_first_turn=True) == expected
    assert sink.calls == ["d_raises"]
    assert k.plugin("d_raises").disabled_hooks == ["pre_llm_call"]
    assert k.pre_llm_context(session_id="s", user_message="hi", is_first_turn=False) == expected
    assert sink.calls == ["d_raises"]


def test_pre_llm_context_is_empty_without_callbacks(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel()
    assert k.pre_llm_context(session_id="s", user_message="hi") == ""
    plugin_dir(
        "blank",
        """
        def register(ctx):
            ctx.register_hook("pre_llm_call", lambda **kwargs: None)
            ctx.register_hook("pre_llm_call", lambda **kwargs: "  ")
        """,
        manifest=manifest("blank", ("pre_llm_call",)),
    )
    k2 = make_kernel()
    assert k2.pre_llm_context(session_id="s", user_message="hi") == ""


# --------------------------------------------------------------------------
# pre_tool_call as a gate
# --------------------------------------------------------------------------


def test_raising_pre_tool_call_blocks_the_call_then_is_disabled(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    plugin_dir(
        "toolbox",
        """
        import json
        import hook_sink

        SCHEMA = {
            "name": "stamp",
            "description": "Record a stamp.",
            "parameters": {"type": "object", "properties": {"mark": {"type": "string"}}},
        }

        def stamp(args, **kwargs):
            hook_sink.calls.append(("handler", args["mark"]))
            return json.dumps({"stamped": args["mark"]})

        def register(ctx):
            ctx.register_tool("stamp", "toolbox", SCHEMA, stamp)
        """,
        manifest=manifest("toolbox", tools=("stamp",)),
    )
    plugin_dir(
        "gatekeeper",
        """
        import hook_sink

        def register(ctx):
            def gate(tool_name, args):
                hook_sink.calls.append(("gate", tool_name))
                raise RuntimeError("gate jammed")
            ctx.register_hook("pre_tool_call", gate)
        """,
        manifest=manifest("gatekeeper", ("pre_tool_call",)),
    )
    plugin_dir(
        "observer",
        """
        import hook_sink

        def register(ctx):
            ctx.register_hook("post_tool_call", lambda tool_name: hook_sink.calls.append(("post", tool_name)))
        """,
        manifest=manifest("observer", ("post_tool_call",)),
    )
    k = make_kernel()
    assert k.plugin("toolbox").tools == ["stamp"]

    blocked = run_json(k.tools.dispatch("stamp", {"mark": "one"}, session_id="s"))
    assert set(blocked) == {"error"}
    assert "gatekeeper" in blocked["error"]
    # The handler did not run; post_tool_call heard of the blocked call (issue 16, as in Hermes).
    assert sink.calls == [("gate", "stamp"), ("post", "stamp")]
    info = k.plugin("gatekeeper")
    assert info.disabled_hooks == ["pre_tool_call"]
    assert "gate jammed" in info.hook_errors["pre_tool_call"]

    passed = run_json(k.tools.dispatch("stamp", json.dumps({"mark": "two"}), session_id="s"))
    assert passed == {"stamped": "two"}
    assert sink.calls == [("gate", "stamp"), ("post", "stamp"), ("handler", "two"), ("post", "stamp")]


# --------------------------------------------------------------------------
# Unknown hook names
# --------------------------------------------------------------------------


def test_unknown_hook_is_kept_with_a_warning_and_fires(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    plugin_dir(
        "custom",
        """
        def register(ctx):
            ctx.register_hook("on_custom_event", lambda payload: "custom saw " + payload)
            ctx.register_hook("on_session_start", lambda **kwargs: "known")
        """,
        manifest=manifest("custom", ("on_custom_event", "on_session_start")),
    )
    k = make_kernel()
    info = k.plugin("custom")
    assert info.enabled and info.error is None
    assert "on_custom_event" not in k.hook_names
    assert "on_custom_event" in info.hooks
    assert [w for w in info.warnings if "on_custom_event" in w], info.warnings
    assert not [w for w in info.warnings if "on_session_start" in w], info.warnings
    assert k.invoke_hook("on_custom_event", payload="x") == ["custom saw x"]
    assert k.invoke_hook("on_session_start", **SESSION) == ["known"]
    assert "on_custom_event" in agent_log(home)


# --------------------------------------------------------------------------
# Isolation and shutdown
# --------------------------------------------------------------------------


def test_two_kernels_do_not_share_callbacks(
    tmp_path: Path, make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    code = """
    import hook_sink

    def register(ctx):
        def cb(**kwargs):
            hook_sink.calls.append(ctx.home.name)
            return "from " + ctx.home.name
        ctx.register_hook("on_session_start", cb)
    """
    homes = []
    for label in ("one", "two"):
        home = tmp_path / f"home-{label}"
        write_plugin(home / "plugins", "same", code, manifest("same", ("on_session_start",)))
        homes.append(home)
    k1 = make_kernel(home=homes[0])
    k2 = make_kernel(home=homes[1])
    assert k1.plugin("same").enabled and k2.plugin("same").enabled

    assert k1.invoke_hook("on_session_start", **SESSION) == ["from home-one"]
    assert k2.invoke_hook("on_session_start", **SESSION) == ["from home-two"]
    assert sink.calls == ["home-one", "home-two"]
    assert len(k1.hook_callbacks("on_session_start")) == 1
    assert len(k2.hook_callbacks("on_session_start")) == 1

    k1.register(Native("only in k1"), name="extra")
    assert k2.invoke_hook("on_session_start", **SESSION) == ["from home-two"]

    k1.shutdown()
    assert k1.invoke_hook("on_session_start", **SESSION) == []
    assert k1.hook_callbacks("on_session_start") == []
    assert k2.invoke_hook("on_session_start", **SESSION) == ["from home-two"]
    assert sink.calls == ["home-one", "home-two", "home-two", "home-two"]


def test_shutdown_removes_callbacks(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin_dir("solo", returning_plugin("pre_llm_call", "ctx"), manifest=manifest("solo", ("pre_llm_call",)))
    k = make_kernel()
    k.register(Native("native"), name="native")
    assert k.invoke_hook("pre_llm_call", user_message="x") == ["ctx"]
    assert k.invoke_hook("on_session_start", **SESSION) == ["native"]
    with k:
        pass  # the context manager shuts down too
    assert k.invoke_hook("pre_llm_call", user_message="x") == []
    assert k.invoke_hook("on_session_start", **SESSION) == []
    assert k.pre_llm_context(user_message="x") == ""
    assert asyncio.run(k.ainvoke_hook("on_session_start", **SESSION)) == []
    k.shutdown()  # idempotent


def test_shutdown_compiles_each_hook_once_and_takes_every_plugin_module_out(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dropping 30 plugins recompiles each hook's chain once (not once per plugin: quadratic in the
    plugins), and no module of the kernel's plugins, nor a submodule one imported, stays imported."""
    from kernel.core.hooks import HookEngine

    for i in range(30):
        plugin_dir(
            f"p{i:02d}",
            "from . import helper\n\ndef register(ctx):\n"
            "    ctx.register_hook('pre_llm_call', lambda **kw: helper.TEXT)\n"
            "    ctx.register_hook('post_tool_call', lambda **kw: None)\n",
            files={"helper.py": f"TEXT = 'from p{i:02d}'\n"},
        )
    k = make_kernel()
    assert len(k.invoke_hook("pre_llm_call", user_message="x")) == 30
    namespace = k.host.namespace
    assert f"{namespace}.p07.helper" in sys.modules
    compiled: list[str] = []
    original = HookEngine._compile
    monkeypatch.setattr(
        HookEngine, "_compile", lambda self, hook: (compiled.append(hook), original(self, hook))
    )
    k.shutdown()
    assert sorted(compiled) == sorted(set(compiled)) and {"pre_llm_call", "post_tool_call"} <= set(compiled)
    assert [m for m in sys.modules if m == namespace or m.startswith(namespace + ".")] == []


# --------------------------------------------------------------------------
# k.register failures
# --------------------------------------------------------------------------


def test_register_of_a_broken_object_leaves_nothing(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin_dir("keeper", returning_plugin("on_session_start", "keeper"), manifest=manifest("keeper"))
    k = make_kernel()
    before = [p.name for p in k.plugins]
    tools_before = k.tools.names()

    class Broken:
        @hookimpl
        def post_llm_call(self, session_id: str) -> str:
            return "should not be registered"

        def register(self, ctx: Any) -> None:
            ctx.register_hook("on_session_start", lambda **kwargs: "half-registered")
            ctx.register_tool(
                "half_tool",
                "broken",
                {"name": "half_tool", "description": "x", "parameters": {"type": "object", "properties": {}}},
                lambda args, **kw: "{}",
            )
            raise RuntimeError("register blew up")

    with pytest.raises(PluginError) as caught:
        k.register(Broken(), name="broken")
    assert "broken" in str(caught.value)
    assert "register blew up" in str(caught.value)
    assert [p.name for p in k.plugins] == before
    with pytest.raises(KeyError):
        k.plugin("broken")
    assert k.tools.names() == tools_before
    assert k.tools.get("half_tool") is None
    assert k.pm.get_plugin("broken") is None
    assert k.invoke_hook("on_session_start", **SESSION) == ["keeper"]
    assert k.invoke_hook("post_llm_call", session_id="s") == []
    assert [cb.plugin for cb in k.hook_callbacks("on_session_start")] == ["keeper"]

    # The name is free again: a working plugin may take it.
    k.register(Native("fixed"), name="broken")
    assert k.invoke_hook("on_session_start", **SESSION) == ["fixed", "keeper"]


def test_register_of_an_object_with_nothing_to_register_fails(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    with pytest.raises(PluginError):
        k.register(object(), name="empty")
    assert [p.name for p in k.plugins] == []

    class BadImpl:
        @hookimpl
        def on_session_start(self, not_an_argument_of_the_spec: str) -> None:
            return None

    with pytest.raises(PluginError):
        k.register(BadImpl(), name="bad_impl")
    assert [p.name for p in k.plugins] == []
    assert k.pm.get_plugin("bad_impl") is None
    assert k.hook_callbacks("on_session_start") == []


def test_register_duplicate_name_raises(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin_dir("taken", returning_plugin("on_session_start", "dir"), manifest=manifest("taken"))
    k = make_kernel()
    with pytest.raises(PluginError) as caught:
        k.register(Native("runtime"), name="taken")
    assert "taken" in str(caught.value)
    k.register(Native("first"), name="runtime_one")
    with pytest.raises(PluginError):
        k.register(Native("second"), name="runtime_one")
    assert k.invoke_hook("on_session_start", **SESSION) == ["first", "dir"]
    assert [p.name for p in k.plugins] == ["runtime_one", "taken"]
    assert k.plugin("taken").source == "user"
