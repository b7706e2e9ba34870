"""Talking to a model: the OpenAI-compatible chat-completions transport.

``ChatCompletionsTransport`` POSTs ``{base_url}/chat/completions`` with httpx,
synchronously (:meth:`~ChatCompletionsTransport.complete`) or on the caller's
event loop (:meth:`~ChatCompletionsTransport.acomplete`), and returns a
:class:`ChatResult`: the reply text, the tool calls, the token usage.

The request body is ``{model, messages, tools?, temperature?, max_tokens?}``,
then the profile's hooks in this order, each merged shallowly (a later key
wins): ``prepare_messages`` (on a deep copy of the messages, where a tool result that is a
multimodal envelope is already its content parts, or its text for a profile whose
``supports_vision_tool_messages`` is false, as Hermes sends them),
``build_extra_body(session_id=..., **context)``, both halves of
``build_api_kwargs_extras(**context)``, and last the ``extra_body`` argument.
``profile.fixed_temperature`` replaces any temperature asked for (``OMIT_TEMPERATURE``: none is
sent); ``profile.get_max_tokens(model)`` (by default ``default_max_tokens``) is used when no
``max_tokens`` is given.

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
import random
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import tenacity

from ..base.safe_yaml import DataRefused, load_json
from .calls import ApiCall, MiddlewareCalls, afire, fire, send_tool_parts
from .parsing import (
    MAX_RESPONSE_BYTES,
    _aread_capped,
    _content_text,
    _error_message,
    _function_schema,
    _Malformed,
    _read_capped,
    _retry_after,
    _tool_calls,
    _usage,
)
from .profile import OMIT_TEMPERATURE, ProviderProfile
from .results import ChatResult, ChatTransport, ProviderError, ToolCall, Usage, _excerpt

__all__ = [
    "MAX_RESPONSE_BYTES",
    "ApiCall",
    "ChatCompletionsTransport",
    "ChatResult",
    "ChatTransport",
    "MiddlewareCalls",
    "ProviderError",
    "ToolCall",
    "Usage",
    "afire",
    "fire",
]


# --------------------------------------------------------------------------
# The chat-completions transport
# --------------------------------------------------------------------------


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
        send_tool_parts(prepared, images=getattr(profile, "supports_vision_tool_messages", True) is not False)
        result = profile.prepare_messages(prepared)
        if result is not None:
            prepared = list(result)
        body: dict[str, Any] = {"model": model or self.model, "messages": prepared}
        if tools:
            body["tools"] = [_function_schema(t) for t in tools]
        if profile.fixed_temperature is OMIT_TEMPERATURE:
            temperature = None
        elif profile.fixed_temperature is not None:
            temperature = profile.fixed_temperature
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is None:
            max_tokens = profile.get_max_tokens(model or self.model)
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
