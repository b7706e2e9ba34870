"""Hermes' ``register_tool`` in full: ``override=True`` and its trust gate, the ``tools.registry``
read helpers, multimodal results, and ``parent_agent`` reaching the handler.

Hermes Agent 0.19.0 is the peer: a plugin that is not bundled may override a tool only with
``plugins.entries.<id>.allow_tool_override: true`` (else ``PluginToolOverrideError``, and the plugin
fails to load); bundled plugins may always.  The peer itself is not run here (it is not installed on
CI machines); its rules were read from its source and are restated in docs/compatibility.md.
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from pathlib import Path

import yaml
from conftest import run_json, write_plugin

from kernel import Kernel
from kernel.tools import multimodal_content

SCHEMA = {"description": "Compute.", "parameters": {"type": "object", "properties": {}}}


def tool_plugin(name: str, reply: str, override: bool = False, via_registry: bool = False) -> str:
    """Plugin code registering tool ``calculate`` answering ``reply``."""
    call = (
        f"registry.register('calculate', {name!r}, SCHEMA, handler, override={override})"
        if via_registry
        else f"ctx.register_tool('calculate', {name!r}, SCHEMA, handler, emoji='🧮', override={override})"
    )
    return f"""
import json
from tools.registry import registry

SCHEMA = {SCHEMA!r}

def handler(args, **kwargs):
    return json.dumps({{"by": {reply!r}}})

def register(ctx):
    {call}
"""


def grant(home: Path, *plugins: str) -> None:
    entries = {name: {"allow_tool_override": True} for name in plugins}
    (home / "config.yaml").write_text(yaml.safe_dump({"plugins": {"entries": entries}}), encoding="utf-8")


def test_override_without_the_grant_fails_the_plugin_naming_the_key(
    bundled: Path, plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    write_plugin(bundled, "calc", tool_plugin("calc", "bundled"))
    plugin_dir("better", tool_plugin("better", "user", override=True))
    k = make_kernel()
    info = k.plugin("better")
    assert not info.enabled
    assert "plugins.entries.better.allow_tool_override: true" in (info.error or "")
    assert run_json(k.tools.dispatch("calculate", {})) == {"by": "bundled"}
    assert not [w for w in k.plugin("calc").warnings if "(override=True)" in w]


def test_override_with_the_grant_takes_the_tool_and_notes_it_on_both_plugins(
    home: Path, bundled: Path, plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    write_plugin(bundled, "calc", tool_plugin("calc", "bundled"))
    plugin_dir("better", tool_plugin("better", "user", override=True))
    grant(home, "better")
    k = make_kernel()
    assert k.plugin("better").enabled, k.plugin("better").error
    assert run_json(k.tools.dispatch("calculate", {})) == {"by": "user"}
    assert k.tools.get("calculate").plugin == "better"
    assert any("overrides the one plugin 'calc' registered" in w for w in k.plugin("better").warnings)
    assert any("is overridden by plugin 'better'" in w for w in k.plugin("calc").warnings)
    assert k.plugin("better").tools == ["calculate"] and k.plugin("calc").tools == ["calculate"]

    # The overriding plugin goes: the bundled tool comes back, and the note with it.
    k.unregister("better")
    assert run_json(k.tools.dispatch("calculate", {})) == {"by": "bundled"}
    assert not [w for w in k.plugin("calc").warnings if "(override=True)" in w]


def test_a_bundled_plugin_may_override_without_a_grant(
    bundled: Path, plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin_dir("a_user", tool_plugin("a_user", "user"))
    write_plugin(bundled, "z_bundled", tool_plugin("z_bundled", "bundled", override=True))
    k = make_kernel()
    assert k.plugin("z_bundled").enabled, k.plugin("z_bundled").error
    assert run_json(k.tools.dispatch("calculate", {})) == {"by": "bundled"}


def test_a_tool_registered_after_an_override_waits_beneath_it(
    home: Path, plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    """Load order does not decide: ``a_over`` loads first (alphabetical order) and holds the name;
    ``b_plain``'s tool is set aside beneath it (noted on both) and comes back when ``a_over`` goes."""
    plugin_dir("a_over", tool_plugin("a_over", "override", override=True))
    plugin_dir("b_plain", tool_plugin("b_plain", "plain"))
    grant(home, "a_over")
    k = make_kernel()
    assert k.plugin("b_plain").enabled and k.plugin("b_plain").tools == ["calculate"]
    assert any("is overridden by plugin 'a_over'" in w for w in k.plugin("b_plain").warnings)
    assert any("overrides the one plugin 'b_plain'" in w for w in k.plugin("a_over").warnings)
    assert run_json(k.tools.dispatch("calculate", {})) == {"by": "override"}
    k.unregister("b_plain")  # the one beneath goes first: nothing changes for the caller
    assert run_json(k.tools.dispatch("calculate", {})) == {"by": "override"}
    assert not [w for w in k.plugin("a_over").warnings if "(override=True)" in w]


