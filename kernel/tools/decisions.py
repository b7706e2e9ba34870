"""``pre_tool_call`` decisions: parsing, the merge rules, and human approval."""

from __future__ import annotations

import copy
import json
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.safe_yaml import data_problem
from ..core.api import contained
from ..core.hooks import Callback, Request, propagates, safe_text

if TYPE_CHECKING:
    from ..core.kernel import Kernel

# Bounds on a call's arguments (from the model or a plugin): nesting depth, values, JSON text size.
MAX_ARGS_DEPTH = 100
MAX_ARGS_VALUES = 100_000
MAX_ARGS_CHARS = 10_000_000


@dataclass(frozen=True)
class ApprovalRequest:
    """What a host's approver is asked: may this tool call run?"""

    tool_name: str
    args: dict[str, Any]
    message: str
    plugin: str
    rule_key: str | None = None
    session_id: str | None = None
    task_id: str | None = None


Approver = Callable[[ApprovalRequest], bool]


@dataclass
class Verdict:
    """The merged decision on one tool call."""

    blocked: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    approvals: list[tuple[str, str, str | None]] = field(default_factory=list)


class MalformedDecision(ValueError):
    """An answer that is neither no opinion nor a recognised decision."""


def parse_decision(value: Any) -> tuple[str, Any] | None:
    """One callback's answer as ``(kind, payload)`` of plain values; ``None`` for no opinion.

    Raises :class:`MalformedDecision` for an answer that is neither no opinion
    nor a recognised decision (the kernel logs it and treats it as no
    opinion).  A block or an approve whose message or ``rule_key`` is not a
    string still blocks, or still asks (with an empty message and no key).
    Anything else raised while reading a hostile answer (a raising ``__eq__``,
    arguments that cannot be copied) is the callback's failure.
    """
    if value is None:
        return None
    if not issubclass(type(value), dict):
        raise MalformedDecision(f"expected a dict or None, got {type(value).__name__}")
    if "action" in value:
        action = value["action"]
    else:
        action = value.get("decision")
        # Claude Code's {"decision": "approve"} means "allow": no objection, nobody to ask.
        if action == "approve":
            return None
    if action is None or action in ("allow", "continue", "none"):
        return None
    # A block or an approve is honoured even when its other fields are malformed: a guard that wanted
    # the call stopped, or a human asked, must not be overruled by a typo (fail closed).
    if action == "block":
        message = value.get("message", value.get("reason", ""))
        return "block", str.__str__(message) if isinstance(message, str) else ""
    if action == "approve":
        message = value.get("message", value.get("reason", ""))
        rule_key = value.get("rule_key")
        rule_key = str.__str__(rule_key).strip() if isinstance(rule_key, str) else ""
        return "approve", (str.__str__(message) if isinstance(message, str) else "", rule_key or None)
    if action == "modify":
        args = value.get("args", value.get("tool_input"))
        if not isinstance(args, dict):
            raise MalformedDecision("a modify needs 'args' (or 'tool_input') as a dict")
        return "modify", copy.deepcopy(dict(args))
    raise MalformedDecision(f"unknown action {action!r} (use block, approve or modify)")


def merge_decisions(args: dict[str, Any], decisions: Iterable[tuple[str, tuple[str, Any]]]) -> Verdict:
    """Apply the merge rules to ``(plugin, decision)`` pairs given in plugin order.

    A block outranks everything (the first block's message wins);
    modifications are shallow-merged in plugin order, later keys winning; an
    ``edit`` (a callback that changed its ``args`` in place) makes its
    arguments the call's, as they stand at that point; approvals are
    collected for the approver.
    """
    verdict = Verdict(args=dict(args))
    for plugin, (kind, payload) in decisions:
        if kind == "block":
            if verdict.blocked is None:
                verdict.blocked = payload or f"tool call blocked by plugin '{plugin}'"
        elif kind == "modify":
            verdict.args.update(payload)
        elif kind == "edit":
            verdict.args = dict(payload)
        elif kind == "approve":
            message, rule_key = payload
            verdict.approvals.append((plugin, message, rule_key))
    return verdict


