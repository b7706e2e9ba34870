"""Logging: structlog loggers over per-kernel stdlib handlers.

The kernel never calls ``structlog.configure`` (that would take over an
embedder's logging).  Each kernel wraps its own stdlib loggers with structlog
processors and attaches two handlers, rendered by structlog's
``ProcessorFormatter`` so that plugins using stdlib ``logging`` render the
same way:

* ``<home>/logs/agent.log``: WARNING and up, DEBUG when
  ``HERMES_PLUGINS_DEBUG`` is set, and the audit lines of plugins' model
  calls (INFO); created on the first record.
* stderr, only with ``HERMES_PLUGINS_DEBUG``: DEBUG and up.

Kernel records do not propagate to the root logger (their message is a
structlog event dict); an embedder who wants them attaches a handler to the
``hermes_kernel`` logger.  Plugins' own stdlib records propagate as usual.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import sys
from pathlib import Path
from typing import Any

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

# Kernel records carry structlog event dicts that only our formatter renders,
# so they stop at the "hermes_kernel" logger instead of reaching the root
# logger; an embedder who wants them attaches a handler there.
_PARENT = logging.getLogger("hermes_kernel")
_PARENT.propagate = False
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


_PRE_CHAIN: list[Any] = [
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


class KernelLogger(structlog.stdlib.BoundLogger):
    """A structlog stdlib logger whose disabled levels cost one cached check, not a processor run."""

    def debug(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        if not self._logger.isEnabledFor(logging.DEBUG):
            return None
        return super().debug(event, *args, **kw)

    def info(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        if not self._logger.isEnabledFor(logging.INFO):
            return None
        return super().info(event, *args, **kw)


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
        self.plugin_logger = logging.getLogger(plugin_namespace)
        formatter = structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                redact_secrets,
                mask_text_fields,
                structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0),
            ],
            foreign_pre_chain=_PRE_CHAIN,
        )
        file_handler = _LazyFileHandler(self.log_file, delay=True, encoding="utf-8")
        # The loggers' levels decide what is written; the handlers take what they pass.
        file_handler.setLevel(logging.DEBUG)
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
            target.setLevel(logging.DEBUG if debug else logging.WARNING)

        # Audit lines (plugin model calls) are written at INFO even when the rest is at WARNING.
        self.audit_stdlib = logging.getLogger(f"{self.stdlib.name}.audit")
        self.audit_stdlib.setLevel(logging.INFO)
        self.audit = KernelLogger(
            self.audit_stdlib,
            [
                structlog.stdlib.filter_by_level,
                *_PRE_CHAIN,
                redact_secrets,
                structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
            ],
            {},
        )
        self.logger = KernelLogger(
            self.stdlib,
            [
                structlog.stdlib.filter_by_level,
                *_PRE_CHAIN,
                structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
            ],
            {},
        )

    def close(self) -> None:
        """Detach and close this kernel's handlers."""
        for target in (self.stdlib, self.plugin_logger):
            for handler in self._handlers:
                target.removeHandler(handler)
        for handler in self._handlers:
            handler.close()
        # Late records from a closed kernel go nowhere rather than to stderr.
        self.stdlib.addHandler(logging.NullHandler())
        # Forget this kernel's loggers (its own and its plugins'), so that a host creating kernel
        # after kernel does not accumulate them; objects still held keep working.
        _forget_loggers(self.stdlib.name, self.plugin_logger.name)


def _forget_loggers(*names: str) -> None:
    manager = logging.Logger.manager
    lock = getattr(logging, "_lock", None)
    with lock if lock is not None else contextlib.nullcontext():
        for key in list(manager.loggerDict):
            if any(key == name or key.startswith(name + ".") for name in names):
                del manager.loggerDict[key]
