"""``agent.video_gen_provider`` for plugins written for Hermes Agent.

The base class, constants and response helpers are the kernel's own
(:mod:`kernel.providers.video_gen`).  The save helpers take no home: videos
go under the current kernel's home (else ``$HERMES_HOME``, else
``~/.hermes``), in ``cache/videos/``.
"""

from __future__ import annotations

from pathlib import Path

from ...providers import video_gen as _video_gen
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
    "save_bytes_video",
    "save_url_video",
    "success_response",
]


def save_bytes_video(data: bytes, *, prefix: str = "video", ext: str | None = None) -> Path:
    """Save video bytes under ``<home>/cache/videos/``; return the path."""
    return _video_gen.save_video_bytes(data, hermes_home(), safe_prefix(prefix, "video"), ext=ext)


def save_url_video(url: str, *, prefix: str = "video", timeout: float = 120.0) -> Path:
    """Download a video and save it under ``<home>/cache/videos/``; return the path."""
    return _video_gen.save_url_video(url, hermes_home(), safe_prefix(prefix, "video"), timeout=timeout)
