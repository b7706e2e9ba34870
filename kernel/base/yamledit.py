"""The comment-keeping round trip of ``config.yaml``: an edit changes only the path it writes."""

from __future__ import annotations

import io
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from . import safe_yaml
from .files import atomic_write, file_lock
from .safe_yaml import MAX_CONFIG_BYTES, data_problem, load_yaml, read_bounded, yaml_problem

MISSING = object()
#: The deepest nesting of lists and mappings in a config.yaml that writes edit.
MAX_EDIT_DEPTH = 100
#: The largest config.yaml that writes edit in place (a round trip keeping the comments takes seconds
#: per hundred kilobytes; reading allows more, see safe_yaml.MAX_CONFIG_BYTES).
MAX_EDIT_BYTES = 512 * 1024
_write_lock = threading.Lock()
_T = TypeVar("_T")


def unshared(value: _T) -> _T:
    """A deep copy of ``value`` in which no list or mapping appears twice: what a YAML alias or a
    ``<<`` merge shares becomes a copy at each place (values of other types are kept as they are).
    Never recurses; a list or mapping that contains itself is not allowed."""
    if not isinstance(value, dict | list):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, child in items:
            if isinstance(child, dict | list):
                made: Any = {} if isinstance(child, dict) else []
                stack.append((child, made))
                child = made
            if isinstance(target, dict):
                target[key] = child
            else:
                target.append(child)
    return root


def update_config(
    home: Path,
    change: Callable[[dict[str, Any]], _T],
    *,
    what: str = "the change",
    always_write: bool = False,
) -> _T:
    """Edit ``<home>/config.yaml``: re-read it under the lock, call ``change(data)``, write it back.

    ``change`` edits the top-level mapping in place (plain dicts and lists, any
    path, e.g. ``plugins.disabled``) and its return value is returned.  It gets the
    data with every alias written out (see :func:`unshared`): a change at one path
    changes that path only, never the anchor or another alias of the same node.
    Only what ``change`` changed is changed in the file: comments (commented-out blocks and
    end-of-line ones too), key order, blank lines, quoting, anchors, aliases and
    merge keys stay as they were (a round trip through ruamel.yaml; see
    :func:`edited_yaml`).  The file is written atomically (temporary file, then
    rename; the file's mode is kept; a symbolic link is written through) and only
    when the data changed, unless ``always_write``; a missing file counts as
    empty.  A file that cannot be read within the bounds of reading, is bigger than
    :data:`MAX_EDIT_BYTES` or nested deeper than :data:`MAX_EDIT_DEPTH`, is not valid
    YAML, or whose top level is not a mapping is left untouched and ``ValueError``
    names it (``what`` says what was not written).
    """
    path = home / "config.yaml"
    with _write_lock, file_lock(path):
        text, before = _read_for_edit(path, what)
        # Each place of its own: a change made through an alias (or to an anchor) stays at that place.
        data = unshared(before)
        result = change(data)
        try:
            changed = always_write or not _same(data, before)
            new_text = edited_yaml(text, before, data, where=str(path), what=what) if changed else ""
        except RecursionError:
            raise ValueError(f"{path}: {what} is nested too deeply to be written; not writing") from None
        if changed:
            if len(new_text.encode("utf-8")) > MAX_CONFIG_BYTES:
                raise ValueError(
                    f"{path}: with {what} it would be over {MAX_CONFIG_BYTES:,} bytes, more than the kernel "
                    "reads; not writing"
                )
            atomic_write(path, new_text)
    return result


