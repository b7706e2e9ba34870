"""The ingress of a scaled-out gateway (``gateway run --role ingress``, or ``all``): it holds the
platform connections, queues every incoming message in the broker in the order it arrived (kept in a
spool file while the broker is unreachable), and sends the replies workers hand back, once each.

See :mod:`kernel.gateway.broker` for what is guaranteed, and docs/scale-out.md.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.files import atomic_write
from ..base.safe_yaml import json_text_size
from ..core.hooks import describe
from .broker import (
    BUSY_REPLY,
    MAX_CHAT_ID,
    MAX_MESSAGE_BYTES,
    TOO_LONG_REPLY,
    Broker,
    BrokerUnavailable,
    Inbound,
    Member,
    Outbound,
    member_id,
)
from .membership import BEATS_PER_CLAIM, beat, leave

if TYPE_CHECKING:
    from ..core.kernel import Kernel
    from .base import BasePlatformAdapter, MessageEvent
    from .platforms import Platforms
    from .registry import PlatformSpec

#: How long the ingress waits before it looks again whether a dropped adapter is back to send a reply.
RESEND_WAIT = 0.5


class Ingress:
    """Queues the platforms' messages in the broker and sends the workers' replies."""

    def __init__(
        self, kernel: Kernel, platforms: Platforms, broker: Broker, *, role: str, stop: Callable[[], None]
    ) -> None:
        self.kernel = kernel
        self.platforms = platforms
        self.broker = broker
        #: ``ingress`` (a process of its own) or ``all`` (beside a worker, which beats for both).
        self.role = role
        self._stop_gateway = stop
        self.member = Member(id=member_id("ingress"), role="ingress")
        #: Messages accepted from the adapters and not yet in the broker (while it is unreachable).
        self.backlog: collections.deque[Inbound] = collections.deque()
        self.spool = self.kernel.home / "gateway" / f"spool-{broker.settings.prefix}.jsonl"
        #: How many of the backlog's first messages were read from the spool: the file stays until
        #: the broker has acknowledged the last of them (a kill before that loses none).
        self._spooled = 0
        self.stopping = False
        self.delivered = 0
        self._wake = asyncio.Event()
        self.stopped = asyncio.Event()  # set with stopping: wakes the heartbeat
        self._draining = False
        self._quiet: dict[str, asyncio.Event] = {}
        #: The platforms this ingress holds (one ingress per platform: the others are its standbys).
        self.held: set[str] = set()
        self._holding: dict[str, asyncio.Event] = {}

    @property
    def lease(self) -> float:
        """How long a hold on a platform lasts unrenewed: ``claim_after`` (at least a second)."""
        return max(self.broker.settings.claim_after, 1.0)

    async def hold(self, platform: str) -> bool:
        """Wait until this ingress holds ``platform`` — while another does, this one is its standby;
        ``False`` when the gateway stops first."""
        waiting_for = None
        try:
            while not self.stopping:
                holder = await self.broker.hold_platform(platform, self.member.id, self.lease)
                if holder is None:
                    self.held.add(platform)
                    self._holding.setdefault(platform, asyncio.Event()).set()
                    if waiting_for is not None:
                        self.platforms.errors.pop(platform, None)
                        self.kernel.log.info("gateway_platform_taken", platform=platform, after=waiting_for)
                    return True
                if holder != waiting_for:
                    waiting_for = holder
                    self.platforms.errors[platform] = (
                        f"standby: ingress {holder} holds it; connecting when it stops"
                    )
                    self.kernel.log.warning("gateway_platform_standby", platform=platform, holder=holder)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopped.wait(), self.lease / BEATS_PER_CLAIM)
        except BrokerUnavailable:
            pass
        return False

    async def _keep_platforms(self) -> None:
        """Renew the holds; one lost (this ingress was cut off longer than the lease, and a standby
        took over) stops this gateway, so that the platform never has two connections."""
        while not self.stopping:
            for platform in sorted(self.held):
                try:
                    holder = await self.broker.hold_platform(platform, self.member.id, self.lease)
                except BrokerUnavailable:
                    return
                if holder is not None:
                    self.held.discard(platform)
                    self.kernel.log.error(
                        "gateway_platform_lost",
                        platform=platform,
                        holder=holder,
                        detail="another ingress holds it now: this gateway stops (a supervisor that "
                        "restarts it makes it that ingress's standby)",
                    )
                    self._stop_gateway()
                    return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopped.wait(), self.lease / BEATS_PER_CLAIM)

    async def let_go(self) -> None:
        """Give the held platforms up once their adapters are disconnected: a standby takes them at once."""
        for platform in sorted(self.held):
            with contextlib.suppress(BrokerUnavailable):
                await asyncio.wait_for(self.broker.drop_platform(platform, self.member.id), 5)
        self.held.clear()

    def start(self, platforms: list[str]) -> list[asyncio.Task[Any]]:
        self._read_spool()
        tasks = [
            asyncio.create_task(self._submitter(), name="gateway-ingress"),
            asyncio.create_task(self._keep_platforms(), name="gateway-ingress-platforms"),
        ]
        for platform in platforms:
            self._quiet[platform] = asyncio.Event()
            tasks.append(asyncio.create_task(self._replies(platform), name=f"gateway-replies-{platform}"))
        if self.role == "ingress":
            tasks.append(asyncio.create_task(beat(self, lambda: []), name="gateway-ingress-heartbeat"))
        return tasks

    # -- incoming --------------------------------------------------------------------------

    async def queue(
        self, spec: PlatformSpec, adapter: BasePlatformAdapter, event: MessageEvent, text: str
    ) -> None:
        """Accept one message for the broker (or answer at once that it is too long, or the inbox full)."""
        message = _inbound(spec.name, event, text)
        refused = None
        if len(message.chat_id) > MAX_CHAT_ID or json_text_size(message.dumps()) > MAX_MESSAGE_BYTES:
            refused = "too_long"
        elif len(self.backlog) >= self.broker.settings.max_pending:
            refused = "busy"
        if refused is not None:
            await self._refuse(adapter, message, refused)
            return
        self.backlog.append(message)
        self._wake.set()

    async def _refuse(self, adapter: BasePlatformAdapter | None, message: Inbound, why: str) -> None:
        self.kernel.log.warning(
            "gateway_message_refused",
            platform=message.platform,
            chat=message.chat_id[:MAX_CHAT_ID],
            reason=why,
        )
        adapter = adapter or self.platforms.adapters.get(message.platform)
        if adapter is not None:
            text = BUSY_REPLY if why == "busy" else TOO_LONG_REPLY
            await self.platforms.send(adapter, message.chat_id, text, reply_to=message.message_id)

    async def _submitter(self) -> None:
        """Put the backlog into the broker, oldest first (so each chat keeps its order)."""
        while not self.stopping:
            if not self.backlog:
                self._wake.clear()
                await self._wake.wait()
                continue
            message = self.backlog[0]
            try:
                # A spooled message queued again is the same delivery: no reply sent again for it.
                queued = await self.broker.submit(message, resend=not self._spooled)
            except BrokerUnavailable:
                return  # a stop while the broker is unreachable: the backlog goes to the spool
            self.backlog.popleft()
            if self._spooled:
                self._spooled -= 1
                if not self._spooled:  # the broker has every message the spool held
                    self._drop_spool()
            if not queued:
                await self._refuse(None, message, "busy")

    # -- outgoing --------------------------------------------------------------------------

    async def _replies(self, platform: str) -> None:
        # Only the ingress holding the platform reads its replies (a standby's would wait unsent).
        waits = [
            asyncio.create_task(self._holding.setdefault(platform, asyncio.Event()).wait()),
            asyncio.create_task(self.stopped.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
        while not self.stopping:
            try:
                batch = await self.broker.replies(platform, block=0.2 if self._draining else 1.0)
            except BrokerUnavailable:
                return
            if not batch and self._draining:
                self._quiet[platform].set()
            for entry, reply in batch:
                if not await self._deliver(platform, entry, reply):
                    return

    async def _deliver(self, platform: str, entry: str, reply: Outbound | None) -> bool:
        """Send one reply (a message's only one: the broker keeps no second); ``False`` when stopping
        before the platform is connected again."""
        broker = self.broker
        try:
            if reply is not None:
                while True:
                    adapter = self.platforms.adapters.get(platform)
                    while adapter is None or not adapter.is_connected:
                        if self.stopping:
                            return False  # it stays in the broker: sent after the restart
                        await asyncio.sleep(RESEND_WAIT)
                        adapter = self.platforms.adapters.get(platform)
                    error = await self.platforms.send_reply(
                        adapter, reply.chat_id, reply.text, reply_to=reply.reply_to
                    )
                    if error is None or adapter.is_connected:
                        break
                    # The connection went while sending: the reply waits for the next one.
                if error is not None:
                    self.kernel.log.warning(
                        "gateway_reply_undeliverable",
                        platform=platform,
                        chat=reply.chat_id[:200],
                        message=str(reply.reply_to)[:200],
                        error=error[:500],
                        kept_in=broker.k_undelivered(platform)
                        if hasattr(broker, "k_undelivered")
                        else "the broker",
                    )
                    await broker.set_aside_reply(platform, entry, reply, error)
                    return True
                self.delivered += 1
            await broker.sent(platform, entry)
        except BrokerUnavailable:
            return False
        return True

    # -- stopping --------------------------------------------------------------------------

    async def drain(self, timeout: float) -> None:
        """Queue what is left and send the replies there are, for up to ``timeout`` seconds."""
        self._draining = True
        give_up = time.monotonic() + timeout
        while self.backlog and time.monotonic() < give_up and self.broker.connected:
            await asyncio.sleep(0.05)
        held = [event for platform, event in self._quiet.items() if platform in self.held]
        for event in held:
            event.clear()
        quiet = [asyncio.create_task(event.wait()) for event in held]
        if quiet and self.broker.connected:
            await asyncio.wait(quiet, timeout=max(give_up - time.monotonic(), 0.1))
            for task in quiet:
                task.cancel()
        self.stopping = True
        self.stopped.set()
        self._wake.set()
        if self.role == "ingress" and self.broker.connected:
            await leave(self.broker, self.member, self.kernel)

    def write_spool(self) -> None:
        """Keep the messages the broker never got in the spool file, queued first at the next start
        (the file is replaced whole: the spooled messages still in the backlog are written again)."""
        if not self.backlog:
            return
        _replace_lines(self.spool, [message.dumps() for message in self.backlog])
        self.kernel.log.warning(
            "gateway_messages_spooled",
            count=len(self.backlog),
            spool=str(self.spool),
            fix="they are queued when the gateway starts again with the broker reachable",
        )
        self.backlog.clear()
        self._spooled = 0

    def _drop_spool(self) -> None:
        try:
            self.spool.unlink(missing_ok=True)
        except OSError as exc:  # queued again at the next start: the broker drops what it has seen
            self.kernel.log.warning("gateway_spool_not_removed", spool=str(self.spool), error=describe(exc))

    def _read_spool(self) -> None:
        """Put the spool's messages first in the backlog; the file is removed once the broker has
        acknowledged them all (see :meth:`_submitter`), its unreadable lines set aside at once."""
        path = self.spool
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            return
        except OSError as exc:
            self.kernel.log.warning("gateway_spool_unreadable", spool=str(path), error=describe(exc))
            return
        bad = []
        for line in lines:
            try:
                self.backlog.append(Inbound.loads(line))
            except (ValueError, TypeError, RecursionError):
                bad.append(line)
        if bad:
            kept = path.with_name(path.name + f".unreadable-{int(time.time())}")
            kept.write_text("\n".join(bad) + "\n", encoding="utf-8")
            self.kernel.log.warning("gateway_spool_lines_unreadable", count=len(bad), kept_in=str(kept))
            if self.backlog:
                _replace_lines(path, [message.dumps() for message in self.backlog])
        self._spooled = len(self.backlog)
        if not self.backlog:
            self._drop_spool()
        else:
            self.kernel.log.info("gateway_spool_requeued", count=len(self.backlog), spool=str(path))
            self._wake.set()


def _inbound(platform: str, event: MessageEvent, text: str) -> Inbound:
    """The broker's copy of ``event`` (with ``text``, maybe rewritten by ``pre_gateway_dispatch``)."""
    source = event.source

    def text_of(value: Any) -> str | None:
        return None if value is None else str(value)

    stamp = event.timestamp
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not math.isfinite(stamp):
        stamp = time.time()
    return Inbound(
        platform=platform,
        chat_id=str(event.chat_id),
        text=str(text),
        message_id=text_of(event.message_id),
        user_id=text_of(source.user_id) if source is not None else None,
        user_name=text_of(source.user_name) if source is not None else None,
        chat_type=str(source.chat_type) if source is not None else "dm",
        chat_name=text_of(source.chat_name) if source is not None else None,
        thread_id=text_of(source.thread_id) if source is not None else None,
        reply_to_message_id=text_of(event.reply_to_message_id),
        message_type=str(event.message_type),
        timestamp=float(stamp),
    )


def _replace_lines(path: Path, lines: list[str]) -> None:
    """Write ``lines`` to ``path`` in one step: a kill leaves the old file or the new one, whole."""
    atomic_write(path, "".join(line + "\n" for line in lines))


def spool_lines(path: Path) -> list[dict[str, Any]]:
    """The messages waiting in a spool file (for ``gateway status``)."""
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError):
        return []
