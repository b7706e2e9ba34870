"""Text to speech and speech to text through command providers declared in ``config.yaml``.

``tts.provider: NAME`` with ``tts.providers.NAME.command`` turns text into an
audio file, ``stt.provider: NAME`` with ``stt.providers.NAME.command`` turns an
audio file into text; ``HERMES_LOCAL_STT_COMMAND`` is the older, one-line form
of the second.  Any program that reads and writes files can serve.

How a command runs (the full story is in ``docs/speech.md``):

* A provider's template runs in ``/bin/sh``, because templates may use pipes
  and redirections.  The values of the placeholders never become shell source:
  each ``{name}`` is replaced by a *quoted reference* to an environment
  variable set for the child (``"${HERMES_SPEECH_INPUT_PATH}"`` outside quotes,
  ``${...}`` inside double quotes, ``'"${...}"'`` inside single quotes), so the
  shell expands it as one word and never parses it.  A file name or a voice
  with quotes, ``;`` or ``$(...)`` in it stays data.
* ``HERMES_LOCAL_STT_COMMAND`` runs without a shell: the template is split into
  arguments like a shell would, then the placeholders are filled in inside each
  argument.
* The text to speak goes through a UTF-8 file (``{input_path}``, also on
  standard input), never the command line.  Commands run in a fresh temporary
  folder, in a session of their own; a timeout ends the whole process group.
* Secret-looking variables (``*_API_KEY``, ``*_TOKEN``, ...) are removed from
  the command's environment unless listed in ``env_passthrough``, and their
  values are masked in the error messages and logs.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import read_dotenv, section
from ..log import is_secret_key
from . import end_process_group

if TYPE_CHECKING:
    from ..context import PluginContext
    from ..kernel import Kernel

SURFACE = "config:speech"
LEGACY_ENV = "HERMES_LOCAL_STT_COMMAND"
LEGACY_NAME = "local_command"
ENV_PREFIX = "HERMES_SPEECH_"
SHELL = "/bin/sh"

AUDIO_FORMATS = ("wav", "mp3", "ogg", "opus", "flac", "m4a", "aac", "amr")
TRANSCRIPT_FORMATS = ("txt", "json", "srt", "vtt")
DEFAULT_AUDIO_FORMAT = "wav"
DEFAULT_TTS_TIMEOUT = 120.0
DEFAULT_STT_TIMEOUT = 300.0
DEFAULT_LANGUAGE = "en"
DEFAULT_MAX_TEXT = 5000

TTS_PLACEHOLDERS = ("input_path", "text_path", "output_path", "format", "voice", "model", "speed")
STT_PLACEHOLDERS = ("input_path", "output_dir", "output_path", "language", "model", "format")
_ALIASES = {"text_path": "input_path"}

TTS_SETTINGS = (
    "type",
    "command",
    "output_format",
    "timeout",
    "voice",
    "model",
    "speed",
    "max_text_length",
    "env_passthrough",
)
STT_SETTINGS = ("type", "command", "format", "language", "model", "timeout", "env_passthrough")
# Settings of Hermes Agent's command providers that hermes-kernel accepts and does not use.
IGNORED_SETTINGS = ("voice_compatible", "speech_cues", "warm_command", "release_command", "normalize")

TAIL_CHARS = 500  # how much of a failed command's stderr an error shows
KILL_GRACE = 1.0  # seconds between SIGTERM and SIGKILL for a timed-out command
MAX_TRANSCRIPT_BYTES = 8 * 1024 * 1024
_SHELL_OPERATORS = frozenset({"|", "||", "&", "&&", ";", ";;", ">", ">>", "<", "<<", "2>", "2>&1", "|&"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class SpeechError(Exception):
    """Synthesis or transcription failed, or is not configured; the message says why and what to do.

    For a command that ran, ``provider``, ``command`` (the template), ``returncode``
    (``None`` when it did not finish), ``stderr`` (the tail, secrets masked) and
    ``timed_out`` are set.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        command: str | None = None,
        returncode: int | None = None,
        stderr: str = "",
        timed_out: bool = False,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.command = command
        self.returncode = returncode
        self.stderr = stderr
        self.timed_out = timed_out


class TemplateError(ValueError):
    """A command template that cannot be used (unknown placeholder, stray brace, open quote)."""


# --------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Slot:
    """A placeholder in a template, with the shell quoting context it sits in."""

    name: str
    context: str = "plain"