def _read_for_edit(path: Path, what: str) -> tuple[str | None, dict[str, Any]]:
    """The text of ``path`` (``None`` when there is none) and its data as the kernel reads it."""
    if not os.path.lexists(path):
        return None, {}
    if not path.is_file():
        kind = "a dangling symbolic link" if path.is_symlink() else "not a regular file"
        raise ValueError(f"{path} is {kind}; not writing {what}")
    import yaml

    try:
        text = read_bounded(path, MAX_CONFIG_BYTES, "config.yaml")
        size = len(text.encode("utf-8"))
        if size > MAX_EDIT_BYTES:
            raise ValueError(
                f"{path} is {size:,} bytes; hermes-kernel edits a config.yaml of up to {MAX_EDIT_BYTES:,} "
                f"bytes in place (keeping its comments), so edit it by hand; not writing {what}"
            )
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        if isinstance(exc, safe_yaml.YamlRefused):
            raise ValueError(f"{path} is refused ({exc}); not writing {what}") from None
        raise ValueError(f"{path} is not valid YAML; not writing {what}: {yaml_problem(exc)}") from None
    except RecursionError:
        raise ValueError(f"{path} is nested too deeply to be read; not writing {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} cannot be read; not writing {what}: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the top level is not a mapping; not writing {what}")
    # Deeper than any configuration needs, and than a round trip can follow without running out of stack.
    if "nested" in (data_problem(data, max_values=10**8, max_depth=MAX_EDIT_DEPTH, shared_ok=True) or ""):
        raise ValueError(
            f"{path} has lists or mappings nested deeper than {MAX_EDIT_DEPTH} levels; not writing {what}"
        )
    return text, data


# --------------------------------------------------------------------------- round-trip YAML edits


