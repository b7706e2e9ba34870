"""Command templates: each placeholder becomes a quoted reference to an environment variable, never shell
source."""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .common import _ALIASES, _ASSIGNMENT, _IDENTIFIER, _SHELL_OPERATORS, ENV_PREFIX, TemplateError

if TYPE_CHECKING:
    pass


# --------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Slot:
    """A placeholder in a template, with the shell quoting context it sits in."""

    name: str
    context: str = "plain"


def _parse_braces(text: str, allowed: Iterable[str]) -> list[str | _Slot]:
    """Split ``text`` into literal strings and placeholders; ``{{`` and ``}}`` are literal braces."""
    known = tuple(allowed)
    pieces: list[str | _Slot] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "{":
            if text.startswith("{{", i):
                literal.append("{")
                i += 2
                continue
            end = text.find("}", i)
            name = text[i + 1 : end] if end != -1 else ""
            if not _IDENTIFIER.fullmatch(name):
                raise TemplateError(
                    f"'{{' at position {i} starts no placeholder; write '{{{{' for a literal brace"
                )
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean {{{close[0]}}}? " if close else ""
                listed = ", ".join("{" + k + "}" for k in known)
                raise TemplateError(
                    f"unknown placeholder {{{name}}} ({hint}known: {listed}; "
                    "write '{{' and '}}' for literal braces)"
                )
            if literal:
                pieces.append("".join(literal))
                literal = []
            pieces.append(_Slot(_ALIASES.get(name, name)))
            i = end + 1
            continue
        if ch == "}":
            if text.startswith("}}", i):
                literal.append("}")
                i += 2
                continue
            raise TemplateError(f"a single '}}' at position {i}; write '}}}}' for a literal brace")
        literal.append(ch)
        i += 1
    if literal:
        pieces.append("".join(literal))
    return pieces


# Shell quoting contexts the scanner tells apart.
_PLAIN, _SINGLE, _DOUBLE, _ANSI, _SUBST, _BACKTICK, _COMMENT = (
    "plain",
    "single",
    "double",
    "ansi",
    "subst",
    "backtick",
    "comment",
)
_WORD_START = frozenset(" \t\n;&|()<>")


def _annotate_shell(pieces: list[str | _Slot]) -> list[str | _Slot]:
    """Give each placeholder the quoting context it is in; refuse the places it cannot be put safely.

    Tracks backslashes, single and double quotes, ``$'...'``, ``$(...)`` (with
    nested parentheses), backticks and ``#`` comments.  Here-documents are not
    tracked (see docs/speech.md).
    """
    stack: list[list[Any]] = [[_PLAIN, 0]]
    escaped = False
    prev = ""  # the previous literal character ("" at the start, "w" after a placeholder)
    out: list[str | _Slot] = []
    for piece in pieces:
        if isinstance(piece, _Slot):
            top = stack[-1][0]
            if escaped:
                raise TemplateError(f"{{{piece.name}}} right after a backslash; remove the backslash")
            if prev == "$" and top not in (_SINGLE, _COMMENT):
                raise TemplateError(
                    f"'${{{piece.name}}}' is ambiguous: write {{{piece.name}}} for the placeholder "
                    "or '${{NAME}}' for a shell variable"
                )
            if top == _ANSI:
                raise TemplateError(f"{{{piece.name}}} inside $'...' quoting; use '...' or \"...\" instead")
            out.append(_Slot(piece.name, top))
            prev = "w"
            continue
        for ch in piece:
            top = stack[-1][0]
            if escaped:
                escaped = False
                prev = "w"
                continue
            if top == _COMMENT:
                if ch == "\n":
                    stack.pop()
                prev = ch
                continue
            if top == _SINGLE:
                if ch == "'":
                    stack.pop()
                prev = ch
                continue
            if top == _ANSI:
                if ch == "\\":
                    escaped = True
                elif ch == "'":
                    stack.pop()
                prev = ch
                continue
            if top == _DOUBLE:
                if ch == "\\":
                    escaped = True
                elif ch == '"':
                    stack.pop()
                elif ch == "`":
                    stack.append([_BACKTICK, 0])
                elif ch == "(" and prev == "$":
                    stack.append([_SUBST, 0])
                prev = ch
                continue
            # plain text, $(...) and `...`: words, where quotes open and # may start a comment
            if ch == "\\":
                escaped = True
            elif ch == "'":
                stack.append([_ANSI if prev == "$" else _SINGLE, 0])
            elif ch == '"':
                stack.append([_DOUBLE, 0])
            elif ch == "`":
                if top == _BACKTICK:
                    stack.pop()
                else:
                    stack.append([_BACKTICK, 0])
            elif ch == "(":
                if prev == "$":
                    stack.append([_SUBST, 0])
                elif top == _SUBST:
                    stack[-1][1] += 1
            elif ch == ")" and top == _SUBST:
                if stack[-1][1]:
                    stack[-1][1] -= 1
                else:
                    stack.pop()
            elif ch == "#" and (prev == "" or prev in _WORD_START):
                stack.append([_COMMENT, 0])
            prev = ch
        out.append(piece)
    if stack[-1][0] == _COMMENT:
        stack.pop()
    if escaped or len(stack) > 1:
        what = {
            _SINGLE: "a ' quote",
            _DOUBLE: 'a " quote',
            _ANSI: "a $' quote",
            _SUBST: "a $( substitution",
            _BACKTICK: "a ` substitution",
        }.get(stack[-1][0], "a trailing backslash")
        raise TemplateError(f"{what} is never closed")
    return out


