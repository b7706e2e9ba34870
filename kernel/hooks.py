"""Moved to :mod:`kernel.core.hooks`; this import path stays an alias of that module."""

import sys

from .core import hooks as _module

sys.modules[__name__] = _module
