"""The reference agent loop: one conversation over the kernel's public API.

It shows embedders where each hook fires::

    session = AgentSession(k)
    reply = session.run("What is 2**16?").reply
    session.close()

Per user turn: ``on_session_start`` (first turn only), ``pre_llm_call`` (its
context and the memory provider's ``prefetch`` are appended to the user's
message, never to the system prompt), then the tool loop — the context
engine is consulted before each model call, the model is called through the
active model provider (which fires ``pre_api_request`` / ``post_api_request``
/ ``api_request_error``), tool calls go through ``k.tools.dispatch`` — until a
reply without tool calls or the iteration cap.  Then ``post_llm_call``
(successful turns only), ``transform_llm_output``, the memory's
``sync_turn`` and ``on_session_end``.  Events ``session:*`` and ``agent:*``
go on the kernel's event bus at the matching points.
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .core.config import section

if TYPE_CHECKING:
    from .core.kernel import Kernel

DEFAULT_MAX_ITERATIONS = 20
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant. Use the tools you are given when they help."
_PREVIEW = 500


class AgentError(RuntimeError):
    """A turn that could not complete (the model provider failed or none is configured)."""


@dataclass
class ToolCallRecord:
    """One tool call made during a turn."""

    id: str
    name: str
    arguments: str
    result: str


@dataclass
class TurnResult:
    """What one :meth:`AgentSession.run` produced."""

    reply: str
    session_id: str
    turn_id: str
    context: str = ""
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    iterations: int = 0
    stopped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "reply": self.reply,
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "context": self.context,
            "tool_calls": [vars(c) for c in self.tool_calls],
            "usage": dict(self.usage),
            "iterations": self.iterations,
            "stopped": self.stopped,
        }


class AgentSession:
    """A conversation with the configured model, the kernel's tools and its plugins."""

    def __init__(
        self,
        kernel: Kernel,
        *,
        session_id: str | None = None,
        platform: str = "cli",
        system_prompt: str | None = None,
        max_iterations: int | None = None,
        sender_id: str | None = None,
        task_id: str | None = None,
    ) -> None:
        self.kernel = kernel
        self.platform = platform
        self.sender_id = sender_id
        self.session_id = session_id or _new_id("session")
        self._task_id = task_id
        configured = section(kernel.config, "agent", "max_iterations")
        self.max_iterations = int(max_iterations or configured or DEFAULT_MAX_ITERATIONS)
        self.system_prompt = system_prompt or str(
            section(kernel.config, "agent", "system_prompt") or DEFAULT_SYSTEM_PROMPT
        )
        self.messages: list[dict[str, Any]] = []
        self.turns = 0
        self.closed = False
        self._memory_ready = False
        kernel._agent_sessions.add(self)  # ctx.inject_message routes by the open sessions

    # -- what the session knows --------------------------------------------------------

    @property
    def task_id(self) -> str:
        """The task id given to hooks, tools and the model: the one given, else the session's id."""
        return self._task_id or self.session_id

    @property
    def model_name(self) -> str | None:
        return self.kernel.providers.model_config().get("model") or None

    def _system_message(self) -> dict[str, Any]:
        parts = [self.system_prompt]
        memory = self._memory()
        if memory is not None:
            block = _call_quietly(self.kernel, "memory_system_prompt_failed", memory.system_prompt_block)
            if block:
                parts.append(str(block))
        return {"role": "system", "content": "\n\n".join(parts)}

    def _memory(self) -> Any:
        try:
            return self.kernel.providers.memory()
        except ValueError as exc:
            self.kernel.log.warning("memory_unavailable", detail=str(exc))
            return None

    def _engine(self) -> Any:
        try:
            return self.kernel.providers.context_engine()
        except ValueError as exc:
            self.kernel.log.warning("context_engine_unavailable", detail=str(exc))
            return None

    # -- a turn ----------------------------------------------------------------------------

    def run(self, user_message: str) -> TurnResult:
        """One user turn: context, the tool loop, the reply (see the module docstring).

        Everything the turn calls (hooks, tools, plugins' ``ctx.inject_message``)
        runs with this session as the call in progress.
        """
        if self.closed:
            raise AgentError("this session is closed")
        with self.kernel.tools.call_context(session_id=self.session_id, task_id=self.task_id):
            return self._run(user_message)

    async def arun(self, user_message: str) -> TurnResult:
        """:meth:`run` for async hosts: the turn runs on a worker thread, with the caller's context
        variables, so the caller's event loop keeps running; tools go through the same pipeline."""
        return await asyncio.to_thread(self.run, user_message)

    def _run(self, user_message: str) -> TurnResult:
        k = self.kernel
        turn_id = _new_id("turn")
        first = self.turns == 0
        try:
            client = k.providers.model()
        except ValueError as exc:
            raise AgentError(str(exc)) from None
        model = self.model_name or getattr(client, "model", None)
        base = {"session_id": self.session_id, "model": model, "platform": self.platform}
        if first:
            k.invoke_hook("on_session_start", **base)
            k.events.emit("session:start", {**base, "user_id": self.sender_id})
            self._start_memory()
            engine = self._engine()
            if engine is not None:
                _call_quietly(k, "context_engine_start_failed", engine.on_session_start, self.session_id)
        self.turns += 1
        k.events.emit("agent:start", {**base, "user_id": self.sender_id, "message": user_message[:_PREVIEW]})
        started = time.monotonic()
        before = len(self.messages)
        result = TurnResult(reply="", session_id=self.session_id, turn_id=turn_id)
        try:
            context = k.pre_llm_context(
                **base,
                task_id=self.task_id,
                turn_id=turn_id,
                user_message=user_message,
                conversation_history=copy.deepcopy(self.messages),
                is_first_turn=first,
                parent_session_id=None,
                sender_id=self.sender_id,
            )
            recalled = self._prefetch(user_message)
            result.context = "\n\n".join(p for p in (recalled, context) if p)
            content = f"{user_message}\n\n{result.context}" if result.context else user_message
            if not self.messages:
                self.messages.append(self._system_message())
            self.messages.append({"role": "user", "content": content})
            reply = self._tool_loop(client, result, turn_id)
        except BaseException as exc:
            # The unanswered message and any half-finished tool round are not kept.
            del self.messages[before:]
            interrupted = isinstance(exc, KeyboardInterrupt)
            k.invoke_hook("on_session_end", **base, completed=False, interrupted=interrupted)
            k.events.emit(
                "agent:end",
                {**base, "error": f"{type(exc).__name__}: {exc}", "duration_seconds": _since(started)},
            )
            if isinstance(exc, (KeyboardInterrupt, AgentError)):
                raise
            if isinstance(exc, Exception):
                raise AgentError(f"the turn failed: {type(exc).__name__}: {exc}") from exc
            raise
        k.invoke_hook(
            "post_llm_call",
            **base,
            task_id=self.task_id,
            turn_id=turn_id,
            user_message=user_message,
            assistant_response=reply,
            conversation_history=copy.deepcopy(self.messages),
        )
        replacement = k._first_text(
            "transform_llm_output",
            {
                "response_text": reply,
                "session_id": self.session_id,
                "model": model,
                "platform": self.platform,
            },
        )
        if replacement is not None:
            reply = replacement
        result.reply = reply
        memory = self._memory()
        if memory is not None:
            _call_quietly(
                k, "memory_sync_failed", memory.sync_turn, user_message, reply, session_id=self.session_id
            )
        k.invoke_hook("on_session_end", **base, completed=True, interrupted=False)
        k.events.emit(
            "agent:end",
            {
                **base,
                "user_id": self.sender_id,
                "response": reply[:_PREVIEW],
                "provider": _provider(k),
                "duration_seconds": _since(started),
            },
        )
        return result

    def _tool_loop(self, client: Any, result: TurnResult, turn_id: str) -> str:
        k = self.kernel
        for iteration in range(1, self.max_iterations + 1):
            result.iterations = iteration
            self._maybe_compress()
            self.messages.extend(k._take_injected(self.session_id))  # ctx.inject_message
            response = client.complete(
                self.messages,
                tools=k.tools.schemas() or None,
                session_id=self.session_id,
                task_id=self.task_id,
                turn_id=turn_id,
            )
            usage = response.usage.as_dict()
            for key, value in usage.items():
                if isinstance(value, int):
                    result.usage[key] = result.usage.get(key, 0) + value
            engine = self._engine()
            if engine is not None:
                # Both spellings of the counts: Hermes engines read prompt_tokens / completion_tokens.
                counts = {
                    "prompt_tokens": usage.get("input_tokens"),
                    "completion_tokens": usage.get("output_tokens"),
                }
                _call_quietly(
                    k, "context_engine_update_failed", engine.update_from_response, {**counts, **usage}
                )
            self.messages.append(response.as_message())
            k.events.emit(
                "agent:step",
                {
                    "session_id": self.session_id,
                    "platform": self.platform,
                    "iteration": iteration,
                    "tool_names": [c.name for c in response.tool_calls],
                },
            )
            if not response.tool_calls:
                return response.text
            for call in response.tool_calls:
                output = k.tools.dispatch(
                    call.name,
                    call.arguments,
                    session_id=self.session_id,
                    task_id=self.task_id,
                    turn_id=turn_id,
                    tool_call_id=call.id,
                )
                result.tool_calls.append(ToolCallRecord(call.id, call.name, call.arguments, output))
                self.messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
        result.stopped = "max_iterations"
        k.log.warning("agent_iteration_cap", session=self.session_id, max_iterations=self.max_iterations)
        return (
            f"[stopped: the model was still calling tools after {self.max_iterations} iterations "
            "(agent.max_iterations); no final answer]"
        )

    def _maybe_compress(self) -> None:
        engine = self._engine()
        if engine is None:
            return
        try:
            if engine.should_compress():
                self.messages = list(engine.compress(copy.deepcopy(self.messages)))
        except Exception as exc:
            self.kernel.log.warning("context_engine_failed", error=f"{type(exc).__name__}: {exc}")

    def _start_memory(self) -> None:
        memory = self._memory()
        if memory is not None and not self._memory_ready:
            self._memory_ready = True
            _call_quietly(
                self.kernel,
                "memory_initialize_failed",
                memory.initialize,
                self.session_id,
                hermes_home=str(self.kernel.home),
                platform=self.platform,
            )

    def _prefetch(self, query: str) -> str:
        memory = self._memory()
        if memory is None:
            return ""
        text = _call_quietly(
            self.kernel, "memory_prefetch_failed", memory.prefetch, query, session_id=self.session_id
        )
        return str(text).strip() if text else ""

    # -- session lifecycle ---------------------------------------------------------------

    def reset(self, reason: str = "reset") -> str:
        """Start over (``/new``, ``/reset``): a new session id, an empty conversation."""
        k = self.kernel
        old = self.session_id
        self._end_memory()
        new = _new_id("session")
        # The session that ends is finalised first, as in Hermes' /new and /reset (docs/hooks.md).
        k.invoke_hook(
            "on_session_finalize",
            session_id=old,
            platform=self.platform,
            old_session_id=old,
            new_session_id=new,
            reason=reason,
        )
        self.session_id = new
        self.messages = []
        self.turns = 0
        self._memory_ready = False
        k.invoke_hook(
            "on_session_reset",
            session_id=self.session_id,
            platform=self.platform,
            reason=reason,
            old_session_id=old,
            new_session_id=self.session_id,
        )
        k.events.emit(
            "session:reset", {"platform": self.platform, "session_id": self.session_id, "old_session_id": old}
        )
        return self.session_id

    def close(self, reason: str = "exit") -> None:
        """Close the session for good: ``on_session_end``, ``on_session_finalize``, ``session:end``.

        ``on_session_end`` fires here too (``completed`` true, not
        interrupted) when the session had turns: the hook fires at the end of
        each run and on exit.
        """
        if self.closed:
            return
        self.closed = True
        k = self.kernel
        k._agent_sessions.discard(self)
        k._drop_injected(self.session_id)  # what was queued for it has no conversation to join
        if self.turns:
            k.invoke_hook(
                "on_session_end",
                session_id=self.session_id,
                completed=True,
                interrupted=False,
                model=self.model_name,
                platform=self.platform,
            )
        self._end_memory()
        k.invoke_hook(
            "on_session_finalize",
            session_id=self.session_id if self.turns else None,
            platform=self.platform,
            old_session_id=None,
            new_session_id=None,
            reason=reason,
        )
        k.events.emit(
            "session:end", {"platform": self.platform, "session_id": self.session_id, "reason": reason}
        )

    def _end_memory(self) -> None:
        engine = self._engine()
        if engine is not None and self.turns:
            _call_quietly(
                self.kernel,
                "context_engine_end_failed",
                engine.on_session_end,
                self.session_id,
                copy.deepcopy(self.messages),
            )
        memory = self._memory()
        if memory is not None and self.turns:
            _call_quietly(
                self.kernel, "memory_session_end_failed", memory.on_session_end, copy.deepcopy(self.messages)
            )

    def __enter__(self) -> AgentSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _new_id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:12]}"


def _provider(kernel: Kernel) -> str | None:
    return kernel.providers.model_config().get("provider") or None


def _call_quietly(kernel: Kernel, event: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a provider method; a failure is logged, never fatal to the turn."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        kernel.log.warning(event, error=f"{type(exc).__name__}: {exc}")
        return None


def _since(started: float) -> float:
    """Seconds since ``started`` (``time.monotonic``), to the millisecond."""
    return round(time.monotonic() - started, 3)
