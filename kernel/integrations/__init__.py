"""The kernel inside other agents: a framework-neutral host session, and adapters built on it.

:class:`HostSession` is one conversation whose model loop someone else runs
(see :mod:`kernel.host`); :func:`host_model` turns a host's own model into
the one ``ctx.llm`` answers with.  The adapters are modules of their own, each
importing its framework only when imported:

- :mod:`kernel.integrations.pydantic_ai` — ``HermesCapability``, ``hermes_toolset``
- :mod:`kernel.integrations.openai_agents` — ``HermesAgentsSession``
- :mod:`kernel.integrations.langgraph` — ``HermesGraphSession``
- :mod:`kernel.integrations.mcp_server` — ``serve_stdio`` (``hermes-kernel mcp serve``)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..host import HostSession, HostSessionError, HostTurn

if TYPE_CHECKING:
    from .. import Kernel

__all__ = ["HostSession", "HostSessionError", "HostTurn", "host_model"]


def host_model(kernel: Kernel, call: Callable[[list[dict[str, Any]]], Any], *, model: str = "host") -> Any:
    """Make a plain ``call(messages) -> str`` (sync or async) the kernel's active model; returns it.

    ``messages`` are OpenAI chat messages; the answer is the reply text.  From
    then on ``ctx.llm`` (and the reference loop) answer with it, through the
    kernel's middleware and api hooks (see
    :meth:`~kernel.providers.manager.ProviderManager.use_model`).
    """
    from ..providers.host_model import TextTransport

    return kernel.providers.use_model(TextTransport(call, model=model))
