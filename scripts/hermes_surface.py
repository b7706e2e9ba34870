"""List the public surface of the Hermes Agent modules hermes-kernel serves, as sorted JSON.

Run it with the Python of a scratch venv holding Hermes Agent (never the project's venv)::

    python3 -m venv /tmp/hermes-peer && /tmp/hermes-peer/bin/pip install hermes-agent==0.19.0
    /tmp/hermes-peer/bin/python scripts/hermes_surface.py > tests/compat/hermes-0.19-surface.json

(``make hermes-surface`` does both.)  The module names are read from the ``SHIMS`` table of
``kernel/compat/finder.py`` without importing the kernel; the bare packages the kernel serves empty
(``agent``, ``tools``, ...) are left out.  For each module:

* ``names``: its ``__all__`` when it has one; otherwise every name not starting with ``_`` that is a
  class or function defined in the module itself, or an upper-case constant that is neither a class,
  a function nor a module;
* ``reexports``: the other public classes and functions it imports from Hermes' own packages (name ->
  origin module), for information: the surface test does not require them.

A function is described by its parameters (name, kind, whether it has a default) and whether it is a
coroutine function; a class by its constructor, its abstract methods, and its public members (methods
with their parameters, properties, class attributes, dataclass fields, enum members).  Values and
defaults are left out so that the output does not depend on the machine.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import importlib
import inspect
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

FINDER = Path(__file__).resolve().parent.parent / "kernel" / "compat" / "finder.py"
# Hermes' own top-level modules and packages: a name imported from one of them is a re-export.
HERMES_ROOTS = ("agent", "gateway", "hermes_cli", "hermes_constants", "providers", "tools", "utils")


def served_modules(finder: Path = FINDER) -> list[str]:
    """The module names of the finder's ``SHIMS`` table that have content (not bare packages)."""
    tree = ast.parse(finder.read_text(encoding="utf-8"))
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == "SHIMS":
            table = ast.literal_eval(node.value)
            return sorted(name for name, (impl, _is_package) in table.items() if impl is not None)
    raise SystemExit(f"{finder}: no SHIMS table found")


def params(obj: Any) -> list[dict[str, Any]] | None:
    """The parameters of a callable, or None when Python cannot tell them."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    return [
        {"name": p.name, "kind": p.kind.name, "default": p.default is not inspect.Parameter.empty}
        for p in signature.parameters.values()
    ]


def describe_function(obj: Any) -> dict[str, Any]:
    return {
        "kind": "function",
        "async": inspect.iscoroutinefunction(obj),
        "params": params(obj),
    }


def describe_member(cls: type, name: str) -> dict[str, Any]:
    raw = inspect.getattr_static(cls, name)
    if isinstance(raw, property):
        return {"kind": "property"}
    if isinstance(raw, staticmethod):
        return {
            "kind": "staticmethod",
            "async": inspect.iscoroutinefunction(raw.__func__),
            "params": params(raw.__func__),
        }
    if isinstance(raw, classmethod):
        return {
            "kind": "classmethod",
            "async": inspect.iscoroutinefunction(raw.__func__),
            "params": params(raw.__func__)[1:] if params(raw.__func__) else None,
        }
    if inspect.isfunction(raw):
        return {"kind": "method", "async": inspect.iscoroutinefunction(raw), "params": params(raw)}
    if inspect.isclass(raw):
        return {"kind": "class"}
    if callable(raw) and not isinstance(raw, enum.Enum):
        return {"kind": "method", "async": False, "params": params(getattr(cls, name))}
    return {"kind": "attribute"}


def describe_class(cls: type) -> dict[str, Any]:
    members: dict[str, Any] = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        if issubclass(cls, enum.Enum) and name in cls.__members__:
            members[name] = {"kind": "enum_member"}
            continue
        # Members every class, dataclass or enum has from Python itself are not Hermes' surface.
        if any(
            name in vars(base)
            for base in (object, enum.Enum, Exception, tuple, dict, str, int)
            if base in cls.__mro__
        ):
            continue
        members[name] = describe_member(cls, name)
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if not f.name.startswith("_"):
                members.setdefault(f.name, {"kind": "attribute"})
    # The constructor, when a class of Hermes' own (not Python's) defines __init__ or __new__.
    builtin = (object, enum.Enum, Exception, BaseException, tuple, dict, str, int)
    defines = [c for c in cls.__mro__ if c not in builtin and ("__init__" in vars(c) or "__new__" in vars(c))]
    init = params(cls) if defines and not issubclass(cls, enum.Enum) else None
    return {
        "kind": "class",
        "abstract": sorted(getattr(cls, "__abstractmethods__", ())),
        "init": init,
        "members": members,
    }


def describe(value: Any) -> dict[str, Any]:
    if inspect.isclass(value):
        return describe_class(value)
    if inspect.isfunction(value) or inspect.isbuiltin(value):
        return describe_function(value)
    return {"kind": "constant", "type": type(value).__name__}


def is_hermes(module_name: str | None) -> bool:
    return bool(module_name) and module_name.split(".")[0] in HERMES_ROOTS


def module_surface(name: str) -> dict[str, Any]:
    module = importlib.import_module(name)
    listed = getattr(module, "__all__", None)
    names: dict[str, Any] = {}
    reexports: dict[str, str] = {}
    for attr in sorted(listed if listed is not None else dir(module)):
        if attr.startswith("_") and listed is None:
            continue
        value = getattr(module, attr, None)
        if inspect.ismodule(value):
            continue
        origin = getattr(value, "__module__", None) if (inspect.isclass(value) or callable(value)) else None
        if listed is not None:
            names[attr] = describe(value)
        elif inspect.isclass(value) or inspect.isfunction(value):
            if origin == name:
                names[attr] = describe(value)
            elif is_hermes(origin):
                reexports[attr] = origin
        elif attr.isupper() and not callable(value) and attr != "TYPE_CHECKING":
            names[attr] = describe(value)
    return {"names": names, "reexports": reexports}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", "-o", type=Path, help="write here instead of stdout")
    args = parser.parse_args(argv)
    # Importing Hermes' modules must not touch a real home.
    scratch = tempfile.mkdtemp(prefix="hermes-surface-")
    os.environ["HERMES_HOME"] = os.path.join(scratch, ".hermes")
    os.environ["HOME"] = scratch
    try:
        from importlib.metadata import version

        hermes_version = version("hermes-agent")
    except Exception:  # any failure means it is not installed here
        print("hermes-agent is not installed in this Python; see the module docstring", file=sys.stderr)
        return 2
    surface = {
        "hermes_agent": hermes_version,
        "modules": {name: module_surface(name) for name in served_modules()},
    }
    text = json.dumps(surface, indent=1, sort_keys=True) + "\n"
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
