"""Logging: structlog loggers over per-kernel stdlib handlers.

The kernel follows the Python logging guidance for libraries: it never calls
``structlog.configure`` or touches the root logger, and it leaves every logger
it does not own as it found it.  Each kernel wraps its own stdlib logger
(``hermes_kernel.k<N>``) with structlog processors and attaches its handlers to
it and to its plugins' logger, rendered by structlog's ``ProcessorFormatter``
so that plugins using stdlib ``logging`` render the same way:

* ``<home>/logs/agent.log``: WARNING and up, DEBUG when
  ``HERMES_PLUGINS_DEBUG`` is set, and the audit lines of plugins' model
  calls (INFO); created on the first record.
* stderr, only with ``HERMES_PLUGINS_DEBUG``: DEBUG and up.

Records propagate as any library's do (the ``hermes_kernel`` logger has a
``NullHandler``); their message is the event rendered as text, secrets
redacted and URLs masked, so an embedder's own handlers show them readably.

A traceback is written by :func:`format_traceback` only: file, line, function
and source line of at most :data:`TRACEBACK_FRAMES` frames, no variable's
value, its text redacted.  A record's first line matches :data:`RECORD_HEAD`;
its other lines never do (``hermes-kernel logs`` groups lines by it).

structlog (and the asyncio it imports) is imported with the first record a
level lets through, not before: a kernel that logs nothing above its level
(``plugins list`` from the saved list, a quiet embedding) never pays for it.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
import re
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .redact import (  # what the processors and the formatter use of it
    _CONTROL,
    _REDACTED,
    _escape,
    is_secret_key,
    redact_text,
    redacted,
)

if TYPE_CHECKING:
    import structlog

_counter = itertools.count(1)

# The library convention: a NullHandler on the top logger, nothing else.
_PARENT = logging.getLogger("hermes_kernel")
if not any(isinstance(h, logging.NullHandler) for h in _PARENT.handlers):
    _PARENT.addHandler(logging.NullHandler())


#: An event dict, of whichever mapping type structlog hands a processor.
_Event_T = TypeVar("_Event_T", bound=MutableMapping[str, Any])


def mask_text_fields(_logger: Any, _method: str, event: _Event_T) -> _Event_T:
    """Redact every text value of an event (the message included) before it is rendered: URLs
    masked and secret-named ``name=value`` pairs hidden (:func:`redact_text`)."""
    for key, value in event.items():
        if isinstance(value, str):
            event[key] = redact_text(value)
    return event


def redact_secrets(_logger: Any, _method: str, event: _Event_T) -> _Event_T:
    """Replace the values of secret-named keys (at any depth) so that they never reach a log."""
    for key, value in event.items():
        if is_secret_key(key):
            event[key] = _REDACTED
        elif isinstance(value, dict | list | tuple):
            event[key] = redacted(value)
    return event


_META = frozenset({"event", "level", "logger", "timestamp", "_record", "_from_structlog"})


class _Event(dict):  # type: ignore[type-arg]
    """A structlog event dict as a record's message: our formatter reads the dict, anyone else's
    handler the text (``event key=value ...``, secrets redacted, URLs masked)."""

    def __str__(self) -> str:
        try:
            event = dict(self)
            failure = event.pop("exc_info", None)
            if isinstance(failure, tuple) and len(failure) == 3:
                failure = failure[1]
            if isinstance(failure, BaseException):  # its one line, redacted; the traceback is ours
                event["exception"] = _exception_line(failure).split("\n", 1)[0]
            event = mask_text_fields(None, "", redact_secrets(None, "", event))
            pairs = " ".join(f"{k}={v!r}" for k, v in sorted(event.items()) if k not in _META)
            return f"{event.get('event', '')} {pairs}".rstrip()
        except Exception:
            return str(dict.get(self, "event", "<unrenderable event>"))


def _wrap_for_formatter(logger: Any, name: str, event_dict: dict[str, Any]) -> Any:
    return (_Event(event_dict),), {"extra": {"_logger": logger, "_name": name}}


class _Threshold(logging.Filter):
    """Pass records at ``level`` and up, and every record of the ``audit`` logger."""

    def __init__(self, level: int, audit: str) -> None:
        super().__init__()
        self.level, self.audit = level, audit

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.level or record.name == self.audit


_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}


def _filter_by_level() -> Any:
    import structlog

    return structlog.stdlib.filter_by_level


def _pre_chain() -> list[Any]:
    import structlog

    return [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


class LazyLogger:
    """A kernel's structlog logger, built (structlog imported) with the first record its level passes.

    ``debug`` ... ``critical`` and ``exception`` check the stdlib logger's
    level first, so a disabled level costs one cached check; anything else
    (``bind``, ``new``, ...) builds the structlog logger and goes to it.
    """

    def __init__(self, stdlib: logging.Logger, processors: Any) -> None:
        self._stdlib = stdlib
        self._processors = processors
        self._real: structlog.stdlib.BoundLogger | None = None

    def _bound(self) -> structlog.stdlib.BoundLogger:
        if self._real is None:
            import structlog

            self._real = structlog.stdlib.BoundLogger(self._stdlib, self._processors(), {})
        return self._real

    def _emit(self, method: str, event: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        if not self._stdlib.isEnabledFor(_LEVELS[method]):
            return None
        return getattr(self._bound(), method)(event, *args, **kw)

    def debug(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self._emit("debug", event, args, kw)

    def info(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self._emit("info", event, args, kw)

    def warning(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self._emit("warning", event, args, kw)

    warn = warning

    def error(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self._emit("error", event, args, kw)

    def exception(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self._emit("exception", event, args, kw)

    def critical(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self._emit("critical", event, args, kw)

    fatal = critical

    def isEnabledFor(self, level: int) -> bool:
        return self._stdlib.isEnabledFor(level)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._bound(), name)


#: The frames a traceback shows at most (the innermost); the outer ones are counted, not shown.
TRACEBACK_FRAMES = 30
# Exceptions of one chain ("The above exception was the direct cause ...") shown at most.
_CHAIN_LIMIT = 3
_SOURCE_LIMIT = 240
_MESSAGE_LIMIT = 4000
_MESSAGE_LINES = 20
_CAUSE = "The above exception was the direct cause of the following exception:"
_CONTEXT = "During handling of the above exception, another exception occurred:"


def format_traceback(exc: Any, limit: int = TRACEBACK_FRAMES) -> str:
    """The traceback the kernel writes anywhere (log file, stderr, a command's output) for ``exc`` (an
    exception or an ``exc_info`` tuple): each frame's file, line, function and source line, no
    variable's value; at most ``limit`` frames (the innermost) with the number left out; the
    exception's text redacted (:func:`redact_text`) and control characters escaped.  Never raises
    (but for ``KeyboardInterrupt``), whatever the exception's ``__str__`` does."""
    if isinstance(exc, tuple):
        exc = exc[1] if len(exc) > 1 else None
    if not isinstance(exc, BaseException):
        return ""
    try:
        text = "\n".join(_traceback_lines(exc, max(limit, 1)))
    except KeyboardInterrupt:
        raise
    except BaseException:
        text = f"{_exception_line(exc)}\n(the rest of this traceback could not be formatted)"
    return _CONTROL.sub(_escape, redact_text(text))


