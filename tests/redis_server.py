"""A real redis-server on 127.0.0.1 for tests that talk to Redis.

The server is Debian's, unpacked by ``make test-deps`` into ``.venv/debs`` (``.venv/debs/bin/redis-server``
is the wrapper that runs it with the libraries unpacked beside it): nothing is installed on the system and
no service is started.  ``RedisServer(directory)`` runs one in the foreground (``--daemonize no``) as a
child of the tests:

* bound to 127.0.0.1 only (``--bind 127.0.0.1 --protected-mode yes``), on a free port picked at random
  (another one is tried when the server cannot bind it), or on ``port=`` when given;
* its data (``--dir``) and its log (``redis.log``) in ``directory``; the append-only file on and synced
  at every write (``--appendonly yes --appendfsync always``), no RDB snapshot (``--save ''``), so that
  ``restart()`` and even ``kill()`` then ``start()`` keep every write the server acknowledged;
* with ``password=``, clients must authenticate (``--requirepass``); ``url`` and ``client()`` do.

``start()`` returns once the server answers PING (or raises with the tail of its log); ``stop()`` sends
SIGTERM (SIGKILL after 10 s), ``kill()`` SIGKILL; ``restart()`` stops it and starts it again on the same
port and data.  Use it as a context manager, or call ``start()`` and ``stop()``.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

import redis
from ports import free_port
from redis.backoff import NoBackoff
from redis.retry import Retry

__all__ = ["REDIS_SERVER", "RedisServer"]

#: The wrapper ``make test-deps`` writes for Debian's redis-server.
REDIS_SERVER = Path(__file__).resolve().parents[1] / ".venv/debs/bin/redis-server"

HOST = "127.0.0.1"
START_DEADLINE = 20.0  # seconds for the server to answer PING (a hang guard, not a measure)
STOP_GRACE = 10.0  # seconds between SIGTERM and SIGKILL
RANDOM_PORT_TRIES = 5  # random ports tried when the server cannot bind one
SAME_PORT_WINDOW = 10.0  # seconds a given port (a restart's) is tried for: it may linger a while

LOG_TAIL = 30  # lines of the log shown when the server fails to start

# What redis-server logs when it cannot listen on its port.
_BIND_FAILURES = ("Address already in use", "Could not create server TCP listening socket")


class _BindFailed(Exception):
    """The server exited because it could not listen on its port."""


class RedisServer:
    """A redis-server on 127.0.0.1 with its data in ``directory`` (see the module docstring)."""

    def __init__(
        self,
        directory: Path,
        *,
        port: int | None = None,
        password: str | None = None,
        appendfsync: str = "always",
    ) -> None:
        self.directory = Path(directory)
        self.password = password
        self.appendfsync = appendfsync
        #: The server's log (redis-server's own, with what it writes to stdout and stderr).
        self.log = self.directory / "redis.log"
        self._port = port
        self._process: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------ where it is

    @property
    def port(self) -> int:
        """The port it listens on (the one it will use again on ``restart()``)."""
        if self._port is None:
            raise RuntimeError("the Redis server has not been started: no port yet")
        return self._port

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``, with ``:<password>@`` when a password is set."""
        auth = f":{quote(self.password, safe='')}@" if self.password is not None else ""
        return f"redis://{auth}{HOST}:{self.port}/0"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs (the wrapper execs it: no shell in between)."""
        return self._process.pid if self.running and self._process is not None else None

    def client(self, **kwargs: Any) -> redis.Redis:
        """A client of the server (``decode_responses=True``; ``kwargs`` go to ``redis.Redis``)."""
        options: dict[str, Any] = {
            "host": HOST,
            "port": self.port,
            "db": 0,
            "password": self.password,
            "decode_responses": True,
            "socket_connect_timeout": 5,
        }
        options.update(kwargs)
        return redis.Redis(**options)

    # ------------------------------------------------------------------ starting and stopping

    def start(self) -> RedisServer:
        """Start the server and wait until it answers PING; a no-op when it runs already.

        Without ``port=``, a free random port is picked (another one when the server cannot bind it);
        with one (or after a first start), that port is tried again for up to 10 s.
        """
        if self.running:
            return self
        if not REDIS_SERVER.is_file():
            raise RuntimeError(f"{REDIS_SERVER} is missing: run `make test-deps`")
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._port is not None:
            self._start_on_same_port(self._port)
        else:
            self._start_on_a_random_port()
        return self

    def stop(self) -> None:
        """SIGTERM, wait for it to exit (SIGKILL after 10 s); safe to call when it is not running."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                process.kill()
        process.wait()

    def kill(self) -> None:
        """SIGKILL and wait: the server dies without a shutdown (writes it acknowledged are on disk)."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait()

    def restart(self) -> RedisServer:
        """``stop()``, then ``start()`` again on the same port and with the same data."""
        self.stop()
        return self.start()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<RedisServer {HOST}:{self._port} {state} in {self.directory}>"

    # ------------------------------------------------------------------ internals

    def _start_on_a_random_port(self) -> None:
        for attempt in range(RANDOM_PORT_TRIES):
            port = free_port()
            try:
                self._launch(port)
            except _BindFailed:
                if attempt == RANDOM_PORT_TRIES - 1:
                    raise RuntimeError(
                        f"redis-server could not bind any of {RANDOM_PORT_TRIES} random ports:\n"
                        + self._log_tail(0)
                    ) from None
                continue
            self._port = port
            return

    def _start_on_same_port(self, port: int) -> None:
        end = time.monotonic() + SAME_PORT_WINDOW
        while True:
            try:
                self._launch(port)
                return
            except _BindFailed:
                if time.monotonic() >= end:
                    raise RuntimeError(
                        f"redis-server could not bind port {port} for {SAME_PORT_WINDOW:.0f} s:\n"
                        + self._log_tail(0)
                    ) from None
                time.sleep(0.2)

    def _command(self, port: int) -> list[str]:
        command = [str(REDIS_SERVER), "--port", str(port), "--bind", HOST, "--protected-mode", "yes"]
        command += ["--daemonize", "no", "--dir", str(self.directory), "--logfile", str(self.log)]
        command += ["--appendonly", "yes", "--appendfsync", self.appendfsync, "--save", ""]
        if self.password is not None:
            command += ["--requirepass", self.password]
        return command

    def _launch(self, port: int) -> None:
        """Run the server on ``port`` until it answers PING; ``_BindFailed`` if it could not listen."""
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as log:  # what it writes before it opens its log (a bad option...)
            process = subprocess.Popen(
                self._command(port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=self.directory,
                start_new_session=True,  # a ^C to the tests does not reach it before stop() does
            )
        probe = redis.Redis(  # one try per round: redis-py's default retries would wait seconds
            host=HOST,
            port=port,
            password=self.password,
            socket_connect_timeout=1,
            socket_timeout=5,
            retry=Retry(NoBackoff(), 0),
        )
        end = time.monotonic() + START_DEADLINE
        try:
            while True:
                if process.poll() is not None:
                    text = self._log_tail(offset)
                    if any(failure in text for failure in _BIND_FAILURES):
                        raise _BindFailed(port)
                    raise RuntimeError(
                        f"redis-server exited with {process.returncode} on port {port}:\n{text}"
                    )
                try:
                    # Ours, not a server that took the port first (ours then exits: it cannot bind).
                    if probe.ping() and probe.info("server")["process_id"] == process.pid:
                        break
                except redis.RedisError:  # not listening yet, loading its data, or not ours
                    pass
                if time.monotonic() >= end:
                    process.kill()
                    process.wait()
                    raise RuntimeError(
                        f"redis-server did not answer PING on port {port} in {START_DEADLINE:.0f} s:\n"
                        + self._log_tail(offset)
                    )
                time.sleep(0.05)
        finally:
            probe.close()
        self._process = process

    def _log_tail(self, offset: int) -> str:
        """The last lines the log got since ``offset``."""
        try:
            with self.log.open("rb") as log:
                log.seek(offset)
                text = log.read().decode("utf-8", "replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-LOG_TAIL:]) or "(the log is empty)"
