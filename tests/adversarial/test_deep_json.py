"""JSON from peers is bounded: depth, number of values and body size (docs/providers.md, "Bounds").

A real HTTP server on 127.0.0.1 plays a hostile model endpoint: bodies nested
hundreds or thousands of levels deep (depth 600 parses in the C decoder but
breaks later code; depth 5000 does not parse at all), tool-call arguments as
deep, structured replies as deep, and a body over the size cap.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, cli_env
from local_server import LocalServer, Reply

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.providers.transport import MAX_RESPONSE_BYTES, ProviderError

EXTENSIONS = Path(__file__).resolve().parents[2] / "extensions"
USER = [{"role": "user", "content": "hi"}]
DEPTHS = [600, 5000]


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def chat_body(message: dict[str, Any], extra: str = "") -> bytes:
    body = {
        "id": "c1",
        "model": "m1",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}],
    }
    text = json.dumps(body)
    if extra:
        text = text[:-1] + f', "extra": {extra}}}'
    return text.encode()


def body_reply(data: bytes, status: int = 200) -> Reply:
    return Reply(status, data, content_type="application/json")


def model_config(server: LocalServer) -> dict[str, Any]:
    return {"provider": "openai-compatible", "model": "m1", "base_url": server.base_url, "max_retries": 0}


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer() as srv:
        yield srv


@pytest.fixture
def model_kernel(
    make_kernel: Callable[..., Kernel], bundled: Path, server: LocalServer
) -> Callable[..., Kernel]:
    shutil.copytree(EXTENSIONS / "model-providers", bundled / "model-providers")

    def make() -> Kernel:
        model = {
            "provider": "openai-compatible",
            "model": "m1",
            "base_url": server.base_url,
            "max_retries": 0,
        }
        return make_kernel(config={"model": model})

    return make


@pytest.mark.parametrize("depth", DEPTHS)
def test_a_deep_response_body_is_a_malformed_response_not_a_recursion_error(
    model_kernel: Callable[..., Kernel], server: LocalServer, depth: int
) -> None:
    k = model_kernel()
    server.program(body_reply(chat_body({"content": "x"}, extra=deep(depth))))
    with pytest.raises(ProviderError, match="nested deeper than 100 levels"):
        k.providers.model().complete(USER)
    server.program(body_reply(chat_body({"content": "x"}, extra=deep(depth))))
    with pytest.raises(ProviderError, match="nested deeper than 100 levels"):
        asyncio.run(k.providers.model().acomplete(USER))


def test_a_deep_error_body_is_shown_as_an_excerpt(
    model_kernel: Callable[..., Kernel], server: LocalServer
) -> None:
    k = model_kernel()
    server.program(body_reply(b'{"error": ' + deep(5000).encode() + b"}", status=400))
    with pytest.raises(ProviderError, match=r"HTTP 400: \{\"error\": \[\[\["):
        k.providers.model().complete(USER)


def test_a_body_over_the_size_cap_is_refused_without_being_kept(
    model_kernel: Callable[..., Kernel], server: LocalServer
) -> None:
    k = model_kernel()
    padding = "x" * (MAX_RESPONSE_BYTES + 1024)
    server.program(body_reply(chat_body({"content": padding})))
    with pytest.raises(ProviderError, match=f"over {MAX_RESPONSE_BYTES:,} bytes"):
        k.providers.model().complete(USER)


TOOL_PLUGIN = """
import json

def echo(args, **kw):
    return json.dumps({"echo": args})

def register(ctx):
    ctx.register_tool("echo", "t", {"description": "echo", "parameters": {"type": "object"}}, echo)
"""


@pytest.mark.parametrize("depth", DEPTHS)
def test_deep_tool_call_arguments_are_fed_back_and_the_turn_goes_on(
    model_kernel: Callable[..., Kernel],
    server: LocalServer,
    plugin_dir: Callable[..., Path],
    depth: int,
) -> None:
    plugin_dir("echo", TOOL_PLUGIN)
    k = model_kernel()
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "echo", "arguments": '{"a": ' + deep(depth) + "}"},
    }
    server.program(
        body_reply(chat_body({"content": None, "tool_calls": [call]})),
        body_reply(chat_body({"content": "Done anyway."})),
    )
    session = AgentSession(k)
    result = session.run("go")
    session.close()
    assert result.reply == "Done anyway."
    (record,) = result.tool_calls
    assert "nested deeper than 100 levels" in json.loads(record.result)["error"]
    fed_back = server.seen[1].json["messages"][-1]
    assert fed_back["role"] == "tool" and "deeper than 100" in fed_back["content"]


@pytest.mark.parametrize("depth", DEPTHS)
def test_a_deep_structured_reply_is_text_not_a_crash(
    model_kernel: Callable[..., Kernel],
    server: LocalServer,
    plugin_dir: Callable[..., Path],
    sink: types.ModuleType,
    depth: int,
) -> None:
    plugin_dir("keeper", "import hook_sink\n\ndef register(ctx):\n    hook_sink.calls.append(ctx)\n")
    model_kernel()
    (ctx,) = sink.calls
    reply = deep(depth)
    server.program(body_reply(chat_body({"content": reply})))
    result = ctx.llm.complete_structured(
        instructions="Give JSON.", input=[{"type": "text", "text": "x"}], json_schema={"type": "array"}
    )
    assert result.parsed is None and result.content_type == "text" and result.text == reply


def test_hermes_kernel_run_with_a_deep_body_fails_with_one_clear_line(
    tmp_path: Path, server: LocalServer
) -> None:
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text(yaml.safe_dump({"model": model_config(server)}), encoding="utf-8")
    server.set_default(body_reply(chat_body({"content": "x"}, extra=deep(5000))))
    proc = subprocess.run(
        [*CLI, "run", "hello"], env=cli_env(home), capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "deeper than 100" in errors[0], proc.stderr


def test_tools_call_with_deep_arguments_says_so(tmp_path: Path) -> None:
    home = tmp_path / "hermes"
    home.mkdir()
    proc = subprocess.run(
        [*CLI, "tools", "call", "calculate", '{"a": ' + deep(5000) + "}"],
        env=cli_env(home),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "error: the arguments: lists or mappings nested deeper than 100 levels"
