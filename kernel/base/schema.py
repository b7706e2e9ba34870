"""The schema of ``config.yaml``, and the check that turns what it finds into warnings with fixes.

:data:`SCHEMA` is a JSON Schema (draft 2020-12) of the keys hermes-kernel, its services and its
bundled plugins read, with the keys Hermes Agent reads from the same file (a home may be shared with
it) listed as known.  :func:`check_config` validates a parsed ``config.yaml`` with ``jsonschema`` and
answers ``(message, fix, level)`` triples:

* an unknown key: ``config.yaml: unknown key 'modle' — did you mean 'model'?`` (a warning; the
  closest known key comes from :mod:`difflib`).  In the sections Hermes Agent also fills with its own
  settings (``agent``, ``memory``, ``gateway``...) only a near miss of a known key is reported.
* a value of the wrong type or range: ``config.yaml: 'agent.max_iterations' must be a whole number
  of at least 1, not a string (write it as `max_iterations: 20`)`` (an error).

Sections that a plugin owns (``plugins.entries.<id>.settings`` and ``.config``, ``auxiliary``) and
those whose service checks them itself, with its own messages (``hooks``, ``mcp_servers``,
``tts``, ``stt``, ``plugins.disabled``...), are never flagged here.  Messages name keys, never
values that could be secrets.  The kernel imports this module only when a ``config.yaml`` it has not
checked before is loaded (the result is cached by content: see :mod:`kernel.base.config`).

Keywords of our own in the schema (ignored by ``jsonschema``): ``x-expected`` (what a value must be,
completing "must be ..."), ``x-example`` (a line that is right), ``x-unknown`` (``"lenient"``: report
an unknown key only when it is close to a known one), ``x-hermes`` (the keys of that mapping that
only Hermes Agent reads), ``x-moved`` (a key that belongs elsewhere: its right place), ``x-free`` (a
prefix of keys that are the user's own, as in Docker Compose: ``x-defaults: &defaults`` holds an
anchor for other sections to merge).
"""

from __future__ import annotations

import datetime
import difflib
from typing import Any, cast

#: At most this many findings are reported for one file (a summary line says how many more).
MAX_FINDINGS = 40
#: Keys looked at, over the whole file (an unknown one is compared with its mapping's known keys).
MAX_UNKNOWN_EXAMINED = 2_000

_DIGITS = r"^\s*[0-9]+\s*$"
_NUMBER = r"^\s*[0-9]+(\.[0-9]*)?\s*$"


# --------------------------------------------------------------------------- building blocks


