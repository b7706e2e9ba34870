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

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..kernel import Kernel

# Load order: the event hooks, the shell hooks, speech, then MCP (which may take
# a while to connect, so everything else is in place first).
MODULES = ("event_hooks", "shell_hooks", "speech", "mcp")


class SurfaceError(Exception):
    """A surface that cannot be set up; the message is shown as is (it names the file and the fix)."""


def load_all(kernel: Kernel) -> None:
    """Load every configured surface; a broken one is reported, never raised."""
    for name in MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        try:
            module.load(kernel)
        except Exception as exc:  # a bug in a surface loader must not stop the kernel
            error = f"{type(exc).__name__}: {exc}"
            kernel._config_problem(f"{name.replace('_', ' ')}: could not be loaded: {error}")
