"""What every command group of the CLI shares: loading the kernel the way a command does."""

from __future__ import annotations

import sys

from ..kernel import Kernel


def loaded_kernel(home: str | None = None) -> Kernel:
    """A kernel loaded for a command: its plugin list saved, its config problems printed as warnings."""
    kernel = Kernel(home=home)
    kernel.load()
    kernel.save_plugin_state()
    for problem in kernel.problems:
        print(f"warning: {problem}", file=sys.stderr)
    return kernel
