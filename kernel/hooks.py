"""Hook callbacks: attribution, the kernel's call order, guards and async bridging.

Every callback, Hermes-style or pluggy-native, becomes a :class:`Callback`
owned by a named plugin.  For each hook the dispatcher keeps a precomputed
:class:`Chain`: the live callbacks sorted by plugin name, so that a hook call
is a loop over a list.  Chains are rebuilt (copy-on-write) when a plugin is
added or removed or a callback is disabled, never during a call.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import operator
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

# What a plugin may raise and the kernel contains.  Every other BaseException
# (KeyboardInterrupt, asyncio.CancelledError, GeneratorExit) ends the call.
CONTAINED = (Exception, SystemExit)

TRY_FIRST, NORMAL, TRY_LAST = 0, 1, 2
# Callbacks declared in config.yaml (shell hooks) run after every plugin's.
CONFIGURED = 3


class HookTimeout(Exception):
    """A callback that did not return within ``plugins.hook_timeout`` seconds."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"did not return within {timeout:g} s (plugins.hook_timeout); left running")


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


def keyword_names(fn: Callable[..., Any]) -> frozenset[str] | None:
    """The parameter names ``fn`` accepts by keyword; ``None`` when it takes ``**kwargs``.

    Plain functions are read from their code object (much cheaper than
    ``inspect.signature``, which matters at load time); anything else that
    cannot be inspected is treated as taking ``**kwargs``.
    """
    code = getattr(fn, "__code__", None)
    if code is not None and inspect.isfunction(fn):
        if code.co_flags & inspect.CO_VARKEYWORDS:
            return None
        end = code.co_argcount + code.co_kwonlyargcount
        return frozenset(code.co_varnames[code.co_posonlyargcount : end])
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def adapt_hermes_callback(fn: Callable[..., Any]) -> Callable[..., Any]:
    """What the kernel calls for ``fn``: a hook callback or a tool handler.

    A function with ``**kwargs`` is called as is with every keyword argument;
    one without receives only the keyword arguments it names (positional
    arguments are passed through).
    """
    names = keyword_names(fn)
    if names is None:
        return fn

    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **{k: v for k, v in kwargs.items() if k in names})

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def adapt_pluggy_impl(fn: Callable[..., Any], argnames: Iterable[str]) -> Callable[..., Any]:
    """What the dispatcher calls for a pluggy ``@hookimpl`` taking ``argnames``.

    As pluggy does, the declared arguments are passed by position; a missing
    one is a ``TypeError`` naming it.
    """
    names = tuple(argnames)
    getter = operator.itemgetter(*names) if len(names) > 1 else None

    def call(**kwargs: Any) -> Any:
        try:
            args = getter(kwargs) if getter is not None else tuple(kwargs[n] for n in names)
        except KeyError:
            missing = ", ".join(n for n in names if n not in kwargs)
            raise TypeError(f"the hook call did not provide argument(s): {missing}") from None
        return fn(*args)

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def is_async_callable(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - async __call__ of an instance
    return call is not None and inspect.iscoroutinefunction(call)


class HookDispatcher:
    """Owns every callback and the per-hook call chains of one kernel."""

    def __init__(
        self, on_failure: Callable[[Callback, BaseException], None], timeout: float | None = None
    ) -> None:
        self.timeout = timeout
        self.chains: dict[str, Chain] = {}
        self._callbacks: dict[str, list[Callback]] = {}
        self._seq = itertools.count()
        self._lock = threading.RLock()
        self._on_failure = on_failure
        self._loops = threading.local()
        self._deferred: set[str] | None = None

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Rebuild each touched chain once, at the end, instead of after every change."""
        with self._lock:
            if self._deferred is not None:
                yield
                return
            self._deferred = set()
            try:
                yield
            finally:
                pending, self._deferred = self._deferred, None
                for hook in pending:
                    self._rebuild(hook)

    def _changed(self, hook: str) -> None:
        if self._deferred is not None:
            self._deferred.add(hook)
        else:
            self._rebuild(hook)

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
            self._changed(hook)
            return cb

    def remove(self, cb: Callback) -> None:
        with self._lock:
            bucket = self._callbacks.get(cb.hook, [])
            if cb in bucket:
                bucket.remove(cb)
                self._changed(cb.hook)

    def remove_plugin(self, plugin: str) -> None:
        with self._lock:
            for hook, bucket in self._callbacks.items():
                kept = [cb for cb in bucket if cb.plugin != plugin]
                if len(kept) != len(bucket):
                    self._callbacks[hook] = kept
                    self._changed(hook)

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
        seen: set[int] = set()
        for cb in live:
            call = cb.call
            # The guard finds the failing callback by identity; keep entries unique.
            if id(call) in seen:
                call = functools.partial(call)
                cb.call = call
            seen.add(id(call))
            calls.append(self._bounded(call, cb.is_async) if self.timeout else call)
        self.chains[hook] = Chain(tuple(calls), tuple(live), any(cb.is_async for cb in live))

    def _bounded(self, call: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
        """``call`` with the configured deadline: a late callback raises :class:`HookTimeout`.

        A sync callback runs on a worker thread so that its caller can stop
        waiting; the worker is abandoned, not killed, if it never returns.
        """
        timeout = self.timeout
        assert timeout is not None

        if is_async:

            async def bounded_async(**kwargs: Any) -> Any:
                import asyncio

                try:
                    return await asyncio.wait_for(call(**kwargs), timeout)
                except TimeoutError:
                    raise HookTimeout(timeout) from None

            return bounded_async

        def bounded(**kwargs: Any) -> Any:
            return in_daemon_thread(lambda: call(**kwargs), timeout)

        return bounded

    # -- calling -----------------------------------------------------------

    def chain(self, hook: str) -> Chain:
        return self.chains.get(hook, _EMPTY)

    def failed(self, chain: Chain, call: Callable[..., Any], exc: BaseException) -> Callback:
        """Handle ``exc`` raised by ``call`` of ``chain``: re-raise or disable and report."""
        if not isinstance(exc, CONTAINED):
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
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            loop = getattr(self._loops, "loop", None)
            if loop is None or loop.is_closed():
                loop = asyncio.new_event_loop()
                self._loops.loop = loop
            return loop.run_until_complete(_as_coroutine(awaitable))
        return in_daemon_thread(lambda: asyncio.run(_as_coroutine(awaitable)), None)

    def close(self) -> None:
        loop = getattr(self._loops, "loop", None)
        if loop is not None and not loop.is_closed():
            loop.close()


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


def in_daemon_thread(fn: Callable[[], Any], timeout: float | None) -> Any:
    """Run ``fn`` on a new daemon thread and wait for it, at most ``timeout`` seconds.

    A daemon thread, unlike a pool worker, never keeps the process alive at
    exit when a plugin's code hangs in it.
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["result"] = fn()
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


async def _as_coroutine(awaitable: Any) -> Any:
    return await awaitable
