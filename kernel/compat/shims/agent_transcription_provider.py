"""``agent.transcription_provider`` for plugins written for Hermes Agent.

The base class is the kernel's own (:mod:`kernel.surfaces.speech.providers`):
a provider subclassing this ``TranscriptionProvider`` is what
``ctx.register_transcription_provider`` takes, and ``stt.provider`` selects it
by name.
"""

from ...surfaces.speech.providers import TranscriptionProvider

__all__ = ["TranscriptionProvider"]
