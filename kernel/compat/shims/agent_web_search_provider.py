"""``agent.web_search_provider`` for plugins written for Hermes Agent: the kernel's ``WebSearchProvider``."""

from ...providers.web_search import WebSearchProvider

__all__ = ["WebSearchProvider"]
