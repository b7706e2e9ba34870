"""The gateway's parts: every module in the ``gateway-layers`` contract, and no part holding the facade."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from conftest import until

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


def test_two_leases_of_one_chat_in_one_worker_take_turns(tmp_path: Path) -> None:
    """A worker silent past ``claim_after`` (a starved machine) can take its own chat over: the new lease
    and the old one, still in its turn, meet in one process.  The new one waits for the old turn to end
    instead of finding its session mid-turn (which failed the message with ``HostSessionError``)."""
    import asyncio

    from kernel.gateway.broker import Inbound, Lease
    from kernel.gateway.sessions import SqliteSessionStore
    from kernel.gateway.worker import Worker
    from kernel.testing import write_script

    home = tmp_path / "home"
    home.mkdir()
    script = write_script(home, [{"text": f"turn {n}", "delay_s": 0.3} for n in range(2)])
    config = {"model": {"provider": "scripted", "script": str(script)}}
    with Kernel(home=home, config=config) as k:
        k.load()
        conversations = k.gateway.conversations
        store = SqliteSessionStore(tmp_path / "sessions.db")
        conversations.begin(store, bounded=True)
        worker = Worker(k, conversations, broker=None, store=store, concurrency=2)  # type: ignore[arg-type]
        message = Inbound(platform="irc", chat_id="#c", text="hello")

        async def both() -> list[object]:
            old = asyncio.create_task(worker._answer(message, None))
            sessions = conversations.sessions
            await until(lambda: any(s.host.turn is not None for s in sessions.values()), "the old turn")
            taken = Lease(token="t2", chat_key=message.chat_key, message=message, attempts=2)
            return list(await asyncio.gather(old, worker._answer(message, taken)))

        (old_reply, _), (new_reply, _) = asyncio.run(both())
        assert {old_reply.text, new_reply.text} == {"turn 0", "turn 1"}
