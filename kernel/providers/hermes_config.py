"""A Hermes Agent home's ``model:`` section, read by the kernel: which model name, which endpoint.

* :func:`model_name` is the one place that answers "which model": ``model.model`` (the kernel's key),
  else ``model.default`` (what ``hermes model`` and ``hermes config set model.default`` write), else
  ``model.name`` (an older Hermes spelling); a ``model:`` written as a plain string is the name.
* :func:`builtin_profile` turns Hermes' provider names (``openrouter``, ``openai``, ``nous``, ...)
  into profiles of their OpenAI-compatible endpoint, for a home whose plugins offer none of that name.
* :func:`unreachable` explains the Hermes providers the kernel cannot reach (another wire protocol,
  an OAuth login or a cloud SDK), with the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .hermes_endpoints import ENDPOINTS, Endpoint
from .profile import ProviderProfile

#: The plugin column of a profile built here (no plugin offers it).
BUILT_IN = "(built in)"
#: The longest model name accepted (longer ones are junk, or an attack on the logs).
MAX_MODEL_NAME = 512
#: The keys that may hold the model name, the winner first.
NAME_KEYS = ("model", "default", "name")
#: How much of a hostile name an error message shows.
SHOWN_CHARS = 60
#: What a name may not hold: control characters, line and paragraph separators, bidi overrides, halves
#: of surrogate pairs (the same rule as config.yaml's check, kernel.base.schema).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


_VIA_OPENROUTER = (
    "set model.provider to 'openrouter' (key in OPENROUTER_API_KEY) and model.default to the model's "
    "OpenRouter name, or to 'custom' with model.base_url of an OpenAI-compatible endpoint, or install a "
    "model-provider plugin that offers '{name}'"
)
_LOGIN = (
    "set model.provider to a provider reached with an API key (e.g. 'openrouter' with OPENROUTER_API_KEY), "
    "or install a model-provider plugin that offers '{name}'"
)

# Hermes' provider names the kernel cannot reach: what they speak, and the fix.
UNREACHABLE: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "anthropic": ("Anthropic's Messages API", _VIA_OPENROUTER, ("claude", "claude-code", "claude-oauth")),
    "minimax": ("Anthropic's Messages API", _VIA_OPENROUTER, ("mini-max",)),
    "minimax-cn": ("Anthropic's Messages API", _VIA_OPENROUTER, ("minimax-china", "minimax_cn")),
    "minimax-oauth": (
        "Anthropic's Messages API with a MiniMax login",
        _LOGIN,
        ("minimax_oauth", "minimax-portal", "minimax-global", "minimax-oauth-io"),
    ),
    "bedrock": (
        "AWS Bedrock's Converse API with AWS credentials",
        _VIA_OPENROUTER,
        ("aws", "aws-bedrock", "amazon-bedrock", "amazon"),
    ),
    "vertex": (
        "Google Vertex AI with Google Cloud credentials",
        _VIA_OPENROUTER,
        ("google-vertex", "vertex-ai", "gcp-vertex", "vertexai"),
    ),
    "openai-codex": ("the Codex Responses API with a ChatGPT login", _LOGIN, ("codex", "openai_codex")),
    "xai-oauth": (
        "xAI with an account login",
        _LOGIN,
        ("x-ai-oauth", "grok-oauth", "xai-grok-oauth"),
    ),
    "qwen-oauth": ("Qwen's portal with an account login", _LOGIN, ("qwen-portal", "qwen-cli")),
    "copilot": (
        "GitHub Copilot's API with a token exchange",
        _LOGIN,
        ("github", "github-copilot", "github-models", "github-model"),
    ),
    "copilot-acp": (
        "an external Copilot agent process",
        _LOGIN,
        ("github-copilot-acp", "copilot-acp-agent"),
    ),
    "auto": (
        "no single endpoint (Hermes picks one from the keys it finds)",
        "set model.provider to the provider you use, e.g. 'openrouter' (key in OPENROUTER_API_KEY)",
        (),
    ),
}


def _index(table: Mapping[str, Any]) -> dict[str, str]:
    """Every name and alias of ``table``, case-folded, to its name."""
    out: dict[str, str] = {}
    for name, entry in table.items():
        aliases = entry.aliases if isinstance(entry, Endpoint) else entry[2]
        for key in (name, *aliases):
            out.setdefault(key.casefold(), name)
    return out


_ENDPOINT_NAMES = _index(ENDPOINTS)
_UNREACHABLE_NAMES = _index(UNREACHABLE)
_profiles: dict[str, ProviderProfile] = {}


def builtin_profile(name: str) -> ProviderProfile | None:
    """The profile of Hermes' provider ``name`` (or an alias) when its endpoint speaks OpenAI chat
    completions; ``None`` for any other name.  The same object is answered every time."""
    canonical = _ENDPOINT_NAMES.get(str(name).strip().casefold())
    if canonical is None:
        return None
    profile = _profiles.get(canonical)
    if profile is None:
        entry = ENDPOINTS[canonical]
        profile = ProviderProfile(
            name=canonical,
            aliases=entry.aliases,
            display_name=entry.display or canonical,
            description=f"Hermes Agent's provider '{canonical}', reached at its OpenAI-compatible endpoint",
            env_vars=entry.env_vars,
            base_url=entry.base_url,
            auth_type="api_key_optional" if entry.key_optional else "api_key",
        )
        profile = _profiles.setdefault(canonical, profile)
    return profile


def unreachable(name: str) -> str | None:
    """Why Hermes' provider ``name`` cannot be reached by the kernel, with the fix; ``None`` when it
    is not one of those."""
    canonical = _UNREACHABLE_NAMES.get(str(name).strip().casefold())
    if canonical is None:
        return None
    speaks, fix, _aliases = UNREACHABLE[canonical]
    given = shown_name(str(name).strip())
    called = f"'{canonical}'" if given.casefold() == canonical else f"'{given}' (Hermes' '{canonical}')"
    return (
        f"{called} is a Hermes Agent provider that speaks {speaks}, not OpenAI chat completions, "
        f"so hermes-kernel cannot reach it: {fix.format(name=canonical)}"
    )


def shown_name(value: Any) -> str:
    """A configured name as a message may show it: escapes for what is not printable, cut short."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) > SHOWN_CHARS:
        text = text[:SHOWN_CHARS]
        cut = f"... ({len(value) if isinstance(value, str) else 'long'} characters)"
    else:
        cut = ""
    if not text.isprintable():
        text = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return text + cut


