"""The chat-completions transport against a real HTTP server on 127.0.0.1.

The server (``LocalServer``, from ``local_server``) stands in for a
chat-completions endpoint: each test programs the replies it wants (a queue of
``Reply`` objects or functions of the request) and reads back the requests it
got (method, path, headers, JSON body).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import agent_log
from local_server import LocalServer, Reply, Seen

from kernel import hookimpl
from kernel.providers import ProviderProfile
from kernel.providers.transport import (
    ChatCompletionsTransport,
    ChatResult,
    ProviderError,
    ToolCall,
    Usage,
)

API_KEY = "sk-test-SECRET-0123456789"


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


def completion(
    text: str | None = "hello",
    *,
    model: str = "served-model",
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def models_seen(server: LocalServer) -> list[str]:
    return [s.json["model"] for s in server.seen]


@pytest.fixture(scope="module")
def chat_server() -> Iterator[LocalServer]:
    with LocalServer() as server:
        yield server


@pytest.fixture
def server(chat_server: LocalServer) -> Iterator[LocalServer]:
    chat_server.reset()
    yield chat_server
    chat_server.reset()


def make_transport(
    server: LocalServer, profile: ProviderProfile | None = None, **kwargs: Any
) -> ChatCompletionsTransport:
    kwargs.setdefault("model", "main-model")
    kwargs.setdefault("api_key", API_KEY)
    kwargs.setdefault("base_url", server.base_url)
    kwargs.setdefault("retry_base_delay", 0.01)
    kwargs.setdefault("retry_max_delay", 0.05)
    kwargs.setdefault("timeout", 10.0)
    return ChatCompletionsTransport(profile or ProviderProfile(name="local"), **kwargs)


USER = [{"role": "user", "content": "hi there"}]


# --------------------------------------------------------------------------
# Plain replies and tool calls
# --------------------------------------------------------------------------


def test_plain_reply(server: LocalServer) -> None:
    server.program(Reply(body=completion("Hello, human.", model="served-model")))
    with make_transport(server) as transport:
        result = transport.complete(USER)
    assert isinstance(result, ChatResult)
    assert result.text == "Hello, human."
    assert result.tool_calls == []
    assert result.finish_reason == "stop"
    assert result.model == "served-model"
    assert result.provider == "local"
    assert result.raw["id"] == "chatcmpl-1"
    assert result.as_message() == {"role": "assistant", "content": "Hello, human."}
    assert len(server.seen) == 1
    seen = server.seen[0]
    assert seen.method == "POST"
    assert seen.path == "/v1/chat/completions"
    assert seen.json == {"model": "main-model", "messages": USER}


def test_model_falls_back_to_the_requested_one_and_null_content_is_empty(server: LocalServer) -> None:
    body = completion(None)
    del body["model"]
    server.program(Reply(body=body))
    result = make_transport(server).complete(USER)
    assert result.text == ""
    assert result.model == "main-model"


def test_tool_calls_with_string_and_dict_arguments(server: LocalServer) -> None:
    calls = [
        {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
        {"id": "call_b", "type": "function", "function": {"name": "lookup", "arguments": {"q": "ünïcode"}}},
        {"id": "call_c", "type": "function", "function": {"name": "now", "arguments": ""}},
    ]
    server.program(Reply(body=completion(None, tool_calls=calls, finish_reason="tool_calls")))
    result = make_transport(server).complete(USER, tools=[{"name": "add", "parameters": {"type": "object"}}])
    assert result.finish_reason == "tool_calls"
    assert [c.id for c in result.tool_calls] == ["call_a", "call_b", "call_c"]
    assert [c.name for c in result.tool_calls] == ["add", "lookup", "now"]
    assert result.tool_calls[0].arguments == '{"a": 1, "b": 2}'
    assert isinstance(result.tool_calls[1].arguments, str)
    assert result.tool_calls[1].parsed() == {"q": "ünïcode"}
    assert result.tool_calls[0].parsed() == {"a": 1, "b": 2}
    assert result.tool_calls[2].parsed() == {}
    message = result.as_message()
    assert message["tool_calls"][0] == {
        "id": "call_a",
        "type": "function",
        "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
    }
    # A bare function schema is wrapped into the OpenAI tool shape.
    assert server.seen[0].json["tools"] == [
        {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
    ]


def test_tool_call_parsed_rejects_bad_json() -> None:
    with pytest.raises(ValueError, match=r"'add' \(call_1\) are not valid JSON"):
        ToolCall("call_1", "add", "{not json").parsed()
    with pytest.raises(ValueError, match="must be a JSON object"):
        ToolCall("call_2", "add", "[1, 2]").parsed()
    assert ToolCall("call_3", "add", "  ").parsed() == {}


# --------------------------------------------------------------------------
# The request: body, headers, profile hooks
# --------------------------------------------------------------------------


class TunedProfile(ProviderProfile):
    def prepare_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        messages[0]["content"] = "[prepared] " + messages[0]["content"]
        return [{"role": "system", "content": "be brief"}, *messages]

    def build_extra_body(self, *, session_id: str | None = None, **context: Any) -> dict[str, Any]:
        return {"session": session_id, "shared": "from-extra-body", "seen_context": sorted(context)}

    def build_api_kwargs_extras(
        self, *, reasoning_config: Any = None, **context: Any
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        return {"reasoning": reasoning_config}, {"top_p": 0.5, "shared": "from-kwargs"}


def test_request_body_and_headers_with_profile_hooks(server: LocalServer) -> None:
    profile = TunedProfile(
        name="tuned",
        default_headers={"X-Title": "hermes-kernel", "HTTP-Referer": "https://example.invalid"},
        fixed_temperature=0.0,
        default_max_tokens=256,
    )
    server.program(Reply(body=completion("ok")))
    messages = [{"role": "user", "content": "question"}]
    tool = {"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}
    make_transport(server, profile).complete(
        messages,
        tools=[tool],
        temperature=0.9,
        session_id="s-1",
        task_id="t-1",
        extra_body={"user": "u-7"},
        reasoning_config={"effort": "low"},
    )
    # The caller's messages are untouched.
    assert messages == [{"role": "user", "content": "question"}]
    seen = server.seen[0]
    assert seen.json == {
        "model": "main-model",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "[prepared] question"},
        ],
        "tools": [tool],
        "temperature": 0.0,  # fixed_temperature wins over 0.9
        "max_tokens": 256,  # the profile's default
        "session": "s-1",
        "seen_context": ["reasoning_config"],
        "shared": "from-kwargs",  # build_api_kwargs_extras after build_extra_body
        "reasoning": {"effort": "low"},
        "top_p": 0.5,
        "user": "u-7",
    }
    assert seen.headers["authorization"] == f"Bearer {API_KEY}"
    assert seen.headers["x-title"] == "hermes-kernel"
    assert seen.headers["http-referer"] == "https://example.invalid"
    assert seen.headers["content-type"] == "application/json"


def test_extra_body_argument_is_merged_last_and_max_tokens_given_wins(server: LocalServer) -> None:
    profile = TunedProfile(name="tuned", default_max_tokens=256)
    server.program(Reply(body=completion("ok")))
    make_transport(server, profile).complete(
        USER, temperature=0.7, max_tokens=10, extra_body={"shared": "from-call", "top_p": 0.1}
    )
    body = server.seen[0].json
    assert body["temperature"] == 0.7
    assert body["max_tokens"] == 10
    assert body["shared"] == "from-call"
    assert body["top_p"] == 0.1


def test_no_authorization_header_without_a_key(server: LocalServer) -> None:
    server.program(Reply(body=completion("ok")))
    make_transport(server, api_key=None).complete(USER)
    headers = server.seen[0].headers
    assert "authorization" not in headers
    assert "temperature" not in server.seen[0].json
    assert "max_tokens" not in server.seen[0].json
    assert "tools" not in server.seen[0].json


def test_missing_base_url_or_model_is_a_provider_error() -> None:
    profile = ProviderProfile(name="nowhere")
    with pytest.raises(ProviderError, match=r"'nowhere'.*no base_url"):
        ChatCompletionsTransport(profile, model="m", api_key=None, base_url="")
    with pytest.raises(ProviderError, match="no model"):
        ChatCompletionsTransport(profile, model="", api_key=None, base_url="http://127.0.0.1:1/v1")


# --------------------------------------------------------------------------
# Retries and fallbacks
# --------------------------------------------------------------------------


def test_429_with_retry_after_then_success(server: LocalServer) -> None:
    server.program(
        Reply(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "0"}),
        Reply(body=completion("finally")),
    )
    result = make_transport(server, retry_base_delay=5.0, retry_max_delay=30.0).complete(USER)
    # retry_base_delay=5 would make a backoff wait long: Retry-After: 0 was honoured instead.
    assert result.text == "finally"
    assert len(server.seen) == 2
    assert server.seen[0].json == server.seen[1].json


class DelayRecordingTransport(ChatCompletionsTransport):
    """The real transport, noting the waits it chooses between attempts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.delays: list[tuple[int, float | None, float]] = []

    def retry_delay(self, attempt: int, retry_after: float | None = None) -> float:
        delay = super().retry_delay(attempt, retry_after)
        self.delays.append((attempt, retry_after, delay))
        return delay


