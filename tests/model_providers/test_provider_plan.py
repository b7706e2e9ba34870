"""One model call written once: ``ChatRequest``, the retry/fallback plan, the response reading, and the
sync and async paths of the chat-completions transport doing the same against a real server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from local_server import LocalServer, Reply

from kernel import Kernel, hookimpl
from kernel.providers import ProviderProfile
from kernel.providers.parsing import BadReply, read_reply
from kernel.providers.parsing import Reply as HttpReply
from kernel.providers.plan import (
    Move,
    Plan,
    Send,
    Wait,
    arun,
    backoff,
    models_in_order,
    next_move,
    run,
)
from kernel.providers.request import ChatRequest, chat_body
from kernel.providers.transport import ChatCompletionsTransport, ChatResult, ProviderError, Usage

USER = [{"role": "user", "content": "hi"}]


def result(text: str = "ok") -> ChatResult:
    return ChatResult(
        text=text, tool_calls=[], usage=Usage(), model="m", provider="p", finish_reason="stop", raw={}
    )


def error(*, retryable: bool = False, malformed: bool = False) -> ProviderError:
    return ProviderError("failed", provider="p", model="m", retryable=retryable, malformed=malformed)


# --------------------------------------------------------------------------
# ChatRequest
# --------------------------------------------------------------------------


def test_a_request_splits_the_named_options_from_the_context() -> None:
    request = ChatRequest.of(
        USER,
        {"tools": [{"name": "t"}], "temperature": 0.2, "max_tokens": 9, "session_id": "s", "task_id": "t1",
         "extra_body": {"x": 1}, "turn_id": "turn-7", "reasoning": "high"},
    )  # fmt: skip
    assert (request.temperature, request.max_tokens, request.session_id, request.task_id) == (
        0.2,
        9,
        "s",
        "t1",
    )
    assert request.extra_body == {"x": 1} and request.tools == [{"name": "t"}]
    assert dict(request.context) == {"turn_id": "turn-7", "reasoning": "high"}
    assert request.turn_id == "turn-7"


def test_a_request_is_frozen_and_its_context_read_only() -> None:
    request = ChatRequest.of(USER, {"turn_id": "a"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.temperature = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        request.context["turn_id"] = "b"  # type: ignore[index]
    assert ChatRequest.of(USER, {}).turn_id is None


def test_the_body_is_the_same_from_the_request_and_from_build_request() -> None:
    class Extra(ProviderProfile):
        def build_extra_body(self, *, session_id: str | None = None, **context: Any) -> dict[str, Any]:
            return {"seen": [session_id, sorted(context)]}

    profile = Extra(name="p", default_max_tokens=64)
    transport = ChatCompletionsTransport(profile, model="m", api_key=None, base_url="http://127.0.0.1:1/v1")
    kwargs: dict[str, Any] = {"temperature": 0.5, "session_id": "s", "task_id": "t", "turn_id": "u"}
    from_request = chat_body(profile, ChatRequest.of(USER, kwargs), "m")
    assert from_request == {
        "model": "m", "messages": USER, "temperature": 0.5, "max_tokens": 64, "seen": ["s", ["turn_id"]],
    }  # fmt: skip
    kwargs.pop("task_id")  # build_request never took a task id as a named option
    assert transport.build_request(USER, **kwargs) == from_request


# --------------------------------------------------------------------------
# The plan's pure functions
# --------------------------------------------------------------------------


def test_next_move() -> None:
    assert next_move(error(retryable=True), 1, max_retries=2) is Move.RETRY
    assert next_move(error(retryable=True), 2, max_retries=2) is Move.RETRY
    assert next_move(error(retryable=True), 3, max_retries=2) is Move.NEXT_MODEL
    assert next_move(error(retryable=True), 1, max_retries=0) is Move.NEXT_MODEL
    assert next_move(error(malformed=True), 1, max_retries=5) is Move.NEXT_MODEL
    assert next_move(error(), 1, max_retries=5) is Move.RAISE


def test_backoff_and_the_model_order() -> None:
    assert backoff(1, 7.0, base=1.0, cap=5.0, jitter=0.1) == 5.0
    assert backoff(1, -3.0, base=1.0, cap=5.0, jitter=0.1) == 0.0
    assert backoff(3, None, base=1.0, cap=10.0, jitter=0.25) == 4.25
    assert backoff(9, None, base=1.0, cap=10.0, jitter=0.0) == 10.0
    assert models_in_order("a", ["b", "", "a", "c", "b"]) == ["a", "b", "c"]


def test_read_reply() -> None:
    def read(status: int, body: bytes | None, **headers: str) -> ChatResult | BadReply:
        return read_reply(HttpReply(status, headers, body), model="asked", provider="p", prices=None)

    slow = read(429, b'{"error": {"message": "slow down"}}', **{"retry-after": "2"})
    assert slow == BadReply("HTTP 429: slow down", 429, retryable=True, retry_after=2.0)
    assert read(400, b"bad key") == BadReply("HTTP 400: bad key", 400)
    too_big = read(200, None)
    assert isinstance(too_big, BadReply) and too_big.malformed and not too_big.retryable
    assert isinstance(read(200, b"not json"), BadReply)
    good = read(200, b'{"choices": [{"message": {"content": "hey"}, "finish_reason": "stop"}]}')
    assert isinstance(good, ChatResult) and (good.text, good.model, good.provider) == ("hey", "asked", "p")


# --------------------------------------------------------------------------
# The drivers
# --------------------------------------------------------------------------


def test_a_failing_step_is_raised_inside_the_plan_at_its_yield() -> None:
    seen: list[Any] = []

    def plan() -> Plan:
        try:
            yield Send({"n": 1})
        except ConnectionError as exc:
            seen.append(exc)
        yield Wait(0)
        reply = yield Send({"n": 2})
        return result(reply)

    def send(step: Send) -> str:
        if step.body["n"] == 1:
            raise ConnectionError("down")
        return "second"

    async def asend(step: Send) -> str:
        return send(step)

    assert run(plan(), None, send, time.sleep).text == "second"
    assert asyncio.run(arun(plan(), None, asend, asyncio.sleep)).text == "second"
    assert [str(e) for e in seen] == ["down", "down"]


def test_a_failure_the_plan_does_not_catch_reaches_the_caller_unchanged() -> None:
    boom = LookupError("not the plan's to handle")

    def plan() -> Plan:
        yield Send({})
        return result()

    def send(step: Send) -> None:
        raise boom

    with pytest.raises(LookupError) as caught:
        run(plan(), None, send, time.sleep)
    assert caught.value is boom


# --------------------------------------------------------------------------
# Sync and async against a real server
# --------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    @hookimpl
    def pre_api_request(self, model: str, session_id: str, task_id: str, turn_id: str) -> None:
        self.calls.append(("pre", model, session_id, task_id, turn_id))

    @hookimpl
    def post_api_request(self, model: str, response_model: str) -> None:
        self.calls.append(("post", model, response_model))

    @hookimpl
    def api_request_error(self, model: str, status_code: int | None, attempt: int) -> None:
        self.calls.append(("error", model, status_code, attempt))


@pytest.fixture(scope="module")
def chat_server() -> Iterator[LocalServer]:
    with LocalServer() as server:
        yield server


def completion(text: str) -> dict[str, Any]:
    return {"model": "served", "choices": [{"message": {"role": "assistant", "content": text}}]}


def both_ways(
    server: LocalServer, make_kernel: Callable[..., Kernel]
) -> list[tuple[Any, list[str], list[tuple[Any, ...]]]]:
    """The reply text, the models the server was asked and the hooks heard, with ``complete`` and then
    ``acomplete`` against the same replies."""
    outcomes = []
    for mode in ("sync", "async"):
        server.reset()
        server.program(
            Reply(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "0"}),
            Reply(200, "this is not json"),
            Reply(503, {"error": {"message": "busy"}}),
            Reply(body=completion("from the backup")),
        )
        k = make_kernel()
        recorder = Recorder()
        k.register(recorder, name="recorder")
        profile = ProviderProfile(name="local", fallback_models=("backup",))
        transport = ChatCompletionsTransport(
            profile, model="main", api_key=None, base_url=server.base_url, hooks=k, max_retries=1,
            retry_base_delay=0.0, retry_max_delay=0.0,
        )  # fmt: skip
        try:
            outcome = _call(transport) if mode == "sync" else asyncio.run(_acall(transport))
        except ProviderError as exc:
            outcome = ("raised", str(exc), exc.status_code)
        outcomes.append((outcome, [s.json["model"] for s in server.seen], recorder.calls))
    return outcomes


def _call(transport: ChatCompletionsTransport) -> str:
    return transport.complete(USER, session_id="s", task_id="t", turn_id="u").text


async def _acall(transport: ChatCompletionsTransport) -> str:
    chat = await transport.acomplete(USER, session_id="s", task_id="t", turn_id="u")
    return chat.text


def test_sync_and_async_retry_fall_back_and_fire_the_same(
    chat_server: LocalServer, make_kernel: Callable[..., Kernel]
) -> None:
    sync, asynchronous = both_ways(chat_server, make_kernel)
    assert sync == asynchronous
    outcome, models, calls = sync
    assert outcome == "from the backup"
    # main: a 429 (retried once), then a body that is not JSON (not retried: the next model);
    # backup: a 503 (retried), then the answer.
    assert models == ["main", "main", "backup", "backup"]
    assert calls == [
        ("pre", "main", "s", "t", "u"), ("error", "main", 429, 1),
        ("pre", "main", "s", "t", "u"), ("error", "main", 200, 2),
        ("pre", "backup", "s", "t", "u"), ("error", "backup", 503, 1),
        ("pre", "backup", "s", "t", "u"), ("post", "backup", "served"),
    ]  # fmt: skip


def test_sync_and_async_give_up_the_same_on_a_connection_error(make_kernel: Callable[..., Kernel]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    outcomes = []
    for mode in ("sync", "async"):
        k = make_kernel()
        recorder = Recorder()
        k.register(recorder, name="recorder")
        transport = ChatCompletionsTransport(
            ProviderProfile(name="local"), model="main", api_key=None, base_url=f"http://127.0.0.1:{port}/v1",
            hooks=k, max_retries=2, retry_base_delay=0.0, retry_max_delay=0.0,
        )  # fmt: skip
        with pytest.raises(ProviderError) as caught:
            if mode == "sync":
                _call(transport)
            else:
                asyncio.run(_acall(transport))
        assert caught.value.retryable and caught.value.status_code is None
        assert caught.value.__cause__ is None and caught.value.__suppress_context__
        outcomes.append([c[0] for c in recorder.calls])
    assert outcomes[0] == outcomes[1] == ["pre", "error"] * 3


def test_a_wait_is_chosen_only_before_a_retry(chat_server: LocalServer) -> None:
    asked: list[int] = []

    class Noting(ChatCompletionsTransport):
        def retry_delay(self, attempt: int, retry_after: float | None = None) -> float:
            asked.append(attempt)
            return 0.0

    chat_server.reset()
    chat_server.program(
        Reply(500, {"error": {"message": "boom"}}),
        Reply(500, {"error": {"message": "boom again"}}),
        Reply(body=completion("backup")),
    )
    profile = ProviderProfile(name="local", fallback_models=("backup",))
    transport = Noting(profile, model="main", api_key=None, base_url=chat_server.base_url, max_retries=1)
    assert transport.complete(USER).text == "backup"
    assert asked == [1]  # the second 500 moves on to the backup model: no wait is chosen for it
