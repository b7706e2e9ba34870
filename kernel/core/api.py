"""The public host API: what a service (and the Hermes shims) may use of the kernel it is attached to.

A service reaches the core only through :class:`ServiceHost` (``k.host``), the
four functions on a plugin's context below, and :func:`contained` for running
plugin code it must survive; it keeps its own state in its own objects, never as
attributes of the kernel.  Anything else of the core is
private to it, and ``tests/core/test_architecture.py`` fails on a reach into it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from .callbacks import Contained, contained
from .hooks import NORMAL, Callback
from .running import RUNNING
from .service_host import PluginRecord, ServiceHost

if TYPE_CHECKING:
    from .context import PluginContext
    from .kernel import Kernel

__all__ = [
    "Contained",
    "PluginRecord",
    "ServiceHost",
    "add_hook",
    "contained",
    "kernel_of",
    "on_rollback",
    "record_of",
    "running_kernel",
]


# -- a plugin's context, as the service that contributes ctx members sees it ---------


def kernel_of(ctx: PluginContext) -> Kernel:
    """The kernel ``ctx``'s plugin registers with."""
    # The context sees its kernel through a Protocol (it sits below the kernel); it is this one.
    return cast("Kernel", ctx._kernel)


def record_of(ctx: PluginContext) -> PluginRecord:
    """The record of ``ctx``'s plugin."""
    return ctx._record


def on_rollback(ctx: PluginContext, undo: Callable[[], None]) -> None:
    """Run ``undo`` if the plugin's ``register(ctx)`` fails or overruns (the rollback of its ledger)."""
    ctx._undo.append(undo)


def add_hook(ctx: PluginContext, hook: str, callback: Callable[..., Any], tier: int = NORMAL) -> Callback:
    """Register ``callback`` on ``hook`` for ``ctx``'s plugin at ``tier`` (``CONFIGURED`` runs first),
    without the unknown-hook check of ``ctx.register_hook``."""
    return ctx._add_hook(hook, callback, tier)


def running_kernel() -> Kernel | None:
    """The kernel running plugin code in this thread or task, if any (see :mod:`kernel.core.running`)."""
    kernel: Kernel | None = RUNNING.get()
    return kernel
