"""The check of ``config.yaml``: the building blocks of its JSON Schema, and the checker that turns
what it finds into warnings with fixes.

The schema is not written here: each owner of a section declares its fragment next to its code (a
``config_schema`` module with ``CONFIG_SCHEMA``, the top-level keys it reads and their schemas; listed in
:data:`kernel.defaults.CONFIG_SCHEMAS`), and :func:`config_schema` joins them under the top-level
mapping, with the keys Hermes Agent reads from the same file (a home may be shared with it) listed as
known.  :func:`check_config` validates a parsed ``config.yaml`` with ``jsonschema`` and answers
``(message, fix, level)`` triples:

* an unknown key: ``config.yaml: unknown key 'modle' — did you mean 'model'?`` (a warning; the
  closest known key comes from :mod:`difflib`).  In the sections Hermes Agent also fills with its own
  settings (``agent``, ``memory``, ``gateway``...) only a near miss of a known key is reported.
* a value of the wrong type or range: ``config.yaml: 'agent.max_iterations' must be a whole number
  of at least 1, not a string (write it as `max_iterations: 20`)`` (an error).

Sections that a plugin owns (``plugins.entries.<id>.settings`` and ``.config``, ``auxiliary``, a
platform's ``gateway.platforms.<name>``) and those whose service checks them itself, with its own
messages (``hooks``, ``mcp_servers``, ``tts``, ``stt``, ``plugins.disabled``...), are :data:`OWNED`:
never flagged here.  Messages name keys, never values that could be secrets.  The kernel imports this
module only when a ``config.yaml`` it has not checked before is loaded (the result is cached by
content: see :mod:`kernel.base.config`).

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
from collections.abc import Mapping
from typing import Any, cast

#: At most this many findings are reported for one file (a summary line says how many more).
MAX_FINDINGS = 40
#: Keys looked at, over the whole file (an unknown one is compared with its mapping's known keys).
MAX_UNKNOWN_EXAMINED = 2_000

_DIGITS = r"^\s*[0-9]+\s*$"
_NUMBER = r"^\s*[0-9]+(\.[0-9]*)?\s*$"
#: Text with no control, line-separator, bidi-override or lone-surrogate character.
PRINTABLE = r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]*$"


# --------------------------------------------------------------------------- building blocks


def mapping(
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


def text(expected: str = "a string", example: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": ["string", "null"], "x-expected": expected}
    if example:
        schema["x-example"] = example
    return schema


def flag(example: str) -> dict[str, Any]:
    return {"type": ["boolean", "null"], "x-expected": "true or false", "x-example": example}


def whole(minimum: int, expected: str, example: str, *, strings: bool = True) -> dict[str, Any]:
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


def seconds(expected: str, example: str, *, maximum: float | None = None) -> dict[str, Any]:
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


def names(expected: str, example: str) -> dict[str, Any]:
    return {
        "type": ["array", "null"],
        "items": {"type": "string", "x-expected": "a name (a string)"},
        "x-expected": expected,
        "x-example": example,
    }


def words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


OWNED: dict[str, Any] = {}  # checked by the service that reads it, with its own messages


# --------------------------------------------------------------------------- the sections


#: Top-level keys of Hermes Agent's config.yaml that hermes-kernel does not read (hermes_cli's
#: DEFAULT_CONFIG, and sections of earlier releases).
HERMES_TOP_LEVEL = words(
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


def config_schema(
    sections: Mapping[str, dict[str, Any]], moved: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The JSON Schema of a whole ``config.yaml``: ``sections`` (top-level key to its schema, each from
    the module of its owner; :data:`OWNED` for a section its owner checks itself), Hermes Agent's
    top-level keys known, ``moved`` (a top-level key written where another belongs: its place)."""
    schema = mapping(
        dict(sections),
        hermes=HERMES_TOP_LEVEL,
        nullable=False,
        expected="a mapping",
        **cast("dict[str, Any]", {"x-moved": dict(moved or {}), "x-free": "x-"}),
    )
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


# --------------------------------------------------------------------------- the check

# The validators of the schemas checked so far, by identity (a kernel's schema is built once).
_validators: dict[int, tuple[dict[str, Any], Any]] = {}


def check_config(
    data: Any, where: str = "config.yaml", *, schema: dict[str, Any]
) -> list[tuple[str, str, str]]:
    """What is wrong in the parsed ``config.yaml`` ``data`` by ``schema`` (:func:`config_schema`):
    ``(message, fix, level)`` triples.

    ``level`` is ``"warning"`` (an unknown key) or ``"error"`` (a value of the wrong type or range);
    ``fix`` names ``where`` (the file's path).  Any data YAML can give is accepted: nothing raises.
    """
    if not isinstance(data, dict):
        return []
    kept = _validators.get(id(schema))
    if kept is None or kept[0] is not schema:
        from jsonschema import Draft202012Validator

        kept = _validators[id(schema)] = (schema, Draft202012Validator(schema))
    validator = kept[1]
    items: list[tuple[str, str, str]] = []
    paths: set[tuple[str, ...]] = set()
    budget = [MAX_UNKNOWN_EXAMINED]
    for error in validator.iter_errors(data):
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
