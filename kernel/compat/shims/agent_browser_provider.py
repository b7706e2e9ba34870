"""``agent.browser_provider`` for plugins written for Hermes Agent: the kernel's ``BrowserProvider``
(what ``ctx.register_browser_provider`` takes; see :mod:`kernel.registrations`)."""

from ...registrations import BrowserProvider

__all__ = ["BrowserProvider"]
