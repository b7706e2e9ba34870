"""The hook contract of hermes-kernel: every lifecycle event and provider slot.

Each function below is a pluggy hookspec of the ``hermes`` project, and its
docstring is the reference for that hook: when it fires, what each argument
holds, what a return value means and what a failing callback does.

Two kinds of callbacks take part in every hook and are called in one order,
by tier (``tryfirst``, normal, ``trylast``) and alphabetical by plugin name
within a tier (then registration order within a plugin); pluggy wrappers of
both styles wrap the whole call:

* Hermes-style callbacks, registered with ``ctx.register_hook(name, fn)``.
  They are called with keyword arguments.  A callback that accepts
  ``**kwargs`` receives every argument the host passes; one that does not
  receives only the arguments it names.
* Pluggy-native implementations, functions decorated with
  :data:`kernel.hookimpl` and named after the hook.  As with pluggy, they may
  declare any subset of the arguments listed here.

Failure policy, unless a hook says otherwise: a callback that raises anything
(any ``Exception`` or other ``BaseException``), or returns something that
fails when awaited or read, is logged with its plugin, hook and error and
disabled for the life of the kernel; the other callbacks still run and the
call returns their results.  Only ``KeyboardInterrupt`` in the main thread and
an ``asyncio.CancelledError`` while the calling task is being cancelled
propagate.  Coroutine functions are awaited.

Hooks receive snapshots (copies) of conversation data: changing an argument
changes nothing in the host; influence comes back only through return values.
"""

from __future__ import annotations

from typing import Any

import pluggy

#: The version of hermes-kernel (kept here, at the bottom of the plugin machinery, for every module to read).
__version__ = "0.1.0"

#: The pluggy project name of the kernel's hooks: ``hookspec`` marks the contract below; pluggy-native
#: extensions decorate their implementations with ``hookimpl``.
PROJECT_NAME = "hermes"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

# Hooks whose failing callback stops the action it guards instead of being
# skipped: a raising pre_tool_call callback blocks that tool call.
FAIL_CLOSED_HOOKS = frozenset({"pre_tool_call"})

# Provider slot hooks and the slot each one fills.
SLOT_HOOKS = {
    "register_model_providers": "model_provider",
    "register_memory_providers": "memory",
    "register_context_engines": "context_engine",
    "register_image_gen_providers": "image_gen",
}


# --------------------------------------------------------------------------
# Tool calls
# --------------------------------------------------------------------------


@hookspec
def pre_tool_call(
    tool_name: str,
    args: dict[str, Any],
    task_id: str | None,
    session_id: str | None,
    tool_call_id: str | None,
    turn_id: str | None,
    api_request_id: str | None,
    telemetry_schema_version: str,
    middleware_trace: list[dict[str, Any]],
) -> dict[str, Any] | None:
    """Decide on a tool call before its handler runs.

    Fires in ``k.tools.dispatch`` for every tool call (a model's call or a
    plugin's), after the tool has been found and before its handler runs.

    :param tool_name: the registered name of the tool about to run.
    :param args: a copy of the arguments the handler will receive.
    :param task_id: the task the call belongs to, when the host has one.
    :param session_id: the session the call belongs to, when known.
    :param tool_call_id: the model's id for this call, when known.
    :param turn_id: the id of the user turn, when known.
    :param api_request_id: the model request that asked for the call.
    :param telemetry_schema_version: ``"hermes.observer.v1"``, the payload's version (as in Hermes).
    :param middleware_trace: one entry (``source``, ``reason``, ``name``, ``plugin``) per
        ``tool_request`` middleware that rewrote the arguments, in order; empty when none did.

    The ids the caller did not give are ``""`` (as in Hermes).  Return ``None`` for no opinion,
    or a decision:

    * ``{"action": "block", "message": str}`` (also
      ``{"decision": "block", "reason": str}``) stops the call: the handler
      does not run and the tool result becomes ``{"error": message}``;
    * ``{"action": "modify", "args": {...}}`` (also
      ``{"decision": "modify", "tool_input": {...}}``) changes arguments;
    * ``{"action": "approve", "message": str, "rule_key": str}`` asks the
      host's approver (``Kernel(approver=...)``) before the call runs; a
      denial blocks it.

    Merge rules: a block outranks everything and the first block in plugin
    order supplies the message; modifications are merged in plugin order,
    later keys winning, and the handler and later hooks see the result;
    approvals are asked once per approving plugin, after the merge.  An
    answer of any other shape is logged and treated as no opinion.  When a
    plugin dispatches a tool with ``ctx.dispatch_tool``, ``caller_plugin``
    names it.

    Failure policy: this hook is a gate and fails closed.  A callback that
    raises blocks the call in which it raised, with a message naming the
    plugin, and is then disabled like any failing callback.
    """


