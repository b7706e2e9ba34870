"""Bounded loading of plugin code that cannot be interrupted: a plugin's import and its ``register()``.

Python cannot stop a thread, and a ``time.sleep`` or a C call is not
interrupted by anything short of a signal, which only the main thread gets.
So :func:`run_each` runs a whole list of loads on a daemon loader thread
while the caller waits: the caller wakes only when the list is done or when
the item in progress has run past its deadline — no hand-off per plugin, so
bounding costs a load next to nothing.  An item that overruns is given up:
the caller is told (``on_overran``), the thread is abandoned with the item it
is stuck in, and the items after it go on on a new thread.  While it waits,
the caller lends the kernel's locks it holds (:class:`SharedRLock`) to the
loader thread, so that plugins can register (which takes them) from there,
while every other thread still waits for the load to end.

The loader side marks what must not happen once its item was given up with
:func:`settled`: it holds the round's lock, so an item is either finished or
given up, never both.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_local = threading.local()


class SharedRLock:
    """A re-entrant lock whose owner can lend it to a thread it is waiting for.

    To a borrowing thread, acquiring and releasing are no-ops: it works under
    the owner's hold, which is safe because the owner is blocked meanwhile.
    """

    __slots__ = ("_lent", "_lock")

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._lent: frozenset[threading.Thread] = frozenset()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lent and threading.current_thread() in self._lent:
            return True
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        if self._lent and threading.current_thread() in self._lent:
            return
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    @contextlib.contextmanager
    def lent(self, thread: threading.Thread) -> Iterator[None]:
        """Lend the lock to ``thread`` while the block runs, if this thread holds it."""
        if not self._lock._is_owned():  # type: ignore[attr-defined]
            yield
            return
        self._lent = self._lent | {thread}
        try:
            yield
        finally:
            self._lent = self._lent - {thread}


class _Round:
    """One loader thread's run through the pending items."""

    def __init__(self, pending: deque[Any], fn: Callable[[Any], None]) -> None:
        self.pending = pending
        self.fn = fn
        self.stack: list[Any] = []  # what the item is working on, outermost first (see working())
        self.cond = threading.Condition(threading.RLock())
        self.current: Any = None
        self.started = 0.0
        self.abandoned = False
        self.finished = False
        self.error: BaseException | None = None

    def run(self) -> None:
        _local.round = self
        try:
            while True:
                with self.cond:
                    if self.abandoned or not self.pending:
                        return
                    self.current = self.pending.popleft()
                    self.started = time.monotonic()
                self.fn(self.current)
                with self.cond:
                    if self.abandoned:
                        return
                    self.current = None
        except BaseException as exc:  # handed to the caller, which decides
            self.error = exc
        finally:
            with self.cond:
                self.finished = True
                self.cond.notify_all()

    def wait(self, timeout: float) -> tuple[bool, Any]:
        """``(True, None)`` once done, or ``(False, item)`` for an item that ran past ``timeout``."""
        with self.cond:
            while not self.finished:
                if self.current is None:
                    self.cond.wait(timeout)
                    continue
                left = self.started + timeout - time.monotonic()
                if left <= 0:
                    self.abandoned = True
                    return False, self.current
                self.cond.wait(left)
            return True, None


def run_each(
    items: Iterable[T],
    fn: Callable[[T], None],
    *,
    timeout: float | None,
    on_overran: Callable[[T, list[Any]], None],
    lend: tuple[SharedRLock, ...] = (),
    name: str = "hermes-kernel-loader",
) -> None:
    """``fn(item)`` for each item in order, each bounded by ``timeout`` seconds.

    Runs on a loader thread, with the caller's context variables and the
    ``lend`` locks the caller holds; inline when ``timeout`` is ``None`` or
    when called from a loader thread (a ``register()`` that loads another
    plugin).  An exception ``fn`` raises is re-raised here;
    ``on_overran(item, stack)`` runs here for an item given up, with what it
    was working on (see :func:`working`).
    """
    if timeout is None or in_loader():
        for item in items:
            fn(item)
        return
    pending = deque(items)
    while pending:
        state = _Round(pending, fn)
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(state.run,), name=name, daemon=True)
        with contextlib.ExitStack() as lending:
            for lock in lend:
                lending.enter_context(lock.lent(thread))
            thread.start()
            try:
                done, stuck = state.wait(timeout)
            except BaseException:  # Ctrl-C while waiting: the loader stops after its current item
                with state.cond:
                    state.abandoned = True
                raise
        if done:
            if state.error is not None:
                raise state.error
            return
        on_overran(stuck, list(state.stack))


def in_loader() -> bool:
    """Whether this thread is a loader thread of :func:`run_each`."""
    return getattr(_local, "round", None) is not None


@contextlib.contextmanager
def working(what: Any) -> Iterator[None]:
    """On a loader thread: note ``what`` (say, the plugin being activated) as what the item is
    working on, for ``on_overran``; nested uses stack up."""
    state: _Round | None = getattr(_local, "round", None)
    if state is None:
        yield
        return
    state.stack.append(what)
    try:
        yield
    finally:
        if state.stack and state.stack[-1] is what:
            state.stack.pop()


@contextlib.contextmanager
def settled() -> Iterator[bool]:
    """On a loader thread: hold the round's lock; ``True`` unless its item was given up meanwhile.
    Elsewhere: always ``True``."""
    state: _Round | None = getattr(_local, "round", None)
    if state is None:
        yield True
        return
    with state.cond:
        yield not state.abandoned
