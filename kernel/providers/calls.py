"""One HTTP attempt as the api hooks see it (``ApiCall``), and the middleware around a model call."""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..tools.middleware import acall_model, call_model
from .results import ChatResult

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
# The middleware around a model call
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
