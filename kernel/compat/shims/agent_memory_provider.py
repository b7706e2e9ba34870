"""``agent.memory_provider`` for plugins written for Hermes Agent: the kernel's ``MemoryProvider``."""

from ...providers.memory import MemoryProvider

__all__ = ["MemoryProvider"]