def _env_name(name: str) -> str:
    return ENV_PREFIX + name.upper()


class CommandTemplate:
    """A parsed command template.

    ``in_shell=True``: :meth:`script` gives ``/bin/sh`` source in which every
    placeholder is a quoted reference to an environment variable (see
    :meth:`environment`).  ``in_shell=False``: :meth:`argv` splits the template
    like a shell would and fills the placeholders in inside each argument.
    """

    def __init__(self, text: str, allowed: Iterable[str], *, in_shell: bool) -> None:
        self.text = text
        self.shell = in_shell
        allowed = tuple(allowed)
        if not text.strip():
            raise TemplateError("the command is empty")
        if in_shell:
            self._pieces = _annotate_shell(_parse_braces(text, allowed))
            names = [p.name for p in self._pieces if isinstance(p, _Slot)]
            self._words: list[list[str | _Slot]] = []
        else:
            try:
                words = shlex.split(text)
            except ValueError as exc:
                raise TemplateError(f"cannot be split into arguments: {exc}") from None
            if not words:
                raise TemplateError("the command is empty")
            self._pieces = []
            self._words = [_parse_braces(word, allowed) for word in words]
            names = [p.name for word in self._words for p in word if isinstance(p, _Slot)]
        self.names: frozenset[str] = frozenset(names)

    def script(self) -> str:
        """The shell source (``in_shell=True`` only)."""
        parts: list[str] = []
        for piece in self._pieces:
            if not isinstance(piece, _Slot):
                parts.append(piece)
                continue
            ref = "${" + _env_name(piece.name) + "}"
            if piece.context == _DOUBLE:
                parts.append(ref)
            elif piece.context == _SINGLE:
                parts.append(f"'\"{ref}\"'")
            else:
                parts.append(f'"{ref}"')
        return "".join(parts)

    def environment(self, values: Mapping[str, str]) -> dict[str, str]:
        """The variables the script refers to, for the placeholders it uses."""
        return {_env_name(name): values[name] for name in self.names}

    def argv(self, values: Mapping[str, str]) -> list[str]:
        """The arguments (``in_shell=False`` only), each placeholder replaced by its value."""
        return ["".join(p if isinstance(p, str) else values[p.name] for p in word) for word in self._words]

    def program(self) -> str | None:
        """The program the command starts with, as far as can be told (for a PATH check)."""
        try:
            words = shlex.split(self.text if self.shell else shlex.join(self.argv(_Dummy())))
        except ValueError:
            return None
        for word in words:
            if _ASSIGNMENT.match(word):  # a VAR=value prefix
                continue
            if any(c in word for c in "{}$`|;&<>()"):
                return None
            return word
        return None

    def shell_operators(self) -> list[str]:
        """Arguments that look like shell syntax (they are passed on literally without a shell)."""
        return [
            "".join(p for p in word if isinstance(p, str))
            for word in self._words
            if len(word) == 1 and isinstance(word[0], str) and word[0] in _SHELL_OPERATORS
        ]


class _Dummy(dict):  # type: ignore[type-arg]
    def __missing__(self, key: str) -> str:
        return "x"
