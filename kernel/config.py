"""Moved to :mod:`kernel.core.config`; this import path stays an alias of that module."""

import sys

from .core import config as _module

sys.modules[__name__] = _module
