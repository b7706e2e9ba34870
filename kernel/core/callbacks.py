"""What the hook engine runs: callback records, compiled chains, argument adaptation, containment.

``propagates`` decides which exceptions leave a hook call (only a Ctrl-C in
the main thread and the cancellation of the calling task); ``describe``,
``safe_text``, ``plain_text`` and ``context_text`` read what plugins give
back without trusting it.
"""

from __future__ import annotations

import inspect
import operator
import sys
import threading
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from pluggy import HookImpl

TRY_FIRST, NORMAL, TRY_LAST = 0, 1, 2
# Callbacks declared in config.yaml (shell hooks) run after every plugin's.
CONFIGURED = 3

# Results handed back as they are, without looking for an awaitable.
_VALUES = frozenset({str, dict, list, tuple, int, float, bool, bytes})
# Every hook call carries it, as Hermes stamps it (a caller's own value is kept).
OBSERVER_KEY, OBSERVER_SCHEMA_VERSION = "telemetry_schema_version", "hermes.observer.v1"
_GENERATOR = types.GeneratorType


class HookTimeout(Exception):
    """A callback that did not return within ``plugins.hook_timeout`` seconds."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"did not return within {timeout:g} s (plugins.hook_timeout); left running")


def propagates(exc: BaseException) -> bool:
    """Whether ``exc`` must end the call instead of being contained as a plugin's failure.

    Only two do: ``KeyboardInterrupt`` in the main thread (the user pressed
    Ctrl-C) and an ``asyncio.CancelledError`` while the calling task is being
    cancelled.  Everything else a plugin raises is its failure.
    """
    if isinstance(exc, KeyboardInterrupt):
        return threading.current_thread() is threading.main_thread()
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None and isinstance(exc, asyncio.CancelledError):
        try:
            task = asyncio.current_task()
        except RuntimeError:
            return False
        return task is not None and task.cancelling() > 0
    return False


def safe_text(fn: Callable[[Any], str], value: Any, limit: int = 500) -> str:
    """``fn(value)`` (``str`` or ``repr``) as a plain, bounded string; never raises for the value."""
    try:
        text = str.__str__(fn(value))
    except BaseException as exc:
        if propagates(exc):
            raise
        return f"<{fn.__name__}() of {type(value).__name__} failed>"
    return text if len(text) <= limit else text[:limit] + "…"


def describe(exc: BaseException) -> str:
    """One line for a failure: ``Type: message``, the message redacted (``kernel.base.redact.redact_text``);
    survives an ``__str__`` that raises."""
    from ..base.redact import redact_text

    name = type(exc).__name__
    if issubclass(type(exc), SystemExit):
        return f"SystemExit({safe_text(repr, cast(SystemExit, exc).code)})"
    text = redact_text(str.strip(safe_text(str, exc)))
    return f"{name}: {text}" if text else name


class _Warns(Protocol):
    def warning(self, event: str, **fields: Any) -> Any: ...


class Contained:
    """A block of plugin code run by :func:`contained`, and what it ended with.

    ``exc`` is what the block raised and was contained (``None`` while it has
    not failed); ``error`` is that failure described (``describe(exc)``).
    """

    __slots__ = ("_error", "_event", "_fields", "_log", "exc")

    def __init__(self, log: _Warns | None, event: str, fields: dict[str, Any]) -> None:
        self._log, self._event, self._fields = log, event, fields
        self._error: str | None = None
        self.exc: BaseException | None = None

    @property
    def failed(self) -> bool:
        """Whether the block raised (and the failure was contained)."""
        return self.exc is not None

    @property
    def error(self) -> str:
        """``Type: message`` of the failure, redacted (``""`` when the block did not fail)."""
        if self._error is None:
            self._error = "" if self.exc is None else describe(self.exc)
        return self._error

    def __enter__(self) -> Contained:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: types.TracebackType | None
    ) -> bool:
        if exc is None or propagates(exc):
            return False
        self.exc = exc
        if self._log is not None:
            self._log.warning(self._event, **self._fields, error=self.error)
        return True


def contained(log: _Warns | None = None, event: str = "", /, **fields: Any) -> Contained:
    """Run a ``with`` block of plugin code as a contained call.

    What :func:`propagates` says must escape does; anything else the block
    raises (``SystemExit`` too) ends the block, is logged as
    ``log.warning(event, **fields, error=describe(exc))`` when ``log`` is
    given, and is kept on the returned :class:`Contained`::

        with contained(kernel.log, "memory_backup_paths_failed", provider=name) as outcome:
            paths = provider.backup_paths()
        if outcome.failed:
            return []
    """
    return Contained(log, event, fields)


def plain_text(value: Any) -> str | None:
    """``value`` as an exact ``str`` when it is a string, else ``None``; no method of a subclass runs."""
    if issubclass(type(value), str):
        return str.__str__(value)
    return None


def context_text(value: Any) -> str | None:
    """One ``pre_llm_call`` result as a context piece (``None`` for none): a string or ``{"context": ...}``.

    Rendering a non-string context may raise; callers contain it.
    """
    if issubclass(type(value), dict):
        value = dict.get(value, "context")
        if value is None:
            return None
        if not issubclass(type(value), str):
            value = str(value)
    text = plain_text(value)
    return text if text is not None and str.strip(text) else None


def plugin_order(name: str) -> tuple[str, str]:
    """The sort key of a plugin name: alphabetical ignoring case, then exact."""
    return (name.casefold(), name)


@dataclass(eq=False)
class Callback:
    """One callback of one plugin on one hook: a pluggy ``HookImpl`` and how to call it."""

    plugin: str
    hook: str
    fn: Callable[..., Any]
    call: Callable[..., Any]
    impl: HookImpl
    seq: int
    tier: int = NORMAL
    is_async: bool = False
    native: bool = False
    wrapper: str = ""  # "new" (wrapper=True), "old" (hookwrapper=True) or ""
    error: str | None = None

    @property
    def label(self) -> str:
        return getattr(self.fn, "__qualname__", None) or safe_text(repr, self.fn)


@dataclass(frozen=True)
class Chain:
    """One hook, compiled: the live callbacks in call order and how to call them."""

    calls: tuple[Callable[..., Any], ...]
    callbacks: tuple[Callback, ...]
    wrappers: tuple[Callback, ...]  # outermost first
    methods: list[HookImpl]  # the caller's list when compiled (pluggy's order, disabled ones too)
    firstresult: bool = False
    defaults: Mapping[str, Any] | None = None
    plain: bool = True  # no wrapper, firstresult, historic, async callback, spec default or timeout
    history: list[Any] | None = None  # a historic hook's call history (pluggy's own list)
    #: For a plain chain of pluggy-native impls only: ``(function, pick, single, call)`` each, so that
    #: ``k.pm.hook.<name>`` calls the functions with their own arguments, as pluggy does: ``pick``
    #: takes them from the call's keyword arguments (one value when ``single``, else a tuple; a
    #: ``KeyError`` when one is missing), ``call`` is the adapter, which names a missing argument.
    native: tuple[tuple[Callable[..., Any], Callable[[Any], Any], bool, Callable[..., Any]], ...] | None = (
        None
    )


@dataclass
class Request:
    """What a kernel-internal call wants besides the results."""

    pairs: list[tuple[Callback, Any]] | None = None
    failures: list[Callback] | None = None
    # Fresh keyword arguments for each callback (e.g. its own copy of ``args``).
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # Told of each callback that returned (not wrappers): ``after(cb, result, kwargs it was given)``.
    after: Callable[[Callback, Any, dict[str, Any]], None] | None = None
    # The outermost wrapper that changed the call's result (``None``: the result is ``pairs``' values).
    changed_by: Callback | None = None


@dataclass
class _Monitor:
    before: Callable[..., Any]
    after: Callable[..., Any]
    alive: bool = field(default=True)


_HERMES_OPTS = {
    "wrapper": False,
    "hookwrapper": False,
    "optionalhook": True,  # Hermes keeps callbacks of hooks nobody specified
    "tryfirst": False,
    "trylast": False,
    "specname": None,
}


def keyword_names(fn: Callable[..., Any]) -> frozenset[str] | None:
    """The parameter names ``fn`` accepts by keyword; ``None`` when it takes ``**kwargs``."""
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


def adapt_pluggy_impl(impl: HookImpl) -> Callable[..., Any]:
    """What the engine calls for a pluggy impl: pluggy 1.7's argument rules.

    The impl's positional parameters are passed by position (a missing one is
    a ``TypeError`` naming it); parameters with defaults receive the caller's
    value when the call has one.
    """
    fn, names, optional = impl.function, tuple(impl.argnames), tuple(impl.kwargnames)
    getter = operator.itemgetter(*names) if len(names) > 1 else None

    def call(**kwargs: Any) -> Any:
        try:
            args = getter(kwargs) if getter is not None else tuple(kwargs[n] for n in names)
        except KeyError:
            missing = ", ".join(n for n in names if n not in kwargs)
            raise TypeError(f"the hook call did not provide argument(s): {missing}") from None
        if optional:
            extra = {n: kwargs[n] for n in optional if n in kwargs}
            if extra:
                return fn(*args, **extra)
        return fn(*args)

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def is_coroutine_function(fn: Any) -> bool:
    """``inspect.iscoroutinefunction(fn)``, read from a plain function's code flags at once (it runs
    for every callback and tool a plugin registers)."""
    if type(fn) is types.FunctionType and "_is_coroutine_marker" not in vars(fn):
        return bool(fn.__code__.co_flags & inspect.CO_COROUTINE)
    return inspect.iscoroutinefunction(fn)


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` makes a coroutine: an ``async def`` function or method, or an object
    whose ``__call__`` is one."""
    if is_coroutine_function(fn):
        return True
    if type(fn) is types.FunctionType:
        return False
    call = getattr(fn, "__call__", None)  # noqa: B004 - async __call__ of an instance
    return call is not None and inspect.iscoroutinefunction(call)


def _as_list(chain: Chain, result: Any) -> list[Any]:
    if chain.firstresult:
        return [] if result is None else [result]
    return result
