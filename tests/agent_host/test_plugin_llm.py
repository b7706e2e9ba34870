"""``ctx.llm`` end to end: the bundled ``/tldr`` and ``/paste-to-tasks`` commands, and plugins written
here, call a real chat-completions server on 127.0.0.1 through real kernels; the tests read back the exact
request bodies, the results, the trust gate's refusals and grants (from config.yaml, re-read on every
call) and the audit lines.
"""

from __future__ import annotations

import asyncio
import base64
import json
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, agent_log, write_plugin
from local_server import LocalServer, Reply, Seen

from kernel import Kernel
from kernel.llm import (
    PluginLlm,
    PluginLlmCompleteResult,
    PluginLlmError,
    PluginLlmStructuredResult,
    PluginLlmTrustError,
    PluginLlmUsage,
)

API_KEY = "sk-test-plugin-llm-0077"
TLDR_SYSTEM = "Summarize the user's text in one short paragraph. No preamble."
TASKS_INSTRUCTIONS = (
    "Extract the concrete action items from these meeting notes. "
    "One task per line that calls for an action. Leave 'owner' empty when nobody is named."
)
TASKS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tasks": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "owner": {"type": "string"},
                    "action": {"type": "string"},
                    "due": {"type": "string", "description": "ISO date or empty"},
                },
                "required": ["action"],
            },
        },
    },
    "required": ["tasks"],
}
RAW_OUTPUT = "Could not parse the reply. Raw output:\n"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01fake-pixels"
SPY = "import hook_sink\n\ndef register(ctx):\n    hook_sink.calls.append(ctx)\n"


@pytest.fixture(autouse=True)
def bundled_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkout's bundled plugins (tldr, paste-to-tasks, the model providers, ...)."""
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(REPO / "extensions"))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def _servers() -> Iterator[tuple[LocalServer, LocalServer]]:
    with LocalServer() as first, LocalServer() as second:
        yield first, second


@pytest.fixture
def server(_servers: tuple[LocalServer, LocalServer]) -> Iterator[LocalServer]:
    """The user's own OpenAI-compatible endpoint."""
    _servers[0].reset()
    yield _servers[0]
    _servers[0].reset()


@pytest.fixture
def other_server(_servers: tuple[LocalServer, LocalServer]) -> Iterator[LocalServer]:
    """The endpoint of the ``second`` provider (a user provider plugin)."""
    _servers[1].reset()
    yield _servers[1]
    _servers[1].reset()


def chat_body(text: str | None, *, model: str = "m1", usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-plugin-llm",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": usage or {"prompt_tokens": 21, "completion_tokens": 5, "total_tokens": 26},
    }


def ok(text: str, **kw: Any) -> Reply:
    return Reply(200, chat_body(text, **kw))


def model_config(server: LocalServer) -> dict[str, Any]:
    return {"provider": "openai-compatible", "model": "m1", "base_url": server.base_url, "api_key": API_KEY}


def write_config(home: Path, data: dict[str, Any]) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")


def gate(home: Path, server: LocalServer, plugin_id: str, **llm: Any) -> None:
    """config.yaml: the user's model plus ``plugins.entries.<plugin_id>.llm`` (nothing when empty)."""
    data: dict[str, Any] = {"model": model_config(server)}
    if llm:
        data["plugins"] = {"entries": {plugin_id: {"llm": llm}}}
    write_config(home, data)


@pytest.fixture
def hermes(tmp_path: Path) -> Path:
    path = tmp_path / "hermes"
    path.mkdir()
    return path


@pytest.fixture
def kernel(hermes: Path, server: LocalServer) -> Iterator[Callable[..., Kernel]]:
    """``kernel(write=True)``: a loaded kernel in ``hermes``, config.yaml naming ``server`` if write."""
    made: list[Kernel] = []

    def make(write: bool = True, config: dict[str, Any] | None = None) -> Kernel:
        if write and not (hermes / "config.yaml").exists():
            write_config(hermes, {"model": model_config(server)})
        k = Kernel(home=hermes, config=config)
        made.append(k)
        k.load()
        return k

    yield make
    for k in made:
        k.shutdown()


