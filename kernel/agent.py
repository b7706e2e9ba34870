"""The reference agent loop: one conversation over the kernel's public API.

It shows embedders where each hook fires::

    session = AgentSession(k)
    reply = session.run("What is 2**16?").reply
    session.close()

The turn's lifecycle is :class:`~kernel.host.HostSession`'s, the same that
framework adapters use; this loop adds the model and the tools.  Per user
turn: ``on_session_start`` (first turn only), the memory's ``on_turn_start``
and ``prefetch``, ``pre_llm_call`` (the recall and the hooks' context are
appended to the user's message, never to the system prompt), then the tool
loop — the context engine is consulted before each model call
(``should_compress_preflight`` on the messages, ``should_compress``; the
memory's ``on_pre_compress`` runs before it compresses), the model is called
through the active model provider (which fires ``pre_api_request`` /
``post_api_request`` / ``api_request_error``), tool calls go through
``k.tools.dispatch`` — until a reply without tool calls or the iteration cap.
Then ``post_llm_call`` (successful turns only), ``transform_llm_output``, the
memory's ``sync_turn`` and ``queue_prefetch``, and ``on_session_end``.  Events
``session:*`` and ``agent:*`` go on the kernel's event bus at the matching
points.  The context engine's ``update_model`` runs when a session starts with
a context length the kernel knows and when the model changes (see
:meth:`AgentSession._update_engine_model`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .base.config import section
from .base.data import sanitize_memory_context
from .core.api import contained
from .host import HostSession, accepted, call_accepting, call_quietly

if TYPE_CHECKING:
    from .core.kernel import Kernel

DEFAULT_MAX_ITERATIONS = 20
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant. Use the tools you are given when they help."
#: The context length given to an engine that has none when ``model.context_length`` is not set
#: (Hermes' fallback when it cannot find the model's).
DEFAULT_CONTEXT_LENGTH = 256_000


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
        #: The turn lifecycle (hooks, memory, injected messages): this loop only adds the model.
        self.host = HostSession(
            kernel, session_id=session_id, platform=platform, task_id=task_id, sender_id=sender_id
        )
        configured = section(kernel.config, "agent", "max_iterations")
        self.max_iterations = int(max_iterations or configured or DEFAULT_MAX_ITERATIONS)
        self.system_prompt = system_prompt or str(
            section(kernel.config, "agent", "system_prompt") or DEFAULT_SYSTEM_PROMPT
        )
        self.messages: list[dict[str, Any]] = []
        # The engine update_model() last told, and (model, provider, model.context_length) then.
        self._engine_told: Any = None
        self._engine_model: tuple[Any, ...] | None = None
        self._subagents = 0

    # -- what the session knows --------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self.host.session_id

    @property
    def platform(self) -> str:
        return self.host.platform

    @property
    def sender_id(self) -> str | None:
        return self.host.sender_id

    @property
    def task_id(self) -> str:
        """The task id given to hooks, tools and the model: the one given, else the session's id."""
        return self.host.task_id

    @property
    def turns(self) -> int:
        """Turns run so far (a host restoring a conversation sets it with :attr:`messages`)."""
        return self.host.turns

    @turns.setter
    def turns(self, value: int) -> None:
        self.host.turns = value

    @property
    def closed(self) -> bool:
        return self.host.closed

    @property
    def model_name(self) -> str | None:
        return self.kernel.providers.model_config().get("model") or None

    def _system_message(self) -> dict[str, Any]:
        parts = [self.system_prompt]
        memory = self.host.memory()
        if memory is not None:
            block = call_quietly(self.kernel, "memory_system_prompt_failed", memory.system_prompt_block)
            if block:
                parts.append(str(block))
        return {"role": "system", "content": "\n\n".join(parts)}

    # -- a turn ----------------------------------------------------------------------------

    def run(self, user_message: str) -> TurnResult:
        """One user turn: context, the tool loop, the reply (see the module docstring).

        Everything the turn calls (hooks, tools, plugins' ``ctx.inject_message``)
        runs with this session as the call in progress.
        """
        if self.closed:
            raise AgentError("this session is closed")
        with self.host.call_context():
            return self._run(user_message)

    async def arun(self, user_message: str) -> TurnResult:
        """:meth:`run` for async hosts: the turn runs on a worker thread, with the caller's context
        variables, so the caller's event loop keeps running; tools go through the same pipeline."""
        return await asyncio.to_thread(self.run, user_message)

    def _run(self, user_message: str) -> TurnResult:
        k, host = self.kernel, self.host
        try:
            client = k.providers.model()
        except ValueError as exc:
            raise AgentError(str(exc)) from None
        host.model = self.model_name or getattr(client, "model", None)
        engine = host.engine()
        if engine is not None:
            self._update_engine_model(engine, client)
        turn = host.begin_turn(user_message, history=self.messages)
        before = len(self.messages)
        result = TurnResult(reply="", session_id=self.session_id, turn_id=turn.turn_id, context=turn.context)
        try:
            if not self.messages:
                self.messages.append(self._system_message())
            self.messages.append({"role": "user", "content": turn.user_content})
            reply = self._tool_loop(client, result, turn.turn_id)
        except BaseException as exc:
            # The unanswered message and any half-finished tool round are not kept.
            del self.messages[before:]
            interrupted = isinstance(exc, KeyboardInterrupt)
            host.end_turn("", history=self.messages, completed=False, interrupted=interrupted, error=exc)
            if isinstance(exc, (KeyboardInterrupt, AgentError)):
                raise
            if isinstance(exc, Exception):
                raise AgentError(f"the turn failed: {type(exc).__name__}: {exc}") from exc
            raise
        result.reply = host.end_turn(reply, history=self.messages)
        return result

    def _tool_loop(self, client: Any, result: TurnResult, turn_id: str) -> str:
        k = self.kernel
        nudges = 0
        for iteration in range(1, self.max_iterations + 1):
            result.iterations = iteration
            self._maybe_compress()
            self.messages.extend(self.host.take_injected())  # ctx.inject_message
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
            engine = self.host.engine()
            if engine is not None:
                # Both spellings of the counts: Hermes engines read prompt_tokens / completion_tokens.
                counts = {
                    "prompt_tokens": usage.get("input_tokens"),
                    "completion_tokens": usage.get("output_tokens"),
                }
                call_quietly(
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
                nudge = self._verify_nudge(result, response.text, nudges)
                if nudge is None:
                    return response.text
                nudges += 1
                self.messages.append({"role": "user", "content": nudge})
                continue
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

    def _verify_nudge(self, result: TurnResult, answer: str, attempt: int) -> str | None:
        """Fire ``pre_verify`` for a turn that ran tools and would end with ``answer``: the message
        a plugin asks to go on with, or ``None`` to let the turn finish."""
        k = self.kernel
        if not result.tool_calls or attempt >= _max_verify_nudges(k.config):
            return None
        answers = k.invoke_hook(
            "pre_verify",
            session_id=self.session_id or "",
            platform=self.platform or "",
            model=self.model_name or "",
            coding=section(k.config, "agent", "coding") is True,
            attempt=attempt,
            final_response=answer or "",
            changed_paths=_paths_of(result.tool_calls),
        )
        for value in answers:
            if type(value) is not dict:
                continue
            action = value.get("action") or value.get("decision")
            message = value.get("message") or value.get("reason")
            if (
                isinstance(action, str)
                and action.strip().lower() in ("continue", "block")
                and isinstance(message, str)
                and message.strip()
            ):
                return str.__str__(message).strip()[:MAX_VERIFY_MESSAGE_CHARS]
        return None

    def _maybe_compress(self) -> None:
        engine = self.host.engine()
        if engine is None:
            return
        preflight = False
        if _overrides(engine, "should_compress_preflight"):
            answer = call_quietly(
                self.kernel,
                "context_engine_preflight_failed",
                engine.should_compress_preflight,
                copy.deepcopy(self.messages),
            )
            preflight = answer is True
        with contained(self.kernel.log, "context_engine_failed"):
            if preflight or engine.should_compress():
                self._compress(engine)

    def compress(self, focus_topic: str | None = None, *, force: bool = False) -> None:
        """Compress the conversation now with the active engine (``/compress``), the memory's
        ``on_pre_compress`` first; the engine's errors propagate."""
        engine = self.host.engine()
        if engine is not None:
            self._compress(engine, focus_topic=focus_topic, force=force)

    def _compress(self, engine: Any, *, focus_topic: str | None = None, force: bool = False) -> None:
        options: dict[str, Any] = {}
        if focus_topic:
            options["focus_topic"] = focus_topic
        if force:
            options["force"] = True
        memory = self.host.memory() if self.host.memory_in_use is not None else None
        if memory is not None:
            text = call_quietly(
                self.kernel,
                "memory_pre_compress_failed",
                memory.on_pre_compress,
                copy.deepcopy(self.messages),
            )
            if isinstance(text, str) and text.strip():
                options["memory_context"] = sanitize_memory_context(text)
        options = accepted(engine.compress, options)
        self.messages = list(engine.compress(copy.deepcopy(self.messages), **options))

    def _update_engine_model(self, engine: Any, client: Any) -> None:
        """Tell ``engine`` the model (``update_model``) when the session starts or the model changes.

        The context length is ``model.context_length`` from config.yaml (Hermes'
        override) when set.  Otherwise an engine without a context length of its
        own gets :data:`DEFAULT_CONTEXT_LENGTH`, as in Hermes; one with its own
        keeps it — it is told only when the model changes, with that length.
        """
        k = self.kernel
        config = k.providers.model_config()
        model = str(getattr(client, "model", None) or config.get("model") or "")
        provider = str(getattr(client, "provider", None) or config.get("provider") or "")
        raw = config.get("context_length")
        current = (model, provider, repr(raw))
        if self._engine_told is engine and self._engine_model == current:
            return
        changed = self._engine_told is engine
        self._engine_told, self._engine_model = engine, current
        length = _context_length(k, raw)
        if length is None:
            own = call_quietly(k, "context_engine_failed", getattr, engine, "context_length", 0)
            has_own = isinstance(own, int) and not isinstance(own, bool) and own > 0
            if not has_own:
                length = DEFAULT_CONTEXT_LENGTH
            elif changed:
                length = own
            else:
                return
        call_accepting(
            k,
            "context_engine_update_model_failed",
            engine.update_model,
            model,
            length,
            base_url=str(getattr(client, "base_url", "") or ""),
            provider=provider,
            api_mode=_api_mode(k, provider),
        )

    # -- session lifecycle ---------------------------------------------------------------

    def reset(self, reason: str = "reset") -> str:
        """Start over (``/new``, ``/reset``): a new session id, an empty conversation."""
        new = self.host.reset(reason, history=self.messages)
        self.messages = []
        return new

    def close(self, reason: str = "exit") -> None:
        """Close the session for good: ``on_session_end``, ``on_session_finalize``, ``session:end``.

        ``on_session_end`` fires here too (``completed`` true, not
        interrupted) when the session had turns: the hook fires at the end of
        each run and on exit.
        """
        self.host.close(reason, history=self.messages)

    def release(self) -> None:
        """Let go of the session without ending it: no hook fires, and it runs no more turns here.

        For a host that keeps the conversation elsewhere (the gateway's session store) and goes on
        with it in another :class:`AgentSession` — in this process, another, or after a restart.
        """
        self.host.release()

    # -- what the host reports to the memory ------------------------------------------

    def delegate(
        self,
        goal: str,
        *,
        role: str | None = None,
        system_prompt: str | None = None,
        max_iterations: int | None = None,
    ) -> TurnResult:
        """Run ``goal`` as one turn of a sub-agent: a fresh session of this kernel, closed after it.

        Fires ``subagent_start`` before and ``subagent_stop`` after (with Hermes' argument names
        too), then hands the reply to the memory's ``on_delegation``.  A host or a tool handler calls
        it; the reference loop offers the model no delegation tool of its own.  A sub-agent that
        fails is reported as ``failed`` and its error raised; Ctrl-C as ``interrupted``.
        """
        k = self.kernel
        self._subagents += 1
        subagent_id = f"{self.session_id}/sub-{self._subagents}"
        child = AgentSession(
            k,
            platform=self.platform,
            system_prompt=system_prompt or self.system_prompt,
            max_iterations=max_iterations or self.max_iterations,
            sender_id=self.sender_id,
        )
        common = {
            "parent_session_id": self.session_id,
            "parent_turn_id": self.host.turn_id,
            "child_session_id": child.session_id,
            "child_role": role,
        }
        k.invoke_hook(
            "subagent_start",
            **common,
            goal=goal,
            child_goal=goal,
            task_id=child.task_id,
            parent_subagent_id="",
            child_subagent_id=subagent_id,
        )
        started = time.perf_counter()
        status, result = "failed", None
        try:
            result = child.run(goal)
            status = "interrupted" if result.stopped == "interrupted" else "completed"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            with contextlib.suppress(Exception):
                child.close("subagent")
            history = [_tool_entry(call) for call in (result.tool_calls if result else [])]
            summary = result.reply if result is not None else None
            k.invoke_hook(
                "subagent_stop",
                **common,
                child_summary=summary,
                child_status=status,
                tool_call_history=history,
                duration_ms=int((time.perf_counter() - started) * 1000),
            )
            if summary is not None:
                self.notify_delegation(goal, summary, child_session_id=child.session_id)
        return result

    def notify_delegation(self, task: str, result: str, *, child_session_id: str = "", **kwargs: Any) -> None:
        """A sub-agent this session delegated ``task`` to came back with ``result``: the memory's
        ``on_delegation`` (see :meth:`HostSession.notify_delegation`)."""
        self.host.notify_delegation(task, result, child_session_id=child_session_id, **kwargs)

    def notify_memory_write(
        self, action: str, target: str, content: str, metadata: dict[str, Any] | None = None
    ) -> None:
        """The host's own built-in memory wrote an entry (see :meth:`HostSession.notify_memory_write`)."""
        self.host.notify_memory_write(action, target, content, metadata)

    def __enter__(self) -> AgentSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _overrides(engine: Any, method: str) -> bool:
    """Whether ``engine`` has its own ``method``, not ``ContextEngine``'s default (named, not imported:
    the base class is another service's)."""
    for cls in type(engine).__mro__:
        if method in vars(cls):
            return (cls.__module__, cls.__qualname__) != ("kernel.providers.context_engine", "ContextEngine")
    return False


def _context_length(kernel: Kernel, raw: Any) -> int | None:
    """``model.context_length`` as a positive int (``None`` when unset; a bad value is logged)."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw.strip())
    if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
        return raw
    kernel.log.warning("model_context_length_invalid", value=repr(raw)[:100])
    return None


def _api_mode(kernel: Kernel, provider: str) -> str:
    try:
        return str(kernel.providers.get_provider_profile(provider).api_mode or "")
    except Exception:  # an unknown or broken profile: the engine is told nothing about it
        return ""


# pre_verify: how many times a turn may be kept going (agent.max_verify_nudges), and a message's size.
DEFAULT_MAX_VERIFY_NUDGES = 3
MAX_VERIFY_MESSAGE_CHARS = 20_000


def _max_verify_nudges(config: Any) -> int:
    value = section(config, "agent", "max_verify_nudges")
    if isinstance(value, bool) or value is None:
        return DEFAULT_MAX_VERIFY_NUDGES
    try:
        return max(0, int(value))
    except (TypeError, ValueError, OverflowError):
        return DEFAULT_MAX_VERIFY_NUDGES


def _tool_entry(call: ToolCallRecord) -> dict[str, Any]:
    """One entry of ``subagent_stop``'s ``tool_call_history``: the tool, its arguments and result."""
    return {"id": call.id, "tool": call.name, "arguments": call.arguments, "result": call.result}


def _paths_of(calls: list[ToolCallRecord]) -> list[str]:
    """The ``path`` / ``file_path`` arguments of a turn's tool calls, sorted, each once."""
    from .base.safe_yaml import DataRefused, load_json

    found: set[str] = set()
    for call in calls:
        args: Any = call.arguments
        if isinstance(args, str):
            try:
                args = load_json(args, "arguments", 64, 10_000) if len(args) < 1_000_000 else {}
            except (ValueError, DataRefused):
                continue
        if isinstance(args, dict):
            for key in ("path", "file_path"):
                value = args.get(key)
                if isinstance(value, str) and value:
                    found.add(value)
    return sorted(found)
