"""The kernel's one hook engine: pluggy's registry, the kernel's order, containment.

Every callback of every plugin is a pluggy ``HookImpl`` in a ``HookCaller`` of
the kernel's plugin manager (``k.pm``): pluggy-native ``@hookimpl`` functions
as pluggy made them, Hermes-style ``ctx.register_hook`` callbacks as impls of
the plugin's object.  The engine keeps each caller's list in the kernel's
order and compiles it into a :class:`Chain`: the live callbacks, adapted so
that a call is a loop over a tuple.  Every path — ``k.invoke_hook``,
``k.pm.hook.<name>(...)``, ``call_historic``, subsets, monitoring — runs that
chain with the same semantics: tiers and alphabetical order, wrappers around
the whole call, ``firstresult``, spec defaults, timeouts, and containment at
the callback (a failing callback is logged and disabled; the call goes on).
"""

from __future__ import annotations

import inspect
import itertools
import operator
import time
from collections.abc import Callable, Generator, Iterable, Mapping
from typing import Any

from pluggy import HookCaller, HookImpl, Result

from .bridge import AsyncCalls, _Bridge, in_daemon_thread
from .callbacks import (
    _GENERATOR,
    _HERMES_OPTS,
    _VALUES,
    CONFIGURED,
    NORMAL,
    OBSERVER_KEY,
    OBSERVER_SCHEMA_VERSION,
    TRY_FIRST,
    TRY_LAST,
    Callback,
    Chain,
    HookTimeout,
    Request,
    _as_list,
    _Monitor,
    adapt_hermes_callback,
    adapt_pluggy_impl,
    context_text,
    describe,
    is_async_callable,
    is_coroutine_function,
    keyword_names,
    plain_text,
    plugin_order,
    propagates,
    safe_text,
)
from .running import RUNNING
from .watchdog import SharedRLock

__all__ = [
    "CONFIGURED",
    "NORMAL",
    "TRY_FIRST",
    "TRY_LAST",
    "Callback",
    "Chain",
    "HookEngine",
    "HookTimeout",
    "Request",
    "adapt_hermes_callback",
    "adapt_pluggy_impl",
    "context_text",
    "describe",
    "in_daemon_thread",
    "is_async_callable",
    "is_coroutine_function",
    "keyword_names",
    "plain_text",
    "plugin_order",
    "propagates",
    "safe_text",
]


