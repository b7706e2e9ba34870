"""The kernel inside a pydantic-ai agent: its plugins' tools, hooks and memory as one capability.

::

    from pydantic_ai import Agent
    from kernel.integrations.pydantic_ai import HermesCapability

    hermes = HermesCapability(k)
    agent = Agent(model, capabilities=[hermes])
    result = await agent.run("What is 2**16?")    # one turn of hermes.session
    hermes.close()

Each run of an agent with a :class:`HermesCapability` is one turn of its
:class:`~kernel.host.HostSession`: the turn begins before the run (hooks,
memory, the merged context), every model request of the run carries the
context on the run's user prompt (the saved history keeps the prompt as the
user wrote it), the kernel's tools go through its pipeline, and the turn ends
after the run (``post_llm_call``, ``transform_llm_output``, memory).
:func:`hermes_toolset` is the tools alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

try:
    import pydantic_core
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.direct import model_request
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelRequestPart,
        ModelResponse,
        ModelResponsePart,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import Model
    from pydantic_ai.tools import RunContext, ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
except ImportError as exc:  # pragma: no cover - the message is tested in a subprocess
    raise ImportError(
        "kernel.integrations.pydantic_ai needs pydantic-ai: pip install 'hermes-kernel[pydantic-ai]'"
    ) from exc

from ..host import HostSession, HostTurn, call_quietly
from . import host_model

if TYPE_CHECKING:
    from pydantic_ai.capabilities import WrapRunHandler
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.run import AgentRunResult

    from .. import Kernel

__all__ = ["HermesCapability", "HermesToolset", "hermes_toolset"]

#: The key under which arguments that are not a JSON object reach :meth:`HermesToolset.call_tool`.
_RAW = "\x00hermes-raw-arguments"

#: What ends a run without an error of its own: the turn is interrupted rather than failed.
_INTERRUPTS = (KeyboardInterrupt, GeneratorExit)


class _Unchecked:
    """An ``args_validator`` that lets every argument through: the kernel checks them itself.

    A JSON object becomes a dict; anything else (broken JSON, a list) is handed
    on as it came, under :data:`_RAW`, for the kernel to answer with an error.
    """

    def validate_json(self, input: str | bytes | bytearray, **_kwargs: Any) -> dict[str, Any]:
        try:
            value = pydantic_core.from_json(input)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        text = input if isinstance(input, str) else bytes(input).decode("utf-8", "replace")
        return {_RAW: text}

    def validate_python(self, input: Any, **_kwargs: Any) -> dict[str, Any]:
        return input if isinstance(input, dict) else {_RAW: input}


_UNCHECKED = _Unchecked()


class HermesToolset(AbstractToolset[Any]):
    """The kernel's tools (those available now) as a pydantic-ai toolset, run through ``session``.

    The model gets each tool's JSON schema as the kernel has it; a call goes to
    :meth:`HostSession.adispatch` with pydantic-ai's tool call id, and the JSON
    text the pipeline returns is the tool's result (an error is a JSON object
    with an ``"error"`` key, and the run goes on).
    """

    def __init__(self, session: HostSession, *, owns_session: bool = False) -> None:
        self.session = session
        self._owns_session = owns_session
        self._schemas: list[dict[str, Any]] | None = None
        self._tools: dict[str, ToolsetTool[Any]] = {}

    def __repr__(self) -> str:
        return f"HermesToolset(session_id={self.session.session_id!r})"

    @property
    def id(self) -> str | None:
        """The toolset's id among an agent's toolsets."""
        return "hermes"

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The kernel's tools available now, by name."""
        schemas = self.session.kernel.tools.schemas()
        if schemas != self._schemas:
            tools: dict[str, ToolsetTool[Any]] = {}
            for schema in schemas:
                function = schema["function"]
                definition = ToolDefinition(
                    name=function["name"],
                    description=function.get("description"),
                    parameters_json_schema=function.get("parameters") or {"type": "object", "properties": {}},
                )
                tools[definition.name] = ToolsetTool(
                    toolset=self, tool_def=definition, max_retries=1, args_validator=_UNCHECKED
                )
            self._schemas, self._tools = schemas, tools
        return dict(self._tools)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> str:
        """Run ``name`` through the kernel's pipeline; its JSON text."""
        args: Any = tool_args.get(_RAW, tool_args)
        return await self.session.adispatch(name, args, tool_call_id=ctx.tool_call_id)

    def close(self) -> None:
        """Close the session :func:`hermes_toolset` made for this toolset (one given stays open)."""
        if self._owns_session:
            self.session.close()


def hermes_toolset(kernel: Kernel, session: HostSession | None = None) -> HermesToolset:
    """The kernel's tools alone, as a pydantic-ai toolset: ``Agent(model, toolsets=[...])``.

    Calls run in ``session`` (a fresh :class:`HostSession` when none is given:
    close it with the toolset's ``close()``); no turn hook fires.
    """
    if session is None:
        return HermesToolset(HostSession(kernel, platform="pydantic-ai"), owns_session=True)
    return HermesToolset(session)


