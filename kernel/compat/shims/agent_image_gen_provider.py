"""``agent.image_gen_provider`` for plugins written for Hermes Agent.

The base class and response helpers are the kernel's own
(:mod:`kernel.providers.image_gen`).  The save helpers take no home: images
go under the current kernel's home (else ``$HERMES_HOME``, else
``~/.hermes``), in ``cache/images/``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ...providers import image_gen as _image_gen
from ...providers.image_gen import (
    ASPECT_RATIOS,
    DEFAULT_ASPECT_RATIO,
    ImageGenProvider,
    error_response,
    resolve_aspect_ratio,
    success_response,
)
from . import hermes_home, safe_prefix

__all__ = [
    "ASPECT_RATIOS",
    "DEFAULT_ASPECT_RATIO",
    "VALID_ASPECT_RATIOS",
    "ImageGenProvider",
    "error_response",
    "normalize_reference_images",
    "resolve_aspect_ratio",
    "save_b64_image",
    "save_url_image",
    "success_response",
]

#: The aspect ratios the ``generate_image`` tool takes (Hermes' name for :data:`ASPECT_RATIOS`).
VALID_ASPECT_RATIOS = ASPECT_RATIOS


def normalize_reference_images(value: Any) -> list[str] | None:
    """Reference images as a clean list of URLs or paths, or ``None`` when there are none.

    Accepts ``None``, one string, or a list/tuple of strings (or of mappings
    with a ``url``); blanks and anything else are dropped, whitespace is
    trimmed, repeats are removed (first one kept).
    """
    if value is None:
        return None
    items: Iterable[Any] = [value] if isinstance(value, str | Mapping) else value
    if not isinstance(items, list | tuple):
        return None
    cleaned: list[str] = []
    for item in items:
        if isinstance(item, Mapping):
            item = item.get("url") or item.get("image_url")
        if isinstance(item, str) and item.strip() and item.strip() not in cleaned:
            cleaned.append(item.strip())
    return cleaned or None


def save_b64_image(b64_data: str, *, prefix: str = "image", extension: str | None = None) -> Path:
    """Decode base64 image data and save it under ``<home>/cache/images/``; return the path.

    The file's extension is ``extension`` when given (``png``, ``.jpg``), else the one the image's
    content shows."""
    return _image_gen.save_b64_image(b64_data, hermes_home(), safe_prefix(prefix, "image"), ext=extension)


def save_url_image(
    url: str, *, prefix: str = "image", timeout: float = 60.0, max_bytes: int = _image_gen.MAX_IMAGE_BYTES
) -> Path:
    """Download an image (at most ``max_bytes``, 25 MB by default; not empty) and save it under
    ``<home>/cache/images/``; return the path."""
    return _image_gen.save_url_image(
        url, hermes_home(), safe_prefix(prefix, "image"), timeout=timeout, max_bytes=max_bytes
    )