def _parse_braces(text: str, allowed: Iterable[str]) -> list[str | _Slot]:
    """Split ``text`` into literal strings and placeholders; ``{{`` and ``}}`` are literal braces."""
    known = tuple(allowed)
    pieces: list[str | _Slot] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "{":
            if text.startswith("{{", i):
                literal.append("{")
                i += 2
                continue
            end = text.find("}", i)
            name = text[i + 1 : end] if end != -1 else ""
            if not _IDENTIFIER.fullmatch(name):
                raise TemplateError(
                    f"'{{' at position {i} starts no placeholder; write '{{{{' for a literal brace"
                )
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean {{{close[0]}}}? " if close else ""
                listed = ", ".join("{" + k + "}" for k in known)
                raise TemplateError(
                    f"unknown placeholder {{{name}}} ({hint}known: {listed}; "
                    "write '{{' and '}}' for literal braces)"
                )
            if literal:
                pieces.append("".join(literal))
                literal = []
            pieces.append(_Slot(_ALIASES.get(name, name)))
            i = end + 1
            continue
        if ch == "}":
            if text.startswith("}}", i):
                literal.append("}")
                i += 2
                continue
            raise TemplateError(f"a single '}}' at position {i}; write '}}}}' for a literal brace")
        literal.append(ch)
        i += 1
    if literal:
        pieces.append("".join(literal))
    return pieces


# Shell quoting contexts the scanner tells apart.
_PLAIN, _SINGLE, _DOUBLE, _ANSI, _SUBST, _BACKTICK, _COMMENT = (
    "plain",
    "single",
    "double",
    "ansi",
    "subst",
    "backtick",
    "comment",
)
_WORD_START = frozenset(" \t\n;&|()<>")


def _annotate_shell(pieces: list[str | _Slot]) -> list[str | _Slot]:
    """Give each placeholder the quoting context it is in; refuse the places it cannot be put safely.

    Tracks backslashes, single and double quotes, ``$'...'``, ``$(...)`` (with
    nested parentheses), backticks and ``#`` comments.  Here-documents are not
    tracked (see docs/speech.md).
    """
    stack: list[list[Any]] = [[_PLAIN, 0]]
    escaped = False
    prev = ""  # the previous literal character ("" at the start, "w" after a placeholder)
    out: list[str | _Slot] = []
    for piece in pieces:
        if isinstance(piece, _Slot):
            top = stack[-1][0]
            if escaped:
                raise TemplateError(f"{{{piece.name}}} right after a backslash; remove the backslash")
            if prev == "$" and top not in (_SINGLE, _COMMENT):
                raise TemplateError(
                    f"'${{{piece.name}}}' is ambiguous: write {{{piece.name}}} for the placeholder "
                    "or '${{NAME}}' for a shell variable"
                )
            if top == _ANSI:
                raise TemplateError(f"{{{piece.name}}} inside $'...' quoting; use '...' or \"...\" instead")
            out.append(_Slot(piece.name, top))
            prev = "w"
            continue
        for ch in piece:
            top = stack[-1][0]
            if escaped:
                escaped = False
                prev = "w"
                continue
            if top == _COMMENT:
                if ch == "\n":
                    stack.pop()
                prev = ch
                continue
            if top == _SINGLE:
                if ch == "'":
                    stack.pop()
                prev = ch
                continue
            if top == _ANSI:
                if ch == "\\":
                    escaped = True
                elif ch == "'":
                    stack.pop()
                prev = ch
                continue
            if top == _DOUBLE:
                if ch == "\\":
                    escaped = True
                elif ch == '"':
                    stack.pop()
                elif ch == "`":
                    stack.append([_BACKTICK, 0])
                elif ch == "(" and prev == "$":
                    stack.append([_SUBST, 0])
                prev = ch
                continue
            # plain text, $(...) and `...`: words, where quotes open and # may start a comment
            if ch == "\\":
                escaped = True
            elif ch == "'":
                stack.append([_ANSI if prev == "$" else _SINGLE, 0])
            elif ch == '"':
                stack.append([_DOUBLE, 0])
            elif ch == "`":
                if top == _BACKTICK:
                    stack.pop()
                else:
                    stack.append([_BACKTICK, 0])
            elif ch == "(":
                if prev == "$":
                    stack.append([_SUBST, 0])
                elif top == _SUBST:
                    stack[-1][1] += 1
            elif ch == ")" and top == _SUBST:
                if stack[-1][1]:
                    stack[-1][1] -= 1
                else:
                    stack.pop()
            elif ch == "#" and (prev == "" or prev in _WORD_START):
                stack.append([_COMMENT, 0])
            prev = ch
        out.append(piece)
    if stack[-1][0] == _COMMENT:
        stack.pop()
    if escaped or len(stack) > 1:
        what = {
            _SINGLE: "a ' quote",
            _DOUBLE: 'a " quote',
            _ANSI: "a $' quote",
            _SUBST: "a $( substitution",
            _BACKTICK: "a ` substitution",
        }.get(stack[-1][0], "a trailing backslash")
        raise TemplateError(f"{what} is never closed")
    return out


