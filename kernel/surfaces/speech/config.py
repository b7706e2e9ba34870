"""The ``tts:`` and ``stt:`` sections of ``config.yaml``, read into providers."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...base.config import section
from .common import (
    _CONTROL,
    AUDIO_FORMATS,
    DEFAULT_AUDIO_FORMAT,
    DEFAULT_LANGUAGE,
    DEFAULT_LOCAL_MODEL,
    DEFAULT_MAX_TEXT,
    DEFAULT_PLUGIN_FORMAT,
    DEFAULT_PLUGIN_MAX_TEXT,
    DEFAULT_STT_TIMEOUT,
    DEFAULT_TTS_TIMEOUT,
    IGNORED_SETTINGS,
    LEGACY_ENV,
    LEGACY_NAME,
    STT_PLACEHOLDERS,
    STT_SETTINGS,
    TRANSCRIPT_FORMATS,
    TTS_PLACEHOLDERS,
    TTS_SETTINGS,
    SpeechError,
    TemplateError,
)
from .templates import CommandTemplate

if TYPE_CHECKING:
    pass


# --------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------


@dataclass
class _Provider:
    kind: str  # "tts" or "stt"
    name: str
    template: CommandTemplate
    key: str  # where it is configured, for messages: "tts.providers.espeak" or "HERMES_LOCAL_STT_COMMAND"
    timeout: float
    fmt: str
    voice: str | None = None
    model: str | None = None
    speed: float | int | None = None
    language: str | None = None
    max_text_length: int = DEFAULT_MAX_TEXT
    passthrough: frozenset[str] = frozenset()
    warnings: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.kind} provider '{self.name}'"

    def where(self, setting: str) -> str:
        """Where ``setting`` of this provider is configured, for messages."""
        prefix = "stt" if self.name == LEGACY_NAME and self.kind == "stt" else self.key
        return f"config.yaml: '{prefix}.{setting}'"

    def summary(self) -> str:
        return f"{self.kind}: {self.name} ({self.fmt}, `{_shorten(self.template.text, 60)}`)"


@dataclass
class _PluginChoice:
    """``tts.provider`` / ``stt.provider`` naming no command provider: a plugin's provider of that name.

    It is looked up in the provider slot when used (plugins come and go);
    ``missing`` is the configuration problem to report when no plugin offers it.
    """

    kind: str  # "tts" or "stt"
    name: str
    missing: str
    fmt: str = DEFAULT_PLUGIN_FORMAT
    voice: str | None = None
    model: str | None = None
    speed: float | int | None = None
    language: str | None = None
    max_text_length: int = DEFAULT_PLUGIN_MAX_TEXT
    warnings: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.kind} provider '{self.name}'"

    def where(self, setting: str) -> str:
        """Where ``setting`` of a plugin provider is configured, for messages."""
        if setting == "max_text_length" or (self.kind == "stt" and setting in ("model", "language")):
            return f"config.yaml: '{self.kind}.{self.name}.{setting}'"
        return f"config.yaml: '{self.kind}.{setting}'"


class _ConfigProblem(Exception):
    pass


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _where(key: str) -> str:
    return f"config.yaml: '{key}'"


def _opt_word(value: Any, key: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _ConfigProblem(f"{_where(key)} must be a string, not {type(value).__name__}")
    try:
        return check_word(str(value), key.rsplit(".", 1)[-1])
    except SpeechError as exc:
        raise _ConfigProblem(f"{_where(key)}: {exc}") from None


def _opt_speed(value: Any, key: str) -> float | int | None:
    if value is None:
        return None
    try:
        return check_speed(value)
    except SpeechError as exc:
        raise _ConfigProblem(f"{_where(key)}: {exc}") from None


def _timeout(value: Any, key: str, default: float) -> float:
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise _ConfigProblem(f"{_where(key)} must be a positive number of seconds, not {value!r}")
    return float(value)


def _choice(value: Any, key: str, choices: tuple[str, ...], default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str) or value.strip().lower().lstrip(".") not in choices:
        raise _ConfigProblem(f"{_where(key)} must be one of {', '.join(choices)}, not {value!r}")
    return value.strip().lower().lstrip(".")


def _names(value: Any, key: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _ConfigProblem(f"{_where(key)} must be a list of environment variable names")
    return frozenset(value)


def _provider_entry(cfg: Mapping[str, Any], kind: str) -> tuple[str, Any, Mapping[str, Any]] | None:
    """The selected provider's name, its ``providers`` entry (``None`` if absent) and all the entries.

    ``None`` when no provider is chosen (or, for ``stt``, when it is ``local_command``).
    """
    name = section(cfg, kind, "provider")
    providers = section(cfg, kind, "providers")
    if providers is not None and not isinstance(providers, Mapping):
        raise _ConfigProblem(
            f"config.yaml: '{kind}.providers' must be a mapping of provider names to settings"
        )
    providers = providers or {}
    if name is None:
        if providers:
            raise _ConfigProblem(
                f"config.yaml: '{kind}.provider' is not set; choose one of the defined providers: "
                + ", ".join(map(str, providers))
            )
        return None
    if not isinstance(name, str) or not name.strip():
        raise _ConfigProblem(f"config.yaml: '{kind}.provider' must be a provider name, not {name!r}")
    name = name.strip()
    if kind == "stt" and LEGACY_NAME in providers:
        raise _ConfigProblem(
            f"config.yaml: 'stt.providers.{LEGACY_NAME}': the name '{LEGACY_NAME}' is reserved for "
            f"{LEGACY_ENV}; give the provider another name"
        )
    if kind == "stt" and name == LEGACY_NAME:
        return None
    entry = providers.get(name)
    if entry is not None and not isinstance(entry, Mapping):
        raise _ConfigProblem(f"config.yaml: '{kind}.providers.{name}' must be a mapping")
    return name, entry, providers


def _not_a_command(
    cfg: Mapping[str, Any],
    kind: str,
    name: str,
    entry: Mapping[str, Any] | None,
    providers: Mapping[str, Any],
) -> str:
    """Why ``entry`` is no command provider (``""`` when it is one), as Hermes Agent decides it."""
    key = f"{kind}.providers.{name}"
    if entry is None:
        defined = ", ".join(map(str, providers)) or "none"
        # Hermes Agent also reads a command from '<kind>.<name>'; hermes-kernel only from '<kind>.providers'.
        elsewhere = section(cfg, kind, name, "command")
        moved = f"; move '{kind}.{name}.command' there" if isinstance(elsewhere, str) else ""
        return (
            f"config.yaml: '{kind}.provider' is '{name}', but there is no '{key}' command provider "
            f"(defined: {defined}{moved})"
        )
    ptype = entry.get("type", "command")
    if ptype != "command":
        return (
            f"config.yaml: '{key}.type' must be 'command' (the only provider type hermes-kernel runs "
            f"from config.yaml), not {ptype!r}"
        )
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        example = (
            '"espeak-ng -w {output_path} -f {input_path}"'
            if kind == "tts"
            else '"whisper {input_path} --output_dir {output_dir}"'
        )
        return f"config.yaml: '{key}.command' must be a non-empty command template, e.g. {example}"
    return ""


def _parse_provider(cfg: Mapping[str, Any], kind: str) -> _Provider | _PluginChoice | None:
    """The chosen provider: a command provider, else the plugin provider of that name (see Hermes Agent:
    a ``providers`` entry with a command wins over a plugin of the same name)."""
    chosen = _provider_entry(cfg, kind)
    if chosen is None:
        return None
    name, entry, providers = chosen
    missing = _not_a_command(cfg, kind, name, entry, providers)
    if missing:
        return _plugin_choice(cfg, kind, name, missing)
    key = f"{kind}.providers.{name}"
    allowed = TTS_PLACEHOLDERS if kind == "tts" else STT_PLACEHOLDERS
    try:
        template = CommandTemplate(entry["command"], allowed, in_shell=True)
    except TemplateError as exc:
        raise _ConfigProblem(f"config.yaml: '{key}.command': {exc}") from None
    passthrough = _names(entry.get("env_passthrough"), f"{key}.env_passthrough")
    provider = _build_provider(cfg, kind, name, key, entry, template, passthrough)
    known = TTS_SETTINGS if kind == "tts" else STT_SETTINGS
    for setting in entry:
        if setting in known or setting in IGNORED_SETTINGS:
            continue
        close = difflib.get_close_matches(str(setting), known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(known)})"
        provider.warnings.append(f"config.yaml: '{key}.{setting}' is not a setting; ignored{hint}")
    return provider


def _plugin_choice(cfg: Mapping[str, Any], kind: str, name: str, missing: str) -> _PluginChoice:
    """The settings Hermes Agent hands a plugin provider: ``tts.voice``, ``tts.model``, ``tts.speed``,
    ``tts.output_format`` and ``tts.<name>.max_text_length``; ``stt.<name>.model`` and
    ``stt.<name>.language`` (here also ``stt.model`` and ``stt.language``)."""
    own = section(cfg, kind, name)
    own = own if isinstance(own, Mapping) and name not in ("provider", "providers") else {}
    if kind == "tts":
        max_len = own.get("max_text_length")
        if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len <= 0:
            max_len = DEFAULT_PLUGIN_MAX_TEXT  # as Hermes Agent: a bad cap falls back to the default
        return _PluginChoice(
            "tts",
            name,
            missing,
            fmt=_choice(
                section(cfg, "tts", "output_format"),
                "tts.output_format",
                AUDIO_FORMATS,
                DEFAULT_PLUGIN_FORMAT,
            ),
            voice=_opt_word(section(cfg, "tts", "voice"), "tts.voice"),
            model=_opt_word(section(cfg, "tts", "model"), "tts.model"),
            speed=_opt_speed(section(cfg, "tts", "speed"), "tts.speed"),
            max_text_length=max_len,
        )
    model_key = f"stt.{name}.model" if own.get("model") is not None else "stt.model"
    language_key = f"stt.{name}.language" if own.get("language") is not None else "stt.language"
    return _PluginChoice(
        "stt",
        name,
        missing,
        model=_opt_word(own.get("model", section(cfg, "stt", "model")), model_key),
        language=_opt_word(own.get("language", section(cfg, "stt", "language")), language_key),
    )


def _build_provider(
    cfg: Mapping[str, Any],
    kind: str,
    name: str,
    key: str,
    entry: Mapping[str, Any],
    template: CommandTemplate,
    passthrough: frozenset[str],
) -> _Provider:
    if kind == "tts":
        max_len = entry.get("max_text_length", DEFAULT_MAX_TEXT)
        if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len <= 0:
            raise _ConfigProblem(f"config.yaml: '{key}.max_text_length' must be a positive integer")
        return _Provider(
            "tts",
            name,
            template,
            key,
            timeout=_timeout(entry.get("timeout"), f"{key}.timeout", DEFAULT_TTS_TIMEOUT),
            fmt=_choice(
                entry.get("output_format"), f"{key}.output_format", AUDIO_FORMATS, DEFAULT_AUDIO_FORMAT
            ),
            voice=_opt_word(entry.get("voice"), f"{key}.voice"),
            model=_opt_word(entry.get("model"), f"{key}.model"),
            speed=_opt_speed(entry.get("speed"), f"{key}.speed"),
            max_text_length=max_len,
            passthrough=passthrough,
        )
    return _Provider(
        "stt",
        name,
        template,
        key,
        timeout=_timeout(
            entry.get("timeout", section(cfg, "stt", "timeout")), f"{key}.timeout", DEFAULT_STT_TIMEOUT
        ),
        fmt=_choice(entry.get("format"), f"{key}.format", TRANSCRIPT_FORMATS, "txt"),
        model=_opt_word(entry.get("model", section(cfg, "stt", "model")), f"{key}.model"),
        language=_opt_word(entry.get("language", section(cfg, "stt", "language")), f"{key}.language")
        or DEFAULT_LANGUAGE,
        passthrough=passthrough,
    )


def _legacy_provider(cfg: Mapping[str, Any], command: str) -> _Provider:
    try:
        template = CommandTemplate(command, STT_PLACEHOLDERS, in_shell=False)
    except TemplateError as exc:
        raise _ConfigProblem(f"{LEGACY_ENV}: {exc}") from None
    return _Provider(
        "stt",
        LEGACY_NAME,
        template,
        LEGACY_ENV,
        timeout=_timeout(section(cfg, "stt", "timeout"), "stt.timeout", DEFAULT_STT_TIMEOUT),
        fmt="txt",
        # As Hermes Agent: stt.local.model, else its local Whisper model "base"; {model} always has a value.
        model=_opt_word(section(cfg, "stt", "model"), "stt.model")
        or _opt_word(section(cfg, "stt", "local", "model"), "stt.local.model")
        or DEFAULT_LOCAL_MODEL,
        language=_opt_word(section(cfg, "stt", "language"), "stt.language") or DEFAULT_LANGUAGE,
        passthrough=_names(section(cfg, "stt", "env_passthrough"), "stt.env_passthrough"),
    )


def check_word(value: str, what: str) -> str:
    """A voice, model or language: one line of text that cannot pass for a command-line option."""
    text = value.strip()
    if not text:
        raise SpeechError(f"{what} must not be empty")
    if len(text) > 256 or _CONTROL.search(text) or text.startswith("-"):
        raise SpeechError(
            f"{what} {value[:40]!r} is not allowed: at most 256 characters, no control characters, "
            "and it must not start with '-'"
        )
    return text


def check_speed(value: Any) -> float | int:
    """A speed: a positive finite number (numeric strings are accepted)."""
    number: float | int
    if isinstance(value, bool):
        raise SpeechError(f"speed must be a positive number, not {value!r}")
    if isinstance(value, int | float):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            try:
                number = float(value.strip())
            except ValueError:
                raise SpeechError(f"speed must be a positive number, not {value!r}") from None
    else:
        raise SpeechError(f"speed must be a positive number, not {type(value).__name__}")
    if not math.isfinite(number) or number <= 0:
        raise SpeechError(f"speed must be a positive number, not {value!r}")
    return number
