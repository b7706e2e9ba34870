"""Where a key read from the environment may be sent.

The key variables of known vendors (``OPENAI_API_KEY``, ``OPENROUTER_API_KEY``, the variables of the
Hermes providers in :mod:`.hermes_config`, a few more) belong to that vendor: such a key is sent only
to the vendor's hosts (and their subdomains), or to the URL of the vendor's own ``<NAME>_BASE_URL``
variable (``OPENROUTER_BASE_URL`` for ``OPENROUTER_API_KEY``: a mirror the user set for that vendor).
``OPENAI_BASE_URL`` is no such variable: in the kernel it names any OpenAI-compatible server (Hermes
Agent 0.19 no longer reads it), so ``OPENAI_API_KEY`` never follows it.

Any other endpoint (``model.provider: custom``, a ``model.base_url`` elsewhere) gets only a key
configured for it: ``model.api_key``, or ``model.api_key_env`` naming the variable to send.  A
variable no vendor owns (a plugin profile's own ``ACME_API_KEY``) belongs to the profile that lists
it and goes to that profile's endpoint, wherever it is configured.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from urllib.parse import urlsplit

#: Vendors' key variables the Hermes endpoint table does not cover (or covers only in part), with
#: the domains that belong to the vendor.  Azure's hosts are per resource, under these domains.
_EXTRA_HOSTS: dict[str, tuple[str, ...]] = {
    "OPENAI_API_KEY": ("openai.com", "openai.azure.com"),
    "ANTHROPIC_API_KEY": ("anthropic.com",),
    "GROQ_API_KEY": ("groq.com",),
    "MISTRAL_API_KEY": ("mistral.ai",),
    "HF_TOKEN": ("huggingface.co",),
    "LM_API_KEY": ("localhost",),
    "GLM_API_KEY": ("bigmodel.cn",),
    "ZAI_API_KEY": ("bigmodel.cn",),
    "KIMI_API_KEY": ("moonshot.cn", "kimi.com"),
    "KIMI_CODING_API_KEY": ("kimi.com",),
    "STEPFUN_API_KEY": ("stepfun.com",),
    "DASHSCOPE_API_KEY": ("dashscope.aliyuncs.com",),
    "AZURE_FOUNDRY_API_KEY": (
        "openai.azure.com",
        "services.ai.azure.com",
        "cognitiveservices.azure.com",
        "inference.ai.azure.com",
        "models.ai.azure.com",
    ),
}


def host_of(url: str) -> str:
    """The host ``url`` names, lower-case, without a trailing dot; ``""`` when it names none."""
    try:
        host = urlsplit(str(url).strip()).hostname or ""
    except ValueError:
        return ""
    return host.rstrip(".").lower()


def host_matches(host: str, domains: Iterable[str]) -> bool:
    """Whether ``host`` is one of ``domains`` or a subdomain of one."""
    host = host.rstrip(".").lower()
    if not host:
        return False
    for domain in domains:
        domain = domain.rstrip(".").lower()
        if domain and (host == domain or host.endswith("." + domain)):
            return True
    return False


#: Domains where anyone can have a host: a vendor endpoint under one keeps its exact host.
_SHARED_DOMAINS = frozenset(
    {"aliyuncs.com", "azure.com", "amazonaws.com", "cloudfront.net", "googleusercontent.com"}
)


def _vendor_domain(host: str) -> str:
    """The vendor's domain for an endpoint host (``api.deepseek.com`` -> ``deepseek.com``), so that its
    regional hosts count; the exact host for an address or a host on a shared domain."""
    labels = host.split(".")
    if len(labels) <= 2 or host.replace(".", "").isdigit() or ":" in host:
        return host
    domain = ".".join(labels[-2:])
    return host if domain in _SHARED_DOMAINS else domain


@cache
def _vendor_hosts() -> dict[str, tuple[str, ...]]:
    from .hermes_endpoints import ENDPOINTS

    table: dict[str, list[str]] = {}
    for endpoint in ENDPOINTS.values():
        host = _vendor_domain(host_of(endpoint.base_url))
        for var in endpoint.env_vars:
            if not var.endswith("_BASE_URL") and host:
                table.setdefault(var, []).append(host)
    for var, domains in _EXTRA_HOSTS.items():
        table.setdefault(var, []).extend(domains)
    return {var: tuple(dict.fromkeys(hosts)) for var, hosts in table.items()}


def vendor_hosts(var: str) -> tuple[str, ...] | None:
    """The domains a known vendor's key variable ``var`` may be sent to; ``None`` for other names."""
    return _vendor_hosts().get(var)


#: Vendor variables whose ``<NAME>_BASE_URL`` namesake is not the vendor's: the kernel reads
#: ``OPENAI_BASE_URL`` as the URL of any OpenAI-compatible server.
_NOT_A_MIRROR = frozenset({"OPENAI_API_KEY"})
_KEY_SUFFIXES = ("_API_KEY", "_KEY", "_TOKEN", "_SECRET")


def mirror_var(var: str) -> str | None:
    """The vendor's own URL variable for key variable ``var`` (``OPENROUTER_BASE_URL`` for
    ``OPENROUTER_API_KEY``), or ``None``."""
    if var in _NOT_A_MIRROR:
        return None
    for suffix in _KEY_SUFFIXES:
        if var.endswith(suffix) and len(var) > len(suffix):
            return var[: -len(suffix)] + "_BASE_URL"
    return None


def own_hosts(var: str, environ: Mapping[str, str]) -> tuple[str, ...] | None:
    """Where the key in ``var`` may go: the vendor's domains and the host of its own URL variable;
    ``None`` (anywhere the profile is pointed) for a variable no known vendor owns."""
    known = vendor_hosts(var)
    if known is None:
        return None
    mirror = mirror_var(var)
    extra = host_of(environ.get(mirror) or "") if mirror else ""
    return tuple(dict.fromkeys((*known, extra) if extra else known))


def may_send(var: str, url: str, environ: Mapping[str, str]) -> bool:
    """Whether the key read from ``var`` may be sent to ``url`` (see the module docstring)."""
    hosts = own_hosts(var, environ)
    return hosts is None or host_matches(host_of(url), hosts)


def withheld_reason(var: str, url: str, hosts: Iterable[str]) -> str:
    """Why the key of ``var`` is not sent to ``url``, with the fix; never the key itself."""
    where = ", ".join(hosts) or "the provider's own endpoint"
    target = host_of(url)
    target = target if target and target.isprintable() and len(target) <= 100 else "that endpoint"
    return (
        f"{var} is set, but a key from {var} is sent only to {where}, not to {target}; to send a key "
        f"there, set model.api_key, or model.api_key_env: {var} to send this one"
    )
