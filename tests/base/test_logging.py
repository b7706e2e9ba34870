"""Logging: ``<home>/logs/agent.log``, HERMES_PLUGINS_DEBUG, stdlib plugin logging, redaction, isolation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import agent_log, write_plugin

from kernel import Kernel

# "<ISO timestamp>Z [<level padded>] <event> [<logger>] key=value ..."
LINE = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d+Z) "
    r"(?P<level>\[(?P<name>[a-z]+) *\]) "
    r"(?P<event>.*?) \[(?P<logger>[\w.]+)\]"
)


def parsed(home: Path) -> list[re.Match[str]]:
    """The record lines of agent.log (traceback continuation lines skipped)."""
    return [m for line in agent_log(home).splitlines() if (m := LINE.match(line))]


def lines_with(home: Path, *words: str) -> list[str]:
    return [line for line in agent_log(home).splitlines() if all(w in line for w in words)]


HOOK_FAILS = """
def explode(**kw):
    raise RuntimeError("hook went wrong")

def register(ctx):
    ctx.register_hook("on_session_start", explode)
"""


def test_warnings_reach_agent_log_with_plugin_and_hook_names(plugin_dir, make_kernel, home):
    plugin_dir("unimportable", "import not_a_module_hk_logging\n")
    plugin_dir("hookfail", HOOK_FAILS)
    k = make_kernel()
    assert not k.plugin("unimportable").enabled
    k.invoke_hook("on_session_start", session_id="s1")
    assert "on_session_start" in k.plugin("hookfail").disabled_hooks

    load_failed = lines_with(home, "plugin_load_failed")
    assert len(load_failed) == 1, agent_log(home)
    assert "plugin=unimportable" in load_failed[0]
    assert "not_a_module_hk_logging" in load_failed[0]
    hook_failed = lines_with(home, "hook_failed")
    assert len(hook_failed) == 1, agent_log(home)
    assert "plugin=hookfail" in hook_failed[0]
    assert "hook=on_session_start" in hook_failed[0]
    assert "hook went wrong" in hook_failed[0]

    records = parsed(home)
    assert records, agent_log(home)
    assert {m["name"] for m in records} <= {"warning", "error", "critical"}
    assert "[debug" not in agent_log(home)
    assert "plugin_found" not in agent_log(home)
    assert "source_scanned" not in agent_log(home)


def test_debug_lines_go_to_agent_log_and_stderr(plugin_dir, home, bundled, monkeypatch, capfd):
    monkeypatch.setenv("HERMES_PLUGINS_DEBUG", "1")
    plugin_dir("chatty", "def register(ctx):\n    ctx.register_hook('on_session_end', lambda **kw: None)\n")
    (home / "plugins" / "not_a_plugin").mkdir()
    plugin_dir("unimportable", "import not_a_module_hk_logging\n")
    k = Kernel(home=home)
    try:
        k.load()
    finally:
        k.shutdown()
    text = agent_log(home)
    levels = {m["name"] for m in parsed(home)}
    assert "debug" in levels and "warning" in levels, text
    for event in ("source_scanned", "plugin_found", "plugin_registered", "skip"):
        assert any(m["name"] == "debug" and m["event"] == event for m in parsed(home)), (event, text)
    assert lines_with(home, "plugin_registered", "plugin=chatty")
    assert lines_with(home, "skip", "not_a_plugin")
    assert lines_with(home, "plugin_load_failed", "plugin=unimportable")

    err = capfd.readouterr().err
    for event in ("source_scanned", "plugin_found", "plugin_registered", "plugin_load_failed"):
        assert event in err, (event, err)
    assert "[debug" in err
    assert "chatty" in err


def test_no_debug_on_stderr_without_the_variable(plugin_dir, make_kernel, capfd):
    plugin_dir("quiet")
    make_kernel()
    err = capfd.readouterr().err
    assert "plugin_found" not in err
    assert "source_scanned" not in err


STDLIB_LOGGER = """
import logging

logger = logging.getLogger(__name__)

def register(ctx):
    logger.warning("stdlib says %s", "hello-from-plugin")
    logger.debug("stdlib debug detail")
    ctx.logger.error("ctx logger says %s", "hello-from-ctx")
