"""Talking to a model: the OpenAI-compatible chat-completions transport.

``ChatCompletionsTransport`` POSTs ``{base_url}/chat/completions`` with httpx,
synchronously (:meth:`~ChatCompletionsTransport.complete`) or on the caller's
event loop (:meth:`~ChatCompletionsTransport.acomplete`), and returns a
:class:`ChatResult`: the reply text, the tool calls, the token usage.

The request body is ``{model, messages, tools?, temperature?, max_tokens?}``,
then the profile's hooks in this order, each merged shallowly (a later key
wins): ``prepare_messages`` (on a deep copy of the messages),
``build_extra_body(session_id=..., **context)``, both halves of
``build_api_kwargs_extras(**context)``, and last the ``extra_body`` argument.
``profile.fixed_temperature`` replaces any temperature asked for;
``profile.default_max_tokens`` is used when no ``max_tokens`` is given.

Failure policy, per model:

* a connection error or timeout (``httpx.TransportError``), HTTP 429 and HTTP
  5xx are *retryable*: the request is tried up to ``max_retries + 1`` times,
  waiting the server's ``Retry-After`` (seconds or an HTTP date) when it sends
  one, else an exponential backoff from ``retry_base_delay`` with a little
  jitter; every wait is capped at ``retry_max_delay``;
* any other 4xx is final: :class:`ProviderError` is raised at once, with no
  retry and no fallback model (the request itself is wrong: bad key, bad
  parameters), and the server's own error message in the text;
* a malformed body (not JSON, no ``choices``, fields of the wrong type) is not
  retried with the same model, since it would most likely come back the same,
  but the next fallback model is tried.

When the retryable errors or a malformed body exhaust one model, each of
``profile.fallback_models`` is tried in order under the same policy; when all
fail, the last error is raised.

Observers: with ``hooks`` (the Kernel) every HTTP attempt fires
``pre_api_request`` and then either ``post_api_request`` or
``api_request_error``, sharing one ``api_request_id`` (uuid4 hex) per attempt;
``attempt`` counts from 1 for each model.  Hook payloads are deep copies and
never hold the API key; error texts have the key masked should a server echo
it.
"""

from __future__ import annotations

import copy
import email.utils
import json
import random
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import httpx
import tenacity

from ..middleware import acall_model, call_model
from ..safe_yaml import DataRefused, load_json
from .profile import ProviderProfile

__all__ = [
    "ChatCompletionsTransport",
    "ChatResult",
    "ChatTransport",
    "ProviderError",
    "ToolCall",
    "Usage",
]

# How much of a non-JSON error body goes into an error message.
_BODY_EXCERPT = 300
#: The largest response body read; a larger one is a malformed response (and is not kept in memory).
MAX_RESPONSE_BYTES = 32 * 1024 * 1024


# --------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------


@dataclass
class ToolCall:
    """One tool call asked for by the model; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str

    def parsed(self) -> dict[str, Any]:
        """The arguments decoded: ``{}`` when empty; ValueError when not a JSON object."""
        text = (self.arguments or "").strip()
        if not text:
            return {}
        try:
            value = load_json(text, f"the arguments of tool call '{self.name}' ({self.id})")
        except DataRefused:
            raise
        except ValueError as exc:
            raise ValueError(
                f"the arguments of tool call '{self.name}' ({self.id}) are not valid JSON: {exc}; "
                f"got {_excerpt(text, 200)!r}"
            ) from None
        if not isinstance(value, dict):
            raise ValueError(
                f"the arguments of tool call '{self.name}' ({self.id}) must be a JSON object, "
                f"not {type(value).__name__}"
            )
        return value

    def as_dict(self) -> dict[str, Any]:
        """The OpenAI ``tool_calls`` item for this call."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass
