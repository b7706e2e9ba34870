"""The ``plugins`` section of ``config.yaml``: which plugins load, their bounds, their entries (with
the gate of ``ctx.llm`` and ``allow_tool_override``)."""

from __future__ import annotations

from typing import Any

from ..base.schema import OWNED, flag, mapping, names

_LLM_GATE = mapping(
    {
        "allow_provider_override": flag("allow_provider_override: true"),
        "allowed_providers": names("a list of provider names", 'allowed_providers: ["*"]'),
        "allow_model_override": flag("allow_model_override: true"),
        "allowed_models": names("a list of model names", 'allowed_models: ["*"]'),
        "allow_agent_id_override": flag("allow_agent_id_override: true"),
        "allow_profile_override": flag("allow_profile_override: true"),
    },
    expected="a mapping (allow_provider_override, allowed_providers, ...)",
)

_ENTRY = mapping(
    {
        "llm": _LLM_GATE,
        "settings": mapping(values={}, expected="a mapping of the plugin's settings"),
        "config": mapping(values={}, expected="a mapping of the plugin's settings"),
        "allow_tool_override": flag("allow_tool_override: true"),
    },
    hermes=("enabled",),
    lenient=True,
    expected="a mapping (settings, llm, allow_tool_override)",
)

_PLUGINS = mapping(
    {
        "disabled": OWNED,  # read (and reported) by the kernel itself: kernel.core.kernel.plugin_choice
        "enabled": OWNED,
        "hook_timeout": OWNED,  # Kernel._seconds
        "register_timeout": OWNED,
        "entries": mapping(values=_ENTRY, expected="a mapping of plugin names to their entries"),
    },
    hermes=("hook_callback_timeout", "allow_deprecated_imports", "auto_update_check_hours", "auto_apply"),
    expected="a mapping (disabled, enabled, entries, hook_timeout, register_timeout)",
)


CONFIG_SCHEMA: dict[str, dict[str, Any]] = {"plugins": _PLUGINS}