def _env_name(name: str) -> str:
    return ENV_PREFIX + name.upper()


class CommandTemplate:
    """A parsed command template.

    ``in_shell=True``: :meth:`script` gives ``/bin/sh`` source in which every
    placeholder is a quoted reference to an environment variable (see
    :meth:`environment`).  ``in_shell=False``: :meth:`argv` splits the template
    like a shell would and fills the placeholders in inside each argument.
    """

    def __init__(self, text: str, allowed: Iterable[str], *, in_shell: bool) -> None:
        self.text = text
        self.shell = in_shell
        allowed = tuple(allowed)
        if not text.strip():
            raise TemplateError("the command is empty")
        if in_shell:
            self._pieces = _annotate_shell(_parse_braces(text, allowed))
            names = [p.name for p in self._pieces if isinstance(p, _Slot)]
            self._words: list[list[str | _Slot]] = []
        else:
            try:
                words = shlex.split(text)
            except ValueError as exc:
                raise TemplateError(f"cannot be split into arguments: {exc}") from None
            if not words:
                raise TemplateError("the command is empty")
            self._pieces = []
            self._words = [_parse_braces(word, allowed) for word in words]
            names = [p.name for word in self._words for p in word if isinstance(p, _Slot)]
        self.names: frozenset[str] = frozenset(names)

    def script(self) -> str:
        """The shell source (``in_shell=True`` only)."""
        parts: list[str] = []
        for piece in self._pieces:
            if not isinstance(piece, _Slot):
                parts.append(piece)
                continue
            ref = "${" + _env_name(piece.name) + "}"
            if piece.context == _DOUBLE:
                parts.append(ref)
            elif piece.context == _SINGLE:
                parts.append(f"'\"{ref}\"'")
            else:
                parts.append(f'"{ref}"')
        return "".join(parts)

    def environment(self, values: Mapping[str, str]) -> dict[str, str]:
        """The variables the script refers to, for the placeholders it uses."""
        return {_env_name(name): values[name] for name in self.names}

    def argv(self, values: Mapping[str, str]) -> list[str]:
        """The arguments (``in_shell=False`` only), each placeholder replaced by its value."""
        return ["".join(p if isinstance(p, str) else values[p.name] for p in word) for word in self._words]

    def program(self) -> str | None:
        """The program the command starts with, as far as can be told (for a PATH check)."""
        try:
            words = shlex.split(self.text if self.shell else shlex.join(self.argv(_Dummy())))
        except ValueError:
            return None
        for word in words:
            if _ASSIGNMENT.match(word):  # a VAR=value prefix
                continue
            if any(c in word for c in "{}$`|;&<>()"):
                return None
            return word
        return None

    def shell_operators(self) -> list[str]:
        """Arguments that look like shell syntax (they are passed on literally without a shell)."""
        return [
            "".join(p for p in word if isinstance(p, str))
            for word in self._words
            if len(word) == 1 and isinstance(word[0], str) and word[0] in _SHELL_OPERATORS
        ]


class _Dummy(dict):  # type: ignore[type-arg]
    def __missing__(self, key: str) -> str:
        return "x"


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


def _provider_entry(cfg: Mapping[str, Any], kind: str) -> tuple[str, Mapping[str, Any]] | None:
    """The selected provider's name and settings, ``None`` when none is chosen."""
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
    if entry is None:
        defined = ", ".join(map(str, providers)) or "none"
        raise _ConfigProblem(
            f"config.yaml: '{kind}.provider' is '{name}', but there is no '{kind}.providers.{name}' "
            f"(defined: {defined}); hermes-kernel runs command providers only"
        )
    if not isinstance(entry, Mapping):
        raise _ConfigProblem(f"config.yaml: '{kind}.providers.{name}' must be a mapping")
    return name, entry


def _parse_provider(cfg: Mapping[str, Any], kind: str) -> _Provider | None:
    chosen = _provider_entry(cfg, kind)
    if chosen is None:
        return None
    name, entry = chosen
    key = f"{kind}.providers.{name}"
    ptype = entry.get("type", "command")
    if ptype != "command":
        raise _ConfigProblem(
            f"config.yaml: '{key}.type' must be 'command' (the only provider type hermes-kernel runs), "
            f"not {ptype!r}"
        )
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        raise _ConfigProblem(
            f"config.yaml: '{key}.command' must be a non-empty command template, e.g. "
            + (
                '"espeak-ng -w {output_path} -f {input_path}"'
                if kind == "tts"
                else '"whisper {input_path} --output_dir {output_dir}"'
            )
        )
    allowed = TTS_PLACEHOLDERS if kind == "tts" else STT_PLACEHOLDERS
    try:
        template = CommandTemplate(command, allowed, in_shell=True)
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
        model=_opt_word(section(cfg, "stt", "model"), "stt.model"),
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


