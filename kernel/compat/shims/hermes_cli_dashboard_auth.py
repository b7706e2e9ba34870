"""``hermes_cli.dashboard_auth`` for plugins written for Hermes Agent: the provider base class (the
kernel's, see :mod:`kernel.registrations`) and the values and errors its methods use.

The kernel has no dashboard: a provider registered with ``ctx.register_dashboard_auth_provider`` is
kept for the embedding host (``k.registrations.dashboard_auth_providers()``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...registrations import DashboardAuthProvider
from . import current_kernel, registering_context

__all__ = [
    "DashboardAuthProvider",
    "InvalidCodeError",
    "InvalidCredentialsError",
    "LoginStart",
    "ProviderError",
    "RefreshExpiredError",
    "Session",
    "TokenPrincipal",
    "assert_protocol_compliance",
    "get_provider",
    "list_providers",
    "list_session_providers",
    "list_token_providers",
    "register_provider",
]


@dataclass(frozen=True)
class Session:
    """A signed-in user, as a provider's ``complete_login`` / ``verify_session`` answers."""

    user_id: str
    email: str
    display_name: str
    org_id: str
    provider: str
    expires_at: int  # unix seconds
    access_token: str
    refresh_token: str


@dataclass(frozen=True)
class TokenPrincipal:
    """Who a bearer token stands for (``verify_token``)."""

    principal: str
    provider: str
    scopes: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoginStart:
    """Where ``start_login`` sends the browser, and what to keep in the login cookie."""

    redirect_url: str
    cookie_payload: dict[str, str] = field(default_factory=dict)


class ProviderError(Exception):
    """The identity provider failed (unreachable, or an answer that cannot be read)."""


class InvalidCodeError(Exception):
    """A login callback's code or state is not valid."""


class InvalidCredentialsError(Exception):
    """A user name and password that do not sign in."""


class RefreshExpiredError(Exception):
    """A refresh token that no longer renews the session."""


_METHODS = ("start_login", "complete_login", "verify_session", "refresh_session", "revoke_session")


def assert_protocol_compliance(cls: type) -> None:
    """``TypeError`` unless ``cls`` has a ``name``, a ``display_name`` and every provider method."""
    for attr in ("name", "display_name"):
        if not getattr(cls, attr, ""):
            raise TypeError(f"{cls.__name__} has no {attr!r}")
    for method in _METHODS:
        if not callable(getattr(cls, method, None)):
            raise TypeError(f"{cls.__name__} has no method {method!r}")
    missing = sorted(getattr(cls, "__abstractmethods__", ()) or ())
    if missing:
        raise TypeError(f"{cls.__name__} leaves abstract: {', '.join(missing)}")


def register_provider(provider: DashboardAuthProvider) -> None:
    """Register ``provider`` as ``ctx.register_dashboard_auth_provider`` does (to the plugin being
    loaded, else the kernel's ``compat:hermes`` record), but raising as Hermes' registry does:
    ``TypeError`` when it lacks a name, a display name or a method, ``ValueError`` when its name is taken."""
    assert_protocol_compliance(type(provider))
    ctx = registering_context("hermes_cli.dashboard_auth.register_provider")
    if get_provider(provider.name) is not None:
        raise ValueError(f"dashboard-auth provider {provider.name!r} is already registered")
    ctx.register_dashboard_auth_provider(provider)


def get_provider(name: str) -> DashboardAuthProvider | None:
    """The current kernel's provider named ``name``, or ``None``."""
    kernel = current_kernel()
    return kernel.registrations.dashboard_auth_provider(name) if kernel is not None else None


def list_providers() -> list[DashboardAuthProvider]:
    """The current kernel's providers, in registration order."""
    kernel = current_kernel()
    return kernel.registrations.dashboard_auth_providers() if kernel is not None else []


def list_token_providers() -> list[DashboardAuthProvider]:
    """The providers that verify API tokens (``supports_token``)."""
    kernel = current_kernel()
    return kernel.registrations.dashboard_auth_providers(token=True) if kernel is not None else []


def list_session_providers() -> list[DashboardAuthProvider]:
    """The providers with interactive sessions (``supports_session``, on unless a provider says not)."""
    kernel = current_kernel()
    return kernel.registrations.dashboard_auth_providers(session=True) if kernel is not None else []
