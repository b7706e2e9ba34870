"""Moved to :mod:`kernel.core.kernel`; this import path stays an alias of that module."""

import sys

from .core import kernel as _module

sys.modules[__name__] = _module
