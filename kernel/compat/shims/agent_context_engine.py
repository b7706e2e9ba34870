"""``agent.context_engine`` for plugins written for Hermes Agent: the kernel's ``ContextEngine`` and
its memory-context helper."""

from ...providers.context_engine import MEMORY_CONTEXT_MAX_CHARS, ContextEngine, sanitize_memory_context

__all__ = ["MEMORY_CONTEXT_MAX_CHARS", "ContextEngine", "sanitize_memory_context"]