def terminal_approver(request: ApprovalRequest) -> bool:
    """The default approver: ask on the terminal; deny when there is no interactive terminal."""
    if not (sys.stdin and sys.stdin.isatty() and sys.stdout and sys.stdout.isatty()):
        return False
    reason = f" ({request.message})" if request.message else ""
    print(f"\nPlugin '{request.plugin}' asks before running tool '{request.tool_name}'{reason}.")
    print(f"  arguments: {request.args}")
    try:
        answer = input("Allow this tool call? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def decide_tool_call(
    kernel: Kernel, tool_name: str, args: dict[str, Any], context: dict[str, Any]
) -> Verdict:
    """Fire ``pre_tool_call``, merge the decisions, and ask the approver when one asks for it.

    The decisions are read from the whole (wrapped) call's result, as
    ``k.pm.hook.pre_tool_call`` returns it.  Each callback gets its own copy of
    the arguments as the callbacks before it left them (their ``modify``
    decisions and in-place edits); a callback that changes its copy in place
    has made a ``modify`` decision (an ``edit``).  A callback that fails, or
    whose answer or edit cannot be read, blocks the call (and is disabled).
    """
    with contained() as copying:
        snapshot = copy.deepcopy(args)
    if copying.failed:
        return Verdict(
            blocked=f"tool call to '{tool_name}' blocked: its arguments cannot be copied for the "
            f"pre_tool_call guards ({copying.error})",
            args=args,
        )
    guards = _Guards(kernel, tool_name, snapshot)
    request = Request(pairs=[], failures=[], prepare=guards.prepare, after=guards.after)
    outcome = kernel.host.engine.invoke(
        "pre_tool_call", {**context, "tool_name": tool_name, "args": snapshot}, request
    )
    # Every answer is read, so that every guard that broke the rules is disabled in this call.
    failed = [(cb, "failed") for cb in request.failures or []]
    failed.extend(guards.bad_edits.items())
    decisions: list[tuple[str, tuple[str, Any]]] = []
    edits = list(guards.edits)

    def edits_until(position: float) -> None:
        while edits and edits[0][0] <= position:
            _, cb, edited = edits.pop(0)
            decisions.append((cb.plugin, ("edit", edited)))

    for cb, value in kernel.host.engine.results_of(outcome, request):
        edits_until(guards.position.get(cb, math.inf))
        try:
            decision = guards.decision(cb, value)
        except MalformedDecision as exc:
            kernel.log.warning(
                "tool_decision_malformed",
                plugin=cb.plugin,
                tool=tool_name,
                problem=str(exc),
                value=safe_text(repr, value),
            )
            continue
        except BaseException as exc:
            if propagates(exc):
                raise
            kernel.host.engine.fail(cb, exc)
            failed.append((cb, "returned a decision that could not be read"))
            continue
        if decision is not None:
            decisions.append((cb.plugin, decision))
    edits_until(math.inf)
    if failed:
        cb, what = failed[0]
        return _guard_failed(cb, args, what)
    verdict = merge_decisions(snapshot, decisions)
    if verdict.blocked is None:
        for plugin, message, rule_key in verdict.approvals:
            asked = ApprovalRequest(
                tool_name=tool_name,
                args=copy.deepcopy(verdict.args),
                message=message,
                plugin=plugin,
                # No usable key of its own: the tool's name is the rule (as in Hermes).
                rule_key=rule_key or tool_name,
                session_id=context.get("session_id") or None,
                task_id=context.get("task_id") or None,
            )
            if not approve(kernel, asked, context):
                reason = f": {message}" if message else ""
                verdict.blocked = (
                    f"tool call to '{tool_name}' was not approved (asked by plugin '{plugin}'){reason}"
                )
                break
    return verdict


