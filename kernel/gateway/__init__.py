"""The messaging gateway's building blocks: platforms, their settings and adapters.

These are the classes plugins written for Hermes Agent build platform
adapters from (served to them as ``gateway.config`` and
``gateway.platforms.base``).  The gateway that runs adapters builds on them.
"""

from .base import BasePlatformAdapter, MessageEvent, MessageHandler, MessageType, SendResult, SessionSource
from .config import Platform, PlatformConfig

__all__ = [
    "BasePlatformAdapter",
    "MessageEvent",
    "MessageHandler",
    "MessageType",
    "Platform",
    "PlatformConfig",
    "SendResult",
    "SessionSource",
]
