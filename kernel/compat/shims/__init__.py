"""What the Hermes compatibility modules contain (served by :mod:`kernel.compat.finder`).

Each module here is the content of one module name of Hermes Agent
(``agent_memory_provider`` is ``agent.memory_provider``, and so on; the
finder's ``SHIMS`` table maps them).  Its ``__all__`` lists exactly what the
served module offers.  The classes are the kernel's own; the module-level
functions answer for the kernel :func:`kernel.compat.host.current_kernel`
names (the plugin's own; never a guess among several live kernels).

This package also holds the helpers those modules share.
"""

from __future__ import annotations

import re
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from ...base.config import resolve_home
from .. import host

if TYPE_CHECKING:
    from ...core.context import PluginContext
    from ...core.kernel import Kernel

# The surface record that owns what Hermes-style module-level calls register outside a plugin's load.
COMPAT_RECORD = "compat:hermes"

_contexts: weakref.WeakKeyDictionary[Kernel, PluginContext] = weakref.WeakKeyDictionary()
_contexts_lock = threading.Lock()
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def current_kernel() -> Kernel | None:
    """The kernel Hermes-style calls answer to right now, if any."""
    return host.current_kernel()


def require_kernel(what: str) -> Kernel:
    """The current kernel; ``RuntimeError`` naming ``what`` when no kernel has the shims on, or
    several do and the call cannot be told apart (see :func:`kernel.compat.host.unknown_kernel`)."""
    kernel = host.current_kernel()
    if kernel is None:
        raise host.unknown_kernel(what)
    return kernel


def hermes_home() -> Path:
    """The current kernel's home, else ``$HERMES_HOME``, else ``~/.hermes``."""
    kernel = host.current_kernel()
    return kernel.home if kernel is not None else resolve_home(None)


def home_to_write(what: str) -> tuple[Path, Kernel | None]:
    """Where a write of ``what`` goes, and the kernel it is for: the current kernel's home; with
    no kernel live, ``$HERMES_HOME`` or ``~/.hermes``; with several and none known, ``RuntimeError``."""
    kernel = host.current_kernel()
    if kernel is not None:
        return kernel.home, kernel
    if host.attached():
        raise host.unknown_kernel(what)
    return resolve_home(None), None


def registering_context(what: str) -> PluginContext:
    """Where a Hermes-style module-level registration goes.

    While a plugin is being imported or registered, that plugin's own
    context (so what it registers is attributed to it and rolled back with
    it); otherwise the context of the kernel's ``compat:hermes`` record,
    created on first use and listed with the plugins.
    """
    ctx = host.current_context()
    if ctx is not None:
        return ctx
    kernel = require_kernel(what)
    if kernel.host.closed:
        raise RuntimeError(f"{what}: the kernel has been shut down")
    with _contexts_lock:
        ctx = _contexts.get(kernel)
        if ctx is None:
            made: list[PluginContext] = []

            def setup(new_ctx: PluginContext) -> None:
                made.append(new_ctx)

            kernel.host.add_surface(
                COMPAT_RECORD,
                "compat",
                setup,
                source="runtime",
                description="what Hermes-style module-level calls registered outside a plugin's load",
            )
            ctx = made[0]
            _contexts[kernel] = ctx
    return ctx


def safe_prefix(prefix: object, default: str) -> str:
    """A file name prefix that cannot leave its directory (``../x`` becomes ``x``)."""
    text = _UNSAFE.sub("_", str(prefix or "")).strip("._")
    return text[:80] or default