def _mapping(
    properties: dict[str, Any] | None = None,
    *,
    hermes: tuple[str, ...] = (),
    lenient: bool = False,
    values: dict[str, Any] | None = None,
    expected: str = "a mapping",
    nullable: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """A mapping with known keys (``properties``, plus ``hermes``: known, not read here), or a mapping
    of names to ``values`` (then any key is allowed)."""
    schema: dict[str, Any] = {"type": ["object", "null"] if nullable else "object", "x-expected": expected}
    props = dict(properties or {})
    for key in hermes:
        props.setdefault(key, {})
    if props:
        schema["properties"] = props
    if values is not None:
        schema["additionalProperties"] = values
    elif props or not lenient:
        schema["additionalProperties"] = False
        if lenient:
            schema["x-unknown"] = "lenient"
    if hermes:
        schema["x-hermes"] = sorted(hermes)
    schema.update(extra)
    return schema


def _text(expected: str = "a string", example: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": ["string", "null"], "x-expected": expected}
    if example:
        schema["x-example"] = example
    return schema


def _flag(example: str) -> dict[str, Any]:
    return {"type": ["boolean", "null"], "x-expected": "true or false", "x-example": example}


def _whole(minimum: int, expected: str, example: str, *, strings: bool = True) -> dict[str, Any]:
    """A whole number of at least ``minimum`` (or one written in quotes, which the reader accepts)."""
    schema: dict[str, Any] = {
        "type": ["integer", "string", "null"] if strings else ["integer", "null"],
        "minimum": minimum,
        "x-expected": expected,
        "x-example": example,
    }
    if strings:
        schema["pattern"] = _DIGITS
    return schema


def _seconds(expected: str, example: str, *, maximum: float | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": ["number", "string"],
        "exclusiveMinimum": 0,
        "pattern": _NUMBER,
        "x-expected": expected,
        "x-example": example,
    }
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


def _names(expected: str, example: str) -> dict[str, Any]:
    return {
        "type": ["array", "null"],
        "items": {"type": "string", "x-expected": "a name (a string)"},
        "x-expected": expected,
        "x-example": example,
    }


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


OWNED: dict[str, Any] = {}  # checked by the service that reads it, with its own messages


# --------------------------------------------------------------------------- the sections


def _model_name(key: str) -> dict[str, Any]:
    """A model name: printable text of at most 512 characters (see kernel.providers.hermes_config)."""
    return {
        "type": ["string", "null"],
        "maxLength": 512,
        "pattern": r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]*$",
        "x-expected": "a model name (printable text, at most 512 characters)",
        "x-example": f"{key}: gpt-4o-mini",
    }


_MODEL = _mapping(
    {
        "provider": {
            **_text("a provider name (printable text, at most 200 characters)", "provider: openrouter"),
            "maxLength": 200,
            "pattern": r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]*$",
        },
        "model": _model_name("model"),
        # Hermes Agent's spellings of the model name: model.model wins, then default, then name.
        "default": _model_name("default"),
        "name": _model_name("name"),
        "base_url": _text("a URL", "base_url: http://127.0.0.1:8080/v1"),
        "api_key": _text("a string (better: the provider's variable in .env)"),
        # The variable whose key is sent to this endpoint, whatever its host (kernel.providers.keys).
        "api_key_env": _text("the name of an environment variable", "api_key_env: OPENAI_API_KEY"),
        "script": _text("a file name (the scripted provider's turns)", "script: script.yaml"),
        "timeout": _seconds("a number of seconds (more than 0)", "timeout: 60"),
        "max_retries": _whole(0, "a whole number of retries (0 or more)", "max_retries: 3"),
        "context_length": _whole(1, "a whole number of tokens (at least 1)", "context_length: 128000"),
    },
    hermes=_words(
        """
        api api_mode max_tokens reasoning_effort reasoning_echo extra_body extra_headers
        temperature top_p ssl_verify request_overrides context_window
    """
    ),
    lenient=True,
    expected="a mapping (provider, model, base_url, ...) or a model name",
    type=["object", "string", "null"],
)

_MEMORY = _mapping(
    {"provider": _text("a memory provider name", "provider: sqlite")},
    hermes=_words(
        """
        memory_enabled user_profile_enabled write_approval memory_char_limit user_char_limit
        nudge_interval
    """
    ),
    lenient=True,
)

_CONTEXT = _mapping(
    {
        "engine": _text("a context engine name", "engine: compressor"),
        "context_length": _whole(
            1, "a whole number of tokens (at least 1)", "context_length: 128000", strings=False
        ),
        "protect_first_n": _whole(
            0, "a whole number of messages (0 or more)", "protect_first_n: 3", strings=False
        ),
        "protect_last_n": _whole(
            0, "a whole number of messages (0 or more)", "protect_last_n: 20", strings=False
        ),
        "threshold_percent": {
            "type": ["number", "null"],
            "exclusiveMinimum": 0,
            "maximum": 1,
            "x-expected": "a fraction of the context (more than 0, at most 1)",
            "x-example": "threshold_percent: 0.75",
        },
    },
    hermes=("memory_trim",),
    lenient=True,
)

_IMAGE_GEN = _mapping(
    {
        "provider": _text("an image generator's name", "provider: openai-compatible"),
        "base_url": _text("a URL", "base_url: http://127.0.0.1:8080/v1"),
        "api_key": _text("a string"),
        "model": _text("a model name"),
        "response_format": _text("a response format (b64_json or url)", "response_format: b64_json"),
        "timeout": _seconds("a number of seconds (more than 0)", "timeout: 120"),
    },
    lenient=True,  # other keys are the sections of image backends (image_gen.<backend>.model)
)

