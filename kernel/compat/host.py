"""Which kernel, and which plugin, Hermes-style code is running for.

Hermes plugins reach their host through module-level functions
(``get_plugin_manager()``, ``tools.registry.registry``,
``hermes_cli.config.load_config()``) instead of the ``ctx`` they are given.
The kernel answers those calls for the plugin that is being loaded (a context
variable set around its import and ``register()``); at run time for the
kernel whose plugin module made the call, else the kernel running plugin code
in this context (a hook call, tool call or turn, carried into tasks and
threads that copy the context), else the only live kernel.  With several live
kernels and none of these, the kernel is unknown: lookups read the process's
own environment only, registrations and writes are refused
(:func:`unknown_kernel`).  Never another kernel's home or ``.env``.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING

from ..core.api import kernel_of, running_kernel
from ..core.context import current_context, loading

if TYPE_CHECKING:
    import types

    from ..core.kernel import Kernel

__all__ = [
    "attach",
    "attached",
    "current_context",
    "current_kernel",
    "detach",
    "loading",
    "unknown_kernel",
]

_kernels: list[Kernel] = []
_lock = threading.Lock()
# How far up the call stack a module-level call looks for the plugin module that made it.
_MAX_FRAMES = 64


def current_kernel() -> Kernel | None:
    """The kernel a Hermes-style module-level call answers to.

    In order: the kernel of the plugin being loaded; the kernel whose plugin
    module made the call (found on the call stack by the kernel's module
    namespace, so two kernels' plugins never answer from each other); the
    kernel running plugin code in this context (:mod:`kernel.core.running`);
    else the only live kernel with the shims on.  ``None`` when no kernel has
    them on, or several do and none of these tells which.
    """
    ctx = current_context()
    if ctx is not None:
        return kernel_of(ctx)
    with _lock:
        kernels = list(_kernels)
    if not kernels:
        return None
    by_namespace = {k.host.namespace: k for k in kernels}
    frame: types.FrameType | None = sys._getframe(1)
    for _ in range(_MAX_FRAMES):
        if frame is None:
            break
        name = frame.f_globals.get("__name__")
        if isinstance(name, str):
            kernel = by_namespace.get(name.partition(".")[0])
            if kernel is not None:
                return kernel
        frame = frame.f_back
    kernel = running_kernel()
    if kernel is not None:
        # A kernel with the shims off runs this: never answer for another one.
        return kernel if kernel in kernels else None
    return kernels[0] if len(kernels) == 1 else None


def unknown_kernel(what: str) -> RuntimeError:
    """The error for ``what`` when no live kernel, or no single one, can be told to answer it."""
    with _lock:
        live = len(_kernels)
    if live == 0:
        return RuntimeError(f"{what}: no hermes-kernel with the Hermes compatibility layer is running")
    return RuntimeError(
        f"{what}: {live} hermes-kernels run in this process and this call comes from none of their "
        "plugins (a thread or callback that lost the caller's context): make the call from the plugin's "
        "own code (register, a hook or a tool), carry the context into the thread (take "
        "contextvars.copy_context() in the hook or tool, call its .run(...) in the thread), or use the "
        "kernel object's own API"
    )


def attach(kernel: Kernel) -> None:
    """Count ``kernel`` as a host of Hermes-style plugins (called by its ``load()``)."""
    with _lock:
        if kernel not in _kernels:
            _kernels.append(kernel)


def detach(kernel: Kernel) -> None:
    """Forget ``kernel`` (called by its ``shutdown()``)."""
    with _lock:
        if kernel in _kernels:
            _kernels.remove(kernel)


def attached() -> int:
    """How many live kernels have the shims on."""
    with _lock:
        return len(_kernels)
