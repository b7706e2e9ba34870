"""Moved to :mod:`kernel.core.log`; this import path stays an alias of that module."""

import sys

from .core import log as _module

sys.modules[__name__] = _module
