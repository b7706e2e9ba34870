"""Reading what the broker finds in Redis, which anyone with access may have written: member records,
stream entries, queued messages, and which errors mean a key of the wrong type or a Redis to retry."""

from __future__ import annotations

import math
from typing import Any

from redis import exceptions as rexc

from .broker import Inbound, chat_key, split_chat_key
from .sessions import read_json_object

#: The largest member record read back (its JSON, in bytes), and the most members read.
MAX_MEMBER_BYTES = 64 * 1024
MAX_MEMBERS = 1000
#: The longest member id or problem shown by ``gateway status`` (characters).
SHOWN = 200


def member_row(record: bytes | str) -> dict[str, Any]:
    """A member record as ``gateway status`` shows it (no ``id``); ``ValueError`` saying what is wrong."""
    if isinstance(record, bytes):
        try:
            record = record.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("not UTF-8 text") from None
    data = read_json_object(record, MAX_MEMBER_BYTES)
    row: dict[str, Any] = {}
    for name in ("role", "host"):
        value = data.get(name, "")
        if not isinstance(value, str):
            raise ValueError(f"'{name}' is not a string")
        row[name] = value[:SHOWN]
    for name in ("pid", "concurrency", "busy"):
        value = data.get(name, 0)
        if type(value) is not int or not 0 <= value < 2**63:
            raise ValueError(f"'{name}' is not a whole number")
        row[name] = value
    for name, shown in (("started", "started"), ("heartbeat", "last_heartbeat")):
        value = data.get(name, 0)
        if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
            raise ValueError(f"'{name}' is not a time")
        row[shown] = float(value)
    error = data.get("error")
    row["error"] = str(error)[:500] if error else None
    return row


def shown(value: bytes | str) -> str:
    text = value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."


def mistyped(exc: BaseException) -> bool:
    """Whether Redis refused a command (or a script refused to start) for a key of the wrong type."""
    if not isinstance(exc, rexc.ResponseError):
        return False
    text = str(exc)
    return text.startswith("MISTYPED") or "WRONGTYPE" in text


def retryable(exc: BaseException) -> bool:
    if isinstance(exc, rexc.ResponseError):
        text = str(exc)
        return text.startswith(("NOGROUP", "LOADING", "MASTERDOWN", "TRYAGAIN", "BUSY"))
    return isinstance(exc, rexc.ConnectionError | rexc.TimeoutError | OSError)


def entries(result: Any) -> list[tuple[str, dict[str, str]]]:
    """The entries of an ``XREADGROUP`` / ``XAUTOCLAIM`` answer, RESP2 or RESP3 shaped."""
    if not result:
        return []
    streams = result.items() if isinstance(result, dict) else result
    entries: list[tuple[str, dict[str, str]]] = []
    for item in streams:
        rows = item[1]
        if rows and isinstance(rows[0], list) and rows[0] and isinstance(rows[0][0], list | tuple):
            rows = rows[0]  # RESP3 wraps a stream's entries once more
        for row in rows or []:
            entry, fields = row[0], row[1]
            if isinstance(fields, list):
                fields = dict(zip(fields[::2], fields[1::2], strict=False))
            entries.append((entry, fields or {}))
    return entries


def read_message(chat: str, entry: Any, payload: Any, log: Any = None) -> Inbound:
    """The message of the chat ``chat``'s stream entry; one marked ``unreadable`` (answered with
    nothing, acknowledged) when the payload is not the kernel's or names another chat."""
    platform, chat_id = split_chat_key(chat) or ("", chat)
    try:
        message = Inbound.loads(payload, broker_id=entry)
    except (ValueError, TypeError, RecursionError) as exc:
        if log is not None:
            log.warning("gateway_message_unreadable", chat=chat, entry=entry, problem=str(exc))
    else:
        if (message.platform, message.chat_id) == (platform, chat_id):
            return message
        if log is not None:
            log.warning(
                "gateway_message_foreign",
                chat=chat,
                entry=entry,
                names=chat_key(message.platform, message.chat_id)[:200],
                detail="a message in this chat's queue names another chat: set aside, not answered",
            )
    broken = Inbound(platform=platform, chat_id=chat_id, text="", broker_id=str(entry))
    broken.message_type = "unreadable"
    return broken
