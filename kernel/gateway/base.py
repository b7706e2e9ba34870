"""Platform adapters: what connects the agent to one messaging platform.

A plugin subclasses :class:`BasePlatformAdapter` and implements ``connect``,
``disconnect`` and ``send``.  When a message arrives it builds a
:class:`MessageEvent` and awaits :meth:`BasePlatformAdapter.handle_message`,
which passes it to the handler the host set with
:meth:`~BasePlatformAdapter.set_message_handler` and sends the handler's
text answer back to the chat.
"""

from __future__ import annotations

import enum
import inspect
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .config import Platform, PlatformConfig

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
    """One incoming message, as an adapter hands it to the host."""

    text: str
    message_type: MessageType = MessageType.TEXT
    source: SessionSource | None = None
    message_id: str | None = None
    reply_to_message_id: str | None = None
    media_urls: list[str] = field(default_factory=list)
    media_types: list[str] = field(default_factory=list)
    raw_message: Any = None
    timestamp: float = field(default_factory=time.time)

    @property
    def chat_id(self) -> str | None:
        return self.source.chat_id if self.source is not None else None

    @property
    def is_command(self) -> bool:
        return self.message_type is MessageType.COMMAND or self.text.lstrip().startswith("/")


@dataclass
class SendResult:
    """What :meth:`BasePlatformAdapter.send` reports."""

    success: bool
    message_id: str | None = None
    error: str | None = None
    raw_response: Any = None
    retryable: bool = False


class BasePlatformAdapter(ABC):
    """The base of every platform adapter.

    ``__init__(config, platform=None)`` keeps both; subclasses usually take
    only the config (the gateway then sets ``platform`` to the registered name).  ``MAX_MESSAGE_LENGTH`` (a
    class attribute) becomes the ``max_message_length`` attribute, which the
    host uses to split long answers.
    """

    MAX_MESSAGE_LENGTH: int = 4096
    #: ``True`` for an adapter that restores a dropped connection itself; otherwise the gateway
    #: calls ``connect(is_reconnect=True)`` (with backoff) once ``is_connected`` turns false.
    reconnects_itself: bool = False
    #: Why the last ``connect`` failed, for ``gateway status`` when it returned ``False``.
    last_error: str | None = None

    def __init__(self, config: PlatformConfig, platform: Platform | str | None = None) -> None:
        self.config = config
        # Adapters built with the config alone get their platform from the gateway that runs them.
        self.platform = Platform(platform) if platform else Platform.LOCAL
        self.max_message_length: int = type(self).MAX_MESSAGE_LENGTH
        self._message_handler: MessageHandler | None = None
        self._connected = False

    @property
    def name(self) -> str:
        return self.platform.value

    @property
    def is_connected(self) -> bool:
        return self._connected

    def _mark_connected(self) -> None:
        self._connected = True

    def _mark_disconnected(self) -> None:
        self._connected = False

    # -- what an adapter implements ---------------------------------------------

    @abstractmethod
    async def connect(self, *, is_reconnect: bool = False) -> bool:
        """Connect to the platform and start receiving; ``True`` when connected."""

    @abstractmethod
    async def disconnect(self) -> None:
        """Stop receiving and close the connection."""

    @abstractmethod
    async def send(
        self,
        chat_id: str,
        content: str,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SendResult:
        """Send ``content`` to ``chat_id`` (as a reply to ``reply_to`` when given)."""

    async def send_typing(self, chat_id: str, metadata: dict[str, Any] | None = None) -> None:
        """Show a typing indicator, if the platform has one (default: nothing)."""
        return None

    async def get_chat_info(self, chat_id: str) -> dict[str, Any]:
        """``{"id", "name", "type"}`` of a chat (default: what the adapter knows without asking)."""
        return {"id": chat_id, "name": chat_id, "type": "dm"}

    # -- the host's side -----------------------------------------------------------

    def set_message_handler(self, handler: MessageHandler | None) -> None:
        """Set what incoming messages go to: ``handler(event)`` returns the answer text (or None)."""
        self._message_handler = handler

    async def handle_message(self, event: MessageEvent) -> str | None:
        """Give ``event`` to the host's handler; send its text answer back to the chat.

        Returns the answer.  Without a handler the message is dropped (and
        logged); a handler that raises is logged and answers nothing.
        """
        handler = self._message_handler
        if handler is None:
            _logger(self).warning("platform %s: no message handler set; message dropped", self.name)
            return None
        try:
            answer = handler(event)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception:
            _logger(self).exception("platform %s: the message handler failed", self.name)
            return None
        if isinstance(answer, str) and answer.strip() and event.chat_id is not None:
            await self.send(event.chat_id, answer, reply_to=event.message_id)
        return answer if isinstance(answer, str) else None


def _logger(adapter: BasePlatformAdapter) -> logging.Logger:
    """The logger of the adapter's module: a plugin's adapter logs into its kernel's ``agent.log``."""
    return logging.getLogger(type(adapter).__module__)
