"""Reading a chat-completions response: content, tool calls, usage and prices, error bodies, size caps."""

from __future__ import annotations

import email.utils
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from ..base.safe_yaml import load_json
from .results import ToolCall, Usage, _excerpt

#: The largest response body read; a larger one is a malformed response (and is not kept in memory).
MAX_RESPONSE_BYTES = 32 * 1024 * 1024

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
