"""The ``hooks:`` section of ``config.yaml``, in either spelling, read into shell hooks."""

from __future__ import annotations

import difflib
import math
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from ...hookspecs import SLOT_HOOKS

# --------------------------------------------------------------------------- parsing
from .common import _ENTRY_KEYS, DEFAULT_TIMEOUT, MAX_TIMEOUT, MIN_TIMEOUT, RESERVED_KEYS, TOOL_EVENTS
from .hook import Parsed, ShellHook


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
    given = _seconds(entry.get("timeout"))
    if given is _NOT_A_NUMBER:
        # As in Hermes: the hook still runs, with the default timeout.
        out.warnings.append(
            f"config.yaml: '{where}.timeout' must be a number of seconds ({MIN_TIMEOUT:g} to "
            f"{MAX_TIMEOUT:g}), not {_shown(entry.get('timeout'))}; using {DEFAULT_TIMEOUT:g}"
        )
        given = None
    if given is not None:
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

    detach = entry.get("detach")
    if detach is not None and not isinstance(detach, bool):
        return problem("detach", f"must be true or false, not {_shown(detach)}")

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
        # Trimmed as Hermes trims it: a YAML block scalar's newline or a stray space would otherwise
        # make a guard silently never match; a blank matcher matches every tool.
        pattern = pattern.strip() or None
    if pattern is not None:
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
            detach=bool(detach),
            tools=tools,
            matcher=matcher,
        )
    )
    return None


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"a {type(value).__name__} ({value!r})"[:120]


_NOT_A_NUMBER = object()


def _seconds(value: Any) -> Any:
    """A timeout as written: ``None`` (absent), a number (``"30"`` counts, as Hermes reads it), or
    :data:`_NOT_A_NUMBER`."""
    if value is None:
        return None
    if isinstance(value, str) and len(value) <= 32:
        try:
            value = float(value.strip())
        except ValueError:
            return _NOT_A_NUMBER
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return _NOT_A_NUMBER
    return value


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str | int | float | bool) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."