class HookEngine(AsyncCalls):
    """Compiles and runs the hook callers of one kernel's plugin manager."""

    def __init__(
        self,
        pm: Any,
        on_failure: Callable[[Callback, BaseException], None],
        timeout: float | None = None,
        owner: object = None,
    ) -> None:
        self.pm = pm
        #: The kernel whose callbacks these are: marked as running while they run (see kernel.core.running).
        self.owner = owner
        self.timeout = timeout
        # Chains the kernel may run with a bare loop (plain ones, while nothing monitors).
        self.fast: dict[str, Chain] = {}
        self.chains: dict[str, Chain] = {}
        self.monitors: list[_Monitor] = []
        self._by_impl: dict[HookImpl, Callback] = {}
        self._seq = itertools.count()
        self._lock = SharedRLock()
        self._on_failure = on_failure
        self._deferred: set[str] | None = None
        self._bridge: _Bridge | None = None
        # ``invoke_hook``: the kernel binds it as its own method.
        self.hot = self.make_invoke()

    # -- registration ------------------------------------------------------

    def batch(self) -> _Batch:
        """Compile each touched hook once, at the end, instead of after every change."""
        return _Batch(self)

    def caller(self, hook: str) -> HookCaller:
        """The pluggy ``HookCaller`` of ``hook``, made (without a spec) if there is none."""
        caller = getattr(self.pm.hook, hook, None)
        if caller is None:
            caller = HookCaller(hook, self.pm._hookexec)
            setattr(self.pm.hook, hook, caller)
        return caller

    def add(
        self, plugin_obj: object, plugin: str, hook: str, fn: Callable[..., Any], *, tier: int = NORMAL
    ) -> Callback:
        """Add a Hermes-style callback (called with keyword arguments) as an impl of ``plugin_obj``."""
        opts = {**_HERMES_OPTS, "trylast": tier >= TRY_LAST, "tryfirst": tier == TRY_FIRST}
        impl = HookImpl(plugin_obj, plugin, fn, opts)  # type: ignore[arg-type]
        cb = Callback(
            plugin=plugin,
            hook=hook,
            fn=fn,
            call=adapt_hermes_callback(fn),
            impl=impl,
            seq=next(self._seq),
            tier=tier,
            is_async=is_async_callable(fn),
        )
        with self._lock:
            caller = self.caller(hook)
            self._by_impl[impl] = cb
            caller._maybe_apply_history(impl)
            caller._hookimpls.append(impl)
            self._changed(hook)
        return cb

    def adopt(self, plugin_obj: object) -> list[Callback]:
        """The callbacks of the impls pluggy registered for ``plugin_obj``."""
        out: list[Callback] = []
        with self._lock:
            for caller in list(vars(self.pm.hook).values()):
                touched = False
                for impl in caller._hookimpls:
                    if impl.plugin is plugin_obj:
                        out.append(self._callback(caller.name, impl))
                        touched = True
                if touched:
                    self._changed(caller.name)
        return out

    def remove(self, cb: Callback) -> None:
        """Remove one callback (a rolled-back ``register_hook``)."""
        with self._lock:
            self._by_impl.pop(cb.impl, None)
            caller = getattr(self.pm.hook, cb.hook, None)
            if caller is not None and cb.impl in caller._hookimpls:
                caller._hookimpls.remove(cb.impl)
            self._changed(cb.hook)

    def forget(self, plugin: str) -> None:
        """Drop every callback of ``plugin`` (after pluggy unregistered its object)."""
        with self._lock:
            gone = [cb for cb in self._by_impl.values() if cb.plugin == plugin]
            for cb in gone:
                del self._by_impl[cb.impl]
                caller = getattr(self.pm.hook, cb.hook, None)
                if caller is not None and cb.impl in caller._hookimpls:
                    caller._hookimpls.remove(cb.impl)
            for hook in {cb.hook for cb in gone}:
                self._changed(hook)

    def callbacks(self, hook: str | None = None) -> list[Callback]:
        """Every callback (disabled ones too), in call order."""
        with self._lock:
            out = [cb for cb in self._by_impl.values() if hook is None or cb.hook == hook]
        out.sort(key=_call_order)
        return out

    def callback_of(self, impl: HookImpl) -> Callback | None:
        return self._by_impl.get(impl)

    def disable(self, cb: Callback, error: str) -> bool:
        """Disable ``cb`` with ``error``; ``False`` when it already was."""
        with self._lock:
            if cb.error is not None:
                return False
            cb.error = error
            if cb.impl in self._by_impl:
                self._changed(cb.hook)
            return True

    @property
    def lock(self) -> SharedRLock:
        """The engine's lock (a plugin-loading thread borrows it with the kernel's)."""
        return self._lock

    def misfit(self, hook: str, impl: HookImpl, exc: BaseException) -> None:
        """Disable ``impl`` of ``hook``, which does not fit the hook's new spec, and report it once."""
        cb = self._callback(hook, impl)
        if self.disable(cb, describe(exc)):
            self._on_failure(cb, exc)

    def respecified(self, hooks: Iterable[str]) -> None:
        """Recompile ``hooks`` after a spec was added (firstresult, defaults may change)."""
        with self._lock:
            for hook in hooks:
                self._changed(hook)

    def monitoring_changed(self) -> None:
        with self._lock:
            self.monitors = [m for m in self.monitors if m.alive]
            self.fast.clear()
            if not self.monitors:
                self.fast.update({h: c for h, c in self.chains.items() if c.plain})

    def _callback(self, hook: str, impl: HookImpl) -> Callback:
        cb = self._by_impl.get(impl)
        if cb is None:
            wrapper = "new" if impl.wrapper else "old" if impl.hookwrapper else ""
            tier = TRY_FIRST if impl.tryfirst else TRY_LAST if impl.trylast else NORMAL
            cb = Callback(
                plugin=impl.plugin_name,
                hook=hook,
                fn=impl.function,
                call=adapt_pluggy_impl(impl),
                impl=impl,
                seq=next(self._seq),
                tier=tier,
                is_async=is_async_callable(impl.function),
                native=True,
                wrapper=wrapper,
            )
            if impl.plugin is not None:  # call_extra's temporary impls are not kept
                self._by_impl[impl] = cb
        return cb

    def _changed(self, hook: str) -> None:
        if self._deferred is not None:
            self._deferred.add(hook)
        else:
            self._compile(hook)

    def _compile(self, hook: str) -> None:
        caller = getattr(self.pm.hook, hook, None)
        if caller is None:
            self.chains.pop(hook, None)
            self.fast.pop(hook, None)
            return
        impls = caller._hookimpls
        cbs = sorted((self._callback(hook, impl) for impl in impls), key=_call_order)
        # pluggy's own list order (it calls in reverse): plain impls, then wrappers.
        impls[:] = [cb.impl for cb in reversed(cbs) if not cb.wrapper] + [
            cb.impl for cb in reversed(cbs) if cb.wrapper
        ]
        chain = self._chain(caller, cbs, list(impls))
        self.chains[hook] = chain
        if chain.plain and not self.monitors:
            self.fast[hook] = chain
        else:
            self.fast.pop(hook, None)

    def _chain(self, caller: HookCaller, cbs: list[Callback], methods: list[HookImpl]) -> Chain:
        live = [cb for cb in cbs if cb.error is None and not cb.wrapper]
        wrappers = tuple(cb for cb in cbs if cb.error is None and cb.wrapper)
        calls: list[Callable[..., Any]] = []
        seen: set[int] = set()
        for cb in live:
            # The fast path finds a failing callback by identity; keep entries unique.
            if id(cb.call) in seen:
                cb.call = _Distinct(cb.call)
            seen.add(id(cb.call))
            calls.append(cb.call)
        spec = caller.spec
        firstresult = bool(spec is not None and spec.opts.get("firstresult"))
        defaults = spec.kwargdefaults if spec is not None and spec.kwargdefaults else None
        history = caller._call_history
        plain = not (
            wrappers
            or firstresult
            or defaults
            or history is not None
            or self.timeout
            or any(cb.is_async for cb in live)
        )
        native = None
        if (
            plain
            and live
            and all(cb.native and cb.impl is not None and not cb.impl.kwargnames for cb in live)
        ):
            native = tuple((cb.fn, *_picker(tuple(cb.impl.argnames)), cb.call) for cb in live)
        return Chain(
            tuple(calls), tuple(live), wrappers, methods, firstresult, defaults, plain, history, native
        )

    def _chain_for(self, hook: str, methods: list[HookImpl]) -> Chain:
        """A chain for a pluggy call with ``methods`` other than the caller's (a subset, a replay...)."""
        with self._lock:
            caller = self.caller(hook)
            cbs = sorted((self._callback(hook, impl) for impl in methods), key=_call_order)
            return self._chain(caller, cbs, list(methods))

    # -- calling -----------------------------------------------------------

    def failed(self, chain: Chain, call: Callable[..., Any], exc: BaseException) -> None:
        """The fast path's handler: contain ``exc`` raised by ``call`` of ``chain``, or re-raise it."""
        if propagates(exc):
            raise exc
        for cb in chain.callbacks:
            if cb.call is call:
                self.fail(cb, exc)
                return

    def fail(self, cb: Callback, exc: BaseException, request: Request | None = None) -> None:
        """Disable ``cb`` for ``exc`` and report it once."""
        if request is not None and request.failures is not None:
            request.failures.append(cb)
        if self.disable(cb, describe(exc)) or cb.impl not in self._by_impl:
            self._on_failure(cb, exc)

    def settle(self, chain: Chain, call: Callable[..., Any], result: Any) -> Any:
        """A fast-path result that is not a plain value: await it; a failure disables its callback."""
        try:
            if inspect.isawaitable(result):
                return self.run_sync(result, self.timeout)
            return result
        except BaseException as exc:
            self.failed(chain, call, exc)
            return None

    def invoke(self, hook: str, kwargs: dict[str, Any], request: Request | None = None) -> list[Any]:
        """Call ``hook`` for the kernel: the results as a list (at most one for ``firstresult``)."""
        chain = self._chain_to_call(hook, kwargs)
        if chain is None:
            return []
        if self.monitors:
            result = self._monitored(hook, chain, kwargs, chain.firstresult, request)
        else:
            result = self._run(chain, kwargs, chain.firstresult, request)
        return _as_list(chain, result)

    def _chain_to_call(self, hook: str, kwargs: dict[str, Any]) -> Chain | None:
        chain = self.chains.get(hook)
        if chain is not None and chain.history is not None:
            chain.history.append((kwargs, None))  # as call_historic: replayed to later plugins
        return chain

    def results_of(self, outcome: Any, request: Request) -> list[tuple[Callback, Any]]:
        """The whole call's ``outcome`` (what ``k.pm.hook.<name>`` returned) as ``(callback, value)``.

        Without a wrapper that changed it, these are the callbacks' own results (``request.pairs``).
        Otherwise each value is credited to the callback that returned that very object, and a value
        none returned to the outermost wrapper that changed the result.
        """
        pairs = request.pairs or []
        wrapper = request.changed_by
        if wrapper is None:
            return pairs
        if outcome is None:
            return []
        values = outcome if type(outcome) in (list, tuple) else [outcome]
        by_value: dict[int, list[Callback]] = {}
        for cb, value in pairs:
            by_value.setdefault(id(value), []).append(cb)
        out = []
        for value in values:
            if value is None:
                continue
            owners = by_value.get(id(value))
            out.append((owners.pop(0) if owners else wrapper, value))
        return out

    def read(self, pairs: Iterable[tuple[Callback, Any]], reader: Callable[[Any], Any]) -> list[Any]:
        """``reader(result)`` of each ``(callback, result)``, in order; a result whose reading
        fails (a hostile ``__eq__``, ``__str__``...) is left out and disables its callback."""
        out = []
        for cb, value in pairs:
            try:
                out.append(reader(value))
            except BaseException as exc:
                if propagates(exc):
                    raise
                self.fail(cb, exc)
        return out

    def execute(
        self, hook: str, methods: list[HookImpl], kwargs: Mapping[str, Any], firstresult: bool
    ) -> Any:
        """``k.pm``'s hook executor: what every pluggy ``HookCaller`` of the kernel calls."""
        chain = self.chains.get(hook)
        if chain is None or chain.methods != methods:
            chain = self._chain_for(hook, methods)
        if self.monitors:
            return self._monitored(hook, chain, dict(kwargs), firstresult, None)
        if chain.plain and not firstresult and self.fast.get(hook) is chain:
            if chain.native is not None:
                return self.native_results(chain, kwargs)
            return self.hot(hook, **kwargs)
        return self._run(chain, dict(kwargs), firstresult, None)

    def native_results(self, chain: Chain, kwargs: Mapping[str, Any], each: bool = False) -> list[Any]:
        """A plain chain of pluggy-native impls, each called with its own arguments by position (as
        pluggy calls them: no adapter in between); containment costs nothing until one raises.

        The non-None results; with ``each``, one entry per impl (``None`` for no answer or a failure).
        """
        results: list[Any] = []
        append, values, failed = results.append, _VALUES, self.failed
        token = RUNNING.set(self.owner)
        try:
            for fn, pick, single, call in chain.native or ():
                try:
                    try:
                        args = pick(kwargs)
                    except KeyError:
                        result = call(**kwargs)  # the adapter's TypeError names the missing argument
                    else:
                        result = fn(args) if single else fn(*args)
                except BaseException as exc:
                    failed(chain, call, exc)
                    result = None
                else:
                    if result is not None and type(result) not in values:
                        result = self.settle(chain, call, result)
                if result is not None or each:
                    append(result)
        finally:
            RUNNING.reset(token)
        return results

    def make_invoke(self) -> Callable[..., list[Any]]:
        """The hot path as one function, ``invoke_hook(hook_name, /, **kwargs)``.

        A plain chain runs in a loop right there (no further call level, the
        lookups bound once); containment costs nothing until a callback
        raises.  A plain chain of pluggy-native impls is called as pluggy
        calls them (:meth:`native_results`).  Anything else — wrappers, async
        callbacks, firstresult, monitors... — takes :meth:`invoke`.
        """
        fast_get, general, failed, settle, native = (
            self.fast.get,
            self.invoke,
            self.failed,
            self.settle,
            self.native_results,
        )
        values = _VALUES
        owner, mark, unmark = self.owner, RUNNING.set, RUNNING.reset

        def invoke_hook(hook_name: str, /, **kwargs: Any) -> list[Any]:
            chain = fast_get(hook_name)
            if chain is None:
                return general(hook_name, kwargs)
            if chain.native is not None:
                return native(chain, kwargs)
            kwargs.setdefault(OBSERVER_KEY, OBSERVER_SCHEMA_VERSION)
            results: list[Any] = []
            append = results.append
            token = mark(owner)
            try:
                for call in chain.calls:
                    try:
                        result = call(**kwargs)
                    except BaseException as exc:
                        failed(chain, call, exc)
                        continue
                    if result is not None:
                        if type(result) not in values:
                            result = settle(chain, call, result)
                            if result is None:
                                continue
                        append(result)
            finally:
                unmark(token)
            return results

        return invoke_hook

    def _monitored(
        self, hook: str, chain: Chain, kwargs: dict[str, Any], firstresult: bool, request: Request | None
    ) -> Any:
        befores = self._before(hook, chain.methods, kwargs)
        outcome = Result.from_call(lambda: self._run(chain, kwargs, firstresult, request))
        self._after(befores, outcome, hook, chain.methods, kwargs)
        return outcome.get_result()

    def _before(self, hook: str, methods: list[HookImpl], kwargs: dict[str, Any]) -> list[_Monitor]:
        # As pluggy nests them: the monitor added last is the outermost.
        called = []
        for monitor in reversed(list(self.monitors)):
            if self._monitor_step(monitor, monitor.before, hook, list(methods), kwargs):
                called.append(monitor)
        return called

    def _after(
        self,
        called: list[_Monitor],
        outcome: Result[Any],
        hook: str,
        methods: list[HookImpl],
        kwargs: dict[str, Any],
    ) -> None:
        for monitor in reversed(called):
            self._monitor_step(monitor, monitor.after, outcome, hook, list(methods), kwargs)

    def _monitor_step(self, monitor: _Monitor, fn: Callable[..., Any], *args: Any) -> bool:
        try:
            fn(*args)
        except BaseException as exc:
            if propagates(exc):
                raise
            monitor.alive = False
            self.monitoring_changed()
            fake = Callback("<monitor>", "<monitoring>", fn, fn, None, -1)  # type: ignore[arg-type]
            self._on_failure(fake, exc)
            return False
        return True

    def _steps(
        self, chain: Chain, kwargs: dict[str, Any], firstresult: bool, request: Request | None
    ) -> Generator[tuple[Callback, dict[str, Any]], tuple[bool, Any], Any]:
        """One hook call, as a generator: it yields each impl with its arguments, the driver
        (sync :meth:`_run` or async :meth:`_arun`) calls it and sends back ``(ok, result or
        exception)``; the generator returns the call's outcome.  Wrappers run here."""
        if chain.defaults:
            kwargs = {**chain.defaults, **kwargs}
        if OBSERVER_KEY not in kwargs:
            kwargs = {**kwargs, OBSERVER_KEY: OBSERVER_SCHEMA_VERSION}
        prepare = request.prepare if request is not None else None
        pairs = request.pairs if request is not None else None
        after = request.after if request is not None else None
        teardowns = []
        for cb in chain.wrappers:
            try:
                gen = self._step(lambda cb=cb: cb.call(**(prepare(kwargs) if prepare else kwargs)))  # type: ignore[misc]  # a lambda's default argument
                if type(gen) is not _GENERATOR:
                    raise TypeError("a wrapper must be a generator function (one yield)")
                try:
                    self._step(lambda gen=gen: next(gen))  # type: ignore[misc]  # a lambda's default argument
                except StopIteration:
                    raise RuntimeError("the wrapper did not yield") from None
            except BaseException as exc:
                if propagates(exc):
                    raise
                self.fail(cb, exc, request)
                continue
            teardowns.append((cb, gen))
        results: list[Any] = []
        for cb in chain.callbacks:
            call_kwargs = prepare(kwargs) if prepare else kwargs
            ok, result = yield cb, call_kwargs
            if not ok:
                if propagates(result):
                    raise result
                self.fail(cb, result, request)
                continue
            if after is not None:
                after(cb, result, call_kwargs)
            if result is not None:
                results.append(result)
                if pairs is not None:
                    pairs.append((cb, result))
                if firstresult:
                    break
        outcome: Any = (results[0] if results else None) if firstresult else results
        for cb, gen in reversed(teardowns):
            outcome = self._teardown(cb, gen, outcome, request)
        return outcome

    def _run(self, chain: Chain, kwargs: dict[str, Any], firstresult: bool, request: Request | None) -> Any:
        steps = self._steps(chain, kwargs, firstresult, request)
        token = RUNNING.set(self.owner)
        try:
            cb, call_kwargs = next(steps)
            while True:
                try:
                    box: tuple[bool, Any] = (True, self._call(cb, call_kwargs))
                except BaseException as exc:
                    box = (False, exc)
                cb, call_kwargs = steps.send(box)
        except StopIteration as stop:
            return stop.value
        finally:
            RUNNING.reset(token)

    def _teardown(self, cb: Callback, gen: Any, outcome: Any, request: Request | None) -> Any:
        if request is None:
            return self._resume(cb, gen, outcome, None)
        # A kernel helper reads the wrapped result: note the wrapper when it changed it.
        before = list(outcome) if type(outcome) is list else outcome
        result = self._resume(cb, gen, outcome, request)
        if _changed(before, result):
            request.changed_by = cb
        return result

    def _resume(self, cb: Callback, gen: Any, outcome: Any, request: Request | None) -> Any:
        try:
            if cb.wrapper == "old":
                result = Result(outcome, None)
                try:
                    self._step(lambda: gen.send(result))
                except StopIteration:
                    return result.get_result()
            else:
                try:
                    self._step(lambda: gen.send(outcome))
                except StopIteration as stop:
                    return stop.value
            raise RuntimeError("the wrapper yielded a second time")
        except BaseException as exc:
            if propagates(exc):
                raise
            self.fail(cb, exc, request)
            return outcome
        finally:
            _close_quietly(gen)

    def _call(self, cb: Callback, kwargs: dict[str, Any]) -> Any:
        timeout = self.timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        # An async callback only makes its coroutine here; a sync one may block: bound it.
        result = cb.call(**kwargs) if cb.is_async else self._step(lambda: cb.call(**kwargs))
        if result is not None and type(result) not in _VALUES and inspect.isawaitable(result):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                _close_quietly(result)
                raise HookTimeout(timeout or 0)
            try:
                result = self.run_sync(result, left)
            except HookTimeout:
                raise HookTimeout(timeout or 0) from None
        return result

    def _step(self, fn: Callable[[], Any]) -> Any:
        """One step of a wrapper, bounded like a callback."""
        if self.timeout is None:
            return fn()
        return in_daemon_thread(fn, self.timeout)

    def run_sync(self, awaitable: Any, timeout: float | None = None) -> Any:
        """Run an awaitable to completion from synchronous code.

        It runs on the kernel's own event loop, in a daemon thread of its own,
        so that a sync call made inside a running loop does not deadlock and
        objects a callback binds to its loop stay valid from one call to the
        next.  Context variables of the caller are visible to it.
        """
        with self._lock:
            if self._bridge is None:
                self._bridge = _Bridge()
            bridge = self._bridge
        return bridge.run(awaitable, timeout)

    def close(self) -> None:
        with self._lock:
            bridge, self._bridge = self._bridge, None
        if bridge is not None:
            bridge.close()


