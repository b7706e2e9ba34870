"""Event hooks from folders: ``<home>/hooks/<name>/HOOK.yaml`` + ``handler.py``, through a real kernel."""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from conftest import CLI, cli_env, run_json

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.testing import scripted_config, write_script

# Every handler appends one JSON line to <home>/events.jsonl: who heard what.
RECORDING_HANDLER = """
import json, os
from pathlib import Path

def handle(event_type, context):
    line = {{"hook": {who!r}, "event": event_type, "context": context}}
    with open(Path(os.environ["HERMES_HOME"]) / "events.jsonl", "a") as out:
        out.write(json.dumps(line, default=str) + "\\n")
"""


def write_hook(
    home: Path,
    folder: str,
    events: Any = ("agent:end",),
    handler: str | None = None,
    manifest: dict[str, Any] | str | None = None,
) -> Path:
    """Write ``<home>/hooks/<folder>/``; ``manifest=""`` writes no HOOK.yaml, ``handler=""`` no handler.py."""
    path = home / "hooks" / folder
    path.mkdir(parents=True, exist_ok=True)
    if manifest is None:
        manifest = {"name": folder, "description": f"the {folder} hook", "events": list(events)}
    if manifest != "":
        text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
        (path / "HOOK.yaml").write_text(text, encoding="utf-8")
    if handler is None:
        handler = RECORDING_HANDLER.format(who=folder)
    if handler != "":
        (path / "handler.py").write_text(textwrap.dedent(handler), encoding="utf-8")
    return path


