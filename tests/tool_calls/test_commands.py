"""Slash commands: ``ctx.register_command`` and ``k.commands`` (run, arun, built-ins, refusals).

Every plugin is a real directory under ``<home>/plugins``; handlers record their calls in the
``hook_sink`` module (the ``sink`` fixture).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, agent_log

from kernel import Kernel
from kernel.commands import BUILTIN_COMMANDS, normalize_command_name

HOST_ONLY = ("new", "reset", "model", "quit")
ANSWERED = ("help", "plugins", "tools", "skills")


def manifest(name: str, tools: tuple[str, ...] = (), hooks: tuple[str, ...] = (), **extra: Any) -> dict:
    return {
        "name": name,
        "version": "0.1.0",
        "provides_tools": list(tools),
        "provides_hooks": list(hooks),
        **extra,
    }


def command_plugin(plugin_dir: Callable[..., Path], name: str, body: str, header: str = "") -> Path:
    """A plugin whose ``register(ctx)`` runs ``body``; ``header`` is module-level code."""
    indented = "\n".join("    " + line for line in body.strip("\n").splitlines())
    code = f"import asyncio\nimport json\nimport hook_sink\n{header}\n\ndef register(ctx):\n{indented}\n"
    return plugin_dir(name, code, manifest=manifest(name))


def refusal_warnings(k: Kernel, plugin: str, word: str) -> list[str]:
    return [w for w in k.plugin(plugin).warnings if plugin in w and word in w]


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("/My Cmd", "my-cmd"),
        ("UPPER", "upper"),
        ("/deploy", "deploy"),
        ("  /Two  Words  ", "two-words"),
        ("plain", "plain"),
    ],
)
def test_normalize_command_name(raw, normalized):
    assert normalize_command_name(raw) == normalized


def test_registered_names_are_normalised(plugin_dir, make_kernel, sink):
    command_plugin(
        plugin_dir,
        "namer",
        """
ctx.register_command("/My Cmd", lambda raw: "my:" + raw, description="Mine")
ctx.register_command("UPPER", lambda raw: "upper:" + raw)
ctx.register_command("/slashed", lambda raw: "slashed:" + raw)
""",
    )
    k = make_kernel()
    info = k.plugin("namer")
    assert info.enabled, info.error
    assert sorted(info.commands) == ["my-cmd", "slashed", "upper"]
    assert k.commands.get("my-cmd").plugin == "namer"
    assert k.commands.get("/My Cmd").name == "my-cmd"
    assert k.commands.run("/my-cmd a") == "my:a"
    assert k.commands.run("/MY-CMD b") == "my:b"
    assert k.commands.run("/upper c") == "upper:c"
    assert k.commands.run("/Upper d") == "upper:d"
    assert k.commands.run("/slashed e") == "slashed:e"
    assert "/my-cmd" in k.commands.run("/help")


# --------------------------------------------------------------------------- handlers


@pytest.fixture
def handlers(plugin_dir, make_kernel, sink) -> Kernel:
    command_plugin(
        plugin_dir,
        "handlers",
        """
ctx.register_command("echo", echo, description="Echo the arguments", args_hint="<text>")
ctx.register_command("quiet", quiet, description="Say nothing")
ctx.register_command("later", later, description="Answer asynchronously")
ctx.register_command("boom", boom, description="Always fails")
ctx.register_command("bail", bail, description="Calls sys.exit")
ctx.register_command("aboom", aboom, description="Fails asynchronously")
""",
        header="""
import sys

def echo(raw):
    hook_sink.calls.append(("echo", raw))
    return "[" + raw + "]"

def quiet(raw):
    hook_sink.calls.append(("quiet", raw))
    return None

async def later(raw):
    await asyncio.sleep(0)
    hook_sink.calls.append(("later", raw))
    return "later:" + raw

def boom(raw):
    raise ValueError("kaput\\nwith a second line")

def bail(raw):
    sys.exit(3)

