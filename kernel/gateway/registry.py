"""The platforms plugins register (``k.platforms``): cheap to import, needed at every start-up.

The gateway that runs them is :mod:`kernel.gateway.runner`, imported when it is first used.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .config import PlatformConfig


class GatewayError(Exception):
    """A platform that cannot be used (unknown, not enabled, no home channel...)."""


@dataclass
class PlatformSpec:
    """One platform a plugin registered with ``ctx.register_platform``."""

    name: str
    label: str
    adapter_factory: Callable[[PlatformConfig], Any]
    check_fn: Callable[[], Any] | None
    plugin: str
    required_env: tuple[str, ...] = ()
    env_enablement_fn: Callable[[], Any] | None = None
    cron_deliver_env_var: str | None = None
    emoji: str = ""
    platform_hint: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class PlatformRegistry:
    """``k.platforms``: the platforms plugins registered, by name."""

    def __init__(self) -> None:
        self._specs: dict[str, PlatformSpec] = {}
        self._lock = threading.Lock()

    def add(self, spec: PlatformSpec) -> None:
        with self._lock:
            taken = self._specs.get(spec.name)
            if taken is not None:
                raise ValueError(
                    f"platform '{spec.name}' of plugin '{spec.plugin}' was refused: "
                    f"plugin '{taken.plugin}' already registered it"
                )
            self._specs[spec.name] = spec

    def remove(self, name: str) -> None:
        with self._lock:
            self._specs.pop(name, None)

    def remove_plugin(self, plugin: str) -> None:
        with self._lock:
            for name in [n for n, s in self._specs.items() if s.plugin == plugin]:
                del self._specs[name]

    def get(self, name: str) -> PlatformSpec:
        with self._lock:
            spec = self._specs.get(name)
        if spec is None:
            known = ", ".join(sorted(self._specs)) or "none"
            raise GatewayError(f"no platform named '{name}' (registered: {known})")
        return spec

    def all(self) -> list[PlatformSpec]:
        with self._lock:
            return [self._specs[n] for n in sorted(self._specs)]

    def __len__(self) -> int:
        return len(self._specs)