@pytest.fixture
def spy(hermes: Path, sink: types.ModuleType) -> Callable[[str], Any]:
    """``spy(dirname)`` writes a user plugin that hands its ctx over; ``sink.ctx(plugin_id)`` finds it."""

    def write(dirname: str) -> None:
        write_plugin(hermes / "plugins", dirname, SPY)

    def ctx(plugin_id: str) -> Any:
        found = [c for c in sink.calls if c.plugin_id == plugin_id]
        assert len(found) == 1, [c.plugin_id for c in sink.calls]
        return found[0]

    sink.ctx = ctx  # type: ignore[attr-defined]
    return write


def llm_of(sink: types.ModuleType, plugin_id: str) -> PluginLlm:
    llm = sink.ctx(plugin_id).llm
    assert isinstance(llm, PluginLlm)
    return llm


def audit_lines(home: Path, event: str) -> list[str]:
    return [line for line in agent_log(home).splitlines() if f" {event} " in f" {line} "]


USER = [{"role": "user", "content": "ping"}]


# --------------------------------------------------------------------------
# The bundled /tldr
# --------------------------------------------------------------------------


def test_tldr_sends_the_seed_request_and_returns_the_reply(
    kernel: Callable[..., Kernel], server: LocalServer, hermes: Path
) -> None:
    server.program(ok("A short summary."))
    k = kernel()
    info = k.plugin("tldr")
    assert info is not None and info.enabled and info.error is None, info
    assert k.commands.get("tldr") is not None and k.commands.get("tldr").plugin == "tldr"

    reply = k.commands.run("/tldr  some long text\nwith two lines  ")
    assert reply == "A short summary."

    (seen,) = server.posts()
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {API_KEY}"
    assert seen.json == {
        "model": "m1",
        "messages": [
            {"role": "system", "content": TLDR_SYSTEM},
            {"role": "user", "content": "some long text\nwith two lines"},
        ],
        "max_tokens": 256,
        "temperature": 0.3,
    }
    (line,) = audit_lines(hermes, "plugin_llm.complete")
    assert "plugin=tldr" in line and "purpose=tldr" in line, line
    assert "provider=openai-compatible" in line and "model=m1" in line, line


def test_tldr_without_text_answers_the_usage_and_calls_nothing(
    kernel: Callable[..., Kernel], server: LocalServer
) -> None:
    k = kernel()
    assert k.commands.run("/tldr   ") == "Usage: /tldr <text to summarize>"
    assert server.posts() == []


def test_tldr_follows_the_user_when_the_provider_changes(
    kernel: Callable[..., Kernel], server: LocalServer, other_server: LocalServer, hermes: Path
) -> None:
    """No setting of the plugin changes: it uses whatever model.* says."""
    write_config(hermes, {"model": {**model_config(other_server), "model": "big-2"}})
    other_server.program(ok("From the other endpoint.", model="big-2"))
    k = kernel()
    assert k.commands.run("/tldr hello") == "From the other endpoint."
    assert server.posts() == []
    (seen,) = other_server.posts()
    assert seen.json["model"] == "big-2"


def test_a_provider_failure_surfaces_as_a_plugin_llm_error_with_the_servers_message(
    kernel: Callable[..., Kernel], server: LocalServer, spy: Callable[[str], Any], sink: types.ModuleType
) -> None:
    server.program(Reply(400, {"error": {"message": "context length 9999 exceeds the limit"}}))
    spy("caller")
    k = kernel()
    with pytest.raises(PluginLlmError) as caught:
        llm_of(sink, "caller").complete(USER)
    assert "context length 9999 exceeds the limit" in str(caught.value)
    assert len(server.posts()) == 1, "a 400 is not retried"

    # Through the command: the handler's error becomes the command's one-line failure.
    server.program(Reply(400, {"error": {"message": "bad request: temperature"}}))
    reply = k.commands.run("/tldr some text")
    assert reply is not None and reply.startswith("/tldr failed (plugin 'tldr'): PluginLlmError"), reply
    assert "bad request: temperature" in reply


