"""``agent.context_engine`` for plugins written for Hermes Agent: the kernel's ``ContextEngine``."""

from ...providers.context_engine import ContextEngine

__all__ = ["ContextEngine"]
