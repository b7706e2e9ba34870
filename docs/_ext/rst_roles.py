"""A griffe extension for the docs site: the kernel's docstrings are written in reST, the site is Markdown.

mkdocstrings renders docstrings as Markdown, where a Sphinx role such as ``:meth:`load``` would show up
as the text ``:meth:`` followed by ``load``.  When the package is loaded, this extension rewrites every
docstring once:

* ``:class:`~kernel.testing.TestKernel```, ``:meth:`load```, ``:mod:`kernel.environ``` (any Python-domain
  role, with or without ``~`` or an explicit ``title <target>``) becomes a cross-reference to the object,
  resolved from the docstring's own scope as Python would; a target the site does not render stays
  inline code (the reference is marked optional, so it never fails the strict build);
* a paragraph ending in ``::`` (reST's literal block marker) ends in ``:``, and a line holding only
  ``::`` is dropped; the indented block after it is already a Markdown code block.

Nothing else of the text changes, and the source files are not touched.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|attr|exc|obj|data|const):`(?P<body>[^`]+)`")
TITLED = re.compile(r"^(?P<title>.+?)\s*<(?P<target>[^<>]+)>$")
LITERAL_MARKER = re.compile(r"(?<=\S)::$", re.MULTILINE)
LONE_MARKER = re.compile(r"^[ \t]*::[ \t]*\n", re.MULTILINE)


class SphinxRoles(griffe.Extension):
    """Rewrite the reST roles and literal markers of every docstring of a loaded package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for obj in _objects(pkg):
            if obj.docstring is not None:
                obj.docstring.value = convert(obj.docstring.value, obj)


def _objects(root: griffe.Object) -> list[griffe.Object]:
    found: list[griffe.Object] = [root]
    for member in root.members.values():
        if not member.is_alias:
            found.extend(_objects(member))
    return found


def convert(text: str, scope: griffe.Object) -> str:
    """``text`` with its roles as cross-references and its ``::`` markers as plain colons."""
    text = ROLE.sub(lambda match: _reference(match["body"], scope), text)
    text = LONE_MARKER.sub("", text)
    return LITERAL_MARKER.sub(":", text)


def _reference(body: str, scope: griffe.Object) -> str:
    titled = TITLED.match(body)
    if titled:
        title, target = titled["title"], titled["target"]
    else:
        target = body.strip()
        title = target.lstrip("~.").rsplit(".", 1)[-1] if target.startswith("~") else target.lstrip(".")
    target = target.lstrip("~.").removesuffix("()")
    path = _resolve(target, scope)
    code = f"<code>{html.escape(title)}</code>"
    if path is None:
        return code
    return f'<autoref identifier="{html.escape(path)}" optional>{code}</autoref>'


def _resolve(target: str, scope: griffe.Object) -> str | None:
    """The full path ``target`` names from ``scope``, or ``None`` when it names nothing griffe knows."""
    head, _, rest = target.partition(".")
    candidates = [target]
    try:
        resolved = scope.resolve(head)
    except griffe.NameResolutionError:
        resolved = None
    if resolved:
        candidates.insert(0, f"{resolved}.{rest}" if rest else resolved)
    return next((path for path in candidates if _known(path, scope.modules_collection)), None)


def _known(path: str, collection: griffe.ModulesCollection) -> bool:
    try:
        collection.get_member(path)
    except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return False
    return True