async def aboom(raw):
    await asyncio.sleep(0)
    raise RuntimeError("async kaput")
""",
    )
    k = make_kernel()
    assert k.plugin("handlers").enabled, k.plugin("handlers").error
    return k


def test_handler_gets_the_raw_argument_string(handlers, sink):
    assert handlers.commands.run("/echo   hello   world  ") == "[hello   world]"
    assert handlers.commands.run("/echo") == "[]"
    assert handlers.commands.run("  /ECHO a=1 b='two words' ") == "[a=1 b='two words']"
    assert handlers.commands.run('/echo {"json": [1, 2]}') == '[{"json": [1, 2]}]'
    assert [c[1] for c in sink.calls if c[0] == "echo"] == [
        "hello   world",
        "",
        "a=1 b='two words'",
        '{"json": [1, 2]}',
    ]


def test_handler_returning_none(handlers, sink):
    assert handlers.commands.run("/quiet please") is None
    assert sink.calls == [("quiet", "please")]
    assert asyncio.run(handlers.commands.arun("/quiet again")) is None


def test_async_handler_is_awaited_by_run_and_arun(handlers, sink):
    assert handlers.commands.run("/later one") == "later:one"
    assert asyncio.run(handlers.commands.arun("/later two")) == "later:two"
    assert [c[1] for c in sink.calls if c[0] == "later"] == ["one", "two"]


def test_sync_handler_through_arun(handlers):
    assert asyncio.run(handlers.commands.arun("/echo x y")) == "[x y]"


@pytest.mark.parametrize(("command", "detail"), [("boom", "kaput"), ("bail", "SystemExit")])
def test_raising_handler_gives_one_line_naming_the_plugin(handlers, home, command, detail):
    reply = handlers.commands.run(f"/{command}")
    assert isinstance(reply, str)
    assert "\n" not in reply, "the error reply must be one line"
    assert "handlers" in reply
    assert detail in reply
    assert f"/{command}" in reply
    # the session goes on
    assert handlers.commands.run("/echo still here") == "[still here]"
    assert handlers.commands.run(f"/{command}") is not None, "the command stays usable"
    log = agent_log(home)
    assert any("handlers" in line and command in line for line in log.splitlines()), log


def test_raising_async_handler_through_run_and_arun(handlers, home):
    for reply in (handlers.commands.run("/aboom"), asyncio.run(handlers.commands.arun("/aboom"))):
        assert isinstance(reply, str)
        assert "\n" not in reply
        assert "handlers" in reply
        assert "async kaput" in reply
    assert "async kaput" in agent_log(home)
    assert asyncio.run(handlers.commands.arun("/later next")) == "later:next"


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("spelling", ["plain", "slash-upper"])
@pytest.mark.parametrize("builtin", ANSWERED + HOST_ONLY)
def test_clash_with_a_builtin_is_refused_and_the_builtin_answers(
    plugin_dir, make_kernel, sink, builtin, spelling
):
    name = builtin if spelling == "plain" else "/" + builtin.upper()
    command_plugin(
        plugin_dir,
        "clasher",
        f"""
ctx.register_command({name!r}, grab, description="Stolen")
ctx.register_command("ok-cmd", lambda raw: "ok")
""",
        header="""
def grab(raw):
    hook_sink.calls.append(("grab", raw))
    return "PLUGIN ANSWER"
