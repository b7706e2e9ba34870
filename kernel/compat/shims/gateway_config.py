"""``gateway.config`` for plugins written for Hermes Agent: ``Platform`` and ``PlatformConfig``."""

from ...gateway.config import Platform, PlatformConfig

__all__ = ["Platform", "PlatformConfig"]
