"""What Hermes plugins register for their host beyond tools and providers, as a service (``k.registrations``).

Five ``ctx`` members of Hermes Agent, with its signatures and its rules:

* ``register_auxiliary_task(key, *, display_name, description, defaults=None)``: an LLM side job with its
  own ``auxiliary.<key>`` section of ``config.yaml``;
* ``register_browser_provider(provider)``: a cloud browser backend, chosen by ``browser.cloud_provider``;
* ``register_secret_source(source)``: an external secret manager whose values fill the kernel's
  environment at the end of :meth:`Kernel.load` when ``secrets.<name>.enabled`` is set (the one the kernel
  runs itself, see :meth:`Registrations.apply_secrets`);
* ``register_slack_action_handler(action_id, callback)``: a Slack Block Kit action listener;
* ``register_dashboard_auth_provider(provider)``: a login provider of a web dashboard.

The kernel has no browser tools, Slack adapter, dashboard or auxiliary-model picker: what a plugin
registers for those is kept, listed (``plugins info``) and handed to the embedding host through
``k.registrations``.  Everything is recorded against the plugin, so unloading it removes it.  The base
classes Hermes plugins subclass are here too (:class:`SecretSource`, :class:`FetchResult`,
:class:`BrowserProvider`, :class:`DashboardAuthProvider`); objects that only have the members are
accepted as well.  No value a secret source returns is ever kept here, logged or listed: only names.
"""

from __future__ import annotations

import abc
import contextvars
import copy
import enum
import inspect
import itertools
import math
import re
import threading
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .base import environ
from .core.context import live
from .core.services import serviceimpl

if TYPE_CHECKING:
    from .core.kernel import Kernel
    from .core.records import _Record

#: The kinds of registration, as ``plugins info`` and :meth:`Registrations.of_plugin` name them.
AUXILIARY_TASKS = "auxiliary_tasks"
BROWSER_PROVIDERS = "browser_providers"
SECRET_SOURCES = "secret_sources"  # noqa: S105 (a kind, not a secret)
SLACK_ACTION_HANDLERS = "slack_action_handlers"
DASHBOARD_AUTH_PROVIDERS = "dashboard_auth_providers"
KINDS = (AUXILIARY_TASKS, BROWSER_PROVIDERS, SECRET_SOURCES, SLACK_ACTION_HANDLERS, DASHBOARD_AUTH_PROVIDERS)

#: The longest name, key or Slack ``action_id`` accepted (Slack's own limit is 255).
MAX_NAME = 255
#: The longest label, display name or description accepted.
MAX_TEXT = 1000

#: Hermes Agent 0.19.0's own auxiliary tasks: a plugin may not take their keys.
BUILTIN_AUXILIARY_TASKS = frozenset(
    {
        "vision",
        "compression",
        "web_extract",
        "approval",
        "mcp",
        "title_generation",
        "memory_query_rewrite",
        "tts_audio_tags",
        "skills_hub",
        "triage_specifier",
        "kanban_decomposer",
        "profile_describer",
        "curator",
    }
)
#: The routing fields every auxiliary task has, under what the plugin declares.
AUXILIARY_DEFAULTS: Mapping[str, Any] = {
    "provider": "auto",
    "model": "",
    "base_url": "",
    "api_key": "",
    "timeout": 60,
    "extra_body": {},
}

#: Browser providers chosen without ``browser.cloud_provider``, when available (Hermes' order).
BROWSER_PREFERENCE = ("browser-use", "browserbase")
#: The keys a Slack constraint dict may have.
SLACK_CONSTRAINTS = frozenset({"action_id", "block_id", "type"})