@dataclasses.dataclass
class _Run:
    """What the capability keeps of a run in progress."""

    turn: HostTurn
    #: The memory provider's ``system_prompt_block``, the run's instructions ("" for none).
    instructions: str = ""
    #: The run's user prompt part, once the first model request has shown which it is.
    prompt: UserPromptPart | None = None
    #: Injected assistant messages waiting for a request to follow them.
    held: list[ModelMessage | ModelRequestPart | str] = dataclasses.field(default_factory=list)


class HermesCapability(AbstractCapability[Any]):
    """The kernel as a pydantic-ai capability: ``Agent(model, capabilities=[HermesCapability(k)])``.

    One instance is one :class:`HostSession` (``.session``, ``.session_id``);
    each run is a turn of it.  ``plugin_llm`` (a pydantic-ai model) is what
    ``ctx.llm`` answers with from then on (:func:`kernel.integrations.host_model`),
    until :meth:`close`.  One run at a time per instance.
    """

    def __init__(
        self,
        kernel: Kernel,
        *,
        session_id: str | None = None,
        platform: str = "pydantic-ai",
        plugin_llm: Model | None = None,
    ) -> None:
        self.kernel = kernel
        self.session = HostSession(kernel, session_id=session_id, platform=platform)
        self.toolset = HermesToolset(self.session)
        self.plugin_llm = plugin_llm
        self._runs: dict[str | None, _Run] = {}
        self._installed = None if plugin_llm is None else host_model(kernel, _model_call(plugin_llm))

    def __repr__(self) -> str:
        return f"HermesCapability(session_id={self.session.session_id!r})"

    @property
    def session_id(self) -> str:
        """The id of the capability's session."""
        return self.session.session_id

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not buildable from an agent spec: it holds a live kernel."""
        return None

    def get_toolset(self) -> AbstractToolset[Any]:
        """The kernel's tools, dispatched in this capability's session."""
        return self.toolset

    def get_instructions(self) -> Any:
        """The active memory provider's ``system_prompt_block``, read once per run."""
        return self._instructions

    def _instructions(self, ctx: RunContext[Any]) -> str | None:
        run = self._runs.get(ctx.run_id)
        if run is None or not run.instructions:
            return None
        return run.instructions

    async def _memory_block(self) -> str:
        memory = self.session.memory()
        if memory is None:
            return ""
        block = await asyncio.to_thread(
            call_quietly, self.kernel, "memory_system_prompt_failed", memory.system_prompt_block
        )
        return str(block) if block else ""

    async def wrap_run(self, ctx: RunContext[Any], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        """The run as one turn: begun before it, ended after it (not completed when it raises)."""
        session = self.session
        session.model = getattr(ctx.model, "model_name", None) or session.model
        earlier = list(ctx.messages)
        turn = await session.abegin_turn(_prompt_text(ctx.prompt, earlier), history=_openai_messages(earlier))
        self._runs[ctx.run_id] = run = _Run(turn)
        try:
            try:
                run.instructions = await self._memory_block()
                result = await handler()
            except BaseException as exc:
                interrupted = isinstance(exc, _INTERRUPTS) or _cancelled(exc)
                await session.aend_turn("", completed=False, interrupted=interrupted, error=exc)
                raise
            output = result.output
            reply = output if isinstance(output, str) else _as_text(output)
            shown = await session.aend_turn(reply, history=_openai_messages(result.all_messages()))
        finally:
            if self._runs.get(ctx.run_id) is run:
                del self._runs[ctx.run_id]
            if run.held:
                self.kernel.log.warning(
                    "inject_message_undelivered", session=session.session_id, count=len(run.held)
                )
        if isinstance(output, str) and shown != output:
            result = dataclasses.replace(result, output=shown)
        return result

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Put the turn's context on the run's user prompt (this request only) and deliver the
        messages ``ctx.inject_message`` queued for the session."""
        run = self._runs.get(ctx.run_id)
        if run is None:
            return request_context
        messages = request_context.messages
        if run.prompt is None:
            run.prompt = _last_prompt(messages)
        if run.turn.context and run.prompt is not None:
            request_context.messages = _with_context(messages, run.prompt, run.turn)
        self._deliver(ctx, run)
        return request_context

    def _deliver(self, ctx: RunContext[Any], run: _Run) -> None:
        injected = self.session.take_injected()
        if not injected:
            return
        items = run.held
        for message in injected:
            role, content = message["role"], message["content"]
            if role == "assistant":
                items.append(ModelResponse(parts=[TextPart(content)]))
            elif role == "system":
                items.append(SystemPromptPart(content))
            else:
                items.append(content)
        # A batch must end in a request: assistant messages at its end wait for the next one.
        cut = len(items)
        while cut and isinstance(items[cut - 1], ModelResponse):
            cut -= 1
        if cut:
            ctx.enqueue(*items[:cut])
        run.held = items[cut:]

    def close(self, reason: str = "exit") -> None:
        """Close the session (idempotent); ``ctx.llm`` stops answering with ``plugin_llm``."""
        self.session.close(reason)
        providers = self.kernel.providers
        if self._installed is not None and providers.host_model is self._installed:
            providers.use_model(None)
        self._installed = None

    def __enter__(self) -> HermesCapability:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- the run's prompt ----------------------------------------------------------------------


def _prompt_text(prompt: str | Sequence[Any] | None, earlier: list[ModelMessage]) -> str:
    """The user's message of a run: its prompt's text, else (a run that goes on from its history) the
    last user prompt there."""
    if prompt is None:
        part = _last_prompt(earlier)
        return "" if part is None else _user_text(part.content)
    return _user_text(prompt)


def _user_text(content: str | Sequence[Any]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(item for item in content if isinstance(item, str))


def _last_prompt(messages: Sequence[ModelMessage]) -> UserPromptPart | None:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart):
                    return part
    return None


def _with_context(messages: list[ModelMessage], prompt: UserPromptPart, turn: HostTurn) -> list[ModelMessage]:
    """``messages`` with a copy of ``prompt`` that carries the turn's context (the history keeps its own)."""
    if isinstance(prompt.content, str):
        content: str | list[Any] = turn.user_content
    else:
        content = [*prompt.content, turn.context]
    out = list(messages)
    for i, message in enumerate(out):
        if isinstance(message, ModelRequest) and any(p is prompt or p == prompt for p in message.parts):
            parts = [
                dataclasses.replace(p, content=content) if p is prompt or p == prompt else p
                for p in message.parts
            ]
            out[i] = dataclasses.replace(message, parts=parts)
            break
    return out


def _cancelled(exc: BaseException) -> bool:
    return isinstance(exc, asyncio.CancelledError)


def _as_text(output: Any) -> str:
    """A run's output that is not text, as the hooks are told it: its JSON."""
    try:
        return pydantic_core.to_json(output).decode()
    except Exception:  # an output pydantic cannot serialize
        return str(output)


# -- between OpenAI chat messages and pydantic-ai's ----------------------------------------


def _openai_messages(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """pydantic-ai ``messages`` as OpenAI chat messages (what hooks get as ``conversation_history``)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    out.append({"role": "system", "content": part.content})
                elif isinstance(part, UserPromptPart):
                    out.append({"role": "user", "content": _user_text(part.content)})
                elif isinstance(part, ToolReturnPart):
                    out.append(_tool_message(part.tool_call_id, part.model_response_str()))
                elif isinstance(part, RetryPromptPart):
                    if part.tool_name is None:
                        out.append({"role": "user", "content": part.model_response()})
                    else:
                        out.append(_tool_message(part.tool_call_id, part.model_response()))
        elif isinstance(message, ModelResponse):
            entry: dict[str, Any] = {
                "role": "assistant",
                "content": "".join(p.content for p in message.parts if isinstance(p, TextPart)),
            }
            calls = [
                {
                    "id": p.tool_call_id,
                    "type": "function",
                    "function": {"name": p.tool_name, "arguments": p.args_as_json_str()},
                }
                for p in message.parts
                if isinstance(p, ToolCallPart)
            ]
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
    return out


def _tool_message(tool_call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": tool_call_id, "content": content}


def _pydantic_messages(messages: Sequence[dict[str, Any]]) -> list[ModelMessage]:
    """OpenAI chat ``messages`` as pydantic-ai messages (what ``plugin_llm`` is asked with)."""
    out: list[ModelMessage] = []
    parts: list[ModelRequestPart] = []
    names: dict[str, str] = {}  # tool call id -> tool name
    for message in messages:
        role = message.get("role")
        text = _content_text(message.get("content"))
        if role == "assistant":
            if parts:
                out.append(ModelRequest(parts=parts))
                parts = []
            reply: list[ModelResponsePart] = [TextPart(text)] if text else []
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                names[str(call.get("id"))] = str(function.get("name"))
                reply.append(
                    ToolCallPart(
                        str(function.get("name")), function.get("arguments"), tool_call_id=str(call.get("id"))
                    )
                )
            out.append(ModelResponse(parts=reply))
        elif role == "system":
            parts.append(SystemPromptPart(text))
        elif role == "tool":
            call_id = str(message.get("tool_call_id"))
            parts.append(ToolReturnPart(names.get(call_id, "tool"), text, tool_call_id=call_id))
        else:
            parts.append(UserPromptPart(text))
    if parts:
        out.append(ModelRequest(parts=parts))
    return out


def _content_text(content: Any) -> str:
    """The text of an OpenAI message's content: a string, or the text of its parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return json.dumps(content, default=str)


def _model_call(model: Model) -> Any:
    """A ``call(messages) -> str`` that asks pydantic-ai ``model`` (for :func:`host_model`)."""

    async def call(messages: list[dict[str, Any]]) -> str:
        response = await model_request(model, _pydantic_messages(messages))
        return response.text or ""

    call.__qualname__ = f"plugin_llm[{getattr(model, 'model_name', type(model).__name__)}]"
    return call
