"""Conformance of the kernel's registry ``k.pm`` with plain pluggy.

The same pluggy-style plugin code runs on two *hosts*: a plain
``pluggy.PluginManager("hermes")`` (with the kernel's hookspecs and this
module's :class:`Specs`) and ``k.pm`` of a loaded :class:`kernel.Kernel`.
Most tests assert the same outcome on both.  Where the kernel differs on
purpose, the test asserts the difference explicitly:

* **order** -- pluggy calls a tier's impls in LIFO registration order; the
  kernel calls them alphabetically by plugin name, ignoring case (tryfirst
  tier, normal tier, trylast tier; wrappers likewise, the first name being the
  outermost);
* **containment** -- pluggy propagates an exception raised by an impl or a
  wrapper; the kernel logs it, disables that callback and returns the other
  callbacks' results;
* **names** -- pluggy names a name-less instance ``str(id(obj))``; the kernel
  names it ``module.QualifiedClassName``.

Plugin names are chosen to sort differently from their registration order
(``zulu``, ``alpha``, ``Mike``, ``bravo``): the LIFO order, the alphabetical
order and a case-sensitive sort are then three different lists.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pluggy
import pytest
from conftest import REPO, evict_package, pip_install_fixture

from kernel import Kernel, PluginError, hookimpl, hookspec
from kernel import hookspecs as kernel_hookspecs

PROJECT = "hermes"
# Registered in this order; LIFO, alphabetical and case-sensitive orders all differ.
NAMES = ["zulu", "alpha", "Mike", "bravo"]
UNKNOWN_HOOK_WARNING = "not defined by the kernel"

CONF_FIXTURE = REPO / "tests" / "fixtures" / "pluggy_conformance"
CONF_PACKAGE = "hermes_conformance_fixture"
CONF_DISTRIBUTION = "hermes-kernel-conformance-plugins"
CONF_GROUP = "hermes_conformance"
CONF_EP_NAMES = ["conf-ep-alpha", "conf-ep-zulu"]


class Specs:
    """The test's own hooks, added with ``add_hookspecs`` on both hosts."""

    @hookspec
    def conf_collect(self, arg1, arg2):
        """A plain hook: every impl's non-None result, in call order."""

    @hookspec(firstresult=True)
    def conf_first(self, arg1):
        """Stops at the first non-None result."""

    @hookspec(historic=True)
    def conf_historic(self, arg1):
        """Remembered calls are replayed to plugins registered later."""

    @hookspec
    def conf_defaults(self, a, b=5):
        """``b`` has a spec default that fills a call without it."""


class PluginAbort(BaseException):
    """A BaseException that is neither an Exception nor KeyboardInterrupt."""


class NamelessPlugin:
    """A module-level class, so that its qualified name is deterministic."""

    @hookimpl
    def conf_collect(self, arg1):
        return f"nameless:{arg1}"


# --------------------------------------------------------------------------
# Hosts
# --------------------------------------------------------------------------


@dataclass
class Host:
    """One side of the comparison: a plugin manager, and its kernel when there is one."""

    kind: str
    pm: pluggy.PluginManager
    kernel: Kernel | None = None

    @property
    def is_kernel(self) -> bool:
        return self.kernel is not None

    @property
    def k(self) -> Kernel:
        assert self.kernel is not None
        return self.kernel

    def order(self, registered: list[str], tier: str = "normal") -> list[str]:
        """The call order of one tier of plugins registered in ``registered`` order.

        The kernel sorts every tier alphabetically (ignoring case).  pluggy calls
        the tryfirst and normal tiers LIFO, but inserts each trylast impl at the
        front of its list, so that the trylast tier runs in registration order.
        """
        if self.is_kernel:
            return sorted(registered, key=str.casefold)
        if tier == "trylast":
            return list(registered)
        return list(reversed(registered))

    def register_all(self, plugins: list[tuple[str, object]]) -> None:
        for name, plugin in plugins:
            assert self.pm.register(plugin, name=name) == name


def plain_pm() -> pluggy.PluginManager:
    """A plain pluggy manager with the kernel's hookspecs and the test's :class:`Specs`."""
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(kernel_hookspecs)
    pm.add_hookspecs(Specs)
    return pm


@pytest.fixture(params=["pluggy", "kernel"])
def host(request: pytest.FixtureRequest, make_kernel: Callable[..., Kernel]) -> Host:
    """A plain pluggy manager, or ``k.pm`` of a loaded kernel; both know :class:`Specs`."""
    if request.param == "pluggy":
        return Host("pluggy", plain_pm())
    k = make_kernel()
    k.pm.add_hookspecs(Specs)
    return Host("kernel", k.pm, k)


@pytest.fixture
def kernel_host(make_kernel: Callable[..., Kernel]) -> Host:
    """The kernel side only, for what plain pluggy has no counterpart of."""
    k = make_kernel()
    k.pm.add_hookspecs(Specs)
    return Host("kernel", k.pm, k)


# --------------------------------------------------------------------------
# Plugin factories
# --------------------------------------------------------------------------


def collector(tag: str, log: list[str] | None = None, **opts: Any) -> object:
    """A plugin whose ``conf_collect`` impl (``@hookimpl(**opts)``) logs ``tag`` and returns ``tag:arg1``."""

    class Collector:
        @hookimpl(**opts)
        def conf_collect(self, arg1, arg2):
            if log is not None:
                log.append(tag)
            return f"{tag}:{arg1}"

    return Collector()


def raiser(exc: BaseException, log: list[str]) -> object:
    """A plugin whose ``conf_collect`` impl raises ``exc`` (and logs each call)."""

    class Raiser:
        @hookimpl
        def conf_collect(self, arg1, arg2):
            log.append("raiser")
            raise exc

    return Raiser()


def new_wrapper(tag: str, log: list[str], **opts: Any) -> object:
    """A ``wrapper=True`` plugin: logs setup and teardown, appends ``tag`` to the result."""

    class NewWrapper:
        @hookimpl(wrapper=True, **opts)
        def conf_collect(self, arg1, arg2):
            log.append(f"{tag}:setup")
            result = yield
            log.append(f"{tag}:teardown")
            return [*result, tag]

    return NewWrapper()


def old_wrapper(tag: str, log: list[str], **opts: Any) -> object:
    """A ``hookwrapper=True`` plugin: logs setup and teardown, forces the result plus ``tag``."""

    class OldWrapper:
        @hookimpl(hookwrapper=True, **opts)
        def conf_collect(self, arg1, arg2):
            log.append(f"{tag}:setup")
            outcome = yield
            log.append(f"{tag}:teardown")
            outcome.force_result([*outcome.get_result(), tag])

    return OldWrapper()


