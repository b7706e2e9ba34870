"""The kernel's built-in services: one line each (see :mod:`kernel.core.services` for the mechanism).

Adding a service is a module with ``@serviceimpl`` functions (and a
``Context`` class for the ``ctx`` members it contributes) plus one line here.
Nothing in this list is imported until a kernel needs it.
"""

from __future__ import annotations

from .core.services import Service
from .hookspecs import SLOT_HOOKS

_PROVIDER_MEMBERS = tuple(
    f"register_{slot}"
    for slot in (
        "memory_provider",
        "context_engine",
        "image_gen_provider",
        "model_provider",
        "web_search_provider",
        "video_gen_provider",
        "tts_provider",
        "transcription_provider",
    )
)

BUILTIN_SERVICES: tuple[Service, ...] = (
    Service(
        "tools",
        "kernel.tools.service",
        attributes=("tools", "middleware"),
        context=("register_tool", "dispatch_tool", "register_middleware"),
    ),
    Service(
        "commands",
        "kernel.commands",
        attributes=("commands", "cli_commands"),
        context=("register_command", "register_cli_command"),
    ),
    Service(
        "skills", "kernel.skills", attributes=("skills",), context=("register_skill",), paths=("skills",)
    ),
    Service(
        "providers",
        "kernel.providers.service",
        attributes=("providers", "slots"),
        context=_PROVIDER_MEMBERS,
        sections=("model", "memory", "context", "image_gen", "web_search", "video_gen"),
        plugin_hooks=tuple(SLOT_HOOKS),
        answers=("service_register_object",),
    ),
    Service("events", "kernel.events", attributes=("events",)),
    Service(
        "messages",
        "kernel.messages",
        attributes=("inject_message", "inbox"),
        context=("inject_message",),
    ),
    Service("llm", "kernel.llm", context=("llm",)),
    Service("platforms", "kernel.gateway.service", attributes=("platforms",), context=("register_platform",)),
    Service("gateway", "kernel.gateway.runner", attributes=("gateway",)),
    Service("compat", "kernel.compat", at_load=True),
    Service("event_hooks", "kernel.surfaces.event_hooks", paths=("hooks",)),
    Service("shell_hooks", "kernel.surfaces.shell_hooks", sections=("hooks",)),
    Service(
        "speech",
        "kernel.surfaces.speech",
        attributes=("speech",),
        sections=("tts", "stt"),
        env=("HERMES_LOCAL_STT_COMMAND",),
    ),
    Service("mcp", "kernel.surfaces.mcp", sections=("mcp_servers",)),
    Service(
        "registrations",
        "kernel.registrations.service",
        attributes=("registrations",),
        context=(
            "register_auxiliary_task",
            "register_browser_provider",
            "register_secret_source",
            "register_slack_action_handler",
            "register_dashboard_auth_provider",
        ),
    ),
)

#: The modules that declare the schema of ``config.yaml``, one per owner of sections (each with
#: ``CONFIG_SCHEMA``; see :class:`kernel.base.config.ConfigSchema`).  A section a service declares
#: (``Service.sections``) that none of them describes is that service's own to check.
CONFIG_SCHEMAS: tuple[str, ...] = (
    "kernel.core.config_schema",
    "kernel.providers.config_schema",
    "kernel.gateway.config_schema",
    "kernel.host.config_schema",
    "kernel.registrations.config_schema",
    "kernel.compat.config_schema",
)

#: Sections a bundled plugin owns, with the file of its folder (under ``extensions/``) that holds their
#: schema: checked with ``config.yaml`` like the kernel's own keys, without running the plugin.
BUNDLED_CONFIG_SCHEMAS: tuple[tuple[str, str], ...] = (
    ("gateway.platforms.irc", "platforms/irc/config_schema.json"),
)
