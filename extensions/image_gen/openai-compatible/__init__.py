"""The bundled ``openai-compatible`` image backend (``image_gen.provider: openai-compatible``).

``register(ctx)`` offers one :class:`~.backend.OpenAICompatibleImageGen`, configured
from the ``image_gen`` section of config.yaml:

* ``base_url``: the API root, e.g. ``http://127.0.0.1:8080/v1`` (else ``$OPENAI_BASE_URL``);
* ``api_key``: sent as ``Authorization: Bearer`` (else ``$OPENAI_API_KEY``; optional);
* ``model`` (default ``gpt-image-1``), ``timeout`` in seconds (default 120),
  ``response_format`` (``b64_json`` or ``url``; not sent unless set).

Without a base URL the backend is listed as unavailable, with the reason.
"""

from __future__ import annotations

from typing import Any

from .backend import DEFAULT_MODEL, DEFAULT_TIMEOUT, MODEL_SIZES, SIZES, OpenAICompatibleImageGen, size_for

__all__ = ["DEFAULT_MODEL", "MODEL_SIZES", "SIZES", "OpenAICompatibleImageGen", "register", "size_for"]


def _text(section: dict[str, Any], key: str, ctx: Any) -> str | None:
    value = section.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        ctx.logger.warning("image_gen.%s must be a string, not %s; ignored", key, type(value).__name__)
        return None
    return value


def register(ctx: Any) -> None:
    section = ctx.config.get("image_gen")
    section = dict(section) if isinstance(section, dict) else {}
    timeout = section.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        ctx.logger.warning(
            "image_gen.timeout must be a positive number, not %r; using %s", timeout, DEFAULT_TIMEOUT
        )
        timeout = DEFAULT_TIMEOUT
    ctx.register_image_gen_provider(
        OpenAICompatibleImageGen(
            ctx.home,
            base_url=_text(section, "base_url", ctx),
            api_key=_text(section, "api_key", ctx),
            model=_text(section, "model", ctx),
            timeout=float(timeout),
            response_format=_text(section, "response_format", ctx),
        )
    )
