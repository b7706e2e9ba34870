"""mypy over ``kernel/`` with the settings of ``[tool.mypy]`` in pyproject.toml, run by ``make test``.

mypy runs from ``.venv/lint-site`` (``make test-deps`` installs it there with the stubs it needs), kept
out of the project's venv like import-linter; the lint site is appended to ``sys.path``, so the project's
packages win where both hold one. ``--python-executable`` is this interpreter, so mypy reads the search
path in-process (the stubs of the lint site included). Its cache under ``.venv/`` keeps a rerun to seconds.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINT_SITE = REPO / ".venv" / "lint-site"
CACHE = REPO / ".venv" / "mypy-cache"
MYPY = (
    "import sys; sys.path.append(sys.argv.pop(1)); from mypy.__main__ import console_entry\nconsole_entry()"
)


def mypy(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    assert (LINT_SITE / "mypy").is_dir(), f"mypy is not in {LINT_SITE}: run `make test-deps`"
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "MYPYPATH"}}
    command = [
        sys.executable,
        "-c",
        MYPY,
        str(LINT_SITE),
        "--python-executable",
        sys.executable,
        "--cache-dir",
        str(CACHE),
        "--no-error-summary",
        "--no-color-output",
        *args,
    ]
    # One mypy at a time on the shared cache (the suite runs on several workers): it is not made for two.
    with open(CACHE.with_name("mypy-cache.lock"), "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
        )


def test_mypy_finds_no_error_in_the_kernel() -> None:
    proc = mypy()
    assert proc.returncode == 0, proc.stdout + proc.stderr


PLUGIN = """\
from kernel import Kernel, PluginContext


def handler(args: dict[str, object], **kwargs: object) -> str:
    return "{}"


def register(ctx: PluginContext) -> None:
    ctx.register_tool("t", "demo", {"name": "t"}, handler)
    ctx.register_tool(name=1)  # BAD: the name is a string
    ctx.llm.complete(unknown_option=True)  # BAD: no such option


def host() -> None:
    k = Kernel()
    count: int = len(k.tools)
    wrong: str = k.tools  # BAD: a registry, not a string
    k.providers.no_such_method()  # BAD: the provider manager has none
"""


def test_a_plugin_author_sees_the_service_members_typed(tmp_path: Path) -> None:
    """``ctx.register_tool``, ``ctx.llm`` and ``k.tools`` are attached at run time; a type checker still
    sees their signatures (``kernel.PluginContext`` and ``kernel.Kernel`` declare them), not ``Any``."""
    plugin = tmp_path / "typed_plugin.py"
    plugin.write_text(PLUGIN, encoding="utf-8")
    (tmp_path / "none.toml").touch()  # none of the kernel's own settings: a plugin author's defaults
    proc = mypy("--config-file", str(tmp_path / "none.toml"), str(plugin), cwd=tmp_path)
    flagged = {int(line.split(":")[1]) for line in proc.stdout.splitlines() if ": error:" in line}
    expected = {n for n, line in enumerate(PLUGIN.splitlines(), 1) if "# BAD" in line}
    assert flagged == expected, proc.stdout + proc.stderr


def test_mypy_is_configured_with_the_strictness_the_kernel_keeps() -> None:
    """The settings the issue asks for (pluggy's), and no blanket escape hatch for the kernel's own code."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    for setting in ("check_untyped_defs", "disallow_any_generics", "strict_equality", "warn_unused_ignores"):
        assert config.get(setting) is True, setting
    assert config["files"] == ["kernel"]
    assert "ignore_missing_imports" not in config
    for override in config.get("overrides", []):
        modules = [override["module"]] if isinstance(override["module"], str) else override["module"]
        if override.get("ignore_missing_imports"):
            assert not any(m == "kernel" or m.startswith("kernel.") for m in modules), override


def test_the_typed_kernel_and_context_declare_exactly_the_builtin_services_members() -> None:
    """``kernel.Kernel`` and ``kernel.PluginContext`` as type checkers see them (``kernel/__init__.py``)
    declare what :data:`kernel.defaults.BUILTIN_SERVICES` attaches: an attribute or member added to a
    service and not to the declarations (or the other way round) fails here."""
    import ast
    import importlib

    from kernel.defaults import BUILTIN_SERVICES

    tree = ast.parse((REPO / "kernel" / "__init__.py").read_text(encoding="utf-8"))
    classes = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    declared = {
        node.target.id
        for node in classes["Kernel"].body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }
    assert declared == {a for s in BUILTIN_SERVICES for a in s.attributes}

    aliases = {
        alias.asname: f"{node.module}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
        if alias.asname and alias.name == "Context"
    }
    bases = [base.id for base in classes["PluginContext"].bases if isinstance(base, ast.Name)]
    modules = {f"kernel.{aliases[b].lstrip('.')}" for b in bases if b in aliases}
    assert modules == {s.module for s in BUILTIN_SERVICES if s.context}
    members = {
        name
        for module in modules
        for name in vars(importlib.import_module(module).Context)
        if not name.startswith("_")
    }
    assert members == {m for s in BUILTIN_SERVICES for m in s.context}
