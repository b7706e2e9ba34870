"""Hermes Agent 0.19's module surface, served: every name the kernel's shims must have.

``hermes-0.19-surface.json`` is written by ``scripts/hermes_surface.py`` from Hermes Agent 0.19.0 in a
scratch venv (``make hermes-surface``); the suite only reads it.  Each listed name of each served module
is in the shim's ``__all__`` with a compatible shape (a function or method takes every parameter Hermes'
takes, with the same kind and position, optional where Hermes' is optional; extra parameters must be
optional; a class has no abstract method Hermes' lacks), or it is in ``hermes-0.19-omissions.json``
with the reason, and ``docs/compatibility.md`` names it.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

from kernel.compat.finder import SHIMS

HERE = Path(__file__).resolve().parent
SURFACE = json.loads((HERE / "hermes-0.19-surface.json").read_text(encoding="utf-8"))
OMISSIONS: dict[str, dict[str, str]] = json.loads(
    (HERE / "hermes-0.19-omissions.json").read_text(encoding="utf-8")
)
DOCS = HERE.parents[1] / "docs" / "compatibility.md"
POSITIONAL = {"POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD"}


def shim(module: str) -> Any:
    impl, _is_package = SHIMS[module]
    assert impl is not None, f"{module} is served as an empty package"
    return importlib.import_module(f"kernel.compat.shims.{impl}")


def ours(obj: Any, *, drop_first: bool = False) -> list[dict[str, Any]] | None:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    found = [
        {"name": p.name, "kind": p.kind.name, "default": p.default is not inspect.Parameter.empty}
        for p in signature.parameters.values()
    ]
    return found[1:] if drop_first else found


def params_problems(theirs: list[dict[str, Any]] | None, mine: list[dict[str, Any]] | None) -> list[str]:
    """Why a callable with parameters ``mine`` cannot stand in for Hermes' ``theirs`` (empty: it can)."""
    if theirs is None or mine is None:
        return []
    problems = []
    by_name = {p["name"]: p for p in mine}
    their_names = {p["name"] for p in theirs}
    their_positional = [p["name"] for p in theirs if p["kind"] in POSITIONAL]
    my_positional = [p["name"] for p in mine if p["kind"] in POSITIONAL]
    for p in theirs:
        match = by_name.get(p["name"])
        if p["kind"] in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            if not any(q["kind"] == p["kind"] for q in mine):
                problems.append(f"no {'*args' if p['kind'] == 'VAR_POSITIONAL' else '**kwargs'}")
            continue
        if match is None:
            problems.append(f"no parameter {p['name']!r}")
            continue
        if match["kind"] != p["kind"]:
            problems.append(f"{p['name']!r} is {match['kind']}, Hermes' is {p['kind']}")
        if p["default"] and not match["default"]:
            problems.append(f"{p['name']!r} is required, optional in Hermes")
        if p["kind"] in POSITIONAL and my_positional.index(p["name"]) != their_positional.index(p["name"]):
            problems.append(
                f"{p['name']!r} is at position {my_positional.index(p['name'])}, Hermes' at "
                f"{their_positional.index(p['name'])}"
            )
    for q in mine:
        if (
            q["name"] not in their_names
            and q["kind"] not in ("VAR_POSITIONAL", "VAR_KEYWORD")
            and not q["default"]
        ):
            problems.append(f"extra required parameter {q['name']!r}")
    return problems


def member_problems(cls: type, name: str, spec: dict[str, Any]) -> list[str]:
    kind = spec["kind"]
    if kind == "enum_member":
        ok = issubclass(cls, enum.Enum) and name in cls.__members__
        return [] if ok else ["not an enum member"]
    if kind == "attribute":
        fields = getattr(cls, "__dataclass_fields__", {})
        ok = hasattr(cls, name) or name in fields or name in getattr(cls, "__annotations__", {})
        ok = ok or any(name in getattr(base, "__annotations__", {}) for base in cls.__mro__)
        return [] if ok else ["missing"]
    try:
        raw = inspect.getattr_static(cls, name)
    except AttributeError:
        return ["missing"]
    if kind == "property":
        return [] if isinstance(raw, property) or not callable(raw) else ["not a property"]
    if kind == "class":
        return [] if inspect.isclass(raw) else ["not a class"]
    func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
    if not callable(func):
        return ["not callable"]
    problems = []
    if spec.get("async") and not inspect.iscoroutinefunction(func):
        problems.append("not a coroutine function")
    if kind == "classmethod" and not isinstance(raw, classmethod):
        problems.append("not a classmethod")
    mine = ours(func, drop_first=kind == "classmethod")
    return problems + params_problems(spec.get("params"), mine)


def name_problems(value: Any, spec: dict[str, Any]) -> list[str]:
    """Why ``value`` cannot stand in for the Hermes name described by ``spec`` (empty: it can)."""
    kind = spec["kind"]
    if kind == "constant":
        return []
    if kind == "function":
        if not callable(value) or inspect.isclass(value):
            return ["not a function"]
        problems = (
            ["not a coroutine function"] if spec["async"] and not inspect.iscoroutinefunction(value) else []
        )
        return problems + params_problems(spec["params"], ours(value))
    if not inspect.isclass(value):
        return ["not a class"]
    problems = []
    extra_abstract = sorted(set(getattr(value, "__abstractmethods__", ())) - set(spec["abstract"]))
    if extra_abstract:
        problems.append(f"abstract methods Hermes' class does not have: {extra_abstract}")
    if spec["init"] is not None:
        problems += [f"constructor: {p}" for p in params_problems(spec["init"], ours(value))]
    for member, member_spec in spec["members"].items():
        problems += [f".{member}: {p}" for p in member_problems(value, member, member_spec)]
    return problems


def served_problems(module: str) -> dict[str, list[str]]:
    """Each listed name of ``module`` the shim does not serve compatibly, with why."""
    impl = shim(module)
    served = set(getattr(impl, "__all__", ()))
    omitted = OMISSIONS.get(module, {})
    found: dict[str, list[str]] = {}
    for name, spec in SURFACE["modules"][module]["names"].items():
        if name in omitted:
            continue
        if name not in served:
            found[name] = ["not served"]
            continue
        problems = name_problems(getattr(impl, name), spec)
        if problems:
            found[name] = problems
    return found


def test_the_surface_is_hermes_0_19() -> None:
    assert SURFACE["hermes_agent"] == "0.19.0"
    assert "agent.context_compressor" in SURFACE["modules"]


@pytest.mark.parametrize("module", sorted(SURFACE["modules"]))
def test_shim_serves_every_name_hermes_has(module: str) -> None:
    assert module in SHIMS, f"{module} is in the surface but not served"
    assert served_problems(module) == {}


def test_every_omission_has_a_reason_and_is_still_needed() -> None:
    for module, names in OMISSIONS.items():
        listed = SURFACE["modules"][module]["names"]
        for name, reason in names.items():
            assert reason.strip(), f"{module}.{name}: an omission needs its reason"
            base = name.split(".")[0]
            assert base in listed, f"{module}.{name} is omitted but Hermes 0.19 does not have it"


def test_docs_list_every_omission() -> None:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## Hermes 0.19's module surface", 1)
    assert len(section) == 2, "docs/compatibility.md lacks its section on the module surface"
    body = re.split(r"\n## ", section[1], maxsplit=1)[0]
    missing = [
        f"{module}.{name}" for module, names in OMISSIONS.items() for name in names if f"`{name}`" not in body
    ]
    assert missing == []