""",
    )
    k = make_kernel()
    info = k.plugin("clasher")
    assert info.enabled, info.error
    assert info.commands == ["ok-cmd"]
    assert refusal_warnings(k, "clasher", builtin), info.warnings
    assert k.commands.get(builtin).plugin is None
    reply = k.commands.run(f"/{builtin}")
    assert reply != "PLUGIN ANSWER"
    assert sink.calls == []
    if builtin == "help":
        assert reply.startswith("Commands:")
    elif builtin == "plugins":
        assert reply.startswith("Plugins (1):")
    elif builtin in HOST_ONLY:
        assert "handled by the chat session" in reply
    else:
        assert isinstance(reply, str) and reply
    assert k.commands.run("/ok-cmd") == "ok"


def test_second_plugin_taking_a_taken_name_is_refused(plugin_dir, make_kernel, sink):
    # written in reverse so that directory order cannot decide
    command_plugin(plugin_dir, "beta", 'ctx.register_command("Deploy", lambda raw: "beta deploys")')
    command_plugin(plugin_dir, "alpha", 'ctx.register_command("deploy", lambda raw: "alpha deploys")')
    k = make_kernel()
    assert k.commands.run("/deploy") == "alpha deploys"
    assert k.commands.get("deploy").plugin == "alpha"
    assert k.plugin("alpha").commands == ["deploy"]
    assert k.plugin("alpha").warnings == []
    beta = k.plugin("beta")
    assert beta.enabled, beta.error
    assert beta.commands == []
    warnings = refusal_warnings(k, "beta", "deploy")
    assert warnings, beta.warnings
    assert "alpha" in warnings[0]


@pytest.mark.parametrize("bad", ["", "   ", "/", " / "])
def test_invalid_names_are_refused(plugin_dir, make_kernel, sink, bad):
    command_plugin(
        plugin_dir,
        "sloppy",
        f"""
ctx.register_command({bad!r}, lambda raw: "nameless")
ctx.register_command("fine", lambda raw: "fine")
""",
    )
    k = make_kernel()
    info = k.plugin("sloppy")
    assert info.enabled, info.error
    assert info.commands == ["fine"]
    assert any("sloppy" in w for w in info.warnings), info.warnings
    assert all(c.name for c in k.commands.all())
    assert k.commands.run("/fine") == "fine"
    assert k.commands.run("/") != "nameless"


# --------------------------------------------------------------------------- unknown and built-ins


def test_unknown_command_suggests_close_names_and_help(plugin_dir, make_kernel, sink):
    command_plugin(plugin_dir, "weatherish", 'ctx.register_command("forecast", lambda raw: "sunny")')
    k = make_kernel()
    reply = k.commands.run("/forcast tomorrow")
    assert isinstance(reply, str)
    assert "/forecast" in reply
    assert "/help" in reply
    assert "forcast" in reply
    typo = k.commands.run("/hepl")
    assert "/help" in typo
    far = k.commands.run("/zzqqxxyy")
    assert "zzqqxxyy" in far
    assert "/help" in far
    assert asyncio.run(k.commands.arun("/forcast")) == k.commands.run("/forcast")


def test_help_lists_every_command_with_description_and_args_hint(plugin_dir, make_kernel, sink):
    command_plugin(
        plugin_dir,
        "weatherish",
        """
ctx.register_command(
    "forecast", lambda raw: "sunny", description="Show the forecast", args_hint="<city> [days]"
)
ctx.register_command("legacy", lambda raw: "old", help="Old-style help text")
""",
    )
    k = make_kernel()
    text = k.commands.run("/help")
    lines = text.splitlines()
    for command in k.commands.all():
        matching = [line for line in lines if f"/{command.name}" in line.split()]
        assert matching, (command.name, text)
        assert command.description in matching[0]
    for name, description in BUILTIN_COMMANDS.items():
        assert any(f"/{name}" in line.split() and description in line for line in lines), name
    forecast = [line for line in lines if "/forecast" in line]
    assert len(forecast) == 1
    assert "/forecast <city> [days]" in forecast[0]
    assert "Show the forecast" in forecast[0]
    assert any("/legacy" in line and "Old-style help text" in line for line in lines)


def test_plugins_prints_exactly_the_issue_shape(plugin_dir, home, bundled, monkeypatch):
    monkeypatch.delenv("WEATHER_API_KEY", raising=False)
    # The real bundled calculator, alone in the bundled directory.
    shutil.copytree(REPO / "extensions" / "calculator", bundled / "calculator")
    plugin_dir(
        "weather",
        """