def heard(home: Path) -> list[dict[str, Any]]:
    path = home / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_hook_folder_hears_its_events_from_a_real_agent_turn(home: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("HERMES_HOME", str(home))
    lifecycle = ["session:start", "agent:start", "agent:step", "agent:end", "session:end"]
    write_hook(home, "audit", events=lifecycle)
    script = write_script(home, ["Hello there."])
    with Kernel(home, scripted_config(script)) as k:
        k.load()
        info = k.plugin("hooks:audit")
        assert info.enabled and info.error is None
        assert info.kind == "event-hook" and info.source == "hooks"
        assert info.description == f"the audit hook (on {', '.join(lifecycle)})"
        with AgentSession(k, session_id="s-1") as session:
            assert session.run("hi").reply == "Hello there."
    events = [e["event"] for e in heard(home)]
    assert events == lifecycle
    end = heard(home)[3]["context"]
    assert end["session_id"] == "s-1"
    assert end["response"] == "Hello there."
    assert isinstance(end["duration_seconds"], float) and end["duration_seconds"] >= 0


def test_folders_are_called_alphabetically_and_wildcards_after_exact_names(
    make_kernel: Callable[..., Kernel], home: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("HERMES_HOME", str(home))
    write_hook(home, "zeta", events=["command:help"])
    write_hook(home, "Alpha", events=["command:*"])
    write_hook(home, "beta", events=["command:help"])
    k = make_kernel()
    assert k.commands.run("/help", session_id="s-2").startswith("Commands:")
    order = [(e["hook"], e["event"]) for e in heard(home)]
    # Exact-name receivers first (alphabetical folders), then the command:* one.
    assert order == [("beta", "command:help"), ("zeta", "command:help"), ("Alpha", "command:help")]
    context = heard(home)[0]["context"]
    assert context["command"] == "help" and context["session_id"] == "s-2" and context["args"] == ""


def test_an_async_handler_is_awaited_and_emit_collect_returns_answers(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    write_hook(
        home,
        "decider",
        events=["message:pre_route"],
        handler="""
        import asyncio

        async def handle(event_type, context):
            await asyncio.sleep(0)
            return {"decision": "switch_session", "session_id": context["wanted"]}
        """,
    )
    quiet = "def handle(event_type, context):\n    pass\n"
    write_hook(home, "quiet", events=["message:pre_route"], handler=quiet)
    k = make_kernel()
    # The unknown event name is kept, with a warning on the record.
    assert any("message:pre_route" in w for w in k.plugin("hooks:decider").warnings)
    assert k.events.emit_collect("message:pre_route", {"wanted": "s-9"}) == [
        {"decision": "switch_session", "session_id": "s-9"}
    ]


def test_a_failing_handler_is_logged_noted_and_never_blocks_the_others(
    make_kernel: Callable[..., Kernel], home: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("HERMES_HOME", str(home))
    write_hook(home, "a-broken", events=["agent:end"], handler="def handle(e, c):\n    raise SystemExit(3)\n")
    write_hook(home, "b-fine", events=["agent:end"])
    k = make_kernel()
    k.events.emit("agent:end", {"session_id": "x"})
    k.events.emit("agent:end", {"session_id": "y"})
    assert [e["context"]["session_id"] for e in heard(home)] == ["x", "y"]
    info = k.plugin("hooks:a-broken")
    assert info.enabled  # still connected: the next event may succeed
    assert any("failed on event 'agent:end': SystemExit(3)" in w for w in info.warnings)
    log = (home / "logs" / "agent.log").read_text()
    assert "event_receiver_failed" in log and "hooks:a-broken" in log


def test_broken_folders_are_listed_with_a_message_naming_the_folder(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    write_hook(home, "no-manifest", manifest="")
    write_hook(home, "no-handler", handler="")
    write_hook(home, "bad-yaml", manifest="events: [agent:end\nname: x\n")
    write_hook(home, "no-events", manifest={"name": "no-events", "events": []})
    write_hook(home, "not-events", manifest={"name": "not-events", "events": ["agent end", 3]})
    write_hook(home, "no-handle", handler="def other(e, c):\n    pass\n")
    write_hook(home, "import-error", handler="import not_a_module_anywhere\n")
    write_hook(home, "exits", handler="raise SystemExit('bye')\n")
    write_hook(home, "good")
    k = make_kernel()
    errors = {p.name: p.error for p in k.plugins if p.name.startswith("hooks:")}
    assert errors["hooks:good"] is None
    expected = {
        "hooks:no-manifest": "HOOK.yaml is missing",
        "hooks:no-handler": "handler.py is missing",
        "hooks:bad-yaml": "HOOK.yaml is not valid YAML",
        "hooks:no-events": "HOOK.yaml has no events",
        "hooks:not-events": "not event names: 'agent end', 3",
        "hooks:no-handle": "defines no handle(event_type, context) function",
        "hooks:import-error": "failed to import: ModuleNotFoundError",
        "hooks:exits": "failed to import: SystemExit: bye",
    }
    for name, text in expected.items():
        folder = home / "hooks" / name.split(":", 1)[1]
        assert text in (errors[name] or ""), (name, errors[name])
        assert str(folder) in errors[name]
    assert "line 1" in errors["hooks:bad-yaml"] or "line 2" in errors["hooks:bad-yaml"]
    # None of the broken ones hears anything; the good one does.
    assert [r.owner for r in k.events.receivers("agent:end")] == ["hooks:good"]


def test_shutdown_disconnects_the_handlers_and_forgets_their_modules(home: Path, bundled: Path) -> None:
    import sys

    write_hook(home, "gone", events=["agent:end"])
    k = Kernel(home)
    k.load()
    module_names = [m for m in sys.modules if m.endswith(".hook_hooks_gone")]
    assert len(module_names) == 1
    assert [r.owner for r in k.events.receivers("agent:end")] == ["hooks:gone"]
    k.shutdown()
    assert k.events.receivers("agent:end") == []
    assert module_names[0] not in sys.modules


def listed(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [*CLI, "plugins", "list", "--refresh", "--json"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return {p["name"]: p for p in run_json(done.stdout)}


def test_the_cli_lists_hook_folders_and_sees_a_change(home: Path, bundled: Path) -> None:
    write_hook(home, "listed", events=["agent:end", "command:*"])
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled))
    plugins = listed(env)
    assert plugins["hooks:listed"]["error"] is None
    assert plugins["hooks:listed"]["kind"] == "event-hook"
    done = subprocess.run([*CLI, "doctor", "--json"], env=env, capture_output=True, text=True)
    findings = [f for f in run_json(done.stdout)["findings"] if f["subject"] == "'hooks:listed'"]
    assert [(f["level"], f["area"]) for f in findings] == [("info", "surface")]
    assert "on agent:end, command:*" in findings[0]["problem"]
    # The saved listing is not reused once a hook folder changes.
    (home / "hooks" / "listed" / "handler.py").write_text("def nothing():\n    pass\n")
    plugins = listed(env)
    assert "defines no handle" in plugins["hooks:listed"]["error"]
    doctor = subprocess.run([*CLI, "doctor"], env=env, capture_output=True, text=True, check=False)
    assert doctor.returncode == 1
    assert "[error] surface 'hooks:listed'" in doctor.stdout and "defines no handle" in doctor.stdout
    assert f"fix: fix the hook folder {home / 'hooks' / 'listed'}" in doctor.stdout
