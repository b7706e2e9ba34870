"""YAML and data from outside the kernel's control, read and written within bounds.

Every YAML file the kernel reads (``plugin.yaml``, ``config.yaml``, ``HOOK.yaml``)
goes through :func:`read_yaml`: a size cap checked before the file is read, the C
safe loader, and — when the text has an alias at all — a pass over the parser's
events that refuses aliases which would expand past :data:`MAX_NODES` values (a
"billion laughs") or which point into a collection that contains them (a
self-reference).  :func:`data_problem` bounds Python data the same way before the
kernel stores it (``ctx.set_config``), so that what one plugin writes can never
make the file unreadable for everyone.  :func:`load_json` does the same for JSON
that peers send (model responses, tool-call arguments, structured replies).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml

# Values a document may expand to once its aliases are resolved.
MAX_NODES = 100_000
# Sizes of the files the kernel reads, in bytes.
MAX_MANIFEST_BYTES = 1024 * 1024
MAX_CONFIG_BYTES = 4 * 1024 * 1024
MAX_HOOK_BYTES = 256 * 1024
MAX_DOTENV_BYTES = 1024 * 1024
# What a plugin may store through ctx.set_config.
MAX_STORED_VALUES = 10_000
MAX_STORED_DEPTH = 50
# JSON from peers (response bodies, tool-call arguments, structured replies).
MAX_JSON_DEPTH = 100
MAX_JSON_VALUES = 1_000_000


def _yaml() -> Any:
    """PyYAML, imported on first use: a start-up that finds every file in its caches never needs it."""
    import yaml

    return yaml


def _loader() -> Any:
    # The C loader is the same safe loader as yaml.safe_load, about ten times faster.
    yaml = _yaml()
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_refused: type | None = None


def _refused_class() -> type:
    """``YamlRefused``: a ``yaml.YAMLError``, so made once PyYAML is imported."""
    global _refused
    if _refused is None:

        class YamlRefused(_yaml().YAMLError):  # type: ignore[misc]  # PyYAML's class, known once imported
            """A YAML document refused for what its aliases do (it parses, but is not read)."""

            def __init__(self, problem: str, mark: Any = None) -> None:
                super().__init__(problem)
                self.problem = problem
                self.problem_mark = mark

            def __str__(self) -> str:
                return self.problem

        YamlRefused.__module__ = __name__
        _refused = YamlRefused
    return _refused


def __getattr__(name: str) -> Any:
    if name == "YamlRefused":
        return _refused_class()
    if name == "SAFE_LOADER":
        return _loader()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class FileTooLarge(OSError):
    """A file over the size the kernel reads for its kind."""


def read_bounded(path: Path, max_bytes: int, what: str) -> str:
    """``path``'s text (BOM dropped), or :class:`FileTooLarge` when it is over ``max_bytes``."""
    size = path.stat().st_size
    if size > max_bytes:
        raise FileTooLarge(
            f"{size:,} bytes; {what} files are read up to {max_bytes:,} bytes (make it smaller)"
        )
    with path.open("rb") as stream:
        data = stream.read(max_bytes + 1)  # the file may grow between stat and read
    if len(data) > max_bytes:
        raise FileTooLarge(f"more than {max_bytes:,} bytes; {what} files are read up to that size")
    return data.decode("utf-8-sig")


def read_yaml(path: Path, max_bytes: int, what: str) -> Any:
    """Read and load the YAML file ``path`` within bounds (see the module docstring)."""
    return load_yaml(read_bounded(path, max_bytes, what))