@hookspec
def post_tool_call(
    tool_name: str,
    args: dict[str, Any],
    result: str,
    task_id: str | None,
    session_id: str | None,
    tool_call_id: str | None,
    turn_id: str | None,
    api_request_id: str | None,
    duration_ms: int,
    status: str,
    error_type: str | None,
    error_message: str | None,
    telemetry_schema_version: str,
    middleware_trace: list[dict[str, Any]],
) -> None:
    """Observe a finished tool call.

    Fires in ``k.tools.dispatch`` after the handler has returned (or failed)
    and before ``transform_tool_result``; for a call that a ``pre_tool_call``
    callback (or a denied approval) blocked, it fires with ``status="blocked"``
    and no ``transform_tool_result`` follows.

    :param tool_name: the tool that ran.
    :param args: a copy of the arguments it was given.
    :param result: the JSON string the handler produced (an error JSON when
        it failed or returned something other than a string, or was blocked).
    :param task_id: as for ``pre_tool_call``.
    :param session_id: as for ``pre_tool_call``.
    :param tool_call_id: as for ``pre_tool_call``.
    :param turn_id: as for ``pre_tool_call``.
    :param api_request_id: as for ``pre_tool_call``.
    :param duration_ms: wall time of the handler, in whole milliseconds (0 when blocked).
    :param status: ``"ok"``, ``"error"`` or ``"blocked"``.
    :param error_type: the exception class name when the handler failed;
        ``"plugin_block"`` when the call was blocked.
    :param error_message: the error text when the handler failed; the block message when blocked.
    :param telemetry_schema_version: as for ``pre_tool_call``.
    :param middleware_trace: as for ``pre_tool_call``.

    The return value is ignored.  Failure policy: observer (log, disable the
    callback, go on).
    """


@hookspec
def transform_tool_result(
    tool_name: str,
    args: dict[str, Any],
    result: str,
    task_id: str | None,
    session_id: str | None,
    tool_call_id: str | None,
    turn_id: str | None,
    api_request_id: str | None,
    duration_ms: int,
    status: str,
    error_type: str | None,
    error_message: str | None,
    telemetry_schema_version: str,
    middleware_trace: list[dict[str, Any]],
) -> str | None:
    """Rewrite a tool result before the model sees it.

    Fires last in ``k.tools.dispatch``, after ``post_tool_call``.

    :param tool_name: the tool that ran.
    :param args: a copy of its arguments.
    :param result: the JSON string result so far.
    :param duration_ms: wall time of the handler, in whole milliseconds.
    :param status: ``"ok"`` or ``"error"``; the other arguments are as for
        ``post_tool_call``.

    Return ``None`` to keep the result, or a string to replace it.  The first
    string in plugin order wins (an empty string is a valid replacement).  A
    replacement that is not JSON is wrapped as ``{"result": text}`` so that
    dispatch always returns JSON.  Failure policy: observer; the result stays
    as it was.
    """


# --------------------------------------------------------------------------
# Model calls and turns
# --------------------------------------------------------------------------


