"""``hermes-kernel mcp serve``: the kernel's tools, with its hooks around them, as an MCP server on stdio."""

from __future__ import annotations

import argparse
import signal
from typing import Any

from .common import fail, loaded_kernel


def add_commands(commands: Any) -> None:
    group = commands.add_parser("mcp", help="the kernel as an MCP server")
    actions = group.add_subparsers(title="mcp commands", metavar="ACTION")
    serve = actions.add_parser(
        "serve",
        help="serve the kernel's tools over MCP on stdin/stdout until the client closes the stream",
        description=(
            "Serve the kernel's tools over MCP on stdin/stdout: tools/list gives the tools, tools/call "
            "runs one through the kernel's hooks. One connection is one session (platform 'mcp'). "
            "stdout carries only the protocol: what plugins print goes to stderr."
        ),
    )
    serve.add_argument("--session-id", metavar="ID", help="the session's id (default: a fresh one)")
    serve.set_defaults(handler=mcp_serve)
    group.set_defaults(handler=lambda _args: _usage(group))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def mcp_serve(args: argparse.Namespace) -> int:
    """Load the kernel of the home and serve it on stdio until stdin ends."""
    try:
        from ..integrations.mcp_server import reserved_stdio, serve_stdio
    except ImportError as exc:
        return fail(str(exc), 2)
    # SIGTERM (a client that gave up waiting) ends the session as Ctrl-C does, its hooks fired; by
    # raising KeyboardInterrupt itself, not through SIGINT, which the server may have been started
    # ignoring (nohup, some CI runners and editors).
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        # Before the plugins load: what they print at import and in register must not reach stdout.
        with reserved_stdio():
            kernel = loaded_kernel()
            try:
                serve_stdio(kernel, session_id=args.session_id)
            finally:
                kernel.shutdown()
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0
