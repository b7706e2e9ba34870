"""The bundled ``sqlite`` memory provider (plugin ``memory/sqlite``).

Offers :class:`SqliteMemoryProvider`; ``memory.provider: sqlite`` in config.yaml makes it
the active one, and only then does the kernel register its ``memory_search`` and
``memory_store`` tools and the ``hermes-kernel sqlite ...`` commands of ``cli.py``.
Nothing touches the disk until the provider is first used.
"""

from __future__ import annotations

from typing import Any

from .provider import SqliteMemoryProvider

__all__ = ["SqliteMemoryProvider", "register"]


def register(ctx: Any) -> None:
    ctx.register_memory_provider(SqliteMemoryProvider(home=ctx.home, logger=ctx.logger))
