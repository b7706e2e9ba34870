"""Cloud browser providers: Hermes' ``BrowserProvider`` contract and ``ctx.register_browser_provider``."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from ..core.api import kernel_of, on_rollback, record_of
from ..core.context import live
from .checks import _attr, _missing_methods, _name, _refuse, _text
from .kinds import BROWSER_PROVIDERS, Registration

if TYPE_CHECKING:
    from ..core.context import PluginContext

#: Browser providers chosen without ``browser.cloud_provider``, when available (Hermes' order).
BROWSER_PREFERENCE = ("browser-use", "browserbase")


class BrowserProvider(abc.ABC):
    """A cloud browser backend (Hermes' ``agent.browser_provider.BrowserProvider``)."""

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """What ``browser.cloud_provider`` names it by."""

    @property
    def display_name(self) -> str:
        return self.name

    @abc.abstractmethod
    def is_available(self) -> bool:
        """Whether it can serve calls now (a cheap check, no network)."""

    @abc.abstractmethod
    def create_session(self, task_id: str) -> dict[str, object]:
        """A new session: ``session_name``, ``bb_session_id``, ``cdp_url``, ``features``."""

    @abc.abstractmethod
    def close_session(self, session_id: str) -> bool:
        """End a session; ``False`` when it could not."""

    @abc.abstractmethod
    def emergency_cleanup(self, session_id: str) -> None:
        """Best-effort teardown at exit; never raises."""

    def get_setup_schema(self) -> dict[str, Any]:
        return {"name": self.display_name, "badge": "", "tag": "", "env_vars": []}

    def is_configured(self) -> bool:
        return self.is_available()

    def provider_name(self) -> str:
        return self.display_name


_BROWSER_METHODS = ("is_available", "create_session", "close_session", "emergency_cleanup")


@live
def register_browser_provider(self: PluginContext, provider: Any) -> None:
    """Offer a cloud browser backend, chosen by ``browser.cloud_provider`` (``k.registrations``).

    An object without ``is_available``, ``create_session``, ``close_session`` and
    ``emergency_cleanup`` is ignored with a warning, as Hermes ignores one that is not a
    ``BrowserProvider``; a ``name`` that is not a non-empty string raises ``ValueError``.  A name
    registered before is replaced (noted on both plugins), and comes back when this plugin goes.
    """
    kernel, record = kernel_of(self), record_of(self)
    what = f"plugin '{record.name}': browser provider"
    missing = _missing_methods(provider, _BROWSER_METHODS, what)
    if missing:
        _refuse(
            kernel,
            record,
            BROWSER_PROVIDERS,
            f"it is not a BrowserProvider (missing: {', '.join(missing)})",
        )
        return
    name = _name(_attr(provider, "name", what, None), f"{what} name")
    try:
        display = _text(_attr(provider, "display_name", what, name), f"{what} '{name}': display_name") or name
    except ValueError:
        display = name
    registrations = kernel.registrations
    with registrations._lock:
        previous = registrations._browser_entry(name)
        entry = Registration(BROWSER_PROVIDERS, name, record.name, provider, {"display_name": display})
        on_rollback(self, registrations._add(record, entry))
    if previous is not None and previous.plugin != record.name:
        record.warnings.append(
            f"browser provider '{name}' replaces the one of plugin '{previous.plugin}' "
            "(which comes back if this plugin is unloaded)"
        )
        other = kernel.host.records.get(previous.plugin)
        if other is not None:
            other.warnings.append(
                f"browser provider '{name}' is replaced by the one of plugin '{record.name}'"
            )
        kernel.log.warning(
            "browser_provider_replaced", provider=name, plugin=record.name, replaced=previous.plugin
        )
    kernel.log.debug("browser_provider_registered", plugin=record.name, provider=name)