"""


def test_stdlib_logging_of_plugins_renders_like_kernel_lines(plugin_dir, make_kernel, home):
    plugin_dir("stdlibber", STDLIB_LOGGER)
    plugin_dir("unimportable", "import not_a_module_hk_logging\n")
    k = make_kernel()
    assert k.plugin("stdlibber").enabled, k.plugin("stdlibber").error

    records = {m["event"].split(" ")[0]: m for m in parsed(home)}
    kernel_line = records["plugin_load_failed"]
    plugin_line = next(m for m in parsed(home) if "hello-from-plugin" in m["event"])
    ctx_line = next(m for m in parsed(home) if "hello-from-ctx" in m["event"])
    assert plugin_line["event"] == "stdlib says hello-from-plugin"
    assert plugin_line["name"] == "warning"
    assert ctx_line["name"] == "error"
    # The same layout: timestamp, then the padded level field of the same width.
    assert len(plugin_line["ts"]) == len(kernel_line["ts"])
    assert plugin_line["level"] == kernel_line["level"]
    assert len(ctx_line["level"]) == len(kernel_line["level"])
    assert plugin_line["logger"].startswith(k._namespace)
    assert kernel_line["logger"] != plugin_line["logger"]
    assert "stdlib debug detail" not in agent_log(home)


def test_stdlib_debug_of_plugins_with_the_debug_variable(plugin_dir, home, bundled, monkeypatch):
    monkeypatch.setenv("HERMES_PLUGINS_DEBUG", "true")
    plugin_dir("stdlibber", STDLIB_LOGGER)
    with Kernel(home=home) as k:
        k.load()
    debug = next(m for m in parsed(home) if m["event"] == "stdlib debug detail")
    assert debug["name"] == "debug"


def test_secret_looking_keys_are_redacted(make_kernel, home):
    k = make_kernel()
    k.log.warning("provider_configured", api_key="sk-123", auth_token="tok-456", model="gpt-x")
    text = agent_log(home)
    assert "provider_configured" in text
    assert "sk-123" not in text
    assert "tok-456" not in text
    assert "api_key=***" in text
    assert "model=gpt-x" in text


def test_two_kernels_write_to_their_own_agent_log(tmp_path, bundled):
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    for home, tag in ((home_a, "alpha"), (home_b, "beta")):
        write_plugin(
            home / "plugins",
            f"logger_{tag}",
            f"import logging\n\ndef register(ctx):\n    logging.getLogger(__name__).warning('from {tag}')\n",
        )
    ka, kb = Kernel(home=home_a), Kernel(home=home_b)
    try:
        assert ka._namespace != kb._namespace
        ka.load()
        kb.load()
        ka.log.warning("only_for_a")
        kb.log.warning("only_for_b")
    finally:
        ka.shutdown()
        kb.shutdown()
    text_a, text_b = agent_log(home_a), agent_log(home_b)
    assert "only_for_a" in text_a and "from alpha" in text_a
    assert "only_for_b" in text_b and "from beta" in text_b
    assert "only_for_b" not in text_a and "from beta" not in text_a
    assert "only_for_a" not in text_b and "from alpha" not in text_b


def test_shutdown_detaches_the_handlers(tmp_path, bundled):
    old_home, new_home = tmp_path / "old", tmp_path / "new"
    old = Kernel(home=old_home)
    old.load()
    old.log.warning("before_shutdown")
    namespace = old._namespace
    old.shutdown()
    assert "before_shutdown" in agent_log(old_home)
    before = agent_log(old_home)

    write_plugin(
        new_home / "plugins",
        "late",
        "import logging\n\ndef register(ctx):\n    logging.getLogger(__name__).warning('late plugin line')\n",
    )
    new = Kernel(home=new_home)
    try:
        # The namespace of the shut-down kernel is free again and reused.
        assert new._namespace == namespace
        new.load()
        new.log.warning("after_shutdown")
    finally:
        new.shutdown()
    assert agent_log(old_home) == before
    after = agent_log(new_home)
    assert "after_shutdown" in after
    assert "late plugin line" in after


@pytest.mark.parametrize("value", ["0", "", "no"])
def test_falsy_debug_values_do_not_enable_debug(plugin_dir, home, bundled, monkeypatch, capfd, value):
    monkeypatch.setenv("HERMES_PLUGINS_DEBUG", value)
    plugin_dir("quiet")
    with Kernel(home=home) as k:
        k.load()
        k.log.warning("marker")
    assert "plugin_found" not in agent_log(home)
    assert "plugin_found" not in capfd.readouterr().err


DEFERRED_PROBE = """
import json, os, sys
from pathlib import Path
from kernel import Kernel
home = Path(sys.argv[1])
mode = sys.argv[2]
if mode == "host-listens":
    import logging
    seen = []
    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())
    logging.getLogger("hermes_kernel").addHandler(Keep())
    logging.getLogger("hermes_kernel").setLevel(logging.DEBUG)
k = Kernel(home)
k.discover()  # logs at DEBUG only
before = "logging" in sys.modules
if mode == "host-listens":
    k.load()
if mode == "warning":
    k.log.warning("probe_warning", detail="seen in agent.log")
k.shutdown()
print("PROBE " + json.dumps({
    "logging_before": before,
    "seen": seen if mode == "host-listens" else None,
}))
"""


def _deferred(tmp_path: Path, home: Path, mode: str) -> dict:
    import os

    from conftest import run_probe

    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env["HERMES_BUNDLED_PLUGINS"] = str(tmp_path / "no-bundled")
    (tmp_path / "no-bundled").mkdir(exist_ok=True)
    return run_probe(DEFERRED_PROBE, str(home), mode, cwd=tmp_path, env=env)


def test_a_kernel_that_logs_nothing_anyone_sees_imports_no_logging(tmp_path: Path, home: Path) -> None:
    """``Kernel()`` and a discovery (DEBUG records only) in a process that has not imported ``logging``:
    nobody could see those records, and ``logging`` is still not imported."""
    assert _deferred(tmp_path, home, "quiet")["logging_before"] is False
    assert not (home / "logs" / "agent.log").exists()


def test_a_warning_makes_the_kernels_logging_and_reaches_agent_log(tmp_path: Path, home: Path) -> None:
    assert _deferred(tmp_path, home, "warning")["logging_before"] is False
    assert lines_with(home, "probe_warning", "seen in agent.log")


def test_a_hosts_handler_sees_the_kernels_debug_records(tmp_path: Path, home: Path) -> None:
    """Once the host imported ``logging`` and listens at DEBUG, the kernel's DEBUG records reach it:
    those before its logging was made (a discovery) and each plugin's as it loads."""
    write_plugin(home / "plugins", "listened", "def register(ctx):\n    pass\n")
    seen = _deferred(tmp_path, home, "host-listens")["seen"]
    assert any("source_skipped" in line for line in seen), seen
    assert any("plugin_found" in line and "listened" in line for line in seen), seen
    assert any("plugin_registered" in line and "listened" in line for line in seen), seen
