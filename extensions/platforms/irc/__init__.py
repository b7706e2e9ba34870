"""The bundled IRC gateway platform (plugin ``platforms/irc``).

``register(ctx)`` offers the platform ``irc`` to the gateway.  The adapter
(``adapter.py``, standard library only) is imported when the gateway builds it,
not when the kernel starts.  See ``docs/irc.md`` for the settings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

NAME = "irc"
LABEL = "IRC"
PLATFORM_HINT = (
    "You are chatting on IRC: plain text only, no Markdown, no code fences or tables; "
    "keep answers short (a few lines at most), each line is shown as a separate message."
)

__all__ = ["LABEL", "NAME", "PLATFORM_HINT", "env_enablement", "make_adapter", "register"]


def make_adapter(config: Any) -> Any:
    """The adapter factory: an :class:`~.adapter.IrcAdapter` for ``config`` (a ``PlatformConfig``)."""
    from .adapter import IrcAdapter

    return IrcAdapter(config)


def env_enablement() -> dict[str, Any] | None:
    """The platform's settings from ``IRC_*`` variables; ``None`` when ``IRC_SERVER`` is not set."""
    server = os.environ.get("IRC_SERVER", "").strip()
    if not server:
        return None
    found: dict[str, Any] = {"server": server}
    for key, var in (("port", "IRC_PORT"), ("nick", "IRC_NICK"), ("password", "IRC_PASSWORD")):
        value = os.environ.get(var, "").strip()
        if value:
            found[key] = value
    channels = os.environ.get("IRC_CHANNELS", "").replace(",", " ").split()
    if channels:
        found["channels"] = channels
    tls = os.environ.get("IRC_TLS", "").strip()
    if tls:
        found["tls"] = tls
    home = os.environ.get("IRC_HOME_CHANNEL", "").strip()
    if home:
        found["home_channel"] = home
    return found


def server_configured(config: Mapping[str, Any] | None) -> bool:
    """Whether a server is named, in ``gateway.platforms.irc`` of ``config`` or by ``IRC_SERVER``."""
    if os.environ.get("IRC_SERVER", "").strip():
        return True
    gateway = (config or {}).get("gateway")
    platforms = gateway.get("platforms") if isinstance(gateway, Mapping) else None
    section = platforms.get(NAME) if isinstance(platforms, Mapping) else None
    if not isinstance(section, Mapping):
        return False
    extra = section.get("extra") if isinstance(section.get("extra"), Mapping) else {}
    return any(
        isinstance(where.get(key), str) and where[key].strip()
        for where in (section, extra)
        for key in ("server", "host")
    )


def register(ctx: Any) -> None:
    ctx.register_platform(
        name=NAME,
        label=LABEL,
        adapter_factory=make_adapter,
        check_fn=lambda: server_configured(ctx.config),
        env_enablement_fn=env_enablement,
        cron_deliver_env_var="IRC_HOME_CHANNEL",
        emoji="💬",
        platform_hint=PLATFORM_HINT,
    )
