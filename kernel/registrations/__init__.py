"""What Hermes plugins register for their host beyond tools and providers, as a service (``k.registrations``).

Five ``ctx`` members of Hermes Agent, with its signatures and its rules:

* ``register_auxiliary_task(key, *, display_name, description, defaults=None)``: an LLM side job with its
  own ``auxiliary.<key>`` section of ``config.yaml``;
* ``register_browser_provider(provider)``: a cloud browser backend, chosen by ``browser.cloud_provider``;
* ``register_secret_source(source)``: an external secret manager whose values fill the kernel's
  environment at the end of :meth:`Kernel.load` when ``secrets.<name>.enabled`` is set (the one the kernel
  runs itself, see :meth:`Registrations.apply_secrets`);
* ``register_slack_action_handler(action_id, callback)``: a Slack Block Kit action listener;
* ``register_dashboard_auth_provider(provider)``: a login provider of a web dashboard.

The kernel has no browser tools, Slack adapter, dashboard or auxiliary-model picker: what a plugin
registers for those is kept, listed (``plugins info``) and handed to the embedding host through
``k.registrations``.  Everything is recorded against the plugin, so unloading it removes it.  The base
classes Hermes plugins subclass are here too (:class:`SecretSource`, :class:`FetchResult`,
:class:`BrowserProvider`, :class:`DashboardAuthProvider`); objects that only have the members are
accepted as well.  No value a secret source returns is ever kept here, logged or listed: only names.
"""

from .auxiliary import AUXILIARY_DEFAULTS, BUILTIN_AUXILIARY_TASKS, AuxiliaryTask
from .browser import BROWSER_PREFERENCE, BrowserProvider
from .dashboard import DashboardAuthProvider
from .kinds import (
    AUXILIARY_TASKS,
    BROWSER_PROVIDERS,
    DASHBOARD_AUTH_PROVIDERS,
    KINDS,
    MAX_NAME,
    MAX_TEXT,
    SECRET_SOURCES,
    SLACK_ACTION_HANDLERS,
    Registration,
)
from .registry import Registrations
from .secret_apply import MAX_SECRET_CHARS, MAX_SECRETS
from .secret_sources import (
    DEFAULT_FETCH_TIMEOUT,
    SECRET_SOURCE_API_VERSION,
    ErrorKind,
    FetchResult,
    SecretReport,
    SecretSource,
    SecretSourceReport,
)
from .slack import SLACK_CONSTRAINTS, SlackActionHandler

__all__ = [
    "AUXILIARY_DEFAULTS",
    "AUXILIARY_TASKS",
    "BROWSER_PREFERENCE",
    "BROWSER_PROVIDERS",
    "BUILTIN_AUXILIARY_TASKS",
    "DASHBOARD_AUTH_PROVIDERS",
    "DEFAULT_FETCH_TIMEOUT",
    "KINDS",
    "MAX_NAME",
    "MAX_SECRETS",
    "MAX_SECRET_CHARS",
    "MAX_TEXT",
    "SECRET_SOURCES",
    "SECRET_SOURCE_API_VERSION",
    "SLACK_ACTION_HANDLERS",
    "SLACK_CONSTRAINTS",
    "AuxiliaryTask",
    "BrowserProvider",
    "DashboardAuthProvider",
    "ErrorKind",
    "FetchResult",
    "Registration",
    "Registrations",
    "SecretReport",
    "SecretSource",
    "SecretSourceReport",
    "SlackActionHandler",
]
