"""``ToolOptions`` and ``LlmOptions``: the options of ``register_tool`` and ``ctx.llm`` named once.

The one spelled-out signature of each (``ctx.register_tool``; the Hermes ``PluginLlm``'s methods, which
Hermes 0.19's surface fixes) must name exactly the TypedDict's keys with its defaults; every signature
that passes them on takes ``**options`` and still refuses a keyword it does not know.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any, get_type_hints

import pytest

from kernel import Kernel
from kernel.compat.shims.agent_plugin_llm import PluginLlm as HermesPluginLlm
from kernel.llm import LLM_DEFAULTS, STRUCTURED_DEFAULTS, LlmOptions, StructuredOptions
from kernel.tools.options import TOOL_OPTION_DEFAULTS, ToolOptions
from kernel.tools.service import Context as ToolsContext

SCHEMA = {"description": "Say hello.", "parameters": {"type": "object", "properties": {}}}
SPY = "import hook_sink\n\ndef register(ctx):\n    hook_sink.calls.append(ctx)\n"


def defaults_after(fn: Callable[..., Any], first: str) -> dict[str, Any]:
    """The parameters of ``fn`` after ``first``, in order, with their defaults."""
    params = list(inspect.signature(fn).parameters.values())
    names = [p.name for p in params]
    return {p.name: p.default for p in params[names.index(first) + 1 :]}


def test_ctx_register_tool_spells_exactly_the_tool_options_in_their_order() -> None:
    spelled = defaults_after(ToolsContext.register_tool, "handler")
    assert list(spelled) == list(get_type_hints(ToolOptions)) == list(TOOL_OPTION_DEFAULTS)
    assert spelled == TOOL_OPTION_DEFAULTS


@pytest.mark.parametrize(
    ("method", "options", "defaults"),
    [
        ("complete", LlmOptions, LLM_DEFAULTS),
        ("acomplete", LlmOptions, LLM_DEFAULTS),
        ("complete_structured", StructuredOptions, STRUCTURED_DEFAULTS),
        ("acomplete_structured", StructuredOptions, STRUCTURED_DEFAULTS),
    ],
)
def test_the_hermes_plugin_llm_spells_exactly_the_llm_options(
    method: str, options: type, defaults: dict[str, Any]
) -> None:
    params = inspect.signature(getattr(HermesPluginLlm, method)).parameters.values()
    spelled = {
        p.name: p.default
        for p in params
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not inspect.Parameter.empty
    }
    assert spelled == defaults
    assert set(get_type_hints(options)) == set(defaults)


def test_positional_options_reach_the_tool_through_ctx_and_the_hermes_registry(
    plugin_dir: Callable[..., Any], make_kernel: Callable[..., Kernel]
) -> None:
    plugin_dir(
        "positional",
        "from tools.registry import registry\n\n"
        f"SCHEMA = {SCHEMA!r}\n\n"
        "def check():\n    return True\n\n"
        "def hello(args, **kw):\n    return 'hi'\n\n"
        "def register(ctx):\n"
        "    ctx.register_tool('by_ctx', 'demo', SCHEMA, hello, check, ['HELLO_KEY'], False, 'ctx', 'C')\n"
        "    registry.register('by_hermes', 'demo', SCHEMA, hello, check, ['HELLO_KEY'], False, 'reg', 'R',\n"
        "                      max_result_size_chars=100)\n",
    )
    k = make_kernel()
    for name, description, emoji in (("by_ctx", "ctx", "C"), ("by_hermes", "reg", "R")):
        tool = k.tools.get(name)
        assert tool is not None, k.plugin("positional").error
        assert tool.check_fn is not None and tool.check_fn() is True
        assert (tool.requires_env, tool.description, tool.emoji) == (("HELLO_KEY",), description, emoji)
    # The keyword Hermes has and the kernel does not is noted on the plugin, not an error.
    assert any("max_result_size_chars" in w for w in k.plugin("positional").warnings)


def test_k_tools_register_refuses_an_unknown_keyword(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()

    def hello(args: dict[str, Any], **kw: Any) -> str:
        return "hi"

    with pytest.raises(TypeError, match="emojii"):
        k.tools.register("typo", "demo", SCHEMA, hello, plugin="someone", emojii="E")  # type: ignore[call-arg]
    assert k.tools.get("typo") is None


@pytest.mark.parametrize("structured", [False, True])
def test_ctx_llm_refuses_a_keyword_it_does_not_take_before_any_call(
    structured: bool,
    plugin_dir: Callable[..., Any],
    make_kernel: Callable[..., Kernel],
    sink: types.ModuleType,
) -> None:
    plugin_dir("caller", SPY)
    make_kernel()
    (ctx,) = sink.calls
    llm = ctx.llm
    with pytest.raises(TypeError, match="temprature"):
        if structured:
            llm.complete_structured(instructions="x", input=[{"type": "text", "text": "y"}], temprature=0)
        else:
            llm.complete([{"role": "user", "content": "hi"}], temprature=0)
    # A structured-only keyword is not one plain complete() takes.
    with pytest.raises(TypeError, match="json_mode"):
        llm.complete([{"role": "user", "content": "hi"}], json_mode=True)
