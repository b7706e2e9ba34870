"""The pluggy markers of the ``hermes`` project.

Pluggy-native extensions decorate their functions with :data:`hookimpl`; the
kernel's own contract in :mod:`kernel.hookspecs` uses :data:`hookspec`.
"""

from __future__ import annotations

import pluggy

#: The version of hermes-kernel (kept here, at the bottom of the import graph, for every module to read).
__version__ = "0.1.0"

PROJECT_NAME = "hermes"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
