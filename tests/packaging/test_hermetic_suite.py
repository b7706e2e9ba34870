"""The suite is hermetic: plugins installed in the environment and an ignored SIGINT change no result.

The proofs run part of the suite itself in a child ``pytest``, in the environment a user or a CI runner
might give it (three plugins installed, SIGINT ignored), and assert that it passes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, age

from kernel.core.sources.discovery import scan_entry_points

#: Three small plugins a user might have installed: a hook on every turn, a tool, a command.
EXTRA_PLUGINS = {
    "hk_extra_hooks": (
        "def register(ctx):\n"
        "    ctx.register_hook('pre_llm_call', lambda **kw: {'context': 'extra context'})\n"
        "    ctx.register_hook('post_tool_call', lambda **kw: None)\n"
        "    ctx.register_hook('on_session_start', lambda **kw: None)\n"
    ),
    "hk_extra_tool": (
        "import json\n"
        "SCHEMA = {'description': 'extra', 'parameters': {'type': 'object', 'properties': {}}}\n"
        "def register(ctx):\n"
        "    ctx.register_tool('extra_tool', 'extra', SCHEMA, lambda args, **kw: json.dumps({'ok': 1}))\n"
    ),
    "hk_extra_command": (
        "def register(ctx):\n"
        "    ctx.register_command('extra', lambda raw: 'extra', description='an extra command')\n"
    ),
}

#: A representative part of the suite: listings, hook order, discovery, the CLI, the docs' examples.
#: Chosen to run in well under a minute.
HERMETIC_SUBSET = (
    "tests/core/test_plugins_state.py",
    "tests/core/test_hooks.py",
    "tests/core/test_discovery.py",
    "tests/cli/test_cli.py",
    "tests/docs/test_docs.py::test_an_isolated_example_sees_no_bundled_plugin",
    "tests/docs/test_docs.py::test_examples_run_with_the_bundled_plugins_present",
)


#: Prints the keys of the entry-point plugins a kernel would find.
PROBE = (
    "from kernel.core.sources.discovery import scan_entry_points\n"
    "class Quiet:\n"
    "    def debug(self, *a, **kw): pass\n"
    "print(*sorted(c.key for c in scan_entry_points(Quiet())))\n"
)


def install_extra_plugins(site: Path) -> Path:
    """Write a distribution with three ``hermes_agent.plugins`` entry points into ``site`` as pip would
    leave it (the modules and a ``.dist-info``); ``importlib.metadata`` finds it once ``site`` is on the
    path."""
    site.mkdir(parents=True, exist_ok=True)
    for module, code in EXTRA_PLUGINS.items():
        (site / f"{module}.py").write_text(code, encoding="utf-8")
    info = site / "hk_extra_plugins-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: hk-extra-plugins\nVersion: 1.0\nSummary: extra plugins\n",
        encoding="utf-8",
    )
    lines = [f"{module.removeprefix('hk_')} = {module}" for module in EXTRA_PLUGINS]
    (info / "entry_points.txt").write_text(
        "[hermes_agent.plugins]\n" + "\n".join(lines) + "\n", encoding="utf-8"
    )
    age(site)
    return site


def with_site(site: Path, boot: Path) -> str:
    """A ``PYTHONPATH`` that makes ``site`` a site folder of the child, as the environment's
    ``site-packages`` is (``site`` itself is not on it): a ``sitecustomize`` adds it at start."""
    boot.mkdir()
    (boot / "sitecustomize.py").write_text(f"import site\nsite.addsitedir({str(site)!r})\n", encoding="utf-8")
    return os.pathsep.join(p for p in (str(boot), os.environ.get("PYTHONPATH", "")) if p)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of the child suite: this one's, without what the parent's fixtures set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def run_suite(
    paths: tuple[str, ...], env: dict[str, str], **popen: object
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *paths]
    return subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False, **popen
    )


def test_suite_ignores_plugins_installed_in_the_environment(tmp_path: Path) -> None:
    env = child_env(PYTHONPATH=with_site(install_extra_plugins(tmp_path / "site"), tmp_path / "boot"))
    # The extra plugins are really installed for the child: a kernel left to itself finds them.
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert probe.stdout.split() == ["extra_command", "extra_hooks", "extra_tool"], probe.stdout + probe.stderr
    result = run_suite(HERMETIC_SUBSET, env)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]


def test_the_entry_point_scope_selects_which_installed_distributions_give_plugins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``HERMES_KERNEL_ENTRY_POINTS``: ``all``, ``none``, ``pythonpath`` or a list of folders."""
    site = install_extra_plugins(tmp_path / "site")
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(other))

    def keys(scope: str) -> list[str]:
        monkeypatch.setenv("HERMES_KERNEL_ENTRY_POINTS", scope)
        return sorted(c.key for c in scan_entry_points(Quiet()) if c.key.startswith("extra_"))

    everything = ["extra_command", "extra_hooks", "extra_tool"]
    assert keys("all") == everything
    assert keys("none") == []
    assert keys("pythonpath") == []
    assert keys(os.pathsep.join([str(other), str(site)])) == everything
    monkeypatch.setenv("PYTHONPATH", str(site))
    assert keys("pythonpath") == everything


class Quiet:
    """The logger discovery writes to, for a test that reads only its results."""

    def debug(self, *args: object, **fields: object) -> None:
        pass


#: The tests that stop a child of theirs with Ctrl-C (SIGINT): through a pipe, a pty and a session.
CTRL_C_TESTS = (
    "tests/cli/test_cli_chat.py::test_chat_through_pipes_sigint_interrupts_the_turn_and_on_session_end_fires",
    "tests/cli/test_cli_chat.py::test_chat_in_a_terminal_ctrl_c_at_the_prompt_leaves",
    "tests/adversarial/test_hanging_plugins.py::test_ctrl_c_while_a_plugin_hangs_in_register_ends_the_command",
    "tests/cli/test_cli_ux.py::test_logs_follow_exits_130_on_sigint",
)


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_ctrl_c_tests_pass_when_the_suite_starts_with_sigint_ignored() -> None:
    """As ``nohup make test &`` and some CI runners start it: every child would inherit the ignored SIGINT."""
    result = run_suite(CTRL_C_TESTS, child_env(), preexec_fn=ignore_sigint)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
