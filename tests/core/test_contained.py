"""``contained(...)``: a plugin's failure is kept and logged; Ctrl-C and cancellation go through."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import agent_log

from kernel import Kernel
from kernel.core.api import contained
from kernel.core.callbacks import Contained

SECRET = "hunter2-not-for-logs"


def failure_lines(home: Path, event: str) -> list[str]:
    return [line for line in agent_log(home).splitlines() if event in line]


def test_an_exception_is_contained_and_logged_with_the_fields(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    k = make_kernel()
    after_raise = []
    with contained(k.log, "widget_failed", plugin="plugin-widgets", tool="spin") as outcome:
        raise ValueError(f"the widget broke api_key={SECRET}")
        after_raise.append(True)  # pragma: no cover - never reached
    assert after_raise == []
    assert outcome.failed
    assert type(outcome.exc) is ValueError
    assert outcome.error.startswith("ValueError: the widget broke")
    assert SECRET not in outcome.error
    lines = failure_lines(home, "widget_failed")
    assert len(lines) == 1, agent_log(home)
    assert "plugin-widgets" in lines[0] and "spin" in lines[0] and "the widget broke" in lines[0]
    assert SECRET not in agent_log(home)


def test_a_block_that_does_not_fail_logs_nothing(make_kernel: Callable[..., Kernel], home: Path) -> None:
    k = make_kernel()
    with contained(k.log, "widget_failed", plugin="plugin-widgets") as outcome:
        value = 42
    assert value == 42
    assert not outcome.failed and outcome.exc is None and outcome.error == ""
    assert failure_lines(home, "widget_failed") == []


@pytest.mark.parametrize("raised", [SystemExit(3), GeneratorExit(), KeyboardInterrupt()])
def test_base_exceptions_that_do_not_propagate_are_contained(
    make_kernel: Callable[..., Kernel], home: Path, raised: BaseException
) -> None:
    """A plugin's ``SystemExit`` or ``GeneratorExit`` anywhere, and a Ctrl-C outside the main thread."""
    k = make_kernel()
    outcomes: list[Contained] = []

    def block() -> None:
        with contained(k.log, "widget_failed", plugin="plugin-widgets") as outcome:
            raise raised
        outcomes.append(outcome)

    if isinstance(raised, KeyboardInterrupt):
        worker = threading.Thread(target=block)
        worker.start()
        worker.join()
    else:
        block()
    assert len(outcomes) == 1 and outcomes[0].exc is raised
    lines = failure_lines(home, "widget_failed")
    assert len(lines) == 1 and type(raised).__name__ in lines[0], agent_log(home)


def test_keyboard_interrupt_in_the_main_thread_propagates(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    k = make_kernel()
    with pytest.raises(KeyboardInterrupt), contained(k.log, "widget_failed", plugin="plugin-widgets"):
        raise KeyboardInterrupt
    assert failure_lines(home, "widget_failed") == []


def test_cancelling_the_task_propagates_and_a_stray_cancelled_error_is_contained(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    k = make_kernel()
    outcomes: list[Contained] = []

    async def waits(started: asyncio.Event) -> None:
        with contained(k.log, "widget_failed", plugin="plugin-waits"):
            started.set()
            await asyncio.Event().wait()  # until cancelled
        outcomes.append(Contained(None, "", {}))  # pragma: no cover - never reached

    async def stray() -> Contained:
        with contained(k.log, "widget_failed", plugin="plugin-stray") as outcome:
            raise asyncio.CancelledError  # raised by the plugin, nobody cancels this task
        return outcome

    async def main() -> tuple[bool, Contained]:
        started = asyncio.Event()
        task = asyncio.create_task(waits(started))
        await started.wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return task.cancelled(), await stray()

    cancelled, outcome = asyncio.run(main())
    assert cancelled and outcomes == []
    assert type(outcome.exc) is asyncio.CancelledError
    lines = failure_lines(home, "widget_failed")
    assert len(lines) == 1 and "plugin-stray" in lines[0], agent_log(home)


def test_without_a_logger_nothing_is_logged_and_the_failure_is_kept(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    make_kernel()

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text for you")

    with contained() as outcome:
        raise Unprintable
    assert type(outcome.exc) is Unprintable
    assert outcome.error.startswith("Unprintable")
    assert "widget_failed" not in agent_log(home)
