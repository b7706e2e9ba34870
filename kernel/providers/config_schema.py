"""The ``config.yaml`` sections the provider service reads: ``model``, ``memory``, ``context``,
``image_gen``, ``web_search`` and ``video_gen`` (see :mod:`kernel.base.schema` for the keywords)."""

from __future__ import annotations

from typing import Any

from ..base.schema import PRINTABLE, mapping, seconds, text, whole, words


def _model_name(key: str) -> dict[str, Any]:
    """A model name: printable text of at most 512 characters (see kernel.providers.hermes_config)."""
    return {
        "type": ["string", "null"],
        "maxLength": 512,
        "pattern": PRINTABLE,
        "x-expected": "a model name (printable text, at most 512 characters)",
        "x-example": f"{key}: gpt-4o-mini",
    }


_MODEL = mapping(
    {
        "provider": {
            **text("a provider name (printable text, at most 200 characters)", "provider: openrouter"),
            "maxLength": 200,
            "pattern": PRINTABLE,
        },
        "model": _model_name("model"),
        # Hermes Agent's spellings of the model name: model.model wins, then default, then name.
        "default": _model_name("default"),
        "name": _model_name("name"),
        "base_url": text("a URL", "base_url: http://127.0.0.1:8080/v1"),
        "api_key": text("a string (better: the provider's variable in .env)"),
        # The variable whose key is sent to this endpoint, whatever its host (kernel.providers.keys).
        "api_key_env": text("the name of an environment variable", "api_key_env: OPENAI_API_KEY"),
        "script": text("a file name (the scripted provider's turns)", "script: script.yaml"),
        "timeout": seconds("a number of seconds (more than 0)", "timeout: 60"),
        "max_retries": whole(0, "a whole number of retries (0 or more)", "max_retries: 3"),
        "context_length": whole(1, "a whole number of tokens (at least 1)", "context_length: 128000"),
    },
    hermes=words(
        """
        api api_mode max_tokens reasoning_effort reasoning_echo extra_body extra_headers
        temperature top_p ssl_verify request_overrides context_window
    """
    ),
    lenient=True,
    expected="a mapping (provider, model, base_url, ...) or a model name",
    type=["object", "string", "null"],
)

_MEMORY = mapping(
    {"provider": text("a memory provider name", "provider: sqlite")},
    hermes=words(
        """
        memory_enabled user_profile_enabled write_approval memory_char_limit user_char_limit
        nudge_interval
    """
    ),
    lenient=True,
)

_CONTEXT = mapping(
    {
        "engine": text("a context engine name", "engine: compressor"),
        "context_length": whole(
            1, "a whole number of tokens (at least 1)", "context_length: 128000", strings=False
        ),
        "protect_first_n": whole(
            0, "a whole number of messages (0 or more)", "protect_first_n: 3", strings=False
        ),
        "protect_last_n": whole(
            0, "a whole number of messages (0 or more)", "protect_last_n: 20", strings=False
        ),
        "threshold_percent": {
            "type": ["number", "null"],
            "exclusiveMinimum": 0,
            "maximum": 1,
            "x-expected": "a fraction of the context (more than 0, at most 1)",
            "x-example": "threshold_percent: 0.75",
        },
    },
    hermes=("memory_trim",),
    lenient=True,
)

_IMAGE_GEN = mapping(
    {
        "provider": text("an image generator's name", "provider: openai-compatible"),
        "base_url": text("a URL", "base_url: http://127.0.0.1:8080/v1"),
        "api_key": text("a string"),
        "model": text("a model name"),
        "response_format": text("a response format (b64_json or url)", "response_format: b64_json"),
        "timeout": seconds("a number of seconds (more than 0)", "timeout: 120"),
    },
    lenient=True,  # other keys are the sections of image backends (image_gen.<backend>.model)
)

_SLOT = mapping({"provider": text("a provider name")}, lenient=True)


CONFIG_SCHEMA: dict[str, dict[str, Any]] = {
    "model": _MODEL,
    "memory": _MEMORY,
    "context": _CONTEXT,
    "image_gen": _IMAGE_GEN,
    "web_search": _SLOT,
    "video_gen": _SLOT,
}