def test_no_configured_model_is_a_plugin_llm_error_saying_so(
    kernel: Callable[..., Kernel], server: LocalServer, spy: Callable[[str], Any], sink: types.ModuleType
) -> None:
    spy("caller")
    kernel(write=False)
    with pytest.raises(PluginLlmError) as caught:
        llm_of(sink, "caller").complete(USER)
    assert "model.provider" in str(caught.value) and "configured" in str(caught.value)
    assert server.posts() == []


# --------------------------------------------------------------------------
# The bundled /paste-to-tasks
# --------------------------------------------------------------------------

NOTES = "Ana sends the deck by Friday.\nSomeone books a room.\nWe talked about lunch."
TASKS = {
    "tasks": [
        {"owner": "Ana", "action": "send the deck", "due": "2026-12-04"},
        {"owner": "", "action": "book a room"},
    ]
}
TASK_LINES = "- [Ana] send the deck\n- [?] book a room"


def test_paste_to_tasks_asks_for_the_schema_and_renders_the_parsed_tasks(
    kernel: Callable[..., Kernel], server: LocalServer, hermes: Path
) -> None:
    server.program(ok(json.dumps(TASKS)))
    k = kernel()
    assert k.commands.run(f"/paste-to-tasks {NOTES}") == TASK_LINES

    (seen,) = server.posts()
    body = seen.json
    assert body["model"] == "m1"
    assert body["temperature"] == 0.0 and body["max_tokens"] == 512
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "meeting.tasks", "schema": TASKS_SCHEMA, "strict": False},
    }
    system, user = body["messages"]
    assert system["role"] == "system" and "JSON" in system["content"]
    assert user["role"] == "user"
    instructions, text = user["content"]
    assert text == {"type": "text", "text": NOTES}
    assert instructions["type"] == "text"
    assert instructions["text"].startswith(TASKS_INSTRUCTIONS)
    assert "Schema name: meeting.tasks" in instructions["text"]
    head, _, schema_text = instructions["text"].partition("JSON schema:")
    assert head and json.loads(schema_text) == TASKS_SCHEMA
    assert schema_text.strip() == json.dumps(TASKS_SCHEMA, sort_keys=True, indent=2)

    (line,) = audit_lines(hermes, "plugin_llm.complete_structured")
    assert "plugin=paste-to-tasks" in line and "purpose=paste-to-tasks" in line, line


def test_paste_to_tasks_parses_a_fenced_json_block(
    kernel: Callable[..., Kernel], server: LocalServer
) -> None:
    server.program(ok("Here they are:\n```json\n" + json.dumps(TASKS, indent=1) + "\n```\nAnything else?"))
    k = kernel()
    assert k.commands.run(f"/paste-to-tasks {NOTES}") == TASK_LINES


def test_paste_to_tasks_with_no_tasks(kernel: Callable[..., Kernel], server: LocalServer) -> None:
    server.program(ok('{"tasks": []}'))
    assert kernel().commands.run("/paste-to-tasks nothing to do") == "(no tasks found)"


@pytest.mark.parametrize(
    "raw",
    [
        "Sorry, I could not find any tasks.",  # not JSON at all
        '{"tasks": [{"owner": "Ana"}]}',  # JSON, but a task without the required action
        '{"items": ["send the deck"]}',  # JSON, but no "tasks"
        '```json\n{"tasks": [\n```',  # a fenced block that is not valid JSON
    ],
)
def test_paste_to_tasks_falls_back_to_the_raw_output(
    raw: str,
    kernel: Callable[..., Kernel],
    server: LocalServer,
    spy: Callable[[str], Any],
    sink: types.ModuleType,
) -> None:
    server.program(ok(raw))
    spy("caller")
    k = kernel()
    assert k.commands.run(f"/paste-to-tasks {NOTES}") == RAW_OUTPUT + raw

    # The same reply seen from the API: nothing raises, parsed is None, the text is the raw reply.
    server.program(ok(raw))
    result = llm_of(sink, "caller").complete_structured(
        instructions="Extract tasks.", input=[{"type": "text", "text": NOTES}], json_schema=TASKS_SCHEMA
    )
    assert isinstance(result, PluginLlmStructuredResult)
    assert result.parsed is None and result.content_type == "text" and result.text == raw


