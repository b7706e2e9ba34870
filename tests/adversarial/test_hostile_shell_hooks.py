"""Shell hooks against calls that carry hostile values, and hook programs that misbehave.

A fail-open ``pre_tool_call`` guard must never be switched off by what the call
carries (a lone surrogate in the arguments, a NUL byte or a 200 KB value in a
placeholder): the payload is always encodable, and a guard that still cannot run
for that call blocks it.  A hook program that floods its output costs bounded
memory, and one that leaves a daemon behind does not keep it.  Every hook is a
real program run by a real kernel.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernel import Kernel
from kernel.surfaces import shell_hooks

SCHEMA = {"description": "Echo.", "parameters": {"type": "object", "properties": {}}}
PY = sys.executable


def echo_plugin(plugin_dir: Callable[..., Path], ran: Path) -> None:
    plugin_dir(
        "echo",
        "import json, pathlib\n\n"
        "def echo(args, **kw):\n"
        f"    pathlib.Path({str(ran)!r}).write_text('ran')\n"
        "    return json.dumps({'ok': True})\n\n"
        "def register(ctx):\n"
        f"    ctx.register_tool('echo', 'demo', {SCHEMA!r}, echo)\n",
    )


def guard(tmp_path: Path) -> str:
    """A guard program that reads the event and blocks every call (exit code 2), logging what it saw."""
    script = tmp_path / "guard.py"
    seen = tmp_path / "seen.json"
    script.write_text(
        "import json, sys\n"
        "event = json.load(sys.stdin)\n"
        f"open({str(seen)!r}, 'w').write(json.dumps(event['tool_input']))\n"
        "print(json.dumps({'action': 'block', 'message': 'the guard says no'}))\n"
        "sys.exit(2)\n",
        encoding="utf-8",
    )
    return f"{PY} {script} {{session_id}}"


@pytest.mark.parametrize(
    ("args", "session"),
    [
        ({"text": "\ud800 lone surrogate"}, "s-1"),
        ({"text": "fine"}, "nul\x00byte"),
        ({"text": "fine"}, "x" * 200_000),
        ({"text": "fine"}, "surrogate\udfff"),
    ],
    ids=["surrogate-in-args", "nul-in-placeholder", "huge-placeholder", "surrogate-in-placeholder"],
)
def test_a_fail_open_guard_is_never_bypassed_by_what_the_call_carries(
    plugin_dir: Callable[..., Path],
    make_kernel: Callable[..., Kernel],
    tmp_path: Path,
    args: Any,
    session: str,
) -> None:
    ran = tmp_path / "ran"
    echo_plugin(plugin_dir, ran)
    k = make_kernel(config={"hooks": [{"event": "pre_tool_call", "command": guard(tmp_path)}]})
    out = json.loads(k.tools.dispatch("echo", args, session_id=session))
    assert "error" in out, out
    assert not ran.exists(), "the tool ran although its guard could not have approved it"


def test_the_payload_escapes_surrogates_instead_of_failing(tmp_path: Path) -> None:
    """The event reaches the program as ASCII JSON; the guard reads back exactly the text sent."""
    parsed = shell_hooks.parse(
        {"hooks": [{"event": "pre_tool_call", "command": guard(tmp_path)}]}, ["pre_tool_call"]
    )
    run = parsed.hooks[0].run({"tool_name": "echo", "args": {"text": "\ud800"}, "session_id": "s"})
    assert run.result == {"action": "block", "message": "the guard says no"}
    assert json.loads((tmp_path / "seen.json").read_text()) == {"text": "\ud800"}


def test_a_flood_of_output_is_read_but_not_kept(tmp_path: Path) -> None:
    """A hook printing 64 MB: the run finishes, keeps at most 1 MiB of it, and says it cut the rest."""
    script = tmp_path / "flood.py"
    script.write_text(
        "import sys\nblock = b'y' * (1 << 20)\nfor _ in range(64):\n    sys.stdout.buffer.write(block)\n",
        encoding="utf-8",
    )
    parsed = shell_hooks.parse(
        {"hooks": [{"event": "post_tool_call", "command": f"{PY} {script}"}]}, ["post_tool_call"]
    )
    run = parsed.hooks[0].run({"tool_name": "echo", "session_id": "s"})
    assert run.error is None and run.exit_code == 0
    assert len(run.stdout) == shell_hooks.MAX_STDOUT
    assert any("only the first were read" in w for w in run.warnings)


def test_a_daemon_started_by_a_hook_does_not_outlive_it(tmp_path: Path) -> None:
    """A hook that starts a background process (detached from its pipes) and exits: that process
    is killed with the hook's process group."""
    pid_file = tmp_path / "daemon.pid"
    script = tmp_path / "daemonize.py"
    script.write_text(
        "import subprocess, sys\n"
        f"child = subprocess.Popen([{PY!r}, '-c', 'import time; time.sleep(300)'],\n"
        "    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n",
        encoding="utf-8",
    )
    parsed = shell_hooks.parse(
        {"hooks": [{"event": "post_tool_call", "command": f"{PY} {script}"}]}, ["post_tool_call"]
    )
    run = parsed.hooks[0].run({"tool_name": "echo", "session_id": "s"})
    assert run.exit_code == 0, run.stderr
    pid = int(pid_file.read_text())
    for _ in range(100):  # the kill is immediate; reaping by init may take a moment
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid), f"the daemon {pid} is still running"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"  # a zombie is dead, only not reaped
    except (OSError, IndexError):
        return False
