"""A plugin whose import or ``register()`` never returns is bounded by ``plugins.register_timeout``.

The hanging code waits on an event the test sets at the end, so that no
thread outlives the test; the kernel must not wait for it.  The timeout is
set to a fraction of a second: what is asserted is that the load ends and
what the record says, not how long it took.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from conftest import CLI, cli_env, default_sigint, run_json, write_plugin

from kernel import Kernel

SLEEPS_IN_REGISTER = """
import hook_sink

SCHEMA = {"description": "d", "parameters": {"type": "object"}}

def register(ctx):
    hook_sink.release.wait(60)
    try:
        ctx.register_tool("late", "t", SCHEMA, lambda a, **k: "{}")
        hook_sink.calls.append("late: registered")
    except Exception as exc:
        hook_sink.calls.append(f"late: {exc}")
"""

SPINS_IN_REGISTER = """
import hook_sink

def register(ctx):
    while not hook_sink.release.is_set():
        pass
"""

SLEEPS_ON_IMPORT = """
import hook_sink
hook_sink.release.wait(60)

def register(ctx):
    pass
"""

FINE = """
SCHEMA = {"description": "d", "parameters": {"type": "object"}}

def register(ctx):
    ctx.register_tool("fine", "t", SCHEMA, lambda a, **k: "{}")
    ctx.register_hook("pre_llm_call", lambda **kw: {"context": "fine"})
"""


@pytest.fixture
def release(sink: types.ModuleType) -> Iterator[threading.Event]:
    sink.release = threading.Event()
    yield sink.release
    sink.release.set()


@pytest.mark.parametrize(
    ("code", "what"),
    [(SLEEPS_IN_REGISTER, "register()"), (SPINS_IN_REGISTER, "register()"), (SLEEPS_ON_IMPORT, "its import")],
    ids=["sleeps-in-register", "spins-in-register", "sleeps-on-import"],
)
def test_a_hanging_plugin_is_failed_and_the_others_load(
    make_kernel: Callable[..., Kernel],
    plugin_dir: Callable[..., Path],
    release: threading.Event,
    sink: types.ModuleType,
    code: str,
    what: str,
) -> None:
    plugin_dir("aaa-hangs", code)
    plugin_dir("zzz-fine", FINE)
    k = make_kernel(config={"plugins": {"register_timeout": 0.3}})
    hung = k.plugin("aaa-hangs")
    assert hung.enabled is False
    assert hung.error.startswith(f"{what} did not return within 0.3 s (plugins.register_timeout)")
    assert k.plugin("zzz-fine").enabled is True, "plugins after the hanging one still load"
    assert "fine" in k.tools and k.pre_llm_context(user_message="x") == "fine"

    # When the hanging code finally goes on, what it registers is refused, not added.
    release.set()
    if code is SLEEPS_IN_REGISTER:
        deadline = threading.Event()
        for _ in range(1000):
            if sink.calls:
                break
            deadline.wait(0.01)
        assert sink.calls and "is not registered with the kernel any more" in sink.calls[0], sink.calls
    assert "late" not in k.tools


def test_register_runs_with_the_kernels_locks_available(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], sink: types.ModuleType
) -> None:
    """register() runs on the loader thread while load() waits: registering must not deadlock."""
    plugin_dir("zzz-fine", FINE)
    k = make_kernel(config={"plugins": {"register_timeout": 5}})
    assert k.plugin("zzz-fine").enabled is True and k.plugin("zzz-fine").error is None


def test_zero_turns_the_bound_off_and_runs_register_on_the_calling_thread(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], sink: types.ModuleType
) -> None:
    plugin_dir(
        "where",
        "import threading, hook_sink\n\ndef register(ctx):\n"
        "    hook_sink.calls.append(threading.get_ident())\n",
    )
    make_kernel(config={"plugins": {"register_timeout": 0}})
    assert sink.calls == [threading.get_ident()]


@pytest.mark.parametrize("value", ["soon", -1, True])
def test_a_bad_register_timeout_is_a_config_problem_and_the_default_holds(
    make_kernel: Callable[..., Kernel], value: object
) -> None:
    k = make_kernel(config={"plugins": {"register_timeout": value}})
    assert any("plugins.register_timeout" in p and "using 30 s" in p for p in k.problems)


def test_plugins_list_and_help_are_bounded_by_the_same_timeout(tmp_path: Path) -> None:
    """The CLI in a subprocess: a register() that sleeps for an hour does not hold up the commands."""
    home = tmp_path / "hermes"
    write_plugin(home / "plugins", "sleepy", "import time\n\ndef register(ctx):\n    time.sleep(3600)\n")
    (home / "config.yaml").write_text(
        yaml.safe_dump({"plugins": {"register_timeout": 0.5}}), encoding="utf-8"
    )
    env = cli_env(home)
    listed = subprocess.run(
        [*CLI, "plugins", "list", "--refresh", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    (sleepy,) = [p for p in run_json(listed.stdout) if p["name"] == "sleepy"]
    assert sleepy["enabled"] is False and "plugins.register_timeout" in sleepy["error"]
    helped = subprocess.run(
        [*CLI, "--help"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert helped.returncode == 0 and "usage" in helped.stdout.lower()


ACME = """
from providers import register_provider
from providers.base import ProviderProfile

register_provider(ProviderProfile(name="acme", base_url="http://127.0.0.1:9/v1", auth_type="none"))
"""

LOOKS_UP_A_PROVIDER = """
import hook_sink
from providers import get_provider_profile

def register(ctx):
    hook_sink.calls.append(get_provider_profile("acme").name)
"""


def test_a_register_that_loads_another_plugin_does_not_wait_for_itself(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], sink: types.ModuleType
) -> None:
    """register() looking a model provider up loads the deferred provider plugins from the loader
    thread itself: that nested load runs there and then, instead of queueing behind its caller."""
    plugin_dir(
        "model-providers/acme", ACME, manifest={"name": "acme", "kind": "model-provider", "version": "1"}
    )
    plugin_dir("zz-looker", LOOKS_UP_A_PROVIDER)
    k = make_kernel(config={"plugins": {"register_timeout": 20}})
    assert k.plugin("zz-looker").enabled is True, k.plugin("zz-looker").error
    assert sink.calls == ["acme"]
    assert k.plugin("model-providers/acme").enabled is True


def test_ctrl_c_while_a_plugin_hangs_in_register_ends_the_command(tmp_path: Path) -> None:
    """The main thread waits for the loader thread; Ctrl-C there ends the command with 130 at once."""
    home = tmp_path / "hermes"
    started = tmp_path / "started"
    code = (
        "import pathlib, time\n\ndef register(ctx):\n"
        f"    pathlib.Path({str(started)!r}).touch()\n    time.sleep(3600)\n"
    )
    write_plugin(home / "plugins", "sleepy", code)
    config = yaml.safe_dump({"plugins": {"register_timeout": 3600}})
    (home / "config.yaml").write_text(config, encoding="utf-8")
    proc = subprocess.Popen(
        [*CLI, "plugins", "list", "--refresh"],
        env=cli_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        for _ in range(6000):
            if started.exists() or proc.poll() is not None:
                break
            threading.Event().wait(0.01)
        assert started.exists(), "the plugin's register() never started"
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
