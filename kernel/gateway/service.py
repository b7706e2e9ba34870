"""Platforms and the gateway as services (see :mod:`kernel.core.services`).

``platforms``: the registry of messaging platforms plugins offer
(``ctx.register_platform``, ``k.platforms``).  ``gateway``: the runner of
their adapters (``k.gateway``, ``hermes-kernel gateway run``), imported only
when it is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..core.api import kernel_of, on_rollback, record_of
from ..core.context import ServiceContext, live
from ..core.services import serviceimpl
from .registry import PlatformRegistry

if TYPE_CHECKING:
    from ..core.kernel import Kernel
    from ..core.records import _Record


class Context(ServiceContext):
    """The ``ctx.register_platform`` member of the platforms service."""

    @live
    def register_platform(
        self,
        name: str,
        label: str,
        adapter_factory: Callable[[Any], Any],
        check_fn: Callable[[], Any] | None = None,
        required_env: Iterable[str] | None = None,
        env_enablement_fn: Callable[[], Any] | None = None,
        cron_deliver_env_var: str | None = None,
        emoji: str = "",
        platform_hint: str = "",
        **extra: Any,
    ) -> None:
        """Offer a messaging platform to the gateway (see ``docs/gateway.md``).

        ``adapter_factory(config)`` builds the adapter from the platform's
        ``PlatformConfig``.  Keywords the kernel does not know are kept in the
        platform's ``extra``.  A taken name raises ``ValueError``.
        """
        from .registry import PlatformSpec

        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"register_platform: the name must be a non-empty string, not {name!r}")
        if not callable(adapter_factory):
            raise TypeError(f"register_platform({name!r}): adapter_factory must be callable")
        kernel, record = kernel_of(self), record_of(self)
        spec = PlatformSpec(
            name=name.strip().lower(),
            label=str(label or name),
            adapter_factory=adapter_factory,
            check_fn=check_fn,
            plugin=record.name,
            required_env=tuple(required_env or ()),
            env_enablement_fn=env_enablement_fn,
            cron_deliver_env_var=cron_deliver_env_var,
            emoji=emoji,
            platform_hint=platform_hint,
            extra=dict(extra),
        )
        kernel.platforms.add(spec)
        record.platforms.append(spec.name)
        on_rollback(self, lambda: kernel.platforms.remove(spec.name))
        on_rollback(self, lambda: record.platforms.remove(spec.name))


@serviceimpl
def service_attach(kernel: Kernel) -> None:
    kernel.host.provide(platforms=PlatformRegistry())


@serviceimpl
def service_plugin_unloaded(kernel: Kernel, record: _Record) -> None:
    kernel.platforms.remove_plugin(record.name)
