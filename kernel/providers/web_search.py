"""``WebSearchProvider``: a web search and/or page extraction backend (the ``web_search`` slot).

The contract follows the one plugins written for Hermes Agent implement:

* ``search(query, limit=5)`` returns a dict, on success
  ``{"success": True, "data": {"web": [{"title", "url", "description", "position"}, ...]}}``
  and on failure ``{"success": False, "error": "..."}`` (see
  :func:`search_success` and :func:`search_error`);
* ``extract(urls, **kwargs)`` returns one dict per URL, in order:
  ``{"url", "title", "content", ...}`` or ``{"url", "error"}``;
* ``supports_search()`` / ``supports_extract()`` say which of the two it does.

Neither call should raise: a backend reports its failures in the result.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

from .backend import Backend

DEFAULT_LIMIT = 5


class WebSearchProvider(Backend, ABC):
    """Subclass and implement ``name`` and ``search`` and/or ``extract``."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The backend's name, as config.yaml selects it."""

    def supports_search(self) -> bool:
        return True

    def supports_extract(self) -> bool:
        return False

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
        """Search the web for ``query``; at most ``limit`` results (see the module docstring)."""
        return search_error(f"web search backend '{self.name}' does not search")

    def extract(self, urls: list[str], **kwargs: Any) -> list[dict[str, Any]]:
        """The readable content of each URL, in order (see the module docstring)."""
        return [{"url": url, "error": f"web search backend '{self.name}' does not extract"} for url in urls]


def search_success(results: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A successful search result: each hit's ``title``, ``url`` and ``description``, numbered from 1."""
    web = [
        {
            "title": str(hit.get("title") or ""),
            "url": str(hit.get("url") or ""),
            "description": str(hit.get("description") or hit.get("snippet") or ""),
            "position": position,
        }
        for position, hit in enumerate(results, start=1)
    ]
    return {"success": True, "data": {"web": web}}


def search_error(error: str) -> dict[str, Any]:
    """A failed search."""
    return {"success": False, "error": error}