def test_paste_to_tasks_without_notes_answers_the_usage(
    kernel: Callable[..., Kernel], server: LocalServer
) -> None:
    assert kernel().commands.run("/paste-to-tasks") == "Usage: /paste-to-tasks <meeting notes>"
    assert server.posts() == []


# --------------------------------------------------------------------------
# complete_structured from a plugin of the test: images, json_mode, errors
# --------------------------------------------------------------------------


def test_images_go_as_a_data_url_and_as_the_url_itself(
    kernel: Callable[..., Kernel], server: LocalServer, spy: Callable[[str], Any], sink: types.ModuleType
) -> None:
    server.program(ok('{"caption": "a pixel", "count": 2}'))
    spy("vision")
    kernel()
    result = llm_of(sink, "vision").complete_structured(
        instructions="Caption these images.",
        input=[
            {"type": "text", "text": "Two images follow."},
            {"type": "image", "data": PNG, "mime_type": "image/png"},
            {"type": "image", "url": "https://example.invalid/x.png"},
        ],
        json_mode=True,
        system_prompt="You caption images.",
        purpose="vision.caption",
    )
    assert result.parsed == {"caption": "a pixel", "count": 2}
    assert result.content_type == "json"
    assert result.audit["plugin_id"] == "vision" and result.audit["purpose"] == "vision.caption"

    (seen,) = server.seen  # one request, and the server never fetched the image URL
    assert seen.method == "POST" and seen.path == "/v1/chat/completions"
    body = seen.json
    assert body["response_format"] == {"type": "json_object"}
    system, user = body["messages"]
    assert system["role"] == "system" and system["content"].startswith("You caption images.")
    assert "JSON" in system["content"]
    assert user["content"] == [
        {"type": "text", "text": "Caption these images."},
        {"type": "text", "text": "Two images follow."},
        {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
        },
        {"type": "image_url", "image_url": {"url": "https://example.invalid/x.png"}},
    ]


def test_without_schema_or_json_mode_the_reply_is_text(
    kernel: Callable[..., Kernel], server: LocalServer, spy: Callable[[str], Any], sink: types.ModuleType
) -> None:
    server.program(ok("just prose"))
    spy("caller")
    kernel()
    result = llm_of(sink, "caller").complete_structured(
        instructions="Say something.", input=[{"type": "text", "text": "x"}]
    )
    assert result.text == "just prose" and result.parsed is None and result.content_type == "text"
    body = server.posts()[0].json
    assert "response_format" not in body
    assert [m["role"] for m in body["messages"]] == ["user"]


@pytest.mark.parametrize(
    ("instructions", "blocks"),
    [
        ("", [{"type": "text", "text": "x"}]),
        ("   ", [{"type": "text", "text": "x"}]),
        ("Do it.", []),
        ("Do it.", [{"type": "audio", "data": b"RIFF"}]),
        ("Do it.", [{"type": "text", "text": "x"}, {"kind": "text", "text": "no type"}]),
    ],
)
def test_bad_structured_input_is_a_value_error_before_any_request(
    instructions: str,
    blocks: list[dict[str, Any]],
    kernel: Callable[..., Kernel],
    server: LocalServer,
    spy: Callable[[str], Any],
    sink: types.ModuleType,
) -> None:
    spy("caller")
    kernel()
    llm = llm_of(sink, "caller")
    with pytest.raises(ValueError):
        llm.complete_structured(instructions=instructions, input=blocks, json_schema=TASKS_SCHEMA)
    with pytest.raises(ValueError):
        asyncio.run(llm.acomplete_structured(instructions=instructions, input=blocks))
    assert server.posts() == []


# --------------------------------------------------------------------------
# Results: provider, model, usage, audit
# --------------------------------------------------------------------------