def load_yaml(text: str) -> Any:
    """Load YAML text with the safe loader, refusing alias bombs and self-references.

    What the C loader refuses is read again by PyYAML's own safe loader, so a file reads as
    ``yaml.safe_load`` reads it (libyaml refuses some valid escapes, e.g. ``"\\ud83d\\ude00"``).
    """
    yaml = _yaml()
    try:
        if "*" in text:
            _check_aliases(text)
        return yaml.load(text, Loader=_loader())
    except yaml.YAMLError as exc:
        # libyaml's nesting limit (1000 levels) is beyond what PyYAML's recursive reader can follow.
        if isinstance(exc, _refused_class()) or _loader() is yaml.SafeLoader or "nesting" in str(exc):
            raise
        refused = exc
    try:
        if "*" in text:
            _check_aliases(text, yaml.SafeLoader)
        return yaml.load(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise refused from None


def _check_aliases(text: str, loader: Any = None) -> None:
    # The size each anchored node expands to, counted over the parser's events
    # (no object is built): an alias adds its anchor's size where it stands.
    sizes: dict[str, int] = {}
    stack: list[list[Any]] = [[None, 0]]  # [anchor, size so far] of each open collection
    yaml = _yaml()
    for event in yaml.parse(text, Loader=loader or _loader()):
        if isinstance(event, yaml.CollectionStartEvent):
            stack.append([event.anchor, 1])
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, size = stack.pop()
            if anchor is not None:
                sizes[anchor] = size
        elif isinstance(event, yaml.ScalarEvent):
            size = 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            if any(entry[0] == event.anchor for entry in stack):
                raise _refused_class()(
                    f"the alias *{event.anchor} points into the collection that contains it (a "
                    "self-reference); write the value out instead",
                    event.start_mark,
                )
            size = sizes.get(event.anchor, 1)
        else:
            continue
        stack[-1][1] += size
        if stack[-1][1] > MAX_NODES or size > MAX_NODES:
            raise _refused_class()(
                f"its aliases expand to more than {MAX_NODES:,} values (an alias bomb); write the "
                "values out instead",
                event.start_mark,
            )


def data_problem(
    value: Any,
    max_values: int = MAX_STORED_VALUES,
    max_depth: int = MAX_STORED_DEPTH,
    *,
    shared_ok: bool = False,
) -> str | None:
    """Why ``value`` is not plain, bounded data (``None`` when it is); never recurses.

    The answer completes "it holds ...": more than ``max_values`` values,
    lists or mappings nested deeper than ``max_depth``, or (unless
    ``shared_ok``) a list or mapping that appears twice — shared, or
    containing itself: written as YAML it would become an alias, and aliases
    are what bombs are made of.
    """
    seen: set[int] = set()
    stack = [(value, 1)]
    count = 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > max_values:
            return f"more than {max_values:,} values"
        if isinstance(item, dict | list | tuple):
            if not shared_ok and not isinstance(item, tuple):  # a tuple cannot contain itself via YAML
                if id(item) in seen:
                    return "a list or mapping that appears twice (shared, or containing itself)"
                seen.add(id(item))
            if depth > max_depth:
                return f"lists or mappings nested deeper than {max_depth} levels"
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return None


class DataRefused(ValueError):
    """Data refused for its shape (too deep, too many values); the message says which bound."""


def load_json(
    text: str | bytes,
    what: str = "the JSON",
    max_depth: int = MAX_JSON_DEPTH,
    max_values: int = MAX_JSON_VALUES,
) -> Any:
    """``json.loads(text)`` within bounds: ``json.JSONDecodeError`` for invalid JSON;
    :class:`DataRefused` (naming ``what``) for lists or mappings nested deeper than
    ``max_depth``, or more than ``max_values`` values."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise DataRefused(f"{what}: lists or mappings nested deeper than {max_depth} levels") from None
    if isinstance(value, dict | list):
        problem = data_problem(value, max_values, max_depth, shared_ok=True)
        if problem is not None:
            raise DataRefused(f"{what}: {problem}")
    return value


def utf8_size(text: str | bytes) -> int:
    """The size of ``text`` in UTF-8 bytes (``bytes`` as they are); a lone surrogate counts the 3
    bytes it would take instead of raising."""
    return len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))


# A \uXXXX escape stands for: a surrogate pair, 4 bytes; DEL, 1; U+0080..U+07FF, 2; U+0800..U+FFFF, 3.
_DEL_ESCAPE = re.compile(r"\\u007[fF]")
_PAIR_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_TWO_BYTE_ESCAPE = re.compile(r"\\u0(?:0[89a-fA-F]|[1-7][0-9a-fA-F])[0-9a-fA-F]")
_THREE_BYTE_ESCAPE = re.compile(r"\\u(?:0[89a-fA-F]|[1-9a-fA-F][0-9a-fA-F])[0-9a-fA-F]{2}")


def json_text_size(text: str | bytes) -> int:
    """The size in UTF-8 bytes of the JSON ``text`` with its non-ASCII characters written as
    themselves: a ``\\uXXXX`` escape counts the bytes of the character it stands for (3 for a
    Chinese character, not 6), whether the text was written escaped or not.  Counted without parsing."""
    size = utf8_size(text)
    if isinstance(text, bytes):
        text = text.decode("latin-1")  # the escapes are ASCII: one character per byte keeps them
    if "\\u" not in text:
        return size
    text = text.replace("\\\\", "")  # an escaped backslash: what follows it is not an escape
    text, pairs = _PAIR_ESCAPE.subn("", text)
    text, two = _TWO_BYTE_ESCAPE.subn("", text)
    text, three = _THREE_BYTE_ESCAPE.subn("", text)
    return size - 8 * pairs - 4 * two - 3 * three - 5 * _DEL_ESCAPE.subn("", text)[1]


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A one-line description of a YAML error with its line and column."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
    if mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return problem
