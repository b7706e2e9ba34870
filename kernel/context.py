"""Moved to :mod:`kernel.core.context`; this import path stays an alias of that module."""

import sys

from .core import context as _module

sys.modules[__name__] = _module