def test_waits_follow_retry_after_else_backoff(server: LocalServer) -> None:
    server.program(
        Reply(503, {"error": {"message": "busy"}}, headers={"Retry-After": "0"}),
        Reply(500, {"error": {"message": "boom"}}),
        Reply(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "3600"}),
        Reply(body=completion("done")),
    )
    transport = DelayRecordingTransport(
        ProviderProfile(name="local"),
        model="main-model",
        api_key=None,
        base_url=server.base_url,
        max_retries=3,
        retry_base_delay=0.01,
        retry_max_delay=0.05,
    )
    assert transport.complete(USER).text == "done"
    assert [(a, r) for a, r, _ in transport.delays] == [(1, 0.0), (2, None), (3, 3600.0)]
    waits = [d for _, _, d in transport.delays]
    assert waits[0] == 0.0
    assert 0.02 <= waits[1] <= 0.05  # backoff: base * 2, plus jitter
    assert waits[2] == 0.05  # Retry-After capped at retry_max_delay
    assert len(server.seen) == 4


def test_429_with_retry_after_as_http_date(server: LocalServer) -> None:
    past = email.utils.formatdate(time.time() - 60, usegmt=True)
    server.program(
        Reply(429, {"error": {"message": "slow down"}}, headers={"Retry-After": past}),
        Reply(body=completion("after the date")),
    )
    result = make_transport(server, retry_base_delay=5.0, retry_max_delay=30.0).complete(USER)
    assert result.text == "after the date"
    assert len(server.seen) == 2


