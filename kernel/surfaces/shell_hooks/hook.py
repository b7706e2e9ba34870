"""One shell hook: its command line, one run of its program, and what its answer means."""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import json
import os
import re
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...tools.decisions import parse_decision
from .. import end_process_group, group_alive
from .common import (
    _PLACEHOLDER,
    DEFAULT_TIMEOUT,
    DRAIN_AFTER_EXIT,
    END_GRACE,
    EXIT_BLOCK,
    MAX_ARGUMENT,
    MAX_STDERR,
    MAX_STDOUT,
    REASON_CHARS,
    SHOWN_CHARS,
    TOOL_EVENTS,
)


@dataclass(frozen=True)
class ShellHook:
    """One hook declared in ``config.yaml``."""

    event: str
    command: str
    argv: tuple[str, ...]
    where: str
    timeout: float = DEFAULT_TIMEOUT
    fail_closed: bool = False
    # Leave what the command started running when it ends (only a timeout still kills the group).
    detach: bool = False
    tools: tuple[str, ...] | None = None
    matcher: re.Pattern[str] | None = None

    def matches(self, tool_name: Any) -> bool:
        """Whether this hook runs for a call of ``tool_name`` (always, for events without a tool)."""
        if self.event not in TOOL_EVENTS:
            return True
        name = tool_name if isinstance(tool_name, str) else ""
        if self.tools is not None and not any(fnmatch.fnmatchcase(name, p) for p in self.tools):
            return False
        return self.matcher is None or self.matcher.fullmatch(name) is not None

    def command_line(self, kwargs: Mapping[str, Any]) -> list[str]:
        """The argv for one run: placeholders replaced inside each argument (never in the program)."""
        values = {
            "tool_name": kwargs.get("tool_name"),
            "session_id": _session(kwargs),
            "event": self.event,
        }

        def value(match: re.Match[str]) -> str:
            found = values[match.group(1)]
            return "" if found is None else str(found)

        program, *rest = self.argv
        argv = [program, *(_PLACEHOLDER.sub(value, arg) for arg in rest)]
        for arg in argv:
            if "\x00" in arg:
                raise CarriedInput("an argument would hold a NUL byte")
            if len(arg) > MAX_ARGUMENT:
                raise CarriedInput(f"an argument would be {len(arg):,} characters (at most {MAX_ARGUMENT:,})")
            try:
                os.fsencode(arg)
            except UnicodeEncodeError:
                raise CarriedInput(
                    "an argument would hold text that cannot be passed (a lone surrogate)"
                ) from None
        return argv

    def stdin_json(self, kwargs: Mapping[str, Any]) -> bytes:
        """The event as the program reads it on stdin: JSON in ASCII (``\\u`` escapes), always encodable."""
        return _dumps(event_payload(self.event, kwargs)).encode("ascii")

    def run(
        self,
        kwargs: Mapping[str, Any],
        env: Mapping[str, str] | None = None,
        running: RunningHooks | None = None,
    ) -> HookRun:
        """Run the command once for an event with ``kwargs``; never raises for the program's failures.

        ``env`` is the program's environment (the kernel passes its own view,
        :class:`~kernel.environ.KernelEnviron`); ``None`` inherits the process's.
        ``running`` is the kernel's record of running hooks, whose groups it
        ends at shutdown (a detached hook is not recorded).

        A run that cannot start because of what the call carries (a NUL byte, an
        oversized value, unencodable text in an argument) is marked so: a
        ``pre_tool_call`` guard then blocks the call even when it fails open.
        """
        try:
            run = HookRun(self, self.command_line(kwargs))
        except CarriedInput as exc:
            run = HookRun(self, list(self.argv), error=f"cannot run for this call: {exc}", refused_input=True)
            interpret(run)
            return run
        try:
            data = self.stdin_json(kwargs)
            proc = subprocess.Popen(
                run.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=None if env is None else dict(env),
            )
        except (OSError, ValueError) as exc:
            run.error = f"could not start: {_os_error(exc)}"
            run.refused_input = isinstance(exc, ValueError) or getattr(exc, "errno", None) == errno.E2BIG
            interpret(run)
            return run
        tracked = None if self.detach else running
        if tracked is not None and not tracked.add(proc):
            end_process_group(proc)
            _close_pipes(proc)
            run.error = "could not run: the kernel is shutting down"
            interpret(run)
            return run
        try:
            out, err, cut = _communicate(proc, data, self.timeout, detach=self.detach)
        except subprocess.TimeoutExpired as expired:
            out, err, cut = expired.output or b"", expired.stderr or b"", False
            run.timed_out = True
            run.error = f"timed out after {self.timeout:g} s (its process group was killed)"
        except BaseException:  # KeyboardInterrupt and the like: leave nothing running
            end_process_group(proc)
            raise
        finally:
            if tracked is not None:
                tracked.discard(proc)
        run.exit_code = proc.returncode
        run.stdout = out.decode("utf-8", "replace")
        run.stderr = err.decode("utf-8", "replace")
        if cut:
            run.warnings.append(f"printed more than {MAX_STDOUT:,} bytes; only the first were read")
        interpret(run)
        return run