class Usage:
    """Token counts of one response, and its cost in USD when known."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ChatResult:
    """The model's answer: reply text, tool calls, usage and the decoded response (``raw``)."""

    text: str
    tool_calls: list[ToolCall]
    usage: Usage
    model: str
    provider: str
    finish_reason: str | None
    raw: dict[str, Any] = field(repr=False)

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [call.as_dict() for call in self.tool_calls]
        return message


class ProviderError(Exception):
    """A request to a model provider failed.

    ``status_code`` is the HTTP status (None for a connection error or
    timeout); ``retryable`` tells whether the failure is of a kind worth
    retrying (connection, timeout, 429, 5xx).  The message never contains the
    API key.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        model: str | None,
        status_code: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        malformed: bool = False,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.status_code = status_code
        self.retryable = retryable
        # Seconds the server asked us to wait (Retry-After), when it did.
        self.retry_after = retry_after
        # The body could not be understood (the next fallback model is tried).
        self.malformed = malformed

    @property
    def message(self) -> str:
        return str(self)


class ChatTransport(Protocol):
    """What the kernel needs from a model transport."""

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **context: Any,
    ) -> ChatResult: ...

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **context: Any,
    ) -> ChatResult: ...


# --------------------------------------------------------------------------
# Hook firing, shared with the scripted transport
# --------------------------------------------------------------------------


@dataclass
class ApiCall:
    """One attempt, as the api hooks see it."""

    session_id: str | None
    task_id: str | None
    model: str
    provider: str
    base_url: str | None
    api_mode: str
    request: dict[str, Any]
    turn_id: str | None = None
    api_request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started: float = field(default_factory=time.perf_counter)

    def common(self) -> dict[str, Any]:
        request = copy.deepcopy(self.request)
        messages = request.get("messages", [])
        return {
            "api_request_id": self.api_request_id,
            "session_id": self.session_id,
            "task_id": self.task_id,
            "turn_id": self.turn_id,
            "model": self.model,
            "provider": self.provider,
            "base_url": self.base_url,
            "api_mode": self.api_mode,
            "message_count": len(messages) if isinstance(messages, list) else 0,
            "tool_count": len(request.get("tools") or []),
            "request_messages": copy.deepcopy(messages),
            "request": request,
        }

    def elapsed_ms(self) -> int:
        return int((time.perf_counter() - self.started) * 1000)

    def pre(self) -> tuple[str, dict[str, Any]]:
        self.started = time.perf_counter()
        return "pre_api_request", self.common()

    def post(self, result: ChatResult) -> tuple[str, dict[str, Any]]:
        elapsed = time.perf_counter() - self.started
        usage = result.usage
        return "post_api_request", {
            **self.common(),
            "response": copy.deepcopy(dict(result.raw)),
            # Hermes' names too: prompt_tokens (= input_tokens), reasoning_tokens, request_count.
            "usage": {
                **usage.as_dict(),
                "prompt_tokens": usage.input_tokens,
                "completion_tokens": usage.output_tokens,
                "reasoning_tokens": 0,
                "request_count": 1,
            },
            "finish_reason": result.finish_reason,
            "response_model": result.model,
            "assistant_tool_call_count": len(result.tool_calls),
            "duration_ms": int(elapsed * 1000),
            "api_duration": elapsed,
        }

    def error(self, error: str, status_code: int | None, attempt: int) -> tuple[str, dict[str, Any]]:
        return "api_request_error", {
            **self.common(),
            "error": error,
            "status_code": status_code,
            "duration_ms": self.elapsed_ms(),
            "attempt": attempt,
        }


def fire(hooks: Any, event: tuple[str, dict[str, Any]]) -> None:
    if hooks is not None:
        name, kwargs = event
        hooks.invoke_hook(name, **kwargs)


async def afire(hooks: Any, event: tuple[str, dict[str, Any]]) -> None:
    if hooks is None:
        return
    name, kwargs = event
    ainvoke = getattr(hooks, "ainvoke_hook", None)
    if ainvoke is None:
        hooks.invoke_hook(name, **kwargs)
    else:
        await ainvoke(name, **kwargs)


# --------------------------------------------------------------------------
# The chat-completions transport
# --------------------------------------------------------------------------


class MiddlewareCalls:
    """``complete`` / ``acomplete`` of a transport: its ``_complete`` / ``_acomplete`` through the
    kernel's ``llm_request`` / ``llm_execution`` middleware (``hooks`` is the kernel)."""

    hooks: Any

    def complete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        """Ask the model, through the kernel's ``llm_request`` / ``llm_execution`` middleware."""
        return call_model(self.hooks, self._complete, messages, kwargs)

    async def acomplete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        """As :meth:`complete`, awaiting the model."""
        return await acall_model(self.hooks, self._acomplete, messages, kwargs)