def register(ctx):
    ctx.register_tool("weather_now", "weather", {"description": "Now.",
                      "parameters": {"type": "object", "properties": {}}}, lambda args, **kw: "{}")
""",
        manifest={
            "name": "weather",
            "version": "0.3.0",
            "requires_env": ["WEATHER_API_KEY"],
            "provides_tools": ["weather_now"],
        },
    )
    with Kernel(home=home) as k:
        k.load()
        assert k.commands.run("/plugins") == (
            "Plugins (2):\n"
            "  ✓ calculator v1.0.0 (2 tools, 1 hook)\n"
            "  ✗ weather v0.3.0 — Plugin weather disabled (missing: WEATHER_API_KEY)"
        )


def test_plugins_pluralises_counts_and_shows_failures(plugin_dir, make_kernel, sink):
    schema = '{"description": "d", "parameters": {"type": "object", "properties": {}}}'
    plugin_dir(
        "one",
        f"def register(ctx):\n    ctx.register_tool('t1', 'x', {schema}, lambda a, **k: '{{}}')\n",
        manifest=manifest("one", tools=("t1",)),
    )
    plugin_dir(
        "three",
        "def register(ctx):\n"
        + "".join(f"    ctx.register_tool('u{i}', 'x', {schema}, lambda a, **k: '{{}}')\n" for i in range(3))
        + "    ctx.register_hook('on_session_start', lambda **kw: None)\n"
        + "    ctx.register_hook('on_session_end', lambda **kw: None)\n"
        + "    ctx.register_hook('on_session_end', lambda **kw: None)\n",
        manifest=manifest("three", tools=("u0", "u1", "u2"), hooks=("on_session_start", "on_session_end")),
    )
    plugin_dir(
        "zero",
        "def register(ctx):\n    ctx.register_hook('pre_llm_call', lambda **kw: None)\n",
        manifest=manifest("zero", hooks=("pre_llm_call",)),
    )
    plugin_dir("broken", "def register(ctx):\n    raise RuntimeError('boom at load')\n")
    k = make_kernel()
    lines = k.commands.run("/plugins").splitlines()
    assert lines[0] == "Plugins (4):"
    assert lines[2:] == [
        "  ✓ one v0.1.0 (1 tool, 0 hooks)",
        "  ✓ three v0.1.0 (3 tools, 2 hooks)",
        "  ✓ zero v0.1.0 (0 tools, 1 hook)",
    ]
    assert lines[1].startswith("  ✗ broken v0.1.0 — ")
    assert "boom at load" in lines[1]


def test_tools_and_skills_answer(plugin_dir, make_kernel, sink):
    plugin_dir(
        "kit",
        """
from pathlib import Path

SCHEMA = {"description": "Ping the thing.", "parameters": {"type": "object", "properties": {}}}

def register(ctx):
    ctx.register_tool("ping", "kit", SCHEMA, lambda args, **kw: '"pong"')
    ctx.register_skill("howto", Path(__file__).parent / "skills" / "howto" / "SKILL.md")
