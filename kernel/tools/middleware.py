"""Middleware: plugin code that wraps an operation of the kernel (``ctx.register_middleware``).

Hermes plugins use four kinds:

* ``tool_request`` sees each tool call's arguments before anything else
  does (guards, approvals, the handler): ``fn(tool_name=..., args=...,
  original_args=..., **context)`` returns ``{"args": {...}}`` to replace
  them, anything else to keep them.  One that raises is disabled and
  skipped: the call goes on with the arguments as they were (as in Hermes).
* ``tool_execution`` wraps each tool handler call, after ``pre_tool_call`` has
  allowed it: ``fn(tool_name=..., args=..., next_call=..., **context)``;
  ``next_call(args)`` runs the rest of the chain (the handler last) and
  returns its result; what ``fn`` returns is the tool's result.
* ``llm_request`` sees each model request before it is sent:
  ``fn(request=..., **context)`` returns a replacement request dict, or
  ``None`` to keep it.
* ``llm_execution`` wraps each model call: ``fn(request=..., next_call=...,
  **context)``; ``next_call(request)`` calls the model (with its retries and
  fallbacks) and returns the response; ``fn`` returns the response to use.

Middleware of one kind runs in plugin order, the first outermost.  Functions
receive only the keyword arguments they name (unless they take
``**kwargs``).  One that raises is logged and disabled for the life of the
kernel, like a hook callback.  A ``tool_execution`` one is then skipped, as
in Hermes: the handler's result stands if it had already called
``next_call``, else the call goes on without it; ``next_call`` runs the
handler once, a second call raises.  Around a model call
(``llm_execution``), the operation it was wrapping fails with an error naming
the plugin instead.
"""

from __future__ import annotations

import copy
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.api import contained
from ..core.hooks import adapt_hermes_callback, describe, plugin_order, propagates

if TYPE_CHECKING:
    from ..core.kernel import Kernel

KINDS = ("tool_request", "tool_execution", "llm_request", "llm_execution")

# The payload versions Hermes stamps on what observers and middleware receive.
OBSERVER_SCHEMA_VERSION = "hermes.observer.v1"
MIDDLEWARE_SCHEMA_VERSION = "hermes.middleware.v1"
_VERSIONS = {
    "telemetry_schema_version": OBSERVER_SCHEMA_VERSION,
    "middleware_schema_version": MIDDLEWARE_SCHEMA_VERSION,
}


class MiddlewareError(Exception):
    """A middleware function that raised; names the plugin."""


