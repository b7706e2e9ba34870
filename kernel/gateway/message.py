"""One message on a platform: its type, its source, the event an adapter hands over, a send's result."""

from __future__ import annotations

import enum
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .config import Platform

MessageHandler = Callable[["MessageEvent"], "Awaitable[str | None] | str | None"]


class MessageType(enum.StrEnum):
    """What kind of message arrived."""

    TEXT = "text"
    COMMAND = "command"
    PHOTO = "photo"
    VIDEO = "video"
    AUDIO = "audio"
    VOICE = "voice"
    DOCUMENT = "document"
    STICKER = "sticker"
    LOCATION = "location"


@dataclass
class SessionSource:
    """Where a message came from: the platform, the chat and the sender."""

    platform: Platform
    chat_id: str
    chat_type: str = "dm"
    user_id: str | None = None
    user_name: str | None = None
    chat_name: str | None = None
    thread_id: str | None = None


@dataclass
class MessageEvent:
    """One incoming message, as an adapter hands it to the host.

    The fields are in Hermes Agent 0.19's order, so an event built positionally the way Hermes'
    adapters build it means the same here.
    """

    text: str
    message_type: MessageType = MessageType.TEXT
    source: SessionSource | None = None
    raw_message: Any = None
    message_id: str | None = None
    platform_update_id: int | None = None
    media_urls: list[str] = field(default_factory=list)
    media_types: list[str] = field(default_factory=list)
    reply_to_message_id: str | None = None
    reply_to_text: str | None = None
    reply_to_author_id: str | None = None
    reply_to_author_name: str | None = None
    reply_to_is_own_message: bool = False
    auto_skill: str | list[str] | None = None
    channel_prompt: str | None = None
    channel_context: str | None = None
    internal: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    timestamp: float = field(default_factory=time.time)

    @property
    def chat_id(self) -> str | None:
        return self.source.chat_id if self.source is not None else None

    def is_command(self) -> bool:
        """Whether the message is a command (``/new``, ``/reset``...)."""
        return self.message_type is MessageType.COMMAND or self.text.lstrip().startswith("/")

    def get_command(self) -> str | None:
        """The command's name, lowercased, without the slash or a ``@botname`` suffix; None for a
        message that is no command (or starts with a file path such as ``/tmp/x``)."""
        if not self.is_command():
            return None
        words = self.text.split(maxsplit=1)
        name = words[0].lstrip("/").split("@", 1)[0].lower() if words else ""
        return name if name and "/" not in name else None

    def get_command_args(self) -> str:
        """What follows the command (the whole text for a message that is no command); the dashes
        phones turn ``--`` into are turned back."""
        if not self.is_command():
            return self.text
        words = self.text.split(maxsplit=1)
        args = words[1] if len(words) > 1 else ""
        return args.replace("\u2014\u2014", "--").replace("\u2014", "--").replace("\u2013", "-")


@dataclass
class SendResult:
    """What :meth:`BasePlatformAdapter.send` reports."""

    success: bool
    message_id: str | None = None
    error: str | None = None
    raw_response: Any = None
    retryable: bool = False
    #: Seconds the platform asked to wait before retrying (rate limits), when it said.
    retry_after: float | None = None
    #: The ids of the further messages a long reply was split into.
    continuation_message_ids: list[str] = field(default_factory=list)
    #: One of ``SEND_ERROR_KINDS`` of ``gateway.platforms.base`` when the send failed.
    error_kind: str | None = None
