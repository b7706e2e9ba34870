"""A small HTTP/1.1 endpoint for the gateway, on asyncio streams and nothing beyond the standard library.

Endpoints (JSON in, JSON out; see ``docs/gateway.md``):

* ``POST /v1/messages`` with ``{"chat_id", "text", "message_id"?, "user"?}`` hands the message to the
  gateway and answers ``202 {"message_id"}``; with ``?wait=SECONDS`` the request is held until the
  reply comes (``200 {"message_id", "reply"}``) or the wait runs out (``202``, ``"reply": null``);
* ``GET /v1/chats/<chat id>/replies?after=N`` returns the replies sent to the chat whose ``seq`` is
  above ``N`` (``&wait=SECONDS`` holds the request until there is one);
* ``GET /v1/health`` says the endpoint is up.

Every request is bounded: the request line and headers (count and bytes), the body (bytes, by
``Content-Length``; no chunked bodies), and the time to read them (a slow client is answered 408 and
dropped).  Messages of one chat go to the gateway one after another, in the order they arrived.
Replies are kept per chat for polling, in bounded buffers: the oldest are dropped, and counted.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import difflib
import hmac
import ipaddress
import json
import logging
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import parse_qsl, unquote

from kernel.base.safe_yaml import utf8_size
from kernel.gateway import (
    BasePlatformAdapter,
    MessageEvent,
    MessageType,
    PlatformConfig,
    SendResult,
    SessionSource,
)

# Loaded as a plugin, the module lives under the kernel's plugin package: its records go to agent.log.
log = logging.getLogger(__name__)

#: The environment variable that holds the bearer token when config.yaml does not.
TOKEN_ENV = "HTTP_PLATFORM_TOKEN"  # noqa: S105 - the name of a variable, not its value
#: The longest chat id, message id or user name, in UTF-8 bytes.
MAX_ID_BYTES = 256
#: The longest ``?wait`` anyone may ask for (``max_wait`` may lower it).
WAIT_CEILING = 120.0
#: One reply is one piece: the gateway splits answers longer than this (in characters).
ONE_PIECE = 8 * 1024 * 1024
_FIELDS = ("chat_id", "text", "message_id", "user")
_REASONS = {
    200: "OK",
    202: "Accepted",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class HttpError(Exception):
    """A request answered with an error: ``status`` and a message for the client."""

    def __init__(
        self, status: int, message: str, *, close: bool = False, headers: dict[str, str] | None = None
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.close = close
        self.headers = headers or {}


# -- settings ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpSettings:
    """The adapter's settings, from ``gateway.platforms.http`` (documented in ``docs/gateway.md``)."""

    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    allow_remote: bool = False
    max_body_bytes: int = 1024 * 1024
    max_headers: int = 64
    max_header_bytes: int = 16 * 1024
    read_timeout: float = 10.0
    max_wait: float = WAIT_CEILING
    max_replies_per_chat: int = 100
    max_chats: int = 1000
    max_buffer_bytes: int = 64 * 1024 * 1024
    max_connections: int = 256
    max_pending: int = 1024

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @classmethod
    def from_config(
        cls,
        config: PlatformConfig | Mapping[str, Any],
        environ: Mapping[str, str] | None = None,
        where: str = "config.yaml",
    ) -> HttpSettings:
        """Read and check the settings; a :class:`ValueError` names the file, the key and the fix."""
        if isinstance(config, PlatformConfig):
            data: dict[str, Any] = dict(config.extra)
            if config.token is not None:
                data["token"] = config.token
        else:
            data = {
                k: v for k, v in config.items() if k not in ("enabled", "api_key", "home_channel", "extra")
            }
            data.update(config.get("extra") or {})
        for ignored in ("api_key", "home_channel"):
            data.pop(ignored, None)
        prefix = f"{where}: gateway.platforms.http (plugin platforms/http)"
        known = [f.name for f in fields(cls)]
        for key in data:
            if key not in known:
                near = difflib.get_close_matches(str(key), known, n=1)
                hint = f"did you mean '{near[0]}'? " if near else ""
                raise ValueError(f"{prefix}: unknown key '{key}' — {hint}known keys: {', '.join(known)}")
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data or data[f.name] is None:
                continue
            value = data[f.name]
            if f.name in ("host", "token"):
                if not isinstance(value, str):
                    raise ValueError(f"{prefix}: '{f.name}' must be a string, not {type(value).__name__}")
                values[f.name] = value.strip()
            elif f.name == "allow_remote":
                values[f.name] = _flag(prefix, f.name, value)
            elif isinstance(f.default, float):
                values[f.name] = _number(prefix, f.name, value, float, 0.01, 86400.0)
            else:
                low, high = (0, 65535) if f.name == "port" else (1, 1 << 40)
                values[f.name] = _number(prefix, f.name, value, int, low, high)
        if not values.get("token"):
            values["token"] = (environ if environ is not None else os.environ).get(
                TOKEN_ENV, ""
            ).strip() or None
        if not values.get("host", "x"):
            raise ValueError(f"{prefix}: 'host' is empty; leave it out to listen on 127.0.0.1")
        values["max_wait"] = min(values.get("max_wait", WAIT_CEILING), WAIT_CEILING)
        settings = cls(**values)
        if not settings.loopback and not (settings.allow_remote and settings.token):
            raise ValueError(
                f"{prefix}: host '{settings.host}' is not a loopback address: anyone who reaches it could "
                f"talk to the agent. To listen there, set allow_remote: true and a token (token: in "
                f"config.yaml or ${TOKEN_ENV}); otherwise leave host out (127.0.0.1)"
            )
        return settings


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _flag(prefix: str, key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in _TRUE | _FALSE:
        return word in _TRUE
    raise ValueError(f"{prefix}: '{key}' must be true or false, not {value!r}")


def _number(prefix: str, key: str, value: Any, kind: type, low: float, high: float) -> Any:
    try:
        if isinstance(value, bool) or (kind is int and isinstance(value, float)):
            raise ValueError
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        what = "a whole number" if kind is int else "a number"
        raise ValueError(f"{prefix}: '{key}' must be {what}, not {value!r}") from None
    if not low <= number <= high:
        raise ValueError(f"{prefix}: '{key}' must be from {low:g} to {high:g}, not {number!r}")
    return number


# -- requests ---------------------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


def _field_text(data: Mapping[str, Any], key: str, *, required: bool, limit: int | None) -> str | None:
    """A string field of the posted JSON, checked: no NUL, no lone surrogate, at most ``limit`` bytes."""
    value = data.get(key)
    if value is None:
        if required:
            raise HttpError(400, f"'{key}' is missing: send a JSON object with chat_id and text")
        return None
    if not isinstance(value, str):
        raise HttpError(400, f"'{key}' must be a string, not {_json_type(value)}")
    if required and not value.strip():
        raise HttpError(400, f"'{key}' must not be empty")
    for index, char in enumerate(value):
        code = ord(char)
        if 0xD800 <= code <= 0xDFFF:
            raise HttpError(
                400, f"'{key}' holds a lone surrogate (\\u{code:04x}) at {index}: send valid Unicode"
            )
        if code == 0 or (limit is not None and (code < 0x20 or code == 0x7F)):
            raise HttpError(400, f"'{key}' holds a control character (\\u{code:04x}) at {index}")
    if limit is not None and utf8_size(value) > limit:
        raise HttpError(400, f"'{key}' is over {limit} bytes (UTF-8)")
    return value


def _json_type(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", list: "an array", dict: "an object"}
    return names.get(type(value), "null" if value is None else type(value).__name__)


def _seconds(query: Mapping[str, str], key: str, ceiling: float) -> float:
    raw = query.get(key)
    if raw is None:
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= ceiling:  # NaN fails too
        raise HttpError(400, f"'{key}' must be a number of seconds from 0 to {ceiling:g}, not {raw[:40]!r}")
    return value


# -- the adapter --------------------------------------------------------------------------------


@dataclass
class Chat:
    """The replies kept for one chat, for polling."""

    replies: collections.deque[dict[str, Any]]
    dropped: int = 0
    size: int = 0
    changed: asyncio.Event | None = None


class HttpAdapter(BasePlatformAdapter):
    """The gateway's HTTP platform (settings: :class:`HttpSettings`)."""

    MAX_MESSAGE_LENGTH = ONE_PIECE

    def __init__(
        self,
        config: PlatformConfig,
        platform: Any = None,
        *,
        environ: Mapping[str, str] | None = None,
        where: str = "config.yaml",
    ) -> None:
        super().__init__(config, platform or "http")
        self.settings = HttpSettings.from_config(config, environ, where)
        #: The port listened on (the one picked when ``port`` is 0), once connected.
        self.port: int | None = None
        #: Replies dropped with the chat that held them (the least recently answered, over ``max_chats``).
        self.dropped_chats = 0
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._chats: collections.OrderedDict[str, Chat] = collections.OrderedDict()
        self._buffered = 0
        self._seq = 0
        self._waiters: dict[tuple[str, str], list[asyncio.Future[str]]] = {}
        self._queues: dict[str, collections.deque[MessageEvent]] = {}
        self._drainers: dict[str, asyncio.Task[None]] = {}
        self._pending = 0

    # -- listening ---------------------------------------------------------------------------

    async def connect(self, *, is_reconnect: bool = False) -> bool:
        """Listen on ``host:port``; ``False`` (and :attr:`last_error`) when the address cannot be bound."""
        if self._server is not None:
            return True
        s = self.settings
        try:
            self._server = await asyncio.start_server(
                self._client, s.host, s.port, limit=s.max_header_bytes, reuse_address=True
            )
        except OSError as exc:
            self.last_error = f"cannot listen on {s.url}: {exc.strerror or exc}"
            log.warning("http: %s", self.last_error)
            return False
        self.port = self._server.sockets[0].getsockname()[1]
        url = HttpSettings(host=s.host, port=self.port).url
        self.last_error = None
        self._mark_connected()
        log.info("http: listening on %s", url)
        print(f"hermes-kernel gateway: http: listening on {url}", flush=True)
        return True

    async def disconnect(self) -> None:
        """Stop listening, close every connection and stop handing messages over."""
        server, self._server = self._server, None
        self._mark_disconnected()
        if server is not None:
            server.close()
        for writer in list(self._writers):
            writer.close()
        tasks = [*self._clients, *self._drainers.values()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5.0)
        for waiters in self._waiters.values():
            for future in waiters:
                future.cancel()
        self._waiters.clear()
        self._queues.clear()
        self._pending = 0

    # -- replies -----------------------------------------------------------------------------

    async def send(
        self,
        chat_id: str,
        content: str,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SendResult:
        """Keep ``content`` for the chat's pollers and hand it to a request waiting for it."""
        s = self.settings
        self._seq += 1
        entry = {"seq": self._seq, "reply_to": reply_to, "text": content, "time": time.time()}
        size = utf8_size(content) + 64
        chat = self._chats.get(chat_id)
        if chat is None:
            chat = self._chats[chat_id] = Chat(collections.deque())
        self._chats.move_to_end(chat_id)
        chat.replies.append(entry)
        chat.size += size
        self._buffered += size
        while len(chat.replies) > s.max_replies_per_chat:
            self._drop_oldest(chat)
        while len(self._chats) > s.max_chats:
            self._forget_chat()
        while self._buffered > s.max_buffer_bytes and len(self._chats) > 1:
            self._forget_chat()
        while self._buffered > s.max_buffer_bytes and len(chat.replies) > 1:
            self._drop_oldest(chat)
        if chat.changed is not None:
            chat.changed.set()
            chat.changed = None
        for future in self._waiters.pop((chat_id, reply_to or ""), []):
            if not future.done():
                future.set_result(content)
        return SendResult(success=True, message_id=f"http-out-{self._seq}")

    def _drop_oldest(self, chat: Chat) -> None:
        old = chat.replies.popleft()
        freed = utf8_size(old["text"]) + 64
        chat.size -= freed
        self._buffered -= freed
        chat.dropped += 1

    def _forget_chat(self) -> None:
        _name, chat = self._chats.popitem(last=False)
        self._buffered -= chat.size
        self.dropped_chats += 1
        if chat.changed is not None:
            chat.changed.set()

    # -- connections -------------------------------------------------------------------------

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self._clients) >= self.settings.max_connections or task is None:
            with contextlib.suppress(Exception):
                await self._respond(writer, 503, {"error": "too many connections; try again"}, False)
            writer.close()
            return
        self._clients.add(task)
        self._writers.add(writer)
        try:
            while self._server is not None:
                try:
                    request = await self._read(reader, writer)
                    if request is None:
                        break
                    status, body = await self._route(request)
                    keep = request.keep_alive
                    extra: dict[str, str] = {}
                except HttpError as exc:
                    status, body, keep = exc.status, {"error": exc.message}, not exc.close
                    extra = exc.headers
                await self._respond(writer, status, body, keep and self._server is not None, extra)
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception as exc:  # a bug here must not end the server: the client gets a 500
            log.warning("http: a request failed: %s: %s", type(exc).__name__, exc)
            with contextlib.suppress(Exception):
                await self._respond(writer, 500, {"error": "internal error; see the gateway's log"}, False)
        finally:
            self._clients.discard(task)
            self._writers.discard(writer)
            writer.close()

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Request | None:
        """The next request on the connection; ``None`` when the client closed it between requests."""
        s = self.settings
        try:
            async with asyncio.timeout(s.read_timeout):
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError as exc:
                    if not exc.partial.strip():
                        return None
                    raise HttpError(400, "the request ended before its headers did", close=True) from None
                except asyncio.LimitOverrunError:
                    raise HttpError(
                        431, f"the request line and headers are over {s.max_header_bytes} bytes", close=True
                    ) from None
                request = self._parse_head(head)
                length = self._body_length(request)
                if length:
                    if request.headers.get("expect", "").lower() == "100-continue":
                        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                        await writer.drain()
                    request.body = await reader.readexactly(length)
                return request
        except TimeoutError:
            raise HttpError(
                408, f"the request was not read within {s.read_timeout:g} seconds", close=True
            ) from None

    def _parse_head(self, head: bytes) -> Request:
        s = self.settings
        lines = head[:-4].decode("latin-1").split("\r\n")
        while lines and not lines[0]:
            lines.pop(0)  # blank lines before a request are allowed
        parts = lines[0].split(" ") if lines else []
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            if len(parts) == 3 and parts[2].startswith("HTTP/"):
                raise HttpError(505, "only HTTP/1.0 and HTTP/1.1 are spoken here", close=True)
            raise HttpError(400, "not an HTTP request line (METHOD /path HTTP/1.1)", close=True)
        method, target, version = parts
        if len(lines) - 1 > s.max_headers:
            raise HttpError(431, f"more than {s.max_headers} headers", close=True)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip() or " " in name:
                raise HttpError(400, f"malformed header line {line[:60]!r}", close=True)
            key = name.lower()
            if key in headers and key in ("content-length", "authorization", "host", "transfer-encoding"):
                raise HttpError(400, f"the header '{name}' is repeated", close=True)
            headers[key] = value.strip()
        path, _q, query_text = target.partition("?")
        try:
            query = dict(parse_qsl(query_text, keep_blank_values=True, max_num_fields=16, errors="strict"))
        except (ValueError, UnicodeDecodeError):
            raise HttpError(400, "the query string cannot be read (at most 16 fields, UTF-8)") from None
        connection = headers.get("connection", "").lower()
        keep = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        return Request(method, path, query, headers, b"", keep)

    def _body_length(self, request: Request) -> int:
        s = self.settings
        if "transfer-encoding" in request.headers:
            raise HttpError(501, "chunked request bodies are not accepted: send Content-Length", close=True)
        raw = request.headers.get("content-length")
        if raw is None:
            if request.method == "POST":
                raise HttpError(411, "a POST needs a Content-Length header", close=True)
            return 0
        if not raw.isdigit() or not raw.isascii() or len(raw) > 18:
            raise HttpError(400, f"Content-Length {raw[:30]!r} is not a number of bytes", close=True)
        length = int(raw)
        if length > s.max_body_bytes:
            raise HttpError(413, f"the body is over {s.max_body_bytes} bytes ({length})", close=True)
        self._authorize(request)  # before reading the body: a stranger's bytes are not read
        return length

    def _authorize(self, request: Request) -> None:
        token = self.settings.token
        if not token:
            return
        given = request.headers.get("authorization", "")
        scheme, _sp, credential = given.partition(" ")
        ok = hmac.compare_digest(credential.strip().encode("utf-8", "replace"), token.encode("utf-8"))
        if scheme.lower() != "bearer" or not ok:
            raise HttpError(
                401,
                "missing or wrong bearer token (Authorization: Bearer <token>)",
                close=True,
                headers={"WWW-Authenticate": "Bearer"},
            )

    async def _respond(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: Any,
        keep: bool,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        head = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
            "Content-Type: application/json; charset=utf-8",
            f"Content-Length: {len(data)}",
            f"Connection: {'keep-alive' if keep else 'close'}",
            *(f"{k}: {v}" for k, v in (extra or {}).items()),
        ]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
        await writer.drain()

    # -- routes ------------------------------------------------------------------------------

    async def _route(self, request: Request) -> tuple[int, Any]:
        self._authorize(request)
        path = request.path
        if path == "/v1/messages":
            if request.method != "POST":
                raise HttpError(405, "use POST /v1/messages", headers={"Allow": "POST"})
            return await self._post_message(request)
        if path.startswith("/v1/chats/") and path.endswith("/replies"):
            if request.method != "GET":
                raise HttpError(405, "use GET /v1/chats/<chat id>/replies", headers={"Allow": "GET"})
            quoted = path[len("/v1/chats/") : -len("/replies")]
            try:
                chat_id = unquote(quoted, errors="strict")
            except UnicodeDecodeError:
                raise HttpError(400, "the chat id in the path is not UTF-8 once unquoted") from None
            _field_text({"chat_id": chat_id}, "chat_id", required=True, limit=MAX_ID_BYTES)
            return await self._get_replies(chat_id, request)
        if path == "/v1/health":
            return 200, {"ok": True, "platform": self.name, "pending": self._pending}
        raise HttpError(404, f"no such endpoint {path[:80]!r}: POST /v1/messages, GET /v1/chats/<id>/replies")

    async def _post_message(self, request: Request) -> tuple[int, Any]:
        s = self.settings
        wait = _seconds(request.query, "wait", s.max_wait)
        try:
            data = json.loads(request.body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise HttpError(400, f"the body is not UTF-8 (byte {exc.start})") from None
        except RecursionError:
            raise HttpError(400, "the body is nested too deeply") from None
        except ValueError as exc:
            raise HttpError(400, f"the body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise HttpError(400, f"the body must be a JSON object, not {_json_type(data)}")
        unknown = sorted(str(k)[:40] for k in data if k not in _FIELDS)
        if unknown:
            raise HttpError(400, f"unknown field(s) {', '.join(unknown)}: send {', '.join(_FIELDS)}")
        chat_id = _field_text(data, "chat_id", required=True, limit=MAX_ID_BYTES)
        text = _field_text(data, "text", required=True, limit=None)
        message_id = _field_text(data, "message_id", required=False, limit=MAX_ID_BYTES)
        user = _field_text(data, "user", required=False, limit=MAX_ID_BYTES)
        assert chat_id is not None and text is not None
        if message_id is None or not message_id.strip():
            message_id = f"http-{uuid.uuid4().hex}"
        if self._pending >= s.max_pending:
            raise HttpError(
                503, f"{s.max_pending} messages are already waiting; try again", headers={"Retry-After": "1"}
            )
        future: asyncio.Future[str] | None = None
        if wait > 0:
            future = asyncio.get_running_loop().create_future()
            self._waiters.setdefault((chat_id, message_id), []).append(future)
        event = MessageEvent(
            text=text,
            message_type=MessageType.COMMAND if text.startswith("/") else MessageType.TEXT,
            source=SessionSource(
                platform=self.platform,
                chat_id=chat_id,
                chat_type="dm",
                user_id=user,
                user_name=user,
                chat_name=chat_id,
            ),
            message_id=message_id,
        )
        self._enqueue(event)
        if future is None:
            return 202, {"message_id": message_id}
        try:
            reply = await asyncio.wait_for(asyncio.shield(future), wait)
        except TimeoutError:
            waiters = self._waiters.get((chat_id, message_id), [])
            with contextlib.suppress(ValueError):
                waiters.remove(future)
            if not waiters:
                self._waiters.pop((chat_id, message_id), None)
            return 202, {"message_id": message_id, "reply": None}
        return 200, {"message_id": message_id, "reply": reply}

    async def _get_replies(self, chat_id: str, request: Request) -> tuple[int, Any]:
        after_raw = request.query.get("after", "0")
        if not after_raw.isdigit() or not after_raw.isascii() or len(after_raw) > 18:
            raise HttpError(400, f"'after' must be a whole number (a reply's seq), not {after_raw[:40]!r}")
        after = int(after_raw)
        wait = _seconds(request.query, "wait", self.settings.max_wait)
        chat = self._chats.get(chat_id)
        if wait > 0 and (chat is None or not chat.replies or chat.replies[-1]["seq"] <= after):
            if chat is None:
                chat = self._chats[chat_id] = Chat(collections.deque())
                self._chats.move_to_end(chat_id, last=False)  # the first to go: it holds nothing
            if chat.changed is None:
                chat.changed = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(chat.changed.wait(), wait)
            chat = self._chats.get(chat_id)
        replies = [r for r in chat.replies if r["seq"] > after] if chat is not None else []
        last = replies[-1]["seq"] if replies else after
        dropped = chat.dropped if chat is not None else 0
        return 200, {"chat_id": chat_id, "replies": replies, "last": last, "dropped": dropped}

    # -- handing messages over ---------------------------------------------------------------

    def _enqueue(self, event: MessageEvent) -> None:
        """Queue ``event`` behind its chat's earlier messages (one chat's are handed over in order)."""
        chat = str(event.chat_id)
        self._queues.setdefault(chat, collections.deque()).append(event)
        self._pending += 1
        if chat not in self._drainers:
            self._drainers[chat] = asyncio.create_task(self._drain(chat), name=f"http-chat-{chat[:40]}")

    async def _drain(self, chat: str) -> None:
        queue = self._queues[chat]
        try:
            while queue:
                event = queue.popleft()
                try:
                    await self.handle_message(event)
                except Exception as exc:
                    log.warning("http: handling a message of %r failed: %s", chat[:80], type(exc).__name__)
                finally:
                    self._pending -= 1
        finally:
            self._drainers.pop(chat, None)
            if not queue:
                self._queues.pop(chat, None)