def warnings_of(host: Host, name: str) -> list[str]:
    return [w for w in host.k.plugin(name).warnings if UNKNOWN_HOOK_WARNING in w]


def call_collect(host: Host, arg1: Any = 1) -> Any:
    return host.pm.hook.conf_collect(arg1=arg1, arg2=2)


# --------------------------------------------------------------------------
# Order
# --------------------------------------------------------------------------


def test_call_order_is_lifo_in_pluggy_and_alphabetical_in_the_kernel(host: Host) -> None:
    """pluggy calls impls in LIFO registration order; the kernel alphabetically, ignoring case."""
    host.register_all([(name, collector(name)) for name in NAMES])
    result = call_collect(host)
    if host.is_kernel:
        assert result == ["alpha:1", "bravo:1", "Mike:1", "zulu:1"]
        # The same call through the kernel's own entry point.
        assert host.k.invoke_hook("conf_collect", arg1=1, arg2=2) == result
    else:
        assert result == ["bravo:1", "Mike:1", "alpha:1", "zulu:1"]


def test_tryfirst_and_trylast_tiers(host: Host) -> None:
    """Both hosts call the tryfirst tier, then the normal one, then trylast; only the order inside differs."""
    plan = [
        ("bravo", "tryfirst"),
        ("Xray", "trylast"),
        ("charlie", "normal"),
        ("zulu", "tryfirst"),
        ("Mike", "normal"),
        ("alpha", "trylast"),
    ]
    log: list[str] = []
    for name, tier in plan:
        opts = {tier: True} if tier != "normal" else {}
        host.pm.register(collector(name, log, **opts), name=name)
    call_collect(host)
    expected = [
        name
        for tier in ("tryfirst", "normal", "trylast")
        for name in host.order([n for n, t in plan if t == tier], tier)
    ]
    assert log == expected
    if host.is_kernel:
        assert log == ["bravo", "zulu", "charlie", "Mike", "alpha", "Xray"]
    else:
        assert log == ["zulu", "bravo", "Mike", "charlie", "Xray", "alpha"]


# --------------------------------------------------------------------------
# Wrappers
# --------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["new", "old"])
def test_wrapper_sees_and_replaces_the_result(host: Host, style: str) -> None:
    """A wrapper of either style receives the impls' results and its replacement is the call's result."""
    log: list[str] = []
    make = new_wrapper if style == "new" else old_wrapper
    host.register_all([("impl", collector("impl", log)), ("wrap", make("wrap", log))])
    assert call_collect(host) == ["impl:1", "wrap"]
    assert log == ["wrap:setup", "impl", "wrap:teardown"]
    if host.is_kernel:
        assert host.k.invoke_hook("conf_collect", arg1=1, arg2=2) == ["impl:1", "wrap"]


def test_wrapper_nesting_order(host: Host) -> None:
    """Wrappers of both styles nest: tryfirst outermost, trylast innermost; LIFO vs alphabetical inside."""
    log: list[str] = []
    normal = ["zulu-new", "alpha-old", "Mike-new"]
    host.register_all(
        [
            ("zulu-new", new_wrapper("zulu-new", log)),
            ("alpha-old", old_wrapper("alpha-old", log)),
            ("yankee-first", new_wrapper("yankee-first", log, tryfirst=True)),
            ("bravo-last", old_wrapper("bravo-last", log, trylast=True)),
            ("Mike-new", new_wrapper("Mike-new", log)),
            ("impl", collector("impl", log)),
        ]
    )
    result = call_collect(host)
    outer_to_inner = ["yankee-first", *host.order(normal), "bravo-last"]
    assert log == [
        *(f"{w}:setup" for w in outer_to_inner),
        "impl",
        *(f"{w}:teardown" for w in reversed(outer_to_inner)),
    ]
    assert result == ["impl:1", *reversed(outer_to_inner)]
    if host.is_kernel:
        assert outer_to_inner == ["yankee-first", "alpha-old", "Mike-new", "zulu-new", "bravo-last"]
    else:
        assert outer_to_inner == ["yankee-first", "Mike-new", "alpha-old", "zulu-new", "bravo-last"]


@pytest.mark.parametrize("style", ["new", "old"])
def test_impl_error_reaches_the_wrapper_in_pluggy_but_is_contained_in_the_kernel(
    host: Host, style: str
) -> None:
    """pluggy throws an impl's exception into the wrapper; a kernel wrapper sees the contained result."""
    seen: list[tuple[str, Any]] = []
    log: list[str] = []

    if style == "new":

        class Wrapper:
            @hookimpl(wrapper=True)
            def conf_collect(self, arg1, arg2):
                try:
                    result = yield
                except ValueError as exc:
                    seen.append(("raised", str(exc)))
                    raise
                seen.append(("result", result))
                return result

    else:

        class Wrapper:  # type: ignore[no-redef]
            @hookimpl(hookwrapper=True)
            def conf_collect(self, arg1, arg2):
                outcome = yield
                if outcome.exception is not None:
                    seen.append(("raised", str(outcome.exception)))
                else:
                    seen.append(("result", outcome.get_result()))

    host.register_all(
        [
            ("ok", collector("ok", log)),
            ("broken", raiser(ValueError("boom"), log)),
            ("wrap", Wrapper()),
        ]
    )
    if not host.is_kernel:
        with pytest.raises(ValueError, match="boom"):
            call_collect(host)
        assert seen == [("raised", "boom")]
        return
    assert call_collect(host) == ["ok:1"]
    assert seen == [("result", ["ok:1"])]
    info = host.k.plugin("broken")
    assert info.disabled_hooks == ["conf_collect"]
    assert "boom" in info.hook_errors["conf_collect"]
    # Disabled: not called again.
    log.clear()
    assert call_collect(host, arg1=2) == ["ok:2"]
    assert log == ["ok"]
    assert host.k.plugin("wrap").disabled_hooks == []
    assert host.k.plugin("ok").disabled_hooks == []


