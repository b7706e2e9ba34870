"""Slack Block Kit action handlers: matchers as ``slack_bolt`` takes them, and their ``ctx`` member."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.api import kernel_of, on_rollback, record_of
from ..core.context import live
from .checks import _is_str, _name, _shown
from .kinds import MAX_NAME, MAX_TEXT, SLACK_ACTION_HANDLERS, Registration

if TYPE_CHECKING:
    from ..core.context import PluginContext

#: The keys a Slack constraint dict may have.
SLACK_CONSTRAINTS = frozenset({"action_id", "block_id", "type"})


class SlackActionHandler(NamedTuple):
    """A Slack action listener: unpacks as Hermes' ``(action_id, callback, plugin_name)``."""

    matcher: Any
    callback: Callable[..., Any]
    plugin: str


def _slack_matcher(action_id: Any, what: str, nested: bool = False) -> tuple[Any, str]:
    """The matcher to keep (a string, a compiled pattern, or a constraint dict) and its text."""
    if action_id is None:
        raise ValueError(f"{what}: the action_id is empty")
    if issubclass(type(action_id), re.Pattern):
        pattern = action_id.pattern
        if not _is_str(pattern):
            raise ValueError(f"{what}: the action_id pattern must be a text pattern, not bytes")
        return action_id, "re:" + _name(pattern, f"{what}: the action_id pattern", MAX_TEXT, strip=False)
    if _is_str(action_id):
        text = _name(action_id, f"{what}: the action_id", strip=False)
        return text, text
    if issubclass(type(action_id), Mapping) and not nested:
        try:
            items = list(action_id.items())
        except Exception as exc:
            raise ValueError(f"{what}: reading the constraint dict raised {type(exc).__name__}") from exc
        kept: dict[str, Any] = {}
        labels: dict[str, str] = {}
        for key, value in items:
            key = str.__str__(key) if _is_str(key) else key
            if key not in SLACK_CONSTRAINTS:
                shown = _shown(key) if _is_str(key) else type(key).__name__
                allowed = ", ".join(sorted(SLACK_CONSTRAINTS))
                raise ValueError(f"{what}: a constraint dict may have only {allowed}, not {shown}")
            kept[key], labels[key] = _slack_matcher(value, f"{what}: '{key}'", nested=True)
        if not kept:
            raise ValueError(f"{what}: the constraint dict is empty")
        return kept, ",".join(f"{k}={labels[k]}" for k in sorted(labels))
    raise ValueError(
        f"{what}: the action_id must be a string, a compiled re pattern or a constraint dict, "
        f"not {type(action_id).__name__}"
    )


def _slack_value_matches(matcher: Any, value: Any) -> bool:
    if not _is_str(value):
        return False
    if isinstance(matcher, re.Pattern):
        return matcher.search(value) is not None
    return matcher == value


def _slack_matches(matcher: Any, action: Mapping[str, Any]) -> bool:
    """Whether ``matcher`` takes ``action`` (Slack's action payload), as ``slack_bolt`` matches."""
    if isinstance(matcher, dict):
        return all(_slack_value_matches(m, action.get(key)) for key, m in matcher.items())
    return _slack_value_matches(matcher, action.get("action_id"))


@live
def register_slack_action_handler(self: PluginContext, action_id: Any, callback: Callable[..., Any]) -> None:
    """Handle a Slack Block Kit action: ``callback(ack, body, action)``, usually a coroutine function.

    ``action_id`` is a literal id, a compiled ``re`` pattern, or a dict of ``action_id``,
    ``block_id`` and ``type`` constraints, as ``slack_bolt``'s ``app.action()`` takes them.  A
    callback that is not callable, or an empty or unusable ``action_id``, raises ``ValueError``.
    """
    kernel, record = kernel_of(self), record_of(self)
    what = f"plugin '{record.name}': Slack action handler"
    if not callable(callback):
        raise ValueError(f"{what}: the callback is not callable ({type(callback).__name__})")
    matcher, label = _slack_matcher(action_id, what)
    registrations = kernel.registrations
    with registrations._lock:
        earlier = next((e for e in registrations.all(SLACK_ACTION_HANDLERS) if e.name == label), None)
        handler = SlackActionHandler(matcher, callback, record.name)
        on_rollback(
            self, registrations._add(record, Registration(SLACK_ACTION_HANDLERS, label, record.name, handler))
        )
    if earlier is not None and earlier.plugin != record.name:
        record.warnings.append(
            f"Slack action {_shown(label)} is handled by plugin '{earlier.plugin}' first: "
            "this handler runs only once that one is gone"
        )
    kernel.log.debug("slack_action_handler_registered", plugin=record.name, action=label[:MAX_NAME])
