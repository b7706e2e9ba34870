"""``hermes-kernel plugins install|update|remove``: where plugins come from, and where they go.

Each install is recorded in ``<home>/plugins/.installs.json`` (see :func:`read_records`): the source of
a directory plugin (a git URL with its ref and commit, or a local directory) with a hash of every file
it installed, and for a pip package its requirement, pip options, environment and whether the package
was already there before.  ``plugins update`` fetches from that source again; ``plugins remove``
uninstalls a package only when this record says ``plugins install`` put it there.

The modules, from the bottom up: ``records`` (the install records), ``sources`` (what a SOURCE is),
``git``, ``pip`` and ``dists`` (cloning, running pip, the installed distributions), ``checks`` (what
a plugin folder must be), ``env`` (asking for variables), ``placing`` (copying a folder into place),
``outcome`` (enabling, and what the next start does), ``targets`` (what a name stands for), one
module per command, and ``parser`` (their arguments and help).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .parser import INSTALL_DESCRIPTION, REMOVE_DESCRIPTION, UPDATE_DESCRIPTION, add_commands

# Imported on first use, so that a command other than these three does not load them.
_LAZY = {
    "KERNEL_DISTRIBUTION": "records",
    "RECORDS_FILE": "records",
    "classify_source": "sources",
    "normalize_dist": "records",
    "offer_enable": "outcome",
    "plugins_install": "install_command",
    "plugins_remove": "remove_command",
    "plugins_update": "update_command",
    "read_records": "records",
    "records_path": "records",
    "report_outcome": "outcome",
    "tree_hashes": "placing",
}

if TYPE_CHECKING:
    from .install_command import plugins_install
    from .outcome import offer_enable, report_outcome
    from .placing import tree_hashes
    from .records import KERNEL_DISTRIBUTION, RECORDS_FILE, normalize_dist, read_records, records_path
    from .remove_command import plugins_remove
    from .sources import classify_source
    from .update_command import plugins_update


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "INSTALL_DESCRIPTION",
    "KERNEL_DISTRIBUTION",
    "RECORDS_FILE",
    "REMOVE_DESCRIPTION",
    "UPDATE_DESCRIPTION",
    "add_commands",
    "classify_source",
    "normalize_dist",
    "offer_enable",
    "plugins_install",
    "plugins_remove",
    "plugins_update",
    "read_records",
    "records_path",
    "report_outcome",
    "tree_hashes",
]
