"""``ImageGenProvider``: an image generation backend (the ``image_gen`` slot), and its helpers."""

from __future__ import annotations

import base64
import binascii
import time
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

ASPECT_RATIOS = ("landscape", "square", "portrait")
DEFAULT_ASPECT_RATIO = "landscape"
MAX_IMAGE_BYTES = 25 * 1024 * 1024
_SIGNATURES = {b"\x89PNG": "png", b"\xff\xd8\xff": "jpg", b"GIF8": "gif", b"RIFF": "webp"}


class ImageGenProvider(ABC):
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

    @property
    def display_name(self) -> str:
        return self.name.title()

    def is_available(self) -> bool:
        return True

    def unavailable_reason(self) -> str:
        return "is_available() returned False"

    def list_models(self) -> list[dict[str, Any]]:
        """``[{"id": ..., "display": ...}, ...]`` (default: none listed)."""
        return []

    def default_model(self) -> str | None:
        models = self.list_models()
        return models[0]["id"] if models else None

    def get_setup_schema(self) -> dict[str, Any]:
        """What a setup wizard asks for: ``{name, badge, tag, env_vars: [{key, prompt, url}]}``."""
        return {"name": self.display_name, "badge": "", "tag": "", "env_vars": []}

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


def save_image_bytes(data: bytes, home: Path, prefix: str = "image") -> Path:
    """Write image bytes under ``<home>/cache/images/`` with the right extension; return the path."""
    if len(data) > MAX_IMAGE_BYTES:
        raise ValueError(f"image is {len(data)} bytes, more than the {MAX_IMAGE_BYTES} byte limit")
    ext = next((e for sig, e in _SIGNATURES.items() if data.startswith(sig)), "bin")
    folder = image_cache_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}.{ext}"
    path.write_bytes(data)
    return path


def save_b64_image(b64: str, home: Path, prefix: str = "image") -> Path:
    """Decode base64 image data and save it (see :func:`save_image_bytes`)."""
    try:
        data = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"image data is not valid base64: {exc}") from None
    return save_image_bytes(data, home, prefix)


def save_url_image(url: str, home: Path, prefix: str = "image", timeout: float = 60.0) -> Path:
    """Download an image (at most 25 MB) and save it (see :func:`save_image_bytes`)."""
    import httpx

    chunks: list[bytes] = []
    size = 0
    with httpx.stream("GET", url, timeout=timeout, follow_redirects=True) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > MAX_IMAGE_BYTES:
                raise ValueError(f"image at {url} is larger than {MAX_IMAGE_BYTES} bytes")
            chunks.append(chunk)
    return save_image_bytes(b"".join(chunks), home, prefix)
