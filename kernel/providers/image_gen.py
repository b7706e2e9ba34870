"""``ImageGenProvider``: an image generation backend (the ``image_gen`` slot), and its helpers."""

from __future__ import annotations

import base64
import binascii
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from .backend import Backend, download, save_media

ASPECT_RATIOS = ("landscape", "square", "portrait")
DEFAULT_ASPECT_RATIO = "landscape"
MAX_IMAGE_BYTES = 25 * 1024 * 1024
_SIGNATURES = {b"\x89PNG": "png", b"\xff\xd8\xff": "jpg", b"GIF8": "gif", b"RIFF": "webp"}


class ImageGenProvider(Backend, ABC):
    """Subclass and implement ``name`` and ``generate``; ``image_gen.provider`` selects the active one."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The backend's name, as config.yaml selects it."""

    @abstractmethod
    def generate(
        self,
        prompt: str,
        aspect_ratio: str = DEFAULT_ASPECT_RATIO,
        *,
        image_url: str | None = None,
        reference_image_urls: list[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Make an image; return :func:`success_response` or :func:`error_response`.

        Must accept and ignore keyword arguments it does not know.
        """

    def capabilities(self) -> dict[str, Any]:
        return {"modalities": ["text"], "max_reference_images": 0, "max_source_images": 0}


def resolve_aspect_ratio(value: Any) -> str:
    """``landscape``, ``square`` or ``portrait``; anything else is ``landscape``."""
    text = str(value or "").strip().lower()
    return text if text in ASPECT_RATIOS else DEFAULT_ASPECT_RATIO


def success_response(
    *,
    image: str,
    model: str,
    prompt: str,
    aspect_ratio: str,
    provider: str,
    modality: str = "text",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The result of a generation that worked: ``image`` is a file path or a URL."""
    return {
        "success": True,
        "image": image,
        "model": model,
        "prompt": prompt,
        "aspect_ratio": aspect_ratio,
        "provider": provider,
        "modality": modality,
        **(extra or {}),
    }


def error_response(
    *,
    error: str,
    error_type: str = "provider_error",
    provider: str = "",
    model: str = "",
    prompt: str = "",
    aspect_ratio: str = DEFAULT_ASPECT_RATIO,
) -> dict[str, Any]:
    """The result of a generation that failed."""
    return {
        "success": False,
        "error": error,
        "error_type": error_type,
        "provider": provider,
        "model": model,
        "prompt": prompt,
        "aspect_ratio": aspect_ratio,
    }


def image_cache_dir(home: Path) -> Path:
    return home / "cache" / "images"


def save_image_bytes(data: bytes, home: Path, prefix: str = "image", *, ext: str | None = None) -> Path:
    """Write image bytes under ``<home>/cache/images/``; return the path.  The extension is ``ext``
    when given (letters and digits, a leading dot ignored), else the one the content shows."""
    suffix = _extension(data) if ext is None else str(ext).strip().lstrip(".")
    if not suffix.isalnum():
        raise ValueError(f"invalid image file extension {ext!r}: use letters and digits, like 'png'")
    return save_media(data, image_cache_dir(home), prefix, suffix, limit=MAX_IMAGE_BYTES, what="image")


def _extension(data: bytes) -> str:
    return next((e for sig, e in _SIGNATURES.items() if data.startswith(sig)), "bin")


def save_b64_image(b64: str, home: Path, prefix: str = "image", *, ext: str | None = None) -> Path:
    """Decode base64 image data and save it (see :func:`save_image_bytes`)."""
    try:
        data = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"image data is not valid base64: {exc}") from None
    return save_image_bytes(data, home, prefix, ext=ext)


def save_url_image(
    url: str, home: Path, prefix: str = "image", timeout: float = 60.0, *, max_bytes: int = MAX_IMAGE_BYTES
) -> Path:
    """Download an image and save it (see :func:`save_image_bytes`).

    A body over ``max_bytes`` (default 25 MB, as in Hermes) is refused as soon as it is announced or
    read that far; an empty one is refused too.  Either is a ``ValueError`` and leaves no file.
    """
    if type(max_bytes) is not int or max_bytes < 1:
        raise ValueError(f"max_bytes must be a positive number of bytes, not {max_bytes!r}")
    data = download(url, limit=max_bytes, timeout=timeout, what="image")
    if not data:
        raise ValueError(f"image at {url} is empty (0 bytes); nothing was saved")
    return save_media(data, image_cache_dir(home), prefix, _extension(data), limit=max_bytes, what="image")
