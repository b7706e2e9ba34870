"""The architecture's import contracts (``[tool.importlinter]`` in pyproject.toml), checked by import-linter.

Run as a test so that ``make test`` enforces them; a contract that stops holding
fails here with import-linter's own report of the offending imports.  import-linter
runs from ``.venv/lint-site`` (``make test-deps`` installs it there), not from the
project's venv, so that its dependency ``rich`` does not slow down ``import structlog``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from conftest import run_probe

REPO = Path(__file__).resolve().parent.parent
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
