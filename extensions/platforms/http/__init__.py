"""The bundled HTTP gateway platform (plugin ``platforms/http``).

``register(ctx)`` offers the platform ``http`` to the gateway: a small JSON endpoint on 127.0.0.1
to try and benchmark the gateway without an outside chat server.  The adapter (``adapter.py``,
standard library only) is imported when the gateway builds it or checks its settings.  See
``docs/gateway.md`` for the settings and endpoints.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

NAME = "http"
LABEL = "HTTP"
PLATFORM_HINT = "You are answering messages posted to a local HTTP endpoint: plain text or Markdown."

__all__ = ["LABEL", "NAME", "PLATFORM_HINT", "check_settings", "register"]


def _section(config: Mapping[str, Any] | None) -> Mapping[str, Any]:
    gateway = (config or {}).get("gateway")
    platforms = gateway.get("platforms") if isinstance(gateway, Mapping) else None
    section = platforms.get(NAME) if isinstance(platforms, Mapping) else None
    return section if isinstance(section, Mapping) else {}


def check_settings(config: Mapping[str, Any] | None, where: str = "config.yaml") -> bool:
    """``True`` when ``gateway.platforms.http`` can be served; a :class:`ValueError` says what to fix
    (``gateway status`` shows it, and ``gateway run`` does not start the platform)."""
    from .adapter import HttpSettings

    HttpSettings.from_config(_section(config), os.environ, where)
    return True


def register(ctx: Any) -> None:
    where = str(ctx.home / "config.yaml")

    def make_adapter(config: Any) -> Any:
        from .adapter import HttpAdapter

        return HttpAdapter(config, environ=os.environ, where=where)

    ctx.register_platform(
        name=NAME,
        label=LABEL,
        adapter_factory=make_adapter,
        check_fn=lambda: check_settings(ctx.config, where),
        emoji="🌐",
        platform_hint=PLATFORM_HINT,
    )
