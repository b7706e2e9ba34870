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
import inspect
import json
import shlex
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ...core.api import add_hook
from ...core.hooks import CONFIGURED
from ...core.services import serviceimpl
from .. import load_surface
from .common import _STDIN_KEYS, KIND, MAX_STDOUT, REASON_CHARS, SURFACE, TEST_SESSION, TOOL_EVENTS
from .config import parse, unknown_event
from .hook import CarriedInput, HookRun, Parsed, RunningHooks, ShellHook, _failed_closed, interpret

if TYPE_CHECKING:
    from ...core.kernel import Kernel

__all__ = [
    "MAX_STDOUT",
    "REASON_CHARS",
    "SURFACE",
    "CarriedInput",
    "HookRun",
    "Parsed",
    "RunningHooks",
    "ShellHook",
    "format_test",
    "interpret",
    "load",
    "make_callback",
    "parse",
    "run_test",
    "test_kwargs",
    "unknown_event",
]


# --------------------------------------------------------------------------- the kernel side


def load(kernel: Kernel) -> None:
    """Register the hooks of ``config.yaml`` on the surface record ``config:shell-hooks``."""
    if kernel.config.get("hooks") is None:
        return
    parsed = parse(kernel.config, kernel.hook_names, ceiling=kernel.host.engine.timeout)
    for note in parsed.notes:
        kernel.log.debug("shell_hooks_note", detail=note)
    for problem in parsed.problems:
        kernel.host.config_problem(problem)
    for warning in parsed.warnings:
        kernel.log.warning("shell_hook_config", detail=warning)
    if not parsed.configured:
        return
    running = RunningHooks()

    def setup(ctx: Any) -> None:
        for hook in parsed.hooks:
            add_hook(ctx, hook.event, make_callback(kernel, hook, running), CONFIGURED)

    record = kernel.host.add_surface(
        SURFACE, KIND, setup, description=describe(parsed.hooks), close=running.close
    )
    record.warnings.extend(parsed.problems + parsed.warnings)


def describe(hooks: list[ShellHook]) -> str:
    """The one-line status of the surface record: ``"2 shell hooks (pre_tool_call, post_tool_call)"``."""
    events = list(dict.fromkeys(h.event for h in hooks))
    noun = "shell hook" if len(hooks) == 1 else "shell hooks"
    return f"{len(hooks)} {noun}" + (f" ({', '.join(events)})" if events else "")


def make_callback(kernel: Kernel, hook: ShellHook, running: RunningHooks | None = None) -> Callable[..., Any]:
    """The kernel callback of ``hook``: runs it when it matches and answers per the protocol; never raises.

    ``running`` records the runs in flight, whose process groups the kernel ends at shutdown.
    """
    log = kernel.log

    def callback(**kwargs: Any) -> Any:
        try:
            if not hook.matches(kwargs.get("tool_name")):
                return None
            run = hook.run(kwargs, kernel.environ.child(), running)
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
    from ... import hookspecs

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
    parsed = parse(kernel.config, kernel.hook_names, ceiling=kernel.host.engine.timeout)
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


# -- the shell_hooks service (see kernel.core.services) ----------------------------------


@serviceimpl
def service_load_finished(kernel: Kernel) -> None:
    load_surface(kernel, "shell_hooks", load)
