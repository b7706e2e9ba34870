"""``ProviderProfile``: how to reach one model provider."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

API_MODES = ("chat_completions", "scripted")


class _OmitTemperature:
    """The type of :data:`OMIT_TEMPERATURE` (one instance; it survives copying and pickling as itself)."""

    _instance: _OmitTemperature | None = None

    def __new__(cls) -> _OmitTemperature:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "OMIT_TEMPERATURE"

    def __reduce__(self) -> str:
        return "OMIT_TEMPERATURE"

    def __copy__(self) -> _OmitTemperature:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _OmitTemperature:
        return self


#: ``fixed_temperature=OMIT_TEMPERATURE``: the request carries no ``temperature`` at all (for models
#: that refuse the parameter), whatever the caller asked for.
OMIT_TEMPERATURE: Any = _OmitTemperature()


@dataclass
class ProviderProfile:
    """A model provider: endpoint, authentication and request hooks.

    Subclass and override the hook methods to adapt requests; every field has
    a default so that a profile needs only ``name``.  ``env_vars`` lists the
    variables to read, in priority order: the first set one that does not end
    in ``_BASE_URL`` is the API key; a set ``*_BASE_URL`` one overrides
    ``base_url``.
    """

    name: str
    api_mode: str = "chat_completions"
    aliases: tuple[str, ...] = ()
    display_name: str = ""
    description: str = ""
    signup_url: str = ""
    env_vars: tuple[str, ...] = ()
    base_url: str = ""
    models_url: str = ""
    auth_type: str = "api_key"
    # The fields up to default_aux_model are in Hermes Agent 0.19's order (a profile built positionally
    # means the same thing here); the kernel's own come after them.
    supports_health_check: bool = False
    supports_vision: bool = False
    # Whether images may be sent inside tool-result messages (False: only in user messages).
    supports_vision_tool_messages: bool = True
    fallback_models: tuple[str, ...] = ()
    hostname: str = ""
    default_headers: Mapping[str, str] = field(default_factory=dict)
    # A number replaces any temperature asked for; OMIT_TEMPERATURE sends none at all.
    fixed_temperature: Any = None
    default_max_tokens: int | None = None
    default_aux_model: str = ""
    default_model: str = ""
    supports_prompt_cache_key: bool = False
    # USD per million tokens, when known: {"input": 0.5, "output": 1.5}.
    prices: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a provider profile needs a non-empty name, not {self.name!r}")
        self.aliases = tuple(self.aliases or ())
        self.env_vars = tuple(self.env_vars or ())
        self.fallback_models = tuple(self.fallback_models or ())
        self.default_headers = dict(self.default_headers or {})
        if not self.display_name:
            self.display_name = self.name

    # -- hooks a profile may override ---------------------------------------

    def get_hostname(self) -> str:
        """The host of the endpoint: ``hostname`` when set, else the host part of ``base_url``."""
        if self.hostname:
            return self.hostname
        from urllib.parse import urlsplit

        try:
            return urlsplit(self.base_url).hostname or ""
        except ValueError:
            return ""

    def get_max_tokens(self, model: str | None) -> int | None:
        """The ``max_tokens`` to send for ``model`` when the call gives none (default:
        ``default_max_tokens`` whatever the model; override for per-model caps)."""
        return self.default_max_tokens

    def default_vision_model(self) -> str | None:
        """The model to use for images on this provider, or None to use the chat model (override to
        pick one at run time)."""
        return None

    def prepare_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Adapt the messages before they are sent (default: unchanged)."""
        return messages

    def build_extra_body(self, *, session_id: str | None = None, **context: Any) -> dict[str, Any]:
        """Extra fields merged into the request body (default: none)."""
        return {}

    def build_api_kwargs_extras(
        self, *, reasoning_config: Any = None, **context: Any
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(extra_body_additions, top_level_kwargs)`` for the request (default: none)."""
        return {}, {}

    def fetch_models(
        self, *, api_key: str | None = None, base_url: str | None = None, timeout: float = 8.0
    ) -> list[str] | None:
        """The model ids the endpoint offers (``GET models_url`` or ``{base_url}/models``), or None."""
        import httpx

        url = self.models_url or f"{(base_url or self.base_url).rstrip('/')}/models"
        headers = dict(self.default_headers)
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        try:
            response = httpx.get(url, headers=headers, timeout=timeout)
            response.raise_for_status()
            data = response.json().get("data", [])
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        return [item["id"] for item in data if isinstance(item, dict) and isinstance(item.get("id"), str)]

    # -- credentials ----------------------------------------------------------

    def credentials(
        self, config: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
    ) -> tuple[str | None, str]:
        """``(api_key, base_url)``: config overrides, then ``env_vars``, then the profile's URL.

        ``model.api_key`` (or the variable ``model.api_key_env`` names) goes to any endpoint; a
        known vendor's variable in ``env_vars`` (``OPENAI_API_KEY``, ...) only to that vendor's hosts
        (see :mod:`kernel.providers.keys`).
        """
        api_key, base_url, _withheld = self._resolve(config, environ)
        return api_key, base_url

    def withheld_key(
        self, config: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
    ) -> str | None:
        """Why a key set in one of ``env_vars`` is not sent to the endpoint, with the fix; ``None``
        when no key is held back.  Never holds the key itself."""
        return self._resolve(config, environ)[2]

    def _resolve(
        self, config: Mapping[str, Any] | None, environ: Mapping[str, str] | None
    ) -> tuple[str | None, str, str | None]:
        from . import keys

        config = config or {}
        environ = os.environ if environ is None else environ
        url_vars = {v: environ[v] for v in self.env_vars if v.endswith("_BASE_URL") and environ.get(v)}
        base_url = config.get("base_url") or next(iter(url_vars.values()), "") or self.base_url
        api_key = config.get("api_key") or None
        named = config.get("api_key_env")
        if api_key is None and isinstance(named, str) and named.strip():
            api_key = environ.get(named.strip()) or None
        if api_key is not None:
            return api_key, base_url, None
        withheld = None
        for var in self.key_vars():
            value = environ.get(var)
            if not value:
                continue
            if keys.may_send(var, base_url, environ):
                return value, base_url, None
            if withheld is None:
                withheld = keys.withheld_reason(var, base_url, keys.own_hosts(var, environ) or ())
        return None, base_url, withheld

    def key_vars(self) -> list[str]:
        """The ``env_vars`` that hold an API key.

        Those named like a key (``*_API_KEY``, ``*_KEY``, ``*_TOKEN``, ``*_SECRET``)
        when there are any — a profile may list settings too, such as a model
        list endpoint —, else every one but ``*_BASE_URL``.
        """
        others = [v for v in self.env_vars if not v.endswith("_BASE_URL")]
        named = [v for v in others if v.endswith(("_KEY", "_TOKEN", "_SECRET"))]
        return named or others

    def availability(
        self, config: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
    ) -> tuple[bool, str]:
        """Whether the provider can be used now, and why not."""
        if self.api_mode not in API_MODES:
            return False, f"api_mode '{self.api_mode}' is not supported (supported: {', '.join(API_MODES)})"
        if self.api_mode == "scripted":
            return True, ""
        api_key, base_url, withheld = self._resolve(config, environ)
        if not base_url:
            return False, "no base_url (set model.base_url in config.yaml)"
        key_vars = self.key_vars()
        if self.auth_type == "api_key" and key_vars and not api_key:
            return False, withheld or f"no API key (set {' or '.join(key_vars)}, or model.api_key)"
        return True, ""