# --------------------------------------------------------------------------
# Audio and transcript files
# --------------------------------------------------------------------------


def sniff_audio(path: Path) -> str | None:
    """The audio format a file's first bytes announce (``wav``, ``mp3``, ...), ``None`` if unknown."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return None
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "wav"
    if head[:4] == b"OggS":
        return "opus" if b"OpusHead" in head else "ogg"
    if head[:4] == b"fLaC":
        return "flac"
    if head[:6] == b"#!AMR\n":
        return "amr"
    if head[4:8] == b"ftyp":
        return "m4a"
    if head[:3] == b"ID3":
        return "mp3"
    if len(head) >= 2 and head[0] == 0xFF:
        if head[1] & 0xF6 == 0xF0:
            return "aac"
        if head[1] & 0xE0 == 0xE0 and (head[1] >> 1) & 0x3:
            return "mp3"
    return None


_CUE_INDEX = re.compile(r"^\d+$")
_TAG = re.compile(r"<[^>]+>")


def _subtitle_text(text: str) -> str:
    """The spoken words of an SRT or WebVTT file: cue lines without numbers, timings and headers."""
    lines: list[str] = []
    skip_block = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            skip_block = False
            continue
        if skip_block or line.startswith(("WEBVTT", "NOTE", "STYLE", "REGION")):
            skip_block = True
            continue
        if "-->" in line or _CUE_INDEX.match(line):
            continue
        lines.append(_TAG.sub("", line))
    return " ".join(" ".join(lines).split())


def parse_transcript(text: str, fmt: str) -> str:
    """The plain text of a transcript in ``txt``, ``json`` (a ``text`` field), ``srt`` or ``vtt``."""
    if fmt == "json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SpeechError(f"the transcript is not valid JSON ({exc})") from None
        if isinstance(data, str):
            return data.strip()
        if isinstance(data, Mapping) and isinstance(data.get("text"), str):
            return str(data["text"]).strip()
        if isinstance(data, Mapping) and isinstance(data.get("segments"), list):
            parts = [s.get("text", "") for s in data["segments"] if isinstance(s, Mapping)]
            return " ".join(" ".join(str(p) for p in parts).split())
        raise SpeechError("the JSON transcript has no 'text' string")
    if fmt in ("srt", "vtt"):
        return _subtitle_text(text)
    return text.strip()


def _read_text(path: Path) -> str:
    with open(path, "rb") as f:
        data = f.read(MAX_TRANSCRIPT_BYTES)
    return data.decode("utf-8", errors="replace")


def _tail(path: Path) -> str:
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            f.seek(max(0, size - TAIL_CHARS * 4))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace").strip()
    return text[-TAIL_CHARS:]


# --------------------------------------------------------------------------
# Running a command
# --------------------------------------------------------------------------


def _secret_values() -> list[str]:
    values = {v for k, v in os.environ.items() if is_secret_key(k) and len(v) >= 4}
    return sorted(values, key=len, reverse=True)


def mask_secrets(text: str) -> str:
    """``text`` with the value of every secret-looking environment variable replaced by ``***``."""
    for value in _secret_values():
        text = text.replace(value, "***")
    return text


def _child_environment(
    passthrough: frozenset[str], extra: Mapping[str, str], environ: Mapping[str, str]
) -> dict[str, str]:
    env = {
        k: v
        for k, v in environ.items()
        if not k.startswith(ENV_PREFIX) and (k in passthrough or not is_secret_key(k))
    }
    env.update(extra)
    return env


@dataclass
class _Ran:
    returncode: int
    stderr: str
    seconds: float


# --------------------------------------------------------------------------
# The service
# --------------------------------------------------------------------------


class Speech:
    """``k.speech``: the configured text-to-speech and speech-to-text providers.

    The configuration is read once, when this object is made; problems found
    there are in :attr:`problems` (and in ``k.problems`` after ``k.load()``).
    """

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self.audio_dir: Path = kernel.home / "cache" / "audio"
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self._tts_problem: str | None = None
        self._stt_problem: str | None = None
        self._tts: _Provider | None = None
        self._stt: _Provider | None = None
        cfg = kernel.config
        try:
            if self._section(cfg, "tts"):
                self._tts = _parse_provider(cfg, "tts")
        except _ConfigProblem as exc:
            self._tts_problem = str(exc)
            self.problems.append(self._tts_problem)
        try:
            if self._section(cfg, "stt"):
                self._stt = _parse_provider(cfg, "stt")
            if self._stt is None:
                self._stt = self._legacy(cfg)
        except _ConfigProblem as exc:
            self._stt_problem = str(exc)
            self.problems.append(self._stt_problem)
        for provider in (self._tts, self._stt):
            if provider is not None:
                self.warnings.extend(provider.warnings)
                self.warnings.extend(self._check_program(provider))

    # -- status ------------------------------------------------------------------

    @property
    def tts_provider(self) -> str | None:
        """The name of the usable text-to-speech provider, ``None`` when there is none."""
        return self._tts.name if self._tts else None

    @property
    def stt_provider(self) -> str | None:
        """The name of the usable speech-to-text provider (``local_command`` for the legacy variable)."""
        return self._stt.name if self._stt else None

    def status(self) -> dict[str, Any]:
        """What is configured: per direction the provider, its command, format and timeout, or the problem."""

        def one(provider: _Provider | None, problem: str | None) -> dict[str, Any]:
            if provider is None:
                return {"provider": None, "problem": problem}
            row: dict[str, Any] = {
                "provider": provider.name,
                "configured_at": provider.key,
                "command": provider.template.text,
                "shell": provider.template.shell,
                "format": provider.fmt,
                "timeout": provider.timeout,
                "placeholders": sorted(provider.template.names),
                "problem": None,
            }
            extra = ("voice", "model", "speed") if provider.kind == "tts" else ("language", "model")
            row.update({k: getattr(provider, k) for k in extra})
            return row

        return {
            "tts": one(self._tts, self._tts_problem),
            "stt": one(self._stt, self._stt_problem),
            "audio_dir": str(self.audio_dir),
            "warnings": list(self.warnings),
        }

    def describe(self) -> str:
        """A one-line status for ``plugins list`` and doctor."""
        parts = []
        for kind, provider, problem in (
            ("tts", self._tts, self._tts_problem),
            ("stt", self._stt, self._stt_problem),
        ):
            if provider is not None:
                parts.append(provider.summary())
            elif problem:
                parts.append(f"{kind}: not available (configuration problem)")
        return "; ".join(parts)

    # -- text to speech --------------------------------------------------------

    def synthesize(
        self,
        text: str,
        *,
        voice: str | None = None,
        model: str | None = None,
        speed: float | int | str | None = None,
        output_format: str | None = None,
    ) -> Path:
        """Speak ``text`` into a new audio file under ``<home>/cache/audio/`` and return its path.

        ``voice``, ``model`` and ``speed`` override the provider's settings for
        this call (ignored when its command has no such placeholder);
        ``output_format`` needs a command with ``{format}``.  Raises
        :class:`SpeechError`.
        """
        tts = self._tts
        if tts is None:
            raise SpeechError(
                self._tts_problem
                or "no text-to-speech provider is configured: set 'tts.provider' and "
                f"'tts.providers.<name>.command' in {self._kernel.home / 'config.yaml'}"
            )
        if not isinstance(text, str):
            raise SpeechError(f"the text to speak must be a string, not {type(text).__name__}")
        if not text.strip():
            raise SpeechError("nothing to say: the text is empty")
        if len(text) > tts.max_text_length:
            raise SpeechError(
                f"the text has {len(text)} characters; {tts.label} takes at most {tts.max_text_length} "
                f"({tts.where('max_text_length')})"
            )
        fmt = tts.fmt
        if output_format is not None:
            try:
                fmt = _choice(output_format, "output_format", AUDIO_FORMATS, tts.fmt)
            except _ConfigProblem as exc:
                raise SpeechError(str(exc).replace("config.yaml: ", "")) from None
            if fmt != tts.fmt and "format" not in tts.template.names:
                raise SpeechError(
                    f"{tts.label} writes {tts.fmt}: its command has no {{format}} placeholder, so it "
                    f"cannot be asked for {fmt}"
                )
        values: dict[str, str] = {"format": fmt}
        chosen = {
            "voice": check_word(str(voice), "voice") if voice is not None else tts.voice,
            "model": check_word(str(model), "model") if model is not None else tts.model,
            "speed": check_speed(speed) if speed is not None else tts.speed,
        }
        for key, value in chosen.items():
            if value is not None:
                values[key] = str(value)
        self._require(tts, values)

        self.audio_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        output = (self.audio_dir / f"tts-{stamp}-{os.urandom(6).hex()}.{fmt}").resolve()
        with tempfile.TemporaryDirectory(prefix="hermes-tts-", ignore_cleanup_errors=True) as tmp:
            work = Path(tmp)
            text_file = work / "input.txt"
            text_file.write_text(text, encoding="utf-8")
            values["input_path"] = str(text_file)
            values["output_path"] = str(output)
            to_stdout = "output_path" not in tts.template.names
            stdout = output if to_stdout else work / "stdout.log"
            try:
                ran = self._run(
                    tts, values, cwd=work, stdin=text_file, stdout=stdout, stderr=work / "stderr.log"
                )
                if ran.returncode != 0:
                    raise self._failure(tts, f"exited with status {ran.returncode}", ran, stdout, to_stdout)
                size = output.stat().st_size if output.is_file() else 0
                if size == 0:
                    where = "on its standard output" if to_stdout else f"to {{output_path}} ({output})"
                    raise self._failure(tts, f"wrote no audio {where}", ran, stdout, to_stdout)
            except BaseException:
                output.unlink(missing_ok=True)
                raise
        detected = sniff_audio(output)
        if detected is not None and detected != fmt and {detected, fmt} != {"ogg", "opus"}:
            self._kernel.log.warning(
                "tts_format_mismatch", provider=tts.name, declared=fmt, detected=detected, path=str(output)
            )
        self._kernel.log.info(
            "tts_done", provider=tts.name, chars=len(text), bytes=size, seconds=round(ran.seconds, 3)
        )
        return output

    # -- speech to text --------------------------------------------------------

    def transcribe(
        self, path: str | os.PathLike[str], *, language: str | None = None, model: str | None = None
    ) -> str:
        """The text spoken in the audio file ``path``.  Raises :class:`SpeechError`."""
        stt = self._stt
        if stt is None:
            raise SpeechError(
                self._stt_problem
                or "no speech-to-text provider is configured: set 'stt.provider' and "
                f"'stt.providers.<name>.command' in {self._kernel.home / 'config.yaml'} "
                f"(or the {LEGACY_ENV} environment variable)"
            )
        try:
            source = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
            is_file = source.is_file()
        except (TypeError, ValueError) as exc:
            raise SpeechError(f"not a usable audio file path: {path!r} ({exc})") from None
        if not is_file:
            raise SpeechError(f"no such audio file: {source}")
        values: dict[str, str] = {"input_path": str(source), "format": stt.fmt}
        lang = check_word(str(language), "language") if language is not None else stt.language
        mod = check_word(str(model), "model") if model is not None else stt.model
        if lang is not None:
            values["language"] = lang
        if mod is not None:
            values["model"] = mod
        self._require(stt, values)
        with tempfile.TemporaryDirectory(prefix="hermes-stt-", ignore_cleanup_errors=True) as tmp:
            work = Path(tmp)
            out_dir = work / "output"
            out_dir.mkdir()
            out_path = out_dir / f"transcript.{stt.fmt}"
            values["output_dir"] = str(out_dir)
            values["output_path"] = str(out_path)
            stdout = work / "stdout.log"
            ran = self._run(stt, values, cwd=out_dir, stdin=None, stdout=stdout, stderr=work / "stderr.log")
            if ran.returncode != 0:
                raise self._failure(stt, f"exited with status {ran.returncode}", ran, stdout, False)
            written = self._transcript_file(out_dir, out_path, source, stt.fmt)
            if written is not None:
                raw = _read_text(written)
            else:
                raw = _read_text(stdout) if stdout.is_file() else ""
                if not raw.strip():
                    raise self._failure(
                        stt,
                        f"wrote no transcript (no {{output_path}}, no .{stt.fmt} file in {{output_dir}}, "
                        "nothing on standard output)",
                        ran,
                        stdout,
                        False,
                    )
            try:
                text = parse_transcript(raw, stt.fmt)
            except SpeechError as exc:
                raise SpeechError(
                    f"{stt.label}: {exc}", provider=stt.name, command=stt.template.text
                ) from None
        self._kernel.log.info(
            "stt_done", provider=stt.name, chars=len(text), seconds=round(ran.seconds, 3), source=source.name
        )
        return text

    @staticmethod
    def _transcript_file(out_dir: Path, out_path: Path, source: Path, fmt: str) -> Path | None:
        if out_path.is_file():
            return out_path
        found = sorted(p for p in out_dir.iterdir() if p.is_file() and p.suffix.lower() == f".{fmt}")
        if not found:
            return None
        for candidate in found:
            if candidate.stem == source.stem:
                return candidate
        return max(found, key=lambda p: p.stat().st_mtime)

    # -- internals -------------------------------------------------------------

    @staticmethod
    def _section(cfg: Mapping[str, Any], kind: str) -> bool:
        value = cfg.get(kind)
        if value is None:
            return False
        if not isinstance(value, Mapping):
            raise _ConfigProblem(f"config.yaml: '{kind}' must be a mapping (with 'provider' and 'providers')")
        return True

    def _legacy(self, cfg: Mapping[str, Any]) -> _Provider | None:
        chosen = section(cfg, "stt", "provider")
        command = self._kernel.environ.get(LEGACY_ENV) or read_dotenv(self._kernel.home).get(LEGACY_ENV)
        if chosen is not None and chosen != LEGACY_NAME:
            return None
        if not command or not command.strip():
            if chosen == LEGACY_NAME:
                raise _ConfigProblem(
                    f"config.yaml: 'stt.provider' is '{LEGACY_NAME}', but {LEGACY_ENV} is not set "
                    f"(set it in the environment or {self._kernel.home / '.env'})"
                )
            return None
        provider = _legacy_provider(cfg, command)
        operators = provider.template.shell_operators()
        if operators:
            self.warnings.append(
                f"{LEGACY_ENV} runs without a shell, so {', '.join(repr(o) for o in operators)} is passed "
                "to the program as an argument; define 'stt.providers.<name>.command' for shell syntax"
            )
        return provider

    @staticmethod
    def _check_program(provider: _Provider) -> list[str]:
        """A warning when the command's program cannot be found (it may still appear before a call)."""
        program = provider.template.program()
        if program is None:
            return []
        if "/" in program:
            found = os.access(os.path.expanduser(program), os.X_OK)
        else:
            found = shutil.which(program) is not None or (
                provider.template.shell and program in _SHELL_BUILTINS
            )
        if found:
            return []
        where = provider.where("command") if provider.name != LEGACY_NAME else LEGACY_ENV
        return [f"{provider.label}: the program '{program}' of {where} was not found"]

    @staticmethod
    def _require(provider: _Provider, values: Mapping[str, str]) -> None:
        missing = sorted(provider.template.names - set(values) - {"input_path", "output_path", "output_dir"})
        if missing:
            name = missing[0]
            raise SpeechError(
                f"{provider.label}: the command uses {{{name}}} but no {name} was given: pass {name}= "
                f"or set {provider.where(name)}"
            )

    def _run(
        self,
        provider: _Provider,
        values: Mapping[str, str],
        *,
        cwd: Path,
        stdin: Path | None,
        stdout: Path,
        stderr: Path,
    ) -> _Ran:
        """Run the command to its end (or its timeout); its output goes to the files ``stdout``/``stderr``."""
        template = provider.template
        for name, value in values.items():
            if "\x00" in value:
                raise SpeechError(f"{provider.label}: the {name} contains a NUL character")
        if template.shell:
            argv = [SHELL, "-c", template.script()]
            env = _child_environment(provider.passthrough, template.environment(values), self._kernel.environ)
        else:
            argv = template.argv(values)
            env = _child_environment(provider.passthrough, {}, self._kernel.environ)
        started = time.monotonic()
        with (
            open(stdin if stdin is not None else os.devnull, "rb") as fin,
            open(stdout, "wb") as fout,
            open(stderr, "wb") as ferr,
        ):
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=fin,
                    stdout=fout,
                    stderr=ferr,
                    cwd=cwd,
                    env=env,
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError as exc:
                message = mask_secrets(
                    f"{provider.label}: could not start the command `{_shorten(template.text, 200)}`: {exc}"
                )
                self._kernel.log.warning(
                    "speech_failed", provider=provider.name, kind=provider.kind, error=message
                )
                raise SpeechError(message, provider=provider.name, command=template.text) from None
            try:
                returncode = proc.wait(provider.timeout)
            except subprocess.TimeoutExpired:
                end_process_group(proc, KILL_GRACE)
                tail = mask_secrets(_tail(stderr))
                message = mask_secrets(
                    f"{provider.label}: the command `{_shorten(template.text, 200)}` timed out after "
                    f"{provider.timeout:g} s ({provider.where('timeout')}); its process group was stopped"
                    + (f"; stderr: {tail}" if tail else "")
                )
                self._kernel.log.warning(
                    "speech_failed", provider=provider.name, kind=provider.kind, error=message
                )
                raise SpeechError(
                    message, provider=provider.name, command=template.text, stderr=tail, timed_out=True
                ) from None
            except BaseException:
                end_process_group(proc, KILL_GRACE)
                raise
        return _Ran(returncode, mask_secrets(_tail(stderr)), time.monotonic() - started)

    def _failure(self, provider: _Provider, what: str, ran: _Ran, stdout: Path, binary: bool) -> SpeechError:
        detail = ran.stderr
        source = "stderr"
        if not detail and not binary:
            detail = mask_secrets(_tail(stdout))
            source = "stdout"
        message = f"{provider.label}: the command `{_shorten(provider.template.text, 200)}` {what}"
        message += f"; {source}: {detail}" if detail else "; it printed nothing on stderr"
        message = mask_secrets(message)
        self._kernel.log.warning("speech_failed", provider=provider.name, kind=provider.kind, error=message)
        return SpeechError(
            message,
            provider=provider.name,
            command=provider.template.text,
            returncode=ran.returncode,
            stderr=ran.stderr,
        )

    # -- tools -----------------------------------------------------------------

    def tts_schema(self) -> dict[str, Any]:
        """The ``text_to_speech`` tool schema; only the settings the command can use are offered."""
        assert self._tts is not None
        names = self._tts.template.names
        props: dict[str, Any] = {"text": {"type": "string", "description": "the text to speak"}}
        if "voice" in names:
            props["voice"] = {
                "type": "string",
                "description": f"voice (default: {self._tts.voice or 'none'})",
            }
        if "speed" in names:
            props["speed"] = {
                "type": "number",
                "description": f"speed (default: {self._tts.speed or 'none'})",
            }
        if "model" in names:
            props["model"] = {
                "type": "string",
                "description": f"model (default: {self._tts.model or 'none'})",
            }
        if "format" in names:
            props["output_format"] = {"type": "string", "enum": list(AUDIO_FORMATS)}
        return {
            "name": "text_to_speech",
            "description": (
                "Speak a text aloud into an audio file; returns the file's path, format and size in bytes."
            ),
            "parameters": {"type": "object", "properties": props, "required": ["text"]},
        }

    def stt_schema(self) -> dict[str, Any]:
        """The ``transcribe_audio`` tool schema."""
        assert self._stt is not None
        props: dict[str, Any] = {"path": {"type": "string", "description": "path of the audio file"}}
        if "language" in self._stt.template.names:
            props["language"] = {
                "type": "string",
                "description": f"language of the speech (default: {self._stt.language})",
            }
        return {
            "name": "transcribe_audio",
            "description": "Transcribe the speech in an audio file; returns the text.",
            "parameters": {"type": "object", "properties": props, "required": ["path"]},
        }

    def tts_tool(self, args: dict[str, Any], **_context: Any) -> str:
        """Handler of ``text_to_speech``."""
        text = args.get("text")
        if not isinstance(text, str):
            raise SpeechError("text_to_speech needs 'text', a string")
        path = self.synthesize(
            text,
            voice=args.get("voice"),
            model=args.get("model"),
            speed=args.get("speed"),
            output_format=args.get("output_format"),
        )
        return json.dumps(
            {
                "path": str(path),
                "format": path.suffix.lstrip("."),
                "bytes": path.stat().st_size,
                "detected_format": sniff_audio(path),
                "provider": self.tts_provider,
            },
            ensure_ascii=False,
        )

    def stt_tool(self, args: dict[str, Any], **_context: Any) -> str:
        """Handler of ``transcribe_audio``."""
        path = args.get("path")
        if not isinstance(path, str) or not path:
            raise SpeechError("transcribe_audio needs 'path', the audio file")
        text = self.transcribe(path, language=args.get("language"), model=args.get("model"))
        return json.dumps({"text": text, "path": path, "provider": self.stt_provider}, ensure_ascii=False)


