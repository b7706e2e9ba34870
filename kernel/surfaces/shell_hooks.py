"""Shell hooks: programs declared under ``hooks:`` in ``config.yaml``, run when a kernel hook fires.

Two spellings are accepted (see docs/shell-hooks.md)::

    hooks:                                  hooks:
      - event: pre_tool_call                  pre_tool_call:
        command: "python3 guard.py"             - command: "python3 guard.py"
        when: {tools: [terminal]}                 matcher: "terminal|write_.*"
        timeout: 10                               timeout: 10
        fail_closed: true                         fail_closed: true

Every hook becomes one callback of the surface record ``config:shell-hooks``,
registered in the ``CONFIGURED`` tier so that it runs after every plugin's
callbacks.  A hook runs its command without a shell: the command is split like
a shell would split it, ``{tool_name}``, ``{session_id}`` and ``{event}`` are
replaced inside single arguments, and the whole event goes to the program's
stdin as JSON.  The program answers on stdout (JSON) and with its exit code.
A callback never raises: a hook that cannot run fails open (no answer) unless
it is declared ``fail_closed``.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import fnmatch
import inspect
import json
import math
import os
import re
import shlex
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..decisions import parse_decision
from ..hooks import CONFIGURED
from ..hookspecs import SLOT_HOOKS
from . import end_process_group

if TYPE_CHECKING:
    from ..kernel import Kernel

SURFACE = "config:shell-hooks"
KIND = "shell-hooks"
DEFAULT_TIMEOUT = 60.0
MIN_TIMEOUT = 1.0
MAX_TIMEOUT = 300.0
# Events that carry a tool name: ``when.tools`` and ``matcher`` apply only to these.
TOOL_EVENTS = frozenset({"pre_tool_call", "post_tool_call", "transform_tool_result"})
# Sub-sections of ``hooks:`` that real Hermes uses for other things; not events.
RESERVED_KEYS = ("output_spill", "outbound")
EXIT_BLOCK = 2
REASON_CHARS = 400
SHOWN_CHARS = 2000
KILL_GRACE = 5.0
TEST_SESSION = "hooks-test"
# What is kept of a run's output (the rest is read and dropped), and the longest argument passed.
MAX_STDOUT = 1024 * 1024
MAX_STDERR = 64 * 1024
MAX_ARGUMENT = 32 * 1024

_PLACEHOLDER = re.compile(r"\{(tool_name|session_id|event)\}")
_ENTRY_KEYS = frozenset({"command", "when", "matcher", "timeout", "fail_closed", "failClosed"})
_STDIN_KEYS = ("hook_event_name", "tool_input", "extra")


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


# --------------------------------------------------------------------------- parsing


def parse(config: Mapping[str, Any], hook_names: Iterable[str], ceiling: float | None = None) -> Parsed:
    """Read the ``hooks:`` section of ``config``.

    ``hook_names`` are the events a hook may be declared on; ``ceiling`` is the
    kernel's ``plugins.hook_timeout``, which every hook's timeout is kept below.
    """
    names = [n for n in hook_names if n not in SLOT_HOOKS]
    out = Parsed()
    value = config.get("hooks") if isinstance(config, Mapping) else None
    if value is None:
        return out
    if isinstance(value, list):
        out.configured = bool(value)
        for i, entry in enumerate(value):
            where = f"hooks[{i}]"
            if not isinstance(entry, Mapping):
                out.problems.append(
                    f"config.yaml: '{where}' must be a mapping with 'event' and 'command', "
                    f"not {_kind(entry)}; skipped"
                )
                continue
            event = entry.get("event")
            if not isinstance(event, str) or not event:
                out.problems.append(
                    f"config.yaml: '{where}.event' must name a hook event (e.g. pre_tool_call), "
                    f"not {event!r}; skipped"
                )
                continue
            if _check_event(out, event, where, names):
                _add_entry(out, event, entry, where, ceiling, listed=True)
    elif isinstance(value, Mapping):
        for key, entries in value.items():
            if key in RESERVED_KEYS:
                out.notes.append(f"config.yaml: 'hooks.{key}' is not a shell hook event; ignored")
                continue
            out.configured = True
            event, where = str(key), f"hooks.{key}"
            if entries is None:
                continue
            if isinstance(entries, Mapping):
                entries = [entries]
            if not isinstance(entries, list):
                out.problems.append(
                    f"config.yaml: '{where}' must be a list of hooks (each with 'command'), "
                    f"not {_kind(entries)}; skipped"
                )
                continue
            if not _check_event(out, event, where, names):
                continue
            for j, entry in enumerate(entries):
                if not isinstance(entry, Mapping):
                    out.problems.append(
                        f"config.yaml: '{where}[{j}]' must be a mapping with 'command', "
                        f"not {_kind(entry)}; skipped"
                    )
                    continue
                _add_entry(out, event, entry, f"{where}[{j}]", ceiling, listed=False)
    else:
        out.problems.append(
            "config.yaml: 'hooks' must be a list of hooks (each with 'event' and 'command') or a mapping "
            f"of event names to lists of hooks, not {_kind(value)}; ignored"
        )
    return out


def unknown_event(event: str, hook_names: Iterable[str]) -> str | None:
    """Why ``event`` cannot carry a shell hook (naming the closest valid event), or ``None``."""
    names = sorted(n for n in hook_names if n not in SLOT_HOOKS)
    if event in SLOT_HOOKS:
        return f"'{event}' hands Python objects to plugins; a shell hook cannot answer it"
    if event in names:
        return None
    close = difflib.get_close_matches(event, names, n=1)
    if close:
        return f"unknown hook event '{event}' (did you mean '{close[0]}'?)"
    return f"unknown hook event '{event}' (valid events: {', '.join(names)})"


def _check_event(out: Parsed, event: str, where: str, names: list[str]) -> bool:
    problem = unknown_event(event, names)
    if problem is None:
        return True
    out.warnings.append(f"config.yaml: '{where}': {problem}; skipped")
    return False


def _add_entry(
    out: Parsed, event: str, entry: Mapping[str, Any], where: str, ceiling: float | None, *, listed: bool
) -> None:
    """Validate one entry; add it to ``out.hooks`` or report why it is skipped."""
    allowed = _ENTRY_KEYS | {"event"} if listed else _ENTRY_KEYS
    unknown = sorted(str(k) for k in entry if k not in allowed)
    if unknown:
        hint = " (the event is the key above it)" if unknown == ["event"] else ""
        out.warnings.append(f"config.yaml: '{where}': unknown key(s) {', '.join(unknown)} ignored{hint}")

    def problem(key: str, text: str) -> None:
        out.problems.append(f"config.yaml: '{where}.{key}' {text}; this hook is skipped")

    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        return problem(
            "command", f"must be a non-empty string (a program and its arguments), not {command!r}"
        )
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return problem("command", f"cannot be split into arguments ({exc})")
    if not words:
        return problem("command", "names no program")
    argv = tuple(os.path.expanduser(w) if w.startswith("~") else w for w in words)

    timeout = DEFAULT_TIMEOUT
    given = entry.get("timeout")
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int | float) or math.isnan(given):
            return problem(
                "timeout", f"must be a number of seconds ({MIN_TIMEOUT:g} to {MAX_TIMEOUT:g}), not {given!r}"
            )
        timeout = min(max(float(given), MIN_TIMEOUT), MAX_TIMEOUT)
        if timeout != given:
            out.warnings.append(
                f"config.yaml: '{where}.timeout' {given!r} is outside {MIN_TIMEOUT:g}..{MAX_TIMEOUT:g} s; "
                f"using {timeout:g}"
            )
    if ceiling is not None and timeout >= ceiling:
        lowered = round(ceiling * 0.9, 3)
        if given is not None:
            out.warnings.append(
                f"config.yaml: '{where}.timeout' lowered to {lowered:g} s so that the hook ends before "
                f"plugins.hook_timeout ({ceiling:g} s)"
            )
        timeout = lowered

    fail_closed = False
    for key in ("fail_closed", "failClosed"):
        if key in entry and entry[key] is not None:
            if not isinstance(entry[key], bool):
                return problem(key, f"must be true or false, not {entry[key]!r}")
            fail_closed = fail_closed or entry[key]
    if fail_closed and event != "pre_tool_call":
        out.warnings.append(f"config.yaml: '{where}': only pre_tool_call hooks can fail closed; ignored")
        fail_closed = False

    tools = None
    when = entry.get("when")
    if when is not None:
        if not isinstance(when, Mapping):
            return problem("when", f"must be a mapping such as {{tools: [terminal]}}, not {when!r}")
        extra = sorted(str(k) for k in when if k != "tools")
        if extra:
            out.warnings.append(f"config.yaml: '{where}.when': unknown key(s) {', '.join(extra)} ignored")
        listed_tools = when.get("tools")
        if isinstance(listed_tools, str):
            listed_tools = [listed_tools]
        if listed_tools is not None:
            if (
                not isinstance(listed_tools, list)
                or not listed_tools
                or not all(isinstance(t, str) and t for t in listed_tools)
            ):
                return problem("when.tools", f"must be a non-empty list of tool names, not {listed_tools!r}")
            tools = tuple(listed_tools)

    matcher = None
    pattern = entry.get("matcher")
    if pattern is not None:
        if not isinstance(pattern, str):
            return problem("matcher", f"must be a regular expression (a string), not {pattern!r}")
        try:
            matcher = re.compile(pattern)
        except re.error as exc:
            out.warnings.append(
                f"config.yaml: '{where}.matcher' {pattern!r} is not a valid regular expression ({exc}); "
                "it matches that exact tool name only"
            )
            matcher = re.compile(re.escape(pattern))

    if event not in TOOL_EVENTS and (tools is not None or matcher is not None):
        out.warnings.append(
            f"config.yaml: '{where}': '{event}' has no tool name, so 'when.tools' / 'matcher' are ignored"
        )
        tools = matcher = None

    out.hooks.append(
        ShellHook(
            event=event,
            command=command.strip(),
            argv=argv,
            where=where,
            timeout=timeout,
            fail_closed=fail_closed,
            tools=tools,
            matcher=matcher,
        )
    )
    return None


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"a {type(value).__name__} ({value!r})"[:120]


# --------------------------------------------------------------------------- the kernel side


def load(kernel: Kernel) -> None:
    """Register the hooks of ``config.yaml`` on the surface record ``config:shell-hooks``."""
    if kernel.config.get("hooks") is None:
        return
    parsed = parse(kernel.config, kernel.hook_names, ceiling=kernel._hooks.timeout)
    for note in parsed.notes:
        kernel.log.debug("shell_hooks_note", detail=note)
    for problem in parsed.problems:
        kernel._config_problem(problem)
    for warning in parsed.warnings:
        kernel.log.warning("shell_hook_config", detail=warning)
    if not parsed.configured:
        return

    def setup(ctx: Any) -> None:
        for hook in parsed.hooks:
            ctx._add_hook(hook.event, make_callback(kernel, hook), CONFIGURED)

    record = kernel._add_surface(SURFACE, KIND, setup, description=describe(parsed.hooks))
    record.warnings.extend(parsed.problems + parsed.warnings)


def describe(hooks: list[ShellHook]) -> str:
    """The one-line status of the surface record: ``"2 shell hooks (pre_tool_call, post_tool_call)"``."""
    events = list(dict.fromkeys(h.event for h in hooks))
    noun = "shell hook" if len(hooks) == 1 else "shell hooks"
    return f"{len(hooks)} {noun}" + (f" ({', '.join(events)})" if events else "")


def make_callback(kernel: Kernel, hook: ShellHook) -> Callable[..., Any]:
    """The kernel callback of ``hook``: runs it when it matches and answers per the protocol; never raises."""
    log = kernel.log

    def callback(**kwargs: Any) -> Any:
        try:
            if not hook.matches(kwargs.get("tool_name")):
                return None
            run = hook.run(kwargs, kernel.environ.child())
            if run.error is not None:
                outcome = "blocked (fail_closed)" if run.result is not None else "ignored (fails open)"
                log.warning(
                    "shell_hook_failed",
                    hook=hook.event,
                    command=hook.command,
                    error=run.error,
                    outcome=outcome,
                )
            for problem in run.warnings:
                log.warning("shell_hook_output", hook=hook.event, command=hook.command, problem=problem)
            return run.result
        except Exception as exc:  # a bug here must not disable the hook for the kernel's life
            error = f"{type(exc).__name__}: {exc}"
            with contextlib.suppress(Exception):
                log.warning("shell_hook_failed", hook=hook.event, command=hook.command, error=error)
            return _failed_closed(hook, error) if hook.fail_closed and hook.event == "pre_tool_call" else None

    callback.__name__ = callback.__qualname__ = hook.command
    callback.shell_hook = hook  # type: ignore[attr-defined]
    return callback


# --------------------------------------------------------------------------- hermes-kernel hooks test


def test_kwargs(event: str, tool_name: str | None = None, payload: Any = None) -> dict[str, Any]:
    """The keyword arguments of a test run of ``event``.

    Every argument of the hook is ``None`` except ``session_id``
    (``"hooks-test"``) and, for tool events, ``tool_name`` (``""``) and
    ``args`` (``{}``).  ``payload`` (a JSON object) overrides them: either the
    hook's keyword arguments, or a stdin payload as a hook received it
    (``hook_event_name``, ``tool_input``, ``extra``...).  ``tool_name`` wins over both.
    """
    from .. import hookspecs

    spec = getattr(hookspecs, event, None)
    kwargs: dict[str, Any] = dict.fromkeys(inspect.signature(spec).parameters) if callable(spec) else {}
    kwargs["session_id"] = TEST_SESSION
    if event in TOOL_EVENTS:
        kwargs.update(tool_name="", args={})
    if payload is not None:
        if not isinstance(payload, dict):
            raise ValueError(f"the payload must be a JSON object, not {type(payload).__name__}")
        if any(k in payload for k in _STDIN_KEYS):
            extra = payload.get("extra")
            kwargs.update(extra if isinstance(extra, dict) else {})
            for key in ("tool_name", "session_id"):
                if key in payload:
                    kwargs[key] = payload[key]
            if "tool_input" in payload:
                kwargs["args"] = payload["tool_input"]
        else:
            kwargs.update(payload)
    if tool_name is not None:
        kwargs["tool_name"] = tool_name
    return kwargs


def run_test(kernel: Kernel, event: str, kwargs: Mapping[str, Any]) -> tuple[list[dict[str, Any]], Parsed]:
    """Run every shell hook of ``event`` once with ``kwargs``; one row per hook (see :meth:`HookRun.to_dict`).

    Hooks whose ``when.tools`` / ``matcher`` do not match are listed as skipped.
    """
    parsed = parse(kernel.config, kernel.hook_names, ceiling=kernel._hooks.timeout)
    rows = []
    for hook in parsed.hooks:
        if hook.event != event:
            continue
        if not hook.matches(kwargs.get("tool_name")):
            rows.append(
                {
                    "where": hook.where,
                    "event": hook.event,
                    "command": hook.command,
                    "ran": False,
                    "skipped": f"does not match tool '{kwargs.get('tool_name') or ''}'",
                }
            )
            continue
        rows.append(hook.run(kwargs, kernel.environ.child()).to_dict())
    return rows, parsed


def format_test(event: str, rows: list[dict[str, Any]]) -> str:
    """The text report of ``hermes-kernel hooks test``."""
    if not rows:
        return f"no shell hook is declared for '{event}' in config.yaml"
    lines = []
    for row in rows:
        lines.append(f"{row['where']}: {row['command']}")
        if not row["ran"]:
            lines.append(f"  skipped: {row['skipped']}")
            continue
        lines.append(f"  argv: {shlex.join(row['argv'])}")
        if row["error"]:
            lines.append(f"  error: {row['error']}")
        if row["exit_code"] is not None:
            lines.append(f"  exit code: {row['exit_code']}")
        for name in ("stdout", "stderr"):
            if row[name]:
                body = row[name].replace("\n", "\n    ")
                lines.append(f"  {name}:\n    {body}")
        result = row["result"]
        lines.append(f"  answer: {'nothing' if result is None else json.dumps(result, ensure_ascii=False)}")
        for warning in row["warnings"]:
            lines.append(f"  warning: {warning}")
    return "\n".join(lines)