class _Guards:
    """One ``pre_tool_call`` call's arguments as the guards hand them on, callback by callback."""

    def __init__(self, kernel: Kernel, tool_name: str, snapshot: dict[str, Any]) -> None:
        self.kernel = kernel
        self.tool_name = tool_name
        self.current = snapshot
        #: Where each callback that returned stands in the call (wrappers are not there).
        self.position: dict[Callback, int] = {}
        #: ``(position, callback, arguments)`` of each in-place edit, in call order.
        self.edits: list[tuple[int, Callback, dict[str, Any]]] = []
        #: Callbacks whose edit cannot be used, and what to say about them.
        self.bad_edits: dict[Callback, str] = {}
        self._read: dict[Callback, tuple[Any, bool, Any]] = {}

    def prepare(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {**kwargs, "args": copy.deepcopy(self.current)}

    def after(self, cb: Callback, result: Any, kwargs: dict[str, Any]) -> None:
        """``cb`` returned ``result`` for the arguments in ``kwargs``: hand its edit and modify on."""
        self.position[cb] = len(self.position)
        with contained() as reading:
            edited = _edited(kwargs.get("args"), self.current)
        if reading.exc is not None:
            self.kernel.host.engine.fail(cb, reading.exc)
            self.bad_edits[cb] = (
                f"changed its args in place into arguments the kernel cannot use ({reading.error}); "
                'return {"action": "modify", "args": {...}} with JSON data instead'
            )
            return
        if edited is not None:
            before, self.current = self.current, edited
            self.edits.append((self.position[cb], cb, edited))
            try:
                keys = sorted(str(k) for k in {*edited, *before} if _differs(k, edited, before))
            except Exception:  # a host's own value that cannot be compared: the log line names no keys
                keys = []
            # An audit line (agent.log, at INFO): a plugin changed what a tool runs.
            self.kernel.host.audit.info(
                "tool_args_edited", plugin=cb.plugin, tool=self.tool_name, keys=keys[:20], counted_as="modify"
            )
        with contained() as reading:
            decision = self.decision(cb, result)
        if reading.failed:
            return  # read again, and reported, with the whole call's result
        if decision is not None and decision[0] == "modify":
            self.current = {**self.current, **decision[1]}

    def decision(self, cb: Callback, value: Any) -> tuple[str, Any] | None:
        """``parse_decision(value)``, read once per callback and answer (plugin code may run)."""
        seen = self._read.get(cb)
        if seen is None or seen[0] is not value:
            with contained() as parsing:
                parsed = parse_decision(value)
            fresh: tuple[Any, bool, Any] = (
                (value, True, parsed) if parsing.exc is None else (value, False, parsing.exc)
            )
            seen = self._read[cb] = fresh
        if not seen[1]:
            raise seen[2]
        return seen[2]


def _differs(key: Any, after: dict[str, Any], before: dict[str, Any]) -> bool:
    return key not in after or key not in before or bool(after[key] != before[key])


def _edited(given: Any, current: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments a callback left in its copy ``given`` of ``current``: ``None`` when unchanged,
    else a plain copy of them; raises ``ValueError`` when they are not bounded JSON data."""
    if type(given) is not dict or given == current:
        return None

    problem = data_problem(given, MAX_ARGS_VALUES, MAX_ARGS_DEPTH, shared_ok=True)
    if problem is not None:
        raise ValueError(f"the edited arguments hold {problem}")
    try:
        text = json.dumps(given, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the edited arguments are not JSON data: {exc}") from None
    if len(text) > MAX_ARGS_CHARS:
        raise ValueError(
            f"the edited arguments are {len(text):,} characters of JSON; at most {MAX_ARGS_CHARS:,}"
        )
    return json.loads(text)


def approve(kernel: Kernel, request: ApprovalRequest, context: dict[str, Any] | None = None) -> bool:
    """Ask the host's approver (else the terminal) about ``request``; any failure is a denial.

    Observers hear of it as in Hermes: ``pre_approval_request`` before the question,
    ``post_approval_response`` with the ``choice`` (``once`` or ``deny``) after it.
    """
    payload = approval_payload(kernel, request, context or {})
    kernel.invoke_hook("pre_approval_request", **payload)
    allowed = False
    with contained(kernel.log, "approver_failed", tool=request.tool_name) as asking:
        allowed = bool((kernel.approver or terminal_approver)(request))
    if not asking.failed:
        kernel.log.info("tool_approval", tool=request.tool_name, plugin=request.plugin, allowed=allowed)
    kernel.invoke_hook("post_approval_response", **payload, choice="once" if allowed else "deny")
    return allowed


def approval_payload(kernel: Kernel, request: ApprovalRequest, context: dict[str, Any]) -> dict[str, Any]:
    """The approval hooks' arguments, in Hermes' names (its plugin-rule form of them)."""
    pattern_key = f"plugin_rule:{request.rule_key or request.tool_name}"
    return {
        "command": f"<{request.tool_name}> (plugin approval rule)",
        "description": request.message or f"plugin '{request.plugin}' asks before '{request.tool_name}' runs",
        "pattern_key": pattern_key,
        "pattern_keys": [pattern_key],
        "session_key": request.session_id or "",
        "surface": "cli" if kernel.approver is None else "host",
        "tool_name": request.tool_name,
        "plugin": request.plugin,
        "turn_id": context.get("turn_id") or "",
        "tool_call_id": context.get("tool_call_id") or "",
        "telemetry_schema_version": context.get("telemetry_schema_version", "hermes.observer.v1"),
    }


def _guard_failed(cb: Callback, args: dict[str, Any], what: str) -> Verdict:
    return Verdict(
        blocked=(
            f"tool call blocked: the pre_tool_call hook of plugin '{cb.plugin}' {what} ({cb.error}); "
            "that hook is now disabled"
        ),
        args=args,
    )
