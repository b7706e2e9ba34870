"""``hermes-kernel gateway status|run``: the messaging platforms plugins registered, and the gateway."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from typing import Any

from .. import Kernel
from . import output
from .common import load

#: How often ``gateway run`` looks whether the platforms have connected (for its progress line).
CONNECT_POLL = 0.2


def add_commands(commands: Any) -> None:
    gateway = commands.add_parser(
        "gateway", help="messaging platforms: status, and the gateway that runs them"
    )
    actions = gateway.add_subparsers(title="gateway commands", metavar="ACTION")
    status = actions.add_parser(
        "status", help="each registered platform: enabled or not, and why; the broker and its workers"
    )
    status.add_argument(
        "--json", action="store_true", help="print a JSON object (platforms, broker, sessions)"
    )
    status.add_argument("--broker", metavar="URL", help="the broker to ask (instead of gateway.broker.url)")
    status.set_defaults(handler=gateway_status)
    run = actions.add_parser("run", help="connect every enabled platform and chat until Ctrl-C or SIGTERM")
    run.add_argument(
        "--platform", action="append", metavar="NAME", help="only this platform (repeat for more)"
    )
    run.add_argument(
        "--role",
        choices=("all", "ingress", "worker"),
        default="all",
        help="with a broker: hold the platforms (ingress), answer their messages (worker), or both (all)",
    )
    run.add_argument(
        "--broker", metavar="URL", help="the broker (instead of gateway.broker.url), e.g. redis://host/0"
    )
    run.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help="turns a worker runs at once (gateway.worker.concurrency)",
    )
    run.set_defaults(handler=gateway_run)
    gateway.set_defaults(handler=gateway_status, json=False)


def gateway_status(args: argparse.Namespace) -> int:
    from ..gateway.registry import GatewayError

    with Kernel() as kernel:
        load(kernel)
        gateway = kernel.gateway
        rows = [row.to_dict() for row in gateway.status()]
        try:
            broker = _broker_status(kernel, args.broker)
            sessions = _sessions(gateway, args.broker)
        except GatewayError as exc:
            print(f"hermes-kernel gateway: {exc}", file=sys.stderr)
            return 2
    if args.json:
        output.emit_json({"platforms": rows, "broker": broker, "sessions": sessions})
        return 0
    if not rows:
        print("No platform is registered (platform plugins live in plugins/platforms/<name>/).")
    else:
        width = max(len(r["name"]) for r in rows)
        for row in rows:
            state = f"enabled ({row['source']})" if row["enabled"] else "not enabled"
            print(f"{row['name']:<{width}}  {state:<18} {row['label']} [{row['plugin']}]")
            if row["reason"]:
                print(f"{'':<{width}}  {row['reason']}")
    print(f"sessions: {sessions['store']} ({sessions.get('path') or sessions.get('url')})")
    if broker is not None:
        _print_broker(broker)
    return 0


def _broker_status(kernel: Kernel, url: str | None) -> dict[str, Any] | None:
    """The ``broker`` object of ``gateway status``: asked of the broker itself (``None`` without one)."""
    settings = kernel.gateway.broker_settings(url)
    if settings is None:
        return None
    import asyncio

    from ..gateway.broker import BrokerError
    from ..gateway.runner import open_broker

    try:
        broker = open_broker(settings, log=kernel.log)  # pruning is logged
    except BrokerError as exc:
        return {"url": settings.masked_url, "connected": False, "error": str(exc)}

    async def ask() -> dict[str, Any]:
        try:
            return await broker.status()
        finally:
            await broker.aclose()

    return asyncio.run(ask())


def _sessions(gateway: Any, url: str | None) -> dict[str, Any]:
    return gateway.store_description(gateway.broker_settings(url))


def _print_broker(broker: dict[str, Any]) -> None:
    import time

    state = "connected" if broker.get("connected") else f"not reachable ({broker.get('error')})"
    print(f"broker: {broker['url']} {state}")
    if not broker.get("connected"):
        return
    print(f"  queued {broker['queued']}, being answered {broker['pending']}")
    now = time.time()
    for kind in ("ingresses", "workers"):
        for member in broker.get(kind) or []:
            age = now - member["last_heartbeat"]
            alive = "" if member["alive"] else "  (silent: gone?)"
            if member.get("error"):
                alive += f"  failing: {member['error']}"
            print(
                f"  {_plain(member['role']):<8} {_plain(member['id'])}  {_plain(member['host'])} "
                f"pid {member['pid']}  heartbeat {age:.0f} s ago{alive}"
            )
    for entry in broker.get("unreadable") or []:
        where = _plain(entry["key"]) + (f" {_plain(entry['id'])}" if entry.get("id") is not None else "")
        print(f"  ?        {where}  <unreadable: {_plain(entry['unreadable'])}>")
    if broker.get("pruned"):
        print(
            f"  forgot {len(broker['pruned'])} member(s) silent longer than {broker['forget_after']:g} s: "
            + ", ".join(_plain(name) for name in broker["pruned"])
        )


def _plain(text: Any) -> str:
    """``text`` with its control characters escaped: a record in Redis does not drive the terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def gateway_run(args: argparse.Namespace) -> int:
    from ..gateway.registry import GatewayError

    with Kernel() as kernel:
        load(kernel)
        gateway = kernel.gateway
        role = args.role
        try:
            settings = gateway.broker_settings(args.broker)
        except GatewayError as exc:
            print(f"hermes-kernel gateway: {exc}", file=sys.stderr)
            return 2
        if settings is None and role != "all":
            print(
                f"hermes-kernel gateway: the {role} role needs a broker: set gateway.broker.url in "
                "config.yaml or pass --broker URL (see docs/scale-out.md)",
                file=sys.stderr,
            )
            return 2
        enabled = [
            r.name for r in gateway.status() if r.enabled and (not args.platform or r.name in args.platform)
        ]
        if role != "worker" and not enabled:
            print(
                "hermes-kernel gateway: no platform is enabled (see: hermes-kernel gateway status)",
                file=sys.stderr,
            )
            return 1
        if role == "worker":
            where = settings.masked_url if settings is not None else "no broker"
            print(f"hermes-kernel gateway: worker for {where}; Ctrl-C to stop", flush=True)
        else:
            via = f" through {settings.masked_url} ({role})" if settings is not None else ""
            print(f"hermes-kernel gateway: starting {', '.join(enabled)}{via}; Ctrl-C to stop", flush=True)
        import asyncio

        waiting = enabled if role != "worker" else []
        try:
            with contextlib.suppress(KeyboardInterrupt), output.status(_connecting(waiting, [])) as progress:
                asyncio.run(_serve(gateway, args, waiting, progress))
        except GatewayError as exc:
            print(f"hermes-kernel gateway: {exc}", file=sys.stderr)
            return 2
    print("hermes-kernel gateway: stopped", flush=True)
    return 0