def test_the_one_beneath_comes_back_when_the_override_goes(
    home: Path, plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin_dir("a_over", tool_plugin("a_over", "override", override=True))
    plugin_dir("b_plain", tool_plugin("b_plain", "plain"))
    grant(home, "a_over")
    k = make_kernel()
    k.unregister("a_over")
    assert run_json(k.tools.dispatch("calculate", {})) == {"by": "plain"}
    assert not [w for w in k.plugin("b_plain").warnings if "(override=True)" in w]


def test_the_hermes_registry_passes_override_on(
    home: Path, bundled: Path, plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    write_plugin(bundled, "calc", tool_plugin("calc", "bundled"))
    plugin_dir("better", tool_plugin("better", "user", override=True, via_registry=True))
    k = make_kernel()
    assert "allow_tool_override" in (k.plugin("better").error or "")
    grant(home, "better")
    k2 = make_kernel()
    assert run_json(k2.tools.dispatch("calculate", {})) == {"by": "user"}
    assert k2.plugin("better").warnings and not any(
        "ignored keyword" in w for w in k2.plugin("better").warnings
    )


READER = """
import hook_sink
from tools.registry import registry

def register(ctx):
    def look(raw, **kwargs):
        entry = registry.get_entry("calculate")
        hook_sink.calls.append({
            "toolsets": registry.get_registered_toolset_names(),
            "in_calc": registry.get_tool_names_for_toolset("calc"),
            "in_none": registry.get_tool_names_for_toolset("nothing-here"),
            "emoji": registry.get_emoji("calculate"),
            "emoji_default": registry.get_emoji("look_tool"),
            "emoji_unknown": registry.get_emoji("nope", default="?"),
            "entry": (entry.name, entry.toolset, entry.emoji, entry.is_async, entry.max_result_size_chars),
            "missing": registry.get_entry("nope"),
        })
        return "ok"
    ctx.register_command("look", look, description="look at the registry")
    ctx.register_tool("look_tool", "reader", {"description": "x", "parameters": {"type": "object",
                      "properties": {}}}, lambda args, **kw: "{}")
"""


def test_the_registry_read_helpers_hermes_plugins_call(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    plugin_dir("calc", tool_plugin("calc", "plain"))
    plugin_dir("reader", READER)
    k = make_kernel()
    assert k.commands.run("/look") == "ok"
    [seen] = sink.calls
    assert seen == {
        "toolsets": ["calc", "reader"],
        "in_calc": ["calculate"],
        "in_none": [],
        "emoji": "🧮",
        "emoji_default": "⚡",
        "emoji_unknown": "?",
        "entry": ("calculate", "calc", "🧮", False, None),
        "missing": None,
    }


MULTIMODAL = """
import hook_sink

def shot(args, **kwargs):
    if args.get("bad"):
        return {"_multimodal": True, "content": "not a list"}
    return {"text_summary": "a screenshot", "_multimodal": True, "content": [
        {"type": "text", "text": "the screen"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]}

def register(ctx):
    ctx.register_tool("screenshot", "screen", {"description": "x", "parameters": {"type": "object",
                      "properties": {"bad": {"type": "boolean"}}}}, shot)
    ctx.register_hook("post_tool_call", lambda **kw: hook_sink.calls.append((kw["status"], kw["result"])))
"""


def test_a_multimodal_result_passes_as_its_json_and_a_malformed_one_is_an_error(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    plugin_dir("screen", MULTIMODAL)
    k = make_kernel()
    result = k.tools.dispatch("screenshot", {})
    envelope = json.loads(result)
    assert envelope["_multimodal"] is True and envelope["text_summary"] == "a screenshot"
    assert result.startswith('{"_multimodal": true')
    parts = multimodal_content(result)
    assert parts is not None and [p["type"] for p in parts] == ["text", "image_url"]
    assert sink.calls == [("ok", result)]

    bad = run_json(k.tools.dispatch("screenshot", {"bad": True}))
    assert "returned dict, expected a JSON string" in bad["error"]
    assert sink.calls[-1][0] == "error"
    assert multimodal_content(json.dumps({"_multimodal": True, "content": "x"})) is None
    assert multimodal_content('{"result": 1}') is None


AGENT_TOOLS = """
import json
import types
import hook_sink

CTX = None

def seen(args, parent_agent=None, **kwargs):
    hook_sink.calls.append(("handler", getattr(parent_agent, "name", None), kwargs.get("session_id")))
    return "{}"

def relay(raw, **kwargs):
    agent = types.SimpleNamespace(name="parent", session_id="s-parent")
    return CTX.dispatch_tool("seen", {}, parent_agent=agent)

def register(ctx):
    global CTX
    CTX = ctx
    ctx.register_tool("seen", "agent", {"description": "x", "parameters": {"type": "object",
                      "properties": {}}}, seen)
    ctx.register_command("relay", relay, description="relay")
    ctx.register_hook("pre_tool_call", lambda **kw: hook_sink.calls.append(("hook", sorted(kw))))
"""


def test_parent_agent_reaches_the_handler_but_not_the_hooks(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    plugin_dir("agenttools", AGENT_TOOLS)
    k = make_kernel()
    k.commands.run("/relay")
    hook = next(c for c in sink.calls if c[0] == "hook")
    assert "parent_agent" not in hook[1]
    assert ("handler", "parent", "s-parent") in sink.calls


def test_override_of_a_name_no_one_holds_still_needs_the_grant(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    """As in Hermes, the gate is about the plugin, not about what exists now: a tool loaded later
    could otherwise be replaced without the user's consent."""
    plugin_dir("lonely", tool_plugin("lonely", "x", override=True))
    k = make_kernel()
    assert "allow_tool_override" in (k.plugin("lonely").error or "")
    assert "calculate" not in k.tools