class _Inner(Exception):
    """Carries the wrapped operation's own exception through the middleware layers."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.exc = exc


@dataclass(eq=False)
class Middleware:
    """One registered middleware function."""

    plugin: str
    kind: str
    fn: Callable[..., Any]
    call: Callable[..., Any]
    seq: int
    error: str | None = None

    @property
    def label(self) -> str:
        return getattr(self.fn, "__qualname__", None) or repr(self.fn)


class MiddlewareRegistry:
    """The middleware of one kernel, by kind, in plugin order."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._items: list[Middleware] = []
        self._seq = 0
        self._lock = threading.Lock()
        # The live middleware of each kind in call order, rebuilt on change (read on every tool call).
        self._chains: dict[str, tuple[Middleware, ...]] = {}

    def _rebuild(self) -> None:
        live = sorted(
            (m for m in self._items if m.error is None), key=lambda m: (plugin_order(m.plugin), m.seq)
        )
        self._chains = {kind: tuple(m for m in live if m.kind == kind) for kind in KINDS}

    def add(self, plugin: str, kind: str, fn: Callable[..., Any]) -> Middleware:
        if kind not in KINDS:
            raise ValueError(f"unknown middleware kind {kind!r} (kinds: {', '.join(KINDS)})")
        if not callable(fn):
            raise TypeError(f"register_middleware({kind!r}): the function must be callable, not {fn!r}")
        with self._lock:
            self._seq += 1
            item = Middleware(plugin, kind, fn, adapt_hermes_callback(fn), self._seq)
            self._items.append(item)
            self._rebuild()
        return item

    def remove(self, item: Middleware) -> None:
        with self._lock:
            if item in self._items:
                self._items.remove(item)
                self._rebuild()

    def remove_plugin(self, plugin: str) -> None:
        with self._lock:
            self._items = [m for m in self._items if m.plugin != plugin]
            self._rebuild()

    def has(self, kind: str) -> bool:
        """Whether any live middleware of ``kind`` exists (one dict lookup: read on every call)."""
        return bool(self._chains.get(kind))

    def of(self, kind: str) -> list[Middleware]:
        """The live middleware of ``kind`` in call order (outermost first)."""
        return list(self._chains.get(kind, ()))

    def all(self) -> list[Middleware]:
        with self._lock:
            return list(self._items)

    def wrap(self, kind: str, inner: Callable[[Any], Any], key: str, **context: Any) -> Callable[[Any], Any]:
        """``inner`` wrapped by every ``kind`` middleware; ``key`` names the argument passed along.

        An exception of ``inner`` itself reaches the caller unchanged (it is
        not the middleware's failure); a middleware's own raises
        :class:`MiddlewareError`.
        """
        items = self._chains.get(kind)
        if not items:
            return inner

        def innermost(value: Any) -> Any:
            with contained() as operation:
                return inner(value)
            assert operation.exc is not None  # the block returns unless it failed
            raise _Inner(operation.exc) from operation.exc

        call: Callable[[Any], Any] = innermost
        for item in reversed(items):
            call = self._layer(item, call, key, context)

        def outermost(value: Any) -> Any:
            try:
                return call(value)
            except _Inner as wrapped:
                raise wrapped.exc from None

        return outermost

    def transform(self, kind: str, value: Any, key: str, **context: Any) -> Any:
        """Pass ``value`` through every ``kind`` middleware that rewrites (``llm_request``)."""
        for item in self.of(kind):
            result = self._guarded(item, {key: value, **context})
            if result is not None:
                value = result
        return value

    def rewrite_args(
        self, tool_name: str, args: dict[str, Any], context: dict[str, Any]
    ) -> tuple[dict[str, Any], list[dict[str, str]]]:
        """``args`` through every ``tool_request`` middleware, in plugin order (see the module docs).

        Returns the arguments and the trace the tool hooks receive as ``middleware_trace``: one
        entry per middleware that replaced them (its answer's ``source``, ``reason`` and ``name``
        strings, or ``source: plugin``), with the ``plugin`` it came from.
        """
        original = copy.deepcopy(args)
        current = args
        trace: list[dict[str, str]] = []
        for item in self.of("tool_request"):
            kwargs = {
                **context,
                "tool_name": tool_name,
                "args": copy.deepcopy(current),
                "original_args": copy.deepcopy(original),
            }
            try:
                result = self._guarded(item, kwargs)
                # Read without running the answer's own methods (a dict subclass may override them).
                replacement = dict.get(result, "args") if isinstance(result, dict) else None
                if isinstance(replacement, dict):
                    current = copy.deepcopy(dict(replacement))
                    trace.append(_trace_entry(result, item.plugin))
            except MiddlewareError:
                continue  # logged and disabled; the call goes on without it
            except BaseException as exc:
                if propagates(exc):
                    raise
                # An answer that cannot be read or copied: the middleware's failure, skipped the same way.
                self._fail(item, exc)
        return current, trace

    def _layer(
        self, item: Middleware, inner: Callable[[Any], Any], key: str, context: dict[str, Any]
    ) -> Callable[[Any], Any]:
        if item.kind != "tool_execution":

            def layer(value: Any) -> Any:
                return self._guarded(item, {**context, key: value, "next_call": inner})

            return layer

        def tool_layer(value: Any) -> Any:
            # Hermes' rules: next_call is single-use, and a middleware that raises is skipped — its
            # downstream result stands if it had one, else the call goes on without it.
            state: dict[str, Any] = {"called": False, "ok": False, "result": None}

            def next_call(next_value: Any = None) -> Any:
                if state["called"]:
                    raise RuntimeError(
                        f"tool_execution middleware of plugin '{item.plugin}' called next_call() more than "
                        "once; the tool runs once per call"
                    )
                state["called"] = True
                result = inner(value if next_value is None else next_value)
                state["ok"], state["result"] = True, result
                return result

            try:
                return self._guarded(item, {**context, key: value, "next_call": next_call})
            except MiddlewareError:
                if state["ok"]:
                    return state["result"]
                if state["called"]:
                    raise  # the handler failed under it and it raised something else: its failure
                return inner(value)

        return tool_layer

    def _guarded(self, item: Middleware, kwargs: dict[str, Any]) -> Any:
        try:
            result = item.call(**{**_VERSIONS, **kwargs})
            if inspect.isawaitable(result):
                result = self._kernel.host.run_sync(result)
            return result
        except (MiddlewareError, _Inner):
            raise  # an inner layer's failure (reported) or the operation's own
        except BaseException as exc:
            if propagates(exc):
                raise
            raise self._fail(item, exc) from exc

    def _fail(self, item: Middleware, exc: BaseException) -> MiddlewareError:
        """Disable ``item`` after ``exc`` (logged, noted on its plugin); the error that names it."""
        with self._lock:
            item.error = describe(exc)
            self._rebuild()
        self._kernel.log.warning(
            "middleware_failed",
            plugin=item.plugin,
            kind=item.kind,
            callback=item.label,
            error=item.error,
            action="middleware disabled for the life of this kernel",
        )
        self._kernel.host.note_failure(
            item.plugin, f"{item.kind} middleware disabled after it failed: {item.error}"
        )
        return MiddlewareError(f"{item.kind} middleware of plugin '{item.plugin}' failed: {item.error}")


def call_model(owner: Any, call: Callable[..., Any], messages: Any, kwargs: dict[str, Any]) -> Any:
    """``call(messages, **kwargs)`` through the ``llm_request`` and ``llm_execution`` middleware.

    ``owner`` is what a model client was given as ``hooks`` (the kernel, or
    ``None``).  The request a middleware sees is ``{"messages": [...], **kwargs}``;
    its context has ``provider`` and ``model`` (from ``call``'s client).
    """
    registry = getattr(owner, "middleware", None)
    if registry is None or not (registry.has("llm_request") or registry.has("llm_execution")):
        return call(messages, **kwargs)
    client = getattr(call, "__self__", None)
    context = {"provider": getattr(client, "provider", None), "model": getattr(client, "model", None)}
    request = registry.transform("llm_request", {"messages": list(messages), **kwargs}, "request", **context)

    def execute(req: dict[str, Any]) -> Any:
        body = dict(req)
        return call(body.pop("messages"), **body)

    return registry.wrap("llm_execution", execute, "request", **context)(request)


async def acall_model(owner: Any, call: Callable[..., Any], messages: Any, kwargs: dict[str, Any]) -> Any:
    """As :func:`call_model` for an async ``call``: ``next_call`` returns an awaitable there."""
    result = call_model(owner, call, messages, kwargs)
    while inspect.isawaitable(result):
        result = await result
    return result


def _trace_entry(answer: dict[str, Any], plugin: str) -> dict[str, str]:
    entry = {}
    for key in ("source", "reason", "name"):
        value = dict.get(answer, key)
        if isinstance(value, str) and value:
            entry[key] = str.__str__(value)[:200]
    entry.setdefault("source", "plugin")
    entry["plugin"] = plugin
    return entry
