"""The architecture's import contracts (``[tool.importlinter]`` in pyproject.toml), checked by import-linter.

Run as a test so that ``make test`` enforces them; a contract that stops holding
fails here with import-linter's own report of the offending imports.  import-linter
runs from ``.venv/lint-site`` (``make test-deps`` installs it there), not from the
project's venv, so that its dependency ``rich`` does not slow down ``import structlog``.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

from conftest import run_probe

from kernel import Kernel

REPO = Path(__file__).resolve().parents[2]
KERNEL = REPO / "kernel"
LINT_SITE = REPO / ".venv" / "lint-site"
LINT = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports())"


def contracts() -> dict[str, dict]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["id"]: c for c in data["tool"]["importlinter"]["contracts"]}


def test_every_import_contract_is_kept() -> None:
    assert (LINT_SITE / "importlinter").is_dir(), f"import-linter is not in {LINT_SITE}: run `make test-deps`"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(LINT_SITE), str(REPO)])}
    proc = subprocess.run(
        [sys.executable, "-c", LINT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def test_every_module_of_the_kernel_is_in_a_layer() -> None:
    """A module or package added to ``kernel/`` must be placed in the layers contract (client, service,
    core, contract or foundation), or it could import across the layers unchecked."""
    layers = contracts()["layers"]["layers"]
    listed = {name.strip() for layer in layers for name in layer.replace("|", ":").split(":")}
    present = {
        p.stem if p.suffix == ".py" else p.name
        for p in KERNEL.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    present -= {"_extensions"}
    assert present == listed, f"missing: {sorted(present - listed)}; stale: {sorted(listed - present)}"


def test_every_module_of_the_core_is_in_a_core_layer() -> None:
    """The same inside ``kernel/core/`` (the ``core-layers`` contract)."""
    layers = contracts()["core-layers"]["layers"]
    listed = {name.strip() for layer in layers for name in layer.replace("|", ":").split(":")}
    core = KERNEL / "core"
    present = {
        p.stem if p.suffix == ".py" else p.name
        for p in core.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    assert present == listed, f"missing: {sorted(present - listed)}; stale: {sorted(listed - present)}"


def test_every_service_is_in_the_independence_contract() -> None:
    """Each built-in service's package is checked for imports of the others."""
    from kernel.defaults import BUILTIN_SERVICES

    independent = contracts()["services-independent"]["modules"]
    for service in BUILTIN_SERVICES:
        assert any(service.module == m or service.module.startswith(m + ".") for m in independent), service


SERVICE_PACKAGES = (
    "kernel.agent",
    "kernel.commands",
    "kernel.compat",
    "kernel.events",
    "kernel.gateway",
    "kernel.llm",
    "kernel.messages",
    "kernel.providers",
    "kernel.registrations",
    "kernel.skills",
    "kernel.surfaces",
    "kernel.tools",
)

PROBE = """
import json, sys
from pathlib import Path
home = Path(sys.argv[1])
plugin = home / "plugins" / "observer"
plugin.mkdir(parents=True)
plugin.joinpath("__init__.py").write_text(
    "def register(ctx):\\n    ctx.register_hook('post_tool_call', lambda **kw: None)\\n"
)
from kernel import Kernel
k = Kernel(home=home, services=[] if sys.argv[2] == "none" else None)
k.load()
assert k.plugin("observer").enabled, k.plugin("observer").error
k.invoke_hook("post_tool_call", tool_name="t", args={}, result="r", task_id="", session_id="",
              tool_call_id="", duration_ms=0)
k.shutdown()
print("PROBE " + json.dumps({"services": k.services, "modules": sorted(sys.modules)}))
"""


def _probe(tmp_path: Path, services: str) -> dict:
    bundled = tmp_path / "no-bundled"
    bundled.mkdir()
    env = {**os.environ, "HERMES_BUNDLED_PLUGINS": str(bundled), "PYTHONPATH": str(REPO)}
    env.pop("HERMES_HOME", None)
    return run_probe(PROBE, str(tmp_path / "home"), services, cwd=tmp_path, env=env)


