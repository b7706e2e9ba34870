"""speech (being built for issue 7)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..kernel import Kernel


def load(kernel: Kernel) -> None:
    """Nothing is loaded yet."""
