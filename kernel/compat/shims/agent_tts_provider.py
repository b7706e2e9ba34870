"""``agent.tts_provider`` for plugins written for Hermes Agent.

The base class and the format helpers are the kernel's own
(:mod:`kernel.surfaces.speech.providers`): a provider subclassing this
``TTSProvider`` is what ``ctx.register_tts_provider`` takes, and
``tts.provider`` selects it by name.
"""

from ...surfaces.speech.providers import (
    DEFAULT_OUTPUT_FORMAT,
    VALID_OUTPUT_FORMATS,
    TTSProvider,
    resolve_output_format,
)

__all__ = ["DEFAULT_OUTPUT_FORMAT", "VALID_OUTPUT_FORMATS", "TTSProvider", "resolve_output_format"]
