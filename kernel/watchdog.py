"""Bounded calls into plugin code that cannot be interrupted: a plugin's import and its ``register()``.

Python cannot stop a thread, and a ``time.sleep`` or a C call is not
interrupted by anything short of a signal, which only the main thread gets.
So the call runs on a daemon worker thread while the caller waits with a
timeout; a call that overruns is left running on its thread, which is
abandoned (the next call gets a new thread), and the caller goes on.  While it
waits, the caller lets go of the locks it names, so that the plugin can
register (which takes them) from the worker thread.
"""

from __future__ import annotations

import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any


class Overran(Exception):
    """The call did not return within its timeout; it is still running on an abandoned thread."""


class _Call:
    __slots__ = ("context", "done", "fn", "ok", "value")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.context = contextvars.copy_context()
        self.fn = fn
        self.done = threading.Event()
        self.ok = False
        self.value: Any = None

    def run(self) -> None:
        try:
            self.value = self.context.run(self.fn)
            self.ok = True
        except BaseException as exc:  # handed to the caller, which decides
            self.value = exc
        finally:
            self.done.set()


def _serve(calls: queue.SimpleQueue[_Call | None], threads: set[threading.Thread]) -> None:
    try:
        while (call := calls.get()) is not None:
            call.run()
            del call
    finally:
        threads.discard(threading.current_thread())


class Runner:
    """Runs calls one at a time on a daemon thread named ``name``, each bounded by a timeout."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._calls: queue.SimpleQueue[_Call | None] | None = None
        self._threads: set[threading.Thread] = set()

    def call(self, fn: Callable[[], Any], timeout: float, release: tuple[Any, ...] = ()) -> Any:
        """``fn()`` with the caller's context variables; its result, or its exception re-raised.

        Raises :class:`Overran` when it does not return within ``timeout``
        seconds. ``release``: re-entrant locks the caller holds, let go of
        while it waits and taken back after.
        """
        if threading.current_thread() in self._threads:
            return fn()  # a call made from inside a call (a register() that loads another plugin)
        if self._calls is None:
            self._calls = queue.SimpleQueue()
            thread = threading.Thread(
                target=_serve, args=(self._calls, self._threads), name=self._name, daemon=True
            )
            self._threads.add(thread)
            thread.start()
        call = _Call(fn)
        self._calls.put(call)
        try:
            with released(*release):
                finished = call.done.wait(timeout)
        except BaseException:
            self._abandon()
            raise
        if not finished:
            self._abandon()
            raise Overran(f"did not return within {timeout:g} s")
        if call.ok:
            return call.value
        raise call.value

    def _abandon(self) -> None:
        calls, self._calls = self._calls, None
        if calls is not None:
            calls.put(None)  # the thread ends once the call it is stuck in returns, if ever

    def close(self) -> None:
        """Let the worker thread end (after the call in progress, if any)."""
        self._abandon()


@contextlib.contextmanager
def released(*locks: Any) -> Iterator[None]:
    """Let go of re-entrant locks this thread holds (however deeply), and take them back after."""
    saved = []
    try:
        for lock in locks:
            if lock._is_owned():
                saved.append((lock, lock._release_save()))
        yield
    finally:
        for lock, state in reversed(saved):
            lock._acquire_restore(state)