""",
        files={"skills/howto/SKILL.md": "---\nname: howto\ndescription: How to ping.\n---\nPing it.\n"},
    )
    k = make_kernel()
    assert k.plugin("kit").enabled, k.plugin("kit").error
    tools = k.commands.run("/tools")
    assert "ping" in tools
    assert "Ping the thing." in tools
    skills = k.commands.run("/skills")
    assert "kit:howto" in skills
    assert "How to ping." in skills


def test_tools_and_skills_answer_when_empty(make_kernel):
    k = make_kernel()
    for name in ("tools", "skills"):
        reply = k.commands.run(f"/{name}")
        assert isinstance(reply, str) and reply.strip()


@pytest.mark.parametrize("builtin", HOST_ONLY)
def test_host_reserved_builtin_without_a_host_handler(make_kernel, builtin):
    k = make_kernel()
    reply = k.commands.run(f"/{builtin} extra words")
    assert f"/{builtin}" in reply
    assert "handled by the chat session" in reply


def test_host_handler_answers_a_reserved_builtin(make_kernel):
    k = make_kernel()
    seen: list[str] = []

    def new_session(raw: str) -> str:
        seen.append(raw)
        return "new session started"

    k.commands.set_host_handler("new", new_session)
    assert k.commands.run("/new  fresh start ") == "new session started"
    assert seen == ["fresh start"]
    assert asyncio.run(k.commands.arun("/NEW")) == "new session started"
    assert seen == ["fresh start", ""]
    # other reserved commands still say who handles them
    assert "handled by the chat session" in k.commands.run("/reset")


def test_raising_host_handler_does_not_end_the_session(make_kernel):
    k = make_kernel()

    def broken(raw: str) -> str:
        raise RuntimeError("host trouble")

    k.commands.set_host_handler("model", broken)
    reply = k.commands.run("/model gpt")
    assert "host trouble" in reply
    assert "\n" not in reply
    assert k.commands.run("/help").startswith("Commands:")


# --------------------------------------------------------------------------- lifecycle


def test_plugin_info_lists_its_commands(plugin_dir, make_kernel, sink):
    command_plugin(
        plugin_dir,
        "multi",
        """
ctx.register_command("b-cmd", lambda raw: "b")
ctx.register_command("a-cmd", lambda raw: "a")
""",
    )
    k = make_kernel()
    info = k.plugin("multi")
    assert sorted(info.commands) == ["a-cmd", "b-cmd"]
    assert sorted(info.to_dict()["commands"]) == ["a-cmd", "b-cmd"]
    assert {c.name for c in k.commands.all() if c.plugin == "multi"} == {"a-cmd", "b-cmd"}


def test_failed_register_rolls_its_commands_back(plugin_dir, make_kernel, sink):
    command_plugin(
        plugin_dir,
        "aaa_fail",
        """
ctx.register_command("deploy", lambda raw: "from the failed plugin")
ctx.register_command("solo", lambda raw: "solo")
raise RuntimeError("register gave up")
""",
    )
    command_plugin(plugin_dir, "bbb", 'ctx.register_command("deploy", lambda raw: "bbb deploys")')
    k = make_kernel()
    failed = k.plugin("aaa_fail")
    assert not failed.enabled
    assert "register gave up" in failed.error
    assert failed.commands == []
    assert k.commands.get("solo") is None
    assert "Unknown command" in k.commands.run("/solo") or "/help" in k.commands.run("/solo")
    assert k.commands.get("deploy").plugin == "bbb"
    assert k.commands.run("/deploy") == "bbb deploys"
    assert k.plugin("bbb").warnings == []


def test_unregister_and_shutdown_remove_plugin_commands(plugin_dir, make_kernel, sink):
    command_plugin(plugin_dir, "alpha", 'ctx.register_command("deploy", lambda raw: "alpha")')
    command_plugin(plugin_dir, "gamma", 'ctx.register_command("gamma-cmd", lambda raw: "gamma")')
    k = make_kernel()
    assert k.commands.run("/deploy") == "alpha"
    k.unregister("alpha")
    assert k.commands.get("deploy") is None
    assert "deploy" not in k.commands
    assert k.commands.run("/deploy") != "alpha"
    assert "/help" in k.commands.run("/deploy")
    assert k.commands.run("/gamma-cmd") == "gamma"
    k.shutdown()
    assert [c.name for c in k.commands.all() if c.plugin is not None] == []
    assert k.commands.get("help") is not None


def test_runtime_plugin_commands(make_kernel):
    k = make_kernel()

    class Runtime:
        def register(self, ctx: Any) -> None:
            ctx.register_command("rt", lambda raw: "runtime:" + raw, description="A runtime command")

    info = k.register(Runtime(), name="runtime_plugin")
    assert info.commands == ["rt"]
    assert k.commands.run("/rt go") == "runtime:go"
    k.unregister("runtime_plugin")
    assert k.commands.get("rt") is None