def edited_yaml(
    text: str | None,
    before: dict[str, Any],
    after: dict[str, Any],
    memo: dict[int, Any] | None = None,
    *,
    where: str = "config.yaml",
    what: str = "the change",
) -> str:
    """``text`` (whose data is ``before``) changed to say ``after``, and nothing else changed.

    The document is loaded with ruamel.yaml's round-trip loader and only the
    entries that differ between ``before`` and ``after`` are touched, in place:
    a changed scalar keeps its quoting, a list gains or loses only the items that
    changed (with their comments), comment lines after a removed or at the end of
    an extended block move with it.  A list or mapping that an alias shares is
    changed in place only when ``after`` still shares it (``memo`` is the
    ``copy.deepcopy`` memo from ``before`` to ``after``); otherwise that one place
    gets its own copy.  The result is read back with the kernel's reader and must
    give ``after`` exactly, else ``ValueError`` (naming ``where``) and nothing is
    written.  Indentation follows what the file uses most.
    """
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    crlf = text is not None and "\r\n" in text
    source = (text or "").replace("\r\n", "\n")
    yaml = YAML(typ="rt")
    yaml.Representer = _representer()
    yaml.preserve_quotes = True
    yaml.width = 1_000_000  # never fold a long line
    mapping, sequence, offset = _guess_indent(source)
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    try:
        doc = yaml.load(source) if source.strip() else None
    except RecursionError:
        raise ValueError(f"{where} is nested too deeply to be edited; not writing {what}") from None
    except Exception as exc:  # ruamel's own errors (a duplicate key, ...) have no common base with PyYAML's
        problem = getattr(exc, "problem", None) or (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise ValueError(
            f"{where} cannot be edited in place: {str(problem)[:200]}{at}; fix it by hand; not writing {what}"
        ) from None
    head = ""
    if doc is None or (isinstance(doc, CommentedMap) and not doc):
        # Empty, only comments, a bare null or `{}`: the comment lines stay at the top.
        head = "".join(
            line
            for line in source.splitlines(keepends=True)
            if line.strip().startswith("#") or not line.strip()
        )
        if head and not head.endswith("\n"):
            head += "\n"
        doc = CommentedMap()
    if not isinstance(doc, CommentedMap):
        raise ValueError(f"{where}: the top level is not a mapping; not writing {what}")
    if source.lstrip().startswith("---"):
        yaml.explicit_start = True
    editor = _Editor(memo or {}, doc)
    if not editor.apply_map(doc, before, after, _doc_header(doc)):
        raise ValueError(
            f"{where}: {what} cannot be written without rewriting the whole file (its top level merges "
            "another mapping with '<<'); edit it by hand; not writing"
        )
    stream = io.StringIO()
    try:
        if doc:
            yaml.dump(doc, stream)
    except Exception as exc:
        raise ValueError(f"{where}: {what} cannot be written as YAML ({exc}); not writing") from None
    if doc:
        out = head + _rejoin_anchor_comments(source, stream.getvalue())
    else:  # every key removed: the comment lines stay
        lines = source.splitlines(keepends=True)
        out = head or "".join(line for line in lines if line.strip().startswith("#") or not line.strip())
    try:
        check = load_yaml(out) if out.strip() else {}
    except Exception:
        check = MISSING
    if not _same(check if check is not None else {}, after):
        raise ValueError(
            f"{where}: {what} cannot be written without changing other settings of the file (its YAML "
            "does not survive a round trip); edit it by hand; not writing"
        )
    return out.replace("\n", "\r\n") if crlf else out


_REPRESENTER: Any = None


def _representer() -> Any:
    """ruamel.yaml's round-trip representer, writing floats as YAML 1.1 (PyYAML, the kernel's reader)
    reads them: ``1.0e+20``, not ``1e+20`` (a string there); a float of the file whose kept format
    would change its value (a ruamel.yaml rounding) is written in full."""
    global _REPRESENTER
    if _REPRESENTER is None:
        import math

        from ruamel.yaml.representer import RoundTripRepresenter
        from ruamel.yaml.scalarfloat import ScalarFloat

        def plain_float(self: Any, data: float) -> Any:
            if data != data:
                text = ".nan"
            elif data in (math.inf, -math.inf):
                text = ".inf" if data > 0 else "-.inf"
            else:
                text = repr(float(data)).lower()
                if "." not in text and "e" in text:
                    text = text.replace("e", ".0e", 1)
            return self.represent_scalar("tag:yaml.org,2002:float", text)

        def kept_float(self: Any, data: ScalarFloat) -> Any:
            node = RoundTripRepresenter.represent_scalar_float(self, data)
            try:
                same = data != data or float(node.value) == float(data)
            except ValueError:  # .inf, .nan as written
                same = True
            return node if same else plain_float(self, float(data))

        class Representer(RoundTripRepresenter):
            pass

        Representer.add_representer(float, plain_float)
        Representer.add_representer(ScalarFloat, kept_float)
        _REPRESENTER = Representer
    return _REPRESENTER


# ``key: &anchor  # comment`` (ruamel.yaml moves such a comment to a line of its own).
_ANCHOR_EOL = re.compile(r"^(?P<head>\s*\S.*&[^\s#,\[\]{}]+)(?P<gap>\s+)(?P<comment>#.*)$")


def _rejoin_anchor_comments(source: str, out: str) -> str:
    """Put back on their line the end-of-line comments that followed an anchor in ``source``."""
    wanted: dict[tuple[str, str], str] = {}
    for line in source.splitlines():
        match = _ANCHOR_EOL.match(line)
        if match:
            wanted[(match["head"], match["comment"].rstrip())] = match["gap"]
    if not wanted:
        return out
    lines = out.split("\n")
    result: list[str] = []
    i = 0
    while i < len(lines):
        if i + 1 < len(lines) and (lines[i], lines[i + 1].strip()) in wanted:
            result.append(lines[i] + wanted[(lines[i], lines[i + 1].strip())] + lines[i + 1].strip())
            i += 2
            continue
        result.append(lines[i])
        i += 1
    return "\n".join(result)


# A line that opens a block: ``key:`` (or ``- key:``) with nothing but a comment after it.
_OPENER = re.compile(
    r"""^(?:-\s+)*(?:'[^']*'|"[^"]*"|[^\s#'"{\[&*!|>%@`-][^#]*?|-[^\s#][^#]*?):\s*(?:#.*)?$"""
)


def _guess_indent(text: str) -> tuple[int, int, int]:
    """``(mapping, sequence, offset)`` for ruamel's ``indent()``: the step the file uses most for
    nested mappings, and where its block lists put the dash (``offset``) and the item (``sequence``)."""
    from collections import Counter

    maps: Counter[int] = Counter()
    dashes: Counter[int] = Counter()
    opener: int | None = None  # the column of the key of the last line that opens a block
    for line in text.splitlines():
        content = line.lstrip(" ")
        if not content or content.startswith("#"):
            continue
        indent = len(line) - len(content)
        if opener is not None:
            if content.startswith("-") and content[1:2] in ("", " ") and indent >= opener:
                dashes[indent - opener] += 1
            elif indent > opener:
                maps[indent - opener] += 1
        opener = None
        if _OPENER.match(content):
            opener = indent + len(content) - len(content.lstrip("- ")) if content.startswith("- ") else indent
    mapping = maps.most_common(1)[0][0] if maps else 2
    offset = dashes.most_common(1)[0][0] if dashes else 2
    mapping = min(max(mapping, 1), 10)
    offset = min(max(offset, 0), 8)
    return mapping, offset + 2, offset


def _doc_header(doc: Any) -> Callable[[str], None]:
    """Where comment lines go that end up before a document's first entry."""

    def put(lines: str) -> None:
        from ruamel.yaml.error import CommentMark
        from ruamel.yaml.tokens import CommentToken

        if doc.ca.comment is None:
            doc.ca.comment = [None, []]
        if doc.ca.comment[1] is None:
            doc.ca.comment[1] = []
        doc.ca.comment[1].append(CommentToken(lines, CommentMark(0), None))

    return put


class _Editor:
    """Applies the difference between two plain documents to a ruamel.yaml round-trip document."""

    def __init__(self, memo: dict[int, Any], doc: Any) -> None:
        self.memo = memo
        self.shared = _shared_nodes(doc)
        self.done: set[int] = set()

    # -- mappings and lists, in place -------------------------------------------------------

    def apply_map(
        self, node: Any, old: dict[Any, Any], new: dict[Any, Any], header: Callable[[str], None]
    ) -> bool:
        """Make ``node`` say ``new`` where it said ``old``; ``False`` when that cannot be done in place."""
        from ruamel.yaml.comments import merge_attrib

        if not self._may_edit(node, old, new):
            return False
        if id(node) in self.done:
            return True
        own = {k for k, _v in node.non_merged_items()}
        merges = bool(getattr(node, merge_attrib, None))
        plan: list[tuple[str, Any, Any]] = []
        for key in old:
            if key not in new:
                found = _key_in(node, key)
                if found is MISSING or (merges and found not in own):
                    return False
                plan.append(("delete", found, None))
        for key, value in new.items():
            if key not in old:
                plan.append(("add", key, value))
            elif not _same(old[key], value):
                found = _key_in(node, key)
                if found is MISSING:
                    return False
                plan.append(("set", found, key))
        self.done.add(id(node))
        for action, found, extra in plan:
            if action == "delete":
                self._delete(node, found, header)
            elif action == "set":
                self._set(node, found, old[extra], new[extra])
            else:
                self._append(node, _fresh_key(found), self.fresh(extra))
        return True

    def apply_seq(self, node: Any, old: list[Any], new: list[Any], header: Callable[[str], None]) -> bool:
        import difflib

        if not self._may_edit(node, old, new):
            return False
        if id(node) in self.done:
            return True
        self.done.add(id(node))
        matcher = difflib.SequenceMatcher(
            a=[_token(v) for v in old], b=[_token(v) for v in new], autojunk=False
        )
        for tag, i1, i2, j1, j2 in reversed(matcher.get_opcodes()):
            if tag == "equal":
                continue
            pairs = min(i2 - i1, j2 - j1) if tag == "replace" else 0
            for k in range(pairs):
                self._set(node, i1 + k, old[i1 + k], new[j1 + k])
            for i in reversed(range(i1 + pairs, i2)):
                self._delete(node, i, header)
            for k, value in enumerate(new[j1 + pairs : j2]):
                at = i1 + pairs + k
                if at >= len(node):
                    self._append(node, None, self.fresh(value))
                else:
                    node.insert(at, self.fresh(value))
        return True

    def _may_edit(self, node: Any, old: Any, new: Any) -> bool:
        # A list or mapping an alias shares is edited in place only if the change kept it shared.
        return id(node) not in self.shared or self.memo.get(id(old)) is new

    def _set(self, node: Any, key: Any, old: Any, new: Any) -> None:
        from ruamel.yaml.comments import CommentedMap, CommentedSeq

        current = node[key]
        header = _entry_header(node, key)
        if isinstance(node, dict) and key not in _keys(node):
            self._append(node, key, self.fresh(new))  # overrides what a `<<` merge brings
            return
        if isinstance(old, dict) and isinstance(new, dict) and isinstance(current, CommentedMap):
            if not current and new and current.fa.flow_style():
                current.fa.set_block_style()
            if self.apply_map(current, old, new, header):
                return
        elif isinstance(old, list) and isinstance(new, list) and isinstance(current, CommentedSeq):
            if not current and new and current.fa.flow_style():
                current.fa.set_block_style()
            if self.apply_seq(current, old, new, header):
                return
        node[key] = self.fresh(new, like=current)

    def _delete(self, node: Any, key: Any, header: Callable[[str], None]) -> None:
        keys = _keys(node)
        at = keys.index(key)
        # The comment lines above the entry (ruamel.yaml keeps some there) and below it stay in place.
        tail = _take_lead(node, key) + _take_tail(node, key)
        del node[key]
        if isinstance(node, dict):
            node.ca.items.pop(key, None)  # type: ignore[attr-defined]  # a ruamel.yaml CommentedMap
        if not node:
            node.fa.set_flow_style()  # an empty block would print as a lone `[]` below its key
        if not tail:
            return
        if at > 0:
            _put_tail(node, keys[at - 1], tail)
        else:
            header(tail)

    def _append(self, node: Any, key: Any, value: Any) -> None:
        """Add at the end; comment lines that ended the block move below the new entry."""
        from ruamel.yaml.comments import CommentedMap, CommentedSeq

        keys = _keys(node)
        tail = _take_tail(node, keys[-1]) if keys else ""
        if not keys and node.fa.flow_style():
            node.fa.set_block_style()  # an empty `[]` or `{}` that gets entries: one a line, like the rest
        if isinstance(node, dict):
            node[key] = value
            new_key = key
        else:
            node.append(value)
            new_key = len(node) - 1
        if isinstance(value, CommentedMap | CommentedSeq) and not node.fa.flow_style():
            value.fa.set_block_style()
        if tail:
            _put_tail(node, new_key, tail)

    # -- new values ------------------------------------------------------------------------

    def fresh(self, value: Any, like: Any = None) -> Any:
        """``value`` as ruamel.yaml round-trip data, quoted where PyYAML would read it otherwise."""
        from ruamel.yaml.comments import CommentedMap, CommentedSeq
        from ruamel.yaml.scalarstring import ScalarString

        seen: dict[int, Any] = {}

        def convert(item: Any, like: Any = None) -> Any:
            if isinstance(item, dict | list | tuple):
                if id(item) in seen:
                    return seen[id(item)]
                if isinstance(item, dict):
                    out: Any = CommentedMap()
                    seen[id(item)] = out
                    for key, child in item.items():
                        out[_fresh_key(key)] = convert(child)
                else:
                    out = CommentedSeq()
                    seen[id(item)] = out
                    out.extend(convert(child) for child in item)
                return out
            if isinstance(item, str) and not isinstance(item, ScalarString):
                if isinstance(like, ScalarString) and _fits(item, like):
                    return type(like)(item)
                return _scalar(item)
            return item

        return convert(value, like)


def _fresh_key(key: Any) -> Any:
    return _scalar(key) if isinstance(key, str) else key


def _scalar(text: str) -> Any:
    """A new string as it must be written: in double quotes (escaped) with a control character or a
    line break, in single quotes where PyYAML would read it plain as something else, else plain."""
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

    if not text.isprintable():
        return DoubleQuotedScalarString(text)
    if _misread(text):
        return SingleQuotedScalarString(text) if "'" not in text else DoubleQuotedScalarString(text)
    return text


def _fits(text: str, like: Any) -> bool:
    """Whether ``text`` can be written in the style of the string ``like`` it replaces."""
    from ruamel.yaml.scalarstring import FoldedScalarString, LiteralScalarString

    if isinstance(like, LiteralScalarString | FoldedScalarString):
        return all(c.isprintable() or c == "\n" for c in text) and not text.startswith(" ")
    return text.isprintable()


def _misread(text: str) -> bool:
    """Whether PyYAML (YAML 1.1, the kernel's reader) would read ``text`` written plain as something
    else than that string (``yes``, ``on``, ``1:30``, ``0o7``...)."""
    import yaml

    tag = yaml.resolver.Resolver().resolve(yaml.ScalarNode, text, (True, False))
    return tag != "tag:yaml.org,2002:str"


def _token(value: Any) -> str:
    return f"{type(value).__name__}:{value!r}"


def _key_in(node: Any, key: Any) -> Any:
    """The key of ruamel mapping ``node`` that PyYAML reads as ``key`` (YAML 1.1's ``yes:`` is True)."""
    try:
        if key in node:
            return key
    except TypeError:
        return MISSING
    import yaml

    for candidate in node:
        if isinstance(candidate, str) and "\n" not in candidate:
            try:
                read = yaml.safe_load(candidate)
            except yaml.YAMLError:
                continue
            if type(read) is type(key) and read == key:
                return candidate
    return MISSING


def _shared_nodes(doc: Any) -> set[int]:
    """The ids of the lists and mappings that appear more than once (an anchor and its aliases, a
    mapping a ``<<`` merges), and of every list and mapping inside those; the anchors of the document
    are kept in the output even when they lose their aliases."""
    from ruamel.yaml.comments import merge_attrib

    seen: set[int] = set()
    shared: list[Any] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict | list):
            continue
        if id(node) in seen:
            shared.append(node)
            continue
        seen.add(id(node))
        anchor = getattr(node, "anchor", None)
        if anchor is not None and anchor.value:
            anchor.always_dump = True  # an anchor stays even if the change leaves it without aliases
        if isinstance(node, dict):
            stack.extend(node.values())
            stack.extend(getattr(node, merge_attrib, None) or ())
        else:
            stack.extend(node)
    inside: set[int] = set()
    while shared:
        node = shared.pop()
        if isinstance(node, dict | list) and id(node) not in inside:
            inside.add(id(node))
            shared.extend(node.values() if isinstance(node, dict) else node)
    return inside


