"""Moved to :mod:`kernel.providers.slots`; this import path stays an alias of that module."""

import sys

from .providers import slots as _module

sys.modules[__name__] = _module
