"""MCP servers declared in ``config.yaml`` (``mcp_servers:``), with the official ``mcp`` SDK.

Each ``mcp_servers.<name>`` entry is a stdio server (``command``, ``args``,
``env``) or a Streamable HTTP one (``url``, ``headers``), and becomes the
surface record ``mcp:<name>``.  Its tools are registered as kernel tools
``mcp__<server>__<tool>`` in the toolset ``mcp-<server>``, so that every call
goes through :meth:`ToolRegistry.dispatch` (hooks, decisions) like any tool.

How it runs: one daemon thread owns an asyncio loop; each server has one
long-lived task there that enters the SDK's client context managers, lists
the tools, reports itself ready, and then waits until it is stopped or its
transport closes (anyio wants a context entered and left by the same task).
Tool handlers, called on any thread, submit ``session.call_tool`` to that
loop.  Servers connect in parallel; :func:`load` waits for each at most its
own ``connect_timeout``.  A server that fails, or dies later, is shown as
failed on its record and reconnected in the background with exponential
backoff (tenacity); its tools stay registered and answer a clear error while
it is down, and are (re)registered from the tool list of each new connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...base.config import section
from ...core.services import serviceimpl
from .. import SurfaceError, load_surface
from .config import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_TIMEOUT,
    INSTALL_HINT,
    ConfigProblem,
    ServerConfig,
    _where,
    interpolate,
    parse_server,
)
from .results import kernel_tool_name, result_json, select_tools, tool_schema
from .server import _Manager, _Sdk, _Server

if TYPE_CHECKING:
    from ...core.context import PluginContext
    from ...core.kernel import Kernel, _Record


__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "ConfigProblem",
    "ServerConfig",
    "interpolate",
    "kernel_tool_name",
    "load",
    "parse_server",
    "result_json",
    "select_tools",
    "tool_schema",
]


# --------------------------------------------------------------------------- loading


def load(kernel: Kernel) -> None:
    """Connect to the servers of ``mcp_servers`` and register their tools (one record each)."""
    raw = section(kernel.config, "mcp_servers")
    if raw is None:
        return
    if not isinstance(raw, dict):
        kernel.host.config_problem(
            f"config.yaml: 'mcp_servers' must be a mapping of server names to settings, "
            f"not {type(raw).__name__}; no MCP server loaded"
        )
        return
    active: list[ServerConfig] = []
    for key, entry in raw.items():
        name = str(key)
        try:
            if isinstance(key, bool):  # `off:` or `yes:` unquoted
                raise ConfigProblem(
                    f"config.yaml: 'mcp_servers' has a server named {key!r}, which is how YAML reads an "
                    "unquoted off/on/yes/no/true/false: quote the name"
                )
            cfg = parse_server(name, entry, kernel.environ)
        except ConfigProblem as exc:
            kernel.host.config_problem(f"{exc}; the server is skipped")
            _failed_record(kernel, name, f"{exc}; the server is skipped")
            continue
        for warning in cfg.warnings:
            kernel.log.warning("mcp_config", server=name, detail=warning)
        if cfg.enabled:
            active.append(cfg)
            continue
        record = _failed_record(kernel, name, "", cfg)
        if record is not None:
            record.error = f"disabled via config.yaml (mcp_servers.{name}.enabled: false); not connected"
    if not active:
        return
    try:
        sdk = _Sdk()
    except ImportError as exc:
        problem = (
            f"config.yaml: 'mcp_servers' needs the MCP Python SDK, which cannot be imported ({exc}): "
            f"install it with {INSTALL_HINT}"
        )
        kernel.host.config_problem(problem)
        for cfg in active:
            _failed_record(kernel, cfg.name, problem, cfg)
        return
    manager = _Manager(kernel, sdk)
    for cfg in active:
        server = _Server(manager, cfg)
        try:
            server.record = kernel.host.add_surface(
                f"mcp:{cfg.name}",
                "mcp-server",
                server.setup,
                description=f"{cfg.label}; connecting",
                close=manager.close,
            )
        except Exception as exc:  # the name is taken
            kernel.host.config_problem(f"{_where(cfg.name)}: skipped: {exc}")
            continue
        server.record.warnings.extend(cfg.warnings)
        manager.servers.append(server)
    manager.start()
    manager.wait_first_attempts()


def _failed_record(kernel: Kernel, name: str, error: str, cfg: ServerConfig | None = None) -> _Record | None:
    """A record that connects nothing: a bad entry (``error``) or a disabled server (``error`` empty)."""

    def setup(_ctx: PluginContext) -> None:
        if error:
            raise SurfaceError(error)

    description = cfg.label if cfg is not None else ""
    try:
        record = kernel.host.add_surface(f"mcp:{name}", "mcp-server", setup, description=description)
    except Exception as exc:
        kernel.host.config_problem(f"{_where(name)}: skipped: {exc}")
        return None
    if cfg is not None:
        record.warnings.extend(cfg.warnings)
    record.enabled = False
    return record


# -- the mcp service (see kernel.core.services) ----------------------------------


@serviceimpl(trylast=True)
def service_load_finished(kernel: Kernel) -> None:
    load_surface(kernel, "mcp", load)
