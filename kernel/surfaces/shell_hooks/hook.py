"""One shell hook: its command line, one run of its program, and what its answer means."""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import json
import os
import re
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...tools.decisions import parse_decision
from .. import end_process_group
from .common import (
    _PLACEHOLDER,
    DEFAULT_TIMEOUT,
    EXIT_BLOCK,
    KILL_GRACE,
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

    def run(self, kwargs: Mapping[str, Any], env: Mapping[str, str] | None = None) -> HookRun:
        """Run the command once for an event with ``kwargs``; never raises for the program's failures.

        ``env`` is the program's environment (the kernel passes its own view,
        :class:`~kernel.environ.KernelEnviron`); ``None`` inherits the process's.

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
        try:
            out, err, cut = _communicate(proc, data, self.timeout)
        except subprocess.TimeoutExpired as expired:
            out, err, cut = expired.output or b"", expired.stderr or b"", False
            run.timed_out = True
            run.error = f"timed out after {self.timeout:g} s (its process group was killed)"
        except BaseException:  # KeyboardInterrupt and the like: leave nothing running
            end_process_group(proc)
            raise
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


def _communicate(proc: subprocess.Popen[bytes], data: bytes, timeout: float) -> tuple[bytes, bytes, bool]:
    """Feed ``data``, wait at most ``timeout`` s, and read at most MAX_STDOUT / MAX_STDERR bytes.

    Output past the caps is read and dropped, so a flood costs no memory.
    When the command ends, its whole process group is ended too: a daemon it
    started does not outlive the hook.  On a timeout the group is killed and
    ``TimeoutExpired`` carries what was read.  Returns ``(stdout, stderr, cut)``.
    """
    kept = {"out": bytearray(), "err": bytearray()}
    cut = {"out": False}

    def read(pipe: Any, key: str, cap: int) -> None:
        with contextlib.suppress(OSError, ValueError):
            while block := pipe.read1(65536):
                room = cap - len(kept[key])
                if room > 0:
                    kept[key] += block[:room]
                if len(block) > room and key == "out":
                    cut["out"] = True

    def write() -> None:
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.write(data)
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.close()

    threads = [
        threading.Thread(target=read, args=(proc.stdout, "out", MAX_STDOUT), daemon=True),
        threading.Thread(target=read, args=(proc.stderr, "err", MAX_STDERR), daemon=True),
        threading.Thread(target=write, daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        end_process_group(proc)
        _finish(threads, proc)
        raise subprocess.TimeoutExpired(proc.args, timeout, bytes(kept["out"]), bytes(kept["err"])) from None
    end_process_group(proc)  # what it left running in its session goes with it
    _finish(threads, proc)
    return bytes(kept["out"]), bytes(kept["err"]), cut["out"]


def _finish(threads: list[threading.Thread], proc: subprocess.Popen[bytes]) -> None:
    """Let the pipe threads end; close the pipes if something outside the group still holds them."""
    for thread in threads:
        thread.join(KILL_GRACE)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError, ValueError):
                pipe.close()


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
