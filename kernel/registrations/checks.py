"""Reading what a plugin hands over: names, labels and members of objects the kernel does not control."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .kinds import MAX_NAME, MAX_TEXT

if TYPE_CHECKING:
    from ..core.kernel import Kernel
    from ..core.records import _Record

_MISSING = object()


def _attr(obj: Any, name: str, what: str, default: Any = _MISSING) -> Any:
    """``obj.name``, or ``default`` when it has none; any other failure of the lookup is ``ValueError``."""
    try:
        return getattr(obj, name)
    except AttributeError:
        return default
    except Exception as exc:
        raise ValueError(f"{what}: reading its '{name}' raised {type(exc).__name__}") from exc


def _is_str(value: Any) -> bool:
    # Not isinstance(): that may read a hostile object's __class__.
    return issubclass(type(value), str)


def _truthy(value: Any) -> bool:
    try:
        return bool(value)
    except Exception:
        return False


def _copied(value: Any) -> Any:
    try:
        return copy.deepcopy(value)
    except Exception:
        return copy.copy(value)


def _shown(text: str, limit: int = 60) -> str:
    """A short rendering of a name for messages."""
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def _name(value: Any, what: str, limit: int = MAX_NAME, *, strip: bool = True) -> str:
    """A plain ``str`` copy of a name: non-empty, printable, at most ``limit`` characters."""
    if not _is_str(value):
        raise ValueError(f"{what} must be a string, not {type(value).__name__}")
    text = str.__str__(value)
    if strip:
        text = text.strip()
    if not text.strip():
        raise ValueError(f"{what} is empty")
    if len(text) > limit:
        raise ValueError(f"{what} is {len(text)} characters long (at most {limit})")
    if not text.isprintable():
        raise ValueError(f"{what} {_shown(text)} holds control characters")
    return text


def _text(value: Any, what: str, default: str = "") -> str:
    """A label or description: a string (``None`` is ``default``) without NUL or other control bytes."""
    if value is None:
        return default
    if not _is_str(value):
        raise ValueError(f"{what} must be a string, not {type(value).__name__}")
    text = str.__str__(value)
    if len(text) > MAX_TEXT:
        raise ValueError(f"{what} is {len(text)} characters long (at most {MAX_TEXT})")
    if not all(c.isprintable() or c in "\n\t" for c in text):
        raise ValueError(f"{what} holds control characters")
    return text


def _flag(obj: Any, name: str, what: str, default: bool) -> bool:
    value = _attr(obj, name, what, default)
    return value if type(value) is bool else default


def _missing_methods(obj: Any, names: Iterable[str], what: str) -> list[str]:
    missing = [n for n in names if not callable(_attr(obj, n, what, None))]
    left = getattr(type(obj), "__abstractmethods__", None)
    try:
        missing += sorted(str(n) for n in left or () if n not in missing)
    except Exception:
        missing.append("(unreadable __abstractmethods__)")
    return missing


def _record_names(record: _Record) -> dict[str, list[str]]:
    """The plugin record's ``registrations`` (kind -> names), kept as ``record.tools`` keeps tool names."""
    return record.registrations


def _refuse(kernel: Kernel, record: _Record, kind: str, reason: str) -> None:
    """A registration Hermes ignores: a warning on the plugin and in the log; the plugin loads on."""
    noun = kind[:-1].replace("_", " ")
    record.warnings.append(f"{noun} ignored: {reason}")
    kernel.log.warning("registration_ignored", plugin=record.name, kind=kind, reason=reason)