def test_the_core_runs_plugins_with_no_service_at_all(tmp_path: Path) -> None:
    """``Kernel(services=[])``: a hook plugin loads and fires, and no service module is imported."""
    report = _probe(tmp_path, "none")
    assert report["services"] == []
    imported = [m for m in report["modules"] if m.startswith(SERVICE_PACKAGES)]
    assert imported == []


def test_a_service_nobody_asks_for_is_not_imported(tmp_path: Path) -> None:
    """The default services, an empty home and one hook plugin: only the Hermes compatibility service
    (attached at every load) joins; tools, providers, the gateway, MCP, speech ... are not imported."""
    report = _probe(tmp_path, "default")
    assert report["services"] == ["compat"]
    imported = {m.split(".")[1] for m in report["modules"] if m.startswith(SERVICE_PACKAGES)}
    assert imported == {"compat"}, sorted(imported)


def test_the_empty_folders_hermes_makes_in_a_home_attach_nothing(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    """Hermes makes ``skills/``, ``hooks/``... in every home it touches: empty, they ask for no service at
    ``load()``; a skill or a hook folder in them does."""
    for folder in ("skills", "hooks", "memories", "cron", "sessions"):
        (home / folder).mkdir()
    assert make_kernel().services == ["compat"]
    (home / "skills" / "deploy").mkdir()
    (home / "skills" / "deploy" / "SKILL.md").write_text(
        "---\ndescription: Ship it.\n---\n", encoding="utf-8"
    )
    (home / "hooks" / "note").mkdir()
    k = make_kernel()
    assert {"skills", "event_hooks"} <= set(k.services)
    assert [s.name for s in k.skills.all()] == ["deploy"]
    assert "skill_view" in k.tools


def test_import_kernel_loads_no_logging_and_no_service() -> None:
    """``import kernel`` costs the core: logging (the stdlib's and the kernel's), the loader, discovery and
    the caches come with the first kernel, a service with its first use."""
    code = (
        "import sys, kernel; "
        "print(sorted(m for m in sys.modules if m == 'logging' or m.startswith(('kernel.base.log', "
        "'kernel.base.state', 'kernel.base.settings', 'kernel.core.loader', 'kernel.core.sources', "
        "'structlog', 'kernel.tools', 'kernel.providers', 'kernel.gateway', 'jsonschema'))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True, cwd=REPO
    )
    assert proc.stdout.strip() == "[]", proc.stdout


# Names that hold a kernel or a plugin context: ``<holder>._x`` read outside kernel/core/ is a reach
# into the core's private state (the services use ``k.host`` and kernel.core.api instead).
KERNEL_HOLDERS = frozenset({"kernel", "k", "ctx", "_kernel", "host", "_ctx", "_host"})


def _holder_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def private_reaches(source: str) -> list[tuple[int, str]]:
    """Each ``<holder>._name`` (not a dunder) in ``source``, where the holder is a name or an attribute
    named as in :data:`KERNEL_HOLDERS` (``kernel._hooks``, ``self._kernel._records``, ``ctx._record``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        name = _holder_name(node.value)
        if name in KERNEL_HOLDERS:
            found.append((node.lineno, f"{name}.{node.attr}"))
    return found + context_self_reaches(source)


def _is_context_code(node: ast.AST) -> bool:
    """A service's ``Context`` class (its ``self`` is a plugin's context) or a ``ctx`` member written
    as a function whose ``self`` is annotated ``PluginContext``."""
    if isinstance(node, ast.ClassDef):
        return any(_holder_name(base) == "ServiceContext" for base in node.bases)
    if isinstance(node, ast.FunctionDef) and node.args.args:
        first = node.args.args[0]
        return (
            first.arg == "self"
            and first.annotation is not None
            and "PluginContext" in ast.unparse(first.annotation)
        )
    return False


def context_self_reaches(source: str) -> list[tuple[int, str]]:
    """Each ``self._name`` inside a service's context code: the context's private state."""
    found = []
    for scope in ast.walk(ast.parse(source)):
        if not _is_context_code(scope):
            continue
        for node in ast.walk(scope):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append((node.lineno, f"self.{node.attr}"))
    return sorted(set(found))


def test_the_reach_finder_sees_each_form_of_reach() -> None:
    source = "kernel._hooks\nself._kernel._records\nctx._record.x\nk.__dict__\nkernel.host.records\nobj._x\n"
    source += "class Context(ServiceContext):\n    def m(self):\n        return self._undo, self.__class__\n"
    source += "def register_x(self: PluginContext, x):\n    self._record.x = x\n"
    source += "class Other:\n    def m(self):\n        return self._own\n"
    assert sorted(private_reaches(source)) == [
        (1, "kernel._hooks"),
        (2, "_kernel._records"),
        (3, "ctx._record"),
        (9, "self._undo"),
        (11, "self._record"),
    ]


def test_nothing_outside_the_core_reaches_into_its_private_state() -> None:
    reaches = []
    for path in sorted([*KERNEL.rglob("*.py"), *(REPO / "extensions").rglob("*.py")]):
        where = path.relative_to(REPO).as_posix()
        if where.startswith("kernel/core/"):
            continue
        reaches += [
            f"{where}:{line}: {what}" for line, what in private_reaches(path.read_text(encoding="utf-8"))
        ]
    assert not reaches, "use k.host / kernel.core.api instead of the core's private state:\n" + "\n".join(
        reaches
    )


MAX_MODULE_LINES = 800


def test_no_module_is_longer_than_the_wall() -> None:
    """A module grows until it holds two concerns; past this many lines it is split by concern."""
    long = [
        f"{path.relative_to(REPO)}: {lines} lines"
        for root in (KERNEL, REPO / "extensions")
        for path in sorted(root.rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not long, f"over {MAX_MODULE_LINES} lines, split by concern:\n" + "\n".join(long)


def test_no_module_only_stands_for_another() -> None:
    """The old import paths (modules that only re-point ``sys.modules``) are gone: one name per module."""
    aliases = [
        str(path.relative_to(REPO))
        for path in sorted(KERNEL.rglob("*.py"))
        if "sys.modules[__name__] =" in path.read_text(encoding="utf-8")
    ]
    assert not aliases, aliases


#: The core's collaborators that must not reach into another object's private state.
COLLABORATORS = (
    "core/plugin_manager.py",
    "core/registry.py",
    "core/loader.py",
    "core/kernel.py",
    "core/services.py",
)


def foreign_private_uses(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of each ``<x>._name`` where ``<x>`` is not ``self``, ``cls`` or ``super()``:
    a private attribute or method of another object."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_the_foreign_private_finder_sees_each_form() -> None:
    source = "self._kernel._block(n)\nkernel._records\nctx._rollback()\n"
    source += "self._own()\nsuper()._verify()\nx.__name__\n"
    assert foreign_private_uses(source) == [
        (1, "self._kernel._block"),
        (2, "kernel._records"),
        (3, "ctx._rollback"),
    ]


def test_the_core_objects_are_collaborators_not_loops(tmp_path: Path) -> None:
    """The loader is an object the kernel holds, not a base class; ``k.pm`` is given the plugin
    registry, never the kernel; and none of them calls or reads another object's private members."""
    from kernel import Kernel
    from kernel.core.loader import Loader
    from kernel.core.registry import PluginRegistry

    assert Loader not in Kernel.__mro__
    reaches = [
        f"{path.relative_to(REPO)}:{line}: {text}"
        for part in COLLABORATORS
        for path in sorted((KERNEL / part).rglob("*.py") if (KERNEL / part).is_dir() else [KERNEL / part])
        for line, text in foreign_private_uses(path.read_text(encoding="utf-8"))
    ]
    assert not reaches, "a private member of another object; give it a public method:\n" + "\n".join(reaches)

    k = Kernel(home=tmp_path)
    try:
        held = [*vars(k.pm).values(), *vars(k.pm.registry).values()]
        assert not [value for value in held if isinstance(value, Kernel)]
        assert isinstance(k.pm.registry, PluginRegistry)
        assert isinstance(vars(k)["_loader"], Loader)
    finally:
        k.shutdown()
