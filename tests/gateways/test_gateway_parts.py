"""The gateway's parts: every module in the ``gateway-layers`` contract, and no part holding the facade."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from kernel import Kernel

REPO = Path(__file__).resolve().parents[2]
GATEWAY = REPO / "kernel" / "gateway"


def _layers() -> list[str]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in data["tool"]["importlinter"]["contracts"] if c["id"] == "gateway-layers")
    return contract["layers"]


def test_every_module_of_the_gateway_is_in_a_layer() -> None:
    listed = {name.strip() for layer in _layers() for name in layer.split(":")}
    present = {p.stem for p in GATEWAY.glob("*.py") if p.stem != "__init__"}
    assert present == listed, f"missing: {sorted(present - listed)}; stale: {sorted(listed - present)}"


def test_no_part_imports_the_facade_even_for_annotations() -> None:
    """The ingress, the worker, the conversations and the platforms are given the parts they use: none
    imports ``runner`` (an import under TYPE_CHECKING would hide an object loop from import-linter)."""
    for name in ("ingress", "worker", "membership", "conversations", "platforms", "duplicates"):
        tree = ast.parse((GATEWAY / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.module not in ("runner", "kernel.gateway.runner"), (
                    f"{name}.py imports the Gateway"
                )
            if isinstance(node, ast.Name):
                assert node.id != "Gateway", f"{name}.py names the Gateway"


def test_the_facade_shows_its_parts_state(tmp_path: Path) -> None:
    """``k.gateway.adapters``, ``errors``, ``sessions`` and ``store`` are the parts' own objects."""
    with Kernel(home=tmp_path / "home") as k:
        gateway = k.gateway
        assert gateway.adapters is gateway.platforms.adapters
        assert gateway.errors is gateway.platforms.errors
        assert gateway.sessions is gateway.conversations.sessions
        assert gateway.store is gateway.conversations.store is None
