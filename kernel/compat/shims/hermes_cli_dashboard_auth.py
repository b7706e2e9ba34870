"""``hermes_cli.dashboard_auth`` for plugins written for Hermes Agent: the provider base class (the
kernel's, see :mod:`kernel.registrations`) and the values and errors its methods use.

The kernel has no dashboard: a provider registered with ``ctx.register_dashboard_auth_provider`` is
kept for the embedding host (``k.registrations.dashboard_auth_providers()``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...registrations import DashboardAuthProvider

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