@hookspec
def pre_llm_call(
    session_id: str | None,
    task_id: str | None,
    turn_id: str | None,
    user_message: str,
    conversation_history: list[dict[str, Any]],
    is_first_turn: bool,
    model: str | None,
    platform: str | None,
    parent_session_id: str | None,
    sender_id: str | None,
) -> str | dict[str, Any] | None:
    """Add context to the user's message, once per user turn.

    Fires once per user turn, before the tool loop starts; the host collects
    the results with ``k.pre_llm_context(**kwargs)``.

    :param session_id: the session of the turn.
    :param task_id: the task id, when the host has one.
    :param turn_id: the id of this user turn.
    :param user_message: the user's message text.
    :param conversation_history: a copy of the messages so far (OpenAI
        message dicts), not including ``user_message``.
    :param is_first_turn: true on the first turn of a session.
    :param model: the active model name.
    :param platform: where the turn comes from (``"cli"``, ``"irc"``, ...).
    :param parent_session_id: the parent session for a subagent's turn.
    :param sender_id: the platform's id of the user who wrote the message.

    Return a non-empty string, or ``{"context": str}``, to inject text; return
    ``None`` (or an empty string) to inject nothing.  The pieces are joined
    with a blank line (``"\\n\\n"``) in plugin order and appended to the
    user's message of this turn, never to the system prompt.  Failure policy:
    observer; the failing callback contributes nothing.
    """


@hookspec
def post_llm_call(
    session_id: str | None,
    task_id: str | None,
    turn_id: str | None,
    user_message: str,
    assistant_response: str,
    conversation_history: list[dict[str, Any]],
    model: str | None,
    platform: str | None,
) -> None:
    """Observe a successful turn.

    Fires once per user turn after the tool loop has ended with a reply; it
    does not fire for a turn that failed or was interrupted.

    :param session_id: the session of the turn.
    :param task_id: the task id, when the host has one.
    :param turn_id: the id of this user turn.
    :param user_message: the user's message text, without injected context.
    :param assistant_response: the final reply text.
    :param conversation_history: a copy of the whole conversation.
    :param model: the model that answered.
    :param platform: where the turn came from.

    The return value is ignored.  Failure policy: observer.
    """


@hookspec
def transform_llm_output(
    response_text: str,
    session_id: str | None,
    model: str | None,
    platform: str | None,
) -> str | None:
    """Rewrite the model's final reply before it is shown or sent.

    Fires once per turn with a reply, after ``post_llm_call``.

    :param response_text: the reply as the model wrote it.
    :param session_id: the session of the turn.
    :param model: the model that answered.
    :param platform: where the reply goes.

    Return ``None`` or an empty string to keep the reply, or a non-empty
    string to replace it; the first non-empty string in plugin order wins.
    Failure policy: observer; the reply stays as it was.
    """


@hookspec
def pre_api_request(
    api_request_id: str,
    session_id: str | None,
    task_id: str | None,
    turn_id: str | None,
    model: str | None,
    provider: str | None,
    base_url: str | None,
    api_mode: str | None,
    message_count: int,
    tool_count: int,
    request_messages: list[dict[str, Any]],
    request: dict[str, Any],
) -> None:
    """Observe a request to the model provider before it is sent.

    Fires for every HTTP request to the model, retries included.

    :param api_request_id: a unique id shared with the matching
        ``post_api_request`` or ``api_request_error``.
    :param session_id: the session on whose behalf the request is made.
    :param task_id: the task id, when the host has one.
    :param turn_id: the turn of the agent loop the request belongs to, if any.
    :param model: the model asked.
    :param provider: the provider profile name.
    :param base_url: the endpoint base URL (never credentials).
    :param api_mode: the wire protocol, e.g. ``"chat_completions"``.
    :param message_count: how many messages the request carries.
    :param tool_count: how many tool schemas the request offers.
    :param request_messages: a copy of the messages sent.
    :param request: a copy of the request body, without secrets.

    The return value is ignored.  Failure policy: observer.
    """


