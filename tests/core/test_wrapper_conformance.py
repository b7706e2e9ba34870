"""Wrappers are honoured on every path: each kernel helper that calls a hook uses the result of the
whole wrapped call, exactly what ``k.pm.hook.<name>(...)`` returns on the same kernel, then applies
its own rule (merge, first string, decisions).

For every hook of the contract and every helper that calls it, a wrapper of each style
(``wrapper=True`` and ``hookwrapper=True``) replaces, prepends to, appends to (in place) or only
observes the result of two plain plugins; the helper's answer must equal its rule applied to what
``k.pm.hook`` returns.
"""

from __future__ import annotations

import asyncio
import json
import types
from collections.abc import Callable
from typing import Any

import pytest
from conftest import run_json

from kernel import Kernel, hookimpl
from kernel.core.hooks import plain_text
from kernel.core.kernel import merge_context
from kernel.tools.decisions import MalformedDecision, merge_decisions, parse_decision

STYLES = ("new", "old")
MODES = ("replace", "prepend", "append", "observe")


def contract_hooks() -> list[str]:
    """Every hook of kernel/hookspecs.py, read from a bare kernel's registry."""
    k = Kernel(home="/nonexistent-hermes-home-for-hook-names")
    try:
        return k.hook_names
    finally:
        k.shutdown()


HOOKS = contract_hooks()


def plain_plugin(hook: str, value: Any) -> types.SimpleNamespace:
    """A Hermes-style plugin whose ``hook`` callback returns ``value``."""

    def callback(**kwargs: Any) -> Any:
        return value

    def register(ctx: Any) -> None:
        ctx.register_hook(hook, callback)

    return types.SimpleNamespace(register=register)


def wrapper_plugin(hook: str, style: str, mode: str, value: Any, seen: list[Any]) -> object:
    """A pluggy-native wrapper around ``hook`` of ``style`` that changes the result as ``mode`` says."""

    def changed(result: list[Any]) -> list[Any]:
        seen.append(list(result))
        if mode == "replace":
            return [value]
        if mode == "prepend":
            return [value, *result]
        if mode == "append":
            result.append(value)  # the very list it was given, changed in place
        return result

    if style == "new":

        def wrap(self: Any) -> Any:
            result = yield
            return changed(result)

        marked = hookimpl(wrapper=True, specname=hook)(wrap)
    else:

        def wrap(self: Any) -> Any:
            outcome = yield
            result = changed(outcome.get_result())
            if mode in ("replace", "prepend"):
                outcome.force_result(result)

        marked = hookimpl(hookwrapper=True, specname=hook)(wrap)
    return type(f"Wrapper_{hook}", (), {"wrap": marked})()


def call_kwargs(k: Kernel, hook: str) -> dict[str, Any]:
    """A value for every argument of ``hook``'s spec (``args`` as a dict, as the tool hooks take it)."""
    names = getattr(k.pm.hook, hook).spec.argnames
    return {name: ({"x": "model"} if name == "args" else f"<{name}>") for name in names}


def first_string(results: list[Any]) -> str | None:
    """``first_text``'s rule (``allow_empty=True``) applied to a list of answers."""
    for value in results:
        text = plain_text(value)
        if text is not None:
            return text
    return None


def values(raw: Any) -> list[Any]:
    return [v for v in raw if v is not None]


# helper name -> (hooks it applies to or None for all, call, rule applied to k.pm.hook's result)
Helper = tuple[Callable[[Kernel, str, dict[str, Any]], Any], Callable[[Any], Any]]
HELPERS: dict[str, Helper] = {
    "invoke_hook": (lambda k, h, kw: k.invoke_hook(h, **kw), list),
    "ainvoke_hook": (lambda k, h, kw: asyncio.run(k.ainvoke_hook(h, **kw)), list),
    "read_hook": (lambda k, h, kw: k.read_hook(h, lambda v: v, **kw), values),
    "aread_hook": (lambda k, h, kw: asyncio.run(k.aread_hook(h, lambda v: v, **kw)), values),
    "first_text": (lambda k, h, kw: k.first_text(h, allow_empty=True, **kw), first_string),
    "afirst_text": (lambda k, h, kw: asyncio.run(k.afirst_text(h, allow_empty=True, **kw)), first_string),
}
CONTEXT_HELPERS: dict[str, Helper] = {
    "pre_llm_context": (lambda k, h, kw: k.pre_llm_context(**kw), merge_context),
    "apre_llm_context": (lambda k, h, kw: asyncio.run(k.apre_llm_context(**kw)), merge_context),
}
CASES = [(hook, helper) for hook in HOOKS for helper in HELPERS] + [
    ("pre_llm_call", helper) for helper in CONTEXT_HELPERS
]


def wrapped_kernel(
    make_kernel: Callable[..., Kernel], hook: str, style: str, mode: str, answers: tuple[Any, Any], extra: Any
) -> tuple[Kernel, list[Any]]:
    """A kernel with two plain plugins answering ``answers`` on ``hook`` and one wrapper adding ``extra``."""
    k = make_kernel()
    k.register(plain_plugin(hook, answers[0]), name="a_plain")
    k.register(plain_plugin(hook, answers[1]), name="b_plain")
    seen: list[Any] = []
    k.register(wrapper_plugin(hook, style, mode, extra, seen), name="w_wrapper")
    return k, seen


