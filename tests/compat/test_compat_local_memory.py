"""hermes-local-memory 0.3.1: installed by its own installer, selected as the memory provider, remembering.

The package has no plugin entry point: its ``install-shim`` command writes
``<home>/plugins/local_memory/__init__.py`` (and no ``plugin.yaml``), a shim
that registers the duck-typed ``LocalMemoryProvider`` (named ``local``) and a
maintenance skill that lives in the installed package, outside the plugin
folder.  The user then sets ``memory.provider: local_memory`` (the documented
value) or ``local`` (the provider's own name).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernel.agent import AgentSession
from kernel.testing import write_script

MEMORY_TOOLS = {
    "memory_get_card",
    "memory_set_card",
    "memory_search",
    "memory_context",
    "memory_conclude",
    "memory_consolidate",
    "memory_maintenance",
    "memory_build_peer_review_packet",
    "memory_apply_peer_review_patch",
    "memory_build_reflection_packets",
    "memory_apply_reflection_patch",
    "memory_build_candidate_review_packet",
    "memory_apply_candidate_review_patch",
    "memory_build_card_review_packet",
    "memory_apply_card_review_patch",
    "memory_build_honcho_migration_review_packet",
    "memory_apply_honcho_migration_review_patch",
}
FACT = "User prefers green tea"
# Not an entry-point package: naming it keeps the other nine out (plugins.disabled).
PACKAGE = "hermes-local-memory"


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # pragma: no cover - shown on failure only
        pytest.fail(f"not JSON: {text!r}")


def install_shim(home: Path, site: Path) -> dict[str, Any]:
    """Run the package's own installer, as its README tells a user to."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env["PYTHONPATH"] = str(site)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hermes_local_memory.cli",
            "install-shim",
            "--hermes-home",
            str(home),
            "--package-root",
            str(site),
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return _json(done.stdout)


def test_installer_writes_a_directory_plugin_without_a_manifest(compat_site: Path, hermes_home: Path) -> None:
    report = install_shim(hermes_home, compat_site)

    folder = hermes_home / "plugins" / "local_memory"
    assert Path(report["shim"]).resolve() == (folder / "__init__.py").resolve()
    assert sorted(p.name for p in folder.iterdir()) == ["__init__.py"]  # no plugin.yaml
    shim = (folder / "__init__.py").read_text(encoding="utf-8")
    assert str(compat_site.resolve()) in shim
    assert "ctx.register_memory_provider(LocalMemoryProvider())" in shim
    # It touches nothing else of the home: config.yaml is the user's to edit.
    assert not (hermes_home / "config.yaml").exists()
    assert report["plugin_skill"]["name"] == "local_memory:maintenance"


@pytest.mark.parametrize("selected", ["local_memory", "local"])
def test_selected_by_plugin_or_provider_name_and_remembers_across_turns(
    compat_site: Path, hermes_home: Path, compat_kernel: Any, selected: str
) -> None:
    install_shim(hermes_home, compat_site)
    script = write_script(
        hermes_home,
        [
            {"tool_calls": [{"name": "memory_conclude", "arguments": {"content": FACT}}]},
            "Noted: green tea it is.",
            "You like green tea.",
        ],
    )
    k = compat_kernel(
        PACKAGE,
        config={
            "model": {"provider": "scripted", "script": str(script)},
            "memory": {"provider": selected},
        },
    )

    info = k.plugin("local_memory")
    assert info.enabled, info.error
    assert info.source == "user"
    assert info.error is None
    memory = k.providers.memory()
    assert memory is not None and memory.name == "local"
    assert k.slots.get("memory", "local").plugin == "local_memory"

    # Its tools come from get_tool_schemas(), attributed to the plugin while it is the active provider.
    assert set(k.tools.names()) >= MEMORY_TOOLS
    assert {k.tools.get(name).plugin for name in MEMORY_TOOLS} == {"local_memory"}
    assert set(info.tools) >= MEMORY_TOOLS

    # The packaged skill lives in the installed package, outside the plugin folder: accepted, with a warning.
    assert info.skills == ["maintenance"]
    skill = k.skills.get("local_memory:maintenance")
    assert skill.path == (compat_site / "skills" / "local-memory-maintenance" / "SKILL.md").resolve()
    assert any("maintenance" in w and "outside the plugin directory" in w for w in info.warnings)
    assert "Local Memory" in k.skills.view("local_memory:maintenance")

    session = AgentSession(k, session_id="tea-1")
    first = session.run("Please remember that I prefer green tea.")
    assert first.reply == "Noted: green tea it is."
    [call] = first.tool_calls
    assert call.name == "memory_conclude"
    stored = _json(call.result)
    assert stored["success"] is True
    assert stored["fact"]["content"] == FACT
    # The provider's system prompt block is part of the conversation.
    assert "# Local Memory" in session.messages[0]["content"]

    # The DB is in the sandboxed home (initialize() got the kernel's home), not under ~/.hermes.
    db = hermes_home / "memory" / "local_memory.sqlite"
    assert db.is_file()
    assert not (Path.home() / ".hermes" / "memory").exists()

    # sync_turn stored the finished turn.
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "select role, content from messages where session_id = ? order by id", ("tea-1",)
        ).fetchall()
    assert rows == [
        ("user", "Please remember that I prefer green tea."),
        ("assistant", "Noted: green tea it is."),
    ]

    # The next turn's prefetch recalls the fact into the user's message the model gets.
    second = session.run("Which tea do I like?")
    assert second.reply == "You like green tea."
    assert "# Local Memory" in second.context
    assert FACT in second.context
    [asked] = [m for m in session.messages if m["role"] == "user" and "Which tea" in m["content"]]
    assert FACT in asked["content"]

    # Its tools work through the kernel's dispatch pipeline too.
    found = _json(k.tools.dispatch("memory_search", {"query": "tea"}, session_id="tea-1"))
    assert found["success"] is True
    assert [r["content"] for r in found["results"]] == [FACT]
    context = _json(k.tools.dispatch("memory_context", {"query": "tea"}, session_id="tea-1"))
    assert FACT in context["context"]
    session.close()


def test_a_second_kernel_on_the_same_home_recalls_what_the_first_stored(
    compat_site: Path, hermes_home: Path, compat_kernel: Any
) -> None:
    install_shim(hermes_home, compat_site)
    script = write_script(hermes_home, ["Sure.", "Still green tea."])
    config = {
        "model": {"provider": "scripted", "script": str(script)},
        "memory": {"provider": "local_memory"},
    }
    first = compat_kernel(PACKAGE, config=config)
    with AgentSession(first, session_id="day-1") as session:
        session.run("hello")  # initialize() opens the DB for this home
        saved = _json(first.tools.dispatch("memory_conclude", {"content": FACT}, session_id="day-1"))
        assert saved["success"] is True
    first.shutdown()

    second = compat_kernel(PACKAGE, config=config)
    with AgentSession(second, session_id="day-2") as session:
        turn = session.run("What do I drink in the morning, tea?")
    assert FACT in turn.context
