"""``gateway.platforms.base`` for plugins written for Hermes Agent: the kernel's adapter classes and
the helpers Hermes 0.19's platform plugins use beside them.

Media is cached under the current kernel's home (else ``$HERMES_HOME``, else ``~/.hermes``), in
``cache/images``, ``cache/audio``, ``cache/videos`` and ``cache/documents``; the ``*_CACHE_DIR``
constants are computed when the module is served, for the kernel that serves it.  Inbound media is
capped by ``gateway.max_inbound_media_bytes`` in config (``0`` or less: no cap; default 128 MiB).
"""

from __future__ import annotations

import asyncio
import enum
import ipaddress
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ...gateway import base as _gateway_base
from ...gateway.base import (
    MEDIA_EXTENSIONLESS_TAG_RE,
    MEDIA_TAG_CLEANUP_RE,
    BasePlatformAdapter,
    MessageEvent,
    MessageType,
    SendResult,
    SessionSource,
)
from . import current_kernel, hermes_home

__all__ = [
    "AUDIO_CACHE_DIR",  # noqa: F822 - computed by __getattr__
    "DEFAULT_INBOUND_MEDIA_MAX_BYTES",
    "DOCUMENT_CACHE_DIR",  # noqa: F822 - computed by __getattr__
    "GATEWAY_SECRET_CAPTURE_UNSUPPORTED_MESSAGE",
    "IMAGE_CACHE_DIR",  # noqa: F822 - computed by __getattr__
    "MEDIA_DELIVERY_ALLOW_DIRS_ENV",
    "MEDIA_DELIVERY_EXTS",
    "MEDIA_DELIVERY_SAFE_ROOTS",  # noqa: F822 - computed by __getattr__
    "MEDIA_DELIVERY_STRICT_ENV",
    "MEDIA_DELIVERY_TRUST_RECENT_ENV",
    "MEDIA_DELIVERY_TRUST_RECENT_SECONDS_ENV",
    "MEDIA_EXTENSIONLESS_TAG_RE",
    "MEDIA_TAG_CLEANUP_RE",
    "SCREENSHOT_CACHE_DIR",  # noqa: F822 - computed by __getattr__
    "SEND_ERROR_KINDS",
    "SUPPORTED_DOCUMENT_TYPES",
    "SUPPORTED_IMAGE_DOCUMENT_TYPES",
    "SUPPORTED_VIDEO_TYPES",
    "VIDEO_CACHE_DIR",  # noqa: F822 - computed by __getattr__
    "BasePlatformAdapter",
    "CachedMedia",
    "EphemeralReply",
    "MessageEvent",
    "MessageType",
    "ProcessingOutcome",
    "SendResult",
    "SessionSource",
    "TextDebounceState",
    "cache_audio_from_bytes",
    "cache_audio_from_url",
    "cache_document_from_bytes",
    "cache_image_from_bytes",
    "cache_image_from_url",
    "cache_media_bytes",
    "cache_video_from_bytes",
    "classify_send_error",
    "cleanup_document_cache",
    "cleanup_image_cache",
    "coerce_plaintext_gateway_command",
    "get_audio_cache_dir",
    "get_document_cache_dir",
    "get_image_cache_dir",
    "get_inbound_media_max_bytes",
    "get_video_cache_dir",
    "is_chat_level_not_found",
    "is_host_excluded_by_no_proxy",
    "is_network_accessible",
    "merge_pending_message_event",
    "proxy_kwargs_for_aiohttp",
    "proxy_kwargs_for_bot",
    "resolve_channel_prompt",
    "resolve_channel_skills",
    "resolve_proxy_url",
    "safe_url_for_log",
    "should_bypass_proxy",
    "should_send_media_as_audio",
    "utf16_len",
    "validate_inbound_media_size",
    "validate_media_delivery_path",
]

