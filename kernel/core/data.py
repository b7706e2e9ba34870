"""Copying plain data: what hooks are given of a conversation or a request (JSON-shaped values)."""

from __future__ import annotations

import copy
from typing import Any, TypeVar

T = TypeVar("T")

_ATOMIC = frozenset({str, int, float, bool, type(None), bytes})


def copy_data(value: T) -> T:
    """A deep copy of ``value``, as :func:`copy.deepcopy` makes it, about three times faster for the
    dicts, lists and scalars a conversation is made of. Anything else inside (a tuple, an object) is
    copied by :func:`copy.deepcopy`; a structure holding itself, or nested deeper than the
    interpreter's recursion limit allows, is left to :func:`copy.deepcopy` whole."""
    try:
        return _copy(value)
    except RecursionError:
        return copy.deepcopy(value)


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _copy(item) for key, item in value.items()}
    if kind is list:
        return [_copy(item) for item in value]
    if kind in _ATOMIC:
        return value
    return copy.deepcopy(value)
