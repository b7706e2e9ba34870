"""Hook callbacks: attribution, the kernel's call order, guards and async bridging.

Every callback, Hermes-style or pluggy-native, becomes a :class:`Callback`
owned by a named plugin.  For each hook the dispatcher keeps a precomputed
:class:`Chain`: the live callbacks sorted by plugin name, so that a hook call
is a loop over a list.  Chains are rebuilt (copy-on-write) when a plugin is
added or removed or a callback is disabled, never during a call.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

# BaseExceptions a plugin may raise that still end the call in the host.
PROPAGATE = (KeyboardInterrupt, asyncio.CancelledError, GeneratorExit)

TRY_FIRST, NORMAL, TRY_LAST = 0, 1, 2


def plugin_order(name: str) -> tuple[str, str]:
    """The sort key of a plugin name: alphabetical ignoring case, then exact."""
    return (name.casefold(), name)


@dataclass(eq=False)
class Callback:
    """One callback of one plugin on one hook."""

    plugin: str
    hook: str
    fn: Callable[..., Any]
    call: Callable[..., Any]
    seq: int
    tier: int = NORMAL
    is_async: bool = False
    native: bool = False
    error: str | None = None

    @property
    def label(self) -> str:
        return getattr(self.fn, "__qualname__", None) or repr(self.fn)


@dataclass(frozen=True)
class Chain:
    """The live callbacks of one hook, in call order."""

    calls: tuple[Callable[..., Any], ...]
    callbacks: tuple[Callback, ...]
    has_async: bool


_EMPTY = Chain((), (), False)


def adapt_hermes_callback(fn: Callable[..., Any]) -> Callable[..., Any]:
    """What the kernel calls for ``fn``: a hook callback or a tool handler.

    A function with ``**kwargs`` is called as is with every keyword argument;
    one without receives only the keyword arguments it names (positional
    arguments are passed through).
    """
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return fn
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return fn
    names = frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    return _narrowing(fn, names)


def adapt_pluggy_impl(fn: Callable[..., Any], argnames: Iterable[str]) -> Callable[..., Any]:
    """What the dispatcher calls for a pluggy ``@hookimpl`` taking ``argnames``."""
    return _narrowing(fn, frozenset(argnames))


def _narrowing(fn: Callable[..., Any], names: frozenset[str]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **{k: v for k, v in kwargs.items() if k in names})

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def is_async_callable(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - async __call__ of an instance
    return call is not None and inspect.iscoroutinefunction(call)


class HookDispatcher:
    """Owns every callback and the per-hook call chains of one kernel."""

    def __init__(self, on_failure: Callable[[Callback, BaseException], None]) -> None:
        self.chains: dict[str, Chain] = {}
        self._callbacks: dict[str, list[Callback]] = {}
        self._seq = itertools.count()
        self._lock = threading.RLock()
        self._on_failure = on_failure
        self._loops = threading.local()
        self._executor: ThreadPoolExecutor | None = None

    # -- registration ------------------------------------------------------

    def add(
        self,
        plugin: str,
        hook: str,
        fn: Callable[..., Any],
        call: Callable[..., Any],
        *,
        tier: int = NORMAL,
        native: bool = False,
    ) -> Callback:
        with self._lock:
            cb = Callback(
                plugin=plugin,
                hook=hook,
                fn=fn,
                call=call,
                seq=next(self._seq),
                tier=tier,
                is_async=is_async_callable(fn),
                native=native,
            )
            self._callbacks.setdefault(hook, []).append(cb)
            self._rebuild(hook)
            return cb

    def remove(self, cb: Callback) -> None:
        with self._lock:
            bucket = self._callbacks.get(cb.hook, [])
            if cb in bucket:
                bucket.remove(cb)
                self._rebuild(cb.hook)

    def remove_plugin(self, plugin: str) -> None:
        with self._lock:
            for hook, bucket in self._callbacks.items():
                kept = [cb for cb in bucket if cb.plugin != plugin]
                if len(kept) != len(bucket):
                    self._callbacks[hook] = kept
                    self._rebuild(hook)

    def callbacks(self, hook: str | None = None) -> list[Callback]:
        """Every callback (disabled ones too), in call order."""
        with self._lock:
            hooks = [hook] if hook is not None else list(self._callbacks)
            out = [cb for h in hooks for cb in self._callbacks.get(h, ())]
        out.sort(key=_call_order)
        return out

    def disable(self, cb: Callback, error: str) -> None:
        with self._lock:
            if cb.error is None:
                cb.error = error
                self._rebuild(cb.hook)

    def _rebuild(self, hook: str) -> None:
        live = sorted((cb for cb in self._callbacks.get(hook, ()) if cb.error is None), key=_call_order)
        if not live:
            self.chains.pop(hook, None)
            return
        calls: list[Callable[..., Any]] = []
        for cb in live:
            call = cb.call
            # The guard finds the failing callback by identity; keep entries unique.
            if any(c is call for c in calls):
                call = functools.partial(call)
                cb.call = call
            calls.append(call)
        self.chains[hook] = Chain(tuple(calls), tuple(live), any(cb.is_async for cb in live))

    # -- calling -----------------------------------------------------------

    def chain(self, hook: str) -> Chain:
        return self.chains.get(hook, _EMPTY)

    def failed(self, chain: Chain, call: Callable[..., Any], exc: BaseException) -> Callback:
        """Handle ``exc`` raised by ``call`` of ``chain``: re-raise or disable and report."""
        if isinstance(exc, PROPAGATE) or not isinstance(exc, Exception | SystemExit):
            raise exc
        cb = chain.callbacks[_index(chain.calls, call)]
        self.disable(cb, _describe(exc))
        self._on_failure(cb, exc)
        return cb

    def invoke_pairs(
        self, hook: str, kwargs: dict[str, Any], failures: list[Callback] | None = None
    ) -> list[tuple[Callback, Any]]:
        """Call every live callback; return ``(callback, result)`` for non-None results.

        The slower, attributing form of the kernel's ``invoke_hook``; async
        callbacks are run to completion.  Failing callbacks are appended to
        ``failures`` when given.
        """
        chain = self.chains.get(hook, _EMPTY)
        out: list[tuple[Callback, Any]] = []
        for call, cb in zip(chain.calls, chain.callbacks, strict=True):
            try:
                result = call(**kwargs)
                if inspect.isawaitable(result):
                    result = self.run_sync(result)
            except BaseException as exc:
                self.failed(chain, call, exc)
                if failures is not None:
                    failures.append(cb)
                continue
            if result is not None:
                out.append((cb, result))
        return out

    async def ainvoke_pairs(
        self, hook: str, kwargs: dict[str, Any], failures: list[Callback] | None = None
    ) -> list[tuple[Callback, Any]]:
        """As :meth:`invoke_pairs`, awaiting async callbacks on the running loop."""
        chain = self.chains.get(hook, _EMPTY)
        out: list[tuple[Callback, Any]] = []
        for call, cb in zip(chain.calls, chain.callbacks, strict=True):
            try:
                result = call(**kwargs)
                if inspect.isawaitable(result):
                    result = await result
            except BaseException as exc:
                self.failed(chain, call, exc)
                if failures is not None:
                    failures.append(cb)
                continue
            if result is not None:
                out.append((cb, result))
        return out

    def run_sync(self, awaitable: Any) -> Any:
        """Run an awaitable to completion from synchronous code.

        With no event loop running in this thread, a private per-thread loop
        runs it.  Inside a running loop (a sync call from async code) it runs
        on a helper thread's loop, since the caller's loop cannot be re-entered;
        async hosts should use ``ainvoke_hook`` instead.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            loop = getattr(self._loops, "loop", None)
            if loop is None or loop.is_closed():
                loop = asyncio.new_event_loop()
                self._loops.loop = loop
            return loop.run_until_complete(_as_coroutine(awaitable))
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="hermes-hook")
            executor = self._executor
        return executor.submit(asyncio.run, _as_coroutine(awaitable)).result()

    def close(self) -> None:
        loop = getattr(self._loops, "loop", None)
        if loop is not None and not loop.is_closed():
            loop.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


def _call_order(cb: Callback) -> tuple[int, tuple[str, str], int]:
    return (cb.tier, plugin_order(cb.plugin), cb.seq)


def _index(calls: tuple[Callable[..., Any], ...], call: Callable[..., Any]) -> int:
    for i, c in enumerate(calls):
        if c is call:
            return i
    raise LookupError(call)  # pragma: no cover - the chain always holds the call


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    name = type(exc).__name__
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r})"
    return f"{name}: {text}" if text else name


async def _as_coroutine(awaitable: Any) -> Any:
    return await awaitable