def test_result_carries_provider_model_usage_and_audit(
    kernel: Callable[..., Kernel], server: LocalServer, spy: Callable[[str], Any], sink: types.ModuleType
) -> None:
    server.program(
        ok(
            "pong",
            model="m1-2026-01",
            usage={"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49},
        )
    )
    spy("caller")
    kernel()
    result = llm_of(sink, "caller").complete(USER, purpose="health.ping")
    assert isinstance(result, PluginLlmCompleteResult)
    assert result.text == "pong"
    assert result.provider == "openai-compatible"
    assert result.model == "m1-2026-01"  # what the provider said it used
    assert result.agent_id == "default"
    assert isinstance(result.usage, PluginLlmUsage)
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.total_tokens) == (40, 9, 49)
    assert result.usage.cost_usd is None, "no prices and no reported cost: the cost is unknown"
    assert result.audit == {"plugin_id": "caller", "purpose": "health.ping", "profile": None}
    assert server.posts()[0].json == {"model": "m1", "messages": USER}


def test_every_call_writes_one_audit_line_with_the_tokens(
    kernel: Callable[..., Kernel],
    server: LocalServer,
    spy: Callable[[str], Any],
    sink: types.ModuleType,
    hermes: Path,
) -> None:
    server.set_default(ok("fine", usage={"prompt_tokens": 31, "completion_tokens": 4, "total_tokens": 35}))
    spy("auditor")
    kernel()
    llm = llm_of(sink, "auditor")
    llm.complete(USER, purpose="sync.chat")
    asyncio.run(llm.acomplete(USER, purpose="async.chat"))
    llm.complete_structured(instructions="x", input=[{"type": "text", "text": "y"}], purpose="sync.struct")
    asyncio.run(
        llm.acomplete_structured(
            instructions="x", input=[{"type": "text", "text": "y"}], purpose="async.struct"
        )
    )
    chat = audit_lines(hermes, "plugin_llm.complete")
    structured = audit_lines(hermes, "plugin_llm.complete_structured")
    assert [p for p in ("sync.chat", "async.chat") if any(f"purpose={p}" in line for line in chat)] == [
        "sync.chat",
        "async.chat",
    ]
    assert len(chat) == 2 and len(structured) == 2, agent_log(hermes)
    assert [p for p in ("sync.struct", "async.struct") if any(f"purpose={p}" in s for s in structured)] == [
        "sync.struct",
        "async.struct",
    ]
    for line in chat + structured:
        assert "plugin=auditor" in line, line
        assert "provider=openai-compatible" in line and "model=m1" in line, line
        assert "input_tokens=31" in line and "output_tokens=4" in line, line
        assert "cost_usd=None" in line, line
        assert API_KEY not in line


def test_acomplete_calls_run_together_under_gather(
    kernel: Callable[..., Kernel], server: LocalServer, spy: Callable[[str], Any], sink: types.ModuleType
) -> None:
    def echo(seen: Seen) -> Reply:
        return ok("echo: " + seen.json["messages"][-1]["content"])

    server.set_default(echo)
    spy("caller")
    kernel()
    llm = llm_of(sink, "caller")

    async def main() -> list[PluginLlmCompleteResult]:
        return await asyncio.gather(
            *(llm.acomplete([{"role": "user", "content": f"n{i}"}], purpose=f"fan.{i}") for i in range(5))
        )

    results = asyncio.run(main())
    assert [r.text for r in results] == [f"echo: n{i}" for i in range(5)]
    assert [r.audit["purpose"] for r in results] == [f"fan.{i}" for i in range(5)]
    assert sorted(s.json["messages"][-1]["content"] for s in server.posts()) == [f"n{i}" for i in range(5)]


# --------------------------------------------------------------------------
# The trust gate
# --------------------------------------------------------------------------

OVERRIDES = [
    ("provider", "openai-compatible", "allow_provider_override"),
    ("model", "m2", "allow_model_override"),
    ("agent_id", "helper", "allow_agent_id_override"),
    ("profile", "work", "allow_profile_override"),
]