@hookspec
def post_api_request(
    api_request_id: str,
    session_id: str | None,
    task_id: str | None,
    turn_id: str | None,
    model: str | None,
    provider: str | None,
    base_url: str | None,
    api_mode: str | None,
    message_count: int,
    tool_count: int,
    request_messages: list[dict[str, Any]],
    request: dict[str, Any],
    response: dict[str, Any],
    usage: dict[str, Any],
    finish_reason: str | None,
    response_model: str | None,
    assistant_tool_call_count: int,
    duration_ms: int,
    api_duration: float,
) -> None:
    """Observe a successful response from the model provider.

    :param api_request_id: the id given to ``pre_api_request``.
    :param response: a copy of the decoded response body.
    :param usage: token counts: ``input_tokens``, ``output_tokens``,
        ``total_tokens``, the cache counts and ``cost_usd`` when known, and
        Hermes' names of the same counts (``prompt_tokens``,
        ``completion_tokens``, ``reasoning_tokens``, ``request_count``).
    :param finish_reason: why the model stopped (``"stop"``,
        ``"tool_calls"``, ``"length"``...), as the provider said.
    :param response_model: the model that answered, as the provider said.
    :param assistant_tool_call_count: how many tool calls the answer holds.
    :param duration_ms: time from sending to the decoded response.
    :param api_duration: the same, in seconds (a float).

    The other arguments are as for ``pre_api_request``.  The return value is
    ignored.  Failure policy: observer.
    """


@hookspec
def api_request_error(
    api_request_id: str,
    session_id: str | None,
    task_id: str | None,
    turn_id: str | None,
    model: str | None,
    provider: str | None,
    base_url: str | None,
    api_mode: str | None,
    message_count: int,
    tool_count: int,
    request_messages: list[dict[str, Any]],
    request: dict[str, Any],
    error: str,
    status_code: int | None,
    duration_ms: int,
    attempt: int,
) -> None:
    """Observe a failed request to the model provider.

    Fires once per failed attempt, before any retry.

    :param api_request_id: the id given to ``pre_api_request``.
    :param error: a description of the failure (no credentials).
    :param status_code: the HTTP status, or ``None`` for a connection error.
    :param duration_ms: time until the failure.
    :param attempt: 1 for the first attempt, 2 for the first retry, ...

    The other arguments are as for ``pre_api_request``.  The return value is
    ignored.  Failure policy: observer.
    """


# --------------------------------------------------------------------------
# Sessions
# --------------------------------------------------------------------------


@hookspec
def on_session_start(session_id: str, model: str | None, platform: str | None) -> None:
    """A new session begins.

    Fires on the first turn of a new session, before ``pre_llm_call``.

    :param session_id: the new session's id.
    :param model: the active model name.
    :param platform: where the session lives (``"cli"``, ``"irc"``, ...).

    The return value is ignored.  Failure policy: observer.
    """


@hookspec
def on_session_end(
    session_id: str,
    completed: bool,
    interrupted: bool,
    model: str | None,
    platform: str | None,
) -> None:
    """A run of the conversation ends.

    Fires at the end of every run of a session (each ``run`` call of the
    agent loop) and when the CLI exits.

    :param session_id: the session.
    :param completed: true when the run ended with a reply.
    :param interrupted: true when the user interrupted it.
    :param model: the active model name.
    :param platform: where the session lives.

    The return value is ignored.  Failure policy: observer.
    """


@hookspec
def on_session_finalize(
    session_id: str | None,
    platform: str | None,
    old_session_id: str | None,
    new_session_id: str | None,
    reason: str | None,
) -> None:
    """The host closes a session for good.

    Fires when the CLI or the gateway finalises its active session (exit,
    shutdown, or replacement by a new session: ``/new`` and ``/reset`` fire
    it for the session that ends, before ``on_session_reset``).

    :param session_id: the session being closed, or ``None`` when there was
        none.
    :param platform: where the session lived.
    :param old_session_id: on replacement, the session being replaced.
    :param new_session_id: on replacement, the session that follows.
    :param reason: why, e.g. ``"exit"``, ``"shutdown"``, ``"reset"``.

    The return value is ignored.  Failure policy: observer.
    """


@hookspec
def on_session_reset(
    session_id: str | None,
    platform: str | None,
    reason: str | None,
    old_session_id: str | None,
    new_session_id: str | None,
) -> None:
    """The user starts over within the same conversation (``/new``, ``/reset``).

    :param session_id: the new session's id.
    :param platform: where the session lives.
    :param reason: the command or cause, e.g. ``"new"`` or ``"reset"``.
    :param old_session_id: the session that was replaced.
    :param new_session_id: the same as ``session_id``.

    The return value is ignored.  Failure policy: observer.
    """