def test_every_contract_hook_is_covered() -> None:
    """The list the cases are made from is the kernel's contract, not an empty or partial one."""
    for hook in ("pre_tool_call", "post_tool_call", "transform_tool_result", "pre_llm_call"):
        assert hook in HOOKS
    assert "transform_llm_output" in HOOKS and "pre_gateway_dispatch" in HOOKS


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize(("hook", "helper"), CASES)
def test_helper_answers_as_pm_hook_does(
    make_kernel: Callable[..., Kernel], hook: str, helper: str, style: str, mode: str
) -> None:
    """``helper`` on ``hook`` gives its rule applied to ``k.pm.hook.<hook>(...)``'s result."""
    call, rule = {**HELPERS, **CONTEXT_HELPERS}[helper]
    k, seen = wrapped_kernel(
        make_kernel, hook, style, mode, ("from a", {"context": "from b"}), "from wrapper"
    )
    kwargs = call_kwargs(k, hook)
    got = call(k, hook, kwargs)
    raw = getattr(k.pm.hook, hook)(**kwargs)
    assert got == rule(raw)
    assert len(seen) == 2, "the wrapper runs on the helper's path and on k.pm.hook's"
    if mode != "observe":
        assert "from wrapper" in raw  # the case really changes the result
    assert k.plugin("w_wrapper").hook_errors == {}


# --------------------------------------------------------------------------
# The tool pipeline: pre_tool_call decisions and transform_tool_result
# --------------------------------------------------------------------------


def probe_tool(calls: list[dict[str, Any]]) -> types.SimpleNamespace:
    """A plugin registering tool ``probe``, which records and echoes its arguments."""

    def handler(args: dict[str, Any], **kwargs: Any) -> str:
        calls.append(dict(args))
        return json.dumps({"echo": args}, sort_keys=True)

    schema = {"name": "probe", "description": "Echo.", "parameters": {"type": "object", "properties": {}}}

    def register(ctx: Any) -> None:
        ctx.register_tool("probe", "conformance", schema, handler)

    return types.SimpleNamespace(register=register)


def verdict_of(raw: list[Any], args: dict[str, Any]) -> Any:
    decisions = []
    for value in values(raw):
        try:
            decision = parse_decision(value)
        except MalformedDecision:
            continue
        if decision is not None:
            decisions.append(("?", decision))
    return merge_decisions(args, decisions)


WRAPPER_DECISIONS = {
    "modify": {"action": "modify", "args": {"x": "wrapper"}},
    "block": {"action": "block", "message": "the wrapper blocks"},
}


@pytest.mark.parametrize("decision", sorted(WRAPPER_DECISIONS))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("style", STYLES)
def test_dispatch_decides_on_the_wrapped_pre_tool_call_result(
    make_kernel: Callable[..., Kernel], style: str, mode: str, decision: str
) -> None:
    """``k.tools.dispatch`` merges the decisions ``k.pm.hook.pre_tool_call`` returns, wrapper's included."""
    answers = ({"action": "modify", "args": {"x": "a", "y": "a"}}, None)
    k, seen = wrapped_kernel(make_kernel, "pre_tool_call", style, mode, answers, WRAPPER_DECISIONS[decision])
    calls: list[dict[str, Any]] = []
    k.register(probe_tool(calls), name="toolbox")
    got = run_json(k.tools.dispatch("probe", {"x": "model"}))
    verdict = verdict_of(k.pm.hook.pre_tool_call(**call_kwargs(k, "pre_tool_call")), {"x": "model"})
    if verdict.blocked is not None:
        assert got == {"error": verdict.blocked}
        assert calls == []
    else:
        assert got == {"echo": verdict.args}
        assert calls == [verdict.args]
    assert len(seen) == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("style", STYLES)
def test_dispatch_returns_the_wrapped_transform_tool_result(
    make_kernel: Callable[..., Kernel], style: str, mode: str
) -> None:
    """The tool result is the first string of what ``k.pm.hook.transform_tool_result`` returns."""
    answers = ('{"from": "a"}', None)
    k, seen = wrapped_kernel(
        make_kernel, "transform_tool_result", style, mode, answers, '{"from": "wrapper"}'
    )
    k.register(probe_tool([]), name="toolbox")
    got = k.tools.dispatch("probe", {"x": "model"})
    raw = k.pm.hook.transform_tool_result(**call_kwargs(k, "transform_tool_result"))
    assert got == first_string(raw)
    assert len(seen) == 2


@pytest.mark.parametrize("style", STYLES)
def test_dispatch_runs_post_tool_call_wrappers(make_kernel: Callable[..., Kernel], style: str) -> None:
    """Observers of a tool call are wrapped too: the wrapper sees the observers' answers."""
    k, seen = wrapped_kernel(make_kernel, "post_tool_call", style, "observe", ("seen a", None), None)
    k.register(probe_tool([]), name="toolbox")
    k.tools.dispatch("probe", {"x": "model"})
    assert seen == [["seen a"]]


@pytest.mark.parametrize("style", STYLES)
def test_a_wrappers_unreadable_answer_disables_the_wrapper_not_a_plugin(
    make_kernel: Callable[..., Kernel], style: str
) -> None:
    """A value only the wrapper gave is the wrapper's: when reading it fails, the wrapper is disabled
    and the plain plugins' pieces still merge."""

    class Unrenderable:
        def __str__(self) -> str:
            raise RuntimeError("cannot render")

    k, _ = wrapped_kernel(
        make_kernel, "pre_llm_call", style, "prepend", ("from a", None), {"context": Unrenderable()}
    )
    kwargs = call_kwargs(k, "pre_llm_call")
    assert k.pre_llm_context(**kwargs) == "from a"
    assert k.plugin("w_wrapper").hook_errors != {}
    assert k.plugin("a_plain").hook_errors == {}
    assert k.pre_llm_context(**kwargs) == "from a"
