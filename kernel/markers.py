"""The pluggy markers of the ``hermes`` project.

Pluggy-native extensions decorate their functions with :data:`hookimpl`; the
kernel's own contract in :mod:`kernel.hookspecs` uses :data:`hookspec`.
"""

from __future__ import annotations

import pluggy

PROJECT_NAME = "hermes"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
