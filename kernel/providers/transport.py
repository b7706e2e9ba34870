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

import asyncio
import functools
import random
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from .calls import ApiCall, MiddlewareCalls, afire, fire
from .parsing import MAX_RESPONSE_BYTES, BadReply, Reply, _aread_capped, _read_capped, read_reply
from .plan import Move, Plan, Send, Wait, arun, backoff, models_in_order, next_move, run
from .profile import ProviderProfile
from .request import ChatRequest, chat_body
from .results import ChatResult, ChatTransport, ProviderError, ToolCall, Usage

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
        return models_in_order(self.model, self.profile.fallback_models)

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
        request = ChatRequest(
            messages,
            model=model,
            tools=tools,
            temperature=temperature,
            max_tokens=max_tokens,
            session_id=session_id,
            extra_body=extra_body,
            context=context,
        )
        return chat_body(self.profile, request, model or self.model)

    # -- one call, written once; the sync and async paths differ in how they send and sleep ---------

    def _complete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        """Ask the model; retry, then fall back, as the module docstring says."""
        return run(self._plan(ChatRequest.of(messages, kwargs)), self.hooks, self._send, time.sleep)

    async def _acomplete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        """As :meth:`complete`, on the running event loop (httpx.AsyncClient, asyncio sleeps)."""
        plan = self._plan(ChatRequest.of(messages, kwargs))
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            return await arun(plan, self.hooks, functools.partial(self._asend, client), asyncio.sleep)

    def _send(self, step: Send) -> Reply:
        with self._sync_client().stream("POST", self.url, headers=self.headers(), json=step.body) as response:
            return Reply(response.status_code, response.headers, _read_capped(response.iter_bytes()))

    async def _asend(self, client: httpx.AsyncClient, step: Send) -> Reply:
        async with client.stream("POST", self.url, headers=self.headers(), json=step.body) as response:
            return Reply(response.status_code, response.headers, await _aread_capped(response.aiter_bytes()))

    def _plan(self, request: ChatRequest) -> Plan:
        """Each model in turn, each tried until :func:`next_move` says otherwise; the last error is raised."""
        body = chat_body(self.profile, request, request.model or self.model)
        last: ProviderError | None = None
        for model in self.models:
            attempt = 1
            while True:
                try:
                    return (yield from self._try({**body, "model": model}, request, attempt))
                except ProviderError as exc:
                    move = next_move(exc, attempt, self.max_retries)
                    if move is Move.RAISE:
                        raise
                    last = exc
                if move is Move.NEXT_MODEL:
                    break
                yield Wait(self.retry_delay(attempt, last.retry_after))
                attempt += 1
        assert last is not None
        raise last

    def _try(self, body: dict[str, Any], request: ChatRequest, attempt: int) -> Plan:
        """One HTTP attempt, between its api hooks."""
        call = self._call(body, request)
        yield call.pre()
        try:
            reply = yield Send(body)
        except httpx.TransportError as exc:
            error = self._transport_error(exc, body["model"])
            yield call.error(str(error), None, attempt)
            raise error from None
        outcome = read_reply(reply, model=body["model"], provider=self.provider, prices=self.profile.prices)
        if isinstance(outcome, BadReply):
            error = self._error(
                outcome.message,
                body["model"],
                status_code=outcome.status_code,
                retryable=outcome.retryable,
                retry_after=outcome.retry_after,
                malformed=outcome.malformed,
            )
            yield call.error(str(error), error.status_code, attempt)
            raise error
        yield call.post(outcome)
        return outcome

    # -- shared pieces ----------------------------------------------------------------

    def _call(self, body: dict[str, Any], request: ChatRequest) -> ApiCall:
        return ApiCall(
            session_id=request.session_id,
            task_id=request.task_id,
            turn_id=request.turn_id,
            model=body["model"],
            provider=self.provider,
            base_url=self.base_url,
            api_mode=self.profile.api_mode or self.api_mode,
            request=body,
        )

    def retry_delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based): the server's
        ``Retry-After`` when given, else exponential backoff with jitter; capped at
        ``retry_max_delay``."""
        jitter = 0.0 if retry_after is not None else random.uniform(0, self.retry_base_delay / 4)  # noqa: S311
        return backoff(
            attempt, retry_after, base=self.retry_base_delay, cap=self.retry_max_delay, jitter=jitter
        )

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
