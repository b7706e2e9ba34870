"""Speech providers offered by plugins that break: they raise (``SystemExit`` and worse), return garbage,
write nothing, or cannot even say whether they are available.

Each case is a real plugin (written to disk, loaded by a real kernel) whose provider hands every call to
``hook_sink.behaviour``, which the test sets.  Whatever it does, ``k.speech`` answers with a
``SpeechError`` naming the provider and its plugin, the ``text_to_speech`` / ``transcribe_audio`` tools
answer with that error, nothing is left in ``<home>/cache/audio``, and the next good call works.  Only a
Ctrl-C in the main thread goes through.
"""

from __future__ import annotations

import json
import re
import threading
import types
import wave
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kernel import Kernel
from kernel.surfaces.speech import LEGACY_ENV, SpeechError

Kit = Callable[..., Kernel]

HOSTILE = """
import hook_sink
from agent.transcription_provider import TranscriptionProvider
from agent.tts_provider import TTSProvider


class HostileVoice(TTSProvider):
    name = "hostile"

    def is_available(self):
        return hook_sink.available()

    def synthesize(self, text, output_path, **kwargs):
        return hook_sink.behaviour(text, output_path)


class HostileEar(TranscriptionProvider):
    name = "hostile-ear"

    def is_available(self):
        return hook_sink.available()

    def transcribe(self, file_path, **kwargs):
        return hook_sink.behaviour(file_path)


class NoMethods:  # a provider with a name and nothing else
    name = "empty"


def register(ctx):
    ctx.register_tts_provider(HostileVoice())
    ctx.register_transcription_provider(HostileEar())
    ctx.register_tts_provider(NoMethods())
"""

TTS_LABEL = "tts provider 'hostile' (plugin 'hostile-speech')"
STT_LABEL = "stt provider 'hostile-ear' (plugin 'hostile-speech')"
SECRET = "sk-hostile-speech-secret-0042"


class Boom(BaseException):
    """Neither an Exception nor one of Python's own."""


class StrBomb(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    __repr__ = __str__


class BadPath:
    def __fspath__(self) -> str:
        raise RuntimeError("no path for you")


class BadBool:
    def __bool__(self) -> bool:
        raise RuntimeError("no answer for you")


class HostileDict(dict):  # type: ignore[type-arg]
    def __iter__(self) -> Iterator[Any]:
        raise RuntimeError("no keys for you")

    def keys(self) -> Any:
        raise RuntimeError("no keys for you")


def raising(exc: BaseException) -> Callable[..., Any]:
    def behaviour(*args: Any) -> Any:
        raise exc

    return behaviour


def returning(value: Any) -> Callable[..., Any]:
    def behaviour(*args: Any) -> Any:
        return value

    return behaviour


def writing(data: bytes, result: Any = "output") -> Callable[..., Any]:
    def behaviour(text: str, output_path: str) -> Any:
        Path(output_path).write_bytes(data)
        return output_path if result == "output" else result

    return behaviour


async def _never() -> str:
    return "never awaited"


def good_tts(text: str, output_path: str) -> str:
    Path(output_path).write_bytes(b"RIFF....WAVEfmt audio for " + text.encode())
    return output_path


@pytest.fixture
def hostile(plugin_dir: Callable[..., Path], sink: types.ModuleType) -> types.ModuleType:
    plugin_dir("hostile-speech", HOSTILE)
    sink.available = lambda: True  # type: ignore[attr-defined]
    sink.behaviour = good_tts  # type: ignore[attr-defined]
    return sink


@pytest.fixture
def speech_kernel(
    make_kernel: Kit, hostile: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str], Kernel]:
    monkeypatch.delenv(LEGACY_ENV, raising=False)
    monkeypatch.setenv("HOSTILE_API_KEY", SECRET)

    def make(tts: str = "hostile") -> Kernel:
        k = make_kernel(config={"tts": {"provider": tts}, "stt": {"provider": "hostile-ear"}})
        assert k.plugin("hostile-speech").enabled, k.plugin("hostile-speech").error
        return k

    return make


def audio_files(k: Kernel) -> list[Path]:
    folder = k.home / "cache" / "audio"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def make_wav(path: Path) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 800)
    return path


# --------------------------------------------------------------------------
# Text to speech
# --------------------------------------------------------------------------

