"""Surfaces declared without Python plugins: in ``config.yaml`` or in ``<home>/hooks/``.

Each package or module here is a service (see :mod:`kernel.core.services`)
that :meth:`Kernel.load` attaches when its section, variable or folder is
present, and whose ``service_load_finished`` calls its ``load(kernel)`` after
the plugins (through :func:`load_surface`).  What a surface adds (hook
callbacks, event receivers, tools) belongs to a *surface record*: a
pseudo-plugin made with ``k.host.add_surface``, named ``<kind>:<name>``
(``mcp:files``, ``hooks:long-task-alert``, ``config:shell-hooks``), so that it
is listed, attributed, isolated and removed exactly like a plugin.  Nothing
here is imported unless its section is configured.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..core.records import SurfaceError

if TYPE_CHECKING:
    from ..core.kernel import Kernel

__all__ = ["SurfaceError", "end_process_group", "group_alive", "load_surface"]


def load_surface(kernel: Kernel, name: str, load: Callable[[Kernel], None]) -> None:
    """Run a surface's ``load(kernel)``; a broken one is reported as a config problem, never raised."""
    try:
        load(kernel)
    except Exception as exc:  # a bug in a surface loader must not stop the kernel
        error = f"{type(exc).__name__}: {exc}"
        kernel.host.config_problem(f"{name.replace('_', ' ')}: could not be loaded: {error}")


def end_process_group(proc: subprocess.Popen[bytes], grace: float = 0.0) -> None:
    """Stop a command started with ``start_new_session=True`` and everything it started.

    With ``grace``, the group gets SIGTERM and up to that many seconds, in all,
    for the command and the rest of its group to finish (the command may have
    exited already, leaving children behind); then SIGKILL for whatever is left
    (children that ignored SIGTERM).  Waits for the command itself.  A process
    that left the group (``setsid``) is out of reach.
    """
    if grace > 0:
        deadline = time.monotonic() + grace
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        else:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(grace)
            while time.monotonic() < deadline and group_alive(proc.pid):
                time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs.

    Zombies (dead, not yet reaped by their parent) do not count where
    ``/proc`` tells them apart; elsewhere any member counts.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b") ", 1)[-1].split()
        except OSError:
            continue
        # After the command name: state, parent pid, process group.
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] not in (b"Z", b"X"):
            return True
    return False