def _connecting(waiting: list[str], problems: list[str]) -> str:
    text = f"Connecting {', '.join(waiting)}"
    return text + (f" ({'; '.join(problems)})" if problems else "")


async def _serve(gateway: Any, args: argparse.Namespace, enabled: list[str], progress: Any) -> None:
    import asyncio

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, gateway.stop)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - not on this platform
            signal.signal(sig, lambda *_: gateway.stop())
    watch = asyncio.create_task(_watch_connects(gateway, enabled, progress))
    try:
        await gateway.run(args.platform, role=args.role, broker_url=args.broker, concurrency=args.concurrency)
    finally:
        watch.cancel()


async def _watch_connects(gateway: Any, enabled: list[str], progress: Any) -> None:
    """Keep the progress line saying which platforms are still connecting (and why they retry);
    print one line when all are connected."""
    import asyncio

    while not enabled:  # a worker: no platform, the broker
        broker, worker = gateway.broker, gateway.worker
        if broker is not None and worker is not None and broker.connected:
            progress.stop()
            print(
                f"hermes-kernel gateway: worker {worker.member.id} connected to {broker.settings.masked_url}",
                flush=True,
            )
            return
        progress.update(
            f"Connecting to the broker ({broker.last_error})"
            if broker and broker.last_error
            else "Connecting to the broker"
        )
        await asyncio.sleep(CONNECT_POLL)
    standby: set[str] = set()
    while True:
        rows = {row.name: row for row in gateway.status() if row.name in enabled}
        waiting = [name for name in enabled if name in rows and not rows[name].connected]
        for name in waiting:
            error = rows[name].error or ""
            if error.startswith("standby:") and name not in standby:
                standby.add(name)
                print(f"hermes-kernel gateway: {name}: {error}", flush=True)
        if not waiting:
            progress.stop()
            print(f"hermes-kernel gateway: connected {', '.join(enabled)}", flush=True)
            return
        problems = [f"{name}: {rows[name].error}" for name in waiting if rows[name].error]
        progress.update(_connecting(waiting, problems))
        await asyncio.sleep(CONNECT_POLL)