def test_retry_delay_policy() -> None:
    transport = ChatCompletionsTransport(
        ProviderProfile(name="p"),
        model="m",
        api_key=None,
        base_url="http://127.0.0.1:1/v1",
        retry_base_delay=1.0,
        retry_max_delay=5.0,
    )
    # Retry-After is honoured, capped at retry_max_delay.
    assert transport.retry_delay(1, retry_after=2.0) == 2.0
    assert transport.retry_delay(1, retry_after=3600.0) == 5.0
    assert transport.retry_delay(1, retry_after=0.0) == 0.0
    # Else exponential from the base delay, with a little jitter, capped.
    assert 1.0 <= transport.retry_delay(1) <= 1.25
    assert 2.0 <= transport.retry_delay(2) <= 2.25
    assert 4.0 <= transport.retry_delay(3) <= 4.25
    assert transport.retry_delay(10) == 5.0


def test_500_storm_then_the_fallback_model_succeeds(server: LocalServer) -> None:
    profile = ProviderProfile(name="local", fallback_models=("backup-model",))
    storm = [Reply(500, {"error": {"message": "upstream exploded"}}) for _ in range(3)]
    server.program(*storm, lambda seen: Reply(body=completion("from backup", model=seen.json["model"])))
    result = make_transport(server, profile, max_retries=2).complete(USER)
    assert result.text == "from backup"
    assert result.model == "backup-model"
    assert models_seen(server) == ["main-model"] * 3 + ["backup-model"]
    # Apart from the model, the fallback request is the same.
    first, last = server.seen[0].json, server.seen[-1].json
    assert {**first, "model": "backup-model"} == last


def test_every_model_failing_raises_the_last_error(server: LocalServer) -> None:
    profile = ProviderProfile(name="local", fallback_models=("backup-model",))
    server.program(*[Reply(503, {"error": {"message": "overloaded"}}) for _ in range(4)])
    with pytest.raises(ProviderError) as info:
        make_transport(server, profile, max_retries=1).complete(USER)
    error = info.value
    assert error.status_code == 503
    assert error.retryable is True
    assert error.model == "backup-model"
    assert error.provider == "local"
    assert "overloaded" in str(error)
    assert "backup-model" in str(error)
    assert models_seen(server) == ["main-model", "main-model", "backup-model", "backup-model"]


def test_400_is_not_retried_nor_falls_back(server: LocalServer) -> None:
    profile = ProviderProfile(name="local", fallback_models=("backup-model",))
    server.program(
        Reply(400, {"error": {"message": "Unknown parameter: 'frobnicate'", "type": "invalid_request_error"}})
    )
    with pytest.raises(ProviderError) as info:
        make_transport(server, profile, max_retries=3).complete(USER)
    error = info.value
    assert error.status_code == 400
    assert error.retryable is False
    assert "Unknown parameter: 'frobnicate'" in str(error)
    assert "HTTP 400" in str(error)
    assert len(server.seen) == 1