_MISSING = object()
_AUX_KEY = re.compile(r"\w+", re.ASCII)
_SOURCE_NAME = re.compile(r"[a-z0-9_]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: What one secret source may contribute: entries beyond the count, and longer values, are skipped.
MAX_SECRETS = 4096
MAX_SECRET_CHARS = 64 * 1024


# --------------------------------------------------------------------------- Hermes' base classes

#: The secret-source contract version the kernel speaks (Hermes' ``SECRET_SOURCE_API_VERSION``).
SECRET_SOURCE_API_VERSION = 1
#: The seconds a source's ``fetch()`` may take when its section does not say (``timeout_seconds``).
DEFAULT_FETCH_TIMEOUT = 120.0


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


class BrowserProvider(abc.ABC):
    """A cloud browser backend (Hermes' ``agent.browser_provider.BrowserProvider``)."""

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """What ``browser.cloud_provider`` names it by."""

    @property
    def display_name(self) -> str:
        return self.name

    @abc.abstractmethod
    def is_available(self) -> bool:
        """Whether it can serve calls now (a cheap check, no network)."""

    @abc.abstractmethod
    def create_session(self, task_id: str) -> dict[str, object]:
        """A new session: ``session_name``, ``bb_session_id``, ``cdp_url``, ``features``."""

    @abc.abstractmethod
    def close_session(self, session_id: str) -> bool:
        """End a session; ``False`` when it could not."""

    @abc.abstractmethod
    def emergency_cleanup(self, session_id: str) -> None:
        """Best-effort teardown at exit; never raises."""

    def get_setup_schema(self) -> dict[str, Any]:
        return {"name": self.display_name, "badge": "", "tag": "", "env_vars": []}

    def is_configured(self) -> bool:
        return self.is_available()

    def provider_name(self) -> str:
        return self.display_name


class DashboardAuthProvider(abc.ABC):
    """A login provider of a web dashboard (Hermes' ``hermes_cli.dashboard_auth.DashboardAuthProvider``)."""

    name: str = ""
    display_name: str = ""
    supports_password: bool = False
    supports_token: bool = False
    supports_session: bool = True

    @abc.abstractmethod
    def start_login(self, *, redirect_uri: str) -> Any: ...

    @abc.abstractmethod
    def complete_login(self, *, code: str, state: str, code_verifier: str, redirect_uri: str) -> Any: ...

    @abc.abstractmethod
    def verify_session(self, *, access_token: str) -> Any: ...

    @abc.abstractmethod
    def refresh_session(self, *, refresh_token: str) -> Any: ...

    @abc.abstractmethod
    def revoke_session(self, *, refresh_token: str) -> None: ...

    def complete_password_login(self, *, username: str, password: str) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not log in with a password")

    def verify_token(self, *, token: str) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not verify tokens")


_BROWSER_METHODS = ("is_available", "create_session", "close_session", "emergency_cleanup")
_DASHBOARD_METHODS = ("start_login", "complete_login", "verify_session", "refresh_session", "revoke_session")


# --------------------------------------------------------------------------- what is kept


@dataclass(frozen=True)
class AuxiliaryTask:
    """An auxiliary task a plugin declared; ``defaults`` has the routing fields under the plugin's own."""

    key: str
    display_name: str
    description: str
    defaults: Mapping[str, Any]
    plugin: str

    def to_dict(self) -> dict[str, Any]:
        """Hermes' shape: ``{key, display_name, description, defaults, plugin}``."""
        return {
            "key": self.key,
            "display_name": self.display_name,
            "description": self.description,
            "defaults": dict(self.defaults),
            "plugin": self.plugin,
        }


class SlackActionHandler(NamedTuple):
    """A Slack action listener: unpacks as Hermes' ``(action_id, callback, plugin_name)``."""

    matcher: Any
    callback: Callable[..., Any]
    plugin: str


@dataclass(frozen=True, eq=False)
class Registration:
    """One thing a plugin registered here.

    ``name`` is the task key, the provider's or source's name, or the Slack matcher as text; ``value``
    the :class:`AuxiliaryTask`, the provider or source object, or the :class:`SlackActionHandler`;
    ``details`` the facts ``plugins info`` shows (never a secret).
    """

    kind: str
    name: str
    plugin: str
    value: Any
    details: Mapping[str, Any] = field(default_factory=dict)


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


# --------------------------------------------------------------------------- reading plugin objects


def _attr(obj: Any, name: str, what: str, default: Any = _MISSING) -> Any:
    """``obj.name``, or ``default`` when it has none; any other failure of the lookup is ``ValueError``."""
    try:
        return getattr(obj, name)
    except AttributeError:
        return default
    except Exception as exc:
        raise ValueError(f"{what}: reading its '{name}' raised {type(exc).__name__}") from exc


def _is_str(value: Any) -> bool:
    # Not isinstance(): that may read a hostile object's __class__.
    return issubclass(type(value), str)


def _truthy(value: Any) -> bool:
    try:
        return bool(value)
    except Exception:
        return False


def _copied(value: Any) -> Any:
    try:
        return copy.deepcopy(value)
    except Exception:
        return copy.copy(value)


def _shown(text: str, limit: int = 60) -> str:
    """A short rendering of a name for messages."""
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def _name(value: Any, what: str, limit: int = MAX_NAME, *, strip: bool = True) -> str:
    """A plain ``str`` copy of a name: non-empty, printable, at most ``limit`` characters."""
    if not _is_str(value):
        raise ValueError(f"{what} must be a string, not {type(value).__name__}")
    text = str.__str__(value)
    if strip:
        text = text.strip()
    if not text.strip():
        raise ValueError(f"{what} is empty")
    if len(text) > limit:
        raise ValueError(f"{what} is {len(text)} characters long (at most {limit})")
    if not text.isprintable():
        raise ValueError(f"{what} {_shown(text)} holds control characters")
    return text


def _text(value: Any, what: str, default: str = "") -> str:
    """A label or description: a string (``None`` is ``default``) without NUL or other control bytes."""
    if value is None:
        return default
    if not _is_str(value):
        raise ValueError(f"{what} must be a string, not {type(value).__name__}")
    text = str.__str__(value)
    if len(text) > MAX_TEXT:
        raise ValueError(f"{what} is {len(text)} characters long (at most {MAX_TEXT})")
    if not all(c.isprintable() or c in "\n\t" for c in text):
        raise ValueError(f"{what} holds control characters")
    return text


def _flag(obj: Any, name: str, what: str, default: bool) -> bool:
    value = _attr(obj, name, what, default)
    return value if type(value) is bool else default


def _missing_methods(obj: Any, names: Iterable[str], what: str) -> list[str]:
    missing = [n for n in names if not callable(_attr(obj, n, what, None))]
    left = getattr(type(obj), "__abstractmethods__", None)
    try:
        missing += sorted(str(n) for n in left or () if n not in missing)
    except Exception:
        missing.append("(unreadable __abstractmethods__)")
    return missing


def _slack_matcher(action_id: Any, what: str, nested: bool = False) -> tuple[Any, str]:
    """The matcher to keep (a string, a compiled pattern, or a constraint dict) and its text."""
    if action_id is None:
        raise ValueError(f"{what}: the action_id is empty")
    if issubclass(type(action_id), re.Pattern):
        pattern = action_id.pattern
        if not _is_str(pattern):
            raise ValueError(f"{what}: the action_id pattern must be a text pattern, not bytes")
        return action_id, "re:" + _name(pattern, f"{what}: the action_id pattern", MAX_TEXT, strip=False)
    if _is_str(action_id):
        text = _name(action_id, f"{what}: the action_id", strip=False)
        return text, text
    if issubclass(type(action_id), Mapping) and not nested:
        try:
            items = list(action_id.items())
        except Exception as exc:
            raise ValueError(f"{what}: reading the constraint dict raised {type(exc).__name__}") from exc
        kept: dict[str, Any] = {}
        labels: dict[str, str] = {}
        for key, value in items:
            key = str.__str__(key) if _is_str(key) else key
            if key not in SLACK_CONSTRAINTS:
                shown = _shown(key) if _is_str(key) else type(key).__name__
                allowed = ", ".join(sorted(SLACK_CONSTRAINTS))
                raise ValueError(f"{what}: a constraint dict may have only {allowed}, not {shown}")
            kept[key], labels[key] = _slack_matcher(value, f"{what}: '{key}'", nested=True)
        if not kept:
            raise ValueError(f"{what}: the constraint dict is empty")
        return kept, ",".join(f"{k}={labels[k]}" for k in sorted(labels))
    raise ValueError(
        f"{what}: the action_id must be a string, a compiled re pattern or a constraint dict, "
        f"not {type(action_id).__name__}"
    )


def _slack_value_matches(matcher: Any, value: Any) -> bool:
    if not _is_str(value):
        return False
    if isinstance(matcher, re.Pattern):
        return matcher.search(value) is not None
    return matcher == value


def _slack_matches(matcher: Any, action: Mapping[str, Any]) -> bool:
    """Whether ``matcher`` takes ``action`` (Slack's action payload), as ``slack_bolt`` matches."""
    if isinstance(matcher, dict):
        return all(_slack_value_matches(m, action.get(key)) for key, m in matcher.items())
    return _slack_value_matches(matcher, action.get("action_id"))


def _scrub(text: str, values: Iterable[str]) -> str:
    """``text`` (a source's own message) cut short, printable, with any value it fetched masked."""
    for value in sorted({v for v in values if len(v) >= 4}, key=len, reverse=True):
        text = text.replace(value, "***")
    return "".join(c if c.isprintable() else " " for c in text[:MAX_TEXT])


def _record_names(record: _Record) -> dict[str, list[str]]:
    """The plugin record's ``registrations`` (kind -> names), kept as ``record.tools`` keeps tool names."""
    return record.registrations


# --------------------------------------------------------------------------- the registry


class Registrations:
    """``k.registrations``: what plugins registered here, by kind, for the embedding host."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._lock = threading.RLock()
        self._apply_lock = threading.Lock()
        self._entries: list[Registration] = []
        # Which source supplied each variable, and the .env values sources replaced (override_existing).
        self._provenance: dict[str, str] = {}
        self._shadowed: dict[str, str] = {}
        self._report: SecretReport | None = None
        self._closing = False

    # -- listing -----------------------------------------------------------------

    def all(self, kind: str | None = None, plugin: str | None = None) -> list[Registration]:
        """Every registration in the order made, of ``kind`` and of ``plugin`` when given."""
        with self._lock:
            return [
                e
                for e in self._entries
                if (kind is None or e.kind == kind) and (plugin is None or e.plugin == plugin)
            ]

    def of_plugin(self, plugin: str) -> dict[str, list[dict[str, Any]]]:
        """What ``plugin`` registered, by kind, each ``{"name": ..., **details}``: what ``plugins info``
        shows (never a secret)."""
        out: dict[str, list[dict[str, Any]]] = {}
        provenance = self.secret_provenance()
        for entry in self.all(plugin=plugin):
            row = {"name": entry.name, **entry.details}
            if entry.kind == BROWSER_PROVIDERS:
                row["active"] = self._browser_entry(entry.name) is entry
            elif entry.kind == SECRET_SOURCES:
                row["applied"] = sorted(v for v, s in provenance.items() if s == entry.name)
            out.setdefault(entry.kind, []).append(row)
        return out

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    # -- auxiliary tasks -------------------------------------------------------------

    def auxiliary_tasks(self) -> list[AuxiliaryTask]:
        """Every plugin's auxiliary task, sorted by key."""
        return sorted((e.value for e in self.all(AUXILIARY_TASKS)), key=lambda t: t.key)

    def auxiliary_task(self, key: str) -> AuxiliaryTask | None:
        return next((t for t in self.auxiliary_tasks() if t.key == key), None)

    def auxiliary_task_config(self, key: str) -> dict[str, Any]:
        """The task's settings as Hermes reads them: its plugin's defaults under ``auxiliary.<key>`` of
        ``config.yaml`` (the user's values win); ``{}`` for an unknown key without a section."""
        section = self._kernel.config.get("auxiliary")
        user = section.get(key) if isinstance(section, dict) else None
        user = copy.deepcopy(user) if isinstance(user, dict) else {}
        task = self.auxiliary_task(key)
        return user if task is None else {**_copied(dict(task.defaults)), **user}

    # -- browser providers -------------------------------------------------------------

    def _browser_entry(self, name: str) -> Registration | None:
        # The latest registration of a name is the one in use (Hermes: registering again replaces).
        return next((e for e in reversed(self.all(BROWSER_PROVIDERS)) if e.name == name), None)

    def browser_providers(self) -> list[Any]:
        """The browser provider in use under each name, sorted by name."""
        names = sorted({e.name for e in self.all(BROWSER_PROVIDERS)})
        return [entry.value for entry in map(self._browser_entry, names) if entry is not None]

    def browser_provider(self, name: str | None = None) -> Any | None:
        """The provider named ``name``; without it, the one ``browser.cloud_provider`` selects.

        ``local`` selects none; a registered name is used whether it is available or not (its calls then
        say what is missing); otherwise the first available of ``browser-use``, ``browserbase``; else none.
        """
        if name is not None:
            entry = self._browser_entry(name.strip()) if isinstance(name, str) else None
            return entry.value if entry is not None else None
        section = self._kernel.config.get("browser")
        configured = section.get("cloud_provider") if isinstance(section, dict) else None
        configured = configured.strip() if isinstance(configured, str) else ""
        if configured == "local":
            return None
        if configured:
            entry = self._browser_entry(configured)
            if entry is not None:
                return entry.value
        for candidate in BROWSER_PREFERENCE:
            entry = self._browser_entry(candidate)
            if entry is not None and self._available(entry):
                return entry.value
        return None

    def _available(self, entry: Registration) -> bool:
        try:
            return entry.value.is_available() is True
        except Exception as exc:
            self._kernel.log.warning(
                "browser_provider_failed",
                plugin=entry.plugin,
                provider=entry.name,
                call="is_available",
                error=type(exc).__name__,
            )
            return False

    # -- Slack action handlers -------------------------------------------------------------

    def slack_action_handlers(self) -> list[SlackActionHandler]:
        """Every Slack action handler in registration order, each ``(matcher, callback, plugin)``: the
        list Hermes' Slack adapter wires into its ``slack_bolt`` app."""
        return [e.value for e in self.all(SLACK_ACTION_HANDLERS)]

    async def dispatch_slack_action(
        self, ack: Callable[[], Any], body: Mapping[str, Any], action: Mapping[str, Any]
    ) -> bool:
        """Run the first handler whose matcher takes ``action`` (as ``slack_bolt`` does); ``False`` when
        none does.  One that raises is logged and Slack is acknowledged for it: nothing propagates."""
        if not isinstance(action, Mapping):
            return False
        handler = next((h for h in self.slack_action_handlers() if _slack_matches(h.matcher, action)), None)
        if handler is None:
            return False
        try:
            result = handler.callback(ack, body, action)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            self._kernel.log.error(
                "slack_action_failed",
                plugin=handler.plugin,
                action=str(action.get("action_id"))[:MAX_NAME],
                error=f"{type(exc).__name__}: {exc}",
            )
            try:
                acked = ack()
                if inspect.isawaitable(acked):
                    await acked
            except Exception as ack_exc:
                self._kernel.log.debug(
                    "slack_ack_failed", plugin=handler.plugin, error=type(ack_exc).__name__
                )
        return True

    # -- dashboard auth providers ------------------------------------------------------------

    def dashboard_auth_providers(
        self, *, token: bool | None = None, session: bool | None = None
    ) -> list[Any]:
        """The dashboard login providers in registration order; ``token=True`` keeps those that verify
        API tokens (``supports_token``), ``session=True`` those with interactive sessions."""
        return [
            e.value
            for e in self.all(DASHBOARD_AUTH_PROVIDERS)
            if (token is None or e.details["supports_token"] is token)
            and (session is None or e.details["supports_session"] is session)
        ]

    def dashboard_auth_provider(self, name: str) -> Any | None:
        return next((e.value for e in self.all(DASHBOARD_AUTH_PROVIDERS) if e.name == name), None)

    # -- secret sources ---------------------------------------------------------------

    def secret_sources(self) -> list[Any]:
        """The secret source objects, in registration order."""
        return [e.value for e in self.all(SECRET_SOURCES)]

    def secret_provenance(self) -> dict[str, str]:
        """Variable -> the source whose value the kernel's environment holds (names only)."""
        with self._lock:
            return dict(self._provenance)

    @property
    def secret_report(self) -> SecretReport | None:
        """The report of the last :meth:`apply_secrets` (``None`` before any)."""
        return self._report

    def apply_secrets(self) -> SecretReport:
        """Fetch from every enabled secret source and put what they supply into the kernel's environment.

        A source runs when its ``secrets.<name>`` section enables it (``enabled: true``, or what its own
        ``is_enabled`` says); ``secrets.sources`` orders them, then registration order; mapped sources
        come before bulk ones; the first source to supply a variable keeps it.  A variable the process
        or the home's ``.env`` sets already is kept, except that ``override_existing: true`` may replace
        a ``.env`` value (never one the process set itself, nor another source's).  The values join
        ``k.environ`` and, as ``.env`` values do, ``os.environ`` (see :mod:`kernel.base.environ`); what
        earlier calls applied is withdrawn first.  Each fetch is bounded by the source's
        ``fetch_timeout_seconds`` (``timeout_seconds``, default 120 s); one that raises, hangs or answers
        nonsense is reported, never raised.  :meth:`Kernel.load` calls it at its end.
        """
        with self._apply_lock:
            self._withdraw(set(self.secret_provenance()))
            report = self._fetch_and_apply()
            self._report = report
            return report

    def _fetch_and_apply(self) -> SecretReport:
        kernel = self._kernel
        report = SecretReport()
        section = kernel.config.get("secrets")
        if not isinstance(section, dict) or not section or self._closing:
            return report
        entries = {e.name: e for e in self.all(SECRET_SOURCES)}
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
                environ.release(kernel._env_token)  # so that the new values replace exported .env ones
            for var in environ.export(kernel._env_token, kernel.environ.dotenv):
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

    def _withdraw(self, variables: set[str]) -> None:
        """Take variables secret sources supplied out of the kernel's environment; ``.env`` values they
        had replaced come back."""
        if not variables or self._closing:
            return
        kernel = self._kernel
        with self._lock:
            values = {k: v for k, v in kernel.environ.dotenv.items() if k not in variables}
            for var in variables:
                self._provenance.pop(var, None)
                if var in self._shadowed:
                    values[var] = self._shadowed.pop(var)
            kernel.environ.dotenv = values
        environ.release(kernel._env_token)
        for var in environ.export(kernel._env_token, kernel.environ.dotenv):
            kernel.log.debug("env_not_exported", variable=var)

    # -- adding and removing -----------------------------------------------------------------

    def _add(self, record: _Record, entry: Registration) -> Callable[[], None]:
        """Keep ``entry`` (named on ``record`` too); the function that takes it back."""
        with self._lock:
            self._entries.append(entry)
            _record_names(record).setdefault(entry.kind, []).append(entry.name)
        return lambda: self._remove([entry], record)

    def _remove(self, entries: list[Registration], record: _Record | None = None) -> None:
        sources = set()
        with self._lock:
            for entry in entries:
                if entry not in self._entries:
                    continue  # taken back already
                self._entries.remove(entry)
                if entry.kind == SECRET_SOURCES:
                    sources.add(entry.name)
                names = _record_names(record).get(entry.kind) if record is not None else None
                if names and entry.name in names:
                    names.remove(entry.name)
                    if not names:
                        del _record_names(record)[entry.kind]
            supplied = {v for v, s in self._provenance.items() if s in sources}
        self._withdraw(supplied)

    def remove_plugin(self, plugin: str, record: _Record | None = None) -> None:
        """Forget everything ``plugin`` registered, and the variables its secret sources supplied."""
        self._remove(self.all(plugin=plugin), record)


# --------------------------------------------------------------------------- ctx members


class Context:
    """The ``ctx`` members of this service, with Hermes' signatures."""

    @live
    def register_auxiliary_task(
        self,
        key: str,
        *,
        display_name: str,
        description: str,
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        """Declare an auxiliary LLM task, configured under ``auxiliary.<key>`` of ``config.yaml``.

        ``key`` is letters, digits and ``_``; one of Hermes' own tasks (``vision``, ``compression``, ...)
        or a key another plugin registered raises ``ValueError``; registering a key again replaces the
        plugin's own.  ``defaults`` go over the routing fields (``provider: auto``, ``model``,
        ``base_url``, ``api_key``, ``timeout: 60``, ``extra_body``).
        """
        kernel, record = self._kernel, self._record
        what = f"plugin '{record.name}': auxiliary task"
        key = _name(key, f"{what} key")
        if not _AUX_KEY.fullmatch(key):
            raise ValueError(f"{what} key {_shown(key)} must hold only letters, digits and underscores")
        if key in BUILTIN_AUXILIARY_TASKS:
            raise ValueError(
                f"{what} key '{key}' is one of Hermes' own tasks; use a key of the plugin's own "
                f"(e.g. '{record.slug}_{key}')"
            )
        display_name = _text(display_name, f"{what} '{key}': display_name")
        description = _text(description, f"{what} '{key}': description")
        merged = {**AUXILIARY_DEFAULTS, "extra_body": {}}
        if defaults is not None:
            if not issubclass(type(defaults), Mapping):
                raise ValueError(f"{what} '{key}': defaults must be a mapping, not {type(defaults).__name__}")
            try:
                items = list(defaults.items())
            except Exception as exc:
                raise ValueError(f"{what} '{key}': reading defaults raised {type(exc).__name__}") from exc
            for name, value in items:
                merged[_name(name, f"{what} '{key}': a key of defaults")] = value
        registrations = kernel.registrations
        with registrations._lock:
            for entry in registrations.all(AUXILIARY_TASKS):
                if entry.name == key and entry.plugin != record.name:
                    raise ValueError(f"{what} '{key}' is already registered by plugin '{entry.plugin}'")
                if entry.name == key:
                    registrations._remove([entry], record)
            task = AuxiliaryTask(key, display_name, description, types.MappingProxyType(merged), record.name)
            entry = Registration(
                AUXILIARY_TASKS,
                key,
                record.name,
                task,
                {"display_name": display_name, "description": description},
            )
            self._undo.append(registrations._add(record, entry))
        kernel.log.debug("auxiliary_task_registered", plugin=record.name, key=key)

    @live
    def register_browser_provider(self, provider: Any) -> None:
        """Offer a cloud browser backend, chosen by ``browser.cloud_provider`` (``k.registrations``).

        An object without ``is_available``, ``create_session``, ``close_session`` and
        ``emergency_cleanup`` is ignored with a warning, as Hermes ignores one that is not a
        ``BrowserProvider``; a ``name`` that is not a non-empty string raises ``ValueError``.  A name
        registered before is replaced (noted on both plugins), and comes back when this plugin goes.
        """
        kernel, record = self._kernel, self._record
        what = f"plugin '{record.name}': browser provider"
        missing = _missing_methods(provider, _BROWSER_METHODS, what)
        if missing:
            _refuse(
                kernel,
                record,
                BROWSER_PROVIDERS,
                f"it is not a BrowserProvider (missing: {', '.join(missing)})",
            )
            return
        name = _name(_attr(provider, "name", what, None), f"{what} name")
        try:
            display = (
                _text(_attr(provider, "display_name", what, name), f"{what} '{name}': display_name") or name
            )
        except ValueError:
            display = name
        registrations = kernel.registrations
        with registrations._lock:
            previous = registrations._browser_entry(name)
            entry = Registration(BROWSER_PROVIDERS, name, record.name, provider, {"display_name": display})
            self._undo.append(registrations._add(record, entry))
        if previous is not None and previous.plugin != record.name:
            record.warnings.append(
                f"browser provider '{name}' replaces the one of plugin '{previous.plugin}' "
                "(which comes back if this plugin is unloaded)"
            )
            other = kernel._records.get(previous.plugin)
            if other is not None:
                other.warnings.append(
                    f"browser provider '{name}' is replaced by the one of plugin '{record.name}'"
                )
            kernel.log.warning(
                "browser_provider_replaced", provider=name, plugin=record.name, replaced=previous.plugin
            )
        kernel.log.debug("browser_provider_registered", plugin=record.name, provider=name)

    @live
    def register_secret_source(self, source: Any) -> None:
        """Offer an external secret manager, fetched at the end of ``load()`` when ``secrets.<name>`` of
        ``config.yaml`` enables it (see :meth:`Registrations.apply_secrets`).

        As in Hermes, a source is ignored with a warning, never raised, when it has no ``fetch``, its
        ``name`` is not lowercase ``[a-z0-9_]+``, its ``api_version`` is not 1, its ``shape`` is neither
        ``mapped`` nor ``bulk``, its name is taken (the first source keeps it), or its ``scheme`` is
        another source's.
        """
        kernel, record = self._kernel, self._record
        what = f"plugin '{record.name}': secret source"
        if _missing_methods(source, ("fetch",), what):
            _refuse(
                kernel, record, SECRET_SOURCES, "it is not a SecretSource (it has no fetch(cfg, home_path))"
            )
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
                    reason = (
                        f"'{name}' is already registered by plugin '{taken.plugin}' (the first one is kept)"
                    )
                elif scheme is not None and taken.details["scheme"] == scheme:
                    reason = f"'{name}': the scheme '{scheme}://' belongs to source '{taken.name}'"
                if reason is not None:
                    _refuse(kernel, record, SECRET_SOURCES, reason)
                    return
            details = {"label": label or name, "shape": str.__str__(shape), "scheme": scheme}
            entry = Registration(SECRET_SOURCES, name, record.name, source, details)
            self._undo.append(registrations._add(record, entry))
        kernel.log.debug("secret_source_registered", plugin=record.name, source=name)

    @live
    def register_slack_action_handler(self, action_id: Any, callback: Callable[..., Any]) -> None:
        """Handle a Slack Block Kit action: ``callback(ack, body, action)``, usually a coroutine function.

        ``action_id`` is a literal id, a compiled ``re`` pattern, or a dict of ``action_id``,
        ``block_id`` and ``type`` constraints, as ``slack_bolt``'s ``app.action()`` takes them.  A
        callback that is not callable, or an empty or unusable ``action_id``, raises ``ValueError``.
        """
        kernel, record = self._kernel, self._record
        what = f"plugin '{record.name}': Slack action handler"
        if not callable(callback):
            raise ValueError(f"{what}: the callback is not callable ({type(callback).__name__})")
        matcher, label = _slack_matcher(action_id, what)
        registrations = kernel.registrations
        with registrations._lock:
            earlier = next((e for e in registrations.all(SLACK_ACTION_HANDLERS) if e.name == label), None)
            handler = SlackActionHandler(matcher, callback, record.name)
            self._undo.append(
                registrations._add(record, Registration(SLACK_ACTION_HANDLERS, label, record.name, handler))
            )
        if earlier is not None and earlier.plugin != record.name:
            record.warnings.append(
                f"Slack action {_shown(label)} is handled by plugin '{earlier.plugin}' first: "
                "this handler runs only once that one is gone"
            )
        kernel.log.debug("slack_action_handler_registered", plugin=record.name, action=label[:MAX_NAME])

    @live
    def register_dashboard_auth_provider(self, provider: Any) -> None:
        """Offer a dashboard login provider (``k.registrations.dashboard_auth_providers()``).

        As in Hermes, one is ignored with a warning, never raised, when it lacks a non-empty ``name`` or
        ``display_name``, or one of ``start_login``, ``complete_login``, ``verify_session``,
        ``refresh_session``, ``revoke_session``, or when its name is taken (the first one is kept).
        """
        kernel, record = self._kernel, self._record
        what = f"plugin '{record.name}': dashboard-auth provider"
        missing = _missing_methods(provider, _DASHBOARD_METHODS, what)
        if missing:
            reason = f"it is not a DashboardAuthProvider (missing: {', '.join(missing)})"
            _refuse(kernel, record, DASHBOARD_AUTH_PROVIDERS, reason)
            return
        name = _attr(provider, "name", what, "")
        display = _attr(provider, "display_name", what, "")
        try:
            name = _name(name, f"{what} name")
            display = _name(display, f"{what} '{name}': display_name", MAX_TEXT)
        except ValueError as exc:
            _refuse(kernel, record, DASHBOARD_AUTH_PROVIDERS, str(exc))
            return
        details = {
            "display_name": display,
            "supports_password": _flag(provider, "supports_password", what, False),
            "supports_token": _flag(provider, "supports_token", what, False),
            "supports_session": _flag(provider, "supports_session", what, True),
        }
        registrations = kernel.registrations
        with registrations._lock:
            taken = next((e for e in registrations.all(DASHBOARD_AUTH_PROVIDERS) if e.name == name), None)
            if taken is not None:
                reason = f"'{name}' is already registered by plugin '{taken.plugin}' (the first one is kept)"
                _refuse(kernel, record, DASHBOARD_AUTH_PROVIDERS, reason)
                return
            entry = Registration(DASHBOARD_AUTH_PROVIDERS, name, record.name, provider, details)
            self._undo.append(registrations._add(record, entry))
        kernel.log.debug("dashboard_auth_provider_registered", plugin=record.name, provider=name)


def _refuse(kernel: Kernel, record: _Record, kind: str, reason: str) -> None:
    """A registration Hermes ignores: a warning on the plugin and in the log; the plugin loads on."""
    noun = kind[:-1].replace("_", " ")
    record.warnings.append(f"{noun} ignored: {reason}")
    kernel.log.warning("registration_ignored", plugin=record.name, kind=kind, reason=reason)


# --------------------------------------------------------------------------- the service hooks


@serviceimpl
def service_attach(kernel: Kernel) -> None:
    kernel.registrations = Registrations(kernel)


@serviceimpl(tryfirst=True)
def service_load_finished(kernel: Kernel) -> None:
    # Before the other services finish the load (providers, MCP servers): they see the values.
    if kernel.registrations.all(SECRET_SOURCES):
        kernel.registrations.apply_secrets()


@serviceimpl
def service_plugin_owns(kernel: Kernel, record: _Record) -> bool:
    return bool(kernel.registrations.all(plugin=record.name))


@serviceimpl
def service_plugin_unloaded(kernel: Kernel, record: _Record) -> None:
    kernel.registrations.remove_plugin(record.name, record)
    _record_names(record).clear()


@serviceimpl
def service_shutdown(kernel: Kernel) -> None:
    # The kernel releases its whole environment itself once the plugins are dropped.
    kernel.registrations._closing = True


__all__ = [
    "AUXILIARY_DEFAULTS",
    "BROWSER_PREFERENCE",
    "BUILTIN_AUXILIARY_TASKS",
    "KINDS",
    "SECRET_SOURCE_API_VERSION",
    "AuxiliaryTask",
    "BrowserProvider",
    "DashboardAuthProvider",
    "ErrorKind",
    "FetchResult",
    "Registration",
    "Registrations",
    "SecretReport",
    "SecretSource",
    "SecretSourceReport",
    "SlackActionHandler",
]
