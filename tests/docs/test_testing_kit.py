"""The testing kit for plugin authors: kernel.testing and its pytest fixtures (the pytest11 entry point).

The fixtures are tested the way a plugin author uses them: a test file in an empty directory (no
conftest.py), run by ``python -m pytest`` in a subprocess.  One of those files is the example of
docs/testing-plugins.md, copied out of the page, so the documented example is executed as written.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO

from kernel import Kernel, PluginError
from kernel.agent import AgentSession
from kernel.providers.scripted import ScriptedTransport
from kernel.testing import HookRecorder, TestKernel, scripted_config, write_plugin, write_script

DOC = REPO / "docs" / "testing-plugins.md"
DOC_FILE_NAME = "test_shout.py"

# --------------------------------------------------------------------------
# Running a plugin author's test file with pytest, in a subprocess
# --------------------------------------------------------------------------


@dataclass
class PytestRun:
    returncode: int
    output: str
    outcomes: dict[str, str]  # test name -> passed | failed | error | skipped
    messages: dict[str, str]  # test name -> failure or error text


def run_pytest(folder: Path, *extra: str) -> PytestRun:
    """``python -m pytest`` on ``folder`` as a plugin author would run it (no HERMES_* variables)."""
    report = folder.parent / f"{folder.name}-report.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "PYTEST_"))}
    env["HOME"] = str(folder.parent / "author-home")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={report}", *extra, "."],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    if report.is_file():
        for case in ET.parse(report).getroot().iter("testcase"):
            name = case.get("name", "")
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = child.tag
                    messages[name] = f"{child.get('message', '')}\n{child.text or ''}"
            outcomes[name] = outcome.replace("failure", "failed")
    return PytestRun(proc.returncode, proc.stdout + proc.stderr, outcomes, messages)


def documented_test_file() -> str:
    """The ```python block of docs/testing-plugins.md that starts with ``# test_shout.py``."""
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)
    found = [b for b in blocks if b.startswith(f"# {DOC_FILE_NAME}")]
    assert len(found) == 1, (
        f"docs/testing-plugins.md should show exactly one file starting '# {DOC_FILE_NAME}'"
    )
    return found[0]


def author_folder(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for filename, text in files.items():
        (folder / filename).write_text(text, encoding="utf-8")
    return folder


DELIBERATE_FAILURE = """

def test_deliberately_failing(hermes_plugin, hermes_kernel):
    hermes_plugin("shout", SHOUT)
    harness = hermes_kernel(script=["a quiet reply"])
    assert harness.chat("hi") == ["A LOUD REPLY"]
"""


def test_the_documented_example_passes_under_plain_pytest(tmp_path: Path) -> None:
    code = documented_test_file()
    folder = author_folder(tmp_path, "shout-plugin", {DOC_FILE_NAME: code})
    assert sorted(p.name for p in folder.iterdir()) == [DOC_FILE_NAME]  # no conftest.py
    run = run_pytest(folder)
    assert run.returncode == 0, run.output
    documented = re.findall(r"^def (test_\w+)\(", code, flags=re.MULTILINE)
    assert len(documented) >= 3
    assert run.outcomes == dict.fromkeys(documented, "passed"), run.output


def test_a_failing_author_test_is_reported_as_failed(tmp_path: Path) -> None:
    code = documented_test_file() + DELIBERATE_FAILURE
    folder = author_folder(tmp_path, "shout-plugin", {DOC_FILE_NAME: code})
    run = run_pytest(folder)
    assert run.returncode == 1, run.output
    assert run.outcomes.pop("test_deliberately_failing") == "failed", run.output
    assert set(run.outcomes.values()) == {"passed"}, run.output
    # The failure is the real reply of the scripted model, so the fixtures really ran a conversation.
    assert "a quiet reply" in run.messages["test_deliberately_failing"]
    assert re.search(r"\b1 failed, \d+ passed\b", run.output), run.output


def test_the_fixtures_come_from_the_entry_point(tmp_path: Path) -> None:
    folder = author_folder(tmp_path, "shout-plugin", {DOC_FILE_NAME: documented_test_file()})
    run = run_pytest(folder, "-p", "no:hermes_kernel")
    assert run.returncode != 0
    assert (
        "fixture 'hermes_plugin' not found" in run.output or "fixture 'hermes_kernel' not found" in run.output
    )
    assert run.outcomes and set(run.outcomes.values()) == {"error"}, run.output


FIXTURE_CONTRACT = '''
import os
from pathlib import Path

import pytest

from kernel import PluginError

KERNELS = []
HOMES = []


def test_home_is_empty_and_exported(hermes_home):
    assert hermes_home.is_dir() and list(hermes_home.iterdir()) == []
    assert os.environ["HERMES_HOME"] == str(hermes_home)
    HOMES.append(hermes_home)


def test_each_test_gets_its_own_home(hermes_home, hermes_plugin):
    assert hermes_home != HOMES[0]
    path = hermes_plugin("multi", "def register(ctx):\\n    pass\\n", {"name": "multi", "version": "2.0.0"},
                         files={"data/notes.txt": "    kept\\n"})
    assert path == hermes_home / "plugins" / "multi"
    assert (path / "data" / "notes.txt").read_text() == "kept\\n"


def test_kernels_are_loaded_with_a_recorder(hermes_plugin, hermes_kernel):
    hermes_plugin("counter", """
        def register(ctx):
            ctx.register_hook("on_session_start", lambda **kw: None)
    """)
    one = hermes_kernel({"agent": {"max_iterations": 4}}, script=["first"])
    two = hermes_kernel()
    KERNELS.extend([one, two])
    info = one.kernel.plugin("counter")
    assert info.enabled and info.version == "0.0.0"
    assert one.kernel.config["agent"]["max_iterations"] == 4
    assert one.session().max_iterations == 4
    assert one.chat("hello") == ["first"]
    assert one.recorder.names()[0] == "on_session_start"
    assert two.kernel is not one.kernel and two.recorder.names() == []


def test_the_kernels_of_the_previous_test_were_shut_down():
    assert len(KERNELS) == 2
    for harness in KERNELS:
        with pytest.raises(PluginError):
            harness.kernel.register(type("Late", (), {"__name__": "late"})(), name="late")


def test_the_approver_reaches_the_kernel(hermes_plugin, hermes_kernel):
    hermes_plugin("gate", """
        import json

        def register(ctx):
            schema = {"name": "guarded", "description": "d",
                      "parameters": {"type": "object", "properties": {}}}
            ctx.register_tool("guarded", "gate", schema, lambda args, **kw: json.dumps({"ran": True}))
            ctx.register_hook("pre_tool_call", lambda **kw: {"action": "approve", "message": "sure?"})
    """)
    asked = []
    harness = hermes_kernel(approver=lambda request: asked.append(request) or True)
    assert harness.kernel.tools.dispatch("guarded", {}) == '{"ran": true}'
    assert len(asked) == 1
'''


def test_the_fixture_contract_under_plain_pytest(tmp_path: Path) -> None:
    folder = author_folder(tmp_path, "contract", {"test_contract.py": FIXTURE_CONTRACT})
    run = run_pytest(folder)
    assert run.returncode == 0, run.output
    assert len(run.outcomes) == 5 and set(run.outcomes.values()) == {"passed"}, run.output


# --------------------------------------------------------------------------
# The fixtures in this very test session (the entry point is installed)
# --------------------------------------------------------------------------


def test_the_fixtures_work_in_process(
    hermes_home: Path, hermes_plugin: Callable[..., Path], hermes_kernel: Callable[..., TestKernel]
) -> None:
    assert os.environ["HERMES_HOME"] == str(hermes_home)
    hermes_plugin(
        "echo",
        """
        import json

        def register(ctx):
            schema = {"name": "echo", "description": "Echo.",
                      "parameters": {"type": "object", "properties": {}}}
            ctx.register_tool("echo", "echo", schema, lambda args, **kw: json.dumps({"echo": args}))
        """,
    )
    harness = hermes_kernel(script=[{"tool_calls": [{"name": "echo", "arguments": {"x": 1}}]}, "echoed"])
    assert isinstance(harness, TestKernel)
    assert harness.home == hermes_home
    assert harness.chat("echo this") == ["echoed"]
    assert harness.recorder is not None
    (post,) = harness.recorder.of("post_tool_call")
    assert json.loads(post["result"]) == {"echo": {"x": 1}}


def test_two_kernels_of_one_test_each_replay_their_own_script(
    hermes_kernel: Callable[..., TestKernel],
) -> None:
    one = hermes_kernel(script=["from the first script"])
    two = hermes_kernel(script=["from the second script"])
    assert one.chat("hello") == ["from the first script"]
    assert two.chat("hello") == ["from the second script"]


# --------------------------------------------------------------------------
# Direct use of kernel.testing
# --------------------------------------------------------------------------


def test_write_plugin_writes_a_loadable_directory(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = write_plugin(
        home,
        "greeter",
        """
            def register(ctx):
                pass
        """,
        files={"extra/data.yaml": "    a: 1\n", "README.md": "hello\n"},
    )
    assert folder == home / "plugins" / "greeter"
    assert yaml.safe_load((folder / "plugin.yaml").read_text()) == {"name": "greeter", "version": "0.0.0"}
    assert (folder / "__init__.py").read_text().startswith("\ndef register(ctx):\n    pass")
    assert (folder / "extra" / "data.yaml").read_text() == "a: 1\n"
    assert (folder / "README.md").read_text() == "hello\n"

    manifest = {"name": "custom-name", "version": "3.1.4", "description": "given"}
    other = write_plugin(home, "memory/custom", "def register(ctx):\n    pass\n", manifest)
    assert other == home / "plugins" / "memory" / "custom"
    assert yaml.safe_load((other / "plugin.yaml").read_text()) == manifest
    default_named = write_plugin(home, "context_engine/tiny", "def register(ctx):\n    pass\n")
    assert yaml.safe_load((default_named / "plugin.yaml").read_text())["name"] == "tiny"

    with TestKernel(home, record=False) as harness:
        k = harness.kernel
        assert k.plugin("greeter").enabled and k.plugin("greeter").error is None
        assert k.plugin("memory/custom").enabled and k.plugin("memory/custom").version == "3.1.4"
        assert k.plugin("context_engine/tiny").enabled


def test_write_script_and_scripted_config(tmp_path: Path) -> None:
    turns = [
        {"text": "Computing.", "tool_calls": [{"name": "calculate", "arguments": {"expression": "1+1"}}]},
        "1 + 1 = 2 — ünïcode kept",
    ]
    path = write_script(tmp_path, turns)
    assert path == tmp_path / "script.yaml"
    assert yaml.safe_load(path.read_text(encoding="utf-8")) == turns
    assert "ünïcode" in path.read_text(encoding="utf-8")
    other = write_script(tmp_path, ["x"], name="other.yaml")
    assert other.name == "other.yaml" and yaml.safe_load(other.read_text()) == ["x"]

    transport = ScriptedTransport(path)
    first = transport.complete([{"role": "user", "content": "one plus one"}])
    assert [(c.id, c.name, json.loads(c.arguments)) for c in first.tool_calls] == [
        ("call_1", "calculate", {"expression": "1+1"})
    ]
    assert transport.complete([]).text == "1 + 1 = 2 — ünïcode kept"

    assert scripted_config(path) == {"model": {"provider": "scripted", "script": str(path)}}


def test_test_kernel_merges_the_script_into_the_config(tmp_path: Path) -> None:
    config = {"model": {"provider": "openai-compatible", "model": "kept"}, "agent": {"max_iterations": 5}}
    with TestKernel(tmp_path / "home", config, script=["scripted hello"]) as harness:
        model = harness.kernel.config["model"]
        assert model["provider"] == "scripted"
        assert model["model"] == "kept"
        assert Path(model["script"]) == tmp_path / "home" / "script.yaml"
        assert config["model"]["provider"] == "openai-compatible"  # the caller's dict is left alone
        assert harness.chat("hi", "again") == [
            "scripted hello",
            "[scripted model] the script script.yaml has no more turns (1 was played)",
        ]
        session = harness.session(platform="irc")
        assert isinstance(session, AgentSession)
        assert session.platform == "irc" and session.max_iterations == 5
        assert harness.kernel is session.kernel
    with pytest.raises(PluginError):
        harness.kernel.register(type("Late", (), {"__name__": "late"})(), name="late")


def test_test_kernel_chat_uses_one_session_per_call(tmp_path: Path) -> None:
    with TestKernel(tmp_path / "home", script=["a", "b", "c"]) as harness:
        assert harness.chat("one", "two") == ["a", "b"]
        assert harness.chat("three") == ["c"]
        rec = harness.recorder
        assert rec is not None
        starts = [c["session_id"] for c in rec.of("on_session_start")]
        finals = [c["session_id"] for c in rec.of("on_session_finalize")]
        assert len(starts) == 2 and starts == finals and starts[0] != starts[1]


def test_test_kernel_without_a_recorder(tmp_path: Path) -> None:
    with TestKernel(tmp_path / "home", record=False) as harness:
        assert harness.recorder is None
        assert HookRecorder.NAME not in {p.name for p in harness.kernel.plugins}
    with TestKernel(tmp_path / "other") as recorded:
        assert recorded.recorder is not None
        assert HookRecorder.NAME in {p.name for p in recorded.kernel.plugins}


def test_hook_recorder_records_every_hook_after_the_plugins(
    make_kernel: Callable[..., Kernel], plugin_dir
) -> None:
    plugin_dir(
        "zzz-last-plugin",
        """
        def register(ctx):
            def mutate(conversation_history, **kw):
                conversation_history.append("seen by zzz")
                return "from zzz"
            ctx.register_hook("pre_llm_call", mutate)
        """,
    )
    k = make_kernel()
    recorder = HookRecorder().attach(k)
    info = k.plugin(HookRecorder.NAME)
    assert info is not None and info.enabled
    assert sorted(info.hooks) == sorted(h for h in k.hook_names if not h.startswith("register_"))
    assert k.hook_callbacks("pre_llm_call")[-1].plugin == HookRecorder.NAME

    history: list[Any] = []
    context = k.pre_llm_context(
        session_id="s1",
        task_id=None,
        turn_id="t1",
        user_message="hello",
        conversation_history=history,
        is_first_turn=True,
        model=None,
        platform="cli",
        parent_session_id=None,
        sender_id=None,
    )
    assert context == "from zzz"  # the recorder answers nothing, so it adds no context
    k.invoke_hook("on_session_start", session_id="s1", model="m", platform="cli")
    assert recorder.names() == ["pre_llm_call", "on_session_start"]
    (pre,) = recorder.of("pre_llm_call")
    # Called after the plugin, it saw the plugin's change; its record is a copy taken at that moment.
    assert pre["conversation_history"] == ["seen by zzz"]
    history.append("later")
    assert pre["conversation_history"] == ["seen by zzz"]
    assert recorder.of("on_session_start") == [
        {
            "session_id": "s1",
            "model": "m",
            "platform": "cli",
            "telemetry_schema_version": "hermes.observer.v1",
        }
    ]
    assert recorder.calls[1].hook == "on_session_start"
    assert recorder.of("post_llm_call") == []

    recorder.clear()
    assert recorder.calls == [] and recorder.names() == []


def test_hook_recorder_keeps_arguments_that_cannot_be_copied(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    recorder = HookRecorder().attach(k)

    class Uncopyable:
        def __deepcopy__(self, memo: Any) -> Any:
            raise TypeError("no copies")

    thing = Uncopyable()
    k.invoke_hook("pre_gateway_dispatch", event=thing, gateway=None, session_store=None)
    (call,) = recorder.of("pre_gateway_dispatch")
    assert call["event"] is thing


def test_the_kit_is_documented_and_the_index_links_it() -> None:
    index = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    assert "(testing-plugins.md)" in index and "(agent-loop.md)" in index
    text = DOC.read_text(encoding="utf-8")
    for fixture in ("hermes_home", "hermes_plugin", "hermes_kernel"):
        assert f"`{fixture}`" in text
    example = textwrap.dedent(documented_test_file())
    for fixture in ("hermes_home", "hermes_plugin", "hermes_kernel"):
        assert fixture in example, f"the documented test file should use {fixture}"