@hookspec
def pre_verify(
    session_id: str,
    platform: str,
    model: str,
    coding: bool,
    attempt: int,
    final_response: str,
    changed_paths: list[str],
) -> dict[str, Any] | None:
    """Keep a turn going instead of letting it finish: the verification gate.

    Fires in the agent loop when a turn that ran tools is about to end with a
    final answer, at most ``agent.max_verify_nudges`` times per turn (default 3).

    :param session_id: the session of the turn (``""`` when none).
    :param platform: where the turn runs (``"cli"``, a gateway platform, ``""``).
    :param model: the model's name (``""`` when unknown).
    :param coding: ``agent.coding`` from config.yaml (the kernel cannot tell a coding session itself).
    :param attempt: how many times this turn has been kept going already (0 the first time).
    :param final_response: the answer the model would end the turn with.
    :param changed_paths: the ``path`` / ``file_path`` arguments of the turn's tool calls, sorted.

    Return ``{"action": "continue", "message": str}`` (or Claude Code's
    ``{"decision": "block", "reason": str}``) to append the answer and
    ``message`` (as a user message) to the conversation and call the model
    again; anything else lets the turn finish.  The first such answer in plugin
    order with a non-blank message wins.  Failure policy: observer.
    """


@hookspec
def pre_approval_request(
    command: str,
    description: str,
    pattern_key: str,
    pattern_keys: list[str],
    session_key: str,
    surface: str,
    tool_name: str,
    plugin: str,
    turn_id: str,
    tool_call_id: str,
    telemetry_schema_version: str,
) -> None:
    """A tool call is about to wait for a human decision (a ``pre_tool_call`` ``approve``).

    Fires in ``k.tools.dispatch`` before the host's approver (or the terminal)
    is asked.

    :param command: what is being approved, as Hermes labels a plugin rule:
        ``"<tool> (plugin approval rule)"``.
    :param description: the approving plugin's message, or a default naming it.
    :param pattern_key: ``"plugin_rule:<rule_key>"``.
    :param pattern_keys: ``[pattern_key]``.
    :param session_key: the session of the call (``""`` when none).
    :param surface: ``"cli"`` (the terminal approver) or ``"host"`` (``Kernel(approver=...)``).
    :param tool_name: the tool waiting.
    :param plugin: the plugin that asked for approval.
    :param turn_id: as for ``pre_tool_call``.
    :param tool_call_id: as for ``pre_tool_call``.
    :param telemetry_schema_version: as for ``pre_tool_call``.

    Observers only: the return value is ignored and cannot answer or veto
    the request (use ``pre_tool_call`` for that).  Failure policy: observer.
    """


@hookspec
def post_approval_response(
    command: str,
    description: str,
    pattern_key: str,
    pattern_keys: list[str],
    session_key: str,
    surface: str,
    tool_name: str,
    plugin: str,
    turn_id: str,
    tool_call_id: str,
    telemetry_schema_version: str,
    choice: str,
) -> None:
    """The human decision on a tool call is in.

    Fires right after the approver answered (or failed, which denies).

    :param choice: ``"once"`` (allowed) or ``"deny"``; the other arguments are as
        for ``pre_approval_request``.

    The return value is ignored.  Failure policy: observer.
    """


# --------------------------------------------------------------------------
# Subagents and the gateway
# --------------------------------------------------------------------------


@hookspec
def subagent_start(
    parent_session_id: str | None,
    child_session_id: str,
    child_role: str | None,
    goal: str | None,
    task_id: str | None,
    parent_turn_id: str,
    child_goal: str | None,
    parent_subagent_id: str,
    child_subagent_id: str,
) -> None:
    """A subagent is started on behalf of a session.

    Fires in ``AgentSession.delegate`` before the sub-agent's turn.

    :param parent_session_id: the session that delegated.
    :param child_session_id: the subagent's own session id.
    :param child_role: the role given to the subagent, if any.
    :param goal: the task text handed to it.
    :param task_id: the delegation's task id.
    :param parent_turn_id: the parent's turn in progress (``""`` outside a turn).
    :param child_goal: ``goal`` again, under Hermes' name.
    :param parent_subagent_id: the delegating sub-agent's id (``""`` for a top-level session).
    :param child_subagent_id: this sub-agent's id (``<parent session>/sub-<n>``).

    The return value is ignored.  Failure policy: observer.
    """


