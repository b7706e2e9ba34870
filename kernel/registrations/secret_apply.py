"""Secret sources' values in the kernel's environment: fetched within budget, applied, withdrawn."""

from __future__ import annotations

import contextvars
import copy
import itertools
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..base import environ
from .checks import _is_str, _truthy
from .kinds import MAX_NAME, MAX_TEXT, Registration
from .secret_sources import DEFAULT_FETCH_TIMEOUT, ErrorKind, SecretReport, SecretSourceReport

if TYPE_CHECKING:
    from ..core.kernel import Kernel

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: What one secret source may contribute: entries beyond the count, and longer values, are skipped.
MAX_SECRETS = 4096
MAX_SECRET_CHARS = 64 * 1024


def _scrub(text: str, values: Iterable[str]) -> str:
    """``text`` (a source's own message) cut short, printable, with any value it fetched masked."""
    for value in sorted({v for v in values if len(v) >= 4}, key=len, reverse=True):
        text = text.replace(value, "***")
    return "".join(c if c.isprintable() else " " for c in text[:MAX_TEXT])


class SecretLedger:
    """One kernel's secret-source values: which source supplied each variable, and the applying."""

    def __init__(
        self, kernel: Kernel, lock: threading.RLock, sources: Callable[[], list[Registration]]
    ) -> None:
        self._kernel = kernel
        self._lock = lock  # the registry's: one lock guards its entries and this provenance
        self._sources = sources
        self._apply_lock = threading.Lock()
        # Which source supplied each variable, and the .env values sources replaced (override_existing).
        self._provenance: dict[str, str] = {}
        self._shadowed: dict[str, str] = {}
        self.report: SecretReport | None = None
        #: Set at shutdown: the kernel releases its whole environment itself then.
        self.closing = False

    def provenance(self) -> dict[str, str]:
        """Variable -> the source whose value the kernel's environment holds (names only)."""
        with self._lock:
            return dict(self._provenance)

    def supplied_by(self, sources: set[str]) -> set[str]:
        """The variables the named sources supplied."""
        with self._lock:
            return {v for v, s in self._provenance.items() if s in sources}

    def apply(self) -> SecretReport:
        """Withdraw what earlier calls applied, then fetch and apply anew (see ``apply_secrets``)."""
        with self._apply_lock:
            self.withdraw(set(self.provenance()))
            report = self._fetch_and_apply()
            self.report = report
            return report

    def _fetch_and_apply(self) -> SecretReport:
        kernel = self._kernel
        report = SecretReport()
        section = kernel.config.get("secrets")
        if not isinstance(section, dict) or not section or self.closing:
            return report
        entries = {e.name: e for e in self._sources()}
        explicit = section.get("sources")
        listed = [n for n in explicit if isinstance(n, str)] if isinstance(explicit, list) else []
        order = [n for n in listed if n in entries]
        unknown = [n for n in listed if n not in entries]
        if unknown:
            known = ", ".join(entries) or "none"
            report.conflicts.append(
                f"secrets.sources names unknown sources: {unknown!r:.200} (known: {known})"
            )
        enabled = [
            entries[n] for n in dict.fromkeys([*order, *entries]) if self._enabled(entries[n], section)
        ]
        enabled.sort(key=lambda e: e.details["shape"] != "mapped")  # stable: mapped ones first

        fetched = []
        protected: dict[str, str] = {}
        for entry in enabled:
            cfg = section.get(entry.name)
            cfg = copy.deepcopy(cfg) if isinstance(cfg, dict) else {}
            sr = SecretSourceReport(entry.name, entry.details["label"], entry.plugin, entry.details["shape"])
            report.sources.append(sr)
            secrets = self._fetch(entry, cfg, sr)
            try:
                for var in self._call(entry, "protected_env_vars", cfg, (), sr) or ():
                    if _is_str(var):
                        protected.setdefault(str.__str__(var), entry.name)
            except Exception as exc:
                sr.warnings.append(f"protected_env_vars() raised {type(exc).__name__}")
            override = _truthy(self._call(entry, "override_existing", cfg, False, sr))
            fetched.append((entry, sr, secrets, override))

        base = dict(kernel.environ.dotenv)
        added: dict[str, str] = {}
        shadowed: dict[str, str] = {}
        for entry, sr, secrets, override in fetched:
            for var, value in secrets:
                if var in protected:
                    sr.skipped_protected.append(var)
                    continue
                if var in report.provenance:
                    sr.skipped_claimed.append(var)
                    report.conflicts.append(
                        f"{var}: kept the value of secret source '{report.provenance[var]}'; '{entry.name}' "
                        "supplies it too (the first source wins: remove one binding or reorder "
                        "secrets.sources)"
                    )
                    continue
                current = kernel.environ.get(var)
                if current:
                    if not (override and var in base and current == base[var]):
                        sr.skipped_existing.append(var)
                        continue
                    shadowed[var] = base[var]
                added[var] = value
                report.provenance[var] = entry.name
                sr.applied.append(var)
        if added:
            with self._lock:
                self._provenance = dict(report.provenance)
                self._shadowed.update(shadowed)
            kernel.environ.dotenv = {**base, **added}
            if shadowed:
                environ.release(kernel.host.env_token)  # so that the new values replace exported .env ones
            for var in environ.export(kernel.host.env_token, kernel.environ.dotenv):
                kernel.log.warning(
                    "env_not_exported",
                    variable=var,
                    reason="another kernel in this process exported it; this kernel uses its own value, "
                    "plugins reading os.environ see the other one",
                )
        for sr in report.sources:
            (kernel.log.info if sr.error is None else kernel.log.warning)(
                "secret_source_applied" if sr.error is None else "secret_source_failed",
                source=sr.name,
                plugin=sr.plugin,
                applied=list(sr.applied),
                skipped=len(
                    sr.skipped_existing + sr.skipped_claimed + sr.skipped_protected + sr.skipped_invalid
                ),
                error=sr.error,
                error_kind=sr.error_kind,
            )
        for conflict in report.conflicts:
            kernel.log.warning("secret_conflict", detail=conflict)
        return report

    def _enabled(self, entry: Registration, section: Mapping[str, Any]) -> bool:
        cfg = section.get(entry.name)
        cfg = copy.deepcopy(cfg) if isinstance(cfg, dict) else {}
        try:
            check = getattr(entry.value, "is_enabled", None)
            return bool(check(cfg)) if callable(check) else bool(cfg.get("enabled"))
        except Exception as exc:
            self._kernel.log.warning(
                "secret_source_failed", source=entry.name, call="is_enabled", error=type(exc).__name__
            )
            return False

    def _call(self, entry: Registration, method: str, cfg: dict[str, Any], default: Any, sr: Any) -> Any:
        """One of the source's optional methods; ``default`` when it has none or it raises."""
        try:
            fn = getattr(entry.value, method, None)
            return fn(copy.deepcopy(cfg)) if callable(fn) else default
        except Exception as exc:
            sr.warnings.append(f"{method}() raised {type(exc).__name__}; using the default")
            return default

    def _fetch(
        self, entry: Registration, cfg: dict[str, Any], sr: SecretSourceReport
    ) -> list[tuple[str, str]]:
        """Run the source's ``fetch`` within its budget: the valid ``(variable, value)`` pairs."""
        timeout = self._call(entry, "fetch_timeout_seconds", cfg, DEFAULT_FETCH_TIMEOUT, sr)
        if type(timeout) not in (int, float) or not math.isfinite(timeout) or timeout <= 0:
            timeout = DEFAULT_FETCH_TIMEOUT
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["result"] = entry.value.fetch(cfg, self._kernel.home)
            except BaseException as exc:  # a breach of the contract: reported, never raised
                box["error"] = exc

        context = contextvars.copy_context()
        worker = threading.Thread(
            target=context.run, args=(run,), name=f"hermes-kernel-secret-{entry.name}", daemon=True
        )
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            sr.error = (
                f"fetch did not return within {timeout:g} s (raise secrets.{entry.name}.timeout_seconds "
                "if the backend is only slow); going on without it"
            )
            sr.error_kind = ErrorKind.TIMEOUT.value
            return []
        if "error" in box:
            # Only the type: the message of an exception a source did not mean to raise may hold a value.
            sr.error, sr.error_kind = f"fetch raised {type(box['error']).__name__}", ErrorKind.INTERNAL.value
            return []
        return self._read_result(box.get("result"), sr)

    def _read_result(self, result: Any, sr: SecretSourceReport) -> list[tuple[str, str]]:
        """The valid pairs of a ``FetchResult`` (or a plain mapping); the rest is reported by name."""
        secrets: Any
        error: Any
        kind: Any
        warnings: Any
        try:
            if type(result) is dict or isinstance(result, Mapping):
                secrets, error, kind, warnings = result, None, None, []
            else:
                secrets = getattr(result, "secrets", None)
                if not isinstance(secrets, Mapping):
                    sr.error = f"fetch returned {type(result).__name__} instead of a FetchResult"
                    sr.error_kind = ErrorKind.INTERNAL.value
                    return []
                error = getattr(result, "error", None)
                kind = getattr(result, "error_kind", None)
                warnings = getattr(result, "warnings", None)
                warnings = list(itertools.islice(warnings, 20)) if isinstance(warnings, (list, tuple)) else []
            pairs = [(k, v) for k, v in itertools.islice(secrets.items(), MAX_SECRETS + 1)]
        except Exception as exc:
            sr.error = f"reading what fetch returned raised {type(exc).__name__}"
            sr.error_kind = ErrorKind.INTERNAL.value
            return []
        values = [str.__str__(v) for _k, v in pairs if _is_str(v)]
        if error is not None:
            sr.error = _scrub(str.__str__(error) if _is_str(error) else type(error).__name__, values)
            kind = kind.value if issubclass(type(kind), ErrorKind) else kind
            sr.error_kind = str.__str__(kind)[:64] if _is_str(kind) else ErrorKind.INTERNAL.value
            return []
        sr.warnings.extend(_scrub(str.__str__(w), values) for w in warnings if _is_str(w))
        if len(pairs) > MAX_SECRETS:
            sr.warnings.append(f"more than {MAX_SECRETS} variables: the rest are ignored")
            del pairs[MAX_SECRETS:]
        kept = []
        for var, value in pairs:
            if not _is_str(var):
                continue
            var = str.__str__(var)
            if (
                not _ENV_NAME.fullmatch(var)
                or not _is_str(value)
                or "\x00" in value
                or len(value) > MAX_SECRET_CHARS
            ):
                sr.skipped_invalid.append(var[:MAX_NAME])
                continue
            kept.append((var, str.__str__(value)))
        return kept

    def withdraw(self, variables: set[str]) -> None:
        """Take variables secret sources supplied out of the kernel's environment; ``.env`` values they
        had replaced come back."""
        if not variables or self.closing:
            return
        kernel = self._kernel
        with self._lock:
            values = {k: v for k, v in kernel.environ.dotenv.items() if k not in variables}
            for var in variables:
                self._provenance.pop(var, None)
                if var in self._shadowed:
                    values[var] = self._shadowed.pop(var)
            kernel.environ.dotenv = values
        environ.release(kernel.host.env_token)
        for var in environ.export(kernel.host.env_token, kernel.environ.dotenv):
            kernel.log.debug("env_not_exported", variable=var)
