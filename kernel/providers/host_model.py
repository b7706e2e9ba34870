"""A host's own model as the kernel's active model (``k.providers.use_model``).

An embedding host (an agent framework) has a model already; ``ctx.llm`` and
the reference loop should answer with it rather than with a second one from
config.yaml.  :class:`HostModel` wraps the host's :class:`ChatTransport` so
that a call still goes through the kernel's ``llm_request`` /
``llm_execution`` middleware and fires ``pre_api_request`` /
``post_api_request`` / ``api_request_error``; :func:`text_transport` makes such
a transport of a plain ``call(messages) -> str``, sync or async.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.callbacks import describe, propagates
from .calls import ApiCall, MiddlewareCalls, afire, fire
from .results import ChatResult, ChatTransport, ProviderError, Usage

#: The provider name the hooks and ``ctx.llm`` results show for a host's model.
HOST_PROVIDER = "host"


class HostModel(MiddlewareCalls):
    """The host's ``transport`` behind the kernel's middleware and api hooks (``hooks`` is the kernel).

    A failure of the host's model — anything but Ctrl-C or a cancellation — is a
    :class:`ProviderError` naming it, as a failing HTTP provider's is.
    """

    api_mode = "host"

    def __init__(self, transport: ChatTransport, *, hooks: Any) -> None:
        if not callable(getattr(transport, "complete", None)):
            raise TypeError(
                "use_model() needs a ChatTransport (an object with complete()), "
                f"not {type(transport).__name__}"
            )
        self.transport = transport
        self.hooks = hooks
        self.provider = str(getattr(transport, "provider", None) or HOST_PROVIDER)
        self.model = str(getattr(transport, "model", None) or HOST_PROVIDER)
        self.base_url: str | None = None

    def __repr__(self) -> str:
        return f"HostModel({self.transport!r})"

    def close(self) -> None:
        """The host owns its model: nothing of it is closed here."""

    def _api_call(self, messages: Sequence[Mapping[str, Any]], kwargs: dict[str, Any]) -> ApiCall:
        request: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages]}
        for key in ("tools", "temperature", "max_tokens"):
            if kwargs.get(key) is not None:
                request[key] = kwargs[key]
        return ApiCall(
            session_id=kwargs.get("session_id"),
            task_id=kwargs.get("task_id"),
            turn_id=kwargs.get("turn_id"),
            model=self.model,
            provider=self.provider,
            base_url=None,
            api_mode=self.api_mode,
            request=request,
        )

    def _failure(self, exc: BaseException) -> ProviderError:
        """``exc`` as the :class:`ProviderError` it reaches callers as; Ctrl-C and cancellations go on."""
        if propagates(exc):
            raise exc
        if isinstance(exc, ProviderError):
            return exc
        return ProviderError(
            f"the host's model failed: {describe(exc)}", provider=self.provider, model=self.model
        )

    def _complete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        call = self._api_call(messages, kwargs)
        fire(self.hooks, call.pre())
        try:
            result = _checked(self.transport.complete(messages, **kwargs), self)
        except BaseException as exc:
            error = self._failure(exc)
            fire(self.hooks, call.error(str(error), error.status_code, 1))
            if error is exc:
                raise
            raise error from exc
        fire(self.hooks, call.post(result))
        return result

    async def _acomplete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        call = self._api_call(messages, kwargs)
        await afire(self.hooks, call.pre())
        try:
            acomplete = getattr(self.transport, "acomplete", None)
            if callable(acomplete):
                answer = await acomplete(messages, **kwargs)
            else:
                answer = await asyncio.to_thread(self.transport.complete, messages, **kwargs)
            result = _checked(answer, self)
        except BaseException as exc:
            error = self._failure(exc)
            await afire(self.hooks, call.error(str(error), error.status_code, 1))
            if error is exc:
                raise
            raise error from exc
        await afire(self.hooks, call.post(result))
        return result


def _checked(answer: Any, model: HostModel) -> ChatResult:
    if isinstance(answer, ChatResult):
        return answer
    raise ProviderError(
        f"the host's model returned {type(answer).__name__}, not a ChatResult",
        provider=model.provider,
        model=model.model,
        malformed=True,
    )


class TextTransport:
    """A :class:`ChatTransport` of a plain ``call(messages) -> str`` (or a coroutine function).

    The model sees the messages as the kernel has them (OpenAI chat format);
    the answer is the reply text, with no tool calls and no usage counts.
    """

    def __init__(self, call: Callable[[list[dict[str, Any]]], Any], *, model: str = HOST_PROVIDER) -> None:
        if not callable(call):
            raise TypeError(f"host_model() needs a callable, not {type(call).__name__}")
        self.call = call
        self.model = model
        self.provider = HOST_PROVIDER

    def __repr__(self) -> str:
        return f"TextTransport({getattr(self.call, '__qualname__', self.call)!r})"

    def complete(self, messages: Sequence[Mapping[str, Any]], **_kwargs: Any) -> ChatResult:
        answer = self.call([dict(m) for m in messages])
        if inspect.isawaitable(answer):
            answer = _run_coroutine(answer)
        return self._result(answer)

    async def acomplete(self, messages: Sequence[Mapping[str, Any]], **_kwargs: Any) -> ChatResult:
        if inspect.iscoroutinefunction(self.call):
            answer = await self.call([dict(m) for m in messages])
        else:
            answer = await asyncio.to_thread(self.call, [dict(m) for m in messages])
            if inspect.isawaitable(answer):
                answer = await answer
        return self._result(answer)

    def _result(self, answer: Any) -> ChatResult:
        if not isinstance(answer, str):
            raise ProviderError(
                f"the host's model call returned {type(answer).__name__}, not a str",
                provider=self.provider,
                model=self.model,
                malformed=True,
            )
        return ChatResult(
            text=str.__str__(answer),  # a str subclass's own methods never run
            tool_calls=[],
            usage=Usage(),
            model=self.model,
            provider=self.provider,
            finish_reason="stop",
            raw={},
        )


def _run_coroutine(awaitable: Any) -> Any:
    """Run ``awaitable`` to completion from sync code: here when no loop runs in this thread, else on
    a thread of its own (a sync call made from inside a running loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(awaitable))
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = asyncio.run(_awaited(awaitable))
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, name="hermes-host-model", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