@hookspec
def subagent_stop(
    parent_session_id: str | None,
    child_session_id: str,
    child_role: str | None,
    child_summary: str | None,
    child_status: str,
    tool_call_history: list[dict[str, Any]],
    duration_ms: int,
    parent_turn_id: str,
) -> None:
    """A subagent has finished.

    Fires in ``AgentSession.delegate`` after the sub-agent's turn (also when it failed).

    :param parent_session_id: the session that delegated.
    :param child_session_id: the subagent's session id.
    :param child_role: its role, if any.
    :param child_summary: the summary it returned.
    :param child_status: ``"completed"``, ``"failed"`` or ``"interrupted"``.
    :param tool_call_history: the tool calls it made (``id``, ``tool``, ``arguments``, ``result``).
    :param duration_ms: how long it ran.
    :param parent_turn_id: as for ``subagent_start``.

    The return value is ignored.  Failure policy: observer.
    """


@hookspec
def pre_gateway_dispatch(event: Any, gateway: Any, session_store: Any) -> dict[str, Any] | None:
    """Decide on an incoming gateway message before it reaches a session.

    Fires in the gateway for every message received from a platform.

    :param event: the incoming message event (platform, chat, user, text).
    :param gateway: the running gateway.
    :param session_store: the gateway's sessions.

    Return ``None`` or ``{"action": "allow"}`` to go on,
    ``{"action": "skip", "reason": str}`` to drop the message, or
    ``{"action": "rewrite", "text": str}`` to replace its text.  The first
    recognised answer in plugin order wins.  Failure policy: observer (the
    message goes on as if the failing callback had answered ``None``).
    """


# --------------------------------------------------------------------------
# Provider slots
# --------------------------------------------------------------------------


@hookspec
def register_model_providers(register: Any) -> None:
    """Offer model provider profiles.

    Fires once per kernel, during ``k.load()``, after every plugin has been
    registered.

    :param register: call ``register(profile)`` once per provider profile.
        The profile's ``name`` is its key in the ``model_provider`` slot;
        ``model.provider`` in config selects the active one.

    The return value is ignored.  Two plugins offering the same name is an
    error naming both; the first in plugin order keeps the name.  Failure
    policy: observer; what the callback registered before it raised is kept.
    """


@hookspec
def register_memory_providers(register: Any) -> None:
    """Offer memory providers.

    Fires once per kernel, during ``k.load()``.

    :param register: call ``register(provider)`` once per provider; the
        provider's ``name`` is its key in the ``memory`` slot, and
        ``memory.provider`` in config selects the active one.

    The return value is ignored.  Duplicate names are handled as for
    ``register_model_providers``.  Failure policy: observer; what the callback
    registered before it raised is kept.
    """


@hookspec
def register_context_engines(register: Any) -> None:
    """Offer context engines (conversation compressors).

    Fires once per kernel, during ``k.load()``.

    :param register: call ``register(engine)`` once per engine; the engine's
        ``name`` is its key in the ``context_engine`` slot, and
        ``context.engine`` in config selects the active one.

    The return value is ignored.  Duplicate names are handled as for
    ``register_model_providers``.  Failure policy: observer; what the callback
    registered before it raised is kept.
    """


@hookspec
def register_image_gen_providers(register: Any) -> None:
    """Offer image generation backends.

    Fires once per kernel, during ``k.load()``.

    :param register: call ``register(provider)`` once per backend; the
        provider's ``name`` is its key in the ``image_gen`` slot, and
        ``image_gen.provider`` in config selects the active one.

    The return value is ignored.  Duplicate names are handled as for
    ``register_model_providers``.  Failure policy: observer; what the callback
    registered before it raised is kept.
    """