class ChatCompletionsTransport(MiddlewareCalls):
    """OpenAI-compatible ``POST {base_url}/chat/completions`` for one profile and model.

    Thread-safe: the sync client is shared (httpx's is); ``acomplete`` makes an
    ``httpx.AsyncClient`` per call, so it works from any event loop.  Call
    :meth:`close` (or use ``with``) to release the sync connection pool.
    """

    api_mode = "chat_completions"

    def __init__(
        self,
        profile: ProviderProfile,
        *,
        model: str,
        api_key: str | None,
        base_url: str,
        hooks: Any = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 30.0,
    ) -> None:
        if not model:
            raise ProviderError(
                f"model provider '{profile.name}': no model to ask (set model.model in config.yaml)",
                provider=profile.name,
                model=None,
            )
        if not base_url:
            raise ProviderError(
                f"model provider '{profile.name}': no base_url (set model.base_url in config.yaml)",
                provider=profile.name,
                model=model,
            )
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, not {max_retries}")
        self.profile = profile
        self.provider = profile.name
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.hooks = hooks
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_base_delay = retry_base_delay
        self.retry_max_delay = retry_max_delay
        self._api_key = api_key or None
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ChatCompletionsTransport(provider={self.provider!r}, model={self.model!r}, url={self.url!r})"

    # -- lifecycle --------------------------------------------------------------

    def close(self) -> None:
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> ChatCompletionsTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _sync_client(self) -> httpx.Client:
        with self._client_lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout)
            return self._client

    # -- the request ----------------------------------------------------------------

    @property
    def models(self) -> list[str]:
        """The model and then the fallback models, in the order they are tried."""
        out = [self.model]
        out.extend(m for m in self.profile.fallback_models if m and m not in out)
        return out

    def headers(self) -> dict[str, str]:
        """The request headers (with the key; never handed to hooks or logs)."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers.update(self.profile.default_headers)
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def build_request(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        session_id: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **context: Any,
    ) -> dict[str, Any]:
        """The JSON body for ``model`` (default: the transport's), profile hooks applied."""
        profile = self.profile
        prepared = copy.deepcopy([dict(m) for m in messages])
        result = profile.prepare_messages(prepared)
        if result is not None:
            prepared = list(result)
        body: dict[str, Any] = {"model": model or self.model, "messages": prepared}
        if tools:
            body["tools"] = [_function_schema(t) for t in tools]
        if profile.fixed_temperature is not None:
            temperature = profile.fixed_temperature
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is None:
            max_tokens = profile.default_max_tokens
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        body.update(profile.build_extra_body(session_id=session_id, **context) or {})
        extras, top_level = profile.build_api_kwargs_extras(**context) or ({}, {})
        body.update(extras or {})
        body.update(top_level or {})
        if extra_body:
            body.update(extra_body)
        return body

    # -- sync ---------------------------------------------------------------------------

    def _complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **context: Any,
    ) -> ChatResult:
        """Ask the model; retry, then fall back, as the module docstring says."""
        body = self.build_request(
            messages,
            tools=tools,
            temperature=temperature,
            max_tokens=max_tokens,
            session_id=session_id,
            extra_body=extra_body,
            **context,
        )
        last: ProviderError | None = None
        for model in self.models:
            request = {**body, "model": model}
            try:
                for attempt in tenacity.Retrying(**self._retry_policy()):
                    with attempt:
                        number = attempt.retry_state.attempt_number
                        return self._attempt(request, session_id, task_id, number, context.get("turn_id"))
            except ProviderError as exc:
                if not (exc.retryable or exc.malformed):
                    raise
                last = exc
        assert last is not None
        raise last

    def _attempt(
        self,
        request: dict[str, Any],
        session_id: str | None,
        task_id: str | None,
        number: int,
        turn_id: str | None = None,
    ) -> ChatResult:
        call = self._call(request, session_id, task_id, turn_id)
        fire(self.hooks, call.pre())
        try:
            sent = self._sync_client().stream("POST", self.url, headers=self.headers(), json=request)
            with sent as response:
                content = _read_capped(response.iter_bytes())
        except httpx.TransportError as exc:
            error = self._transport_error(exc, request["model"])
            fire(self.hooks, call.error(str(error), None, number))
            raise error from None
        result, error = self._handle(response.status_code, response.headers, content, request)
        if error is not None:
            fire(self.hooks, call.error(str(error), error.status_code, number))
            raise error
        assert result is not None
        fire(self.hooks, call.post(result))
        return result

    # -- async ---------------------------------------------------------------------------

    async def _acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **context: Any,
    ) -> ChatResult:
        """As :meth:`complete`, on the running event loop (httpx.AsyncClient, asyncio sleeps)."""
        body = self.build_request(
            messages,
            tools=tools,
            temperature=temperature,
            max_tokens=max_tokens,
            session_id=session_id,
            extra_body=extra_body,
            **context,
        )
        last: ProviderError | None = None
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            for model in self.models:
                request = {**body, "model": model}
                try:
                    async for attempt in tenacity.AsyncRetrying(**self._retry_policy()):
                        with attempt:
                            number = attempt.retry_state.attempt_number
                            return await self._aattempt(
                                client, request, session_id, task_id, number, context.get("turn_id")
                            )
                except ProviderError as exc:
                    if not (exc.retryable or exc.malformed):
                        raise
                    last = exc
        assert last is not None
        raise last

    async def _aattempt(
        self,
        client: httpx.AsyncClient,
        request: dict[str, Any],
        session_id: str | None,
        task_id: str | None,
        number: int,
        turn_id: str | None = None,
    ) -> ChatResult:
        call = self._call(request, session_id, task_id, turn_id)
        await afire(self.hooks, call.pre())
        try:
            async with client.stream("POST", self.url, headers=self.headers(), json=request) as response:
                content = await _aread_capped(response.aiter_bytes())
        except httpx.TransportError as exc:
            error = self._transport_error(exc, request["model"])
            await afire(self.hooks, call.error(str(error), None, number))
            raise error from None
        result, error = self._handle(response.status_code, response.headers, content, request)
        if error is not None:
            await afire(self.hooks, call.error(str(error), error.status_code, number))
            raise error
        assert result is not None
        await afire(self.hooks, call.post(result))
        return result

    # -- shared pieces ----------------------------------------------------------------

    def _call(
        self, request: dict[str, Any], session_id: str | None, task_id: str | None, turn_id: str | None = None
    ) -> ApiCall:
        return ApiCall(
            session_id=session_id,
            task_id=task_id,
            turn_id=turn_id,
            model=request["model"],
            provider=self.provider,
            base_url=self.base_url,
            api_mode=self.profile.api_mode or self.api_mode,
            request=request,
        )

    def _retry_policy(self) -> dict[str, Any]:
        return {
            "stop": tenacity.stop_after_attempt(self.max_retries + 1),
            "wait": self._wait,
            "retry": tenacity.retry_if_exception(lambda e: isinstance(e, ProviderError) and e.retryable),
            "reraise": True,
        }

    def retry_delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based): the server's
        ``Retry-After`` when given, else exponential backoff with jitter; capped at
        ``retry_max_delay``."""
        if retry_after is not None:
            return max(0.0, min(float(retry_after), self.retry_max_delay))
        base = self.retry_base_delay * (2 ** max(0, attempt - 1))
        jitter = random.uniform(0, self.retry_base_delay / 4)  # noqa: S311 - not for security
        return max(0.0, min(base + jitter, self.retry_max_delay))

    def _wait(self, state: tenacity.RetryCallState) -> float:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        return self.retry_delay(state.attempt_number, getattr(exc, "retry_after", None))

    def _scrub(self, text: str) -> str:
        if self._api_key and self._api_key in text:
            text = text.replace(self._api_key, "***")
        return text

    def _error(self, message: str, model: str, **kwargs: Any) -> ProviderError:
        return ProviderError(
            self._scrub(f"model provider '{self.provider}' (model '{model}'): {message}"),
            provider=self.provider,
            model=model,
            **kwargs,
        )

    def _transport_error(self, exc: httpx.TransportError, model: str) -> ProviderError:
        kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "connection failed"
        detail = str(exc) or type(exc).__name__
        return self._error(
            f"{kind} ({type(exc).__name__}: {detail}) for {self.url}", model, status_code=None, retryable=True
        )

    def _handle(
        self, status: int, headers: Mapping[str, str], content: bytes | None, request: dict[str, Any]
    ) -> tuple[ChatResult | None, ProviderError | None]:
        """The result or the error of one response; ``content`` is ``None`` when the body was too large."""
        model = request["model"]
        if status >= 400:
            retryable = status == 429 or status >= 500
            message = f"HTTP {status}"
            detail = _error_message(content) if content is not None else "(a body too large to read)"
            if detail:
                message += f": {detail}"
            retry_after = _retry_after(headers.get("retry-after")) if retryable else None
            return None, self._error(
                message, model, status_code=status, retryable=retryable, retry_after=retry_after
            )
        if content is None:
            return None, self._error(
                f"malformed response (HTTP {status}): the body is over {MAX_RESPONSE_BYTES:,} bytes; "
                "it was not read",
                model,
                status_code=status,
                malformed=True,
            )
        try:
            data = load_json(content, "the body")
        except ValueError as exc:
            refused = isinstance(exc, DataRefused)
            detail = str(exc) if refused else f"the body is not JSON: {_excerpt(content)!r}"
            return None, self._error(
                f"malformed response (HTTP {status}): {detail}", model, status_code=status, malformed=True
            )
        try:
            result = self._parse(data, model)
        except _Malformed as exc:
            return None, self._error(
                f"malformed response (HTTP {status}): {exc}", model, status_code=status, malformed=True
            )
        return result, None

    def _parse(self, data: Any, requested_model: str) -> ChatResult:
        if not isinstance(data, dict):
            raise _Malformed(f"expected a JSON object, got {type(data).__name__}")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            detail = _error_message(data)
            where = f"; the provider said: {detail}" if detail else ""
            raise _Malformed(f"no 'choices' list in the body{where}")
        choice = choices[0]
        if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
            raise _Malformed("'choices[0].message' is not an object")
        message = choice["message"]
        text = _content_text(message.get("content"))
        tool_calls = _tool_calls(message.get("tool_calls"))
        finish_reason = choice.get("finish_reason")
        if finish_reason is not None and not isinstance(finish_reason, str):
            raise _Malformed(f"'finish_reason' must be a string, not {type(finish_reason).__name__}")
        usage = _usage(data.get("usage"), self.profile.prices)
        model = data.get("model")
        return ChatResult(
            text=text,
            tool_calls=tool_calls,
            usage=usage,
            model=model if isinstance(model, str) and model else requested_model,
            provider=self.provider,
            finish_reason=finish_reason,
            raw=data,
        )


# --------------------------------------------------------------------------
# Parsing helpers
# --------------------------------------------------------------------------


class _Malformed(Exception):
    pass


def _function_schema(tool: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI tool entry; a bare ``{name, description, parameters}`` schema is wrapped."""
    tool = dict(tool)
    if "function" in tool:
        return {"type": tool.get("type", "function"), **tool}
    return {"type": "function", "function": tool}


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # Content parts: keep the text ones.
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    raise _Malformed(f"'message.content' must be a string or null, not {type(content).__name__}")


