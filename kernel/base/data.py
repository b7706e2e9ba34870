"""Plain data: copies of what hooks are given of a conversation or a request (JSON-shaped values), and
frozen records made fast."""

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


def frozen_made(cls: type[T], fields: dict[str, Any]) -> T:
    """An instance of the frozen dataclass ``cls`` with ``fields`` (every one of them, already valid),
    made without the per-field ``object.__setattr__`` of its ``__init__``: ten times faster, for the
    records the kernel makes once per plugin (manifests, plugin infos)."""
    made = object.__new__(cls)
    made.__dict__.update(fields)
    return made


#: The most memory-provider text a context engine is given (longer text keeps its head and tail).
MEMORY_CONTEXT_MAX_CHARS = 6_000
_MEMORY_HEAD_CHARS = 4_000
_MEMORY_TAIL_CHARS = 1_500
_MEMORY_CUT_MARKER = "\n[... memory context shortened ...]\n"


def sanitize_memory_context(memory_context: str) -> str:
    """Memory-provider text made fit to leave for a model: trimmed, secrets and URL credentials
    hidden, and at most about :data:`MEMORY_CONTEXT_MAX_CHARS` (its head and tail kept)."""
    from .redact import redact_text

    text = redact_text(str(memory_context or "").strip())
    if len(text) <= MEMORY_CONTEXT_MAX_CHARS:
        return text
    return text[:_MEMORY_HEAD_CHARS] + _MEMORY_CUT_MARKER + text[-_MEMORY_TAIL_CHARS:]