class CarriedInput(ValueError):
    """A shell hook that cannot run because of what the call carries."""


@dataclass
class HookRun:
    """What one run of a shell hook did, and what it answers."""

    hook: ShellHook
    argv: list[str]
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    timed_out: bool = False
    # It could not start because of what the call carries (a guard then blocks).
    refused_input: bool = False
    output: Any = None
    result: Any = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``hermes-kernel hooks test --json`` (output trimmed)."""
        return {
            "where": self.hook.where,
            "event": self.hook.event,
            "command": self.hook.command,
            "argv": self.argv,
            "ran": True,
            "skipped": None,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "error": self.error,
            "stdout": _trim(self.stdout),
            "stderr": _trim(self.stderr),
            "output": self.output,
            "result": self.result,
            "warnings": list(self.warnings),
        }


@dataclass
class Parsed:
    """The ``hooks:`` section read: the usable hooks, and what was wrong with the rest."""

    hooks: list[ShellHook] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    configured: bool = False


# --------------------------------------------------------------------------- the protocol


def event_payload(event: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON object given on stdin: the common fields, and every other argument under ``extra``."""
    args = kwargs.get("args")
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = None
    return {
        "hook_event_name": event,
        "tool_name": kwargs.get("tool_name"),
        "tool_input": args if isinstance(args, dict) else None,
        "session_id": _session(kwargs),
        "cwd": cwd,
        "extra": {k: v for k, v in kwargs.items() if k not in ("tool_name", "args", "session_id")},
    }


def interpret(run: HookRun) -> None:
    """Fill ``run.output``, ``run.result`` and ``run.warnings`` from what the program did."""
    hook = run.hook
    gate = hook.event == "pre_tool_call"
    if run.error is not None:
        if gate and (hook.fail_closed or run.refused_input):
            run.result = _failed_closed(hook, run.error)
        return
    text = run.stdout.strip()
    parsed, bad_json = _parse_json(text)
    run.output = parsed
    code = run.exit_code
    if gate and code == EXIT_BLOCK:
        reason = _reason(parsed) or run.stderr.strip()[:REASON_CHARS].strip()
        run.result = {"action": "block", "message": reason or f"blocked by shell hook '{hook.command}'"}
        return
    if code is not None and code < 0:
        run.warnings.append(f"was killed by signal {-code}")
    elif code:
        run.warnings.append(f"exited with code {code}")
    if gate:
        _decide(run, parsed, bad_json)
    elif hook.event == "pre_llm_call":
        _context(run, parsed, bad_json)


