"""Dashboard login providers: Hermes' ``DashboardAuthProvider`` contract and its ``ctx`` member."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from ..core.api import kernel_of, on_rollback, record_of
from ..core.context import live
from .checks import _attr, _flag, _missing_methods, _name, _refuse
from .kinds import DASHBOARD_AUTH_PROVIDERS, MAX_TEXT, Registration

if TYPE_CHECKING:
    from ..core.context import PluginContext


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


_DASHBOARD_METHODS = ("start_login", "complete_login", "verify_session", "refresh_session", "revoke_session")


@live
def register_dashboard_auth_provider(self: PluginContext, provider: Any) -> None:
    """Offer a dashboard login provider (``k.registrations.dashboard_auth_providers()``).

    As in Hermes, one is ignored with a warning, never raised, when it lacks a non-empty ``name`` or
    ``display_name``, or one of ``start_login``, ``complete_login``, ``verify_session``,
    ``refresh_session``, ``revoke_session``, or when its name is taken (the first one is kept).
    """
    kernel, record = kernel_of(self), record_of(self)
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
        on_rollback(self, registrations._add(record, entry))
    kernel.log.debug("dashboard_auth_provider_registered", plugin=record.name, provider=name)