def _tool_calls(raw: Any) -> list[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _Malformed(f"'message.tool_calls' must be a list, not {type(raw).__name__}")
    calls = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("function"), dict):
            raise _Malformed(f"tool call {index} has no 'function' object")
        function = item["function"]
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise _Malformed(f"tool call {index} has no function name")
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif isinstance(arguments, dict | list):
            # Some servers send the arguments decoded.
            arguments = json.dumps(arguments, ensure_ascii=False)
        elif not isinstance(arguments, str):
            raise _Malformed(
                f"tool call {index} ('{name}'): arguments must be a string or an object, "
                f"not {type(arguments).__name__}"
            )
        call_id = item.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = f"call_{index}"
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
    return calls


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return 0


def _usage(raw: Any, prices: Mapping[str, float] | None) -> Usage:
    """Usage from an OpenAI-style ``usage`` object; cost from it or from the profile's prices."""
    if not isinstance(raw, dict):
        raw = {}
    input_tokens = _int(raw.get("prompt_tokens", raw.get("input_tokens")))
    output_tokens = _int(raw.get("completion_tokens", raw.get("output_tokens")))
    total = _int(raw.get("total_tokens")) or input_tokens + output_tokens
    details = raw.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    cache_read = _int(details.get("cached_tokens", raw.get("cache_read_input_tokens")))
    cache_write = _int(details.get("cache_write_tokens", raw.get("cache_creation_input_tokens")))
    cost = raw.get("cost")
    cost_usd = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None
    if cost_usd is None and prices:
        cost_usd = _price(prices, input_tokens, output_tokens, cache_read)
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=total,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        cost_usd=cost_usd,
    )


