"""Text to speech and speech to text through command providers declared in ``config.yaml``, or plugins.

``tts.provider: NAME`` with ``tts.providers.NAME.command`` turns text into an
audio file, ``stt.provider: NAME`` with ``stt.providers.NAME.command`` turns an
audio file into text; ``HERMES_LOCAL_STT_COMMAND`` is the older, one-line form
of the second.  Any program that reads and writes files can serve.  A name
with no command names the provider a plugin offers (a :class:`TTSProvider` or
:class:`TranscriptionProvider`, see :mod:`.providers`), as in Hermes Agent.

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

from typing import TYPE_CHECKING

from ...core.services import serviceimpl
from .. import load_surface
from .common import (
    AUDIO_FORMATS,
    LEGACY_ENV,
    STT_PLACEHOLDERS,
    SURFACE,
    TRANSCRIPT_FORMATS,
    TTS_PLACEHOLDERS,
    SpeechError,
    TemplateError,
)
from .config import check_speed, check_word
from .files import mask_secrets, parse_transcript, sniff_audio
from .providers import TranscriptionProvider, TTSProvider
from .service import Speech
from .templates import CommandTemplate

if TYPE_CHECKING:
    from ...core.context import PluginContext
    from ...core.kernel import Kernel

__all__ = [
    "AUDIO_FORMATS",
    "LEGACY_ENV",
    "STT_PLACEHOLDERS",
    "TRANSCRIPT_FORMATS",
    "TTS_PLACEHOLDERS",
    "CommandTemplate",
    "Speech",
    "SpeechError",
    "TTSProvider",
    "TemplateError",
    "TranscriptionProvider",
    "check_speed",
    "check_word",
    "load",
    "mask_secrets",
    "parse_transcript",
    "sniff_audio",
]


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
    speech.settle()
    for problem in speech.problems:
        kernel.host.config_problem(problem)
    # With nothing to offer but something to say (a Hermes built-in name), the surface carries it.
    nothing = speech.tts_provider is None and speech.stt_provider is None
    if nothing and not speech.problems and not speech.warnings:
        return

    def setup(ctx: PluginContext) -> None:
        if speech.tts_provider is not None:
            ctx.register_tool(
                "text_to_speech",
                "tts",
                speech.tts_schema(),
                speech.tts_tool,
                description=f"Speak a text into an audio file through the provider '{speech.tts_provider}'.",
            )
        if speech.stt_provider is not None:
            ctx.register_tool(
                "transcribe_audio",
                "stt",
                speech.stt_schema(),
                speech.stt_tool,
                description=f"Transcribe an audio file through the provider '{speech.stt_provider}'.",
            )

    record = kernel.host.add_surface(SURFACE, "speech", setup, description=speech.describe())
    record.warnings.extend(speech.warnings)
    if nothing and speech.problems:
        record.error = "; ".join(speech.problems)
        record.enabled = False
    else:
        record.warnings.extend(speech.problems)


# -- the speech service (see kernel.core.services) ----------------------------------


@serviceimpl
def service_attach(kernel: Kernel) -> None:
    kernel.host.provide(speech=Speech(kernel))


@serviceimpl
def service_load_finished(kernel: Kernel) -> None:
    load_surface(kernel, "speech", load)