# Shell keywords and builtins a template may start with (not programs on PATH).
_SHELL_BUILTINS = frozenset(
    (  # noqa: SIM905 - a word list reads better as one string
        "! { ( . : [ alias bg break case cd command continue echo eval exec exit export false fg for getopts "
        "hash if kill local printf pwd read readonly return set shift test times trap true type ulimit umask "
        "unalias unset until wait while"
    ).split()
)


# --------------------------------------------------------------------------
# The surface
# --------------------------------------------------------------------------


def _configured(kernel: Kernel) -> bool:
    cfg = kernel.config
    return cfg.get("tts") is not None or cfg.get("stt") is not None or bool(kernel.environ.get(LEGACY_ENV))


def load(kernel: Kernel) -> None:
    """Register ``text_to_speech`` / ``transcribe_audio`` on the surface ``config:speech`` when configured."""
    if not _configured(kernel):
        return
    speech = kernel.speech
    for problem in speech.problems:
        kernel._config_problem(problem)
    if speech.tts_provider is None and speech.stt_provider is None and not speech.problems:
        return

    def setup(ctx: PluginContext) -> None:
        if speech.tts_provider is not None:
            ctx.register_tool(
                "text_to_speech",
                "tts",
                speech.tts_schema(),
                speech.tts_tool,
                description="Speak a text into an audio file through the configured command.",
            )
        if speech.stt_provider is not None:
            ctx.register_tool(
                "transcribe_audio",
                "stt",
                speech.stt_schema(),
                speech.stt_tool,
                description="Transcribe an audio file through the configured command.",
            )

    record = kernel._add_surface(SURFACE, "speech", setup, description=speech.describe())
    record.warnings.extend(speech.warnings)
    if speech.tts_provider is None and speech.stt_provider is None:
        record.error = "; ".join(speech.problems)
        record.enabled = False
    else:
        record.warnings.extend(speech.problems)