def _price(prices: Mapping[str, float], input_tokens: int, output_tokens: int, cached: int) -> float | None:
    """USD from ``{"input", "output"[, "cache_read"]}`` prices per million tokens."""
    try:
        per_in = float(prices["input"])
        per_out = float(prices["output"])
        per_cached = float(prices.get("cache_read", per_in))
    except (KeyError, TypeError, ValueError):
        return None
    cached = min(cached, input_tokens)
    return ((input_tokens - cached) * per_in + cached * per_cached + output_tokens * per_out) / 1_000_000


def _read_capped(chunks: Iterator[bytes]) -> bytes | None:
    """The body from its chunks, or ``None`` once it grows past :data:`MAX_RESPONSE_BYTES`."""
    parts, size = [], 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            return None
        parts.append(chunk)
    return b"".join(parts)


async def _aread_capped(chunks: AsyncIterator[bytes]) -> bytes | None:
    parts, size = [], 0
    async for chunk in chunks:
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            return None
        parts.append(chunk)
    return b"".join(parts)


def _error_message(body: Any) -> str:
    """The provider's own error text from a body (bytes or decoded), or a short excerpt."""
    data = body
    if isinstance(body, bytes | str):
        try:
            data = load_json(body, "the body")
        except ValueError:
            return _excerpt(body)
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
        if isinstance(data.get("message"), str):
            return data["message"]
        if isinstance(data.get("detail"), str):
            return data["detail"]
    if isinstance(body, bytes | str):
        return _excerpt(body)
    return ""


def _excerpt(body: bytes | str, limit: int = _BODY_EXCERPT) -> str:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "…"


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header: a number, or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
