"""``pytest --fixtures`` describes every fixture of the testing kit (none says "no docstring available").

The kit's fixtures reach a plugin author's test suite through the installed ``pytest11`` entry point, so
the check runs pytest as that author would: in a subprocess, in a fresh directory outside this project,
with no ``-p`` option and no conftest.py.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from kernel import pytest_plugin

NO_DOCSTRING = "no docstring available"


def _kit_fixtures() -> dict[str, str]:
    """The fixtures ``kernel/pytest_plugin.py`` defines, with the first line of each docstring."""
    tree = ast.parse(Path(pytest_plugin.__file__).read_text(encoding="utf-8"))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
            "fixture" in ast.unparse(d) for d in node.decorator_list
        ):
            docstring = ast.get_docstring(node) or ""
            found[node.name] = docstring.splitlines()[0] if docstring else ""
    return found


def _fixtures_output(tmp_path: Path) -> str:
    project = tmp_path / "a-plugin-project"
    project.mkdir()
    (project / "test_nothing.py").write_text("def test_nothing():\n    assert True\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "PYTEST_"))}
    env["HOME"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--fixtures", "-v", "-p", "no:cacheprovider", str(project)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _section(output: str, plugin: str) -> dict[str, str]:
    """``{fixture: description}`` of the ``fixtures defined from <plugin>`` section of ``--fixtures``."""
    match = re.search(
        rf"^-+ fixtures defined from {re.escape(plugin)} -+$(.*?)(?=^-+ |^=+ |\Z)",
        output,
        flags=re.MULTILINE | re.DOTALL,
    )
    assert match, f"pytest --fixtures shows no section for {plugin}:\n{output}"
    entries: dict[str, str] = {}
    name = None
    for line in match.group(1).splitlines():
        head = re.match(r"^(\w+)(?: \[[^\]]+\])? -- ", line)
        if head:
            name = head.group(1)
            entries[name] = ""
        elif name is not None and line.strip():
            entries[name] = f"{entries[name]} {line.strip()}".strip()
    return entries


def test_the_kit_defines_the_documented_fixtures() -> None:
    assert set(_kit_fixtures()) == {"hermes_home", "hermes_plugin", "hermes_kernel"}


def test_pytest_fixtures_describes_every_fixture_of_the_kit(tmp_path: Path) -> None:
    output = _fixtures_output(tmp_path)
    shown = _section(output, "kernel.pytest_plugin")
    kit = _kit_fixtures()
    assert set(shown) == set(kit), (sorted(shown), sorted(kit))
    undocumented = [name for name, text in shown.items() if not text or NO_DOCSTRING in text]
    assert not undocumented, f"pytest --fixtures says {NO_DOCSTRING!r} for {undocumented}"
    for name, first_line in kit.items():
        assert first_line and first_line in shown[name], (name, shown[name])