@pytest.mark.parametrize(("arg", "value", "key"), OVERRIDES)
def test_every_override_is_refused_by_default_naming_the_key(
    arg: str,
    value: str,
    key: str,
    kernel: Callable[..., Kernel],
    server: LocalServer,
    spy: Callable[[str], Any],
    sink: types.ModuleType,
) -> None:
    spy("gatekeeper")
    kernel()
    llm = llm_of(sink, "gatekeeper")
    with pytest.raises(PluginLlmTrustError) as caught:
        llm.complete(USER, **{arg: value})
    assert isinstance(caught.value, PermissionError)
    assert f"plugins.entries.gatekeeper.llm.{key}" in str(caught.value)
    with pytest.raises(PluginLlmTrustError, match=rf"plugins\.entries\.gatekeeper\.llm\.{key}"):
        llm.complete_structured(instructions="x", input=[{"type": "text", "text": "y"}], **{arg: value})
    with pytest.raises(PluginLlmTrustError, match=rf"plugins\.entries\.gatekeeper\.llm\.{key}"):
        asyncio.run(llm.acomplete(USER, **{arg: value}))
    assert server.posts() == [], "a refused call sends nothing"


def test_a_grant_in_config_yaml_applies_without_restart_and_its_removal_too(
    kernel: Callable[..., Kernel],
    server: LocalServer,
    spy: Callable[[str], Any],
    sink: types.ModuleType,
    hermes: Path,
) -> None:
    spy("gatekeeper")
    kernel()
    llm = llm_of(sink, "gatekeeper")
    with pytest.raises(PluginLlmTrustError):
        llm.complete(USER, model="m2")

    gate(hermes, server, "gatekeeper", allow_model_override=True)
    server.program(ok("from m2", model="m2"))
    result = llm.complete(USER, model="m2")
    assert result.text == "from m2" and result.model == "m2"
    (seen,) = server.posts()
    assert seen.json["model"] == "m2"
    assert seen.path == "/v1/chat/completions", "model= keeps the user's provider"

    gate(hermes, server, "gatekeeper")  # the grant is gone again
    with pytest.raises(PluginLlmTrustError, match="allow_model_override"):
        llm.complete(USER, model="m2")
    assert len(server.posts()) == 1

    # Another plugin's grant is not this plugin's.
    gate(hermes, server, "someone-else", allow_model_override=True)
    with pytest.raises(PluginLlmTrustError, match=r"plugins\.entries\.gatekeeper\.llm\.allow_model_override"):
        llm.complete(USER, model="m2")


def test_a_false_or_non_boolean_grant_stays_closed(
    kernel: Callable[..., Kernel],
    server: LocalServer,
    spy: Callable[[str], Any],
    sink: types.ModuleType,
    hermes: Path,
) -> None:
    spy("gatekeeper")
    kernel()
    llm = llm_of(sink, "gatekeeper")
    for value in (False, "no", None):
        gate(hermes, server, "gatekeeper", allow_model_override=value)
        with pytest.raises(PluginLlmTrustError, match="allow_model_override"):
            llm.complete(USER, model="m2")
    assert server.posts() == []


def test_model_allowlists(
    kernel: Callable[..., Kernel],
    server: LocalServer,
    spy: Callable[[str], Any],
    sink: types.ModuleType,
    hermes: Path,
) -> None:
    spy("gatekeeper")
    kernel()
    llm = llm_of(sink, "gatekeeper")
    server.set_default(ok("ok"))

    gate(hermes, server, "gatekeeper", allow_model_override=True, allowed_models=["*"])
    llm.complete(USER, model="vendor/any-model:free")
    assert server.posts()[-1].json["model"] == "vendor/any-model:free"

    gate(hermes, server, "gatekeeper", allow_model_override=True, allowed_models=["m-small", "vendor/m-mini"])
    llm.complete(USER, model="vendor/m-mini")
    assert server.posts()[-1].json["model"] == "vendor/m-mini"
    sent = len(server.posts())
    llm.complete(USER, model=" M-Small ")  # matched trimmed and case-insensitively, as in Hermes
    sent = len(server.posts())
    for refused in ("m-large", "m-small-2", "vendor/*"):  # no patterns: whole names only
        with pytest.raises(PluginLlmTrustError) as caught:
            llm.complete(USER, model=refused)
        assert "plugins.entries.gatekeeper.llm.allowed_models" in str(caught.value)
    assert len(server.posts()) == sent

    # An allowlist without the allow flag opens nothing.
    gate(hermes, server, "gatekeeper", allowed_models=["*"])
    with pytest.raises(PluginLlmTrustError, match="allow_model_override"):
        llm.complete(USER, model="m-small")


