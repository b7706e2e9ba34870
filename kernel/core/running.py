"""Which kernel is running plugin code in this thread or task (a context variable).

A kernel marks itself while it runs a plugin's code: a hook call, a tool
call, an agent turn.  Work that copies the context (``asyncio`` tasks and
callbacks, ``asyncio.to_thread``, the kernel's own threads) keeps the mark,
so a Hermes-style module-level call made there answers for that kernel
(:mod:`kernel.compat.host`).  A plain thread a plugin starts does not.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

RUNNING: ContextVar[Any] = ContextVar("hermes_kernel_running", default=None)


@contextlib.contextmanager
def running(kernel: object) -> Iterator[None]:
    """Mark ``kernel`` as the one running plugin code, for the block (and what copies its context)."""
    token = RUNNING.set(kernel)
    try:
        yield
    finally:
        RUNNING.reset(token)