DEFAULT_INBOUND_MEDIA_MAX_BYTES = 128 * 1024 * 1024
_CHAT_ENTRY_REFUSED = (
    "Secrets cannot be entered safely over a chat platform: run this in the terminal "
    "(hermes-kernel) to be asked for it, or put the key in the home's .env file."
)
GATEWAY_SECRET_CAPTURE_UNSUPPORTED_MESSAGE = _CHAT_ENTRY_REFUSED
MEDIA_DELIVERY_ALLOW_DIRS_ENV = "HERMES_MEDIA_ALLOW_DIRS"
MEDIA_DELIVERY_STRICT_ENV = "HERMES_MEDIA_DELIVERY_STRICT"
MEDIA_DELIVERY_TRUST_RECENT_ENV = "HERMES_MEDIA_TRUST_RECENT_FILES"
MEDIA_DELIVERY_TRUST_RECENT_SECONDS_ENV = "HERMES_MEDIA_TRUST_RECENT_SECONDS"
SEND_ERROR_KINDS = frozenset(
    {"too_long", "forbidden", "bad_format", "unknown", "transient", "not_found", "rate_limited"}
)
SUPPORTED_IMAGE_DOCUMENT_TYPES = {
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".webp": "image/webp",
    ".gif": "image/gif",
}
SUPPORTED_VIDEO_TYPES = {
    ".mp4": "video/mp4",
    ".mov": "video/quicktime",
    ".webm": "video/webm",
    ".mkv": "video/x-matroska",
    ".avi": "video/x-msvideo",
}
SUPPORTED_DOCUMENT_TYPES = {
    ".pdf": "application/pdf",
    ".md": "text/markdown",
    ".txt": "text/plain",
    ".csv": "text/csv",
    ".log": "text/plain",
    ".json": "application/json",
    ".xml": "application/xml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".html": "text/html",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".zip": "application/zip",
}
_AUDIO_TYPES = {
    ".ogg": "audio/ogg",
    ".opus": "audio/opus",
    ".mp3": "audio/mpeg",
    ".m4a": "audio/mp4",
    ".wav": "audio/wav",
    ".flac": "audio/flac",
    ".aac": "audio/aac",
}
MEDIA_DELIVERY_EXTS = tuple(
    dict.fromkeys(
        [
            *SUPPORTED_IMAGE_DOCUMENT_TYPES,
            ".bmp",
            ".svg",
            *SUPPORTED_VIDEO_TYPES,
            *_AUDIO_TYPES,
            *SUPPORTED_DOCUMENT_TYPES,
        ]
    )
)
_CACHE_SUBDIRS = {
    "IMAGE_CACHE_DIR": "images",
    "AUDIO_CACHE_DIR": "audio",
    "VIDEO_CACHE_DIR": "videos",
    "DOCUMENT_CACHE_DIR": "documents",
    "SCREENSHOT_CACHE_DIR": "screenshots",
}
# Never delivered, whatever the mode: credentials and system files.
_DENIED_HOME_DIRS = (".ssh", ".aws", ".gnupg", ".kube", ".docker", ".config/gcloud", ".netrc")
_DENIED_ROOTS = ("/etc", "/proc", "/sys", "/dev", "/boot", "/root", "/var/lib", "/var/run")
_TRUST_RECENT_SECONDS = 600


def __getattr__(name: str) -> Any:
    # The cache folders belong to the current home, so they are computed when asked for.
    if name in _CACHE_SUBDIRS:
        return hermes_home() / "cache" / _CACHE_SUBDIRS[name]
    if name == "MEDIA_DELIVERY_SAFE_ROOTS":
        return tuple(hermes_home() / "cache" / sub for sub in _CACHE_SUBDIRS.values())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ProcessingOutcome(enum.Enum):
    """How handling one message ended (for the processing start/complete callbacks)."""

    SUCCESS = "success"
    FAILURE = "failure"
    CANCELLED = "cancelled"


@dataclass
class CachedMedia:
    """One attachment saved in the cache: where, its MIME type, its kind and the name to show."""

    path: str
    media_type: str
    kind: str
    display_name: str

    def context_note(self) -> str:
        """One line for the transcript telling the model where the file is."""
        return f"[The user sent a {self.kind}: {self.display_name} (saved at {self.path})]"


class EphemeralReply(str):
    """A reply text that the platform may delete after ``ttl_seconds`` (a ``str`` everywhere else)."""

    ttl_seconds: int | None

    def __new__(cls, text: str, ttl_seconds: int | None = None) -> EphemeralReply:
        made = super().__new__(cls, text)
        made.ttl_seconds = ttl_seconds
        return made

    @property
    def text(self) -> str:
        return str.__str__(self)