_SLOT = _mapping({"provider": _text("a provider name")}, lenient=True)

_IRC = _mapping(
    {
        "enabled": _flag("enabled: true"),
        "token": {},
        "api_key": {},
        "home_channel": {},
        "extra": _mapping(expected="a mapping of the adapter's settings", values={}),
        "server": {
            "type": ["string", "number"],
            "x-expected": "a host name",
            "x-example": "server: irc.libera.chat",
        },
        "host": {"type": ["string", "number"], "x-expected": "a host name"},
        "port": {
            "type": ["integer", "string", "null"],
            "minimum": 1,
            "maximum": 65535,
            "x-expected": "a port number (1 to 65535)",
            "x-example": "port: 6697",
        },
        "tls": {"type": ["boolean", "string", "null"], "x-expected": "true or false"},
        "tls_verify": {"type": ["boolean", "string", "null"], "x-expected": "true or false"},
        "tls_ca_file": _text("a file name"),
        "password": {},
        "nick": {"type": ["string", "null"], "x-expected": "a nickname", "x-example": "nick: hermes"},
        "username": _text(),
        "realname": _text(),
        "channels": {
            "type": ["array", "string", "null"],
            "x-expected": "a list of channels",
            "x-example": 'channels: ["#hermes"]',
        },
        "encoding": _text("an encoding name", "encoding: utf-8"),
        "flood_burst": {"type": ["integer", "string", "null"], "x-expected": "a whole number of lines"},
        "flood_interval": {"type": ["number", "string", "null"], "x-expected": "a number of seconds"},
        "connect_timeout": {"type": ["number", "string", "null"], "x-expected": "a number of seconds"},
        "reconnect_delay": {"type": ["number", "string", "null"], "x-expected": "a number of seconds"},
        "reconnect_max_delay": {"type": ["number", "string", "null"], "x-expected": "a number of seconds"},
        "ping_interval": {"type": ["number", "string", "null"], "x-expected": "a number of seconds"},
        "ping_timeout": {"type": ["number", "string", "null"], "x-expected": "a number of seconds"},
        "quit_message": _text(),
        "reply_prefix": {"type": ["boolean", "string", "null"], "x-expected": "true or false"},
        "keep_formatting": {"type": ["boolean", "string", "null"], "x-expected": "true or false"},
        "ignore_nicks": {"type": ["array", "string", "null"], "x-expected": "a list of nicks"},
        "max_message_length": {"type": ["integer", "string", "null"], "x-expected": "a whole number"},
    },
    expected="a mapping of the IRC adapter's settings (see docs/irc.md)",
)

