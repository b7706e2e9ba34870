"""Speech through providers that plugins offer, written as Hermes Agent plugins are.

The plugins import ``agent.tts_provider`` / ``agent.transcription_provider`` (served by the kernel's
compatibility layer) and hand their provider over with ``ctx.register_tts_provider`` /
``ctx.register_transcription_provider``; ``tts.provider`` / ``stt.provider`` in the config names them.
The TTS plugin really writes a WAV file (a tone, 10 ms per character of text) and the STT plugin really
reads one (it reports the duration), so a round trip proves which file went where.
"""

from __future__ import annotations

import json
import shlex
import sys
import types
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import run_json

from kernel import Kernel
from kernel.surfaces.speech import LEGACY_ENV, SpeechError, TranscriptionProvider, TTSProvider

Kit = Callable[..., Kernel]
pytestmark = pytest.mark.usefixtures("sink")  # the plugins record their calls in hook_sink

TONE = """
import wave

import hook_sink
from agent.tts_provider import TTSProvider, resolve_output_format


class Tone(TTSProvider):
    name = "tone"

    def synthesize(self, text, output_path, *, voice=None, model=None, speed=None, format="mp3", **extra):
        hook_sink.calls.append(
            {"text": text, "output_path": output_path, "voice": voice, "model": model, "speed": speed,
             "format": format, "resolved": resolve_output_format(format), "extra": extra}
        )
        with wave.open(output_path, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(8000)
            w.writeframes(b"\\x00\\x10" * (80 * len(text)))
        return output_path


def register(ctx):
    ctx.register_tts_provider(Tone())
"""

METER = """
import wave

import hook_sink
from agent.transcription_provider import TranscriptionProvider


class Meter(TranscriptionProvider):
    @property
    def name(self):
        return "meter"

    def transcribe(self, file_path, *, model=None, language=None, **extra):
        hook_sink.calls.append({"file_path": file_path, "model": model, "language": language, "extra": extra})
        try:
            with wave.open(file_path) as w:
                seconds = w.getnframes() / w.getframerate()
        except Exception as exc:
            return {"success": False, "transcript": "", "error": f"cannot read {file_path}: {exc}",
                    "provider": self.name}
        heard = f" [{language or 'auto'}] {seconds:.2f} s "
        return {"success": True, "transcript": heard, "provider": self.name}


def register(ctx):
    ctx.register_transcription_provider(Meter())
"""


def make_wav(path: Path, seconds: float) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x10" * int(8000 * seconds))
    return path


def speech_record(k: Kernel) -> Any:
    return next(p for p in k.plugins if p.name == "config:speech")


@pytest.fixture(autouse=True)
def no_legacy_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LEGACY_ENV, raising=False)


# --------------------------------------------------------------------------
# Text to speech through a plugin
# --------------------------------------------------------------------------


def test_a_plugin_tts_provider_speaks_with_hermes_arguments(
    plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType, home: Path
) -> None:
    plugin_dir("tone-tts", TONE)
    config = {
        "tts": {"provider": "tone", "voice": "alto", "model": "m1", "speed": 1.5, "output_format": "wav"}
    }
    k = make_kernel(config=config)
    assert k.plugin("tone-tts").enabled, k.plugin("tone-tts")
    assert k.speech.tts_provider == "tone" and k.problems == []

    audio = k.speech.synthesize("hello world")
    assert audio.parent == (home / "cache" / "audio").resolve() and audio.suffix == ".wav"
    with wave.open(str(audio)) as w:
        assert w.getnframes() == 80 * len("hello world")
    (call,) = sink.calls
    assert call == {
        "text": "hello world",
        "output_path": str(audio),
        "voice": "alto",
        "model": "m1",
        "speed": 1.5,
        "format": "wav",
        "resolved": "wav",
        "extra": {},
    }
    assert type(call["speed"]) is float

    status = k.speech.status()["tts"]
    assert status["type"] == "plugin" and status["plugin"] == "tone-tts" and status["available"] is True
    assert status["provider"] == "tone" and status["format"] == "wav" and status["problem"] is None
    record = speech_record(k)
    assert record.enabled and "tts: tone (plugin 'tone-tts')" in record.description


