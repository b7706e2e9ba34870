"""Moved to :mod:`kernel.core.safe_yaml`; this import path stays an alias of that module."""

import sys

from .core import safe_yaml as _module

sys.modules[__name__] = _module
