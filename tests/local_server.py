"""A programmable HTTP server on 127.0.0.1 for tests that talk to a real server.

``LocalServer`` runs an ``http.server.ThreadingHTTPServer`` in a daemon thread.
Each test programs what it should answer and reads back what it was sent:

* ``program(*replies)`` queues replies, answered in order, one per request.  A
  reply is a ``Reply`` (status, body, headers, optional delay) or a function of
  the recorded request (``Seen``) that returns one.
* When the queue is empty the server answers its default reply (a 418 unless the
  user set another with ``default=`` or ``set_default()``).
* ``route(method, prefix, responder)`` answers matching requests without
  touching the queue (say, a file server next to the API).
* ``seen`` is a snapshot of every request so far: method, path, lower-cased
  headers, the raw body and (``.json``) the body parsed as JSON.
* ``reset()`` empties the queue and the record and restores the default reply
  given to the constructor; routes stay.

Use it as a context manager, or call ``start()`` and ``stop()``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["NO_REPLY", "LocalServer", "Reply", "Responder", "Seen"]


@dataclass
class Reply:
    """What the server answers.

    ``body``: dict/list → JSON; str → text/plain; bytes → as they are (the
    server's ``bytes_type``); None → an empty body.  ``content_type`` overrides
    the type guessed from the body.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering
    content_type: str | None = None


@dataclass(frozen=True)
class Seen:
    """A request the server got."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    raw: bytes = b""

    @property
    def json(self) -> Any:
        """The body parsed as JSON (raises if it is not JSON)."""
        return json.loads(self.raw)


Responder = Callable[[Seen], Reply]

NO_REPLY = Reply(418, {"error": {"message": "test server: no reply programmed"}})


class LocalServer:
    """A programmable HTTP server on 127.0.0.1 (see the module docstring)."""

    def __init__(
        self,
        *,
        base_path: str = "/v1",
        default: Reply | Responder = NO_REPLY,
        bytes_type: str = "application/octet-stream",
    ) -> None:
        self._lock = threading.Lock()
        self._replies: deque[Reply | Responder] = deque()
        self._seen: list[Seen] = []
        self._routes: list[tuple[str, str, Responder]] = []
        self._initial_default = default
        self._default = default
        self.bytes_type = bytes_type
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self.port: int = self._httpd.server_address[1]
        self.root = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.root}{base_path}"

    # -- life cycle --------------------------------------------------------

    def start(self) -> LocalServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- programming -------------------------------------------------------

    def program(self, *replies: Reply | Responder) -> None:
        """Queue replies, answered in order (one per request)."""
        with self._lock:
            self._replies.extend(replies)

    def set_default(self, reply: Reply | Responder) -> None:
        """What to answer when the queue is empty."""
        with self._lock:
            self._default = reply

    def route(self, method: str, prefix: str, responder: Responder) -> None:
        """Answer ``method`` requests whose path starts with ``prefix`` with ``responder``, not the queue."""
        with self._lock:
            self._routes.append((method.upper(), prefix, responder))

    def reset(self) -> None:
        """Forget programmed replies and recorded requests; restore the constructor's default reply."""
        with self._lock:
            self._replies.clear()
            self._seen.clear()
            self._default = self._initial_default

    # -- reading back ------------------------------------------------------

    @property
    def seen(self) -> list[Seen]:
        """Every request so far, oldest first (a copy)."""
        with self._lock:
            return list(self._seen)

    def posts(self) -> list[Seen]:
        return [s for s in self.seen if s.method == "POST"]

    # -- answering (called from the handler threads) -----------------------

    def _answer(self, seen: Seen) -> Reply:
        with self._lock:
            self._seen.append(seen)
            for method, prefix, responder in self._routes:
                if seen.method == method and seen.path.startswith(prefix):
                    programmed: Reply | Responder = responder
                    break
            else:
                programmed = self._replies.popleft() if self._replies else self._default
        return programmed(seen) if callable(programmed) else programmed

    def _encode(self, reply: Reply) -> tuple[bytes, str]:
        body = reply.body
        if isinstance(body, dict | list):
            data, kind = json.dumps(body).encode(), "application/json"
        elif isinstance(body, str):
            data, kind = body.encode(), "text/plain"
        else:
            data, kind = body or b"", self.bytes_type
        return data, reply.content_type or kind


def _make_handler(server: LocalServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _handle(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen = Seen(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                raw=raw,
            )
            reply = server._answer(seen)
            if reply.delay:
                time.sleep(reply.delay)
            data, kind = server._encode(reply)
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    return Handler