def _is_block(value: Any) -> bool:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    return isinstance(value, CommentedMap | CommentedSeq) and len(value) > 0 and not value.fa.flow_style()


def _slot(node: Any) -> int:
    """Where ruamel.yaml keeps the comment after an entry: index 0 for a list item, 2 for a value."""
    return 2 if isinstance(node, dict) else 0


def _keys(node: Any) -> list[Any]:
    """The entries of ``node`` as written (a mapping's own keys, not those a ``<<`` merge brings)."""
    if isinstance(node, dict):
        return [k for k, _v in node.non_merged_items()]  # type: ignore[attr-defined]  # a ruamel.yaml CommentedMap
    return list(range(len(node)))


def _last_key(node: Any) -> Any:
    return _keys(node)[-1]


def _take_tail(node: Any, key: Any) -> str:
    """Detach the comment lines that follow entry ``key`` of ``node`` (its end-of-line comment stays)."""
    value = node[key]
    if _is_block(value):
        return _take_tail(value, _last_key(value))
    entry = node.ca.items.get(key)
    token = entry[_slot(node)] if entry else None
    if token is None or "\n" not in token.value:
        return ""
    eol, _, rest = token.value.partition("\n")
    if not rest:
        return ""
    if eol.strip():
        token.value = eol + "\n"
    else:
        entry[_slot(node)] = None
    return rest