def _traceback_lines(exc: BaseException, limit: int) -> list[str]:
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    link = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, link))
        cause, context = current.__cause__, current.__context__
        if cause is not None:
            current, link = cause, _CAUSE
        elif context is not None and not current.__suppress_context__:
            current, link = context, _CONTEXT
        else:
            current = None
    lines: list[str] = []
    if len(chain) > _CHAIN_LIMIT:
        lines.append(f"({len(chain) - _CHAIN_LIMIT} earlier exceptions of this chain left out)")
        lines.append("")
    shown_chain = chain[:_CHAIN_LIMIT]
    # Oldest first, as Python prints a chain: each one followed by the sentence that links it.
    for index, (item, _) in enumerate(reversed(shown_chain)):
        if index:
            lines += ["", shown_chain[len(shown_chain) - index][1], ""]
        lines += _one_traceback(item, limit)
    return lines


def _one_traceback(exc: BaseException, limit: int) -> list[str]:
    import linecache
    import traceback

    frames = [
        (frame, lineno)
        for frame, lineno in traceback.walk_tb(exc.__traceback__)
        if not frame.f_code.co_filename.startswith("<frozen importlib")
    ]
    # A run of the same frame (a recursion) is shown three times and counted: [frame, lineno, repeats].
    entries: list[list[Any]] = []
    run = 0
    for frame, lineno in frames:
        where = (frame.f_code, lineno)
        run = run + 1 if entries and (entries[-1][0].f_code, entries[-1][1]) == where else 1
        if run > 3:
            entries[-1][2] += 1
        else:
            entries.append([frame, lineno, 0])
    kept = entries[-limit:]
    lines: list[str] = []
    if frames:
        left_out = len(frames) - sum(1 + repeats for _, _, repeats in kept)
        head = "Traceback (most recent call last):"
        if left_out:
            head += f" [{left_out} outer frames left out]"
        lines.append(head)
    for frame, lineno, repeats in kept:
        code = frame.f_code
        filename = code.co_filename
        lines.append(f'  File "{filename}", line {lineno}, in {getattr(code, "co_qualname", code.co_name)}')
        try:
            source = linecache.getline(filename, lineno or 0, frame.f_globals).strip()
        except Exception:
            source = ""
        if source:
            lines.append("    " + _clip(source, _SOURCE_LIMIT))
        if repeats:
            lines.append(f"  [the frame above repeated {repeats} more times]")
    if isinstance(exc, SyntaxError) and exc.filename:
        lines.append(f'  File "{exc.filename}", line {exc.lineno}')
        if isinstance(exc.text, str) and exc.text.strip():
            lines.append("    " + _clip(exc.text.strip(), _SOURCE_LIMIT))
    lines += _exception_line(exc).split("\n")
    notes = _safe(lambda: getattr(exc, "__notes__", None), None)
    if isinstance(notes, list):
        lines += [_clip(note, _SOURCE_LIMIT) for note in notes[:10] if isinstance(note, str)]
    members = _safe(lambda: getattr(exc, "exceptions", None), None)
    if isinstance(exc, BaseExceptionGroup) and isinstance(members, tuple):
        for number, member in enumerate(members[:10], 1):
            lines.append(f"  +-- {number}: {_exception_line(member).splitlines()[0]}")
        if len(members) > 10:
            lines.append(f"  +-- ... and {len(members) - 10} more")
    return lines


