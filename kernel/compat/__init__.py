"""Compatibility with plugins written for Hermes Agent (see docs/compatibility.md).

``install(kernel)`` is called by :meth:`Kernel.load` unless ``compat.hermes``
is false; it makes the kernel the host that Hermes-style module-level calls
answer to (:mod:`kernel.compat.host`) and puts the import hook of
:mod:`kernel.compat.finder` at the end of ``sys.meta_path``, so that
``from agent.memory_provider import MemoryProvider`` and the like resolve to
the kernel's own classes — only for names no installed distribution
provides.  ``uninstall(kernel)`` undoes it; the hook goes away with the last
kernel that wanted it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import host

if TYPE_CHECKING:
    from ..kernel import Kernel


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
