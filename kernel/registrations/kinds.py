"""The kinds of registration, the limits on names and labels, and the record kept for each one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The kinds of registration, as ``plugins info`` and :meth:`Registrations.of_plugin` name them.
AUXILIARY_TASKS = "auxiliary_tasks"
BROWSER_PROVIDERS = "browser_providers"
SECRET_SOURCES = "secret_sources"  # noqa: S105 (a kind, not a secret)
SLACK_ACTION_HANDLERS = "slack_action_handlers"
DASHBOARD_AUTH_PROVIDERS = "dashboard_auth_providers"
KINDS = (AUXILIARY_TASKS, BROWSER_PROVIDERS, SECRET_SOURCES, SLACK_ACTION_HANDLERS, DASHBOARD_AUTH_PROVIDERS)

#: The longest name, key or Slack ``action_id`` accepted (Slack's own limit is 255).
MAX_NAME = 255
#: The longest label, display name or description accepted.
MAX_TEXT = 1000


@dataclass(frozen=True, eq=False)
class Registration:
    """One thing a plugin registered here.

    ``name`` is the task key, the provider's or source's name, or the Slack matcher as text; ``value``
    the :class:`AuxiliaryTask`, the provider or source object, or the :class:`SlackActionHandler`;
    ``details`` the facts ``plugins info`` shows (never a secret).
    """

    kind: str
    name: str
    plugin: str
    value: Any
    details: Mapping[str, Any] = field(default_factory=dict)
