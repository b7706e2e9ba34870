"""Shell hooks whose programs leave processes behind.

A hook's command runs as the leader of a new process group.  What it starts in
the background (``sleep 1000 &``, a daemon) is ended with it when the hook
returns: SIGTERM first, so it can clean up, then SIGKILL for what ignores that.
``detach: true`` is the opt-out for a hook that must leave something running.
A hook still running when the kernel shuts down has its group ended too.  A
child that starts a session of its own (``setsid``) is out of the kernel's
reach: it survives, and it does not hold the hook even with the hook's output
pipes open.  Every hook is a real program run by a real kernel; every process
is a real process, watched through ``/proc``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import wait_for

from kernel import Kernel
from kernel.surfaces import shell_hooks

PY = sys.executable
DEADLINE = 20.0  # a hang guard for something that should happen, not a measure


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie is dead, only not reaped yet by its parent)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(") ", 1)[1][0] not in "ZX"
    except (OSError, IndexError):
        return False


def read_pid(path: Path) -> int:
    wait_for(lambda: path.exists() and path.read_text().strip().isdigit(), f"{path.name} is written")
    return int(path.read_text())


@pytest.fixture
def leftovers() -> Iterator[list[int]]:
    """Pids a test started; whatever is still alive at the end is killed."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def hook(command: str, **entry: Any) -> shell_hooks.ShellHook:
    parsed = shell_hooks.parse(
        {"hooks": {"on_session_start": [{"command": command, **entry}]}}, ["on_session_start"]
    )
    assert not parsed.problems and not parsed.warnings, parsed.problems + parsed.warnings
    return parsed.hooks[0]


def background(tmp_path: Path, child: str, name: str = "child") -> tuple[str, Path]:
    """A hook command (``sh -c``) that starts ``child`` in the background, writes its pid and exits."""
    pid_file = tmp_path / f"{name}.pid"
    script = f"{child} & echo $! > {shlex.quote(str(pid_file))}"
    return f"sh -c {shlex.quote(script)}", pid_file


def test_a_background_child_ends_when_the_hook_returns(tmp_path: Path, leftovers: list[int]) -> None:
    command, pid_file = background(tmp_path, "sleep 1000")
    run = hook(command).run({"session_id": "s"})
    assert run.error is None and run.exit_code == 0, run.stderr
    pid = read_pid(pid_file)
    leftovers.append(pid)
    wait_for(lambda: not alive(pid), f"the background child {pid} is gone")


def python_child_started(tmp_path: Path, on_sigterm: str) -> int:
    """Run a hook that starts a Python child in the background (its SIGTERM handler ``on_sigterm``)
    and returns once the child is ready; the child's pid."""
    ready = tmp_path / "ready"
    child = f"{shlex.quote(PY)} -c " + shlex.quote(
        "import pathlib, signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, {on_sigterm})\n"
        f"pathlib.Path({str(ready)!r}).write_text('x')\n"
        "time.sleep(1000)\n"
    )
    command, pid_file = background(tmp_path, child)
    script = f"{command}; while [ ! -e {shlex.quote(str(ready))} ]; do sleep 0.01; done"
    run = hook(f"sh -c {shlex.quote(script)}").run({"session_id": "s"})
    assert run.exit_code == 0, run.stderr
    return read_pid(pid_file)


def test_the_group_gets_sigterm_before_sigkill(tmp_path: Path, leftovers: list[int]) -> None:
    """A child that cleans up on SIGTERM gets to do so: it is not killed outright."""
    cleaned = tmp_path / "cleaned"
    handler = f"lambda *a: (pathlib.Path({str(cleaned)!r}).write_text('x'), sys.exit(0))"
    pid = python_child_started(tmp_path, handler)
    leftovers.append(pid)
    wait_for(lambda: not alive(pid), f"the child {pid} is gone")
    assert cleaned.exists(), "the child was killed without a SIGTERM first"


def test_a_child_that_ignores_sigterm_is_killed(tmp_path: Path, leftovers: list[int]) -> None:
    pid = python_child_started(tmp_path, "signal.SIG_IGN")
    leftovers.append(pid)
    wait_for(lambda: not alive(pid), f"the child {pid} that ignores SIGTERM is gone")


def test_detach_leaves_the_group_running(tmp_path: Path, leftovers: list[int]) -> None:
    """``detach: true``: the hook returns at once although the child still holds the hook's pipes."""
    command, pid_file = background(tmp_path, "sleep 1000")
    detached = hook(command, detach=True)
    started = time.monotonic()
    run = detached.run({"session_id": "s"})
    took = time.monotonic() - started
    assert run.error is None and run.exit_code == 0, run.stderr
    pid = read_pid(pid_file)
    leftovers.append(pid)
    assert alive(pid), "a detached hook's child was ended"
    assert took < DEADLINE / 2, f"the hook waited {took:.1f} s for a child it leaves running"
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not alive(pid), f"the detached child {pid} is gone after the test killed it")


def test_detach_must_be_true_or_false() -> None:
    parsed = shell_hooks.parse(
        {"hooks": {"on_session_start": [{"command": "true", "detach": "sometimes"}]}}, ["on_session_start"]
    )
    assert parsed.hooks == []
    assert len(parsed.problems) == 1
    assert "config.yaml" in parsed.problems[0] and "'hooks.on_session_start[0].detach'" in parsed.problems[0]


def test_a_setsid_child_is_out_of_reach_and_does_not_hold_the_hook(
    tmp_path: Path, leftovers: list[int]
) -> None:
    """The documented limit: a child in a session of its own survives the hook; the hook still
    returns promptly, though that child holds its stdout and stderr open."""
    pid_file = tmp_path / "escaped.pid"
    # The child leaves the group (a session of its own) before it writes its pid; the hook's command
    # exits once the pid is there.  The child keeps the hook's stdout and stderr open.
    child = f"{shlex.quote(PY)} -c " + shlex.quote(
        "import os, pathlib, time\n"
        "os.setsid()\n"
        f"pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
        "time.sleep(30)\n"
    )
    script = f"{child} & while [ ! -s {shlex.quote(str(pid_file))} ]; do sleep 0.01; done"
    started = time.monotonic()
    run = hook(f"sh -c {shlex.quote(script)}").run({"session_id": "s"})
    took = time.monotonic() - started
    pid = read_pid(pid_file)
    leftovers.append(pid)
    assert run.exit_code == 0, run.stderr
    assert took < DEADLINE / 2, f"the hook waited {took:.1f} s for a child outside its group"
    assert alive(pid), "a child in its own session is beyond the process group and should survive"


def test_kernel_shutdown_ends_a_hook_still_running(tmp_path: Path, leftovers: list[int]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    pid_file = tmp_path / "child.pid"
    # The hook's own command waits on its child, so the hook is still in flight at shutdown.
    script = f"sleep 1000 & echo $! > {shlex.quote(str(pid_file))}; wait"
    command = f"sh -c {shlex.quote(script)}"
    (home / "config.yaml").write_text(
        yaml.safe_dump({"hooks": {"on_session_start": [{"command": command, "timeout": 300}]}})
    )
    k = Kernel(home=home)
    k.load()
    done = threading.Event()

    def fire() -> None:
        try:
            k.invoke_hook("on_session_start", session_id="s")
        finally:
            done.set()

    thread = threading.Thread(target=fire, daemon=True)
    thread.start()
    pid = read_pid(pid_file)
    leftovers.append(pid)
    assert alive(pid)
    k.shutdown()
    wait_for(lambda: not alive(pid), f"the running hook's child {pid} is gone after shutdown")
    assert done.wait(DEADLINE), "the hook call did not return after shutdown ended its group"
