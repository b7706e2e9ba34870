"""Speech's names, defaults and errors."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


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
# HERMES_LOCAL_STT_COMMAND's {model} when none is configured (Hermes Agent's local Whisper model).
DEFAULT_LOCAL_MODEL = "base"
# Plugin providers (Hermes Agent's defaults for them): the format asked for, the longest text.
DEFAULT_PLUGIN_FORMAT = "mp3"
DEFAULT_PLUGIN_MAX_TEXT = 4000
# The provider slots plugins fill (ctx.register_tts_provider / register_transcription_provider).
PLUGIN_SLOTS = {"tts": "tts", "stt": "transcription"}
# The speech providers built into Hermes Agent 0.19 (its defaults: tts "edge", stt "local").  The kernel
# has none of them built in; a Hermes config naming one that no plugin offers gets a warning, not an error.
HERMES_BUILT_IN = {
    "tts": frozenset(
        {"edge", "elevenlabs", "openai", "minimax", "xai", "mistral", "gemini", "neutts", "kittentts"}
        | {"piper", "deepinfra"}
    ),
    "stt": frozenset({"local", "groq", "openai", "mistral", "xai", "elevenlabs", "deepinfra"}),
}

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
