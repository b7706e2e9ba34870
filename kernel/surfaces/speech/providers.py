"""Speech providers offered by plugins: the ``TTSProvider`` and ``TranscriptionProvider`` base classes.

A plugin hands one over with ``ctx.register_tts_provider(provider)`` or
``ctx.register_transcription_provider(provider)``; ``tts.provider`` /
``stt.provider`` in ``config.yaml`` selects it by its ``name`` when no command
provider of that name is declared (see ``docs/speech.md``).  The contract is
Hermes Agent's, so a provider written for it works unchanged (the Hermes
module names ``agent.tts_provider`` and ``agent.transcription_provider`` serve
these classes):

* ``TTSProvider.synthesize(text, output_path, *, voice, model, speed, format)``
  writes the audio to ``output_path`` and returns the path of the file it
  wrote (usually ``output_path``); it raises on failure.
* ``TranscriptionProvider.transcribe(file_path, *, model, language)`` returns
  ``{"success": True, "transcript": ..., "provider": ...}`` or
  ``{"success": False, "transcript": "", "error": ..., "provider": ...}``.

Both accept and ignore keyword arguments they do not know.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

# The optional members every backend shares (display name, availability, models, setup schema).
from ...providers.backend import Backend

__all__ = [
    "DEFAULT_OUTPUT_FORMAT",
    "VALID_OUTPUT_FORMATS",
    "TTSProvider",
    "TranscriptionProvider",
    "resolve_output_format",
]

DEFAULT_OUTPUT_FORMAT = "mp3"
VALID_OUTPUT_FORMATS = frozenset({"mp3", "wav", "ogg", "opus", "flac"})


class TTSProvider(Backend, ABC):
    """A text-to-speech backend: implement ``name`` and ``synthesize``; the rest has defaults."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The short name ``tts.provider`` selects it by (``cartesia``, ``fishaudio``)."""

    def list_voices(self) -> list[dict[str, Any]]:
        """``[{"id": ..., "display": ..., "language": ..., "gender": ...}, ...]`` (default: none listed)."""
        return []

    def default_voice(self) -> str | None:
        """The first listed voice's id, or ``None``."""
        voices = self.list_voices()
        return voices[0].get("id") if voices else None

    @abstractmethod
    def synthesize(
        self,
        text: str,
        output_path: str,
        *,
        voice: str | None = None,
        model: str | None = None,
        speed: float | None = None,
        format: str = DEFAULT_OUTPUT_FORMAT,
        **extra: Any,
    ) -> str:
        """Speak ``text`` into ``output_path`` (its folder exists); return the path written. Raise on failure.

        ``voice`` and ``model`` are ``None`` for the provider's defaults;
        ``speed`` is a rate factor (``1.0`` is normal) or ``None``; ``format``
        is the audio format wanted (``mp3``, ``wav``, ...): a provider that
        cannot write it writes the closest one and returns that file's path.
        """

    def stream(
        self,
        text: str,
        *,
        voice: str | None = None,
        model: str | None = None,
        format: str = "opus",
        **extra: Any,
    ) -> Iterator[bytes]:
        """Audio bytes as they are made (optional; the default refuses)."""
        raise NotImplementedError(f"TTS provider {self.name!r} does not stream; use synthesize()")

    @property
    def voice_compatible(self) -> bool:
        """Whether its audio can be sent as a voice message as it is (default: no)."""
        return False


class TranscriptionProvider(Backend, ABC):
    """A speech-to-text backend: implement ``name`` and ``transcribe``; the rest has defaults."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The short name ``stt.provider`` selects it by (``openrouter``, ``deepgram``)."""

    @abstractmethod
    def transcribe(
        self,
        file_path: str,
        *,
        model: str | None = None,
        language: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """The text spoken in the audio file ``file_path`` (an existing absolute path), as an envelope.

        ``{"success": True, "transcript": "...", "provider": name}``, or on
        failure ``{"success": False, "transcript": "", "error": "...",
        "provider": name}``; it should not raise.  ``model`` and ``language``
        are ``None`` for the provider's defaults.
        """


def resolve_output_format(value: Any) -> str:
    """``value`` as one of :data:`VALID_OUTPUT_FORMATS` (lower-cased); anything else is the default."""
    if not isinstance(value, str):
        return DEFAULT_OUTPUT_FORMAT
    wanted = value.strip().lower()
    return wanted if wanted in VALID_OUTPUT_FORMATS else DEFAULT_OUTPUT_FORMAT