def _exception_line(exc: BaseException) -> str:
    """``module.Type: text`` (builtins without their module), bounded; survives a raising ``__str__``."""
    cls = type(exc)
    name = _safe(lambda: cls.__qualname__, cls.__name__)
    module = _safe(lambda: cls.__module__, None)
    if isinstance(module, str) and module not in ("builtins", "__main__"):
        name = f"{module}.{name}"
    text = _safe(lambda: str(exc), None)
    if not isinstance(text, str):
        text = f"<str() of {cls.__name__} failed>"
    text = text.strip()
    if len(text) > _MESSAGE_LIMIT:
        text = f"{text[:_MESSAGE_LIMIT]}… ({len(text) - _MESSAGE_LIMIT} characters left out)"
    if text.count("\n") >= _MESSAGE_LINES:
        kept_lines = text.split("\n")
        text = "\n".join(
            [*kept_lines[:_MESSAGE_LINES], f"… ({len(kept_lines) - _MESSAGE_LINES} lines left out)"]
        )
    return f"{name}: {text}" if text else name


def _safe(get: Any, default: Any) -> Any:
    try:
        return get()
    except KeyboardInterrupt:
        raise
    except BaseException:
        return default


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _write_traceback(sio: Any, exc_info: Any) -> None:
    """structlog's ``exception_formatter``: :func:`format_traceback` under the record's first line."""
    sio.write("\n" + format_traceback(exc_info))


#: The first line of a record in agent.log (``2026-01-02T03:04:05.678901Z [warning  ] event ...``);
#: any other line is a continuation of the record above it (a traceback, a multi-line message).
#: The formatter indents a continuation line that would match, so a message cannot forge a record.
RECORD_HEAD = re.compile(
    r"^(?P<time>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?) "
    r"\[(?P<level>[A-Za-z]+) *\](?: (?P<rest>.*))?$"
)


def _fence(text: str) -> str:
    """``text`` (one rendered record) with control characters escaped and no continuation line that
    reads as the first line of a record."""
    text = _CONTROL.sub(_escape, text)
    if "\n" not in text:
        return text
    head, *rest = text.split("\n")
    return "\n".join([head, *("  " + line if RECORD_HEAD.match(line) else line for line in rest)])


def _unrendered(record: logging.LogRecord, problem: BaseException) -> str:
    """The line written for a record the formatter could not render (a field whose ``repr`` raises)."""
    from datetime import UTC, datetime

    msg = record.msg
    event = dict.get(msg, "event") if isinstance(msg, dict) else msg
    event = redact_text(str.__str__(event)) if isinstance(event, str) else type(event).__name__
    stamp = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    level = record.levelname.lower()
    return (
        f"{stamp} [{level:<9}] {event} [{record.name}] "
        f"unrendered='this record could not be rendered ({type(problem).__name__})'"
    )


