"""hermes-kernel: a small, fast, embeddable plugin kernel for AI agents.

Runs plugins written for Hermes Agent unchanged and ordinary pluggy
extensions alike::

    from kernel import Kernel, hookimpl

    k = Kernel()
    k.load()
    print(k.tools.dispatch("calculate", {"expression": "2**16"}))
"""

from .context import PluginContext
from .decisions import ApprovalRequest, terminal_approver
from .hooks import Callback
from .kernel import Kernel, PluginError, PluginInfo, __version__, merge_context
from .manifest import EnvVar, Manifest, ManifestError
from .markers import hookimpl, hookspec
from .plugin_manager import KernelPluginManager, PluginHandle
from .slots import Provider, SlotError
from .tools import Tool, ToolRegistrationError

__all__ = [
    "ApprovalRequest",
    "Callback",
    "EnvVar",
    "Kernel",
    "KernelPluginManager",
    "Manifest",
    "ManifestError",
    "PluginContext",
    "PluginError",
    "PluginHandle",
    "PluginInfo",
    "Provider",
    "SlotError",
    "Tool",
    "ToolRegistrationError",
    "__version__",
    "hookimpl",
    "hookspec",
    "merge_context",
    "terminal_approver",
]