def _decide(run: HookRun, parsed: Any, bad_json: str | None) -> None:
    hook = run.hook
    problem = None
    if bad_json is not None:
        problem = f"its output is not JSON ({bad_json})"
    elif parsed is not None:
        try:
            decision = parse_decision(parsed)
        except ValueError as exc:
            problem = f"its output is not a decision: {exc}"
        else:
            run.result = _normalise(hook, decision)
            return
    if problem is None:
        return
    run.warnings.append(problem)
    if hook.fail_closed:
        run.result = _failed_closed(hook, problem)


def _normalise(hook: ShellHook, decision: tuple[str, Any] | None) -> dict[str, Any] | None:
    """A decision in the kernel's own spelling, with a message that names the hook when it gave none."""
    if decision is None:
        return None
    kind, payload = decision
    if kind == "block":
        return {"action": "block", "message": payload or f"blocked by shell hook '{hook.command}'"}
    if kind == "approve":
        message, rule_key = payload
        answer = {"action": "approve", "message": message or f"asked by shell hook '{hook.command}'"}
        if rule_key is not None:
            answer["rule_key"] = rule_key
        return answer
    return {"action": "modify", "args": payload}


def _context(run: HookRun, parsed: Any, bad_json: str | None) -> None:
    if bad_json is not None:
        run.warnings.append(f'its output is not JSON ({bad_json}); expected {{"context": "..."}}')
        return
    if parsed is None:
        return
    if not isinstance(parsed, dict):
        run.warnings.append(f'expected {{"context": "..."}}, got a JSON {type(parsed).__name__}')
        return
    context = parsed.get("context")
    if context is None:
        return
    if not isinstance(context, str):
        run.warnings.append(f"'context' must be a string, not {type(context).__name__}")
        return
    if context.strip():
        run.result = {"context": context}


def _failed_closed(hook: ShellHook, reason: str) -> dict[str, str]:
    return {"action": "block", "message": f"shell hook '{hook.command}' failed closed: {reason}"}


def _reason(parsed: Any) -> str:
    if isinstance(parsed, dict):
        for key in ("message", "reason"):
            value = parsed.get(key)
            if isinstance(value, str) and value.strip():
                return value
    return ""


def _parse_json(text: str) -> tuple[Any, str | None]:
    if not text:
        return None, None
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, str(exc)


# --------------------------------------------------------------------------- processes


