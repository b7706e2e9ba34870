"""Surfaces declared without Python plugins: in ``config.yaml`` or in ``<home>/hooks/``.

Each module here has ``load(kernel)``, called by :meth:`Kernel.load` after the
plugins.  What a surface adds (hook callbacks, event receivers, tools) belongs
to a *surface record*: a pseudo-plugin made with :meth:`Kernel._add_surface`,
named ``<kind>:<name>`` (``mcp:files``, ``hooks:long-task-alert``,
``config:shell-hooks``), so that it is listed, attributed, isolated and
removed exactly like a plugin.  Nothing here is imported unless its section
is configured.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..kernel import Kernel

# Load order: the event hooks, the shell hooks, speech, then MCP (which may take
# a while to connect, so everything else is in place first).
MODULES = ("event_hooks", "shell_hooks", "speech", "mcp")


class SurfaceError(Exception):
    """A surface that cannot be set up; the message is shown as is (it names the file and the fix)."""


# Whether each surface is declared at all: checked before its module is imported, so that
# a kernel without them pays nothing at start-up.
DECLARED: dict[str, Callable[[Kernel], bool]] = {
    "event_hooks": lambda k: (k.home / "hooks").is_dir(),
    "shell_hooks": lambda k: k.config.get("hooks") is not None,
    "speech": lambda k: (
        k.config.get("tts") is not None
        or k.config.get("stt") is not None
        or bool(k.environ.get("HERMES_LOCAL_STT_COMMAND"))
    ),
    "mcp": lambda k: k.config.get("mcp_servers") is not None,
}


def load_all(kernel: Kernel) -> None:
    """Load every declared surface; a broken one is reported, never raised."""
    for name in MODULES:
        if not DECLARED[name](kernel):
            continue
        module = importlib.import_module(f"{__name__}.{name}")
        try:
            module.load(kernel)
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