def _take_lead(node: Any, key: Any) -> str:
    """Detach the comment lines ruamel.yaml keeps before entry ``key`` of ``node``."""
    entry = node.ca.items.get(key)
    lead = entry[1] if entry and len(entry) > 1 else None
    if not isinstance(lead, list):
        return ""
    entry[1] = None
    return "".join(token.value for token in lead if token is not None)


def _put_tail(node: Any, key: Any, lines: str) -> None:
    """Add comment lines after entry ``key`` of ``node`` (after its last nested entry, for a block)."""
    value = node[key]
    if _is_block(value):
        _put_tail(value, _last_key(value), lines)
        return
    _append_comment(node, key, lines)


def _entry_header(node: Any, key: Any) -> Callable[[str], None]:
    """Where comment lines go that end up before the first entry of ``node[key]``: after ``key:``."""
    return lambda lines: _append_comment(node, key, lines)


def _append_comment(node: Any, key: Any, lines: str) -> None:
    """Add comment ``lines`` to the comment ruamel.yaml keeps after ``key:`` in ``node``."""
    from ruamel.yaml.error import CommentMark
    from ruamel.yaml.tokens import CommentToken

    entry = node.ca.items.setdefault(key, [None, None, None, None])
    token = entry[_slot(node)]
    if token is None:
        entry[_slot(node)] = CommentToken("\n" + lines, CommentMark(0), None)
    else:
        token.value = (token.value if token.value.endswith("\n") else token.value + "\n") + lines