def test_an_error_echoing_the_key_has_it_masked(server: LocalServer) -> None:
    server.program(Reply(401, {"error": {"message": f"Incorrect API key provided: {API_KEY}"}}))
    with pytest.raises(ProviderError) as info:
        make_transport(server).complete(USER)
    assert info.value.status_code == 401
    assert "Incorrect API key provided" in str(info.value)
    assert API_KEY not in str(info.value)
    assert len(server.seen) == 1


def test_a_plain_text_error_body_is_quoted(server: LocalServer) -> None:
    server.program(Reply(404, "no such route here"))
    with pytest.raises(ProviderError, match="HTTP 404: no such route here"):
        make_transport(server).complete(USER)


# --------------------------------------------------------------------------
# Malformed bodies, timeouts, connection errors
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("<html>502 bad gateway</html>", "not JSON"),
        ({"object": "chat.completion", "model": "m"}, "no 'choices'"),
        ({"error": {"message": "upstream provider overloaded"}}, "upstream provider overloaded"),
        ({"choices": []}, "no 'choices'"),
        ({"choices": [{"message": "just a string"}]}, "choices[0].message"),
        ({"choices": [{"message": {"content": 42}}]}, "content"),
        ({"choices": [{"message": {"content": "x", "tool_calls": "nope"}}]}, "tool_calls"),
        ({"choices": [{"message": {"content": "x", "tool_calls": [{"id": "c"}]}}]}, "'function'"),
        ([1, 2, 3], "JSON object"),
    ],
)
def test_malformed_body_is_a_provider_error_without_retry(
    server: LocalServer, body: Any, expected: str
) -> None:
    server.program(Reply(200, body))
    with pytest.raises(ProviderError) as info:
        make_transport(server, max_retries=3).complete(USER)
    error = info.value
    assert "malformed response" in str(error)
    assert expected in str(error)
    assert error.retryable is False
    assert error.status_code == 200
    assert len(server.seen) == 1


def test_malformed_body_moves_on_to_the_fallback_model(server: LocalServer) -> None:
    profile = ProviderProfile(name="local", fallback_models=("backup-model",))
    server.program(Reply(200, "not json at all"), Reply(body=completion("sane", model="backup-model")))
    result = make_transport(server, profile, max_retries=3).complete(USER)
    assert result.text == "sane"
    assert models_seen(server) == ["main-model", "backup-model"]


def test_timeout_is_a_provider_error(server: LocalServer) -> None:
    server.program(Reply(body=completion("too late"), delay=1.0))
    with pytest.raises(ProviderError) as info:
        make_transport(server, timeout=0.3, max_retries=0).complete(USER)
    error = info.value
    assert "timed out" in str(error)
    assert error.status_code is None
    assert error.retryable is True
    assert len(server.seen) == 1


def test_timeout_then_success_is_retried(server: LocalServer) -> None:
    server.program(Reply(body=completion("too late"), delay=1.0), Reply(body=completion("in time")))
    result = make_transport(server, timeout=0.3, max_retries=1).complete(USER)
    assert result.text == "in time"
    assert len(server.seen) == 2


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_connection_refused_is_retried_then_raised() -> None:
    transport = ChatCompletionsTransport(
        ProviderProfile(name="gone"),
        model="m",
        api_key=API_KEY,
        base_url=f"http://127.0.0.1:{closed_port()}/v1",
        max_retries=1,
        retry_base_delay=0.01,
    )
    with pytest.raises(ProviderError) as info:
        transport.complete(USER)
    assert "connection failed" in str(info.value)
    assert info.value.status_code is None
    assert info.value.retryable is True
    assert API_KEY not in str(info.value)


# --------------------------------------------------------------------------
# Usage and cost
# --------------------------------------------------------------------------


def test_usage_is_read_from_the_response(server: LocalServer) -> None:
    usage = {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 100},
        "cost": 0.0042,
    }
    server.program(Reply(body=completion("ok", usage=usage)))
    # The provider's own cost wins over the profile's prices.
    profile = ProviderProfile(name="local", prices={"input": 1.0, "output": 2.0})
    result = make_transport(server, profile).complete(USER)
    assert result.usage == Usage(
        input_tokens=120, output_tokens=30, total_tokens=150, cache_read_tokens=100, cost_usd=0.0042
    )
    assert result.usage.as_dict() == {
        "input_tokens": 120,
        "output_tokens": 30,
        "total_tokens": 150,
        "cache_read_tokens": 100,
        "cache_write_tokens": 0,
        "cost_usd": 0.0042,
    }