TTS_CASES: list[tuple[str, Callable[..., Any], str]] = [
    ("raises", raising(RuntimeError("engine crashed")), "synthesize() raised RuntimeError: engine crashed"),
    ("system-exit", raising(SystemExit(3)), "synthesize() raised SystemExit(3)"),
    ("base-exception", raising(Boom("down")), "synthesize() raised Boom: down"),
    ("unprintable-exception", raising(StrBomb()), "synthesize() raised StrBomb: <str() of StrBomb failed>"),
    ("secret-in-message", raising(RuntimeError(f"401 for key {SECRET}")), "RuntimeError: 401 for key ***"),
    ("returns-garbage-writes-nothing", returning(42), "synthesize() wrote no audio to "),
    ("returns-none-writes-nothing", returning(None), "synthesize() wrote no audio to "),
    ("writes-an-empty-file", writing(b""), "synthesize() wrote no audio to "),
    (
        "returns-a-missing-path",
        returning("/nonexistent/speech.mp3"),
        "synthesize() returned '/nonexistent/speech.mp3', but wrote no audio to /nonexistent/speech.mp3",
    ),
    ("returns-a-folder", returning("/"), "synthesize() returned '/', but wrote no audio to /"),
    (
        "returns-a-bad-path",
        returning(BadPath()),
        "returned a path that cannot be read: RuntimeError: no path",
    ),
    ("returns-a-coroutine", lambda *a: _never(), "synthesize() returned an awaitable"),
]


@pytest.mark.parametrize(("behaviour", "expected"), [c[1:] for c in TTS_CASES], ids=[c[0] for c in TTS_CASES])
def test_a_hostile_synthesize_is_an_error_naming_provider_and_plugin(
    speech_kernel: Callable[[str], Kernel], hostile: types.ModuleType, behaviour: Any, expected: str
) -> None:
    k = speech_kernel("hostile")
    hostile.behaviour = behaviour  # type: ignore[attr-defined]
    with pytest.raises(SpeechError) as info:
        k.speech.synthesize("hello")
    message = str(info.value)
    assert message.startswith(f"{TTS_LABEL}: ") and expected in message, message
    assert SECRET not in message and info.value.provider == "hostile"
    assert audio_files(k) == []

    answer = json.loads(k.tools.dispatch("text_to_speech", {"text": "hello"}))
    assert expected in answer["error"] and SECRET not in answer["error"]
    assert audio_files(k) == []

    hostile.behaviour = good_tts  # type: ignore[attr-defined]
    assert k.speech.synthesize("still here").read_bytes().endswith(b"still here")
    assert k.plugin("hostile-speech").enabled and k.plugin("config:speech").enabled
    assert "text_to_speech" in k.tools


def test_garbage_returned_after_writing_the_file_falls_back_to_it(
    speech_kernel: Callable[[str], Kernel], hostile: types.ModuleType
) -> None:
    """As Hermes Agent: a result that is no path means the file is where the provider was asked to write."""
    k = speech_kernel("hostile")
    hostile.behaviour = writing(b"audio bytes", result={"not": "a path"})  # type: ignore[attr-defined]
    audio = k.speech.synthesize("hello")
    assert audio.read_bytes() == b"audio bytes" and audio_files(k) == [audio]


AVAILABILITY_CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("false", lambda: False, "is not available: is_available() returned False"),
    ("raises", raising(RuntimeError("probe failed")), "is_available() raised RuntimeError: probe failed"),
    ("system-exit", raising(SystemExit(1)), "is_available() raised SystemExit(1)"),
    ("bad-bool", lambda: BadBool(), "is_available() raised RuntimeError: no answer for you"),
]


@pytest.mark.parametrize(
    ("available", "expected"), [c[1:] for c in AVAILABILITY_CASES], ids=[c[0] for c in AVAILABILITY_CASES]
)
def test_an_availability_check_that_fails_makes_the_provider_unavailable(
    speech_kernel: Callable[[str], Kernel],
    hostile: types.ModuleType,
    tmp_path: Path,
    available: Callable[[], Any],
    expected: str,
) -> None:
    hostile.available = available  # type: ignore[attr-defined]
    hostile.behaviour = raising(AssertionError("must not be called"))  # type: ignore[attr-defined]
    k = speech_kernel("hostile")
    warnings = k.plugin("config:speech").warnings
    assert any(w.startswith(TTS_LABEL) and expected in w for w in warnings), warnings
    assert "text_to_speech" in k.tools and "transcribe_audio" in k.tools
    with pytest.raises(SpeechError, match=f"^{re.escape(TTS_LABEL)} is not available: ") as info:
        k.speech.synthesize("hello")
    assert expected in str(info.value)
    with pytest.raises(SpeechError, match=f"^{re.escape(STT_LABEL)} is not available: "):
        k.speech.transcribe(make_wav(tmp_path / "a.wav"))
    status = k.speech.status()
    assert status["tts"]["available"] is False and expected.split(": ", 1)[-1] in status["tts"]["reason"]
    assert audio_files(k) == []


def test_a_provider_without_the_method_is_an_error_not_a_crash(
    speech_kernel: Callable[[str], Kernel],
) -> None:
    k = speech_kernel("empty")
    with pytest.raises(SpeechError) as info:
        k.speech.synthesize("hello")
    assert str(info.value) == "tts provider 'empty' (plugin 'hostile-speech'): it has no synthesize() method"
    assert audio_files(k) == []