def _communicate(
    proc: subprocess.Popen[bytes], data: bytes, timeout: float, *, detach: bool = False
) -> tuple[bytes, bytes, bool]:
    """Feed ``data``, wait at most ``timeout`` s, and read at most MAX_STDOUT / MAX_STDERR bytes.

    Output past the caps is read and dropped, so a flood costs no memory.
    When the command ends, the rest of its process group is ended too
    (SIGTERM, END_GRACE seconds, SIGKILL), unless ``detach``: a daemon it
    started does not outlive the hook.  What is still arriving on its pipes
    then is read for DRAIN_AFTER_EXIT seconds at most, so a process that holds
    them from outside the group (``setsid``, or a detached child) does not hold
    the hook.  On a timeout the group is killed and ``TimeoutExpired``
    carries what was read.  Returns ``(stdout, stderr, cut)``.
    """
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd, in_fd = proc.stdout.fileno(), proc.stderr.fileno(), proc.stdin.fileno()
    kept = {out_fd: bytearray(), err_fd: bytearray()}
    caps = {out_fd: MAX_STDOUT, err_fd: MAX_STDERR}
    cut = False
    pending = memoryview(data)
    selector = selectors.DefaultSelector()
    exit_fd = _exit_notifier(proc.pid)
    try:
        for fd in (out_fd, err_fd, in_fd):
            os.set_blocking(fd, False)
        selector.register(out_fd, selectors.EVENT_READ)
        selector.register(err_fd, selectors.EVENT_READ)
        if pending:
            selector.register(in_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        if exit_fd is not None:
            selector.register(exit_fd, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        timed_out = False
        drain_until: float | None = None
        while True:
            if drain_until is None and proc.poll() is not None:
                if not detach:
                    end_process_group(proc, END_GRACE)  # what it left running in its group goes with it
                drain_until = time.monotonic() + DRAIN_AFTER_EXIT
            if drain_until is not None:
                _unregister(selector, exit_fd)
                if pending:
                    _unregister(selector, in_fd)
                    pending = pending[:0]
                    _close(proc.stdin)
            now = time.monotonic()
            if drain_until is None and now >= deadline:
                timed_out = True
                end_process_group(proc)
                drain_until = time.monotonic() + DRAIN_AFTER_EXIT
                continue
            reading = [k for k in selector.get_map().values() if k.fd in kept]
            if drain_until is not None and (not reading or now >= drain_until):
                break
            wake = drain_until if drain_until is not None else deadline
            if exit_fd is None and drain_until is None:
                wake = min(wake, now + 0.02)  # no pidfd: look at the command now and then
            for key, _ in selector.select(max(0.0, wake - now)):
                if key.fd == exit_fd:
                    continue
                if key.fd == in_fd:
                    try:
                        written = os.write(in_fd, pending[:65536])
                    except BlockingIOError:
                        continue
                    except OSError:  # the program closed its stdin or ended
                        written = len(pending)
                    pending = pending[written:]
                    if not pending:
                        _unregister(selector, in_fd)
                        _close(proc.stdin)
                    continue
                try:
                    block = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                except OSError:
                    block = b""
                if not block:
                    _unregister(selector, key.fd)
                    continue
                room = caps[key.fd] - len(kept[key.fd])
                if room > 0:
                    kept[key.fd] += block[:room]
                if len(block) > room and key.fd == out_fd:
                    cut = True
    finally:
        selector.close()
        if exit_fd is not None:
            os.close(exit_fd)
        _close_pipes(proc)
    if timed_out:
        raise subprocess.TimeoutExpired(proc.args, timeout, bytes(kept[out_fd]), bytes(kept[err_fd]))
    return bytes(kept[out_fd]), bytes(kept[err_fd]), cut


class RunningHooks:
    """The shell hooks of one kernel that are running now, to end their groups at shutdown."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._closed = False

    def add(self, proc: subprocess.Popen[bytes]) -> bool:
        """Record a hook's command; ``False`` once the kernel is shutting down (it must not run)."""
        with self._lock:
            if self._closed:
                return False
            self._procs.add(proc)
            return True

    def discard(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def close(self, grace: float = END_GRACE) -> None:
        """End the group of every hook still running: SIGTERM, up to ``grace`` s, then SIGKILL.

        The thread running each hook reaps its command and returns as usual.
        """
        with self._lock:
            self._closed = True
            groups = [p.pid for p in self._procs if p.returncode is None]
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(group_alive(pgid) for pgid in groups):
            time.sleep(0.01)
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)


def _exit_notifier(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` ends (Linux pidfd), or ``None``."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _unregister(selector: selectors.BaseSelector, fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(fd)


def _close(pipe: Any) -> None:
    with contextlib.suppress(OSError, ValueError):
        pipe.close()


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            _close(pipe)


def _os_error(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        name = f": {exc.filename!r}" if exc.filename else ""
        return f"{exc.strerror}{name}"
    return str(exc)


def _session(kwargs: Mapping[str, Any]) -> Any:
    value = kwargs.get("session_id")
    return value if value is not None else kwargs.get("parent_session_id")


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=True, default=_json_default)
    except (TypeError, ValueError, RecursionError):  # keys that are not strings, a cycle, too deep
        return json.dumps(_jsonable(value, 0), ensure_ascii=True, default=str)


def _json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def _jsonable(value: Any, depth: int) -> Any:
    if depth > 50:
        return "..."
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v, depth + 1) for v in value]
    return str(value)


def _trim(text: str, limit: int = SHOWN_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"