@dataclass
class TextDebounceState:
    """A text message held back for a moment, in case more parts of it follow."""

    event: MessageEvent
    task: asyncio.Task[Any] | None
    first_ts: float
    last_ts: float


# -- sizes and caches ---------------------------------------------------------------------------


def utf16_len(s: str) -> int:
    """The length of ``s`` in UTF-16 code units (how some platforms count message length)."""
    return len(s.encode("utf-16-le")) // 2


def get_inbound_media_max_bytes() -> int:
    """The largest inbound attachment accepted: ``gateway.max_inbound_media_bytes`` (0 or less: no
    cap, reported as 0), else 128 MiB."""
    kernel = current_kernel()
    gateway = kernel.config.get("gateway") if kernel is not None else None
    value = gateway.get("max_inbound_media_bytes") if isinstance(gateway, dict) else None
    if value is None or isinstance(value, bool):
        return DEFAULT_INBOUND_MEDIA_MAX_BYTES
    try:
        number = int(value)
    except (TypeError, ValueError):
        return DEFAULT_INBOUND_MEDIA_MAX_BYTES
    return max(number, 0)


def validate_inbound_media_size(
    size: int, *, media_type: str = "media", max_bytes: int | None = None
) -> None:
    """``ValueError`` when an inbound ``media_type`` of ``size`` bytes is over the cap."""
    cap = get_inbound_media_max_bytes() if max_bytes is None else max_bytes
    if size < 0:
        raise ValueError(f"inbound {media_type} has a negative size ({size})")
    if cap and size > cap:
        raise ValueError(
            f"inbound {media_type} is {size} bytes, over the {cap}-byte limit "
            "(raise gateway.max_inbound_media_bytes in config.yaml to accept it)"
        )


def _cache_dir(attr: str) -> Path:
    folder = hermes_home() / "cache" / _CACHE_SUBDIRS[attr]
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def get_image_cache_dir() -> Path:
    """``<home>/cache/images`` (created if missing)."""
    return _cache_dir("IMAGE_CACHE_DIR")


def get_audio_cache_dir() -> Path:
    """``<home>/cache/audio`` (created if missing)."""
    return _cache_dir("AUDIO_CACHE_DIR")


def get_video_cache_dir() -> Path:
    """``<home>/cache/videos`` (created if missing)."""
    return _cache_dir("VIDEO_CACHE_DIR")


def get_document_cache_dir() -> Path:
    """``<home>/cache/documents`` (created if missing)."""
    return _cache_dir("DOCUMENT_CACHE_DIR")


def _suffix(ext: str, default: str) -> str:
    ext = (ext or default).strip()
    ext = ext if ext.startswith(".") else f".{ext}"
    return ext if re.fullmatch(r"\.[A-Za-z0-9]{1,10}", ext) else default


def _write(folder: Path, name: str, data: bytes, media_type: str) -> str:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{media_type} data must be bytes, not {type(data).__name__}")
    validate_inbound_media_size(len(data), media_type=media_type)
    path = folder / name
    partial = path.with_name(f".{path.name}.part")
    partial.write_bytes(bytes(data))
    os.replace(partial, path)
    return str(path.resolve())


def cache_image_from_bytes(data: bytes, ext: str = ".jpg") -> str:
    """Save image bytes in the image cache; the absolute path."""
    return _write(get_image_cache_dir(), f"img_{uuid.uuid4().hex[:12]}{_suffix(ext, '.jpg')}", data, "image")


def cache_audio_from_bytes(data: bytes, ext: str = ".ogg") -> str:
    """Save audio bytes in the audio cache; the absolute path."""
    return _write(
        get_audio_cache_dir(), f"audio_{uuid.uuid4().hex[:12]}{_suffix(ext, '.ogg')}", data, "audio"
    )


def cache_video_from_bytes(data: bytes, ext: str = ".mp4") -> str:
    """Save video bytes in the video cache; the absolute path."""
    return _write(
        get_video_cache_dir(), f"video_{uuid.uuid4().hex[:12]}{_suffix(ext, '.mp4')}", data, "video"
    )


