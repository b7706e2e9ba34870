"""What a model call returns: ``ChatResult`` with its ``ToolCall``s and ``Usage``, and ``ProviderError``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from ..base.safe_yaml import DataRefused, load_json

# How much of a non-JSON error body goes into an error message.
_BODY_EXCERPT = 300


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


def _excerpt(body: bytes | str, limit: int = _BODY_EXCERPT) -> str:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "…"
