"""Which messaging platform, and how it is configured: :class:`Platform` and :class:`PlatformConfig`."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Platform(enum.StrEnum):
    """A messaging platform, compared and printed as its lower-case name.

    The well-known ones are members (``Platform.TELEGRAM``); any other
    non-empty name, such as a plugin's own platform, is accepted too:
    ``Platform("myplatform")`` makes (once) and returns a member for it, so
    ``Platform("myplatform") is Platform("myplatform")``.
    """

    CLI = "cli"
    LOCAL = "local"
    TELEGRAM = "telegram"
    DISCORD = "discord"
    SLACK = "slack"
    WHATSAPP = "whatsapp"
    SIGNAL = "signal"
    MATRIX = "matrix"
    EMAIL = "email"
    SMS = "sms"
    WEBHOOK = "webhook"
    API_SERVER = "api_server"

    @classmethod
    def _missing_(cls, value: object) -> Platform | None:
        if not isinstance(value, str) or not value.strip():
            return None
        name = value.strip().lower()
        known = cls._value2member_map_.get(name)
        if known is not None:
            return known  # type: ignore[return-value]
        member = str.__new__(cls, name)
        member._name_ = name.upper().replace("-", "_")
        member._value_ = name
        cls._value2member_map_[name] = member
        return member


@dataclass
class PlatformConfig:
    """The settings of one platform (``gateway.platforms.<name>`` in config.yaml).

    ``extra`` holds whatever the adapter needs beyond the common fields.
    """

    enabled: bool = False
    token: str | None = None
    api_key: str | None = None
    home_channel: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> PlatformConfig:
        """Build from a config section; unknown keys go to ``extra``."""
        data = dict(data or {})
        extra = dict(data.pop("extra", None) or {})
        known = {"enabled", "token", "api_key", "home_channel"}
        extra.update({k: v for k, v in data.items() if k not in known})
        return cls(
            enabled=bool(data.get("enabled", False)),
            token=data.get("token"),
            api_key=data.get("api_key"),
            home_channel=data.get("home_channel"),
            extra=extra,
        )
