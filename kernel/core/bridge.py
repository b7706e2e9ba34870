"""Async bridging: how the hook engine runs coroutines for sync callers and sync callbacks for async ones.

:class:`_Bridge` is the kernel's event loop for synchronous callers, a daemon
thread named ``hermes-kernel-loop`` started on first need and closed at
``shutdown()`` (a sync call made from that loop itself gets a private loop on
another thread).  :class:`AsyncCalls` is the engine's coroutine driver.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import threading
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from pluggy import Result

from .callbacks import _VALUES, Callback, Chain, HookTimeout, Request, _as_list
from .running import RUNNING

if TYPE_CHECKING:
    from pluggy import HookImpl

    from .callbacks import _Monitor


class _Bridge:
    """An event loop on a daemon thread that runs coroutines for synchronous callers."""

    def __init__(self) -> None:
        import asyncio

        self._asyncio = asyncio
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name="hermes-kernel-loop", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self._asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self._asyncio.set_event_loop(None)

    def run(self, awaitable: Any, timeout: float | None) -> Any:
        import concurrent.futures

        if threading.current_thread() is self.thread or self.loop.is_closed():
            # A sync hook call made by a coroutine on this very loop: a loop of its own.
            box = in_daemon_thread(lambda: self._asyncio.run(_boxed(awaitable, timeout)), None)
        else:
            done: concurrent.futures.Future[tuple[bool, Any]] = concurrent.futures.Future()
            context = contextvars.copy_context()
            tasks: list[Any] = []

            def start() -> None:
                task = self.loop.create_task(_boxed(awaitable, timeout), context=context)
                tasks.append(task)
                task.add_done_callback(lambda t: done.set_result(_outcome(t)))

            self.loop.call_soon_threadsafe(start)
            try:
                box = done.result(None if timeout is None else timeout + 1.0)
            except concurrent.futures.TimeoutError:
                self.loop.call_soon_threadsafe(lambda: tasks and tasks[0].cancel())
                raise HookTimeout(timeout or 0) from None
        ok, value = box
        if ok:
            return value
        raise value

    def close(self) -> None:
        loop = self.loop
        if loop.is_closed():
            return

        def stop() -> None:
            for task in self._asyncio.all_tasks(loop):
                task.cancel()
            loop.stop()

        try:
            loop.call_soon_threadsafe(stop)
        except RuntimeError:
            return
        self.thread.join(2.0)
        if not self.thread.is_alive():
            loop.close()


def _outcome(task: Any) -> tuple[bool, Any]:
    if task.cancelled():
        return False, RuntimeError("the kernel shut down its event loop before the coroutine finished")
    return task.result()


async def _boxed(awaitable: Any, timeout: float | None) -> tuple[bool, Any]:
    """Await ``awaitable`` (at most ``timeout`` s) and box the outcome, so no exception escapes the loop."""
    import asyncio

    try:
        if timeout is None:
            return True, await awaitable
        return True, await asyncio.wait_for(_as_coroutine(awaitable), timeout)
    except TimeoutError:
        return False, HookTimeout(timeout or 0)
    except BaseException as exc:
        return False, exc


def in_daemon_thread(fn: Callable[[], Any], timeout: float | None) -> Any:
    """Run ``fn`` on a new daemon thread and wait for it, at most ``timeout`` seconds.

    A daemon thread, unlike a pool worker, never keeps the process alive at
    exit when a plugin's code hangs in it.  The caller's context variables
    are visible to ``fn``.
    """
    box: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            box["result"] = context.run(fn)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="hermes-hook", daemon=True).start()
    if not done.wait(timeout):
        raise HookTimeout(timeout or 0)
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _sync_run(steps: Any, cb: Callback, kwargs: dict[str, Any]) -> tuple[bool, Any]:
    """Call the sync callbacks of ``steps`` from ``cb`` on while they succeed with a plain value.

    ``(True, outcome)`` when the chain is done; else ``(False, (callback, kwargs, box))``: an async
    callback to await next (``box`` is ``None``), or the boxed answer of one that failed or returned an
    awaitable, for the caller to handle and send on.
    """
    while not cb.is_async:
        try:
            result = cb.call(**kwargs)
        except BaseException as exc:
            return False, (cb, kwargs, (False, exc))
        if result is not None and type(result) not in _VALUES and inspect.isawaitable(result):
            return False, (cb, kwargs, (True, result))
        try:
            cb, kwargs = steps.send((True, result))
        except StopIteration as stop:
            return True, stop.value
    return False, (cb, kwargs, None)


async def _as_coroutine(awaitable: Any) -> Any:
    return await awaitable


class AsyncCalls:
    """The coroutine driver of :class:`~kernel.core.hooks.HookEngine` (a mixin; the state is the engine's):
    async callbacks are awaited on the caller's loop, sync ones run on a worker thread."""

    if TYPE_CHECKING:
        # The engine's state and steps these methods use (set in HookEngine), declared for type checkers.
        owner: object
        timeout: float | None
        monitors: list[_Monitor]

        def _chain_to_call(self, hook: str, kwargs: dict[str, Any]) -> Chain | None: ...
        def _before(self, hook: str, methods: list[HookImpl], kwargs: dict[str, Any]) -> list[_Monitor]: ...
        def _after(
            self,
            called: list[_Monitor],
            outcome: Result[Any],
            hook: str,
            methods: list[HookImpl],
            kwargs: dict[str, Any],
        ) -> None: ...
        def _steps(
            self, chain: Chain, kwargs: dict[str, Any], firstresult: bool, request: Request | None
        ) -> Generator[tuple[Callback, dict[str, Any]], tuple[bool, Any], Any]: ...

    async def ainvoke(self, hook: str, kwargs: dict[str, Any], request: Request | None = None) -> list[Any]:
        """As :meth:`invoke`, awaiting async callbacks on the running loop."""
        chain = self._chain_to_call(hook, kwargs)
        if chain is None:
            return []
        if not self.monitors:
            return _as_list(chain, await self._arun(chain, kwargs, chain.firstresult, request))
        befores = self._before(hook, chain.methods, kwargs)
        try:
            outcome = Result(await self._arun(chain, kwargs, chain.firstresult, request), None)
        except BaseException as exc:
            outcome = Result(None, exc)
        self._after(befores, outcome, hook, chain.methods, kwargs)
        return _as_list(chain, outcome.get_result())

    async def _arun(
        self, chain: Chain, kwargs: dict[str, Any], firstresult: bool, request: Request | None
    ) -> Any:
        steps = self._steps(chain, kwargs, firstresult, request)
        # Without wrappers or a time bound, the sync callbacks up to the next async one (or failing one)
        # run on one worker thread, not one each; a failure is handed back to be judged on this thread.
        batch = not chain.wrappers and self.timeout is None
        token = RUNNING.set(self.owner)
        try:
            cb, call_kwargs = next(steps)
            while True:
                if batch and not cb.is_async:
                    done, value = await self._aside(functools.partial(_sync_run, steps, cb, call_kwargs))
                    if done:
                        return value
                    cb, call_kwargs, box = value
                    if box is None:  # an async callback is next
                        continue
                    if box[0] and inspect.isawaitable(box[1]):
                        try:
                            box = (True, await box[1])
                        except BaseException as exc:
                            box = (False, exc)
                else:
                    try:
                        box = (True, await self._acall(cb, call_kwargs))
                    except BaseException as exc:
                        box = (False, exc)
                cb, call_kwargs = steps.send(box)
        except StopIteration as stop:
            return stop.value
        finally:
            RUNNING.reset(token)

    async def _acall(self, cb: Callback, kwargs: dict[str, Any]) -> Any:
        import asyncio

        timeout = self.timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        result = cb.call(**kwargs) if cb.is_async else await self._aside(lambda: cb.call(**kwargs))
        if result is not None and type(result) not in _VALUES and inspect.isawaitable(result):
            if deadline is None:
                return await result
            try:
                return await asyncio.wait_for(_as_coroutine(result), max(deadline - time.monotonic(), 0))
            except TimeoutError:
                raise HookTimeout(timeout or 0) from None
        return result

    async def _aside(self, fn: Callable[[], Any]) -> Any:
        """Run a sync step off the event loop (a worker thread), so that it cannot stall it.

        The outcome crosses back boxed: an exception such as ``GeneratorExit``
        must not travel through the loop's futures, which treat some of them
        specially.
        """
        import asyncio

        context = contextvars.copy_context()

        def boxed() -> tuple[bool, Any]:
            try:
                return True, context.run(fn)
            except BaseException as exc:
                return False, exc

        if self.timeout is None:
            ok, value = await asyncio.to_thread(boxed)
        else:
            loop = asyncio.get_running_loop()
            future = loop.create_future()

            def deliver(box: tuple[bool, Any]) -> None:
                if not future.done():
                    future.set_result(box)

            def run() -> None:
                box = boxed()
                with contextlib.suppress(RuntimeError):  # the loop is gone; nobody waits any more
                    loop.call_soon_threadsafe(deliver, box)

            threading.Thread(target=run, name="hermes-hook", daemon=True).start()
            try:
                ok, value = await asyncio.wait_for(asyncio.shield(future), self.timeout)
            except TimeoutError:
                raise HookTimeout(self.timeout) from None
        if ok:
            return value
        raise value

    # -- async bridge -----------------------------------------------------------
