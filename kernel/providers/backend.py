"""What image, video, web-search and speech backends share: a display name, availability, models."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any


class Backend:
    """Defaults of the optional members of a generation or search backend (``name`` is the subclass's)."""

    name: Any

    @property
    def display_name(self) -> str:
        return str(self.name).title()

    def is_available(self) -> bool:
        """Whether it can work now (keys present, library installed); must not touch the network."""
        return True

    def unavailable_reason(self) -> str:
        return "is_available() returned False"

    def list_models(self) -> list[dict[str, Any]]:
        """``[{"id": ..., "display": ...}, ...]`` (default: none listed)."""
        return []

    def default_model(self) -> str | None:
        """The first listed model's id, or ``None``."""
        models = self.list_models()
        return models[0].get("id") if models else None

    def get_setup_schema(self) -> dict[str, Any]:
        """What a setup wizard asks for: ``{name, badge, tag, env_vars: [{key, prompt, url}]}``."""
        return {"name": self.display_name, "badge": "", "tag": "", "env_vars": []}


def save_media(data: bytes, folder: Path, prefix: str, ext: str, *, limit: int, what: str) -> Path:
    """Write ``data`` to a new ``<folder>/<prefix>-<time>-<random>.<ext>`` (at most ``limit`` bytes)."""
    if len(data) > limit:
        raise ValueError(f"{what} is {len(data)} bytes, more than the {limit} byte limit")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}.{ext}"
    path.write_bytes(data)
    return path


def download(url: str, *, limit: int, timeout: float, what: str) -> bytes:
    """GET ``url`` (redirects followed), reading at most ``limit`` bytes; a body announced or found
    bigger is refused without reading the rest."""
    import httpx

    chunks: list[bytes] = []
    size = 0
    with httpx.stream("GET", url, timeout=timeout, follow_redirects=True) as response:
        response.raise_for_status()
        announced = response.headers.get("content-length", "")
        if announced.isdigit() and int(announced) > limit:
            raise ValueError(f"{what} at {url} is {announced} bytes, more than the {limit} byte limit")
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > limit:
                raise ValueError(f"{what} at {url} is larger than {limit} bytes")
            chunks.append(chunk)
    return b"".join(chunks)