SECOND_PROVIDER = """\
from kernel.providers import ProviderProfile, register_provider

register_provider(
    ProviderProfile(name="second", base_url={url!r}, auth_type="none", default_model="second-m")
)
"""


def test_provider_override_and_independent_gates(
    kernel: Callable[..., Kernel],
    server: LocalServer,
    other_server: LocalServer,
    spy: Callable[[str], Any],
    sink: types.ModuleType,
    hermes: Path,
) -> None:
    write_plugin(
        hermes / "plugins",
        "model-providers/second",
        SECOND_PROVIDER.format(url=other_server.base_url),
        manifest={"name": "second", "version": "1.0.0", "kind": "model-provider"},
    )
    spy("gatekeeper")
    kernel()
    llm = llm_of(sink, "gatekeeper")
    other_server.set_default(ok("from second", model="second-big"))

    # Allowing the model does not allow the provider.
    gate(hermes, server, "gatekeeper", allow_model_override=True, allowed_models=["*"])
    with pytest.raises(
        PluginLlmTrustError, match=r"plugins\.entries\.gatekeeper\.llm\.allow_provider_override"
    ):
        llm.complete(USER, provider="second", model="second-big")
    # ... and allowing the provider does not allow the model.
    gate(hermes, server, "gatekeeper", allow_provider_override=True, allowed_providers=["second"])
    with pytest.raises(PluginLlmTrustError, match=r"plugins\.entries\.gatekeeper\.llm\.allow_model_override"):
        llm.complete(USER, provider="second", model="second-big")
    # Neither opens agent_id or profile.
    gate(
        hermes,
        server,
        "gatekeeper",
        allow_provider_override=True,
        allow_model_override=True,
        allowed_providers=["*"],
        allowed_models=["*"],
    )
    with pytest.raises(PluginLlmTrustError, match="allow_agent_id_override"):
        llm.complete(USER, agent_id="helper")
    with pytest.raises(PluginLlmTrustError, match="allow_profile_override"):
        llm.complete(USER, profile="work")
    assert other_server.posts() == [] and server.posts() == []

    # Both granted: the call goes to the other provider's endpoint, not the user's.
    gate(
        hermes,
        server,
        "gatekeeper",
        allow_provider_override=True,
        allowed_providers=["second"],
        allow_model_override=True,
    )
    result = llm.complete(USER, provider="second", model="second-big", purpose="switch")
    assert result.text == "from second" and result.provider == "second" and result.model == "second-big"
    (seen,) = other_server.posts()
    assert seen.json["model"] == "second-big"
    assert "authorization" not in seen.headers, "the user's key is not sent to another provider"
    assert server.posts() == []

    # A provider not on the list is refused, naming the list.
    with pytest.raises(PluginLlmTrustError, match=r"plugins\.entries\.gatekeeper\.llm\.allowed_providers"):
        llm.complete(USER, provider="scripted", model="x")


def test_agent_id_and_profile_grants(
    kernel: Callable[..., Kernel],
    server: LocalServer,
    spy: Callable[[str], Any],
    sink: types.ModuleType,
    hermes: Path,
) -> None:
    spy("gatekeeper")
    kernel()
    llm = llm_of(sink, "gatekeeper")
    server.set_default(ok("ok"))

    gate(hermes, server, "gatekeeper", allow_agent_id_override=True)
    result = llm.complete(USER, agent_id="helper")
    assert result.agent_id == "helper"
    with pytest.raises(PluginLlmTrustError, match="allow_profile_override"):
        llm.complete(USER, profile="work")

    gate(hermes, server, "gatekeeper", allow_profile_override=True)
    result = llm.complete(USER, profile="work", purpose="p")
    assert result.audit == {"plugin_id": "gatekeeper", "purpose": "p", "profile": "work"}
    assert server.posts()[-1].json["metadata"] == {"auth_profile": "work"}
    structured = llm.complete_structured(
        instructions="x", input=[{"type": "text", "text": "y"}], profile="work", schema_name="s.n"
    )
    assert structured.audit["profile"] == "work" and structured.audit["schema_name"] == "s.n"
    assert server.posts()[-1].json["metadata"] == {"auth_profile": "work"}
    with pytest.raises(PluginLlmTrustError, match="allow_agent_id_override"):
        llm.complete(USER, agent_id="helper")


