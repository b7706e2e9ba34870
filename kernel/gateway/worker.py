"""The two halves of a scaled-out gateway: the :class:`Ingress` and the :class:`Worker`.

The ingress runs where the platform connections are (``gateway run --role ingress``, or ``all``): it
queues every incoming message in the broker, in the order it arrived, and sends the replies workers
hand back through the platform's adapter — once each.  A worker (``--role worker``, or ``all``)
takes chats from the broker, answers their messages one at a time with the kernel's agent loop and
its plugins, continuing each conversation from the session store, and hands the replies back.

See :mod:`kernel.gateway.broker` for what is guaranteed, and docs/scale-out.md.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.hooks import describe
from ..core.safe_yaml import json_text_size
from ..core.settings import atomic_write
from .broker import (
    BUSY_REPLY,
    FAILED_REPLY,
    GAVE_UP_REPLY,
    MAX_ATTEMPTS,
    MAX_CHAT_ID,
    MAX_MESSAGE_BYTES,
    STALE,
    TOO_LONG_REPLY,
    Broker,
    BrokerUnavailable,
    Inbound,
    Lease,
    Member,
    Outbound,
    fit_reply,
    member_id,
)
from .sessions import NOT_READ, SessionState, SessionStore, SessionStoreError

if TYPE_CHECKING:
    from .base import BasePlatformAdapter, MessageEvent
    from .registry import PlatformSpec
    from .runner import Gateway

#: The most heartbeats a worker misses before another takes its chats: ``claim_after`` / this.
BEATS_PER_CLAIM = 3
HEARTBEAT_MAX = 5.0
#: How long the ingress waits before it looks again whether a dropped adapter is back to send a reply.
RESEND_WAIT = 0.5
#: The longest a worker waits before it tries to take chats again after a failure (not "unreachable").
LOOP_BACKOFF_MAX = 5.0


class Ingress:
    """Queues the platforms' messages in the broker and sends the workers' replies."""

    def __init__(self, gateway: Gateway, broker: Broker) -> None:
        self.gateway = gateway
        self.broker = broker
        self.kernel = gateway._kernel
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
                        self.gateway.errors.pop(platform, None)
                        self.kernel.log.info("gateway_platform_taken", platform=platform, after=waiting_for)
                    return True
                if holder != waiting_for:
                    waiting_for = holder
                    self.gateway.errors[platform] = (
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
                    self.gateway.stop()
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
        if self.gateway.role == "ingress":
            tasks.append(asyncio.create_task(_beat(self, lambda: []), name="gateway-ingress-heartbeat"))
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
        adapter = adapter or self.gateway.adapters.get(message.platform)
        if adapter is not None:
            text = BUSY_REPLY if why == "busy" else TOO_LONG_REPLY
            await self.gateway.send(adapter, message.chat_id, text, reply_to=message.message_id)

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
                    adapter = self.gateway.adapters.get(platform)
                    while adapter is None or not adapter.is_connected:
                        if self.stopping:
                            return False  # it stays in the broker: sent after the restart
                        await asyncio.sleep(RESEND_WAIT)
                        adapter = self.gateway.adapters.get(platform)
                    error = await self.gateway.send_reply(
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
        if self.gateway.role == "ingress" and self.broker.connected:
            await _leave(self.broker, self.member, self.kernel)

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


class Worker:
    """Answers the broker's chats, ``concurrency`` at a time, each one message at a time."""

    def __init__(self, gateway: Gateway, broker: Broker, store: SessionStore, concurrency: int) -> None:
        self.gateway = gateway
        self.broker = broker
        self.store = store
        self.kernel = gateway._kernel
        self.concurrency = concurrency
        self.member = Member(id=member_id("worker"), role=gateway.role, concurrency=concurrency)
        self.serving: dict[str, tuple[Lease, asyncio.Task[None]]] = {}
        self.stopping = False
        self.answered = 0
        self.stopped = asyncio.Event()  # set with stopping: wakes the heartbeat
        self._freed = asyncio.Event()
        self._failures = 0

    async def run(self) -> None:
        beats = asyncio.create_task(_beat(self, self._leases), name="gateway-worker-heartbeat")
        try:
            # The model's client (its imports, a scripted model's file) is built now, not in a turn.
            await asyncio.to_thread(self._prepare_model)
            while not self.stopping:
                free = self.concurrency - len(self.serving)
                if free <= 0:
                    self._freed.clear()
                    await self._freed.wait()
                    continue
                try:
                    leases = await self.broker.take(self.member.id, free, block=1.0)
                except BrokerUnavailable:
                    return
                except Exception as exc:  # anything else must not end the loop while the heartbeat goes on
                    await self._loop_failed(exc)
                    continue
                if self.member.error is not None:
                    self.kernel.log.info("gateway_worker_loop_recovered", worker=self.member.id)
                    self.member.error, self._failures = None, 0
                for lease in leases:
                    if self.stopping:
                        await self._give_back(lease)
                        continue
                    task = asyncio.create_task(self._serve(lease), name=f"gateway-chat-{lease.chat_key}")
                    self.serving[lease.token] = (lease, task)
                    task.add_done_callback(lambda _t, token=lease.token: self._done(token))
        finally:
            beats.cancel()

    def _prepare_model(self) -> None:
        with contextlib.suppress(Exception):  # a turn reports it to the chat, with the fix
            self.kernel.providers.model()

    async def _loop_failed(self, exc: Exception) -> None:
        """Log a failure to take chats (the first of a run, and each new kind), report it in the member
        record, and wait before trying again: 0.1 s, doubling up to :data:`LOOP_BACKOFF_MAX`."""
        error = describe(exc)
        self._failures += 1
        if error != self.member.error:
            self.kernel.log.warning(
                "gateway_worker_loop_failed",
                worker=self.member.id,
                error=error,
                failures=self._failures,
                detail="this worker takes no chat until it works again; it keeps trying",
            )
        self.member.error = error
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                self.stopped.wait(), min(0.1 * 2 ** min(self._failures - 1, 10), LOOP_BACKOFF_MAX)
            )

    def _leases(self) -> list[Lease]:
        self.member.busy = len(self.serving)
        return [lease for lease, _task in self.serving.values()]

    def _done(self, token: str) -> None:
        self.serving.pop(token, None)
        self._freed.set()

    async def _serve(self, lease: Lease) -> None:
        """Answer the chat's messages until none is left (or the chat was taken over, or a stop)."""
        log = self.kernel.log
        first = True
        try:
            if lease.message is None:  # its messages were removed behind the gateway's back
                following = await self.broker.finish(self.member.id, lease, None)
                lease.message = following if isinstance(following, Inbound) else None
            while lease.message is not None:
                message = lease.message
                # The chat was taken just now: its conversation is read again (another worker may have
                # answered it since).  Its next messages follow this worker's own turns.
                reply, state = await self._answer(message, lease if first else None)
                first = False
                atomic = state is not None and getattr(self.store, "atomic_with_replies", False)
                following = await self.broker.finish(
                    self.member.id, lease, reply, (message.chat_key, state) if atomic else None
                )
                if following is STALE:
                    log.warning(
                        "gateway_chat_taken_over",
                        chat=lease.chat_key,
                        worker=self.member.id,
                        detail="another worker took the chat over (this one was silent longer than "
                        "claim_after); its reply was dropped and the other worker's counts",
                    )
                    session = self.gateway.sessions.pop((message.platform, message.chat_id), None)
                    if session is not None:
                        session.release()
                    return
                self.answered += 1
                if state is not None and not atomic:
                    await self._save(message, state)
                lease.message = following if isinstance(following, Inbound) else None
                if lease.message is not None and self.stopping:
                    await self._give_back(lease)
                    return
        except BrokerUnavailable:
            return  # a stop while the broker is unreachable: the message stays unacknowledged there
        except Exception as exc:  # the broker refused a step: the chat goes to another worker in time
            log.warning(
                "gateway_chat_failed", chat=lease.chat_key, worker=self.member.id, error=describe(exc)
            )

    async def _answer(self, message: Inbound, taken: Lease | None) -> tuple[Outbound | None, str | None]:
        """The reply to ``message`` and the chat's state after it (JSON), the turn run on this worker;
        ``taken``: the lease when the chat was just taken (its session is read again)."""
        gateway = self.gateway
        if message.message_type == "unreadable":
            return None, None  # unreadable or another chat's: logged by the broker when it was read
        if taken is not None and taken.attempts > MAX_ATTEMPTS:
            self.kernel.log.warning(
                "gateway_message_given_up",
                chat=message.chat_key,
                message=message.message_id or message.uid,
                attempts=taken.attempts - 1,
                detail="each worker that took it stopped before answering (its turn may kill the worker)",
            )
            text = GAVE_UP_REPLY.format(attempts=taken.attempts - 1)
            return self._reply(message, text), None
        try:
            session = await gateway.session_for(
                message.platform,
                message.chat_id,
                message.user_id,
                refresh=taken is not None,
                state=self._prefetched(taken),
            )
            text = await gateway.respond(message.platform, session, message.text, message.user_id)
        except BrokerUnavailable:
            raise
        except Exception as exc:  # a bug must not leave the chat stuck on this message
            self.kernel.log.warning("gateway_worker_failed", chat=message.chat_key, error=describe(exc))
            text, session = FAILED_REPLY.format(error=type(exc).__name__), None
        state = None
        if session is not None:
            try:
                state = gateway.session_state(session).dumps()
            except SessionStoreError as exc:
                self.kernel.log.warning("gateway_session_not_saved", chat=message.chat_key, error=str(exc))
        return self._reply(message, text), state

    def _reply(self, message: Inbound, text: str) -> Outbound | None:
        """The reply record of ``text``, cut to :data:`MAX_REPLY_BYTES` with a notice when longer (the
        ingress reads no bigger one); ``None`` for no reply."""
        if not text:
            return None
        return Outbound(
            platform=message.platform,
            chat_id=message.chat_id,
            text=fit_reply(text),
            reply_to=message.message_id,
            key=message.reply_key,
            accepted_at=message.accepted_at,
            worker=self.member.id,
        )

    def _prefetched(self, lease: Lease | None) -> SessionState | object | None:
        """The session record read with ``lease`` (when the store is the broker's), else ``NOT_READ``."""
        if lease is None or not lease.prefetched or not getattr(self.store, "atomic_with_replies", False):
            return NOT_READ
        if lease.session is None:
            return None
        try:
            return SessionState.loads(lease.session)
        except (ValueError, RecursionError):
            return NOT_READ  # the store reads it again, and keeps the bad record aside

    async def _save(self, message: Inbound, state: str) -> None:
        try:
            await self.store.save(message.chat_key, SessionState.loads(state))
        except (SessionStoreError, ValueError, OSError) as exc:
            self.kernel.log.warning("gateway_session_not_saved", chat=message.chat_key, error=describe(exc))

    async def _give_back(self, lease: Lease) -> None:
        with contextlib.suppress(BrokerUnavailable):  # else taken over after claim_after
            await self.broker.release(self.member.id, lease)

    async def drain(self, timeout: float) -> None:
        """Stop taking chats; let the turns in progress finish and hand back, for up to ``timeout``."""
        self.stopping = True
        self.stopped.set()
        self._freed.set()
        tasks = [task for _lease, task in self.serving.values()]
        if tasks:
            _done, late = await asyncio.wait(tasks, timeout=timeout)
            for task in late:
                task.cancel()  # unacknowledged: another worker takes the chat after claim_after
            if late:
                self.kernel.log.warning("gateway_turns_abandoned", count=len(late), detail="stop timed out")
        if self.broker.connected:
            await _leave(self.broker, self.member, self.kernel)


async def _beat(owner: Ingress | Worker, leases: Any) -> None:
    """Tell the broker ``owner`` is alive (and which chats it holds), every ``claim_after / 3`` seconds."""
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


async def _leave(broker: Broker, member: Member, kernel: Any) -> None:
    try:
        await asyncio.wait_for(broker.leave(member), 5)
    except (BrokerUnavailable, TimeoutError) as exc:
        kernel.log.info("gateway_leave_failed", member=member.id, error=describe(exc))


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
