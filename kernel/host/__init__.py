"""One conversation whose model loop someone else runs: the lifecycle of a turn, in one place.

An agent framework (pydantic-ai, the OpenAI Agents SDK, LangGraph, an MCP
client) calls the model and runs the tool loop itself; what the kernel owes
its plugins around that is the same every time::

    session = HostSession(k, model="my-model")
    turn = session.begin_turn("What is 2**16?")     # hooks, memory, the merged context
    reply = my_model(turn.user_content)              # the context rides on the user message
    result = session.dispatch("calculate", {"expression": "2**16"})   # the tool pipeline
    reply = session.end_turn(reply)                  # post_llm_call, transform_llm_output, memory
    session.close()

:meth:`HostSession.begin_turn`: ``on_session_start`` (first turn only, with
the context engine's ``on_session_start``), the active memory provider's
``initialize`` (first use), ``on_turn_start`` and ``prefetch``, then
``pre_llm_call`` — :attr:`HostTurn.context` is the recall, then the merged
hook context, a blank line between.  :meth:`HostSession.end_turn`:
``post_llm_call``, ``transform_llm_output`` (its replacement is the return
value), the memory's ``sync_turn`` and ``queue_prefetch``, ``on_session_end``.
A turn that did not complete fires only ``on_session_end`` with
``completed=False``.  :meth:`HostSession.close`: the memory's and the
engine's session end, ``on_session_finalize``.

The reference loop (:class:`~kernel.agent.AgentSession`) runs on this class,
so the order above is written once.  Each step is a value a generator yields
(:class:`_Hook`, :class:`_Call`...): a sync driver and an async one carry them
out, so that :meth:`HostSession.abegin_turn` awaits plugins' async hooks on
the caller's loop and runs blocking memory providers on a worker thread
without a second copy of the order.
"""

from .session import HostSession, HostSessionError, HostTurn
from .steps import accepted, call_accepting, call_quietly, new_id

__all__ = [
    "HostSession",
    "HostSessionError",
    "HostTurn",
    "accepted",
    "call_accepting",
    "call_quietly",
    "new_id",
]
