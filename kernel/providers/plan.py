"""The retry/fallback plan of a model call as pure functions, and the two drivers that run a plan's steps.

A transport writes one call as a generator (a *plan*) that yields steps: an api-hook event to fire
(:data:`~kernel.providers.calls.Event`), a :class:`Send` of one request body, or a :class:`Wait`
between tries; the reply to a ``Send`` comes back as the value of the ``yield``, and an exception
raised while carrying out a step is raised inside the plan at that ``yield``.  :func:`run` carries the
steps out synchronously and :func:`arun` on the running event loop, so that the sync and async paths
of a transport share every line but the one that sends and the one that sleeps.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any

from .calls import Event, afire, fire
from .results import ChatResult, ProviderError


@dataclass(frozen=True)
class Send:
    """Step: send this request body; the plan gets the reply back (what the transport's sender returns)."""

    body: dict[str, Any]


@dataclass(frozen=True)
class Wait:
    """Step: wait this many seconds before the next try."""

    seconds: float


#: One thing a plan asks its driver to do.
Step = Event | Send | Wait
#: A model call written once: the steps it yields, the replies it is sent, the result it returns.
Plan = Generator[Step, Any, ChatResult]


class Move(enum.Enum):
    """What to do after a failed try."""

    RETRY = "retry"  # the same model again, after a wait
    NEXT_MODEL = "next_model"  # the next fallback model (the last error is raised when none is left)
    RAISE = "raise"  # give up now: the request itself is wrong


def models_in_order(model: str, fallbacks: Iterable[str]) -> list[str]:
    """``model`` and then each distinct, non-empty fallback model: the order they are tried in."""
    out = [model]
    out.extend(m for m in fallbacks if m and m not in out)
    return out


def next_move(error: ProviderError, attempt: int, max_retries: int) -> Move:
    """After try ``attempt`` (from 1) of one model failed with ``error``: a retryable failure is tried
    again up to ``max_retries`` more times, then the next model; a malformed body goes straight to the
    next model; any other failure is final."""
    if error.retryable:
        return Move.RETRY if attempt <= max_retries else Move.NEXT_MODEL
    return Move.NEXT_MODEL if error.malformed else Move.RAISE


def backoff(attempt: int, retry_after: float | None, *, base: float, cap: float, jitter: float) -> float:
    """Seconds to wait after failed try ``attempt``: ``retry_after`` (the server's) when given, else
    ``base * 2**(attempt-1) + jitter``; never below 0 nor above ``cap``."""
    if retry_after is not None:
        return max(0.0, min(float(retry_after), cap))
    return max(0.0, min(base * (2 ** max(0, attempt - 1)) + jitter, cap))


def run(plan: Plan, hooks: Any, send: Callable[[Send], Any], sleep: Callable[[float], object]) -> ChatResult:
    """Carry out ``plan``'s steps in this thread; return its result (or raise its error)."""
    reply: Any = None
    failure: Exception | None = None
    while True:
        try:
            step = plan.send(reply) if failure is None else plan.throw(failure)
        except StopIteration as done:
            result: ChatResult = done.value
            return result
        reply, failure = None, None
        try:
            if isinstance(step, Send):
                reply = send(step)
            elif isinstance(step, Wait):
                sleep(step.seconds)
            else:
                fire(hooks, step)
        except Exception as exc:  # the plan decides: it catches what it knows, the rest goes on up
            failure = exc


async def arun(
    plan: Plan,
    hooks: Any,
    send: Callable[[Send], Awaitable[Any]],
    sleep: Callable[[float], Awaitable[object]],
) -> ChatResult:
    """As :func:`run`, awaiting the sends, the waits and the hooks on the running event loop."""
    reply: Any = None
    failure: Exception | None = None
    while True:
        try:
            step = plan.send(reply) if failure is None else plan.throw(failure)
        except StopIteration as done:
            result: ChatResult = done.value
            return result
        reply, failure = None, None
        try:
            if isinstance(step, Send):
                reply = await send(step)
            elif isinstance(step, Wait):
                await sleep(step.seconds)
            else:
                await afire(hooks, step)
        except Exception as exc:  # as in run()
            failure = exc