def test_the_plugin_id_of_a_nested_plugin_is_its_path_key(
    kernel: Callable[..., Kernel],
    server: LocalServer,
    spy: Callable[[str], Any],
    sink: types.ModuleType,
    hermes: Path,
) -> None:
    spy("platforms/echo")
    kernel()
    llm = llm_of(sink, "platforms/echo")
    assert llm.plugin_id == "platforms/echo"
    with pytest.raises(
        PluginLlmTrustError, match=r"plugins\.entries\.platforms/echo\.llm\.allow_model_override"
    ):
        llm.complete(USER, model="m2")
    # The manifest name ("echo") is not the key of a nested plugin.
    gate(hermes, server, "echo", allow_model_override=True)
    with pytest.raises(PluginLlmTrustError):
        llm.complete(USER, model="m2")
    gate(hermes, server, "platforms/echo", allow_model_override=True)
    server.program(ok("nested ok", model="m2"))
    result = llm.complete(USER, model="m2", purpose="nested")
    assert result.text == "nested ok" and result.audit["plugin_id"] == "platforms/echo"
    (line,) = audit_lines(hermes, "plugin_llm.complete")
    assert "plugin=platforms/echo" in line, line


def test_an_allowed_but_unknown_provider_is_a_plugin_llm_error_naming_it(
    kernel: Callable[..., Kernel],
    server: LocalServer,
    spy: Callable[[str], Any],
    sink: types.ModuleType,
    hermes: Path,
) -> None:
    spy("gatekeeper")
    kernel()
    gate(hermes, server, "gatekeeper", allow_provider_override=True, allowed_providers=["*"])
    with pytest.raises(PluginLlmError, match="no-such-provider"):
        llm_of(sink, "gatekeeper").complete(USER, provider="no-such-provider")
    assert server.posts() == []


HERMES_STYLE_PROVIDER = """\
from providers import ProviderProfile, register_provider

register_provider(ProviderProfile(name={name!r}, base_url={url!r}, auth_type="none", {field}={value!r}))
"""


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("default_aux_model", "aux-small", "aux-small"),
        ("fallback_models", ("first-fallback", "second-fallback"), "first-fallback"),
    ],
)
def test_a_granted_provider_without_a_model_uses_its_profiles_default(
    kernel: Callable[..., Kernel],
    server: LocalServer,
    other_server: LocalServer,
    spy: Callable[[str], Any],
    sink: types.ModuleType,
    hermes: Path,
    field: str,
    value: Any,
    expected: str,
) -> None:
    """``ctx.llm.complete(provider=...)`` with no ``model=``: the profile's ``default_aux_model`` (Hermes'
    field), else its first fallback model; the model gate is not asked, since the plugin chose none."""
    write_plugin(
        hermes / "plugins",
        "model-providers/third",
        HERMES_STYLE_PROVIDER.format(name="third", url=other_server.base_url, field=field, value=value),
        manifest={"name": "third", "version": "1.0.0", "kind": "model-provider"},
    )
    spy("gatekeeper")
    kernel()
    llm = llm_of(sink, "gatekeeper")
    other_server.set_default(ok("from third", model=expected))
    gate(hermes, server, "gatekeeper", allow_provider_override=True, allowed_providers=["THIRD"])
    result = llm.complete(USER, provider="third")
    assert result.text == "from third" and result.provider == "third"
    (seen,) = other_server.posts()
    assert seen.json["model"] == expected
    assert server.posts() == []
