"""``hermes-kernel gateway status|run``: the messaging platforms plugins registered, and the gateway."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from typing import Any

from ..core.kernel import Kernel


def add_commands(commands: Any) -> None:
    gateway = commands.add_parser(
        "gateway", help="messaging platforms: status, and the gateway that runs them"
    )
    actions = gateway.add_subparsers(title="gateway commands", metavar="ACTION")
    status = actions.add_parser("status", help="each registered platform: enabled or not, and why")
    status.add_argument("--json", action="store_true", help="print a JSON array")
    status.set_defaults(handler=gateway_status)
    run = actions.add_parser("run", help="connect every enabled platform and chat until Ctrl-C or SIGTERM")
    run.add_argument(
        "--platform", action="append", metavar="NAME", help="only this platform (repeat for more)"
    )
    run.set_defaults(handler=gateway_run)
    gateway.set_defaults(handler=gateway_status, json=False)


def gateway_status(args: argparse.Namespace) -> int:
    with Kernel() as kernel:
        kernel.load()
        rows = [row.to_dict() for row in kernel.gateway.status()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("No platform is registered (platform plugins live in plugins/platforms/<name>/).")
        return 0
    width = max(len(r["name"]) for r in rows)
    for row in rows:
        state = f"enabled ({row['source']})" if row["enabled"] else "not enabled"
        print(f"{row['name']:<{width}}  {state:<18} {row['label']} [{row['plugin']}]")
        if row["reason"]:
            print(f"{'':<{width}}  {row['reason']}")
    return 0


def gateway_run(args: argparse.Namespace) -> int:
    with Kernel() as kernel:
        kernel.load()
        gateway = kernel.gateway
        enabled = [
            r.name for r in gateway.status() if r.enabled and (not args.platform or r.name in args.platform)
        ]
        if not enabled:
            print(
                "hermes-kernel gateway: no platform is enabled (see: hermes-kernel gateway status)",
                file=sys.stderr,
            )
            return 1
        print(f"hermes-kernel gateway: starting {', '.join(enabled)}; Ctrl-C to stop", flush=True)
        import asyncio

        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve(gateway, args.platform))
    print("hermes-kernel gateway: stopped", flush=True)
    return 0


async def _serve(gateway: Any, platforms: list[str] | None) -> None:
    import asyncio

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, gateway.stop)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - not on this platform
            signal.signal(sig, lambda *_: gateway.stop())
    await gateway.run(platforms)
