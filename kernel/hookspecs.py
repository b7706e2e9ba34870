"""Moved to :mod:`kernel.core.hookspecs`; this import path stays an alias of that module."""

import sys

from .core import hookspecs as _module

sys.modules[__name__] = _module
