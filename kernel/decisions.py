"""Moved to :mod:`kernel.tools.decisions`; this import path stays an alias of that module."""

import sys

from .tools import decisions as _module

sys.modules[__name__] = _module
