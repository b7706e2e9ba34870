"""The ``gateway`` section of ``config.yaml`` (the broker, the chats' sessions, the workers).

Each platform's own section, ``gateway.platforms.<name>``, is read and checked by its adapter.
"""

from __future__ import annotations

from typing import Any

from ..base.schema import OWNED, mapping, text, words

_BROKER = mapping(
    {
        "url": text("a URL (redis://host:6379/0)", "url: redis://127.0.0.1:6379/0"),
        "prefix": {
            "type": ["string", "null"],
            "pattern": r"^[A-Za-z0-9_.\-]{1,64}$",
            "x-expected": "1 to 64 letters, digits, '_', '.' or '-'",
            "x-example": "prefix: hermes",
        },
        "claim_after": {
            "type": ["number", "null"],
            "minimum": 0.1,
            "maximum": 86400,
            "x-expected": "seconds from 0.1 to 86400",
            "x-example": "claim_after: 30",
        },
        "max_pending": {
            "type": ["integer", "null"],
            "minimum": 1,
            "x-expected": "a whole number of at least 1",
            "x-example": "max_pending: 10000",
        },
        "forget_after": {
            "type": ["number", "null"],
            "minimum": 0.1,
            "maximum": 2592000,
            "x-expected": "seconds from claim_after to 2592000 (30 days)",
            "x-example": "forget_after: 300",
        },
    },
    expected="a mapping (url, prefix, claim_after, max_pending, forget_after)",
)

_GATEWAY = mapping(
    {
        "platforms": mapping(
            values=OWNED,  # a platform's section is read and checked by its adapter
            expected="a mapping of platform names to their settings",
        ),
        "broker": _BROKER,
        "sessions": mapping(
            {
                "store": {
                    "enum": ["sqlite", "redis", None],
                    "x-expected": "sqlite or redis",
                    "x-example": "store: sqlite",
                },
                "path": text("a file name (under the home)", "path: gateway/sessions.db"),
            },
            expected="a mapping (store, path)",
        ),
        "worker": mapping(
            {
                "concurrency": {
                    "type": ["integer", "null"],
                    "minimum": 1,
                    "maximum": 1024,
                    "x-expected": "a whole number from 1 to 1024",
                    "x-example": "concurrency: 4",
                }
            },
            expected="a mapping (concurrency)",
        ),
    },
    hermes=words(
        """
        signal_interrupt_grace_timeout delivery_ledger platform_connect_timeout loop_watchdog
        loop_watchdog_probe_interval_s loop_watchdog_probe_timeout_s loop_watchdog_max_strikes
        bot_loop_guard startup_watchdog startup_watchdog_timeout_seconds write_sessions_json
        multiplex_profiles auto_multiplex_migration profile_routes scale_to_zero restart_loop_guard
        respawn_storm message_timestamps max_inbound_media_bytes trust_env strict
        media_delivery_allow_dirs trust_recent_files trust_recent_files_seconds api_server proxy_url
    """
    ),
    lenient=True,
)


CONFIG_SCHEMA: dict[str, dict[str, Any]] = {"gateway": _GATEWAY}

#: A platform's section written at the top level: where it belongs.
MOVED = {"irc": "gateway.platforms.irc"}
