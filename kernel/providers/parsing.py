"""Reading a chat-completions response: the result or the failure, content, tool calls, usage and prices,
error bodies, size caps."""

from __future__ import annotations

import email.utils
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..base.safe_yaml import DataRefused, load_json
from .results import ChatResult, ToolCall, Usage, _excerpt

#: The largest response body read; a larger one is a malformed response (and is not kept in memory).
MAX_RESPONSE_BYTES = 32 * 1024 * 1024

# --------------------------------------------------------------------------
# One response: the result or the failure
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """One HTTP response as read: the status, the headers, the body (``None``: over the size cap, unread)."""

    status: int
    headers: Mapping[str, str]
    content: bytes | None


@dataclass(frozen=True)
class BadReply:
    """Why a response is not a result; the transport makes it a ``ProviderError`` (its text prefixed)."""

    message: str
    status_code: int
    retryable: bool = False
    retry_after: float | None = None
    malformed: bool = False


def read_reply(
    reply: Reply, *, model: str, provider: str, prices: Mapping[str, float] | None
) -> ChatResult | BadReply:
    """The result of a response to a request for ``model``, or why there is none."""
    status, content = reply.status, reply.content
    if status >= 400:
        retryable = status == 429 or status >= 500
        message = f"HTTP {status}"
        detail = _error_message(content) if content is not None else "(a body too large to read)"
        if detail:
            message += f": {detail}"
        retry_after = _retry_after(reply.headers.get("retry-after")) if retryable else None
        return BadReply(message, status, retryable=retryable, retry_after=retry_after)
    if content is None:
        return BadReply(
            f"malformed response (HTTP {status}): the body is over {MAX_RESPONSE_BYTES:,} bytes; "
            "it was not read",
            status,
            malformed=True,
        )
    try:
        data = load_json(content, "the body")
    except ValueError as exc:
        detail = str(exc) if isinstance(exc, DataRefused) else f"the body is not JSON: {_excerpt(content)!r}"
        return BadReply(f"malformed response (HTTP {status}): {detail}", status, malformed=True)
    try:
        return _result(data, model, provider, prices)
    except _Malformed as exc:
        return BadReply(f"malformed response (HTTP {status}): {exc}", status, malformed=True)


def _result(data: Any, requested_model: str, provider: str, prices: Mapping[str, float] | None) -> ChatResult:
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
    usage = _usage(data.get("usage"), prices)
    model = data.get("model")
    return ChatResult(
        text=text,
        tool_calls=tool_calls,
        usage=usage,
        model=model if isinstance(model, str) and model else requested_model,
        provider=provider,
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
