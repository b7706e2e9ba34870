"""The ten published packages loaded together, and a plugin that breaks the rules loaded beside them.

``compat_kernel()`` with no package enables every entry point of the ten;
hermes-local-memory comes in through the directory its installer writes.
Everything that could reach the network is pointed at 127.0.0.1, and the
files the packages write by default under HOME or the working directory stay
in the sandbox of the test.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from local_server import LocalServer, Reply, Seen

from kernel.agent import AgentSession
from kernel.cli import format_plugin_table
from kernel.compat import finder
from kernel.testing import write_plugin, write_script

# Plugin records of the ten packages (stepfun ships two).
TEN = [
    "acp",
    "apertis",
    "creedspace",
    "hermes-loop",
    "image-gen-chain",
    "llm-api-call-logger",
    "local_memory",
    "lossless-hermes",
    "nanogpt-provider",
    "noisegate",
    "stepfun-imggen",
]
# Those that import host modules only the shims provide.
SHIM_DEPENDENT = {
    "apertis": "providers",
    "nanogpt-provider": "hermes_cli",
    "stepfun-imggen": "agent",
    "image-gen-chain": "agent",
}
FACT = "User drinks oolong"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)

# A directory plugin that uses the shims and then misbehaves in every way it can.
ROGUE = '''
"""Breaks the rules: a hook that exits, a tool that returns garbage, middleware that raises."""

from agent.memory_provider import MemoryProvider  # noqa: F401  (served by the shims)
from tools.registry import registry


class Garbage:
    pass


def leave(**kwargs):
    raise SystemExit("rogue: leaving, and taking the host with me")


def garbage(args, **kwargs):
    return Garbage()


def explode(tool_name=None, args=None, next_call=None, **kwargs):
    raise RuntimeError("rogue middleware exploded")


registry.register(
    name="rogue_garbage",
    toolset="rogue",
    schema={"name": "rogue_garbage", "description": "garbage", "parameters": {"type": "object"}},
    handler=garbage,
)


def register(ctx):
    ctx.register_hook("on_session_start", leave)
    ctx.register_hook("pre_llm_call", leave)
    ctx.register_middleware("tool_execution", explode)
'''
# And one that exits while it is imported.
EXITS = """
import sys