class _LazyFormatter(logging.Formatter):
    """structlog's ``ProcessorFormatter`` for the kernel's handlers, built with the first record."""

    def __init__(self) -> None:
        super().__init__()
        self._real: logging.Formatter | None = None

    def format(self, record: logging.LogRecord) -> str:
        if self._real is None:
            import structlog

            self._real = structlog.stdlib.ProcessorFormatter(
                processors=[
                    structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    redact_secrets,
                    mask_text_fields,
                    structlog.dev.ConsoleRenderer(
                        colors=False, pad_event_to=0, exception_formatter=_write_traceback
                    ),
                ],
                foreign_pre_chain=_pre_chain(),
            )
        try:
            text = self._real.format(record)
        except Exception as exc:  # e.g. a field whose repr() raises: logging's own report would dump it
            text = _unrendered(record, exc)
        return _fence(text)


class _LazyFileHandler(logging.FileHandler):
    """A file handler that creates its directory with the first record."""

    def _open(self) -> io.TextIOWrapper:
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


class KernelLogging:
    """The loggers and handlers of one kernel; :meth:`close` detaches them."""

    def __init__(self, home: Path, debug: bool, plugin_namespace: str) -> None:
        self.debug = debug
        self.log_file = home / "logs" / "agent.log"
        self.stdlib = logging.getLogger(f"hermes_kernel.k{next(_counter)}")
        manager = logging.Logger.manager
        # Loggers under the plugin namespace that exist already are the host's: kept at close.
        prefix = plugin_namespace + "."
        self._theirs = {n for n in manager.loggerDict if n == plugin_namespace or n.startswith(prefix)}
        self.plugin_logger = logging.getLogger(plugin_namespace)
        level = logging.DEBUG if debug else logging.WARNING
        formatter = _LazyFormatter()
        audit_name = f"{self.stdlib.name}.audit"
        file_handler = _LazyFileHandler(self.log_file, delay=True, encoding="utf-8")
        # What the file takes does not depend on levels a host gives the loggers.
        file_handler.addFilter(_Threshold(level, audit_name))
        file_handler.setFormatter(formatter)
        self._handlers: list[logging.Handler] = [file_handler]
        if debug:
            stderr_handler = logging.StreamHandler(sys.stderr)
            stderr_handler.setLevel(logging.DEBUG)
            stderr_handler.setFormatter(formatter)
            self._handlers.append(stderr_handler)
        for target in (self.stdlib, self.plugin_logger):
            for handler in self._handlers:
                target.addHandler(handler)
        # Our own logger; without debug its effective level is the host's (WARNING by default).
        self.stdlib.setLevel(logging.DEBUG if debug else logging.NOTSET)
        # Debug output needs the plugins' logger at DEBUG: set only when the host left it unset.
        self._set_plugin_level = debug and self.plugin_logger.level == logging.NOTSET
        if self._set_plugin_level:
            self.plugin_logger.setLevel(logging.DEBUG)

        # Audit lines (plugin model calls) are written at INFO even when the rest is at WARNING;
        # they go to this kernel's handlers only (they are the file's, not a host's).
        self.audit_stdlib = logging.getLogger(audit_name)
        self.audit_stdlib.setLevel(logging.INFO)
        self.audit_stdlib.propagate = False
        for handler in self._handlers:
            self.audit_stdlib.addHandler(handler)
        self.audit = LazyLogger(
            self.audit_stdlib, lambda: [*_pre_chain(), redact_secrets, _wrap_for_formatter]
        )
        self.logger = LazyLogger(self.stdlib, lambda: [*_pre_chain(), _wrap_for_formatter])

    def close(self) -> None:
        """Detach and close this kernel's handlers."""
        for target in (self.stdlib, self.plugin_logger, self.audit_stdlib):
            for handler in self._handlers:
                target.removeHandler(handler)
        for handler in self._handlers:
            handler.close()
        if self._set_plugin_level and self.plugin_logger.level == logging.DEBUG:
            self.plugin_logger.setLevel(logging.NOTSET)
        # Forget the loggers this kernel created (its own and its plugins'), so that a host creating
        # kernel after kernel does not accumulate them; objects still held keep working.
        _forget_loggers((self.stdlib.name, self.plugin_logger.name), keep=self._theirs)


def _forget_loggers(names: tuple[str, ...], keep: set[str]) -> None:
    manager = logging.Logger.manager
    lock = getattr(logging, "_lock", None)
    with lock if lock is not None else contextlib.nullcontext():
        for key in list(manager.loggerDict):
            if key not in keep and any(key == name or key.startswith(name + ".") for name in names):
                del manager.loggerDict[key]