def _same(a: Any, b: Any) -> bool:
    """``a == b`` for plain data, where NaN equals NaN; never recurses."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if isinstance(x, float) and isinstance(y, float) and x != x and y != y:
            continue
        if isinstance(x, dict) and isinstance(y, dict):
            if len(x) != len(y) or any(k not in y for k in x):
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif isinstance(x, list | tuple) and isinstance(y, list | tuple):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif type(x) is not type(y) or x != y:
            return False
    return True


def lookup(node: Any, parts: tuple[str, ...]) -> Any:
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


def assign(
    data: dict[str, Any], parts: tuple[str, ...], value: Any, path: Path, *, own_path: bool = False
) -> None:
    """Set ``data[parts[0]]...[parts[-1]] = value``; with ``own_path``, a mapping on the way that an
    alias shares with another place (and every one below it) is replaced by a copy first, so that
    the other place keeps its value."""
    node = data
    shared = _appearing_twice(data) if own_path else set()
    copying = False
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            where = ".".join(parts[: i + 1])
            raise ValueError(f"{path}: '{where}' is not a mapping; cannot set '{'.'.join(parts)}'")
        elif copying or id(child) in shared:
            copying = True
            child = node[part] = dict(child)
        node = child
    node[parts[-1]] = value


def _appearing_twice(value: Any) -> set[int]:
    """The ids of the lists and mappings reached more than once in ``value`` (never recurses)."""
    seen: set[int] = set()
    twice: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if not isinstance(item, dict | list):
            continue
        if id(item) in seen:
            twice.add(id(item))
            continue
        seen.add(id(item))
        stack.extend(item.values() if isinstance(item, dict) else item)
    return twice
