"""Which kernel, and which plugin, Hermes-style code is running for.

Hermes plugins reach their host through module-level functions
(``get_plugin_manager()``, ``tools.registry.registry``,
``hermes_cli.config.load_config()``) instead of the ``ctx`` they are given.
The kernel answers those calls for the plugin that is being loaded (a context
variable set around its import and ``register()``); at run time for the
kernel whose plugin module made the call, else the kernel of the call in
progress, else the most recently loaded kernel that has the shims on.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING

from ..core.context import current_context, loading

if TYPE_CHECKING:
    from ..core.kernel import Kernel

__all__ = ["attach", "attached", "current_context", "current_kernel", "detach", "loading"]

_kernels: list[Kernel] = []
_lock = threading.Lock()
# How far up the call stack a module-level call looks for the plugin module that made it.
_MAX_FRAMES = 64


def current_kernel() -> Kernel | None:
    """The kernel a Hermes-style module-level call answers to.

    In order: the kernel of the plugin being loaded; the kernel whose plugin
    module made the call (found on the call stack by the kernel's module
    namespace, so two kernels' plugins never answer from each other); the
    kernel of the tool call or turn in progress; else the latest live kernel
    with the shims on.
    """
    ctx = current_context()
    if ctx is not None:
        return ctx._kernel
    with _lock:
        kernels = list(_kernels)
    if not kernels:
        return None
    by_namespace = {k._namespace: k for k in kernels}
    frame = sys._getframe(1)
    for _ in range(_MAX_FRAMES):
        if frame is None:
            break
        name = frame.f_globals.get("__name__")
        if isinstance(name, str):
            kernel = by_namespace.get(name.partition(".")[0])
            if kernel is not None:
                return kernel
        frame = frame.f_back
    from ..tools import calling_kernel

    kernel = calling_kernel()
    if kernel is not None and kernel in kernels:
        return kernel
    return kernels[-1]


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