@pytest.mark.parametrize(
    "exc",
    [ValueError("bad value"), SystemExit(3), PluginAbort("abort")],
    ids=["Exception", "SystemExit", "BaseException"],
)
def test_a_raising_impl_propagates_in_pluggy_and_is_disabled_in_the_kernel(
    host: Host, exc: BaseException
) -> None:
    """pluggy propagates anything an impl raises; the kernel disables the impl and returns the others."""
    log: list[str] = []
    host.register_all([("alpha", collector("alpha", log)), ("broken", raiser(exc, log))])
    host.register_all([("zulu", collector("zulu", log))])
    if not host.is_kernel:
        with pytest.raises(type(exc)):
            call_collect(host)
        return
    assert call_collect(host) == ["alpha:1", "zulu:1"]
    assert log == ["alpha", "raiser", "zulu"]
    assert host.k.plugin("broken").disabled_hooks == ["conf_collect"]
    assert "conf_collect" in host.k.plugin("broken").hook_errors
    log.clear()
    assert host.k.invoke_hook("conf_collect", arg1=3, arg2=2) == ["alpha:3", "zulu:3"]
    assert log == ["alpha", "zulu"]


def test_keyboard_interrupt_propagates_on_both_hosts(host: Host) -> None:
    """KeyboardInterrupt in the main thread is never contained: it ends the call on both hosts."""
    log: list[str] = []
    host.register_all([("broken", raiser(KeyboardInterrupt(), log))])
    with pytest.raises(KeyboardInterrupt):
        call_collect(host)
    if host.is_kernel:
        with pytest.raises(KeyboardInterrupt):
            host.k.invoke_hook("conf_collect", arg1=1, arg2=2)


@pytest.mark.parametrize("where", ["setup", "teardown"])
def test_a_raising_wrapper_propagates_in_pluggy_and_is_disabled_in_the_kernel(host: Host, where: str) -> None:
    """A wrapper raising before or after its yield: pluggy propagates; the kernel goes on without it."""
    calls: list[str] = []

    class BadWrapper:
        @hookimpl(wrapper=True)
        def conf_collect(self, arg1, arg2):
            calls.append(where)
            if where == "setup":
                raise RuntimeError("wrapper setup failed")
            yield
            raise RuntimeError("wrapper teardown failed")

    host.register_all([("ok", collector("ok")), ("bad-wrapper", BadWrapper())])
    if not host.is_kernel:
        with pytest.raises(RuntimeError, match=f"wrapper {where} failed"):
            call_collect(host)
        return
    assert call_collect(host) == ["ok:1"]
    info = host.k.plugin("bad-wrapper")
    assert info.disabled_hooks == ["conf_collect"]
    assert f"wrapper {where} failed" in info.hook_errors["conf_collect"]
    assert call_collect(host, arg1=2) == ["ok:2"]
    assert calls == [where]


# --------------------------------------------------------------------------
# firstresult
# --------------------------------------------------------------------------


def test_firstresult_stops_at_the_first_non_none_result(host: Host) -> None:
    """A firstresult hook returns the first non-None value in call order; later impls are not called."""
    returns: dict[str, str | None] = {"zulu": "zulu", "alpha": "alpha", "Mike": "Mike", "bravo": None}
    log: list[str] = []
    seen: list[Any] = []

    def first(name: str) -> object:
        class First:
            @hookimpl
            def conf_first(self, arg1):
                log.append(name)
                return None if arg1 == "quiet" else returns[name]

        return First()

    class Wrapper:
        @hookimpl(wrapper=True)
        def conf_first(self, arg1):
            result = yield
            seen.append(result)
            return result

    host.register_all([(name, first(name)) for name in NAMES])
    host.register_all([("wrap", Wrapper())])

    order = host.order(NAMES)
    stop = next(i for i, name in enumerate(order) if returns[name] is not None)
    expected_value, expected_called = order[stop], order[: stop + 1]
    assert expected_value == ("alpha" if host.is_kernel else "Mike")

    assert host.pm.hook.conf_first(arg1="x") == expected_value
    assert log == expected_called
    assert seen == [expected_value]  # a wrapper sees the single value, not a list

    log.clear()
    assert host.pm.hook.conf_first(arg1="quiet") is None
    assert log == order

    if host.is_kernel:
        k = host.k
        log.clear()
        assert k.invoke_hook("conf_first", arg1="x") == [expected_value]
        assert log == expected_called
        log.clear()
        assert asyncio.run(k.ainvoke_hook("conf_first", arg1="x")) == [expected_value]
        assert log == expected_called
        assert k.invoke_hook("conf_first", arg1="quiet") == []


# --------------------------------------------------------------------------
# historic
# --------------------------------------------------------------------------


def test_historic_calls_are_replayed_to_later_plugins(host: Host) -> None:
    """call_historic calls the current plugins and replays to each later one, feeding result_callback."""
    results: list[str] = []

    def historic(name: str) -> object:
        class Historic:
            @hookimpl
            def conf_historic(self, arg1):
                return f"{name}:{arg1}"

        return Historic()

    host.register_all([("early", historic("early"))])
    host.pm.hook.conf_historic.call_historic(kwargs={"arg1": 1}, result_callback=results.append)
    assert results == ["early:1"]
    host.register_all([("zulu", historic("zulu")), ("alpha", historic("alpha"))])
    # Replayed at registration, in registration order on both hosts.
    assert results == ["early:1", "zulu:1", "alpha:1"]

    results.clear()
    host.pm.hook.conf_historic.call_historic(kwargs={"arg1": 2}, result_callback=results.append)
    assert results == [f"{name}:2" for name in host.order(["early", "zulu", "alpha"])]

    results.clear()
    host.register_all([("later", historic("later"))])
    assert results == ["later:1", "later:2"]

    with pytest.raises(AssertionError):
        host.pm.hook.conf_historic(arg1=3)  # a historic hook is called with call_historic only


# --------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------


