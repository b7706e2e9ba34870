"""What the ingress and the worker share: telling the broker they are alive, and leaving it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from ..core.hooks import describe
from .broker import Broker, BrokerUnavailable, Lease, Member

#: The most heartbeats a worker misses before another takes its chats: ``claim_after`` / this.
BEATS_PER_CLAIM = 3
HEARTBEAT_MAX = 5.0


async def beat(owner: Any, leases: Callable[[], list[Lease]]) -> None:
    """Tell the broker ``owner`` (an ingress or a worker) is alive, and which chats it holds, every
    ``claim_after / 3`` seconds."""
    broker = owner.broker
    interval = min(broker.settings.claim_after / BEATS_PER_CLAIM, HEARTBEAT_MAX)
    while not owner.stopping:
        try:
            lost = await broker.heartbeat(owner.member, leases())
        except BrokerUnavailable:
            return
        if lost:
            owner.kernel.log.warning("gateway_chats_lost", worker=owner.member.id, tokens=sorted(lost))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(owner.stopped.wait(), interval)


async def leave(broker: Broker, member: Member, kernel: Any) -> None:
    try:
        await asyncio.wait_for(broker.leave(member), 5)
    except (BrokerUnavailable, TimeoutError) as exc:
        kernel.log.info("gateway_leave_failed", member=member.id, error=describe(exc))
