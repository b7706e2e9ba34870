"""Platform adapters: what connects the agent to one messaging platform.

A plugin subclasses :class:`BasePlatformAdapter` and implements ``connect``,
``disconnect`` and ``send``.  When a message arrives it builds a
:class:`MessageEvent` and awaits :meth:`BasePlatformAdapter.handle_message`,
which passes it to the handler the host set with
:meth:`~BasePlatformAdapter.set_message_handler` and sends the handler's
text answer back to the chat.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from . import media
from .config import Platform, PlatformConfig

# The message types and the media rule live in their own modules; plugins (and the Hermes module
# ``gateway.platforms.base``) import them from here.
from .media import MEDIA_EXTENSIONLESS_TAG_RE, MEDIA_PATH_CHECK, MEDIA_TAG_CLEANUP_RE
from .message import MessageEvent, MessageHandler, MessageType, SendResult, SessionSource

__all__ = [
    "MEDIA_EXTENSIONLESS_TAG_RE",
    "MEDIA_PATH_CHECK",
    "MEDIA_TAG_CLEANUP_RE",
    "BasePlatformAdapter",
    "MessageEvent",
    "MessageHandler",
    "MessageType",
    "SendResult",
    "SessionSource",
]


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

    # -- Hermes Agent 0.19's adapter surface ---------------------------------------
    # Defaults for what Hermes' gateway asks of an adapter: a plugin adapter written for it
    # overrides what its platform does better (native media, edits, drafts); the rest works as text.

    REQUIRES_EDIT_FINALIZE: bool = False
    splits_long_messages: bool = True
    supports_async_delivery: bool = False
    supports_code_blocks: bool = True
    supports_inchannel_continuable: bool = False
    supports_status_text: bool = False
    typed_command_prefix: str = "/"
    interactive_resume: bool = False
    gateway_runner: Any = None
    _fatal_error: tuple[str, str, bool] | None = None

    def _state(self) -> dict[str, Any]:
        """The per-adapter bookkeeping, made on first use (also for adapters that skip ``__init__``)."""
        state = self.__dict__.get("_hermes_state")
        if state is None:
            state = self.__dict__["_hermes_state"] = {
                "pending": {},
                "callbacks": {},
                "tasks": set(),
                "paused": set(),
                "handlers": {},
            }
        return state

    @property
    def _pending_messages(self) -> dict[str, MessageEvent]:
        return self._state()["pending"]

    @property
    def authorization_is_upstream(self) -> bool:
        """Whether the platform itself decides who may talk to the agent (default: no)."""
        return False

    @property
    def enforces_own_access_policy(self) -> bool:
        """Whether the adapter filters senders itself (default: no)."""
        return False

    @property
    def message_len_fn(self) -> Callable[[str], int]:
        """How the platform measures a message's length (default: characters)."""
        return len

    @property
    def has_fatal_error(self) -> bool:
        return self._fatal_error is not None

    @property
    def fatal_error_code(self) -> str | None:
        return self._fatal_error[0] if self._fatal_error else None

    @property
    def fatal_error_message(self) -> str | None:
        return self._fatal_error[1] if self._fatal_error else None

    @property
    def fatal_error_retryable(self) -> bool:
        return bool(self._fatal_error and self._fatal_error[2])

    def _set_fatal_error(self, code: str, message: str, *, retryable: bool) -> None:
        """Record that the adapter cannot go on (a revoked token, a banned account) and tell the
        handler :meth:`set_fatal_error_handler` set, if any."""
        self._fatal_error = (str(code), str(message), bool(retryable))
        self.last_error = str(message)
        handler = self._state()["handlers"].get("fatal")
        if handler is not None:
            try:
                result = handler(self)
                if inspect.isawaitable(result):
                    self._track(asyncio.ensure_future(result))
            except Exception:
                _logger(self).exception("platform %s: the fatal-error handler failed", self.name)

    def _clear_fatal_error(self) -> None:
        self._fatal_error = None

    def _track(self, task: asyncio.Future[Any]) -> None:
        tasks: set[asyncio.Future[Any]] = self._state()["tasks"]
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def set_fatal_error_handler(self, handler: Callable[..., Any] | None) -> None:
        """Set what is called (with the adapter) when it records a fatal error."""
        self._state()["handlers"]["fatal"] = handler

    def set_session_store(self, session_store: Any) -> None:
        """Give the adapter the gateway's session store."""
        self._state()["handlers"]["session_store"] = session_store

    def set_authorization_check(self, callback: Callable[..., Any] | None) -> None:
        """Set the check the adapter may ask whether a sender is allowed."""
        self._state()["handlers"]["authorization"] = callback

    def set_busy_session_handler(self, handler: Callable[..., Any] | None) -> None:
        """Set what is told of a message that arrives while its session is busy."""
        self._state()["handlers"]["busy"] = handler

    def set_topic_recovery_fn(self, fn: Callable[..., Any] | None) -> None:
        """Set how a deleted thread or topic is recovered."""
        self._state()["handlers"]["topic_recovery"] = fn

    def get_pending_message(self, session_key: str) -> MessageEvent | None:
        """Take the message queued for ``session_key`` while it was busy (None when there is none)."""
        return self._pending_messages.pop(session_key, None)

    def has_pending_interrupt(self, session_key: str) -> bool:
        """Whether a message is queued for ``session_key``."""
        return session_key in self._pending_messages

    def register_post_delivery_callback(
        self, session_key: str, callback: Callable[..., Any], *, generation: int | None = None
    ) -> None:
        """Keep ``callback`` to run once the session's reply is delivered (one per session)."""
        self._state()["callbacks"][session_key] = (generation, callback)

    def pop_post_delivery_callback(
        self, session_key: str, *, generation: int | None = None
    ) -> Callable[..., Any] | None:
        """Take the session's callback; with ``generation``, only one registered for it."""
        callbacks = self._state()["callbacks"]
        entry = callbacks.get(session_key)
        if entry is None or (generation is not None and entry[0] not in (None, generation)):
            return None
        del callbacks[session_key]
        return entry[1]

    async def cancel_background_tasks(self) -> None:
        """Cancel the tasks the adapter started and wait for them to end."""
        tasks = list(self._state()["tasks"])
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def cancel_session_processing(
        self, session_key: str, *, release_guard: bool = True, discard_pending: bool = True
    ) -> None:
        """Stop handling ``session_key`` (default: drop its queued message when ``discard_pending``)."""
        if discard_pending:
            self._pending_messages.pop(session_key, None)

    async def interrupt_session_activity(
        self, session_key: str, chat_id: str, metadata: dict[str, Any] | None = None
    ) -> None:
        """The session was interrupted: stop showing activity in ``chat_id`` (default: typing)."""
        await self.stop_typing(chat_id)

    async def on_processing_start(self, event: MessageEvent) -> None:
        """Handling ``event`` begins (default: nothing; adapters may react with an emoji)."""
        return None

    async def on_processing_complete(self, event: MessageEvent, outcome: Any) -> None:
        """Handling ``event`` ended with ``outcome`` (a ``ProcessingOutcome``; default: nothing)."""
        return None

    def pause_typing_for_chat(self, chat_id: str) -> None:
        """Stop the typing indicator of ``chat_id`` until :meth:`resume_typing_for_chat`."""
        self._state()["paused"].add(str(chat_id))

    def resume_typing_for_chat(self, chat_id: str) -> None:
        self._state()["paused"].discard(str(chat_id))

    async def stop_typing(self, chat_id: str) -> None:
        """Clear the typing indicator of ``chat_id`` (default: nothing to clear)."""
        return None

    def format_message(self, content: str) -> str:
        """``content`` in the platform's markup (default: as it is)."""
        return content

    def format_tool_event(self, event: Any, *, mode: str = "all", preview_max_len: int = 40) -> str | None:
        """One line showing a tool call (``tool_name`` and ``args`` of ``event``), or None to show
        nothing; ``verbose`` shows every argument, other modes a preview of ``preview_max_len``."""
        name = getattr(event, "tool_name", None) or getattr(event, "name", None)
        if not name:
            return None
        args = getattr(event, "args", None) or getattr(event, "arguments", None) or {}
        if mode == "verbose":
            preview = repr(args) if args else ""
        else:
            first = next(iter(args.values()), "") if isinstance(args, dict) else args
            preview = str(first or "")
        if preview_max_len > 0 and len(preview) > preview_max_len:
            preview = preview[: max(preview_max_len - 3, 0)] + "..."
        return f"{name}: {preview}" if preview else str(name)

    def render_message_event(self, event: Any, sink: Any) -> None:
        """Put a stream event on ``sink``: text to ``on_delta``, commentary to ``on_commentary``, a
        stop that is not final to ``on_segment_break``."""
        kind = type(event).__name__
        text = getattr(event, "text", None)
        if kind == "Commentary" and text:
            sink.on_commentary(text)
        elif kind == "MessageStop" and not getattr(event, "final", True):
            sink.on_segment_break()
        elif kind != "MessageStop" and text:
            sink.on_delta(text)

    def prefers_fresh_final_streaming(self, content: str, metadata: dict[str, Any] | None = None) -> bool:
        """Whether a streamed reply's last version goes out as a new message (default: no, edited)."""
        return False

    def supports_draft_streaming(
        self, chat_type: str | None = None, metadata: dict[str, Any] | None = None
    ) -> bool:
        """Whether :meth:`send_draft` works in such a chat (default: no)."""
        return False

    def streaming_overflow_limit(self) -> int | None:
        """A streamed message's length past which it is split, when above ``max_message_length``
        (default: None, the usual limit)."""
        return None

    def prepare_tts_text(self, text: str) -> str:
        """The text to read aloud: without media directives."""
        return self.strip_media_directives_for_display(text)

    async def send_draft(
        self, chat_id: str, draft_id: str, content: str, metadata: dict[str, Any] | None = None
    ) -> SendResult:
        """Show a draft of a reply being written (default: not supported)."""
        return SendResult(success=False, error=f"platform {self.name} has no drafts")

    async def edit_message(
        self, chat_id: str, message_id: str, content: str, *, finalize: bool = False
    ) -> SendResult:
        """Change a message sent before (default: not supported; the caller sends a new one)."""
        return SendResult(success=False, error=f"platform {self.name} cannot edit messages")

    async def delete_message(self, chat_id: str, message_id: str) -> bool:
        """Delete a message sent before (default: not supported, ``False``)."""
        return False

    async def create_handoff_thread(self, parent_chat_id: str, name: str) -> str | None:
        """Open a thread under ``parent_chat_id``; its chat id (default: None, no threads)."""
        return None

    def set_status_text(self, chat_id: str, text: str) -> None:
        """Show a status line in ``chat_id`` (default: nothing)."""
        return None

    async def send_private_notice(
        self,
        chat_id: str,
        user_id: str,
        content: str,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SendResult:
        """Tell ``user_id`` alone (default: in the chat, for all to see)."""
        return await self.send(chat_id, content, reply_to=reply_to, metadata=metadata)

    async def send_clarify(
        self,
        chat_id: str,
        question: str,
        choices: list[str] | None,
        clarify_id: str,
        session_key: str,
        metadata: dict[str, Any] | None = None,
    ) -> SendResult:
        """Ask the user a question (default: the choices as a numbered list, answered by text)."""
        lines = [question, *(f"{i}. {choice}" for i, choice in enumerate(choices or [], 1))]
        return await self.send(chat_id, "\n".join(lines), metadata=metadata)

    async def send_slash_confirm(
        self,
        chat_id: str,
        title: str,
        message: str,
        session_key: str,
        confirm_id: str,
        metadata: dict[str, Any] | None = None,
    ) -> SendResult:
        """Ask the user to confirm a command (default: as text)."""
        return await self.send(chat_id, f"{title}\n{message}", metadata=metadata)

    async def _send_as_text(
        self,
        chat_id: str,
        ref: str,
        caption: str | None,
        reply_to: str | None,
        metadata: dict[str, Any] | None,
    ) -> SendResult:
        text = f"{caption}\n{ref}" if caption else ref
        return await self.send(chat_id, text, reply_to=reply_to, metadata=metadata)

    async def send_image(
        self,
        chat_id: str,
        image_url: str,
        caption: str | None = None,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SendResult:
        """Send an image (default: its URL as text, after the caption)."""
        return await self._send_as_text(chat_id, image_url, caption, reply_to, metadata)

    async def send_animation(
        self,
        chat_id: str,
        animation_url: str,
        caption: str | None = None,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SendResult:
        """Send an animation (default: as :meth:`send_image`)."""
        return await self.send_image(chat_id, animation_url, caption, reply_to, metadata)

    async def send_multiple_images(
        self,
        chat_id: str,
        images: list[Any],
        metadata: dict[str, Any] | None = None,
        human_delay: float = 0.0,
    ) -> None:
        """Send several images (URLs, or ``(url, caption)`` pairs), one after another."""
        for index, image in enumerate(images or []):
            url, caption = (image[0], image[1]) if isinstance(image, (tuple, list)) else (image, None)
            if index and human_delay > 0:
                await asyncio.sleep(human_delay)
            await self.send_image(chat_id, str(url), caption or None, metadata=metadata)

    async def send_image_file(
        self,
        chat_id: str,
        image_path: str,
        caption: str | None = None,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> SendResult:
        """Send a local image (default: its path as text, after the caption)."""
        return await self._send_as_text(chat_id, image_path, caption, reply_to, metadata)

    async def send_video(
        self,
        chat_id: str,
        video_path: str,
        caption: str | None = None,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> SendResult:
        """Send a local video (default: its path as text, after the caption)."""
        return await self._send_as_text(chat_id, video_path, caption, reply_to, metadata)

    async def send_voice(
        self,
        chat_id: str,
        audio_path: str,
        caption: str | None = None,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> SendResult:
        """Send a local audio file (default: its path as text, after the caption)."""
        return await self._send_as_text(chat_id, audio_path, caption, reply_to, metadata)

    async def send_document(
        self,
        chat_id: str,
        file_path: str,
        caption: str | None = None,
        file_name: str | None = None,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> SendResult:
        """Send a local file (default: its path as text, after the caption)."""
        return await self._send_as_text(chat_id, file_path, caption, reply_to, metadata)

    async def play_tts(self, chat_id: str, audio_path: str, **kwargs: Any) -> SendResult:
        """Play spoken audio in the chat (default: :meth:`send_voice`)."""
        return await self.send_voice(chat_id, audio_path, **kwargs)

    def build_source(
        self,
        chat_id: str,
        chat_name: str | None = None,
        chat_type: str = "dm",
        user_id: str | None = None,
        user_name: str | None = None,
        thread_id: str | None = None,
        chat_topic: str | None = None,
        user_id_alt: str | None = None,
        chat_id_alt: str | None = None,
        is_bot: bool = False,
        scope_id: str | None = None,
        guild_id: str | None = None,
        parent_chat_id: str | None = None,
        message_id: str | None = None,
        role_authorized: bool = False,
        auto_thread_created: bool = False,
        auto_thread_initial_name: str | None = None,
    ) -> SessionSource:
        """The :class:`SessionSource` of a message on this adapter's platform; the details the
        kernel's source has no field for are kept as attributes of it."""
        source = SessionSource(
            platform=self.platform,
            chat_id=str(chat_id),
            chat_type=chat_type,
            user_id=user_id,
            user_name=user_name,
            chat_name=chat_name,
            thread_id=thread_id,
        )
        extras = {
            "chat_topic": chat_topic,
            "user_id_alt": user_id_alt,
            "chat_id_alt": chat_id_alt,
            "is_bot": is_bot,
            "scope_id": scope_id,
            "guild_id": guild_id,
            "parent_chat_id": parent_chat_id,
            "message_id": message_id,
            "role_authorized": role_authorized,
            "auto_thread_created": auto_thread_created,
            "auto_thread_initial_name": auto_thread_initial_name,
        }
        for key, value in extras.items():
            setattr(source, key, value)
        return source

    # -- the text and media helpers (see kernel.gateway.media) -------------------------

    truncate_message = staticmethod(media.truncate_message)
    extract_images = staticmethod(media.extract_images)
    extract_media = staticmethod(media.extract_media)
    strip_media_directives_for_display = staticmethod(media.strip_media_directives_for_display)
    extract_local_files = staticmethod(media.extract_local_files)
    validate_media_delivery_path = staticmethod(media.validate_media_delivery_path)
    filter_media_delivery_paths = staticmethod(media.filter_media_delivery_paths)
    filter_local_delivery_paths = staticmethod(media.filter_local_delivery_paths)


def _logger(adapter: BasePlatformAdapter) -> logging.Logger:
    """The logger of the adapter's module: a plugin's adapter logs into its kernel's ``agent.log``."""
    return logging.getLogger(type(adapter).__module__)
