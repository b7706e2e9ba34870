"""Calling a plugin's speech provider without trusting it: what it raises or returns becomes a SpeechError."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.api import contained
from ...core.callbacks import plain_text, safe_text
from .common import HERMES_BUILT_IN, PLUGIN_SLOTS, SpeechError
from .files import mask_secrets

if TYPE_CHECKING:
    from ...core.kernel import Kernel
    from .config import _PluginChoice


class Found:
    """The plugin provider a choice names: its object and the plugin that offered it."""

    def __init__(self, choice: _PluginChoice, name: str, plugin: str, obj: Any) -> None:
        self.choice = choice
        self.name = name
        self.plugin = plugin
        self.obj = obj

    @property
    def label(self) -> str:
        return f"{self.choice.kind} provider '{self.name}' (plugin '{self.plugin}')"

    def error(self, kernel: Kernel, what: str, sep: str = ": ") -> SpeechError:
        """A :class:`SpeechError` ``<label>: <what>``, secrets masked, and logged as ``speech_failed``."""
        message = mask_secrets(f"{self.label}{sep}{what}")
        kernel.log.warning(
            "speech_failed", provider=self.name, plugin=self.plugin, kind=self.choice.kind, error=message
        )
        return SpeechError(message, provider=self.name)


def offered(kernel: Kernel, kind: str) -> dict[str, Any]:
    """The providers plugins offer for ``kind`` (``tts``/``stt``), by name; none before any was offered."""
    if "providers" not in kernel.services:  # no plugin offered a provider of any slot
        return {}
    return kernel.slots.providers(PLUGIN_SLOTS[kind])


def lookup(kernel: Kernel, kind: str, name: str) -> Any:
    """The slot entry (``.name``, ``.plugin``, ``.obj``) of the ``kind`` provider called ``name``: the
    exact name, else the one name equal to it ignoring case and blanks (Hermes Agent matches
    ``tts.provider`` that way); ``None`` when no plugin offers it."""
    providers = offered(kernel, kind)
    entry = providers.get(name)
    if entry is None:
        wanted = name.strip().casefold()
        same = [p for n, p in providers.items() if n.strip().casefold() == wanted]
        entry = same[0] if len(same) == 1 else None
    return entry


def find(kernel: Kernel, choice: _PluginChoice) -> Found | None:
    """The plugin provider ``choice`` names (see :func:`lookup`)."""
    entry = lookup(kernel, choice.kind, choice.name)
    return None if entry is None else Found(choice, entry.name, entry.plugin, entry.obj)


def hermes_built_in(choice: _PluginChoice) -> bool:
    """Whether the choice names one of Hermes Agent's built-in speech providers (``edge``, ``local``...)."""
    return choice.name.strip().casefold() in HERMES_BUILT_IN[choice.kind]


def missing(kernel: Kernel, choice: _PluginChoice) -> str:
    """The problem of a choice no plugin offers: why it is no command provider, and what plugins offer."""
    names = ", ".join(sorted(offered(kernel, choice.kind))) or "none"
    what = "text-to-speech" if choice.kind == "tts" else "speech-to-text"
    if hermes_built_in(choice):
        tool = "text_to_speech" if choice.kind == "tts" else "transcribe_audio"
        register = "register_tts_provider" if choice.kind == "tts" else "register_transcription_provider"
        return (
            f"config.yaml: '{choice.kind}.provider' is '{choice.name}', one of Hermes Agent's built-in "
            f"{what} providers; hermes-kernel has no built-in speech provider, so no {tool} tool is "
            f"offered: install and enable a plugin that offers a {what} provider named '{choice.name}' "
            f"(ctx.{register}; offered now: {names}), or define a command provider under "
            f"'{choice.kind}.providers.{choice.name}'"
        )
    return (
        f"{choice.missing}, and no plugin offers a {what} provider named '{choice.name}' (offered: {names})"
    )


def availability(found: Found) -> tuple[bool, str]:
    """``(available, reason)``; an ``is_available()`` that raises means unavailable, a provider without
    one is available (the base classes' default)."""
    with contained() as checking:
        check = getattr(found.obj, "is_available", None)
        ok = True if check is None else bool(check())
    if checking.failed:
        return False, f"is_available() raised {checking.error}"
    if ok:
        return True, ""
    reason: str | None = None
    with contained():
        reason_fn = getattr(found.obj, "unavailable_reason", None)
        reason = plain_text(reason_fn()) if callable(reason_fn) else None
    return False, (reason or "").strip() or "is_available() returned False"


def require_available(kernel: Kernel, found: Found) -> None:
    ok, reason = availability(found)
    if not ok:
        raise found.error(kernel, f"is not available: {reason}", sep=" ")


def call(kernel: Kernel, found: Found, method: str, *args: Any, **kwargs: Any) -> Any:
    """``found.obj.<method>(*args, **kwargs)``; anything it raises (``SystemExit`` too) is a SpeechError."""
    fn: Callable[..., Any] | None = None
    with contained():  # an attribute lookup that raises: as good as no method
        fn = getattr(found.obj, method, None)
    if not callable(fn):
        raise found.error(kernel, f"it has no {method}() method")
    with contained() as calling:
        result = fn(*args, **kwargs)
    if calling.failed:
        raise found.error(kernel, f"{method}() raised {calling.error}") from None
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()  # never awaited: Hermes Agent calls providers synchronously too
        raise found.error(kernel, f"{method}() returned an awaitable; it must return its result")
    return result


def written_path(kernel: Kernel, found: Found, result: Any, output: Path) -> Path:
    """The audio file ``synthesize`` wrote: the path it returned, else ``output`` (as Hermes Agent does)."""
    with contained() as reading:
        text = plain_text(result)
        if text is None and isinstance(result, os.PathLike):
            text = plain_text(os.fspath(result))
    if reading.failed:
        raise found.error(
            kernel, f"synthesize() returned a path that cannot be read: {reading.error}"
        ) from None
    if text is None or not text.strip() or "\x00" in text:
        if result is not None:
            kernel.log.warning(
                "tts_result_ignored",
                provider=found.name,
                plugin=found.plugin,
                returned=safe_text(repr, result, 200),
                path=str(output),
            )
        path = output
    else:
        path = Path(os.path.abspath(os.path.expanduser(text)))
    try:
        size = path.stat().st_size if path.is_file() else 0
    except OSError:
        size = 0
    if size == 0:
        given = "" if path == output else f"returned {safe_text(repr, text, 200)}, but "
        raise found.error(kernel, f"synthesize() {given}wrote no audio to {path}")
    return path


def transcript(kernel: Kernel, found: Found, result: Any) -> str:
    """The text of a ``transcribe`` envelope, or the SpeechError its ``error`` (or its shape) calls for."""
    if not issubclass(type(result), Mapping):
        raise found.error(
            kernel,
            f"transcribe() returned {type(result).__name__}, not a dict with 'success' and 'transcript'",
        )
    with contained() as reading:
        data = dict(result)
        success = data.get("success")
        text = plain_text(data.get("transcript"))
        error = data.get("error")
        detail = safe_text(str, error) if error is not None else None
    if reading.failed:
        raise found.error(
            kernel, f"transcribe() returned a dict that cannot be read: {reading.error}"
        ) from None
    if success is not True:
        reason = detail or f"'success' is {safe_text(repr, success, 80)} and it gave no 'error'"
        raise found.error(kernel, f"transcription failed: {' '.join(reason.split())}")
    if text is None:
        got = safe_text(repr, data.get("transcript"), 80)
        raise found.error(kernel, f"transcribe() succeeded without a 'transcript' string (got {got})")
    return text.strip()
