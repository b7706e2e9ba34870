"""Model provider ``openai-compatible``: any endpoint that speaks OpenAI chat completions.

There is deliberately no default URL: the provider is unavailable until
``model.base_url`` (config.yaml) or ``OPENAI_BASE_URL`` names the endpoint, so
nothing is ever sent to a server the user did not choose.  A key is optional
(``auth_type="api_key_optional"``): ``model.api_key`` (or the variable
``model.api_key_env`` names) is sent as a bearer token to the configured URL;
``OPENAI_API_KEY`` only when that URL is OpenAI's own (kernel.providers.keys).
Otherwise the request goes out without one, which is what local servers expect.

Typical base URLs: llama.cpp ``http://127.0.0.1:8080/v1``, vLLM
``http://127.0.0.1:8000/v1``, Ollama ``http://127.0.0.1:11434/v1``, OpenRouter
``https://openrouter.ai/api/v1`` (with a key).
"""

from __future__ import annotations

from kernel.providers import ProviderProfile, register_provider

PROFILE = ProviderProfile(
    name="openai-compatible",
    # Names of local servers people reach through this profile.  Hosted
    # services ("openai", "openrouter") are left free for profiles of their own
    # with a default URL and a required key.
    aliases=("custom", "local", "llama.cpp", "llamacpp", "vllm", "ollama"),
    display_name="OpenAI-compatible endpoint",
    description=(
        "Any OpenAI-compatible chat-completions server (llama.cpp, vLLM, Ollama, OpenRouter, ...); "
        "set model.base_url (or OPENAI_BASE_URL) and model.model; a key is optional."
    ),
    env_vars=("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    base_url="",
    auth_type="api_key_optional",
    api_mode="chat_completions",
)

register_provider(PROFILE)