def cache_document_from_bytes(data: bytes, filename: str) -> str:
    """Save document bytes in the document cache under a unique name that keeps ``filename``'s
    (sanitised) base name; the absolute path."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(str(filename or "")).name).strip("._") or "document"
    return _write(get_document_cache_dir(), f"doc_{uuid.uuid4().hex[:12]}_{base[:120]}", data, "document")


async def _download(url: str, retries: int, media_type: str) -> bytes:
    import httpx

    cap = get_inbound_media_max_bytes()
    last: Exception | None = None
    for attempt in range(max(retries, 0) + 1):
        try:
            async with (
                httpx.AsyncClient(follow_redirects=True, timeout=30.0) as client,
                client.stream("GET", url) as response,
            ):
                if response.status_code >= 500 or response.status_code == 429:
                    raise httpx.HTTPStatusError("retryable", request=response.request, response=response)
                response.raise_for_status()
                chunks, total = [], 0
                async for chunk in response.aiter_bytes():
                    total += len(chunk)
                    validate_inbound_media_size(total, media_type=media_type, max_bytes=cap)
                    chunks.append(chunk)
                return b"".join(chunks)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code < 500 and exc.response.status_code != 429:
                raise
            last = exc
        except httpx.TransportError as exc:
            last = exc
        if attempt < retries:
            await asyncio.sleep(min(0.5 * 2**attempt, 4.0))
    raise RuntimeError(f"could not download {media_type} from {safe_url_for_log(url)}: {last}") from last


async def cache_image_from_url(url: str, ext: str = ".jpg", retries: int = 2) -> str:
    """Download an image (retrying transient failures ``retries`` times) into the image cache."""
    return cache_image_from_bytes(await _download(url, retries, "image"), ext)


async def cache_audio_from_url(url: str, ext: str = ".ogg", retries: int = 2) -> str:
    """Download an audio file (retrying transient failures ``retries`` times) into the audio cache."""
    return cache_audio_from_bytes(await _download(url, retries, "audio"), ext)


def cache_media_bytes(
    data: bytes, *, filename: str = "", mime_type: str = "", default_kind: str | None = None
) -> CachedMedia | None:
    """Save an attachment in the cache that fits its type (by extension, then MIME type); None when
    the type is not one the gateway takes and no ``default_kind`` is given."""
    ext = Path(filename or "").suffix.lower()
    mime = (mime_type or "").split(";")[0].strip().lower()
    kind = None
    for candidate, table in (
        ("image", SUPPORTED_IMAGE_DOCUMENT_TYPES),
        ("audio", _AUDIO_TYPES),
        ("video", SUPPORTED_VIDEO_TYPES),
        ("document", SUPPORTED_DOCUMENT_TYPES),
    ):
        if ext in table:
            kind, mime = candidate, mime or table[ext]
            break
    if kind is None and mime:
        kind = next((k for k in ("image", "audio", "video") if mime.startswith(f"{k}/")), None)
        if kind is None and mime in SUPPORTED_DOCUMENT_TYPES.values():
            kind = "document"
    kind = kind or default_kind
    if kind is None:
        return None
    display = Path(filename).name if filename else f"{kind} attachment"
    if kind == "document":
        path = cache_document_from_bytes(data, filename or "document")
    else:
        saver = {
            "image": cache_image_from_bytes,
            "audio": cache_audio_from_bytes,
            "video": cache_video_from_bytes,
        }
        if kind not in saver:
            raise ValueError(f"unknown media kind {kind!r} (image, audio, video or document)")
        path = saver[kind](data, ext or {"image": ".jpg", "audio": ".ogg", "video": ".mp4"}[kind])
    return CachedMedia(
        path=path, media_type=mime or "application/octet-stream", kind=kind, display_name=display
    )


def _cleanup(folder: Path, max_age_hours: int) -> int:
    cutoff = time.time() - max_age_hours * 3600
    removed = 0
    for entry in folder.iterdir() if folder.is_dir() else ():
        try:
            if entry.is_file() and not entry.is_symlink() and entry.stat().st_mtime < cutoff:
                entry.unlink()
                removed += 1
        except OSError:
            continue
    return removed


def cleanup_image_cache(max_age_hours: int = 24) -> int:
    """Delete cached images older than ``max_age_hours``; how many were deleted."""
    return _cleanup(hermes_home() / "cache" / "images", max_age_hours)


def cleanup_document_cache(max_age_hours: int = 24) -> int:
    """Delete cached documents older than ``max_age_hours``; how many were deleted."""
    return _cleanup(hermes_home() / "cache" / "documents", max_age_hours)


def validate_media_delivery_path(path: str) -> str | None:
    """The resolved path of a file the agent may send back as media, or None.

    Never a credential or system file.  In strict mode (``HERMES_MEDIA_DELIVERY_STRICT`` true, or
    ``gateway.strict`` in config) only files under the home's caches, under a folder listed in
    ``HERMES_MEDIA_ALLOW_DIRS`` (``os.pathsep``-separated), or, with
    ``HERMES_MEDIA_TRUST_RECENT_FILES`` true, modified in the last ``HERMES_MEDIA_TRUST_RECENT_SECONDS``
    (600) seconds.
    """
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        return None
    try:
        resolved = Path(path.strip()).expanduser().resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not resolved.is_file():
        return None
    home = Path.home().resolve()
    denied = [home / d for d in _DENIED_HOME_DIRS] + [Path(r) for r in _DENIED_ROOTS]
    denied.append(hermes_home().resolve() / ".env")
    if any(resolved == d or resolved.is_relative_to(d) for d in denied):
        return None
    if not _strict():
        return str(resolved)
    roots = [r.resolve() for r in __getattr__("MEDIA_DELIVERY_SAFE_ROOTS")]
    roots += [
        Path(p).expanduser().resolve()
        for p in os.environ.get(MEDIA_DELIVERY_ALLOW_DIRS_ENV, "").split(os.pathsep)
        if p.strip()
    ]
    if any(resolved.is_relative_to(r) for r in roots):
        return str(resolved)
    if _truthy(os.environ.get(MEDIA_DELIVERY_TRUST_RECENT_ENV)):
        try:
            window = float(os.environ.get(MEDIA_DELIVERY_TRUST_RECENT_SECONDS_ENV) or _TRUST_RECENT_SECONDS)
        except ValueError:
            window = _TRUST_RECENT_SECONDS
        if time.time() - resolved.stat().st_mtime <= window:
            return str(resolved)
    return None


def _truthy(value: object) -> bool:
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


def _strict() -> bool:
    if _truthy(os.environ.get(MEDIA_DELIVERY_STRICT_ENV)):
        return True
    kernel = current_kernel()
    gateway = kernel.config.get("gateway") if kernel is not None else None
    return isinstance(gateway, dict) and gateway.get("strict") is True


def should_send_media_as_audio(platform: Any, ext: str, is_voice: bool = False) -> bool:
    """Whether a file with extension ``ext`` goes through the platform's audio sender (Telegram takes
    MP3/M4A as audio and OGG/Opus only as a voice note)."""
    ext = _suffix(ext, "").lower()
    name = str(getattr(platform, "value", platform) or "").lower()
    if name == "telegram":
        return ext in (".mp3", ".m4a") or (is_voice and ext in (".ogg", ".opus"))
    return ext in _AUDIO_TYPES


# -- messages ---------------------------------------------------------------------------------

_RESTART_PHRASES = {"restart gateway", "restart the gateway", "gateway restart", "reboot gateway"}


def coerce_plaintext_gateway_command(event: MessageEvent) -> None:
    """Turn a direct message that says exactly ``restart gateway`` (and its few spellings) into the
    ``/restart`` command, so that it never reaches the model; other messages are left alone."""
    source = getattr(event, "source", None)
    if source is None or getattr(source, "chat_type", "dm") != "dm":
        return
    if getattr(event, "message_type", MessageType.TEXT) not in (MessageType.TEXT, "text"):
        return
    text = re.sub(r"\s+", " ", str(getattr(event, "text", "") or "")).strip().strip(".!").lower()
    if text in _RESTART_PHRASES:
        event.text = "/restart"
        event.message_type = MessageType.COMMAND


def merge_pending_message_event(
    pending_messages: dict[str, MessageEvent],
    session_key: str,
    event: MessageEvent,
    *,
    merge_text: bool = False,
) -> None:
    """Queue ``event`` for ``session_key``: photos join a queued photo burst, text is appended to
    queued text when ``merge_text``; otherwise the newer event replaces the queued one."""
    queued = pending_messages.get(session_key)
    if queued is not None:
        if event.message_type is MessageType.PHOTO and queued.message_type is MessageType.PHOTO:
            queued.media_urls = [*queued.media_urls, *event.media_urls]
            queued.media_types = [*queued.media_types, *event.media_types]
            if event.text:
                queued.text = f"{queued.text}\n{event.text}" if queued.text else event.text
            return
        if merge_text and event.message_type is MessageType.TEXT and queued.message_type is MessageType.TEXT:
            queued.text = f"{queued.text}\n{event.text}" if queued.text else event.text
            return
    pending_messages[session_key] = event


def _channel_match(entries: Any, channel_id: str, parent_id: str | None, key: str) -> Any:
    if isinstance(entries, dict):
        for wanted in (channel_id, parent_id):
            if wanted is not None and str(wanted) in {str(k) for k in entries}:
                return next(v for k, v in entries.items() if str(k) == str(wanted))
        return None
    if isinstance(entries, list):
        for wanted in (channel_id, parent_id):
            for entry in entries:
                if wanted is not None and isinstance(entry, dict) and str(entry.get("id")) == str(wanted):
                    return entry.get(key, entry.get(key.rstrip("s")))
    return None


def resolve_channel_prompt(
    config_extra: dict[str, Any], channel_id: str, parent_id: str | None = None
) -> str | None:
    """The prompt ``channel_prompts`` gives the channel (else its parent); None when blank or unset."""
    found = _channel_match((config_extra or {}).get("channel_prompts"), channel_id, parent_id, "prompt")
    return found.strip() if isinstance(found, str) and found.strip() else None


def resolve_channel_skills(
    config_extra: dict[str, Any], channel_id: str, parent_id: str | None = None
) -> list[str] | None:
    """The skills ``channel_skill_bindings`` binds to the channel (else its parent), without
    duplicates, in order; None when there is no binding."""
    found = _channel_match(
        (config_extra or {}).get("channel_skill_bindings"), channel_id, parent_id, "skills"
    )
    if isinstance(found, str):
        found = [found]
    if not isinstance(found, list):
        return None
    skills = list(dict.fromkeys(s.strip() for s in found if isinstance(s, str) and s.strip()))
    return skills or None


# -- send errors ------------------------------------------------------------------------------

_ERROR_RULES = (
    ("rate_limited", ("429", "rate limit", "ratelimit", "too many requests", "retry after", "flood")),
    ("too_long", ("too long", "too_long", "message is too long", "text is too long", "exceeds the maximum")),
    ("forbidden", ("403", "forbidden", "blocked by the user", "not enough rights", "permission", "kicked")),
    ("not_found", ("404", "not found", "not_found", "unknown channel", "unknown message", "deleted")),
    (
        "bad_format",
        ("can't parse", "cannot parse", "parse entities", "bad request", "invalid format", "malformed"),
    ),
    ("transient", ("timeout", "timed out", "connection", "temporarily", "unavailable", "502", "503", "504")),
)


def _error_text(exc: BaseException | None, error_text: str) -> str:
    parts = [error_text or ""]
    if exc is not None:
        parts += [type(exc).__name__, str(exc)]
        status = getattr(exc, "status_code", None) or getattr(
            getattr(exc, "response", None), "status_code", None
        )
        if status is not None:
            parts.append(str(status))
    return " ".join(parts).lower()


def classify_send_error(exc: BaseException | None, error_text: str = "") -> str:
    """The kind of a send failure, one of :data:`SEND_ERROR_KINDS`."""
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return "transient"
    blob = _error_text(exc, error_text)
    return next((kind for kind, markers in _ERROR_RULES if any(m in blob for m in markers)), "unknown")


def is_chat_level_not_found(exc: BaseException | None = None, error_text: str = "") -> bool:
    """Whether a not-found failure means the chat itself is gone (not just a thread or a message)."""
    if classify_send_error(exc, error_text) != "not_found":
        return False
    blob = _error_text(exc, error_text)
    if any(m in blob for m in ("thread", "topic", "message", "reply")):
        return False
    return any(m in blob for m in ("chat", "channel", "user", "group", "conversation"))


# -- network and proxies -------------------------------------------------------------------------


def safe_url_for_log(url: str, max_len: int = 80) -> str:
    """``url`` without credentials, query or fragment, cut to ``max_len`` characters."""
    try:
        parts = urlsplit(str(url))
        netloc = parts.hostname or ""
        if parts.port:
            netloc = f"{netloc}:{parts.port}"
        text = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        text = "<invalid url>"
    return text if len(text) <= max_len else text[: max(max_len - 3, 0)] + "..."


def is_network_accessible(host: str) -> bool:
    """Whether listening on ``host`` is reachable from beyond this machine (not loopback)."""
    name = str(host or "").strip().strip("[]").lower()
    if name in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return False
    try:
        return not ipaddress.ip_address(name).is_loopback
    except ValueError:
        return True


def _host_of(target: str) -> str:
    target = str(target).strip()
    if "://" in target:
        return (urlsplit(target).hostname or "").lower()
    if target.startswith("["):
        return target[1 : target.find("]")].lower()
    return (target.rsplit(":", 1)[0] if target.count(":") == 1 else target).lower()


def is_host_excluded_by_no_proxy(hostname: str, no_proxy_value: str | None = None) -> bool:
    """Whether ``hostname`` matches ``NO_PROXY`` (given, else from the environment): ``*``, a domain
    and its subdomains, an IP address or a CIDR network."""
    value = (
        no_proxy_value
        if no_proxy_value is not None
        else os.environ.get("NO_PROXY", os.environ.get("no_proxy"))
    )
    host = _host_of(hostname)
    if not value or not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in (e.strip().lower() for e in value.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        if address is not None:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
        domain = _host_of(entry).lstrip("*").lstrip(".")
        if domain and (host == domain or host.endswith("." + domain)):
            return True
    return False


def should_bypass_proxy(target_hosts: str | list[str] | tuple[str, ...] | set[str] | None) -> bool:
    """Whether ``NO_PROXY`` excludes at least one of ``target_hosts``."""
    if not target_hosts:
        return False
    hosts = [target_hosts] if isinstance(target_hosts, str) else list(target_hosts)
    return any(is_host_excluded_by_no_proxy(h) for h in hosts)


def resolve_proxy_url(
    platform_env_var: str | None = None,
    *,
    target_hosts: str | list[str] | tuple[str, ...] | set[str] | None = None,
) -> str | None:
    """The proxy to use: ``platform_env_var``, then ``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``
    (either case); None when none is set or ``NO_PROXY`` excludes the target hosts."""
    if should_bypass_proxy(target_hosts):
        return None
    names = [platform_env_var] if platform_env_var else []
    names += ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
    return next((os.environ[n].strip() for n in names if os.environ.get(n, "").strip()), None)


def proxy_kwargs_for_bot(proxy_url: str | None) -> dict[str, Any]:
    """Keyword arguments that make a bot client (discord.py style) use ``proxy_url``."""
    return {"proxy": proxy_url} if proxy_url else {}


def proxy_kwargs_for_aiohttp(proxy_url: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(session_kwargs, request_kwargs)`` for an aiohttp session through ``proxy_url``: a SOCKS
    proxy needs the ``aiohttp_socks`` connector on the session, an HTTP one goes on each request."""
    if not proxy_url:
        return {}, {}
    if proxy_url.lower().startswith("socks"):
        try:
            from aiohttp_socks import ProxyConnector  # type: ignore[import-not-found]
        except ImportError as exc:
            raise RuntimeError(
                f"the SOCKS proxy {safe_url_for_log(proxy_url)} needs aiohttp_socks: "
                "pip install aiohttp-socks"
            ) from exc
        return {"connector": ProxyConnector.from_url(proxy_url)}, {}
    return {}, {"proxy": proxy_url}


_gateway_base.MEDIA_PATH_CHECK[0] = validate_media_delivery_path
