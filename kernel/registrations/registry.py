"""``k.registrations``: what plugins registered here, by kind, and what the embedding host asks of it."""

from __future__ import annotations

import copy
import inspect
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .auxiliary import AuxiliaryTask
from .browser import BROWSER_PREFERENCE
from .checks import _copied, _record_names
from .kinds import (
    AUXILIARY_TASKS,
    BROWSER_PROVIDERS,
    DASHBOARD_AUTH_PROVIDERS,
    MAX_NAME,
    SECRET_SOURCES,
    SLACK_ACTION_HANDLERS,
    Registration,
)
from .secret_apply import SecretLedger
from .secret_sources import SecretReport
from .slack import SlackActionHandler, _slack_matches

if TYPE_CHECKING:
    from ..core.kernel import Kernel
    from ..core.records import _Record


class Registrations:
    """``k.registrations``: what plugins registered here, by kind, for the embedding host."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._lock = threading.RLock()
        self._entries: list[Registration] = []
        self._secrets = SecretLedger(kernel, self._lock, lambda: self.all(SECRET_SOURCES))

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
        return self._secrets.provenance()

    @property
    def secret_report(self) -> SecretReport | None:
        """The report of the last :meth:`apply_secrets` (``None`` before any)."""
        return self._secrets.report

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
        return self._secrets.apply()

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
                held = _record_names(record) if record is not None else None
                names = held.get(entry.kind) if held is not None else None
                if held is not None and names and entry.name in names:
                    names.remove(entry.name)
                    if not names:
                        del held[entry.kind]
            supplied = self._secrets.supplied_by(sources)
        self._secrets.withdraw(supplied)

    def remove_plugin(self, plugin: str, record: _Record | None = None) -> None:
        """Forget everything ``plugin`` registered, and the variables its secret sources supplied."""
        self._remove(self.all(plugin=plugin), record)
