"""Secret sources: Hermes' contract (``SecretSource``, ``FetchResult``), the reports of applying them,
and ``ctx.register_secret_source``."""

from __future__ import annotations

import abc
import enum
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.api import kernel_of, on_rollback, record_of
from ..core.context import live
from .checks import _attr, _is_str, _missing_methods, _name, _refuse, _shown, _text
from .kinds import SECRET_SOURCES, Registration

if TYPE_CHECKING:
    from ..core.context import PluginContext

#: The secret-source contract version the kernel speaks (Hermes' ``SECRET_SOURCE_API_VERSION``).
SECRET_SOURCE_API_VERSION = 1
#: The seconds a source's ``fetch()`` may take when its section does not say (``timeout_seconds``).
DEFAULT_FETCH_TIMEOUT = 120.0

_SOURCE_NAME = re.compile(r"[a-z0-9_]+")


class ErrorKind(enum.StrEnum):
    """Why a secret source's fetch failed."""

    NOT_CONFIGURED = "not_configured"
    BINARY_MISSING = "binary_missing"
    AUTH_FAILED = "auth_failed"
    AUTH_EXPIRED = "auth_expired"
    REF_INVALID = "ref_invalid"
    NETWORK = "network"
    EMPTY_VALUE = "empty_value"
    TIMEOUT = "timeout"
    INTERNAL = "internal"


@dataclass
class FetchResult:
    """What a secret source's ``fetch()`` returns: ``secrets`` (variable -> value), or an ``error``."""

    secrets: dict[str, str] = field(default_factory=dict)
    applied: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    error_kind: ErrorKind | None = None
    binary_path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class SecretSource(abc.ABC):
    """An external secret manager (Hermes' ``agent.secret_sources.base.SecretSource``).

    ``name`` (``[a-z0-9_]+``) is its section under ``secrets:`` in ``config.yaml``; ``shape`` is
    ``"mapped"`` (the user binds variables to references) or ``"bulk"`` (it brings whole folders);
    ``scheme`` is the reference scheme it owns (``op`` for ``op://...``), if any.
    """

    api_version: int = SECRET_SOURCE_API_VERSION
    name: str = ""
    label: str = ""
    shape: str = "mapped"
    scheme: str | None = None

    @abc.abstractmethod
    def fetch(self, cfg: dict[str, Any], home_path: Path) -> FetchResult:
        """The variables this source would set, from its section ``cfg``; must not raise or prompt."""

    def is_enabled(self, cfg: dict[str, Any]) -> bool:
        return bool(isinstance(cfg, dict) and cfg.get("enabled"))

    def override_existing(self, cfg: dict[str, Any]) -> bool:
        return bool(isinstance(cfg, dict) and cfg.get("override_existing", False))

    def protected_env_vars(self, cfg: dict[str, Any]) -> frozenset[str]:
        return frozenset()

    def fetch_timeout_seconds(self, cfg: dict[str, Any]) -> float:
        try:
            seconds = float((cfg or {}).get("timeout_seconds", DEFAULT_FETCH_TIMEOUT))
        except (TypeError, ValueError):
            return DEFAULT_FETCH_TIMEOUT
        return seconds if seconds > 0 else DEFAULT_FETCH_TIMEOUT

    def config_schema(self) -> dict[str, Any]:
        return {}


@dataclass
class SecretSourceReport:
    """What one secret source did in :meth:`Registrations.apply_secrets` (variable names only)."""

    name: str
    label: str
    plugin: str
    shape: str
    applied: list[str] = field(default_factory=list)
    skipped_existing: list[str] = field(default_factory=list)
    skipped_claimed: list[str] = field(default_factory=list)
    skipped_protected: list[str] = field(default_factory=list)
    skipped_invalid: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    error_kind: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, list) else v for k, v in vars(self).items()}


@dataclass
class SecretReport:
    """The outcome of one :meth:`Registrations.apply_secrets`: per source, provenance, conflicts."""

    sources: list[SecretSourceReport] = field(default_factory=list)
    #: Variable -> the name of the source whose value the kernel's environment holds.
    provenance: dict[str, str] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sources": [s.to_dict() for s in self.sources],
            "provenance": dict(self.provenance),
            "conflicts": list(self.conflicts),
        }


@live
def register_secret_source(self: PluginContext, source: Any) -> None:
    """Offer an external secret manager, fetched at the end of ``load()`` when ``secrets.<name>`` of
    ``config.yaml`` enables it (see :meth:`Registrations.apply_secrets`).

    As in Hermes, a source is ignored with a warning, never raised, when it has no ``fetch``, its
    ``name`` is not lowercase ``[a-z0-9_]+``, its ``api_version`` is not 1, its ``shape`` is neither
    ``mapped`` nor ``bulk``, its name is taken (the first source keeps it), or its ``scheme`` is
    another source's.
    """
    kernel, record = kernel_of(self), record_of(self)
    what = f"plugin '{record.name}': secret source"
    if _missing_methods(source, ("fetch",), what):
        _refuse(kernel, record, SECRET_SOURCES, "it is not a SecretSource (it has no fetch(cfg, home_path))")
        return
    raw = _attr(source, "name", what, "")
    reasons = []
    try:
        name = _name(raw, f"{what} name")
    except ValueError as exc:
        _refuse(kernel, record, SECRET_SOURCES, str(exc))
        return
    if not _SOURCE_NAME.fullmatch(name) or name != str.__str__(raw):
        reasons.append("its name must be lowercase letters, digits and '_'")
    version = _attr(source, "api_version", what, SECRET_SOURCE_API_VERSION)
    if type(version) is not int or version != SECRET_SOURCE_API_VERSION:
        shown = version if type(version) is int else type(version).__name__
        reasons.append(
            f"it is built for secret-source API {shown}; the kernel speaks {SECRET_SOURCE_API_VERSION}"
        )
    shape = _attr(source, "shape", what, "mapped")
    if not _is_str(shape) or shape not in ("mapped", "bulk"):
        reasons.append("its shape must be 'mapped' or 'bulk'")
    scheme = _attr(source, "scheme", what, None)
    label = _attr(source, "label", what, "")
    try:
        scheme = None if scheme is None or scheme == "" else _name(scheme, f"{what} scheme", 64)
        label = _text(label, f"{what} label") if _is_str(label) else ""
    except ValueError as exc:
        reasons.append(str(exc))
    if reasons:
        _refuse(kernel, record, SECRET_SOURCES, f"{_shown(name)}: " + "; ".join(reasons))
        return
    registrations = kernel.registrations
    with registrations._lock:
        for taken in registrations.all(SECRET_SOURCES):
            reason = None
            if taken.name == name:
                reason = f"'{name}' is already registered by plugin '{taken.plugin}' (the first one is kept)"
            elif scheme is not None and taken.details["scheme"] == scheme:
                reason = f"'{name}': the scheme '{scheme}://' belongs to source '{taken.name}'"
            if reason is not None:
                _refuse(kernel, record, SECRET_SOURCES, reason)
                return
        details = {"label": label or name, "shape": str.__str__(shape), "scheme": scheme}
        entry = Registration(SECRET_SOURCES, name, record.name, source, details)
        on_rollback(self, registrations._add(record, entry))
    kernel.log.debug("secret_source_registered", plugin=record.name, source=name)
