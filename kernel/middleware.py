"""Moved to :mod:`kernel.tools.middleware`; this import path stays an alias of that module."""

import sys

from .tools import middleware as _module

sys.modules[__name__] = _module