def test_cost_from_profile_prices(server: LocalServer) -> None:
    usage = {"prompt_tokens": 2_000_000, "completion_tokens": 500_000}
    server.program(Reply(body=completion("ok", usage=usage)))
    profile = ProviderProfile(name="local", prices={"input": 0.5, "output": 1.5})
    result = make_transport(server, profile).complete(USER)
    assert result.usage.input_tokens == 2_000_000
    assert result.usage.output_tokens == 500_000
    assert result.usage.total_tokens == 2_500_000  # summed when the server gives no total
    assert result.usage.cost_usd == pytest.approx(2 * 0.5 + 0.5 * 1.5)


def test_no_usage_and_no_prices_means_zero_tokens_and_unknown_cost(server: LocalServer) -> None:
    server.program(Reply(body=completion("ok")))
    result = make_transport(server).complete(USER)
    assert result.usage == Usage()
    assert result.usage.cost_usd is None


# --------------------------------------------------------------------------
# Hooks, through a real kernel
# --------------------------------------------------------------------------


class ApiRecorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def _add(self, name: str, kwargs: dict[str, Any]) -> None:
        with self.lock:
            self.calls.append((name, kwargs))

    def of(self, name: str) -> list[dict[str, Any]]:
        return [kw for n, kw in self.calls if n == name]

    @hookimpl
    def pre_api_request(
        self,
        api_request_id,
        session_id,
        task_id,
        model,
        provider,
        base_url,
        api_mode,
        request_messages,
        request,
    ):
        self._add("pre", dict(locals(), self=None))

    @hookimpl
    def post_api_request(
        self,
        api_request_id,
        session_id,
        task_id,
        model,
        provider,
        base_url,
        api_mode,
        request_messages,
        request,
        response,
        usage,
        duration_ms,
    ):
        self._add("post", dict(locals(), self=None))

    @hookimpl
    def api_request_error(
        self,
        api_request_id,
        session_id,
        task_id,
        model,
        provider,
        base_url,
        api_mode,
        request_messages,
        request,
        error,
        status_code,
        duration_ms,
        attempt,
    ):
        self._add("error", dict(locals(), self=None))


class BrokenObserver:
    """Makes the kernel write a hook_failed warning to agent.log."""

    @hookimpl
    def post_api_request(self, api_request_id):
        raise RuntimeError(f"observer broke on {api_request_id}")


