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

structlog (and the asyncio it imports) is imported with the first record a
level lets through, not before: a kernel that logs nothing above its level
(``plugins list`` from the saved list, a quiet embedding) never pays for it.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import structlog

# Words of a key name that make its value a secret: "api_key", "apiKey", "x-api-key", "accessToken",
# "clientSecret", "Authorization"... are secret; "input_tokens" and "max_tokens" are not.
_SECRET_WORDS = frozenset(
    {"token", "secret", "password", "passwd", "passphrase", "authorization", "credential", "credentials"}
    | {"bearer", "apikey", "cookie"}
)
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key")})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD_BREAK = re.compile(r"[^a-z0-9]+")


def is_secret_key(name: Any) -> bool:
    """Whether a key (of a log field, a mapping, an environment variable) names a secret.

    The name is split into words at separators and camelCase humps; it is a
    secret when one word is (``token``, ``secret``, ``password``,
    ``authorization``...) or two adjacent words are (``api key``, ``private
    key``, ``access key``).
    """
    words = [w for w in _WORD_BREAK.split(_CAMEL.sub("_", str(name)).lower()) if w]
    if any(w in _SECRET_WORDS for w in words):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words))


def redacted(value: Any, depth: int = 0) -> Any:
    """``value`` with the values of secret-named keys replaced, in nested mappings and lists too."""
    if depth > 20:
        return value
    if isinstance(value, dict):
        return {
            k: (_REDACTED if is_secret_key(k) and v not in (None, "") else redacted(v, depth + 1))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redacted(v, depth + 1) for v in value]
    return value


_REDACTED = "***"
_counter = itertools.count(1)

# The library convention: a NullHandler on the top logger, nothing else.
_PARENT = logging.getLogger("hermes_kernel")
if not any(isinstance(h, logging.NullHandler) for h in _PARENT.handlers):
    _PARENT.addHandler(logging.NullHandler())


_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
# Query parameters that carry credentials although their names are not secret words.
_SECRET_PARAMS = frozenset({"key", "sig", "signature", "auth", "code"})


def mask_url(url: str) -> str:
    """``url`` without its credentials: the user info becomes ``***@`` and secret-named query values
    ``***`` (``https://user:KEY@host/v1?api-key=K`` -> ``https://***@host/v1?api-key=***``)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = "***@" + netloc.rsplit("@", 1)[1]
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            masked = [(k, "***" if is_secret_key(k) or k.lower() in _SECRET_PARAMS else v) for k, v in pairs]
            query = urlencode(masked, safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "<a URL>"


def mask_urls(text: str) -> str:
    """``text`` with every URL in it masked (see :func:`mask_url`)."""
    return _URL.sub(lambda match: mask_url(match.group()), text) if "://" in text else text


# Characters that would steer a terminal (C0 but tab and newline, DEL, C1) or reorder the text shown
# (bidirectional overrides): shown as escapes, never passed through.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str) -> str:
    """``text`` as a terminal may show it: control characters as visible escapes (``\\x1b``,
    ``\\u202e``), URLs without their credentials."""
    return _CONTROL.sub(_escape, mask_urls(text))


def mask_text_fields(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    """Mask the URLs in every text value of an event (the message included) before it is rendered."""
    for key, value in event.items():
        if isinstance(value, str) and "://" in value:
            event[key] = mask_urls(value)
    return event


def redact_secrets(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
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
            event = mask_text_fields(None, "", redact_secrets(None, "", dict(self)))
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
                    structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0),
                ],
                foreign_pre_chain=_pre_chain(),
            )
        return self._real.format(record)


class _LazyFileHandler(logging.FileHandler):
    """A file handler that creates its directory with the first record."""

    def _open(self):  # type: ignore[no-untyped-def]
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
