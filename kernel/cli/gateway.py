"""``hermes-kernel gateway status|run``: the messaging platforms plugins registered, and the gateway."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from typing import Any

from ..core.kernel import Kernel
from . import output
from .common import load

#: How often ``gateway run`` looks whether the platforms have connected (for its progress line).
CONNECT_POLL = 0.2


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
        load(kernel)
        rows = [row.to_dict() for row in kernel.gateway.status()]
    if args.json:
        output.emit_json(rows)
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
        load(kernel)
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

        with contextlib.suppress(KeyboardInterrupt), output.status(_connecting(enabled, [])) as progress:
            asyncio.run(_serve(gateway, args.platform, enabled, progress))
    print("hermes-kernel gateway: stopped", flush=True)
    return 0


def _connecting(waiting: list[str], problems: list[str]) -> str:
    text = f"Connecting {', '.join(waiting)}"
    return text + (f" ({'; '.join(problems)})" if problems else "")


async def _serve(gateway: Any, platforms: list[str] | None, enabled: list[str], progress: Any) -> None:
    import asyncio

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, gateway.stop)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - not on this platform
            signal.signal(sig, lambda *_: gateway.stop())
    watch = asyncio.create_task(_watch_connects(gateway, enabled, progress))
    try:
        await gateway.run(platforms)
    finally:
        watch.cancel()


async def _watch_connects(gateway: Any, enabled: list[str], progress: Any) -> None:
    """Keep the progress line saying which platforms are still connecting (and why they retry);
    print one line when all are connected."""
    import asyncio

    while True:
        rows = {row.name: row for row in gateway.status() if row.name in enabled}
        waiting = [name for name in enabled if name in rows and not rows[name].connected]
        if not waiting:
            progress.stop()
            print(f"hermes-kernel gateway: connected {', '.join(enabled)}", flush=True)
            return
        problems = [f"{name}: {rows[name].error}" for name in waiting if rows[name].error]
        progress.update(_connecting(waiting, problems))
        await asyncio.sleep(CONNECT_POLL)
