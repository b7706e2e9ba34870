"""Auxiliary tasks: the LLM side jobs a plugin declares, each with an ``auxiliary.<key>`` section."""

from __future__ import annotations

import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.api import kernel_of, on_rollback, record_of
from ..core.context import live
from .checks import _name, _shown, _text
from .kinds import AUXILIARY_TASKS, Registration

if TYPE_CHECKING:
    from ..core.context import PluginContext

#: Hermes Agent 0.19.0's own auxiliary tasks: a plugin may not take their keys.
BUILTIN_AUXILIARY_TASKS = frozenset(
    {
        "vision",
        "compression",
        "web_extract",
        "approval",
        "mcp",
        "title_generation",
        "memory_query_rewrite",
        "tts_audio_tags",
        "skills_hub",
        "triage_specifier",
        "kanban_decomposer",
        "profile_describer",
        "curator",
    }
)
#: The routing fields every auxiliary task has, under what the plugin declares.
AUXILIARY_DEFAULTS: Mapping[str, Any] = {
    "provider": "auto",
    "model": "",
    "base_url": "",
    "api_key": "",
    "timeout": 60,
    "extra_body": {},
}

_AUX_KEY = re.compile(r"\w+", re.ASCII)


@dataclass(frozen=True)
class AuxiliaryTask:
    """An auxiliary task a plugin declared; ``defaults`` has the routing fields under the plugin's own."""

    key: str
    display_name: str
    description: str
    defaults: Mapping[str, Any]
    plugin: str

    def to_dict(self) -> dict[str, Any]:
        """Hermes' shape: ``{key, display_name, description, defaults, plugin}``."""
        return {
            "key": self.key,
            "display_name": self.display_name,
            "description": self.description,
            "defaults": dict(self.defaults),
            "plugin": self.plugin,
        }


@live
def register_auxiliary_task(
    self: PluginContext,
    key: str,
    *,
    display_name: str,
    description: str,
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """Declare an auxiliary LLM task, configured under ``auxiliary.<key>`` of ``config.yaml``.

    ``key`` is letters, digits and ``_``; one of Hermes' own tasks (``vision``, ``compression``, ...)
    or a key another plugin registered raises ``ValueError``; registering a key again replaces the
    plugin's own.  ``defaults`` go over the routing fields (``provider: auto``, ``model``,
    ``base_url``, ``api_key``, ``timeout: 60``, ``extra_body``).
    """
    kernel, record = kernel_of(self), record_of(self)
    what = f"plugin '{record.name}': auxiliary task"
    key = _name(key, f"{what} key")
    if not _AUX_KEY.fullmatch(key):
        raise ValueError(f"{what} key {_shown(key)} must hold only letters, digits and underscores")
    if key in BUILTIN_AUXILIARY_TASKS:
        raise ValueError(
            f"{what} key '{key}' is one of Hermes' own tasks; use a key of the plugin's own "
            f"(e.g. '{record.slug}_{key}')"
        )
    display_name = _text(display_name, f"{what} '{key}': display_name")
    description = _text(description, f"{what} '{key}': description")
    merged = {**AUXILIARY_DEFAULTS, "extra_body": {}}
    if defaults is not None:
        if not issubclass(type(defaults), Mapping):
            raise ValueError(f"{what} '{key}': defaults must be a mapping, not {type(defaults).__name__}")
        try:
            items = list(defaults.items())
        except Exception as exc:
            raise ValueError(f"{what} '{key}': reading defaults raised {type(exc).__name__}") from exc
        for name, value in items:
            merged[_name(name, f"{what} '{key}': a key of defaults")] = value
    registrations = kernel.registrations
    with registrations._lock:
        for entry in registrations.all(AUXILIARY_TASKS):
            if entry.name == key and entry.plugin != record.name:
                raise ValueError(f"{what} '{key}' is already registered by plugin '{entry.plugin}'")
            if entry.name == key:
                registrations._remove([entry], record)
        task = AuxiliaryTask(key, display_name, description, types.MappingProxyType(merged), record.name)
        entry = Registration(
            AUXILIARY_TASKS,
            key,
            record.name,
            task,
            {"display_name": display_name, "description": description},
        )
        on_rollback(self, registrations._add(record, entry))
    kernel.log.debug("auxiliary_task_registered", plugin=record.name, key=key)