def test_ctrl_c_in_the_main_thread_goes_through_and_leaves_no_file(
    speech_kernel: Callable[[str], Kernel], hostile: types.ModuleType
) -> None:
    k = speech_kernel("hostile")

    def interrupted(text: str, output_path: str) -> str:
        Path(output_path).write_bytes(b"half")
        raise KeyboardInterrupt

    hostile.behaviour = interrupted  # type: ignore[attr-defined]
    assert threading.current_thread() is threading.main_thread()
    with pytest.raises(KeyboardInterrupt):
        k.speech.synthesize("hello")
    assert audio_files(k) == []


def test_ctrl_c_in_a_worker_thread_is_the_providers_failure(
    speech_kernel: Callable[[str], Kernel], hostile: types.ModuleType
) -> None:
    k = speech_kernel("hostile")
    hostile.behaviour = raising(KeyboardInterrupt())  # type: ignore[attr-defined]
    box: dict[str, Any] = {}

    def host() -> None:
        try:
            k.speech.synthesize("hello")
        except SpeechError as exc:
            box["error"] = str(exc)
        except BaseException as exc:  # what must not happen
            box["escaped"] = type(exc).__name__

    worker = threading.Thread(target=host, name="not-main")
    worker.start()
    worker.join(30)
    assert not worker.is_alive() and "escaped" not in box, box
    assert box["error"] == f"{TTS_LABEL}: synthesize() raised KeyboardInterrupt"


# --------------------------------------------------------------------------
# Speech to text
# --------------------------------------------------------------------------


class HostileMapping(Mapping[str, Any]):
    """A mapping (not a dict) whose values cannot be read."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("no values for you")

    def __iter__(self) -> Iterator[str]:
        return iter(["success", "transcript"])

    def __len__(self) -> int:
        return 2


STT_CASES: list[tuple[str, Callable[..., Any], str]] = [
    ("raises", raising(RuntimeError("decoder crashed")), "transcribe() raised RuntimeError: decoder crashed"),
    ("system-exit", raising(SystemExit(2)), "transcribe() raised SystemExit(2)"),
    ("base-exception", raising(Boom()), "transcribe() raised Boom"),
    ("returns-a-string", returning("just text"), "transcribe() returned str, not a dict with 'success'"),
    ("returns-none", returning(None), "transcribe() returned NoneType, not a dict"),
    ("returns-a-list", returning(["a"]), "transcribe() returned list, not a dict"),
    (
        "failure-envelope",
        returning({"success": False, "transcript": "", "error": "quota\nexceeded"}),
        "transcription failed: quota exceeded",
    ),
    (
        "failure-with-unprintable-error",
        returning({"success": False, "error": Unprintable()}),
        "transcription failed: <str() of Unprintable failed>",
    ),
    ("no-success-key", returning({"transcript": "hi"}), "'success' is None and it gave no 'error'"),
    ("success-not-true", returning({"success": "yes", "transcript": "hi"}), "'success' is 'yes'"),
    ("no-transcript", returning({"success": True}), "succeeded without a 'transcript' string (got None)"),
    ("transcript-not-text", returning({"success": True, "transcript": 42}), "(got 42)"),
    (
        "unreadable-dict",
        returning(HostileDict(success=True)),
        "returned a dict that cannot be read: RuntimeError: no keys",
    ),
    (
        "unreadable-values",
        returning(HostileMapping()),
        "returned a dict that cannot be read: RuntimeError: no values",
    ),
    ("returns-a-coroutine", lambda *a: _never(), "transcribe() returned an awaitable"),
]


@pytest.mark.parametrize(("behaviour", "expected"), [c[1:] for c in STT_CASES], ids=[c[0] for c in STT_CASES])
def test_a_hostile_transcribe_is_an_error_naming_provider_and_plugin(
    speech_kernel: Callable[[str], Kernel],
    hostile: types.ModuleType,
    tmp_path: Path,
    behaviour: Any,
    expected: str,
) -> None:
    k = speech_kernel("hostile")
    wav = make_wav(tmp_path / "a.wav")
    hostile.behaviour = behaviour  # type: ignore[attr-defined]
    with pytest.raises(SpeechError) as info:
        k.speech.transcribe(wav)
    message = str(info.value)
    assert message.startswith(f"{STT_LABEL}: ") and expected in message, message
    answer = json.loads(k.tools.dispatch("transcribe_audio", {"path": str(wav)}))
    assert expected in answer["error"]

    hostile.behaviour = returning({"success": True, "transcript": " fine "})  # type: ignore[attr-defined]
    assert k.speech.transcribe(wav) == "fine"
    assert k.plugin("hostile-speech").enabled and k.plugin("config:speech").enabled
