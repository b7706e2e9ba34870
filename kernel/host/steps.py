"""The steps a turn is made of (values a generator yields, carried out by a sync or an async driver) and
the contained calls to providers they make."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.api import contained

if TYPE_CHECKING:
    from ..core.kernel import Kernel


@dataclass(slots=True)
class _Hook:
    """Fire a hook; the answers are ignored."""

    name: str
    kwargs: dict[str, Any]


@dataclass(slots=True)
class _Context:
    """Fire ``pre_llm_call``; the answer is the merged context."""

    kwargs: dict[str, Any]


@dataclass(slots=True)
class _FirstText:
    """Fire a ``transform_*`` hook; the answer is its first non-empty string, or ``None``."""

    name: str
    kwargs: dict[str, Any]


@dataclass(slots=True)
class _Call:
    """Call a provider's method, contained (see :func:`call_quietly`); the answer is its return value."""

    event: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    accepting: bool = False  # pass only the keywords ``fn`` takes


_Steps = Generator[Any, Any, Any]


#: The hooks the steps of a turn's beginning and of its end may fire (see :meth:`HostSession._arun`).
_BEGIN_HOOKS = ("on_session_start", "pre_llm_call", "on_session_end")
_END_HOOKS = ("post_llm_call", "transform_llm_output", "on_session_end")


async def _settled(future: asyncio.Future[Any]) -> Any:
    """What ``future`` gives once done (``None`` if it failed), waiting through further cancellations."""
    while not future.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(future)
    return None if future.cancelled() or future.exception() is not None else future.result()


# -- helpers shared with the reference loop --------------------------------------------


def new_id(kind: str) -> str:
    """A fresh random id: ``<kind>-<12 hex digits>``."""
    return f"{kind}-{os.urandom(6).hex()}"


def _provider(kernel: Kernel) -> str | None:
    return kernel.providers.model_config().get("provider") or None


def _since(started: float) -> float:
    """Seconds since ``started`` (``time.monotonic``), to the millisecond."""
    return round(time.monotonic() - started, 3)


def call_quietly(kernel: Kernel, event: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a provider method; a failure is logged as ``event``, never fatal to the turn.

    Only Ctrl-C (and a cancelled task) goes through, as for plugins' hooks;
    a ``SystemExit`` or other ``BaseException`` the provider raises is its failure.
    """
    with contained(kernel.log, event):
        return fn(*args, **kwargs)
    return None


def call_accepting(kernel: Kernel, event: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """:func:`call_quietly` with only the keywords ``fn`` takes (older overrides take fewer)."""
    return call_quietly(kernel, event, fn, *args, **accepted(fn, kwargs))


def _signature(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except Exception:  # a builtin, or an object that refuses to be inspected
        return None


def accepted(fn: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The items of ``kwargs`` that ``fn`` accepts as keywords (all of them if it takes ``**kwargs``)."""
    signature = _signature(fn)
    if signature is None:
        return kwargs
    params = signature.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return kwargs
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return {key: value for key, value in kwargs.items() if key in named}


def _positional_count(fn: Any) -> int:
    signature = _signature(fn)
    if signature is None:
        return 0
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in signature.parameters.values() if p.kind in kinds)
