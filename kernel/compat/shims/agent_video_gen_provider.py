"""``agent.video_gen_provider`` for plugins written for Hermes Agent.

The base class, constants and response helpers are the kernel's own
(:mod:`kernel.providers.video_gen`).  The save helpers take no home: videos
go under the current kernel's home (else ``$HERMES_HOME``, else
``~/.hermes``), in ``cache/videos/``.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

from ...base.redact import mask_url
from ...providers import video_gen as _video_gen
from ...providers.backend import download
from ...providers.video_gen import (
    COMMON_ASPECT_RATIOS,
    COMMON_RESOLUTIONS,
    DEFAULT_ASPECT_RATIO,
    DEFAULT_OPERATION,
    DEFAULT_RESOLUTION,
    VideoGenProvider,
    error_response,
    success_response,
)
from . import hermes_home, safe_prefix

__all__ = [
    "COMMON_ASPECT_RATIOS",
    "COMMON_RESOLUTIONS",
    "DEFAULT_ASPECT_RATIO",
    "DEFAULT_OPERATION",
    "DEFAULT_RESOLUTION",
    "VideoGenProvider",
    "error_response",
    "save_b64_video",
    "save_bytes_video",
    "save_url_video",
    "success_response",
]


#: What :func:`save_url_video` downloads at most unless told otherwise (200 MiB, as in Hermes).
DEFAULT_URL_VIDEO_MAX_BYTES = 200 * 1024 * 1024


def save_bytes_video(raw: bytes, *, prefix: str = "video", extension: str | None = None) -> Path:
    """Save video bytes under ``<home>/cache/videos/``; return the path.  The extension is
    ``extension`` when given (``mp4``, ``.webm``), else the one the content shows."""
    return _video_gen.save_video_bytes(raw, hermes_home(), safe_prefix(prefix, "video"), ext=extension)


def save_b64_video(b64_data: str, *, prefix: str = "video", extension: str | None = None) -> Path:
    """Decode base64 video data and save it as :func:`save_bytes_video` does; invalid base64 is a
    ``ValueError`` and leaves no file."""
    try:
        raw = base64.b64decode(b64_data, validate=True)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise ValueError(f"video data is not valid base64: {exc}") from None
    return save_bytes_video(raw, prefix=prefix, extension=extension)


def save_url_video(
    url: str, *, prefix: str = "video", timeout: float = 180.0, max_bytes: int = DEFAULT_URL_VIDEO_MAX_BYTES
) -> Path:
    """Download a video (at most ``max_bytes``; not empty) and save it under
    ``<home>/cache/videos/``; return the path.  A body too big or empty is a ``ValueError`` and
    leaves no file."""
    if type(max_bytes) is not int or max_bytes < 1:
        raise ValueError(f"max_bytes must be a positive number of bytes, not {max_bytes!r}")
    raw = download(url, limit=max_bytes, timeout=timeout, what="video")
    if not raw:
        raise ValueError(f"video at {mask_url(url)} is empty (0 bytes); nothing was saved")
    return save_bytes_video(raw, prefix=prefix)