def _no_arguments(_kwargs: Any) -> tuple[()]:
    return ()


def _picker(names: tuple[str, ...]) -> tuple[Callable[[Any], Any], bool]:
    """``(pick, single)`` for an impl taking ``names``: ``pick(kwargs)`` is its arguments, in C."""
    if not names:
        return _no_arguments, False
    return operator.itemgetter(*names), len(names) == 1


class _Batch:
    def __init__(self, engine: HookEngine) -> None:
        self._engine = engine
        self._outer = False

    def __enter__(self) -> None:
        engine = self._engine
        engine._lock.acquire()
        if engine._deferred is None:
            engine._deferred = set()
            self._outer = True

    def __exit__(self, *exc: object) -> None:
        engine = self._engine
        try:
            if self._outer:
                pending, engine._deferred = engine._deferred or set(), None
                for hook in pending:
                    engine._compile(hook)
        finally:
            engine._lock.release()


class _Distinct:
    """A callable that only differs from ``call`` by identity (two callbacks of one function)."""

    __slots__ = ("__wrapped__",)

    def __init__(self, call: Callable[..., Any]) -> None:
        self.__wrapped__ = call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)


def _call_order(cb: Callback) -> tuple[int, tuple[str, str], int]:
    if cb.impl is not None and cb.impl.plugin is None:
        # call_extra's functions: first of the normal tier, as pluggy calls them.
        return (NORMAL, ("", ""), cb.seq)
    return (cb.tier, plugin_order(cb.plugin), cb.seq)


def _changed(before: Any, after: Any) -> bool:
    """Whether a wrapper's result differs from what it was given (``before``: a copy of a list)."""
    if type(before) is not list or type(after) is not list:
        return after is not before
    return len(after) != len(before) or any(a is not b for a, b in zip(after, before, strict=True))


def _close_quietly(gen: Any) -> None:
    close = getattr(gen, "close", None)
    if close is None:
        return
    try:
        close()
    except BaseException as exc:
        if propagates(exc):
            raise