def test_hooks_fire_for_every_attempt_without_the_key(server: LocalServer, make_kernel, home) -> None:
    k = make_kernel()
    recorder = ApiRecorder()
    k.register(recorder, name="api-recorder")
    k.register(BrokenObserver(), name="broken-observer")
    profile = ProviderProfile(name="local", fallback_models=("backup-model",))
    server.program(
        Reply(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "0"}),
        Reply(500, {"error": {"message": "boom"}}),
        Reply(body=completion("ok", usage={"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4})),
    )
    transport = make_transport(server, profile, hooks=k, max_retries=1)
    result = transport.complete(USER, session_id="sess-1", task_id="task-1")
    assert result.text == "ok"
    assert models_seen(server) == ["main-model", "main-model", "backup-model"]

    assert [n for n, _ in recorder.calls] == ["pre", "error", "pre", "error", "pre", "post"]
    pres, errors, posts = recorder.of("pre"), recorder.of("error"), recorder.of("post")
    ids = [p["api_request_id"] for p in pres]
    assert len(set(ids)) == 3
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    assert [e["api_request_id"] for e in errors] == ids[:2]
    assert posts[0]["api_request_id"] == ids[2]
    assert [e["status_code"] for e in errors] == [429, 500]
    # attempt counts from 1 for each model.
    assert [e["attempt"] for e in errors] == [1, 2]
    assert "slow down" in errors[0]["error"] and "boom" in errors[1]["error"]
    for p in pres:
        assert p["session_id"] == "sess-1"
        assert p["task_id"] == "task-1"
        assert p["provider"] == "local"
        assert p["base_url"] == server.base_url
        assert p["api_mode"] == "chat_completions"
        assert p["request_messages"] == USER
    # The request handed to the hooks is the body that went over the wire.
    assert [p["request"] for p in pres] == [s.json for s in server.seen]
    assert [p["model"] for p in pres] == ["main-model", "main-model", "backup-model"]
    assert posts[0]["response"] == result.raw
    assert posts[0]["usage"]["input_tokens"] == 3
    assert posts[0]["usage"]["output_tokens"] == 1
    assert posts[0]["usage"]["total_tokens"] == 4
    assert isinstance(posts[0]["duration_ms"], int) and posts[0]["duration_ms"] >= 0
    # Copies: the hooks cannot change what the transport holds.
    pres[0]["request"]["messages"].append("mutated")
    assert result.raw["choices"][0]["message"]["content"] == "ok"

    assert API_KEY not in json.dumps([kw for _, kw in recorder.calls], default=str)
    log = agent_log(home)
    assert "hook_failed" in log and "broken-observer" in log
    assert API_KEY not in log


def test_hooks_see_the_final_error_of_a_timeout(server: LocalServer, make_kernel) -> None:
    k = make_kernel()
    recorder = ApiRecorder()
    k.register(recorder, name="api-recorder")
    server.program(Reply(body=completion("late"), delay=1.0))
    with pytest.raises(ProviderError):
        make_transport(server, hooks=k, timeout=0.3, max_retries=0).complete(USER)
    [error] = recorder.of("error")
    assert error["status_code"] is None
    assert error["attempt"] == 1
    assert "timed out" in error["error"]
    assert recorder.of("post") == []


# --------------------------------------------------------------------------
# Async
# --------------------------------------------------------------------------


def echo(seen: Seen) -> Reply:
    """Reply with the last user message, so concurrent calls can be told apart."""
    body = seen.json
    return Reply(body=completion(f"echo: {body['messages'][-1]['content']}", model=body["model"]))


def test_acomplete_single_call_with_retry(server: LocalServer) -> None:
    server.program(Reply(502, {"error": {"message": "bad gateway"}}), echo)
    transport = make_transport(server)
    result = asyncio.run(transport.acomplete([{"role": "user", "content": "async hello"}]))
    assert result.text == "echo: async hello"
    assert len(server.seen) == 2


def test_acomplete_gather_with_kernel_hooks(server: LocalServer, make_kernel) -> None:
    k = make_kernel()
    recorder = ApiRecorder()
    k.register(recorder, name="api-recorder")
    server.program(*[echo] * 6)
    transport = make_transport(server, hooks=k)

    async def main() -> list[ChatResult]:
        return await asyncio.gather(
            *(
                transport.acomplete([{"role": "user", "content": f"question {i}"}], session_id=f"s{i}")
                for i in range(6)
            )
        )

    results = asyncio.run(main())
    assert [r.text for r in results] == [f"echo: question {i}" for i in range(6)]
    assert len(server.seen) == 6
    pres, posts = recorder.of("pre"), recorder.of("post")
    assert len(pres) == len(posts) == 6
    assert {p["api_request_id"] for p in pres} == {p["api_request_id"] for p in posts}
    by_id = {p["api_request_id"]: p for p in pres}
    for post in posts:
        pre = by_id[post["api_request_id"]]
        assert post["session_id"] == pre["session_id"]
        question = pre["request_messages"][-1]["content"]
        assert post["response"]["choices"][0]["message"]["content"] == f"echo: {question}"


def test_acomplete_errors_and_fallback(server: LocalServer) -> None:
    profile = ProviderProfile(name="local", fallback_models=("backup-model",))
    server.program(Reply(body=completion("late"), delay=1.0), Reply(400, {"error": {"message": "bad input"}}))
    transport = make_transport(server, profile, timeout=0.3, max_retries=0)
    with pytest.raises(ProviderError) as info:
        asyncio.run(transport.acomplete(USER))
    # The timeout moved on to the fallback model, whose 400 is final.
    assert info.value.status_code == 400
    assert "bad input" in str(info.value)
    assert models_seen(server) == ["main-model", "backup-model"]


def test_acomplete_does_not_block_the_event_loop(server: LocalServer) -> None:
    server.program(Reply(body=completion("slow"), delay=0.3))
    transport = make_transport(server)

    async def main() -> tuple[str, int]:
        ticks = 0
        task = asyncio.create_task(transport.acomplete(USER))
        while not task.done():
            ticks += 1
            await asyncio.sleep(0.01)
        return (await task).text, ticks

    text, ticks = asyncio.run(main())
    assert text == "slow"
    # The loop kept running other work while the request was in flight.
    assert ticks > 1
