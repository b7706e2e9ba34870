"""``HostSession``: the order of a turn, written once, and the drivers that carry its steps out."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import functools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.data import copy_data
from ..core.callbacks import describe
from .steps import (
    _BEGIN_HOOKS,
    _END_HOOKS,
    _Call,
    _Context,
    _FirstText,
    _Hook,
    _positional_count,
    _provider,
    _settled,
    _since,
    _Steps,
    accepted,
    call_accepting,
    call_quietly,
    new_id,
)

if TYPE_CHECKING:
    from ..core.kernel import Kernel

_PREVIEW = 500


class HostSessionError(RuntimeError):
    """A :class:`HostSession` used out of order: a turn begun twice, ended unbegun, or a closed session."""


@dataclass
class HostTurn:
    """One user turn begun by :meth:`HostSession.begin_turn`."""

    session_id: str
    turn_id: str
    user_message: str
    is_first_turn: bool
    #: The memory's recall, then the merged ``pre_llm_call`` context (a blank line between); ``""`` for none.
    context: str = ""
    #: What the model must receive as this turn's user message: the message, then the context.
    user_content: str = ""
    #: The turn's number in the session, from 1.
    number: int = 0
    started: float = field(default_factory=time.monotonic, repr=False)
    memory: Any = field(default=None, repr=False)  # the memory provider the turn began with


class HostSession:
    """One conversation of a host that runs its own model loop (see the module docstring).

    ``session_id`` defaults to a fresh unique id and ``task_id`` to it;
    ``platform`` and ``model`` are what the hooks are told (``model`` may be
    changed between turns).  Thread-compatible, not thread-safe: one turn at a
    time per session; sessions are independent of each other.
    """

    def __init__(
        self,
        kernel: Kernel,
        *,
        session_id: str | None = None,
        platform: str = "host",
        model: str | None = None,
        task_id: str | None = None,
        sender_id: str | None = None,
    ) -> None:
        self.kernel = kernel
        self.session_id: str = session_id or new_id("session")
        self.platform = platform
        self.model = model
        self.sender_id = sender_id
        self._task_id = task_id
        #: Turns begun so far (a host restoring a conversation may set it: ``on_session_start`` fires at 0).
        self.turns = 0
        self.closed = False
        #: The turn in progress, if any.
        self.turn: HostTurn | None = None
        #: The id of the turn in progress, or of the last one (a sub-agent's parent turn).
        self.turn_id = ""
        # What the session knows of the conversation when the host gives no history: its own
        # transcript of user messages and replies.
        self._transcript: list[dict[str, Any]] = []
        self._history: list[dict[str, Any]] | None = None  # the host's history, as last given
        self._memory_started: Any = None  # the memory provider initialize() was called on
        self._started = False  # on_session_start fired (start() or the first turn)
        kernel.inbox.open(self)  # ctx.inject_message finds the open sessions here

    # -- what the session knows ---------------------------------------------------------

    @property
    def task_id(self) -> str:
        """The task id given to hooks, tools and the model: the one given, else the session's id."""
        return self._task_id or self.session_id

    @property
    def history(self) -> list[dict[str, Any]]:
        """The conversation as this session last heard of it: the host's ``history``, else its own
        transcript (each turn's user message and reply)."""
        return self._history if self._history is not None else self._transcript

    def call_context(self) -> contextlib.AbstractContextManager[dict[str, Any]]:
        """Make this session (and its turn) the call in progress for what runs inside: hooks, tools,
        ``ctx.inject_message``."""
        return self.kernel.tools.call_context(
            session_id=self.session_id, task_id=self.task_id, turn_id=self.turn_id or None
        )

    def memory(self) -> Any:
        """The active memory provider (``None`` when none is configured or it cannot be had)."""
        try:
            return self.kernel.providers.memory()
        except ValueError as exc:
            self.kernel.log.warning("memory_unavailable", detail=str(exc))
            return None

    def engine(self) -> Any:
        """The active context engine (``None`` when none is configured or it cannot be had)."""
        try:
            return self.kernel.providers.context_engine()
        except ValueError as exc:
            self.kernel.log.warning("context_engine_unavailable", detail=str(exc))
            return None

    @property
    def memory_in_use(self) -> Any:
        """The memory provider this session initialized (``None`` before its first use)."""
        return self._memory_started

    def take_injected(self) -> list[dict[str, str]]:
        """The messages ``ctx.inject_message`` queued for this session, oldest first; taken once."""
        return self.kernel.inbox.take(self.session_id)

    # -- a turn ----------------------------------------------------------------------------

    def begin_turn(self, user_message: str, *, history: list[dict[str, Any]] | None = None) -> HostTurn:
        """Begin a user turn (see the module docstring); ``history`` is the conversation before it."""
        return self._run_sync(self._begin(user_message, history))

    async def abegin_turn(
        self, user_message: str, *, history: list[dict[str, Any]] | None = None
    ) -> HostTurn:
        """As :meth:`begin_turn`, for async hosts (see :meth:`_arun`)."""
        return await self._arun(self._begin(user_message, history), _BEGIN_HOOKS, begins=True)

    def dispatch(self, name: str, args: Any = None, *, tool_call_id: str | None = None) -> str:
        """Run tool ``name`` through the kernel's pipeline with this session's ids; a JSON string."""
        return self.kernel.tools.dispatch(name, args, **self._tool_context(tool_call_id))

    async def adispatch(self, name: str, args: Any = None, *, tool_call_id: str | None = None) -> str:
        """As :meth:`dispatch`, for async hosts: the caller's loop keeps running meanwhile."""
        return await self.kernel.tools.adispatch(name, args, **self._tool_context(tool_call_id))

    def end_turn(
        self,
        assistant_response: str,
        *,
        history: list[dict[str, Any]] | None = None,
        completed: bool = True,
        interrupted: bool = False,
        error: BaseException | str | None = None,
    ) -> str:
        """End the turn in progress; the reply to show (``transform_llm_output``'s, else the one given).

        ``completed=False`` (the run failed or was cancelled; ``error`` says how,
        for the ``agent:end`` event) fires only ``on_session_end``.
        """
        return self._run_sync(self._end(assistant_response, history, completed, interrupted, error))

    async def aend_turn(
        self,
        assistant_response: str,
        *,
        history: list[dict[str, Any]] | None = None,
        completed: bool = True,
        interrupted: bool = False,
        error: BaseException | str | None = None,
    ) -> str:
        """As :meth:`end_turn`, for async hosts (see :meth:`_arun`)."""
        steps = self._end(assistant_response, history, completed, interrupted, error)
        return await self._arun(steps, _END_HOOKS)

    def _tool_context(self, tool_call_id: str | None) -> dict[str, Any]:
        context: dict[str, Any] = {"session_id": self.session_id, "task_id": self.task_id}
        if self.turn_id:
            context["turn_id"] = self.turn_id
        if tool_call_id is not None:
            context["tool_call_id"] = str(tool_call_id)
        return context

    def _history_for(self, hook: str) -> list[dict[str, Any]]:
        """The conversation as ``hook``'s callbacks get it: their own copy, made only if one listens."""
        return copy_data(self.history) if self.kernel.has_callbacks(hook) else []

    def _base(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "model": self.model, "platform": self.platform}

    def _begin(self, user_message: str, history: list[dict[str, Any]] | None) -> _Steps:
        if self.closed:
            raise HostSessionError(f"session {self.session_id} is closed")
        if self.turn is not None:
            raise HostSessionError(
                f"session {self.session_id}: turn {self.turn.turn_id} is still in progress; end it first"
            )
        if type(user_message) is not str:
            raise TypeError(f"user_message must be a str, not {type(user_message).__name__}")
        k = self.kernel
        if history is not None:
            self._history = history
        first = self.turns == 0
        starting = first and not self._started
        turn = HostTurn(
            session_id=self.session_id,
            turn_id=new_id("turn"),
            user_message=user_message,
            is_first_turn=first,
            number=self.turns + 1,
        )
        self.turn, self.turn_id = turn, turn.turn_id
        base = self._base()
        try:
            if starting:
                yield from self._start_steps(base)
            memory = turn.memory = self.memory()
            if memory is not None and memory is not self._memory_started:
                yield self._initialize_step(memory)
            self.turns += 1
            if k.events.listening("agent:start"):
                k.events.emit(
                    "agent:start", {**base, "user_id": self.sender_id, "message": user_message[:_PREVIEW]}
                )
            recalled = ""
            if memory is not None:
                yield _Call(
                    "memory_turn_start_failed",
                    memory.on_turn_start,
                    (self.turns, user_message),
                    {"model": self.model, "platform": self.platform, "session_id": self.session_id},
                    accepting=True,
                )
                text = yield _Call(
                    "memory_prefetch_failed",
                    memory.prefetch,
                    (user_message,),
                    {"session_id": self.session_id},
                )
                recalled = str(text).strip() if text else ""
            context = yield _Context(
                {
                    **base,
                    "task_id": self.task_id,
                    "turn_id": turn.turn_id,
                    "user_message": user_message,
                    "conversation_history": self._history_for("pre_llm_call"),
                    "is_first_turn": first,
                    "parent_session_id": None,
                    "sender_id": self.sender_id,
                }
            )
        except BaseException as exc:
            # The turn ends here, not completed; the host sees the exception as it was.
            self.turn = None
            interrupted = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))
            yield from self._not_completed(base, interrupted, exc, turn.started)
            raise
        turn.context = "\n\n".join(p for p in (recalled, context) if p)
        turn.user_content = f"{user_message}\n\n{turn.context}" if turn.context else user_message
        return turn

    def _start_steps(self, base: dict[str, Any]) -> _Steps:
        self._started = True
        yield _Hook("on_session_start", base)
        self.kernel.events.emit("session:start", {**base, "user_id": self.sender_id})
        engine = self.engine()
        if engine is not None:
            yield _Call("context_engine_start_failed", engine.on_session_start, (self.session_id,), {})

    def start(self) -> None:
        """Start the session before its first turn (``on_session_start``, the engine's, ``session:start``);
        for a host whose sessions begin before any message (an MCP connection).  Idempotent; the
        first :meth:`begin_turn` does it otherwise."""
        if self.closed:
            raise HostSessionError(f"session {self.session_id} is closed")
        if not self._started and self.turns == 0:
            self._run_sync(self._start_steps(self._base()))

    async def astart(self) -> None:
        """As :meth:`start`, for async hosts."""
        if self.closed:
            raise HostSessionError(f"session {self.session_id} is closed")
        if not self._started and self.turns == 0:
            await self._run_async(self._start_steps(self._base()))

    def _end(
        self,
        reply: str,
        history: list[dict[str, Any]] | None,
        completed: bool,
        interrupted: bool,
        error: BaseException | str | None,
    ) -> _Steps:
        turn = self.turn
        if turn is None:
            raise HostSessionError(f"session {self.session_id}: no turn in progress; call begin_turn first")
        self.turn = None
        base = self._base()
        if history is not None:
            self._history = history
        if not completed:
            yield from self._not_completed(base, interrupted, error, turn.started)
            return reply
        reply = "" if reply is None else reply if type(reply) is str else str(reply)
        if self._history is None:  # the host keeps no history: the session keeps its own
            self._transcript.append({"role": "user", "content": turn.user_message})
            self._transcript.append({"role": "assistant", "content": reply})
        k = self.kernel
        yield _Hook(
            "post_llm_call",
            {
                **base,
                "task_id": self.task_id,
                "turn_id": turn.turn_id,
                "user_message": turn.user_message,
                "assistant_response": reply,
                "conversation_history": self._history_for("post_llm_call"),
            },
        )
        replacement = yield _FirstText(
            "transform_llm_output",
            {
                "response_text": reply,
                "session_id": self.session_id,
                "model": self.model,
                "platform": self.platform,
            },
        )
        if replacement is not None:
            reply = replacement
        memory = turn.memory
        if memory is not None:
            sync: dict[str, Any] = {"session_id": self.session_id}
            if accepted(memory.sync_turn, {"messages": None}):
                sync["messages"] = copy_data(self.history)
            yield _Call("memory_sync_failed", memory.sync_turn, (turn.user_message, reply), sync)
            if turn.user_message.strip():
                yield _Call(
                    "memory_queue_prefetch_failed",
                    memory.queue_prefetch,
                    (turn.user_message,),
                    {"session_id": self.session_id},
                )
        yield _Hook("on_session_end", {**base, "completed": True, "interrupted": False})
        if not k.events.listening("agent:end"):
            return reply
        k.events.emit(
            "agent:end",
            {
                **base,
                "user_id": self.sender_id,
                "response": reply[:_PREVIEW],
                "provider": _provider(k),
                "duration_seconds": _since(turn.started),
            },
        )
        return reply

    def _not_completed(
        self, base: dict[str, Any], interrupted: bool, error: BaseException | str | None, started: float
    ) -> _Steps:
        yield _Hook("on_session_end", {**base, "completed": False, "interrupted": bool(interrupted)})
        if isinstance(error, BaseException):
            error = describe(error)
        self.kernel.events.emit(
            "agent:end",
            {
                **base,
                "error": error or ("interrupted" if interrupted else "not completed"),
                "duration_seconds": _since(started),
            },
        )

    # -- session lifecycle ---------------------------------------------------------------

    def _initialize_step(self, memory: Any) -> _Call:
        """The memory's ``initialize`` for this session (its first use of that provider)."""
        self._memory_started = memory
        return _Call(
            "memory_initialize_failed",
            memory.initialize,
            (self.session_id,),
            {"hermes_home": str(self.kernel.home), "platform": self.platform},
        )

    def start_memory(self) -> Any:
        """The active memory provider, initialized for this session on first use (``None`` if none)."""
        memory = self.memory()
        if memory is not None and memory is not self._memory_started:
            self._run_step(self._initialize_step(memory))
        return memory

    def reset(self, reason: str = "reset", *, history: list[dict[str, Any]] | None = None) -> str:
        """Start over (``/new``, ``/reset``): the session ends and goes on under a new id; returns it.

        ``history`` is the ending conversation (for the memory's and the
        engine's session end); the new one starts empty.
        """
        k = self.kernel
        old = self.session_id
        if history is not None:
            self._history = history
        self._end_providers()
        new = new_id("session")
        # The session that ends is finalised first, as in Hermes' /new and /reset (docs/hooks.md).
        k.invoke_hook(
            "on_session_finalize",
            session_id=old,
            platform=self.platform,
            old_session_id=old,
            new_session_id=new,
            reason=reason,
        )
        k.inbox.drop(old)
        self.session_id = new
        self.turns, self.turn, self._transcript, self._history = 0, None, [], None
        self._started = False
        memory = self.memory()
        if memory is not None and memory is self._memory_started:
            # Hermes does not initialize the provider again: it is told the new id.
            call_accepting(
                k,
                "memory_session_switch_failed",
                memory.on_session_switch,
                new,
                parent_session_id=old,
                reset=True,
                reason=reason,
            )
        engine = self.engine()
        if engine is not None:
            call_quietly(k, "context_engine_reset_failed", engine.on_session_reset)
        k.invoke_hook(
            "on_session_reset",
            session_id=new,
            platform=self.platform,
            reason=reason,
            old_session_id=old,
            new_session_id=new,
        )
        k.events.emit("session:reset", {"platform": self.platform, "session_id": new, "old_session_id": old})
        return new

    def close(
        self,
        reason: str = "exit",
        *,
        history: list[dict[str, Any]] | None = None,
        completed: bool = True,
        interrupted: bool = False,
    ) -> None:
        """Close the session for good; idempotent.

        When the session started (a turn, or :meth:`start`): ``on_session_end``
        (``completed`` and ``interrupted`` as given: a host ending on Ctrl-C says
        so), the engine's and (after a turn) the memory's session end; then
        ``on_session_finalize`` (``session_id`` ``None`` for a session that never
        started) and ``session:end``.  A turn still in progress ends first, not
        completed.
        """
        if self.closed:
            return
        if self.turn is not None:
            self.end_turn("", completed=False, error="the session closed during the turn")
        self.closed = True
        k = self.kernel
        k.inbox.close(self)  # what was queued for it has no conversation to join
        if history is not None:
            self._history = history
        started = bool(self.turns) or self._started
        if started:
            k.invoke_hook(
                "on_session_end",
                session_id=self.session_id,
                completed=completed,
                interrupted=interrupted,
                model=self.model,
                platform=self.platform,
            )
        self._end_providers()
        k.invoke_hook(
            "on_session_finalize",
            session_id=self.session_id if started else None,
            platform=self.platform,
            old_session_id=None,
            new_session_id=None,
            reason=reason,
        )
        k.events.emit(
            "session:end", {"platform": self.platform, "session_id": self.session_id, "reason": reason}
        )

    async def aclose(
        self,
        reason: str = "exit",
        *,
        history: list[dict[str, Any]] | None = None,
        completed: bool = True,
        interrupted: bool = False,
    ) -> None:
        """As :meth:`close`, for async hosts: on a worker thread, so that no hook stalls the loop."""
        await asyncio.to_thread(
            self.close, reason, history=history, completed=completed, interrupted=interrupted
        )

    def release(self) -> None:
        """Let go of the session without ending it: no hook fires, and it runs no more turns here.

        For a host that keeps the conversation elsewhere (the gateway's session
        store) and goes on with it in another session object.
        """
        if self.closed:
            return
        self.closed = True
        self.turn = None
        self.kernel.inbox.close(self)

    def _end_providers(self) -> None:
        """The engine's (a started session) and the memory's (after a turn) ``on_session_end`` with the
        conversation."""
        if not self.turns and not self._started:
            return
        k = self.kernel
        engine = self.engine()
        if engine is not None:
            call_quietly(
                k,
                "context_engine_end_failed",
                engine.on_session_end,
                self.session_id,
                copy.deepcopy(self.history),
            )
        if not self.turns:
            return  # no turn ran: the memory was never initialized for this session
        memory = self.memory()
        if memory is not None:
            call_quietly(k, "memory_session_end_failed", memory.on_session_end, copy.deepcopy(self.history))

    # -- what the host reports to the memory ------------------------------------------

    def notify_delegation(self, task: str, result: str, *, child_session_id: str = "", **kwargs: Any) -> None:
        """A sub-agent this session delegated ``task`` to came back with ``result``: the memory's
        ``on_delegation`` (call it where your host runs sub-agents)."""
        memory = self.start_memory()
        if memory is not None:
            call_accepting(
                self.kernel,
                "memory_delegation_failed",
                memory.on_delegation,
                task,
                result,
                child_session_id=child_session_id,
                **kwargs,
            )

    def notify_memory_write(
        self, action: str, target: str, content: str, metadata: dict[str, Any] | None = None
    ) -> None:
        """The host's own built-in memory wrote an entry: the memory provider's ``on_memory_write``
        (the kernel has no built-in memory tool; an embedding host with one calls this)."""
        memory = self.start_memory()
        if memory is None:
            return
        details = {"session_id": self.session_id, "platform": self.platform, **(metadata or {})}
        k, write = self.kernel, memory.on_memory_write
        if accepted(write, {"metadata": details}):
            call_quietly(k, "memory_write_failed", write, action, target, content, metadata=details)
        elif _positional_count(write) >= 4:
            call_quietly(k, "memory_write_failed", write, action, target, content, details)
        else:  # an override of the older three-argument form
            call_quietly(k, "memory_write_failed", write, action, target, content)

    def __enter__(self) -> HostSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the drivers -----------------------------------------------------------------------

    def _run_step(self, step: Any) -> Any:
        k = self.kernel
        if type(step) is _Hook:
            return k.invoke_hook(step.name, **step.kwargs)
        if type(step) is _Context:
            return k.pre_llm_context(**step.kwargs)
        if type(step) is _FirstText:
            return k.first_text(step.name, **step.kwargs)
        kwargs = accepted(step.fn, step.kwargs) if step.accepting else step.kwargs
        return call_quietly(k, step.event, step.fn, *step.args, **kwargs)

    def _run_sync(self, steps: _Steps) -> Any:
        with self.call_context():
            try:
                step = next(steps)
                while True:
                    try:
                        answer = self._run_step(step)
                    except BaseException as exc:
                        step = steps.throw(exc)
                    else:
                        step = steps.send(answer)
            except StopIteration as stop:
                return stop.value

    async def _arun(self, steps: _Steps, hooks: tuple[str, ...], *, begins: bool = False) -> Any:
        """Carry ``steps`` out for an async host.

        While none of ``hooks`` (the hooks the steps may fire) has an async
        callback, all the steps run on one worker thread, as :meth:`_run_sync`
        runs them: a turn's beginning or end costs one thread hop, and nothing
        stalls the caller's loop.  A cancellation then lets the steps finish
        (a thread cannot be stopped midway), ends a turn they began as
        interrupted, and goes on.  Otherwise each step runs as
        :meth:`_run_async` runs it, async callbacks awaited on this loop.
        """
        k = self.kernel
        if any(k.has_async_callbacks(name) for name in hooks):
            return await self._run_async(steps)
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        future = loop.run_in_executor(None, context.run, self._run_sync, steps)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            turn = await _settled(future)
            if begins and turn is not None and self.turn is turn:
                end = functools.partial(
                    self.end_turn,
                    "",
                    completed=False,
                    interrupted=True,
                    error="the host's task was cancelled",
                )
                await _settled(loop.run_in_executor(None, context.run, end))
            raise

    async def _run_async(self, steps: _Steps) -> Any:
        k = self.kernel
        with self.call_context():
            try:
                step = next(steps)
                while True:
                    try:
                        if type(step) is _Hook:
                            answer: Any = await k.ainvoke_hook(step.name, **step.kwargs)
                        elif type(step) is _Context:
                            answer = await k.apre_llm_context(**step.kwargs)
                        elif type(step) is _FirstText:
                            answer = await k.afirst_text(step.name, **step.kwargs)
                        else:  # a provider's method may block: a worker thread, with this context
                            answer = await asyncio.to_thread(self._run_step, step)
                    except BaseException as exc:
                        step = steps.throw(exc)
                    else:
                        step = steps.send(answer)
            except StopIteration as stop:
                return stop.value
