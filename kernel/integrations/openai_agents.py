"""The kernel inside the OpenAI Agents SDK: its tools as ``FunctionTool`` s, its turn around ``Runner.run``.

::

    with HermesAgentsSession(k) as hermes:
        agent = Agent(name="assistant", tools=hermes.tools())
        result = await hermes.run(agent, "What is 2**16?")
        print(result.final_output)

One :class:`HermesAgentsSession` is one conversation (one
:class:`~kernel.host.HostSession`): :meth:`~HermesAgentsSession.run` begins the
kernel's turn (``on_session_start``, the memory's recall, ``pre_llm_call``),
gives the SDK the conversation so far and the user's message with that
context, and ends the turn with the final output (``post_llm_call``,
``transform_llm_output``, the memory's ``sync_turn``, ``on_session_end``).
The SDK runs the model and the tool loop; each kernel tool it calls goes
through the kernel's pipeline (guards, ``pre_tool_call``, ``post_tool_call``,
``transform_tool_result``) with the SDK's call id as ``tool_call_id``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import warnings
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

try:
    from agents import Agent, FunctionTool, RunConfig, Runner, RunResult
    from agents.models.chatcmpl_converter import Converter
    from agents.models.interface import Model
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the SDK
    raise ImportError(
        "kernel.integrations.openai_agents needs openai-agents: pip install 'hermes-kernel[openai-agents]'"
    ) from exc

from ..core.callbacks import describe
from ..host import HostSession
from ..tools import error_json

if TYPE_CHECKING:
    from agents.run_config import ToolErrorFormatterArgs
    from agents.tool_context import ToolContext

    from .. import Kernel

__all__ = ["HermesAgentsSession"]

# The session whose run() is in progress here: a tool made by one session and given to an agent
# that another session runs dispatches for the one running it.
_RUNNING: ContextVar[HermesAgentsSession | None] = ContextVar("hermes_agents_session", default=None)

# Runner.run arguments with which the SDK (or the server) keeps the conversation instead.
_HISTORY_ELSEWHERE = ("session", "previous_response_id", "conversation_id", "auto_previous_response_id")


class HermesAgentsSession:
    """One conversation with the kernel's plugins around OpenAI Agents SDK runs.

    ``session_id`` defaults to a fresh id; ``platform`` is what the hooks are
    told.  One run at a time per session; sessions are independent of each
    other (run them concurrently with ``asyncio.gather``).
    """

    def __init__(
        self, kernel: Kernel, *, session_id: str | None = None, platform: str = "openai-agents"
    ) -> None:
        self.kernel = kernel
        self.session = HostSession(kernel, session_id=session_id, platform=platform)
        #: The conversation the next run starts with (SDK input items); the user's own text in it.
        self.items: list[Any] = []

    @property
    def session_id(self) -> str:
        """The kernel's id of this conversation."""
        return self.session.session_id

    # -- the tools ----------------------------------------------------------------------

    def tools(self) -> list[FunctionTool]:
        """The kernel's tools available now, as SDK ``FunctionTool`` s.

        Each runs ``adispatch`` for the session whose :meth:`run` calls it (this
        one outside a run), with the SDK's tool call id; its output is the
        kernel's JSON string, an ``{"error": ...}`` object when the call failed.
        """
        made = []
        for schema in self.kernel.tools.schemas():
            function = schema["function"]
            parameters = function.get("parameters") or {"type": "object", "properties": {}}
            made.append(
                FunctionTool(
                    name=function["name"],
                    description=function.get("description") or "",
                    params_json_schema=parameters,
                    on_invoke_tool=self._invoker(function["name"]),
                    strict_json_schema=False,
                )
            )
        return made

    def _invoker(self, name: str) -> Any:
        async def invoke(tool_context: ToolContext[Any], arguments: str) -> str:
            running = _RUNNING.get()
            owner = running if running is not None and running.kernel is self.kernel else self
            return await owner._dispatch(name, arguments, getattr(tool_context, "tool_call_id", None))

        return invoke

    async def _dispatch(self, name: str, arguments: str, tool_call_id: str | None) -> str:
        if self.session.closed:
            return error_json(f"tool '{name}': session {self.session_id} is closed")
        try:
            return await self.session.adispatch(name, arguments, tool_call_id=tool_call_id)
        except Exception as exc:  # the kernel contains tools' failures; this is a last resort for the SDK
            return error_json(f"tool '{name}' failed: {describe(exc)}")

    def _not_found(self, base: Any) -> Any:
        """A ``tool_error_formatter``: a call of a tool the agent lacks gets the kernel's error JSON."""

        async def formatter(args: ToolErrorFormatterArgs[Any]) -> str | None:
            if base is not None:
                answer = base(args)
                answer = await answer if inspect.isawaitable(answer) else answer
                if answer is not None:
                    return answer
            if args.kind != "tool_not_found":
                return None
            if args.tool_name in self.kernel.tools:  # a kernel tool, but not given to this agent
                return error_json(f"tool {args.tool_name!r} is not among this agent's tools")
            return self.session.dispatch(args.tool_name, None, tool_call_id=args.call_id)

        return formatter

    def _run_config(self, given: RunConfig | dict[str, Any] | None) -> RunConfig:
        config = RunConfig(**given) if isinstance(given, dict) else given or RunConfig()
        return dataclasses.replace(
            config,
            tool_not_found_behavior="return_error_to_model",
            tool_error_formatter=self._not_found(config.tool_error_formatter),
        )

    # -- a turn -------------------------------------------------------------------------

    async def run(self, agent: Agent[Any], text: str, **runner_kwargs: Any) -> RunResult:
        """One user turn: the kernel's turn around ``Runner.run(agent, ...)``; the ``RunResult``.

        The input is the conversation so far (:attr:`items`), the user's message
        with the turn's context, then the messages plugins queued with
        ``ctx.inject_message``.  ``runner_kwargs`` go to ``Runner.run``; with
        ``session``, ``previous_response_id``, ``conversation_id`` or
        ``auto_previous_response_id`` the SDK keeps the conversation and only
        the new messages are sent.  A replacement from ``transform_llm_output``
        becomes ``final_output`` (when it is text).  An exception or a
        cancellation ends the turn not completed and goes through unchanged.
        """
        host = self.session
        if host.turn is None:  # else abegin_turn refuses: the turn of another run is in progress
            host.model = _model_name(agent, runner_kwargs.get("run_config"))
        ours = not any(runner_kwargs.get(key) for key in _HISTORY_ELSEWHERE)
        before = list(self.items) if ours else []
        turn = await host.abegin_turn(text, history=self._chat(before) if ours else None)
        try:
            user = {"role": "user", "content": turn.user_content}
            run_input = [*before, user, *host.take_injected()]
            runner_kwargs["run_config"] = self._run_config(runner_kwargs.get("run_config"))
            token = _RUNNING.set(self)
            try:
                result = await Runner.run(agent, run_input, **runner_kwargs)
            finally:
                _RUNNING.reset(token)
        except BaseException as exc:
            cancelled = isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt))
            await host.aend_turn("", completed=False, interrupted=cancelled, error=exc)
            raise
        if result.interruptions:  # paused for a tool approval: resuming the RunState is the caller's
            await host.aend_turn("", completed=False, error="the run paused for tool approval")
            return result
        output = result.final_output
        reply = _text(output)
        history = None
        if ours:
            self.items = _with_own_text(result.to_input_list(), len(before), turn.user_content, text)
            history = self._chat(self.items)
        shown = await host.aend_turn(reply, history=history)
        if shown != reply:
            if output is None or isinstance(output, str):
                result.final_output = shown
            else:
                self.kernel.log.warning("transform_llm_output_ignored", reason="the final output is not text")
        return result

    def run_sync(self, agent: Agent[Any], text: str, **runner_kwargs: Any) -> RunResult:
        """:meth:`run` from sync code (not inside a running event loop): on this thread's event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("run_sync() cannot be called from a running event loop; await run() instead")
        loop = _thread_loop()
        task = loop.create_task(self.run(agent, text, **runner_kwargs))
        try:
            return loop.run_until_complete(task)
        except BaseException:
            if not task.done():  # Ctrl-C: the turn ends interrupted before this returns
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    loop.run_until_complete(task)
            raise

    def _chat(self, items: list[Any]) -> list[dict[str, Any]]:
        """``items`` as OpenAI chat messages, what the hooks and the memory are shown of the conversation."""
        try:
            return [dict(m) for m in Converter.items_to_messages(items)]
        except Exception as exc:  # an item the converter does not know: the turn goes on without it
            self.kernel.log.debug("openai_agents_history_unconverted", error=describe(exc))
        messages: list[dict[str, Any]] = []
        for item in items:
            with contextlib.suppress(Exception):
                messages.extend(dict(m) for m in Converter.items_to_messages([item]))
        return messages

    # -- the session --------------------------------------------------------------------

    def close(self, reason: str = "exit") -> None:
        """End the conversation (``on_session_end``, the memory's session end, ``on_session_finalize``);
        idempotent."""
        history = self._chat(self.items) if self.items and not self.session.closed else None
        self.session.close(reason, history=history)

    def __enter__(self) -> HermesAgentsSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _model_name(agent: Agent[Any], run_config: Any) -> str | None:
    """The model's name, for the hooks: the run config's, else the agent's."""
    model = (
        getattr(run_config, "model", None) if not isinstance(run_config, dict) else run_config.get("model")
    )
    model = model or agent.model
    if isinstance(model, str):
        return model
    if isinstance(model, Model):
        name = getattr(model, "model", None)
        return name if isinstance(name, str) else type(model).__name__
    return None


def _text(output: Any) -> str:
    """The final output as text: a string as it is, a structured output as JSON."""
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if hasattr(output, "model_dump_json"):
        with contextlib.suppress(Exception):
            return str(output.model_dump_json())
    if dataclasses.is_dataclass(output) and not isinstance(output, type):
        output = dataclasses.asdict(output)
    return json.dumps(output, ensure_ascii=False, default=str)


def _with_own_text(items: list[Any], index: int, sent: str, text: str) -> list[Any]:
    """``items`` with the user message sent at ``index`` (``sent``: the text and the context) back to
    the user's own ``text``; looked for elsewhere when a filter moved it."""
    if sent == text:
        return items

    def is_sent(item: Any) -> bool:
        return isinstance(item, dict) and item.get("role") == "user" and item.get("content") == sent

    at = index if index < len(items) and is_sent(items[index]) else None
    if at is None:
        at = next((i for i in range(len(items) - 1, -1, -1) if is_sent(items[i])), None)
    if at is not None:
        items[at] = {**items[at], "content": text}
    return items


def _thread_loop() -> asyncio.AbstractEventLoop:
    """This thread's default event loop, made when it has none (the SDK's ``run_sync`` keeps it too)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:
            loop = None
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
    return loop
