"""``pre_tool_call`` decisions: parsing, the merge rules, and human approval."""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


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
    opinion).  Anything else raised while reading a hostile answer (a raising
    ``__eq__``, arguments that cannot be copied) is the callback's failure.
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
    if action == "block":
        message = value.get("message", value.get("reason", ""))
        if not isinstance(message, str):
            raise MalformedDecision("a block's message must be a string")
        return "block", str.__str__(message)
    if action == "approve":
        message = value.get("message", value.get("reason", ""))
        rule_key = value.get("rule_key")
        if not isinstance(message, str) or (rule_key is not None and not isinstance(rule_key, str)):
            raise MalformedDecision("an approve's message and rule_key must be strings")
        return "approve", (str.__str__(message), None if rule_key is None else str.__str__(rule_key))
    if action == "modify":
        args = value.get("args", value.get("tool_input"))
        if not isinstance(args, dict):
            raise MalformedDecision("a modify needs 'args' (or 'tool_input') as a dict")
        return "modify", copy.deepcopy(dict(args))
    raise MalformedDecision(f"unknown action {action!r} (use block, approve or modify)")


def merge_decisions(args: dict[str, Any], decisions: Iterable[tuple[str, tuple[str, Any]]]) -> Verdict:
    """Apply the merge rules to ``(plugin, decision)`` pairs given in plugin order.

    A block outranks everything (the first block's message wins);
    modifications are shallow-merged in plugin order, later keys winning;
    approvals are collected for the approver.
    """
    verdict = Verdict(args=dict(args))
    for plugin, (kind, payload) in decisions:
        if kind == "block":
            if verdict.blocked is None:
                verdict.blocked = payload or f"tool call blocked by plugin '{plugin}'"
        elif kind == "modify":
            verdict.args.update(payload)
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
