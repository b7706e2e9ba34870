"""Surfaces declared without Python plugins: in ``config.yaml`` or in ``<home>/hooks/``.

Each package or module here is a service (see :mod:`kernel.core.services`)
that :meth:`Kernel.load` attaches when its section, variable or folder is
present, and whose ``service_load_finished`` calls its ``load(kernel)`` after
the plugins (through :func:`load_surface`).  What a surface adds (hook
callbacks, event receivers, tools) belongs to a *surface record*: a
pseudo-plugin made with ``Kernel._add_surface``, named ``<kind>:<name>``
(``mcp:files``, ``hooks:long-task-alert``, ``config:shell-hooks``), so that it
is listed, attributed, isolated and removed exactly like a plugin.  Nothing
here is imported unless its section is configured.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..core.records import SurfaceError

if TYPE_CHECKING:
    from ..core.kernel import Kernel

__all__ = ["SurfaceError", "end_process_group", "load_surface"]


def load_surface(kernel: Kernel, name: str, load: Callable[[Kernel], None]) -> None:
    """Run a surface's ``load(kernel)``; a broken one is reported as a config problem, never raised."""
    try:
        load(kernel)
    except Exception as exc:  # a bug in a surface loader must not stop the kernel
        error = f"{type(exc).__name__}: {exc}"
        kernel._config_problem(f"{name.replace('_', ' ')}: could not be loaded: {error}")


def end_process_group(proc: subprocess.Popen[bytes], grace: float = 0.0) -> None:
    """Stop a command started with ``start_new_session=True`` and everything it started.

    With ``grace``, the group gets SIGTERM and that many seconds to finish;
    then SIGKILL for whatever is left (children that ignored SIGTERM or
    outlived their parent).  Waits for the command itself.
    """
    if grace > 0:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
