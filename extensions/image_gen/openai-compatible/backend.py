"""The ``openai-compatible`` image backend: ``POST {base_url}/images/generations``.

Works with OpenAI's Images API and with servers that copy it (LocalAI,
stable-diffusion.cpp's server, vLLM-Omni, gateways).  The request is JSON::

    {"model": ..., "prompt": ..., "n": 1, "size": "1536x1024"}

(plus ``response_format`` when configured) with ``Authorization: Bearer <key>``
when a key is known.  The first item of the answer's ``data`` list is used:
``b64_json`` is decoded, ``url`` is downloaded (a relative URL is resolved
against ``base_url``); either way the image is saved under
``<home>/cache/images/`` and the result's ``image`` is that file's path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from kernel.providers import (
    ImageGenProvider,
    error_response,
    resolve_aspect_ratio,
    save_b64_image,
    save_url_image,
    success_response,
)
from kernel.providers.keys import may_send

__all__ = ["DEFAULT_MODEL", "MODEL_SIZES", "SIZES", "OpenAICompatibleImageGen", "size_for"]

DEFAULT_MODEL = "gpt-image-1"
DEFAULT_TIMEOUT = 120.0

#: The ``size`` sent for each aspect ratio.
SIZES = {"landscape": "1536x1024", "square": "1024x1024", "portrait": "1024x1536"}

#: Models that accept other sizes than :data:`SIZES`.
MODEL_SIZES = {
    "dall-e-3": {"landscape": "1792x1024", "square": "1024x1024", "portrait": "1024x1792"},
    "dall-e-2": {"landscape": "1024x1024", "square": "1024x1024", "portrait": "1024x1024"},
}


def size_for(model: str, aspect_ratio: str) -> str:
    """The ``size`` to ask ``model`` for: :data:`MODEL_SIZES` for the DALL·E models, else :data:`SIZES`."""
    return MODEL_SIZES.get(model, SIZES)[aspect_ratio]


MODELS = [
    {"id": "gpt-image-1", "display": "GPT Image 1"},
    {"id": "dall-e-3", "display": "DALL·E 3"},
    {"id": "dall-e-2", "display": "DALL·E 2"},
]


class OpenAICompatibleImageGen(ImageGenProvider):
    """An OpenAI-compatible images endpoint.

    ``base_url`` and ``api_key`` given here win; when they are ``None`` the
    environment variables ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` are read
    at the time of each call.  A key is optional (local servers need none).
    """

    def __init__(
        self,
        home: Path | str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        response_format: str | None = None,
    ) -> None:
        self.home = Path(home)
        self._base_url = base_url or None
        self._api_key = api_key or None
        self.model = model or DEFAULT_MODEL
        self.timeout = float(timeout)
        self.response_format = response_format or None

    @property
    def name(self) -> str:
        return "openai-compatible"

    @property
    def display_name(self) -> str:
        return "OpenAI-compatible images"

    # -- configuration -------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The configured base URL, else ``$OPENAI_BASE_URL``, without a trailing slash ("" if none)."""
        value = self._base_url or os.environ.get("OPENAI_BASE_URL", "")
        return value.strip().rstrip("/")

    @property
    def api_key(self) -> str | None:
        """The configured key, else ``$OPENAI_API_KEY`` — only when the endpoint is OpenAI's own: a key
        meant for OpenAI never goes to another host (``$OPENAI_BASE_URL`` included)."""
        if self._api_key:
            return self._api_key
        key = os.environ.get("OPENAI_API_KEY") or None
        return key if key and may_send("OPENAI_API_KEY", self.base_url, os.environ) else None

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/images/generations"

    def is_available(self) -> bool:
        return not self.unavailable_reason()

    def unavailable_reason(self) -> str:
        base_url = self.base_url
        if not base_url:
            return (
                "no base URL: set image_gen.base_url in config.yaml or the OPENAI_BASE_URL environment "
                "variable (for OpenAI itself: https://api.openai.com/v1)"
            )
        if urlsplit(base_url).scheme not in ("http", "https") or not urlsplit(base_url).netloc:
            return f"image_gen.base_url must be an http(s) URL, not {base_url!r}"
        return ""

    def list_models(self) -> list[dict[str, Any]]:
        return [dict(model) for model in MODELS]

    def default_model(self) -> str | None:
        return self.model

    def get_setup_schema(self) -> dict[str, Any]:
        return {
            "name": self.display_name,
            "badge": "",
            "tag": "OpenAI Images API or any compatible server",
            "env_vars": [
                {"key": "OPENAI_BASE_URL", "prompt": "Base URL of the images API (ending in /v1)", "url": ""},
                {
                    "key": "OPENAI_API_KEY",
                    "prompt": "API key (leave empty for a local server)",
                    "url": "https://platform.openai.com/api-keys",
                },
            ],
        }

    # -- generation ------------------------------------------------------------------

    def generate(
        self,
        prompt: str,
        aspect_ratio: str = "landscape",
        *,
        image_url: str | None = None,
        reference_image_urls: list[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Ask the server for one image and save it; unknown keyword arguments are ignored.

        ``model`` (a non-empty string) overrides the configured model for this call.
        """
        import httpx

        aspect = resolve_aspect_ratio(aspect_ratio)
        override = kwargs.get("model")
        model = override if isinstance(override, str) and override.strip() else self.model

        def failure(error: str, error_type: str) -> dict[str, Any]:
            return error_response(
                error=self._redact(error),
                error_type=error_type,
                provider=self.name,
                model=model,
                prompt=prompt,
                aspect_ratio=aspect,
            )

        reason = self.unavailable_reason()
        if reason:
            return failure(reason, "not_configured")
        size = size_for(model, aspect)
        body: dict[str, Any] = {"model": model, "prompt": prompt, "n": 1, "size": size}
        if self.response_format:
            body["response_format"] = self.response_format
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self.api_key
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = self.endpoint
        try:
            response = httpx.post(url, json=body, headers=headers, timeout=self.timeout)
        except httpx.TimeoutException:
            return failure(f"the image request to {url} timed out after {self.timeout:g}s", "timeout")
        except httpx.HTTPError as exc:
            return failure(
                f"the image request to {url} failed: {type(exc).__name__}: {exc}", "connection_error"
            )

        if response.status_code >= 400:
            detail = _error_detail(response)
            return failure(f"{url} answered HTTP {response.status_code}: {detail}", "http_error")
        try:
            payload = response.json()
        except ValueError:
            return failure(
                f"{url} answered with a body that is not JSON: {response.text[:200]!r}", "malformed_response"
            )
        item = _first_item(payload)
        if item is None:
            return failure(
                f"{url} answered without a data[0] object: {str(payload)[:200]}", "malformed_response"
            )

        try:
            if isinstance(item.get("b64_json"), str) and item["b64_json"]:
                path = save_b64_image(item["b64_json"], self.home, prefix="openai-compatible")
                source = "b64_json"
            elif isinstance(item.get("url"), str) and item["url"]:
                image_url_found = urljoin(f"{self.base_url}/", item["url"])
                try:
                    path = save_url_image(
                        image_url_found, self.home, prefix="openai-compatible", timeout=self.timeout
                    )
                except httpx.HTTPError as exc:
                    return failure(
                        f"downloading the image from {image_url_found} failed: {type(exc).__name__}: {exc}",
                        "download_error",
                    )
                source = "url"
            else:
                return failure(
                    f"{url} answered with neither b64_json nor url in data[0]", "malformed_response"
                )
        except ValueError as exc:
            return failure(str(exc), "malformed_response")
        except OSError as exc:
            return failure(f"cannot save the image: {exc}", "save_error")

        extra: dict[str, Any] = {"size": size, "source": source}
        if isinstance(item.get("revised_prompt"), str):
            extra["revised_prompt"] = item["revised_prompt"]
        if source == "url":
            extra["url"] = image_url_found
        return success_response(
            image=str(path), model=model, prompt=prompt, aspect_ratio=aspect, provider=self.name, extra=extra
        )

    def _redact(self, text: str) -> str:
        key = self.api_key
        return text.replace(key, "***") if key else text


def _first_item(payload: Any) -> dict[str, Any] | None:
    if not isinstance(payload, dict):
        return None
    data = payload.get("data")
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        return None
    return data[0]


def _error_detail(response: Any) -> str:
    """The server's own message: ``error.message``, ``error`` or ``message`` of a JSON body, else the text."""
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
        if isinstance(payload.get("message"), str):
            return payload["message"]
        if isinstance(payload.get("detail"), str):
            return payload["detail"]
    text = response.text.strip()
    return text[:500] if text else "(empty body)"
