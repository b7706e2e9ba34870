"""Moved to :mod:`kernel.core.manifest`; this import path stays an alias of that module."""

import sys

from .core import manifest as _module

sys.modules[__name__] = _module
