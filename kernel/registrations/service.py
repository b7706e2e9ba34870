"""The registrations service: ``k.registrations`` on attach, secret sources applied at the end of
``load()``, what a plugin registered dropped when it goes, and the five ``ctx`` members."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.context import ServiceContext
from ..core.services import serviceimpl
from .auxiliary import register_auxiliary_task
from .browser import register_browser_provider
from .checks import _record_names
from .dashboard import register_dashboard_auth_provider
from .kinds import SECRET_SOURCES
from .registry import Registrations
from .secret_sources import register_secret_source
from .slack import register_slack_action_handler

if TYPE_CHECKING:
    from ..core.kernel import Kernel
    from ..core.records import _Record


class Context(ServiceContext):
    """The ``ctx`` members of this service, with Hermes' signatures (each kept with its feature)."""

    register_auxiliary_task = register_auxiliary_task
    register_browser_provider = register_browser_provider
    register_secret_source = register_secret_source
    register_slack_action_handler = register_slack_action_handler
    register_dashboard_auth_provider = register_dashboard_auth_provider


@serviceimpl
def service_attach(kernel: Kernel) -> None:
    kernel.host.provide(registrations=Registrations(kernel))


@serviceimpl(tryfirst=True)
def service_load_finished(kernel: Kernel) -> None:
    # Before the other services finish the load (providers, MCP servers): they see the values.
    if kernel.registrations.all(SECRET_SOURCES):
        kernel.registrations.apply_secrets()


@serviceimpl
def service_plugin_owns(kernel: Kernel, record: _Record) -> bool:
    return bool(kernel.registrations.all(plugin=record.name))


@serviceimpl
def service_plugin_unloaded(kernel: Kernel, record: _Record) -> None:
    kernel.registrations.remove_plugin(record.name, record)
    _record_names(record).clear()


@serviceimpl
def service_shutdown(kernel: Kernel) -> None:
    # The kernel releases its whole environment itself once the plugins are dropped.
    kernel.registrations._secrets.closing = True
