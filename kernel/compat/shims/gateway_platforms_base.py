"""``gateway.platforms.base`` for plugins written for Hermes Agent: the kernel's adapter classes."""

from ...gateway.base import BasePlatformAdapter, MessageEvent, MessageType, SendResult, SessionSource

__all__ = ["BasePlatformAdapter", "MessageEvent", "MessageType", "SendResult", "SessionSource"]