_BROKER = _mapping(
    {
        "url": _text("a URL (redis://host:6379/0)", "url: redis://127.0.0.1:6379/0"),
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

_GATEWAY = _mapping(
    {
        "platforms": _mapping(
            {"irc": _IRC},
            values=OWNED,  # another platform's section is read by its adapter
            expected="a mapping of platform names to their settings",
        ),
        "broker": _BROKER,
        "sessions": _mapping(
            {
                "store": {
                    "enum": ["sqlite", "redis", None],
                    "x-expected": "sqlite or redis",
                    "x-example": "store: sqlite",
                },
                "path": _text("a file name (under the home)", "path: gateway/sessions.db"),
            },
            expected="a mapping (store, path)",
        ),
        "worker": _mapping(
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
    hermes=_words(
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

_AGENT = _mapping(
    {
        "system_prompt": _text("a string (the system prompt)"),
        "max_iterations": _whole(1, "a whole number of at least 1", "max_iterations: 20"),
        "coding": _flag("coding: true"),
        "max_verify_nudges": _whole(0, "a whole number (0 or more)", "max_verify_nudges: 3"),
    },
    hermes=_words(
        """
        max_turns budget_warning_ratio run_budget_seconds gateway_timeout gateway_turn_lease_timeout
        agent_cache restart_drain_timeout cron_drain_timeout restart_after_turn_timeout
        build_wait_timeout api_max_retries empty_response_guard service_tier fast_auto_seconds
        tool_use_enforcement execution_guidance intent_ack_continuation stall_guards
        task_completion_guidance parallel_tool_call_guidance environment_probe bot_mode_protocol
        environment_hint coding_context coding_instructions verify_guidance verify_on_stop
        gateway_timeout_warning clarify_timeout gateway_notify_interval session_stall_timeout
        sanitizer_heal_escalation_threshold reconnect_attention_after
        gateway_auto_continue_freshness gateway_startup_restore_drain_timeout
        gateway_startup_warmup_timeout local_stream_stale_timeout image_input_mode disabled_toolsets
        reasoning_overrides reasoning_echo reasoning_effort turn_liveness
    """
    ),
    lenient=True,
)

_LLM_GATE = _mapping(
    {
        "allow_provider_override": _flag("allow_provider_override: true"),
        "allowed_providers": _names("a list of provider names", 'allowed_providers: ["*"]'),
        "allow_model_override": _flag("allow_model_override: true"),
        "allowed_models": _names("a list of model names", 'allowed_models: ["*"]'),
        "allow_agent_id_override": _flag("allow_agent_id_override: true"),
        "allow_profile_override": _flag("allow_profile_override: true"),
    },
    expected="a mapping (allow_provider_override, allowed_providers, ...)",
)

_ENTRY = _mapping(
    {
        "llm": _LLM_GATE,
        "settings": _mapping(values={}, expected="a mapping of the plugin's settings"),
        "config": _mapping(values={}, expected="a mapping of the plugin's settings"),
        "allow_tool_override": _flag("allow_tool_override: true"),
    },
    hermes=("enabled",),
    lenient=True,
    expected="a mapping (settings, llm, allow_tool_override)",
)

_PLUGINS = _mapping(
    {
        "disabled": OWNED,  # read (and reported) by the kernel itself: kernel.core.kernel.plugin_choice
        "enabled": OWNED,
        "hook_timeout": OWNED,  # Kernel._seconds
        "register_timeout": OWNED,
        "entries": _mapping(values=_ENTRY, expected="a mapping of plugin names to their entries"),
    },
    hermes=("hook_callback_timeout", "allow_deprecated_imports", "auto_update_check_hours", "auto_apply"),
    expected="a mapping (disabled, enabled, entries, hook_timeout, register_timeout)",
)

_SECRETS = _mapping(
    {"sources": _names("a list of secret source names", "sources: [onepassword]")},
    hermes=("bitwarden", "onepassword"),
    lenient=True,  # other keys are the secret sources' own sections
)

_BROWSER = _mapping(
    {"cloud_provider": _text("a browser provider name (or local)", "cloud_provider: local")},
    hermes=_words(
        """
        backend inactivity_timeout command_timeout snapshot_threshold record_sessions headed
        allow_private_urls engine auto_local_for_private_urls cdp_url use_real_profile
        real_profile_autoclose real_profile_pin allow_unsafe_evaluate restrict_evaluate
        dialog_policy dialog_timeout_s camofox extension_control
    """
    ),
    lenient=True,
)

#: Top-level keys of Hermes Agent's config.yaml that hermes-kernel does not read (hermes_cli's
#: DEFAULT_CONFIG, and sections of earlier releases).
HERMES_TOP_LEVEL = _words(
    """
    providers fallback_providers credential_pool_strategies toolsets database runtime
    max_concurrent_sessions max_live_sessions session terminal web checkpoints
    context_file_max_chars context_file_read_timeout file_read_max_chars mcp_discovery_timeout
    mcp_single_query_discovery_timeout mcp tool_output tool_loop_guardrails compression
    prompt_caching openrouter bedrock display dashboard privacy voice wake_word human_delay
    delegation prefill_messages_file goals loops moa skills curator honcho timezone slack discord
    whatsapp telegram mattermost matrix approvals command_allowlist quick_commands platform_hints
    hooks_auto_accept personalities security cron kanban bot_mode code_execution tools logging
    model_catalog model_overrides models_dev network monitoring streaming sessions onboarding
    telemetry doctor updates lsp x_search vault paste_collapse_threshold
    paste_collapse_threshold_fallback paste_collapse_char_threshold computer_use proxy desktop nous
    vertex local_runtime _config_version custom_providers fallback_model smart_model_routing
    platform_toolsets group_sessions_per_user session_reset
"""
)

SCHEMA: dict[str, Any] = _mapping(
    {
        "model": _MODEL,
        "memory": _MEMORY,
        "context": _CONTEXT,
        "image_gen": _IMAGE_GEN,
        "web_search": _SLOT,
        "video_gen": _SLOT,
        "tts": OWNED,  # kernel.surfaces.speech
        "stt": OWNED,
        "hooks": OWNED,  # kernel.surfaces.shell_hooks
        "mcp_servers": OWNED,  # kernel.surfaces.mcp
        "gateway": _GATEWAY,
        "agent": _AGENT,
        "plugins": _PLUGINS,
        "secrets": _SECRETS,
        "auxiliary": _mapping(values={}, expected="a mapping of auxiliary task names to their settings"),
        "browser": _BROWSER,
        "compat": _mapping({"hermes": OWNED}, expected="a mapping (hermes: true or false)"),
    },
    hermes=HERMES_TOP_LEVEL,
    nullable=False,
    expected="a mapping",
    **cast("dict[str, Any]", {"x-moved": {"irc": "gateway.platforms.irc"}, "x-free": "x-"}),
)
SCHEMA["$schema"] = "https://json-schema.org/draft/2020-12/schema"


# --------------------------------------------------------------------------- the check

_validator: Any = None


def check_config(data: Any, where: str = "config.yaml") -> list[tuple[str, str, str]]:
    """What is wrong in the parsed ``config.yaml`` ``data``: ``(message, fix, level)`` triples.

    ``level`` is ``"warning"`` (an unknown key) or ``"error"`` (a value of the wrong type or range);
    ``fix`` names ``where`` (the file's path).  Any data YAML can give is accepted: nothing raises.
    """
    global _validator
    if not isinstance(data, dict):
        return []
    if _validator is None:
        from jsonschema import Draft202012Validator

        _validator = Draft202012Validator(SCHEMA)
    items: list[tuple[str, str, str]] = []
    paths: set[tuple[str, ...]] = set()
    budget = [MAX_UNKNOWN_EXAMINED]
    for error in _validator.iter_errors(data):
        path = list(error.absolute_path)
        if error.validator == "additionalProperties":
            items += _unknown(error.instance, path, error.schema, where, budget)
        else:
            shown = tuple(_segment(p) for p in path)
            if shown in paths:
                continue  # one message per key (a wrong type fails several keywords)
            paths.add(shown)
            items.append(_wrong(error.instance, path, error.schema, error.validator, where))
            budget[0] -= 1
        if budget[0] <= 0:
            break
    items = sorted(set(items))  # the wrong values first, then the unknown keys, each by key
    found = items[:MAX_FINDINGS]
    if len(items) > len(found) or budget[0] <= 0:
        more = f"{len(items) - len(found)} more" if budget[0] > 0 else "more"
        found.append(
            (f"config.yaml: {more} problem(s) not shown", f"fix the ones above in {where} first", "warning")
        )
    return found


def _unknown(
    instance: Any, path: list[Any], schema: dict[str, Any], where: str, budget: list[int]
) -> list[tuple[str, str, str]]:
    if not isinstance(instance, dict):
        return []
    properties = schema.get("properties", {})
    hermes = set(schema.get("x-hermes", ()))
    lenient = schema.get("x-unknown") == "lenient"
    moved = schema.get("x-moved", {})
    known = list(properties)
    ours = [k for k in properties if k not in hermes]
    out: list[tuple[str, str, str]] = []
    for key in instance:
        if key in properties:
            continue
        if isinstance(key, str) and "x-free" in schema and key.startswith(schema["x-free"]):
            continue
        if budget[0] <= 0:
            break
        budget[0] -= 1
        dotted = _dotted([*path, key])
        if isinstance(key, bool):
            word = "true" if key else "false"
            out.append(
                (
                    f"config.yaml: unknown key '{_dotted([*path, word])}' (YAML reads an unquoted yes, no, "
                    "on, off, true or false as true or false)",
                    f"write the key in quotes in {where} if it is a name, or remove it",
                    "warning",
                )
            )
            continue
        name = str(key)
        target = moved.get(name) if isinstance(key, str) else None
        near = target or _closest(name, known, 0.8 if lenient else 0.7)
        if near is None:
            if lenient:
                continue  # perhaps another program's setting (Hermes Agent shares the file)
            listed = ", ".join(sorted(ours))
            own = (
                f"; a block kept for its anchors can be named {schema['x-free']}{name}"
                if "x-free" in schema
                else ""
            )
            out.append(
                (
                    f"config.yaml: unknown key '{dotted}' (hermes-kernel does not read it)",
                    f"remove it from {where}, or correct its spelling"
                    + (f" (the keys read here: {listed})" if listed else "")
                    + own,
                    "warning",
                )
            )
            continue
        right = target or _dotted([*path, near])
        out.append(
            (
                f"config.yaml: unknown key '{dotted}' — did you mean '{right}'?",
                f"{'move' if target else 'rename'} '{dotted}' to '{right}' in {where}",
                "warning",
            )
        )
    return out


def _closest(name: str, known: list[str], cutoff: float) -> str | None:
    folded = {k.casefold(): k for k in known}
    if name.casefold() in folded:
        return folded[name.casefold()]
    match = difflib.get_close_matches(name.casefold(), list(folded), n=1, cutoff=cutoff)
    return folded[match[0]] if match else None


def _wrong(
    value: Any, path: list[Any], schema: dict[str, Any], keyword: str, where: str
) -> tuple[str, str, str]:
    dotted = _dotted(path)
    expected = schema.get("x-expected") or _expected_of(schema)
    example = schema.get("x-example")
    shown = _kind(value, keyword)
    message = f"config.yaml: '{dotted}' must be {expected}, not {shown}"
    if example:
        message += f" (write it as `{example}`)"
    fix = f"set '{dotted}' to {expected} in {where}" + (f", e.g. `{example}`" if example else "")
    return message, fix, "error"


def _expected_of(schema: dict[str, Any]) -> str:
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    words = {
        "object": "a mapping",
        "array": "a list",
        "string": "a string",
        "integer": "a whole number",
        "number": "a number",
        "boolean": "true or false",
    }
    named = [words[k] for k in kinds if k in words]
    return " or ".join(named) or "something else"


def _kind(value: Any, keyword: str) -> str:
    """What ``value`` is, in words: its kind; for a number out of range or a string that is not a
    number, the value itself (the keys that take numbers hold no secrets)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "empty"
    if isinstance(value, int | float):
        if keyword == "type":
            return "a number"
        if isinstance(value, float):
            return f"{value:g}"
        return str(value) if abs(value) < 10**15 else "a huge number"
    if isinstance(value, str):
        return "a string" if keyword == "type" else repr(value[:30]) + ("..." if len(value) > 30 else "")
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, datetime.date):
        return "a date"
    if isinstance(value, bytes):
        return "binary data"
    if isinstance(value, set | frozenset):
        return "a set"
    return type(value).__name__


def _segment(part: Any) -> str:
    if isinstance(part, int) and not isinstance(part, bool):
        return f"[{part}]"
    text = str(part)
    if not text.isprintable() or len(text) > 60:
        text = repr(text)[1:-1][:57] + ("..." if len(text) > 57 else "")
    return text


def _dotted(path: list[Any]) -> str:
    out = ""
    for part in path:
        segment = _segment(part)
        out += segment if segment.startswith("[") or not out else "." + segment
    return out
