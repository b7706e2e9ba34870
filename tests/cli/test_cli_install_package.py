"""The ``kernel.cli.install`` package: small modules, one concern each, loaded only when
``plugins install``, ``update`` or ``remove`` runs, and the names the single module exported before."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
from conftest import run_probe

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "kernel" / "cli" / "install"

# What ``kernel.cli.install`` exported when it was one module; the package keeps every name.
EXPORTED = {
    "INSTALL_DESCRIPTION": "parser",
    "UPDATE_DESCRIPTION": "parser",
    "REMOVE_DESCRIPTION": "parser",
    "add_commands": "parser",
    "KERNEL_DISTRIBUTION": "records",
    "RECORDS_FILE": "records",
    "normalize_dist": "records",
    "read_records": "records",
    "records_path": "records",
    "classify_source": "sources",
    "offer_enable": "outcome",
    "report_outcome": "outcome",
    "tree_hashes": "placing",
    "plugins_install": "install_command",
    "plugins_update": "update_command",
    "plugins_remove": "remove_command",
}

PROBE = """
import json, sys
from kernel.cli import _parser

def loaded():
    return sorted(m for m in sys.modules if m.startswith("kernel.cli.install."))

args = _parser()[0].parse_args(["plugins", "install", sys.argv[1]])
before = loaded()
code = args.handler(args)
print("PROBE " + json.dumps({"before": before, "code": code, "after": loaded()}))
"""


def probe_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}


def test_the_commands_code_is_imported_only_when_one_of_them_runs(tmp_path: Path) -> None:
    """``hermes-kernel`` builds its whole parser at every start; of this package, only the parser is
    imported for that, and the rest when ``plugins install`` really runs."""
    missing = tmp_path / "no-such-plugin-folder"
    result = run_probe(PROBE, str(missing), cwd=tmp_path, env=probe_env())
    assert result["before"] == ["kernel.cli.install.parser"]
    assert result["code"] == 1  # the source does not exist: refused before any kernel is built
    assert {"kernel.cli.install.install_command", "kernel.cli.install.sources"} <= set(result["after"])


def test_every_name_the_single_module_exported_is_still_there() -> None:
    import importlib

    package = importlib.import_module("kernel.cli.install")
    assert set(package.__all__) == set(EXPORTED)
    for name, module in EXPORTED.items():
        owner = importlib.import_module(f"kernel.cli.install.{module}")
        assert getattr(package, name) is getattr(owner, name), name
    assert set(EXPORTED) <= set(dir(package))
    with pytest.raises(AttributeError):
        _ = package.no_such_name


def test_each_module_is_small_and_says_in_one_line_what_it_holds() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert {p.stem for p in modules} >= {"__init__", *EXPORTED.values()}
    for path in modules:
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) <= 400, f"{path} has grown past 400 lines: split it by concern"
        doc = ast.get_docstring(ast.parse(text), clean=False)
        assert doc, f"{path} has no module docstring"
        if path.name != "__init__.py":
            assert "\n" not in doc.strip(), f"{path}: the module docstring should be one line"
