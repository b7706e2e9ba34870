"""``VideoGenProvider``: a video generation backend (the ``video_gen`` slot), and its helpers.

Like :mod:`kernel.providers.image_gen`: ``generate`` returns
:func:`success_response` (``video`` is a file path or a URL) or
:func:`error_response`, never raises for a provider failure, and accepts and
ignores keyword arguments it does not know.  :func:`save_video_bytes` and
:func:`save_url_video` keep a result under ``<home>/cache/videos/``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from .backend import Backend, download, save_media

DEFAULT_OPERATION = "generate"
DEFAULT_ASPECT_RATIO = "16:9"
DEFAULT_RESOLUTION = "720p"
COMMON_ASPECT_RATIOS = ("16:9", "9:16", "1:1", "4:3", "3:4")
COMMON_RESOLUTIONS = ("480p", "720p", "1080p")
MAX_VIDEO_BYTES = 512 * 1024 * 1024


class VideoGenProvider(Backend, ABC):
    """Subclass and implement ``name`` and ``generate``; ``video_gen.provider`` selects the active one."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The backend's name, as config.yaml selects it."""

    @abstractmethod
    def generate(
        self,
        prompt: str,
        *,
        operation: str = DEFAULT_OPERATION,
        model: str | None = None,
        image_url: str | None = None,
        video_url: str | None = None,
        reference_image_urls: list[str] | None = None,
        duration: int | None = None,
        aspect_ratio: str = DEFAULT_ASPECT_RATIO,
        resolution: str = DEFAULT_RESOLUTION,
        negative_prompt: str | None = None,
        audio: bool | None = None,
        seed: int | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Make (or, for other operations, change) a video; return a success or error response."""

    def capabilities(self) -> dict[str, Any]:
        return {
            "operations": [DEFAULT_OPERATION],
            "modalities": ["text"],
            "aspect_ratios": list(COMMON_ASPECT_RATIOS),
            "resolutions": list(COMMON_RESOLUTIONS),
            "max_reference_images": 0,
        }


def success_response(
    *,
    video: str,
    model: str,
    prompt: str,
    provider: str,
    operation: str = DEFAULT_OPERATION,
    modality: str = "text",
    aspect_ratio: str = "",
    resolution: str = "",
    duration: int | float = 0,
    extra: dict[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """The result of a generation that worked; ``fields`` and ``extra`` are added as they are."""
    return {
        "success": True,
        "video": video,
        "model": model,
        "prompt": prompt,
        "provider": provider,
        "operation": operation,
        "modality": modality,
        "aspect_ratio": aspect_ratio,
        "resolution": resolution,
        "duration": duration,
        **fields,
        **(extra or {}),
    }


def error_response(
    *,
    error: str,
    error_type: str = "provider_error",
    provider: str = "",
    model: str = "",
    prompt: str = "",
    operation: str = DEFAULT_OPERATION,
    aspect_ratio: str = "",
    **fields: Any,
) -> dict[str, Any]:
    """The result of a generation that failed; ``fields`` are added as they are."""
    return {
        "success": False,
        "error": error,
        "error_type": error_type,
        "provider": provider,
        "model": model,
        "prompt": prompt,
        "operation": operation,
        "aspect_ratio": aspect_ratio,
        **fields,
    }


def video_cache_dir(home: Path) -> Path:
    return home / "cache" / "videos"


def _extension(data: bytes) -> str:
    if data[4:8] == b"ftyp":
        return "mov" if data[8:10] == b"qt" else "mp4"
    if data.startswith(b"\x1a\x45\xdf\xa3"):
        return "webm"
    if data.startswith(b"GIF8"):
        return "gif"
    return "bin"


def save_video_bytes(data: bytes, home: Path, prefix: str = "video", ext: str | None = None) -> Path:
    """Write video bytes under ``<home>/cache/videos/`` (extension from the content unless given)."""
    suffix = (ext or _extension(data)).lstrip(".")
    if not suffix.isalnum():
        raise ValueError(f"invalid video file extension {ext!r}")
    return save_media(data, video_cache_dir(home), prefix, suffix, limit=MAX_VIDEO_BYTES, what="video")


def save_url_video(url: str, home: Path, prefix: str = "video", timeout: float = 120.0) -> Path:
    """Download a video (at most :data:`MAX_VIDEO_BYTES`) and save it (see :func:`save_video_bytes`)."""
    data = download(url, limit=MAX_VIDEO_BYTES, timeout=timeout, what="video")
    return save_video_bytes(data, home, prefix)
