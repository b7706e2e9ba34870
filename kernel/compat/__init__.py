"""Compatibility with plugins written for Hermes Agent (see docs/compatibility.md).

A service (see :mod:`kernel.core.services`) attached at every
:meth:`Kernel.load`: ``install(kernel)`` runs then unless ``compat.hermes``
is false; it makes the kernel the host that Hermes-style module-level calls
answer to (:mod:`kernel.compat.host`) and puts the import hook of
:mod:`kernel.compat.finder` at the end of ``sys.meta_path``, so that
``from agent.memory_provider import MemoryProvider`` and the like resolve to
the kernel's own classes — only for names no installed distribution
provides.  ``uninstall(kernel)`` undoes it; the hook goes away with the last
kernel that wanted it.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from ..base.config import section
from ..core.services import serviceimpl
from . import host

if TYPE_CHECKING:
    from ..core.kernel import Kernel

# The kernels this service installed the shims for (uninstalled at their shutdown).
_serving: weakref.WeakSet[Kernel] = weakref.WeakSet()


def install(kernel: Kernel) -> None:
    """Serve the Hermes import shims for ``kernel``'s plugins."""
    from . import finder

    host.attach(kernel)
    finder.enable()


def uninstall(kernel: Kernel) -> None:
    """Stop serving ``kernel``; remove the import hook when no kernel needs it."""
    host.detach(kernel)
    if host.attached() == 0:
        from . import finder

        finder.disable()


def wanted(kernel: Kernel) -> bool:
    """``compat.hermes`` (default true): serve the Hermes import shims to this kernel's plugins."""
    value = section(kernel.config, "compat", "hermes")
    if value is None:
        return True
    if not isinstance(value, bool):
        kernel.host.config_problem(
            f"config.yaml: 'compat.hermes' must be true or false, not {value!r}; using true"
        )
        return True
    return value


@serviceimpl
def service_load_started(kernel: Kernel) -> None:
    if wanted(kernel):
        install(kernel)
        _serving.add(kernel)


@serviceimpl
def service_shutdown(kernel: Kernel) -> None:
    if kernel in _serving:
        _serving.discard(kernel)
        uninstall(kernel)