def test_the_tool_speaks_through_the_plugin_and_the_call_overrides_the_settings(
    plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    plugin_dir("tone-tts", TONE)
    k = make_kernel(config={"tts": {"provider": "tone", "voice": "alto"}})
    schema = next(s["function"] for s in k.tools.schemas() if s["function"]["name"] == "text_to_speech")
    assert set(schema["parameters"]["properties"]) == {"text", "voice", "speed", "model", "output_format"}

    args = {"text": "hi there", "voice": "bass", "speed": "2", "model": "m2", "output_format": "flac"}
    result = run_json(k.tools.dispatch("text_to_speech", args))
    assert result["provider"] == "tone" and result["format"] == "flac"
    assert result["detected_format"] == "wav" and result["bytes"] == 44 + 2 * 80 * len("hi there")
    (call,) = sink.calls
    assert (call["voice"], call["model"], call["speed"], call["format"]) == ("bass", "m2", 2.0, "flac")
    assert call["output_path"] == result["path"]


def test_a_plugin_is_asked_for_mp3_by_default_and_may_write_another_file(
    plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    """Hermes Agent asks a plugin for mp3 unless tts.output_format says otherwise; a provider that cannot
    write it writes the closest format and returns that file's path."""
    plugin_dir(
        "wav-only",
        """
        import wave
        from pathlib import Path

        import hook_sink
        from agent.tts_provider import TTSProvider

        class WavOnly(TTSProvider):
            name = "wav-only"

            def synthesize(self, text, output_path, *, format="mp3", **extra):
                hook_sink.calls.append(format)
                target = str(Path(output_path).with_suffix(".wav"))
                with wave.open(target, "wb") as w:
                    w.setnchannels(1)
                    w.setsampwidth(2)
                    w.setframerate(8000)
                    w.writeframes(b"\\x00\\x01" * 800)
                return target

        def register(ctx):
            ctx.register_tts_provider(WavOnly())
        """,
    )
    k = make_kernel(config={"tts": {"provider": "wav-only"}})
    audio = k.speech.synthesize("anything")
    assert sink.calls == ["mp3"]
    assert audio.suffix == ".wav" and audio.read_bytes()[:4] == b"RIFF"
    assert sorted(p.suffix for p in audio.parent.iterdir()) == [".wav"]  # no empty .mp3 left behind


def test_the_name_matches_ignoring_case_and_a_duck_typed_provider_works(
    plugin_dir: Callable[..., Path], make_kernel: Kit
) -> None:
    plugin_dir(
        "plain",
        """
        class Plain:  # no base class: what it lacks comes from nowhere, it has what is called
            name = "Plain"

            def is_available(self):
                return True

            def synthesize(self, text, output_path, **kwargs):
                with open(output_path, "w", encoding="utf-8") as f:
                    f.write(text.upper())

        def register(ctx):
            ctx.register_tts_provider(Plain())
        """,
    )
    k = make_kernel(config={"tts": {"provider": " plain "}})
    assert k.speech.tts_provider == "Plain"
    audio = k.speech.synthesize("quiet words")  # it returned None: the path it was given is the file
    assert audio.read_text(encoding="utf-8") == "QUIET WORDS"


def test_a_command_provider_of_the_same_name_wins_over_the_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    plugin_dir("tone-tts", TONE)
    config = {
        "tts": {"provider": "tone", "providers": {"tone": {"command": "cat {input_path} > {output_path}"}}}
    }
    k = make_kernel(config=config)
    audio = k.speech.synthesize("from the command")
    assert audio.read_text(encoding="utf-8") == "from the command" and sink.calls == []
    assert k.speech.status()["tts"]["type"] == "command"
    assert any(
        "plugin 'tone-tts' offers" in w and "a command provider wins" in w for w in speech_record(k).warnings
    ), speech_record(k).warnings


def test_a_providers_entry_that_is_no_command_leaves_the_name_to_the_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    """As in Hermes Agent: only an entry with a command (and type command) is a command provider."""
    plugin_dir("tone-tts", TONE)
    k = make_kernel(config={"tts": {"provider": "tone", "providers": {"tone": {"type": "plugin"}}}})
    assert k.problems == [] and k.speech.synthesize("plugin after all").is_file()
    assert [c["text"] for c in sink.calls] == ["plugin after all"]


def test_a_name_no_plugin_offers_is_a_problem_naming_what_is_offered(
    plugin_dir: Callable[..., Path], make_kernel: Kit
) -> None:
    plugin_dir("tone-tts", TONE)
    k = make_kernel(config={"tts": {"provider": "ghost"}})
    expected = (
        "config.yaml: 'tts.provider' is 'ghost', but there is no 'tts.providers.ghost' command provider "
        "(defined: none), and no plugin offers a text-to-speech provider named 'ghost' (offered: tone)"
    )
    assert k.problems == [expected]
    record = speech_record(k)
    assert not record.enabled and record.error == expected
    assert "text_to_speech" not in k.tools
    with pytest.raises(SpeechError) as info:
        k.speech.synthesize("hello")
    assert str(info.value) == expected


def test_an_unavailable_provider_keeps_the_tool_and_says_why(
    plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    plugin_dir(
        "keyed",
        """
        import os

        import hook_sink
        from agent.tts_provider import TTSProvider

        class Keyed(TTSProvider):
            name = "keyed"

            def is_available(self):
                return bool(os.environ.get("KEYED_TTS_KEY"))

            def unavailable_reason(self):
                return "KEYED_TTS_KEY is not set"

            def synthesize(self, text, output_path, **kwargs):
                hook_sink.calls.append(text)
                open(output_path, "wb").write(b"sound")
                return output_path

        def register(ctx):
            ctx.register_tts_provider(Keyed())
        """,
    )
    k = make_kernel(config={"tts": {"provider": "keyed"}})
    assert "text_to_speech" in k.tools
    warning = "tts provider 'keyed' (plugin 'keyed') is not available: KEYED_TTS_KEY is not set"
    assert any(w.startswith(warning) for w in speech_record(k).warnings), speech_record(k).warnings
    assert k.speech.status()["tts"]["available"] is False
    result = run_json(k.tools.dispatch("text_to_speech", {"text": "hello"}))
    assert warning in result["error"] and sink.calls == []
    assert list((k.home / "cache" / "audio").glob("*")) == []


def test_the_text_limit_of_a_plugin_provider(plugin_dir: Callable[..., Path], make_kernel: Kit) -> None:
    plugin_dir("tone-tts", TONE)
    k = make_kernel(config={"tts": {"provider": "tone", "tone": {"max_text_length": 10}}})
    assert k.speech.synthesize("ten chars!").is_file()
    with pytest.raises(
        SpeechError, match=r"11 characters; tts provider 'tone' takes at most 10 \(config.yaml"
    ):
        k.speech.synthesize("eleven char")
    default = make_kernel(config={"tts": {"provider": "tone"}}, home=k.home)
    assert default.speech.status()["tts"]["max_text_length"] == 4000


def test_a_provider_whose_plugin_is_unregistered_is_gone(
    plugin_dir: Callable[..., Path], make_kernel: Kit
) -> None:
    plugin_dir("tone-tts", TONE)
    k = make_kernel(config={"tts": {"provider": "tone"}})
    assert k.speech.synthesize("before").is_file()
    k.unregister("tone-tts")
    assert k.speech.tts_provider is None
    with pytest.raises(
        SpeechError, match=r"no plugin offers a text-to-speech provider named 'tone' \(offered: none"
    ):
        k.speech.synthesize("after")


# --------------------------------------------------------------------------
# Speech to text through a plugin
# --------------------------------------------------------------------------


def test_a_plugin_stt_provider_transcribes_with_hermes_arguments(
    plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType, tmp_path: Path
) -> None:
    plugin_dir("meter-stt", METER)
    k = make_kernel(config={"stt": {"provider": "meter", "meter": {"model": "big", "language": "nl"}}})
    assert k.speech.stt_provider == "meter" and k.problems == []
    wav = make_wav(tmp_path / "two and a half.wav", 2.5)
    assert k.speech.transcribe(wav) == "[nl] 2.50 s"
    assert k.speech.transcribe(wav, language="fr", model="small") == "[fr] 2.50 s"
    assert sink.calls == [
        {"file_path": str(wav), "model": "big", "language": "nl", "extra": {}},
        {"file_path": str(wav), "model": "small", "language": "fr", "extra": {}},
    ]
    status = k.speech.status()["stt"]
    assert status["type"] == "plugin" and status["plugin"] == "meter-stt" and status["language"] == "nl"


def test_the_transcribe_tool_and_the_defaults_of_a_plugin_provider(
    plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType, tmp_path: Path
) -> None:
    """No language configured: the provider gets None (its own detection), not the commands' "en"."""
    plugin_dir("meter-stt", METER)
    k = make_kernel(config={"stt": {"provider": "meter"}})
    wav = make_wav(tmp_path / "a.wav", 0.5)
    schema = next(s["function"] for s in k.tools.schemas() if s["function"]["name"] == "transcribe_audio")
    assert set(schema["parameters"]["properties"]) == {"path", "language"}
    result = run_json(k.tools.dispatch("transcribe_audio", {"path": str(wav)}))
    assert result == {"text": "[auto] 0.50 s", "path": str(wav), "provider": "meter"}
    assert sink.calls[0]["language"] is None and sink.calls[0]["model"] is None
    shared = make_kernel(config={"stt": {"provider": "meter", "language": "de"}}, home=k.home)
    assert shared.speech.transcribe(wav) == "[de] 0.50 s"


def test_a_failure_envelope_becomes_an_error_naming_provider_and_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Kit, tmp_path: Path
) -> None:
    plugin_dir("meter-stt", METER)
    k = make_kernel(config={"stt": {"provider": "meter"}})
    not_audio = tmp_path / "notes.wav"
    not_audio.write_text("not audio", encoding="utf-8")
    with pytest.raises(SpeechError) as info:
        k.speech.transcribe(not_audio)
    message = str(info.value)
    assert message.startswith("stt provider 'meter' (plugin 'meter-stt'): transcription failed: cannot read")
    assert info.value.provider == "meter"
    result = run_json(k.tools.dispatch("transcribe_audio", {"path": str(not_audio)}))
    assert "transcription failed" in result["error"]


def test_a_round_trip_through_both_plugins(plugin_dir: Callable[..., Path], make_kernel: Kit) -> None:
    plugin_dir("tone-tts", TONE)
    plugin_dir("meter-stt", METER)
    k = make_kernel(
        config={"tts": {"provider": "tone", "output_format": "wav"}, "stt": {"provider": "meter"}}
    )
    text = "a sentence of forty characters, exactly."
    assert len(text) == 40
    assert k.speech.transcribe(k.speech.synthesize(text)) == "[auto] 0.40 s"
    assert speech_record(k).description == "tts: tone (plugin 'tone-tts'); stt: meter (plugin 'meter-stt')"


def test_an_stt_name_no_plugin_offers(plugin_dir: Callable[..., Path], make_kernel: Kit) -> None:
    plugin_dir("meter-stt", METER)
    k = make_kernel(config={"stt": {"provider": "whisperx"}})
    assert k.problems == [
        "config.yaml: 'stt.provider' is 'whisperx', but there is no 'stt.providers.whisperx' command "
        "provider (defined: none), and no plugin offers a speech-to-text provider named 'whisperx' "
        "(offered: meter)"
    ]
    assert "transcribe_audio" not in k.tools


# --------------------------------------------------------------------------
# The Hermes module names
# --------------------------------------------------------------------------


def test_the_hermes_modules_serve_the_kernels_classes_and_registries(
    plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    """A plugin that registers at import through ``agent.tts_registry`` (no ``ctx``) is used the same."""
    plugin_dir(
        "registry-user",
        """
        import hook_sink
        from agent import transcription_registry, tts_registry
        from agent.transcription_provider import TranscriptionProvider
        from agent.tts_provider import DEFAULT_OUTPUT_FORMAT, VALID_OUTPUT_FORMATS, TTSProvider

        class Echo(TTSProvider):
            name = "echo"

            def synthesize(self, text, output_path, **kwargs):
                open(output_path, "w").write(text)
                return output_path

        class Quiet(TranscriptionProvider):
            name = "quiet"

            def transcribe(self, file_path, **kwargs):
                return {"success": True, "transcript": "", "provider": "quiet"}

        tts_registry.register_provider(Echo())
        transcription_registry.register_provider(Quiet())
        hook_sink.calls.append((DEFAULT_OUTPUT_FORMAT, sorted(VALID_OUTPUT_FORMATS)))

        def register(ctx):
            found = type(tts_registry.get_provider("ECHO")).__name__
            listed = [p.name for p in tts_registry.list_providers()]
            hook_sink.calls.append((found, listed, transcription_registry.get_provider("none") is None))
        """,
    )
    k = make_kernel(config={"tts": {"provider": "echo"}, "stt": {"provider": "quiet"}})
    assert sink.calls == [("mp3", ["flac", "mp3", "ogg", "opus", "wav"]), ("Echo", ["echo"], True)]
    assert k.slots.providers("tts")["echo"].plugin == "registry-user"
    assert k.speech.transcribe(k.speech.synthesize("said")) == ""
    from agent.transcription_provider import TranscriptionProvider as HermesStt
    from agent.tts_provider import TTSProvider as HermesTts

    assert HermesTts is TTSProvider and HermesStt is TranscriptionProvider
    assert isinstance(k.slots.providers("tts")["echo"].obj, TTSProvider)


def test_the_base_classes_defaults() -> None:
    class Minimal(TTSProvider):
        name = "minimal-voice"

        def synthesize(self, text: str, output_path: str, **kwargs: Any) -> str:
            return output_path

    class Listing(TranscriptionProvider):
        name = "lister"

        def list_models(self) -> list[dict[str, Any]]:
            return [{"id": "large"}, {"id": "small"}]

        def transcribe(self, file_path: str, **kwargs: Any) -> dict[str, Any]:
            return {"success": True, "transcript": "", "provider": self.name}

    tts = Minimal()
    assert tts.display_name == "Minimal-Voice" and tts.is_available() and not tts.voice_compatible
    assert tts.list_voices() == [] and tts.default_voice() is None and tts.default_model() is None
    assert tts.get_setup_schema() == {"name": "Minimal-Voice", "badge": "", "tag": "", "env_vars": []}
    with pytest.raises(NotImplementedError, match="'minimal-voice' does not stream"):
        tts.stream("x")
    assert Listing().default_model() == "large"
    with pytest.raises(TypeError):
        TTSProvider()  # type: ignore[abstract]


# --------------------------------------------------------------------------
# HERMES_LOCAL_STT_COMMAND: {model} defaults to "base"
# --------------------------------------------------------------------------

PRINT_ARGS = f"{shlex.quote(sys.executable)} -c 'import sys; print(\" \".join(sys.argv[1:]))'"


def test_the_legacy_command_gets_model_base_when_none_is_configured(
    make_kernel: Kit, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(LEGACY_ENV, f"{PRINT_ARGS} --model {{model}} --language {{language}} {{input_path}}")
    wav = make_wav(tmp_path / "a.wav", 0.1)
    k = make_kernel()
    assert k.problems == [] and k.speech.status()["stt"]["model"] == "base"
    assert k.speech.transcribe(wav) == f"--model base --language en {wav}"
    local = make_kernel(config={"stt": {"local": {"model": "small"}}}, home=k.home)
    assert local.speech.transcribe(wav) == f"--model small --language en {wav}"
    chosen = make_kernel(config={"stt": {"model": "medium", "local": {"model": "small"}}}, home=k.home)
    assert json.loads(json.dumps(chosen.speech.status()["stt"]))["model"] == "medium"
    assert chosen.speech.transcribe(wav, model="tiny") == f"--model tiny --language en {wav}"


def test_a_command_in_hermes_other_location_is_pointed_to(make_kernel: Kit) -> None:
    """Hermes Agent also reads ``tts.<name>.command``; the kernel says where the command must go."""
    elsewhere = {"piper-en": {"command": "piper -f {output_path}"}}
    k = make_kernel(config={"tts": {"provider": "piper-en", **elsewhere}})
    (problem,) = k.problems
    expected = "'tts.providers.piper-en' command provider (defined: none; move 'tts.piper-en.command' there)"
    assert expected in problem