def _not_a_name(value: Any) -> str | None:
    """Why ``value`` is not a model name (``""`` when it is merely empty), or ``None`` when it is one."""
    if value is None:
        return ""
    if not isinstance(value, str):
        kind = {bool: "true or false", int: "a number", float: "a number", dict: "a mapping", list: "a list"}
        return f"is {kind.get(type(value), type(value).__name__)}, not a model name (write the name as text)"
    if not value.strip():
        return ""
    if len(value) > MAX_MODEL_NAME:
        return f"is {len(value)} characters long (a model name has at most {MAX_MODEL_NAME})"
    if _UNSAFE.search(value):
        return f"'{shown_name(value)}' has control or invalid characters (a model name is printable text)"
    return None


def model_name(section: Any) -> tuple[str | None, str | None]:
    """``(name, problem)`` for a ``model:`` section: the first of ``model``, ``default``, ``name``
    that is a model name, and what is wrong with the first one that is not (else ``None``)."""
    if isinstance(section, str):
        candidates: list[tuple[str, Any]] = [("model", section)]
    elif isinstance(section, Mapping):
        candidates = [(key, section.get(key)) for key in NAME_KEYS]
    else:
        return None, None
    problem = None
    for key, value in candidates:
        why = _not_a_name(value)
        if why is None:
            return value.strip(), problem
        if why and problem is None:
            problem = f"model.{key} {why}"
    return None, problem


def model_section(value: Any) -> dict[str, Any]:
    """``config.yaml``'s ``model:`` as the kernel uses it: the model name under ``model`` alone (see
    :func:`model_name`), the Hermes spellings of it removed, keys that are not text dropped."""
    if isinstance(value, str):
        name, _problem = model_name(value)
        return {"model": name} if name else {}
    if not isinstance(value, Mapping):
        return {}
    out = {k: v for k, v in value.items() if isinstance(k, str) and k not in NAME_KEYS}
    name, _problem = model_name(value)
    if name:
        out["model"] = name
    return out
