"""One HTTP attempt as the api hooks see it (``ApiCall``), and the middleware around a model call."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.data import copy_data
from ..tools.middleware import acall_model, call_model
from ..tools.registry import multimodal_text
from .results import ChatResult

# --------------------------------------------------------------------------
# Hook firing, shared with the scripted transport
# --------------------------------------------------------------------------

#: A hook's name and the function building its arguments (called only if the hook is heard).
Event = tuple[str, Callable[[], dict[str, Any]]]


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
        request = copy_data(self.request)
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
            "request_messages": copy_data(messages),
            "request": request,
        }

    def elapsed_ms(self) -> int:
        return int((time.perf_counter() - self.started) * 1000)

    def pre(self) -> Event:
        self.started = time.perf_counter()
        return "pre_api_request", self.common

    def post(self, result: ChatResult) -> Event:
        elapsed = time.perf_counter() - self.started
        return "post_api_request", lambda: self._post(result, elapsed)

    def _post(self, result: ChatResult, elapsed: float) -> dict[str, Any]:
        usage = result.usage
        return {
            **self.common(),
            "response": copy_data(dict(result.raw)),
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

    def error(self, error: str, status_code: int | None, attempt: int) -> Event:
        duration_ms = self.elapsed_ms()
        return "api_request_error", lambda: {
            **self.common(),
            "error": error,
            "status_code": status_code,
            "duration_ms": duration_ms,
            "attempt": attempt,
        }


def _heard(hooks: Any, name: str) -> bool:
    # The arguments are deep copies of the whole request (tool schemas included): built only when a
    # callback, wrapper or monitor will see them.
    if hooks is None:
        return False
    has_callbacks = getattr(hooks, "has_callbacks", None)
    return has_callbacks is None or bool(has_callbacks(name))


def fire(hooks: Any, event: Event) -> None:
    name, build = event
    if _heard(hooks, name):
        hooks.invoke_hook(name, **build())


async def afire(hooks: Any, event: Event) -> None:
    name, build = event
    if not _heard(hooks, name):
        return
    ainvoke = getattr(hooks, "ainvoke_hook", None)
    if ainvoke is None:
        hooks.invoke_hook(name, **build())
    else:
        await ainvoke(name, **build())


# --------------------------------------------------------------------------
# The middleware around a model call
# --------------------------------------------------------------------------


class MiddlewareCalls:
    """``complete`` / ``acomplete`` of a transport: its ``_complete`` / ``_acomplete`` through the
    kernel's ``llm_request`` / ``llm_execution`` middleware (``hooks`` is the kernel)."""

    hooks: Any

    if TYPE_CHECKING:
        # Each transport's own call of the model, which the middleware wraps.
        def _complete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult: ...

        async def _acomplete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult: ...

    def complete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        """Ask the model, through the kernel's ``llm_request`` / ``llm_execution`` middleware."""
        return call_model(self.hooks, self._complete, messages, kwargs)

    async def acomplete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        """As :meth:`complete`, awaiting the model."""
        return await acall_model(self.hooks, self._acomplete, messages, kwargs)


# --------------------------------------------------------------------------
# Multimodal tool results, as Hermes' transports send them
# --------------------------------------------------------------------------

_ENVELOPE_START = '{"_multimodal"'


def send_tool_parts(messages: list[dict[str, Any]], *, images: bool = True) -> None:
    """Turn each tool message whose content is a multimodal envelope's JSON text (what
    ``k.tools.dispatch`` returns for one) into what Hermes sends: its content parts, in place.

    With ``images`` false (a provider that refuses images in tool messages), a result with an image
    part is sent as its text instead: the envelope's ``text_summary``, else its text parts.
    """
    for message in messages:
        content = message.get("content")
        if (
            message.get("role") != "tool"
            or type(content) is not str
            or not content.startswith(_ENVELOPE_START)
        ):
            continue
        try:
            envelope = json.loads(content)
        except ValueError:
            continue
        if multimodal_text(envelope) is None:
            continue
        parts = envelope["content"]
        if images or all(part.get("type") == "text" for part in parts):
            message["content"] = parts
        else:
            message["content"] = _summary(envelope)


def _summary(envelope: dict[str, Any]) -> str:
    summary = envelope.get("text_summary")
    if isinstance(summary, str) and summary:
        return summary
    texts = [str(p.get("text", "")) for p in envelope["content"] if p.get("type") == "text"]
    return "\n".join(texts) if texts else "[multimodal tool result]"