def test_spec_defaults_fill_missing_arguments(host: Host) -> None:
    """``conf_defaults(self, a, b=5)``: a call without ``b`` gives impls ``b=5``; with ``b``, its value."""

    class Full:
        @hookimpl
        def conf_defaults(self, a, b):
            return ("full", a, b)

    class OwnDefault:
        @hookimpl
        def conf_defaults(self, a, b=99):
            return ("own-default", a, b)

    class Subset:
        @hookimpl
        def conf_defaults(self, a):
            return ("subset", a)

    host.register_all([("full", Full()), ("own-default", OwnDefault()), ("subset", Subset())])

    def by_tag(results: list[tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
        return {r[0]: r[1:] for r in results}

    expected_without_b = {"full": (1, 5), "own-default": (1, 5), "subset": (1,)}
    expected_with_b = {"full": (1, 7), "own-default": (1, 7), "subset": (1,)}
    assert by_tag(host.pm.hook.conf_defaults(a=1)) == expected_without_b
    assert by_tag(host.pm.hook.conf_defaults(a=1, b=7)) == expected_with_b
    if host.is_kernel:
        assert by_tag(host.k.invoke_hook("conf_defaults", a=1)) == expected_without_b
        assert by_tag(host.k.invoke_hook("conf_defaults", a=1, b=7)) == expected_with_b


def test_impl_defaults_receive_the_callers_value(host: Host) -> None:
    """An impl parameter with a default gets the caller's value when given, else keeps its own default."""

    class Defaulted:
        @hookimpl
        def conf_collect(self, arg1, arg2="impl-default", extra="own"):
            return (arg1, arg2, extra)

    host.register_all([("defaulted", Defaulted())])
    assert call_collect(host) == [(1, 2, "own")]
    assert host.pm.hook.conf_collect(arg1=1, arg2=2, extra="caller") == [(1, 2, "caller")]
    if host.is_kernel:
        assert host.k.invoke_hook("conf_collect", arg1=1, arg2=2) == [(1, 2, "own")]
        assert host.k.invoke_hook("conf_collect", arg1=1, arg2=2, extra="caller") == [(1, 2, "caller")]


def test_impls_take_any_subset_of_the_spec_arguments(host: Host) -> None:
    """Impls declare none, some or all of the spec's arguments, in any order; each gets the right values."""

    class NoArgs:
        @hookimpl
        def conf_collect(self):
            return ("none",)

    class Second:
        @hookimpl
        def conf_collect(self, arg2):
            return ("second", arg2)

    class Reversed:
        @hookimpl
        def conf_collect(self, arg2, arg1):
            return ("reversed", arg2, arg1)

    host.register_all([("none", NoArgs()), ("second", Second()), ("reversed", Reversed())])
    results = host.pm.hook.conf_collect(arg1="one", arg2="two")
    assert sorted(results) == [("none",), ("reversed", "two", "one"), ("second", "two")]
    expected_order = host.order(["none", "second", "reversed"])
    assert [r[0] for r in results] == expected_order
    if host.is_kernel:
        assert host.k.invoke_hook("conf_collect", arg1="one", arg2="two") == results


def test_specname_binds_an_impl_of_another_name(host: Host) -> None:
    """``@hookimpl(specname=...)`` implements the named hook whatever the function is called."""

    class Renamed:
        @hookimpl(specname="conf_collect")
        def anything_else(self, arg1):
            return f"renamed:{arg1}"

    plugin = Renamed()
    host.register_all([("renamed", plugin)])
    assert call_collect(host) == ["renamed:1"]
    assert [hc.name for hc in host.pm.get_hookcallers(plugin) or []] == ["conf_collect"]
    assert not hasattr(host.pm.hook, "anything_else")
    if host.is_kernel:
        assert host.k.invoke_hook("conf_collect", arg1=1, arg2=2) == ["renamed:1"]


def test_registration_validates_impls_against_the_spec(host: Host) -> None:
    """An impl argument the spec lacks, or a wrapper that is not a generator, is refused on both hosts."""

    class ExtraArg:
        @hookimpl
        def conf_collect(self, arg1, not_in_spec):
            return None

    class NotAGenerator:
        @hookimpl(wrapper=True)
        def conf_collect(self, arg1):
            return None

    class HistoricWrapper:
        @hookimpl(wrapper=True)
        def conf_historic(self, arg1):
            yield

    for name, plugin in [("extra", ExtraArg()), ("not-gen", NotAGenerator()), ("hist", HistoricWrapper())]:
        with pytest.raises(pluggy.PluginValidationError):
            host.pm.register(plugin, name=name)
        assert host.pm.get_plugin(name) is None
        assert not host.pm.is_registered(plugin)
        if host.is_kernel:
            assert name not in [p.name for p in host.k.plugins]


def test_duplicate_names_and_objects_are_refused(host: Host) -> None:
    """A second plugin under a taken name, or the same object twice, raises ValueError on both hosts."""
    first = collector("first")
    host.register_all([("dup", first)])
    with pytest.raises(ValueError):
        host.pm.register(collector("second"), name="dup")
    with pytest.raises(ValueError):
        host.pm.register(first, name="dup-again")
    assert call_collect(host) == ["first:1"]


def test_an_object_unregistered_or_blocked_can_be_registered_again(host: Host) -> None:
    """The same object under a new name once it left (unregistered, its name blocked); never twice."""
    plugin = collector("again")
    assert host.pm.register(plugin, name="first") == "first"
    host.pm.unregister(name="first")
    assert host.pm.register(plugin, name="second") == "second"
    host.pm.set_blocked("second")
    assert not host.pm.is_registered(plugin)
    assert host.pm.register(plugin, name="third") == "third"
    with pytest.raises(ValueError):
        host.pm.register(plugin, name="fourth")
    assert call_collect(host) == ["again:1"]
    host.pm.unregister(plugin)
    assert call_collect(host) == []


# --------------------------------------------------------------------------
# Hooks without a spec
# --------------------------------------------------------------------------


def test_optionalhook_impls_of_unknown_hooks_are_accepted(host: Host) -> None:
    """``optionalhook=True`` on a hook with no spec: registration and check_pending pass."""

    class Optional:
        @hookimpl(optionalhook=True)
        def conf_nobody_declared(self, x):
            return f"optional:{x}"

        @hookimpl
        def conf_collect(self, arg1):
            return "declared"

    host.register_all([("optional", Optional())])
    host.pm.check_pending()
    assert not host.pm.hook.conf_nobody_declared.has_spec()
    assert host.pm.hook.conf_nobody_declared(x=1) == ["optional:1"]
    if host.is_kernel:
        assert host.k.invoke_hook("conf_nobody_declared", x=1) == ["optional:1"]
        # Neither the optional hook nor the specified one earns an unknown-hook warning.
        assert warnings_of(host, "optional") == []


def test_check_pending_rejects_a_non_optional_impl_of_an_unknown_hook(host: Host) -> None:
    """A non-optional impl of an unknown hook registers, but check_pending raises PluginValidationError."""

    class Typo:
        @hookimpl
        def conf_colect(self, arg1):
            return "typo"

    plugin = Typo()
    host.register_all([("typo", plugin)])
    with pytest.raises(pluggy.PluginValidationError) as info:
        host.pm.check_pending()
    assert info.value.plugin is plugin
    assert "conf_colect" in str(info.value)


def test_add_hookspecs_after_registration_validates_and_adopts_impls(host: Host) -> None:
    """Specs added after the impls: check_pending passes, the spec's options apply, bad impls are refused."""

    class LateSpecs:
        @hookspec(firstresult=True)
        def conf_late(self, value):
            """Declared after its impls were registered."""

    class BadLateSpecs:
        @hookspec
        def conf_late_bad(self, value):
            """The impl below asks for an argument this spec lacks."""

    def late(name: str) -> object:
        class Late:
            @hookimpl
            def conf_late(self, value):
                return f"{name}:{value}"

        return Late()

    class LateBad:
        @hookimpl
        def conf_late_bad(self, other):
            return other

    host.register_all([("alpha", late("alpha")), ("zulu", late("zulu")), ("late-bad", LateBad())])
    assert sorted(host.pm.hook.conf_late(value=1)) == ["alpha:1", "zulu:1"]  # no spec yet: a list
    host.pm.add_hookspecs(LateSpecs)
    assert host.pm.hook.conf_late.has_spec()
    first = host.order(["alpha", "zulu"])[0]
    assert host.pm.hook.conf_late(value=2) == f"{first}:2"
    assert first == ("alpha" if host.is_kernel else "zulu")
    if host.is_kernel:
        assert host.k.invoke_hook("conf_late", value=2) == [f"{first}:2"]
        assert warnings_of(host, "zulu") == []
    with pytest.raises(pluggy.PluginValidationError):
        host.pm.add_hookspecs(BadLateSpecs)
    with pytest.raises(ValueError, match="did not find any"):
        host.pm.add_hookspecs(types.SimpleNamespace)


# --------------------------------------------------------------------------
# ctx.add_hookspecs: a Hermes-style plugin declares its own hooks
# --------------------------------------------------------------------------

DECLARER = """\
from kernel import hookspec


class DeclaredSpecs:
    @hookspec
    def declared_event(self, value):
        "Declared by the plugin 'declarer'."

    @hookspec(firstresult=True)
    def declared_choice(self, value):
        "First non-None wins."


def register(ctx):
    ctx.add_hookspecs(DeclaredSpecs)
    ctx.register_hook("declared_event", lambda value: f"declarer:{value}")
    ctx.register_hook("declared_choice", lambda **kwargs: None)
"""

ECHO_USER = """\
def register(ctx):
    def on_event(**kwargs):
        return f"echo-user:{kwargs['value']}"

    def choose(value):
        return f"echo-user chose {value}"

    ctx.register_hook("declared_event", on_event)
    ctx.register_hook("declared_choice", choose)
"""


def test_ctx_add_hookspecs_declares_hooks_for_every_caller(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    """A plugin's own hookspecs serve invoke_hook, ainvoke_hook, k.pm.hook and native impls, in one order."""
    plugin_dir("declarer", DECLARER)
    plugin_dir("echo-user", ECHO_USER)
    k = make_kernel()
    assert k.plugin("declarer").enabled, k.plugin("declarer").error
    assert k.plugin("echo-user").enabled, k.plugin("echo-user").error
    assert k.pm.hook.declared_event.has_spec()

    def native(name: str, choice: str | None) -> object:
        class Native:
            @hookimpl
            def declared_event(self, value):
                return f"{name}:{value}"

            @hookimpl
            def declared_choice(self, value):
                return choice

        return Native()

    assert k.pm.register(native("zulu", "zulu chose"), name="zulu") == "zulu"
    assert k.pm.register(native("Bravo", None), name="Bravo") == "Bravo"

    expected = ["Bravo:1", "declarer:1", "echo-user:1", "zulu:1"]
    assert k.invoke_hook("declared_event", value=1) == expected
    assert k.pm.hook.declared_event(value=1) == expected
    assert asyncio.run(k.ainvoke_hook("declared_event", value=1)) == expected

    # firstresult from the plugin's spec: Bravo and declarer say None, echo-user answers, zulu is not asked.
    assert k.pm.hook.declared_choice(value=2) == "echo-user chose 2"
    assert k.invoke_hook("declared_choice", value=2) == ["echo-user chose 2"]
    assert asyncio.run(k.ainvoke_hook("declared_choice", value=2)) == ["echo-user chose 2"]

    for name in ("declarer", "echo-user", "zulu", "Bravo"):
        assert warnings_of(Host("kernel", k.pm, k), name) == [], name


# --------------------------------------------------------------------------
# Monitoring and tracing
# --------------------------------------------------------------------------


def test_hookcall_monitoring_sees_pm_hook_calls(host: Host) -> None:
    """before/after monitors see the same sequence for pm.hook calls on both hosts; undo removes them."""
    host.register_all([("solo", collector("solo"))])
    events: list[tuple[Any, ...]] = []

    def before(hook_name: str, impls: Any, kwargs: Any) -> None:
        events.append(("before", hook_name, dict(kwargs)))

    def after(outcome: pluggy.Result[Any], hook_name: str, impls: Any, kwargs: Any) -> None:
        events.append(("after", hook_name, outcome.exception, outcome.get_result()))

    undo = host.pm.add_hookcall_monitoring(before, after)
    assert call_collect(host) == ["solo:1"]
    assert host.pm.hook.conf_first(arg1="x") is None
    undo()
    call_collect(host, arg1=3)
    assert events == [
        ("before", "conf_collect", {"arg1": 1, "arg2": 2}),
        ("after", "conf_collect", None, ["solo:1"]),
        ("before", "conf_first", {"arg1": "x"}),
        ("after", "conf_first", None, None),
    ]


def test_tracing_writes_the_same_lines_as_pluggy(make_kernel: Callable[..., Kernel]) -> None:
    """enable_tracing on k.pm writes what plain pluggy writes for the same pm.hook call."""

    def traced(pm: pluggy.PluginManager) -> list[str]:
        lines: list[str] = []
        pm.register(collector("solo"), name="solo")
        pm.trace.root.setwriter(lines.append)
        undo = pm.enable_tracing()
        pm.hook.conf_collect(arg1=1, arg2=2)
        undo()
        pm.hook.conf_collect(arg1=3, arg2=4)
        return lines

    plain_lines = traced(plain_pm())
    assert any("conf_collect" in line for line in plain_lines)
    assert any("finish" in line and "solo:1" in line for line in plain_lines)
    assert not any("3" in line for line in plain_lines)

    k = make_kernel()
    k.pm.add_hookspecs(Specs)
    assert traced(k.pm) == plain_lines


OBSERVED = """\
import json


def register(ctx):
    ctx.register_tool(
        "conf_tool",
        "conformance",
        {"description": "d", "parameters": {"type": "object", "properties": {}}},
        lambda args, **kw: json.dumps({"ok": True}),
    )
    ctx.register_hook("pre_llm_call", lambda **kw: "observed context")
    ctx.register_hook("pre_tool_call", lambda **kw: None)
    ctx.register_hook("post_tool_call", lambda **kw: None)
    ctx.register_hook("transform_tool_result", lambda **kw: None)
    ctx.register_hook("on_session_start", lambda **kw: "observed session")
"""


def test_monitoring_and_tracing_see_the_kernels_own_calls(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    """Monitors and tracing see invoke_hook, pre_llm_context and a tool dispatch's three hooks."""
    plugin_dir("observed", OBSERVED)
    k = make_kernel()
    assert k.plugin("observed").enabled, k.plugin("observed").error
    names: list[str] = []
    kwargs_seen: dict[str, dict[str, Any]] = {}
    results: dict[str, Any] = {}

    def before(hook_name: str, impls: Any, kwargs: Any) -> None:
        names.append(hook_name)
        kwargs_seen[hook_name] = dict(kwargs)

    def after(outcome: pluggy.Result[Any], hook_name: str, impls: Any, kwargs: Any) -> None:
        results[hook_name] = outcome.get_result()

    lines: list[str] = []
    k.pm.trace.root.setwriter(lines.append)
    undo_trace = k.pm.enable_tracing()
    undo = k.pm.add_hookcall_monitoring(before, after)

    assert k.invoke_hook("on_session_start", session_id="s1", model=None, platform=None) == [
        "observed session"
    ]
    assert k.pre_llm_context(user_message="hi") == "observed context"
    assert json.loads(k.tools.dispatch("conf_tool", {})) == {"ok": True}

    expected = [
        "on_session_start",
        "pre_llm_call",
        "pre_tool_call",
        "post_tool_call",
        "transform_tool_result",
    ]
    assert names == expected
    assert results["on_session_start"] == ["observed session"]
    assert results["pre_llm_call"] == ["observed context"]
    assert kwargs_seen["pre_llm_call"]["user_message"] == "hi"
    assert kwargs_seen["pre_tool_call"]["tool_name"] == "conf_tool"
    for hook_name in expected:
        assert any(hook_name in line for line in lines), hook_name

    undo()
    undo_trace()
    names.clear()
    lines.clear()
    k.invoke_hook("on_session_start", session_id="s2", model=None, platform=None)
    k.tools.dispatch("conf_tool", {})
    assert names == []
    assert lines == []


# --------------------------------------------------------------------------
# Blocking, unregistering
# --------------------------------------------------------------------------


def test_set_blocked_and_unblock_behave_as_in_pluggy(host: Host) -> None:
    """set_blocked refuses a name (register returns None) and unregisters it; unblock lifts that."""
    log: list[str] = []
    host.pm.set_blocked("blocked")
    assert host.pm.is_blocked("blocked")
    assert host.pm.register(collector("blocked", log), name="blocked") is None
    assert host.pm.get_plugin("blocked") is None
    assert not host.pm.has_plugin("blocked")
    assert call_collect(host) == []

    assert host.pm.unblock("blocked") is True
    assert host.pm.unblock("blocked") is False
    assert not host.pm.is_blocked("blocked")
    plugin = collector("blocked", log)
    assert host.pm.register(plugin, name="blocked") == "blocked"
    assert call_collect(host) == ["blocked:1"]

    host.pm.set_blocked("blocked")  # after registration: unregistered at once
    assert host.pm.is_blocked("blocked")
    assert not host.pm.is_registered(plugin)
    assert call_collect(host) == []
    assert log == ["blocked"]
    if host.is_kernel:
        assert host.k.invoke_hook("conf_collect", arg1=1, arg2=2) == []


BOTH_STYLES = """\
import json

import hook_sink

from kernel import hookimpl

hook_sink.calls.append("imported")


def register(ctx):
    hook_sink.calls.append("register")
    ctx.register_hook("pre_llm_call", lambda **kw: "hermes part")
    ctx.register_tool(
        "both_styles_tool",
        "conformance",
        {"description": "d", "parameters": {"type": "object", "properties": {}}},
        lambda args, **kw: json.dumps({"ran": True}),
    )


@hookimpl
def on_session_start(session_id):
    hook_sink.calls.append("hookimpl")
    return "native part"
"""

SESSION = {"session_id": "s1", "model": None, "platform": None}


def test_set_blocked_before_load_blocks_a_whole_directory_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    """A name blocked before load(): listed, not enabled, "blocked" error; neither of its parts runs."""
    plugin_dir("both-styles", BOTH_STYLES)
    plugin_dir("free", "def register(ctx):\n    ctx.register_hook('pre_llm_call', lambda **kw: 'free')\n")
    k = make_kernel(load=False)
    k.pm.set_blocked("both-styles")
    k.load()
    listed = {p.name: p for p in k.plugins}
    assert "both-styles" in listed
    info = listed["both-styles"]
    assert info.enabled is False
    assert "blocked" in (info.error or "").lower(), info.error
    assert sink.calls == []
    assert k.pm.is_blocked("both-styles")
    assert k.pm.get_plugin("both-styles") is None
    assert k.invoke_hook("on_session_start", **SESSION) == []
    assert k.pre_llm_context(user_message="x") == "free"
    assert "both_styles_tool" not in k.tools
    assert sink.calls == []
    assert listed["free"].enabled


def test_set_blocked_after_load_removes_a_whole_directory_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    """A name blocked after load(): its register(ctx) part and its @hookimpl part stop; unblock works."""
    plugin_dir("both-styles", BOTH_STYLES)
    k = make_kernel()
    assert k.plugin("both-styles").enabled, k.plugin("both-styles").error
    assert k.invoke_hook("on_session_start", **SESSION) == ["native part"]
    assert k.pre_llm_context(user_message="x") == "hermes part"
    assert sink.calls == ["imported", "register", "hookimpl"]

    k.pm.set_blocked("both-styles")
    assert k.pm.is_blocked("both-styles")
    assert k.pm.get_plugin("both-styles") is None
    assert k.invoke_hook("on_session_start", **SESSION) == []
    assert k.pm.hook.on_session_start(**SESSION) == []
    assert k.pre_llm_context(user_message="x") == ""
    assert "both_styles_tool" not in k.tools
    assert sink.calls == ["imported", "register", "hookimpl"]
    info = next(p for p in k.plugins if p.name == "both-styles")
    assert info.enabled is False
    assert "blocked" in (info.error or "").lower(), info.error

    assert k.pm.unblock("both-styles") is True
    assert not k.pm.is_blocked("both-styles")
    assert k.pm.unblock("both-styles") is False


def test_unregister_removes_a_plugin(host: Host) -> None:
    """unregister by object or by name: the plugin stops firing and leaves get_plugins on both hosts."""
    keep, drop = collector("keep"), collector("drop")
    host.register_all([("keep", keep), ("drop", drop)])
    assert sorted(call_collect(host)) == ["drop:1", "keep:1"]
    assert host.pm.unregister(drop) is drop
    assert call_collect(host) == ["keep:1"]
    assert drop not in host.pm.get_plugins()
    assert host.pm.get_name(drop) is None
    assert host.pm.get_hookcallers(drop) is None
    assert host.pm.unregister(name="keep") is keep
    assert call_collect(host) == []
    assert host.pm.unregister(name="never-registered") is None
    if host.is_kernel:
        names = [p.name for p in host.k.plugins]
        assert "drop" not in names and "keep" not in names
        assert host.k.invoke_hook("conf_collect", arg1=1, arg2=2) == []


def test_unregister_removes_a_hermes_style_directory_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    """k.pm.unregister(name=...) removes a Hermes-style plugin: its callbacks no longer fire."""
    plugin_dir("observed", OBSERVED)
    k = make_kernel()
    obj = k.pm.get_plugin("observed")
    assert obj is not None
    assert k.invoke_hook("on_session_start", **SESSION) == ["observed session"]
    assert k.pm.unregister(name="observed") is obj
    assert k.invoke_hook("on_session_start", **SESSION) == []
    llm_call = dict.fromkeys(k.pm.hook.pre_llm_call.spec.argnames) | {"user_message": "x"}
    assert k.pm.hook.pre_llm_call(**llm_call) == []
    assert k.pre_llm_context(**llm_call) == ""
    assert obj not in k.pm.get_plugins()
    assert k.pm.get_plugin("observed") is None


# --------------------------------------------------------------------------
# Adoption: before load, entry points, name-less, after shutdown
# --------------------------------------------------------------------------


class SlotCounter:
    """A pluggy-native plugin with a normal hook and a slot hook, counting both."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[str] = []

    @hookimpl
    def on_session_start(self, session_id):
        self.calls.append("on_session_start")
        return self.name

    @hookimpl
    def register_memory_providers(self, register):
        self.calls.append("register_memory_providers")


def test_plugins_registered_before_load_are_adopted_once(make_kernel: Callable[..., Kernel]) -> None:
    """k.pm.register before load(): one record, one call per hook call, the slot hook fired once."""
    k = make_kernel(load=False)
    early = SlotCounter("early")
    assert k.pm.register(early, name="early") == "early"
    k.load()
    assert [p.name for p in k.plugins].count("early") == 1
    assert k.plugin("early").enabled
    assert early.calls == ["register_memory_providers"]
    assert k.invoke_hook("on_session_start", **SESSION) == ["early"]
    assert k.pm.hook.on_session_start(**SESSION) == ["early"]
    assert early.calls == ["register_memory_providers", "on_session_start", "on_session_start"]
    assert k.pm.get_plugin("early") is early

    late = SlotCounter("late")
    k.pm.register(late, name="late")
    assert late.calls == ["register_memory_providers"]
    assert early.calls.count("register_memory_providers") == 1


@pytest.fixture(scope="module")
def conformance_dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """pip-install tests/fixtures/pluggy_conformance once into a private target directory (offline)."""
    return pip_install_fixture(CONF_FIXTURE, tmp_path_factory.mktemp("conformance-site"))


@pytest.fixture
def conf_ep(conformance_dist: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """The installed distribution on sys.path for one test; yields its package (``CALLS`` records calls)."""
    target = conformance_dist["target"]
    evict_package(CONF_PACKAGE)
    monkeypatch.syspath_prepend(str(target))
    monkeypatch.setenv("HERMES_KERNEL_ENTRY_POINTS", str(target))
    importlib.invalidate_caches()
    yield importlib.import_module(CONF_PACKAGE)
    evict_package(CONF_PACKAGE)
    importlib.invalidate_caches()


def test_load_setuptools_entrypoints(
    host: Host, conf_ep: types.ModuleType, conformance_dist: dict[str, Any]
) -> None:
    """Entry points of a real installed distribution register once, with their distribution, on both hosts."""
    assert conformance_dist["after"] == conformance_dist["before"]  # the source folder stays clean
    assert host.pm.load_setuptools_entrypoints(CONF_GROUP) == 2
    loaded = host.pm.list_plugin_distributions()
    registered = [host.pm.get_name(plugin) for plugin, _dist in loaded]
    assert registered == CONF_EP_NAMES
    assert {dist.metadata["Name"] for _plugin, dist in loaded} == {CONF_DISTRIBUTION}
    assert host.pm.load_setuptools_entrypoints(CONF_GROUP) == 0  # already registered

    result = call_collect(host)
    assert result == [f"{name}:1" for name in host.order(registered)]
    assert result == (
        ["conf-ep-alpha:1", "conf-ep-zulu:1"] if host.is_kernel else ["conf-ep-zulu:1", "conf-ep-alpha:1"]
    )
    collect_calls = [c for c in conf_ep.CALLS if c[1] == "conf_collect"]
    assert len(collect_calls) == 2
    if host.is_kernel:
        names = [p.name for p in host.k.plugins]
        for name in CONF_EP_NAMES:
            assert names.count(name) == 1
            assert host.k.plugin(name).enabled
        slot_calls = sorted(c[0] for c in conf_ep.CALLS if c[1] == "register_memory_providers")
        assert slot_calls == ["alpha", "zulu"]
        assert host.k.invoke_hook("conf_collect", arg1=1, arg2=2) == result


def test_load_setuptools_entrypoints_before_load_adopts_once(
    conf_ep: types.ModuleType, make_kernel: Callable[..., Kernel]
) -> None:
    """Entry points loaded into k.pm before load(): one record each, slot hooks and hooks fire once."""
    k = make_kernel(load=False)
    assert k.pm.load_setuptools_entrypoints(CONF_GROUP, name="conf-ep-zulu") == 1
    k.load()
    k.pm.add_hookspecs(Specs)
    assert [p.name for p in k.plugins].count("conf-ep-zulu") == 1
    assert "conf-ep-alpha" not in [p.name for p in k.plugins]
    assert [c for c in conf_ep.CALLS if c[1] == "register_memory_providers"] == [
        ("zulu", "register_memory_providers")
    ]
    assert k.invoke_hook("conf_collect", arg1=1, arg2=2) == ["conf-ep-zulu:1"]
    assert [c for c in conf_ep.CALLS if c[1] == "conf_collect"] == [("zulu", "conf_collect", 1)]


def conf_module_collect(arg1):
    return f"module:{arg1}"


def test_nameless_registration(host: Host) -> None:
    """A module is named by its __name__ on both; an instance by id in pluggy, by class in the kernel."""
    module = types.ModuleType("conf_nameless_module")
    module.conf_collect = hookimpl(conf_module_collect)  # type: ignore[attr-defined]
    assert host.pm.register(module) == "conf_nameless_module"

    obj = NamelessPlugin()
    name = host.pm.register(obj)
    if host.is_kernel:
        assert name == f"{NamelessPlugin.__module__}.{NamelessPlugin.__qualname__}"
        assert str(id(obj)) not in (name or "")
        assert host.k.plugin(name).enabled
        assert host.k.plugin("conf_nameless_module").enabled
    else:
        assert name == str(id(obj))
    assert name is not None
    assert host.pm.get_name(obj) == name
    assert host.pm.get_plugin(name) is obj
    assert sorted(call_collect(host)) == ["module:1", "nameless:1"]


def test_registration_after_shutdown_is_refused(make_kernel: Callable[..., Kernel]) -> None:
    """After k.shutdown(), k.pm.register and k.register raise PluginError, a ValueError."""
    assert issubclass(PluginError, ValueError)
    k = make_kernel()
    k.shutdown()
    plugin = collector("late")
    with pytest.raises(PluginError):
        k.pm.register(plugin, name="late")
    with pytest.raises(ValueError):
        k.pm.register(collector("late-nameless"))
    with pytest.raises(PluginError):
        k.register(collector("late2"), name="late2")
    assert not k.pm.is_registered(plugin)
    assert k.pm.get_plugin("late") is None


# --------------------------------------------------------------------------
# Introspection
# --------------------------------------------------------------------------


def test_get_plugins_get_hookcallers_and_list_name_plugin(host: Host) -> None:
    """The introspection calls agree on both hosts for pluggy-native plugins."""

    class Two:
        @hookimpl
        def conf_collect(self, arg1):
            return None

        @hookimpl
        def on_session_start(self, session_id):
            return None

    plugin = Two()
    host.register_all([("two", plugin)])
    assert plugin in host.pm.get_plugins()
    assert ("two", plugin) in host.pm.list_name_plugin()
    assert host.pm.is_registered(plugin)
    assert host.pm.has_plugin("two")
    assert host.pm.get_name(plugin) == "two"
    assert sorted(hc.name for hc in host.pm.get_hookcallers(plugin) or []) == [
        "conf_collect",
        "on_session_start",
    ]
    impls = host.pm.hook.conf_collect.get_hookimpls()
    assert [(i.plugin_name, i.plugin) for i in impls] == [("two", plugin)]
    assert host.pm.get_hookcallers(Two()) is None


def test_introspection_includes_hermes_style_directory_plugins(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    """A Hermes-style plugin has an object in k.pm; get_plugins, list_name_plugin, get_hookcallers see it."""
    plugin_dir("observed", OBSERVED)
    k = make_kernel()
    obj = k.pm.get_plugin("observed")
    assert obj is not None
    assert k.pm.get_name(obj) == "observed"
    assert k.pm.is_registered(obj)
    assert obj in k.pm.get_plugins()
    assert ("observed", obj) in k.pm.list_name_plugin()
    hooks = {hc.name for hc in k.pm.get_hookcallers(obj) or []}
    assert hooks >= {"pre_llm_call", "pre_tool_call", "post_tool_call", "transform_tool_result"}
    assert "on_session_start" in hooks
    assert k.pm.hook.on_session_start(**SESSION) == ["observed session"]


def test_subset_hook_caller(host: Host) -> None:
    """subset_hook_caller leaves out the given plugins and keeps the host's order for the rest."""
    plugins = {name: collector(name) for name in NAMES}
    host.register_all(list(plugins.items()))
    subset = host.pm.subset_hook_caller("conf_collect", [plugins["Mike"]])
    expected = [f"{name}:1" for name in host.order(NAMES) if name != "Mike"]
    assert subset(arg1=1, arg2=2) == expected
    assert host.pm.subset_hook_caller("conf_collect", [object()]) is host.pm.hook.conf_collect
    assert len(call_collect(host)) == 4


def test_subset_hook_caller_can_leave_out_a_hermes_style_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    """The object of a Hermes-style plugin works as a plugin to leave out of a subset hook caller."""
    plugin_dir("observed", OBSERVED)
    k = make_kernel()
    k.pm.register(SlotCounter("native"), name="native")
    assert k.pm.hook.on_session_start(**SESSION) == ["native", "observed session"]
    subset = k.pm.subset_hook_caller("on_session_start", [k.pm.get_plugin("observed")])
    assert subset(**SESSION) == ["native"]


def test_invoke_hook_and_pm_hook_are_the_same_call(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    """k.invoke_hook and k.pm.hook.<name> give the same results; invoke_hook is always a list."""
    plugin_dir("observed", OBSERVED)
    k = make_kernel()
    k.pm.add_hookspecs(Specs)
    k.pm.register(SlotCounter("Native"), name="Native")
    assert k.invoke_hook("on_session_start", **SESSION) == ["Native", "observed session"]
    assert k.pm.hook.on_session_start(**SESSION) == ["Native", "observed session"]

    assert k.pm.hook.conf_first(arg1=1) is None
    assert k.invoke_hook("conf_first", arg1=1) == []

    class Answer:
        @hookimpl
        def conf_first(self, arg1):
            return {"answer": arg1}

    k.pm.register(Answer(), name="answer")
    assert k.pm.hook.conf_first(arg1=1) == {"answer": 1}
    assert k.invoke_hook("conf_first", arg1=1) == [{"answer": 1}]
