"""Moved to :mod:`kernel.core.discovery`; this import path stays an alias of that module."""

import sys

from .core import discovery as _module

sys.modules[__name__] = _module
