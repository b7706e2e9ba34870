"""``agent.web_search_provider`` for plugins written for Hermes Agent: the kernel's ``WebSearchProvider``
and ``get_provider_env``, the credential lookup web backends use."""

from __future__ import annotations

from ...providers.web_search import WebSearchProvider

__all__ = ["WebSearchProvider", "get_provider_env"]


def get_provider_env(name: str) -> str:
    """The variable ``name`` as the calling plugin's kernel sees it (its environment, else the home's
    ``.env``), stripped; ``""`` when unset."""
    from .hermes_cli_config import get_env_value

    return (get_env_value(name) or "").strip()
