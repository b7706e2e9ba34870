"""The kernel inside LangGraph: its tools as LangChain tools, its turn around a graph's invocation.

::

    with HermesGraphSession(k) as hermes:
        graph = create_react_agent(model, hermes.tool_node())
        state = hermes.invoke(graph, "What is 2**16?")
        print(state["messages"][-1].text)

One :class:`HermesGraphSession` is one conversation (one
:class:`~kernel.host.HostSession`).  :meth:`~HermesGraphSession.invoke` begins
the kernel's turn (``on_session_start``, the memory's recall, ``pre_llm_call``),
invokes the graph with the conversation so far, the user's message with that
context and what plugins queued with ``ctx.inject_message``, and ends the turn
with the text of the last AI message (``post_llm_call``,
``transform_llm_output``, the memory's ``sync_turn``, ``on_session_end``).
The graph runs the model and the tools; each kernel tool it calls goes through
the kernel's pipeline (guards, ``pre_tool_call``, ``post_tool_call``,
``transform_tool_result``) with LangChain's tool call id as ``tool_call_id``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

try:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        ToolMessage,
        convert_to_messages,
        convert_to_openai_messages,
    )
    from langchain_core.tools import BaseTool
    from langgraph.prebuilt import ToolNode
    from pydantic import Field
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without langgraph
    raise ImportError(
        "kernel.integrations.langgraph needs langgraph and langchain-core: "
        "pip install 'hermes-kernel[langgraph]'"
    ) from exc

from ..host import HostSession
from ..tools import is_error_result
from . import host_model

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest

    from .. import Kernel

__all__ = ["HermesGraphSession", "HermesTool"]

# LangChain hands a tool its call id in run()/arun(), not in _run(): it is carried across here.
_TOOL_CALL_ID: ContextVar[str | None] = ContextVar("hermes_langgraph_tool_call_id", default=None)
# The session whose invocation is in progress here: a graph compiled once with one session's tools
# and invoked by several sessions dispatches each call for the session invoking it.
_RUNNING: ContextVar[HostSession | None] = ContextVar("hermes_langgraph_session", default=None)


class HermesTool(BaseTool):
    """One kernel tool as a LangChain tool: the kernel's name, description and JSON schema.

    Invoked with a ``ToolCall`` (as LangGraph's ``ToolNode`` does), it runs
    the kernel's pipeline with the call's id and answers with a
    ``ToolMessage`` whose content is the kernel's JSON string (``status`` is
    ``"error"`` when that is an error object); invoked with plain arguments,
    it answers with the JSON string.
    """

    #: The session whose ids the calls carry outside a :class:`HermesGraphSession` invocation.
    host: Any = Field(default=None, exclude=True, repr=False)

    def run(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
        """As :meth:`BaseTool.run`; the call id reaches the kernel's pipeline."""
        token = _TOOL_CALL_ID.set(tool_call_id)
        try:
            return super().run(tool_input, *args, tool_call_id=tool_call_id, **kwargs)
        finally:
            _TOOL_CALL_ID.reset(token)

    async def arun(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
        """As :meth:`BaseTool.arun`; the call id reaches the kernel's pipeline."""
        token = _TOOL_CALL_ID.set(tool_call_id)
        try:
            return await super().arun(tool_input, *args, tool_call_id=tool_call_id, **kwargs)
        finally:
            _TOOL_CALL_ID.reset(token)

    def _run(self, **args: Any) -> Any:
        call_id = _TOOL_CALL_ID.get()
        text = _running(self.host).dispatch(self.name, args, tool_call_id=call_id)
        return _tool_output(self.name, text, call_id)

    async def _arun(self, **args: Any) -> Any:
        call_id = _TOOL_CALL_ID.get()
        text = await _running(self.host).adispatch(self.name, args, tool_call_id=call_id)
        return _tool_output(self.name, text, call_id)


def _running(default: HostSession) -> HostSession:
    """The session whose invocation is in progress here, else ``default``."""
    return _RUNNING.get() or default


def _tool_output(name: str, text: str, call_id: str | None) -> Any:
    if call_id is None:
        return text
    status = "error" if is_error_result(text) else "success"
    return ToolMessage(content=text, tool_call_id=call_id, name=name, status=status)


def _parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The kernel's ``parameters`` as an object schema LangChain can read (it needs ``properties``)."""
    params = dict(schema.get("parameters") or {})
    params.setdefault("type", "object")
    params.setdefault("properties", {})
    return params


def _model_name(model: Any) -> str:
    for attribute in ("model_name", "model"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def _plugin_call(model: BaseChatModel) -> Callable[[list[dict[str, Any]]], str]:
    """``ctx.llm``'s call: OpenAI chat messages to LangChain's, the model's reply as text."""

    def call(messages: list[dict[str, Any]]) -> str:
        return str(model.invoke(convert_to_messages(messages)).text)

    return call


class HermesGraphSession:
    """One conversation with the kernel's plugins around LangGraph invocations.

    ``session_id`` defaults to a fresh id; ``platform`` is what the hooks are
    told.  ``plugin_llm`` (a LangChain chat model), when given, is the model
    ``ctx.llm`` answers with from then on (the kernel's active model: the last
    one given wins).  One invocation at a time per session; sessions are
    independent of each other (run them concurrently with ``asyncio.gather``).
    """

    def __init__(
        self,
        kernel: Kernel,
        *,
        session_id: str | None = None,
        platform: str = "langgraph",
        plugin_llm: BaseChatModel | None = None,
    ) -> None:
        self.kernel = kernel
        self.session = HostSession(kernel, session_id=session_id, platform=platform)
        #: The conversation the next invocation starts with; the user's own text in it, not the context.
        self.messages: list[BaseMessage] = []
        if plugin_llm is not None:
            host_model(kernel, _plugin_call(plugin_llm), model=_model_name(plugin_llm))

    @property
    def session_id(self) -> str:
        """The kernel's id of this conversation."""
        return self.session.session_id

    # -- the tools ----------------------------------------------------------------------

    def tools(self) -> list[HermesTool]:
        """The kernel's tools available now, as LangChain tools running in this session."""
        tools = []
        for entry in self.kernel.tools.schemas():
            schema = entry["function"]
            tools.append(
                HermesTool(
                    name=schema["name"],
                    description=schema.get("description") or "",
                    args_schema=_parameters(schema),
                    host=self.session,
                )
            )
        return tools

    def tool_node(self, **kwargs: Any) -> ToolNode:
        """A ``ToolNode`` of :meth:`tools`; a call of a tool it does not have goes to the kernel too
        (whose answer is its error JSON for an unknown tool).  ``kwargs`` go to ``ToolNode``."""
        return ToolNode(self.tools(), wrap_tool_call=self._route, awrap_tool_call=self._aroute, **kwargs)

    def _route(self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]) -> Any:
        if request.tool is not None:
            return execute(request)
        call = request.tool_call
        text = _running(self.session).dispatch(call["name"], call.get("args"), tool_call_id=call.get("id"))
        return _tool_output(call["name"], text, call.get("id") or "")

    async def _aroute(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[Any]]
    ) -> Any:
        if request.tool is not None:
            return await execute(request)
        call = request.tool_call
        session = _running(self.session)
        text = await session.adispatch(call["name"], call.get("args"), tool_call_id=call.get("id"))
        return _tool_output(call["name"], text, call.get("id") or "")

    # -- a turn -------------------------------------------------------------------------

    def invoke(self, graph: Any, text: str, *, config: Any = None, **kwargs: Any) -> dict[str, Any]:
        """One user turn: ``graph.invoke`` around the kernel's turn; the graph's result state.

        ``graph`` is a compiled graph whose state has ``messages``; ``config``
        and ``kwargs`` go to its ``invoke``.  When a plugin's
        ``transform_llm_output`` replaces the reply, the last AI message has
        the replacement, in the state returned and in the conversation kept.
        A failing invocation ends the turn not completed and raises as it was.
        """
        turn = self.session.begin_turn(text, history=self._history())
        human = HumanMessage(content=turn.user_content, id=f"hermes-{uuid.uuid4().hex}")
        token = _RUNNING.set(self.session)
        try:
            with self.session.call_context():
                state = graph.invoke(self._input(human), config=config, **kwargs)
            messages = _messages_of(state)
        except BaseException as exc:
            self.session.end_turn(
                "", completed=False, interrupted=_interrupted(exc), error=exc, history=self._history()
            )
            raise
        finally:
            _RUNNING.reset(token)
        kept = self._kept(messages, human, text)
        reply = self.session.end_turn(_last_reply(kept, human), history=_openai(kept))
        return self._finish(state, messages, kept, reply, human)

    async def ainvoke(self, graph: Any, text: str, *, config: Any = None, **kwargs: Any) -> dict[str, Any]:
        """As :meth:`invoke`, with ``graph.ainvoke``; a cancellation ends the turn as interrupted."""
        turn = await self.session.abegin_turn(text, history=self._history())
        human = HumanMessage(content=turn.user_content, id=f"hermes-{uuid.uuid4().hex}")
        token = _RUNNING.set(self.session)
        try:
            with self.session.call_context():
                state = await graph.ainvoke(self._input(human), config=config, **kwargs)
            messages = _messages_of(state)
        except BaseException as exc:
            await self.session.aend_turn(
                "", completed=False, interrupted=_interrupted(exc), error=exc, history=self._history()
            )
            raise
        finally:
            _RUNNING.reset(token)
        kept = self._kept(messages, human, text)
        reply = await self.session.aend_turn(_last_reply(kept, human), history=_openai(kept))
        return self._finish(state, messages, kept, reply, human)

    def _history(self) -> list[dict[str, Any]]:
        return _openai(self.messages)

    def _input(self, human: HumanMessage) -> dict[str, Any]:
        injected = convert_to_messages(self.session.take_injected())
        return {"messages": [*self.messages, human, *injected]}

    @staticmethod
    def _kept(messages: list[BaseMessage], human: HumanMessage, text: str) -> list[BaseMessage]:
        """The conversation after the turn, with the user's own text where the context was."""
        return [m.model_copy(update={"content": text}) if m.id == human.id else m for m in messages]

    def _finish(
        self,
        state: Mapping[str, Any],
        messages: list[BaseMessage],
        kept: list[BaseMessage],
        reply: str,
        human: HumanMessage,
    ) -> dict[str, Any]:
        index = _last_ai(kept, human)
        if index is not None and kept[index].text != reply:
            replaced = kept[index].model_copy(update={"content": reply})
            kept[index] = replaced
            messages = [*messages[:index], replaced, *messages[index + 1 :]]
        self.messages = kept
        return {**state, "messages": messages}

    # -- the session --------------------------------------------------------------------

    def close(self, reason: str = "exit") -> None:
        """End the conversation for good (``on_session_end``, the memory's session end,
        ``on_session_finalize``); idempotent."""
        self.session.close(reason, history=self._history())

    def __enter__(self) -> HermesGraphSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _messages_of(state: Any) -> list[BaseMessage]:
    if not isinstance(state, Mapping) or not isinstance(state.get("messages"), Sequence):
        raise TypeError(
            f"the graph returned {type(state).__name__} without a 'messages' list: "
            "HermesGraphSession needs a graph whose state has messages"
        )
    return list(state["messages"])


def _last_ai(messages: Sequence[BaseMessage], human: HumanMessage) -> int | None:
    """Where this turn's last AI message is (after the user's message), or ``None``."""
    start = next((i + 1 for i, m in enumerate(messages) if m.id == human.id), 0)
    for index in range(len(messages) - 1, start - 1, -1):
        if isinstance(messages[index], AIMessage):
            return index
    return None


def _last_reply(messages: Sequence[BaseMessage], human: HumanMessage) -> str:
    index = _last_ai(messages, human)
    return "" if index is None else str(messages[index].text)


def _openai(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    return convert_to_openai_messages(list(messages)) if messages else []


def _interrupted(exc: BaseException) -> bool:
    return isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))