sys.exit(3)
"""


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # pragma: no cover - shown on failure only
        pytest.fail(f"not JSON: {text!r}")


def _image(seen: Seen) -> Reply:
    return Reply(200, {"data": [{"b64_json": base64.b64encode(PNG).decode(), "seed": 1}]})


@pytest.fixture
def local(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, compat_site: Path, hermes_home: Path
) -> Iterator[LocalServer]:
    """A local server for every endpoint the ten know, their files in the sandbox, local_memory installed."""
    with LocalServer(default=_image) as server:
        for name, value in {
            "ACP_API_BASE": server.root,
            "ACP_LOCAL_DB": str(tmp_path / "acp" / "local.db"),
            "APERTIS_BASE_URL": server.base_url,
            "APERTIS_API_KEY": "fake-apertis-key",
            "CREEDSPACE_PDP_HTTP_URL": f"{server.root}/v1/decide",
            "LLM_API_CALL_DATA_DIR": str(tmp_path / "llm-calls"),
            "NOISEGATE_ARTIFACT_DIR": str(tmp_path / "noisegate"),
            "STEPFUN_BASE_URL": server.base_url,
            "STEPFUN_API_KEY": "fake-stepfun-key",
        }.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("ACP_BEARER_TOKEN", raising=False)
        (tmp_path / "acp").mkdir()
        _install_local_memory(hermes_home, compat_site)
        yield server


def _install_local_memory(home: Path, site: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "hermes_local_memory.cli", "install-shim"),
            *("--hermes-home", str(home), "--package-root", str(site)),
        ],
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _cli(site: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HERMES_BUNDLED_PLUGINS"}
    env.update(HERMES_HOME=str(home), PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [sys.executable, "-m", "kernel", *args], env=env, capture_output=True, text=True, check=False
    )


def test_all_ten_load_together_and_the_cli_shows_them(
    compat_kernel: Any, compat_site: Path, hermes_home: Path, local: LocalServer
) -> None:
    k = compat_kernel(
        config={"memory": {"provider": "local_memory"}, "context": {"engine": "lossless-hermes"}}
    )
    k.providers.list_providers()  # imports the deferred model-provider entry point (apertis)
    infos = {p.name: p for p in k.plugins}
    for name in TEN:
        assert infos[name].enabled, f"{name}: {infos[name].error}"
        assert infos[name].error is None
        assert infos[name].hook_errors == {}
    assert {p.name for p in k.providers.list_providers()} >= {"apertis", "nanogpt"}
    assert k.providers.memory().name == "local"
    assert k.providers.context_engine().name == "lossless-hermes"
    assert {"init_loop", "memory_search", "lcm_grep"} <= set(k.tools.names())
    assert "calls" in infos["llm-api-call-logger"].commands
    assert {"pre_tool_call", "post_tool_call"} <= set(infos["acp"].hooks)
    assert "transform_tool_result" in infos["noisegate"].hooks
    k.shutdown()

    listed = _cli(compat_site, hermes_home, "plugins", "list", "--json", "--refresh")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in _json(listed.stdout)}
    for name in TEN:
        assert rows[name]["enabled"] is True, f"{name}: {rows[name]['error']}"
        assert rows[name]["error"] is None

    doctor = _cli(compat_site, hermes_home, "doctor", "--json")
    report = _json(doctor.stdout)
    errors = [f for f in report["findings"] if f["level"] == "error"]
    assert errors == [], errors
    assert doctor.returncode == 0
    warned = {f["subject"] for f in report["findings"] if f["level"] == "warning"}
    # What is unusual about two of them is reported, not fatal.
    assert {"'local_memory'", "'noisegate'"} <= warned
    # Loading, listing and diagnosing made no request (acp has no token, nothing generated an image).
    assert local.seen == []


def test_a_plugin_that_breaks_the_rules_cannot_take_the_host_down(
    compat_kernel: Any, compat_site: Path, hermes_home: Path, tmp_path: Path, local: LocalServer
) -> None:
    write_plugin(hermes_home, "rogue", ROGUE)
    write_plugin(hermes_home, "rogue_exit", EXITS)
    script = write_script(
        hermes_home,
        [
            {
                "tool_calls": [
                    {"name": "init_loop", "arguments": {"total_tasks": 2}},
                    {"name": "rogue_garbage", "arguments": {}},
                ]
            },
            {
                "tool_calls": [
                    {"name": "init_loop", "arguments": {"total_tasks": 2}},
                    {"name": "memory_conclude", "arguments": {"content": FACT}},
                    {"name": "generate_image", "arguments": {"prompt": "a teapot", "aspect_ratio": "square"}},
                ]
            },
            "Loop started.",
            "On to the first task.",
        ],
    )
    k = compat_kernel(
        config={
            "model": {"provider": "scripted", "script": str(script)},
            "memory": {"provider": "local_memory"},
            "context": {"engine": "lossless-hermes"},
            "image_gen": {"provider": "stepfun"},
        }
    )
    rogue = k.plugin("rogue")
    assert rogue.enabled, rogue.error
    assert "rogue_garbage" in rogue.tools  # registered through the tools.registry shim
    exits = k.plugin("rogue_exit")
    assert exits.enabled is False
    assert "SystemExit" in (exits.error or "")

    session = AgentSession(k, session_id="rules")
    first = session.run("Start a loop of two tasks, and remember that I drink oolong.")
    assert first.reply == "Loop started."
    calls = [(c.name, _json(c.result)) for c in first.tool_calls]
    # The first call met the raising middleware: as in Hermes, it was skipped and the tool ran.
    assert calls[0][0] == "init_loop" and calls[0][1]["success"] is True
    # The garbage result became an error naming the tool.
    assert calls[1][0] == "rogue_garbage"
    assert "rogue_garbage" in calls[1][1]["error"]
    # With the middleware disabled, the others' tools work.
    assert calls[2][0] == "init_loop" and calls[2][1]["success"] is True
    assert calls[3][0] == "memory_conclude" and calls[3][1]["success"] is True
    assert calls[4][0] == "generate_image" and calls[4][1]["success"] is True, calls[4][1]
    assert Path(calls[4][1]["image"]).read_bytes() == PNG
    # The context of the others' pre_llm_call hooks survived the one that exited.
    assert "<creed-space-constitution" in first.context

    second = session.run("What next?")
    assert second.reply == "On to the first task."
    assert "[HERMES-LOOP] Loop active: 0/2" in second.context
    assert FACT in second.context
    session.close()

    rogue = k.plugin("rogue")
    assert set(rogue.hook_errors) == {"on_session_start", "pre_llm_call"}
    assert all("SystemExit" in error for error in rogue.hook_errors.values())
    assert set(rogue.disabled_hooks) == {"on_session_start", "pre_llm_call"}
    assert any("tool_execution middleware disabled" in w and "RuntimeError" in w for w in rogue.warnings)
    for name in TEN:
        info = k.plugin(name)
        assert info.enabled and info.hook_errors == {} and info.disabled_hooks == [], info

    # The others' side effects happened, in the sandbox.
    assert (Path.cwd() / ".hermes-loop-state.json").is_file()
    with sqlite3.connect(tmp_path / "acp" / "local.db") as conn:
        metered = [row[0] for row in conn.execute("select tool_name from tool_calls")]
    assert {"init_loop", "memory_conclude", "generate_image"} <= set(metered)
    status = k.commands.run("/calls status")
    assert status is not None and str(tmp_path / "llm-calls") in status
    assert [s.path for s in local.posts()] == ["/v1/images/generations"]

    # `plugins list` reports the failures, next to the plugins that are fine.
    table = format_plugin_table(k.plugins)
    assert "hook pre_llm_call disabled: SystemExit" in table
    assert "tool_execution middleware disabled after it failed" in table
    k.shutdown()

    listed = _cli(compat_site, hermes_home, "plugins", "list", "--json", "--refresh")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in _json(listed.stdout)}
    assert rows["rogue_exit"]["enabled"] is False
    assert "SystemExit" in rows["rogue_exit"]["error"]
    assert rows["rogue"]["enabled"] is True
    for name in TEN:
        assert rows[name]["enabled"] is True, f"{name}: {rows[name]['error']}"

    doctor = _cli(compat_site, hermes_home, "doctor", "--json")
    report = _json(doctor.stdout)
    assert doctor.returncode == 1
    failing = {f["subject"] for f in report["findings"] if f["level"] == "error"}
    assert failing == {"'rogue_exit'"}


def test_with_the_shims_off_the_packages_that_need_them_fail_clearly_and_the_rest_load(
    compat_kernel: Any, local: LocalServer
) -> None:
    k = compat_kernel(config={"compat": {"hermes": False}})
    assert finder.enabled() is False
    assert importlib.util.find_spec("agent") is None
    k.providers.list_providers()  # the model-provider entry point is imported on first lookup
    for name in TEN:
        info = k.plugin(name)
        if name in SHIM_DEPENDENT:
            assert info.enabled is False
            assert info.error is not None
            assert info.error.startswith("import failed")
            assert f"No module named '{SHIM_DEPENDENT[name]}'" in info.error
        else:
            assert info.enabled, f"{name}: {info.error}"
            assert info.error is None
    names = {p.name for p in k.providers.list_providers()}
    assert "apertis" not in names and "nanogpt" not in names
    assert "stepfun" not in k.slots.providers("image_gen")
    # The kernel itself is unaffected: its own plugins are there.
    assert k.plugin("calculator").enabled
