"""Speech through command providers declared in config.yaml, tested with real programs.

Text to speech runs the real espeak-ng; speech to text runs tests/fixtures/speech/transcribe.py, a small
recogniser of our own that "transcribes" a WAV file by measuring it (see its docstring), through the same
command templates a user would write.
"""

from __future__ import annotations

import array
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
import wave
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, REPO, agent_log, cli_env, find_program, run_json

from kernel.surfaces.speech import (
    LEGACY_ENV,
    STT_PLACEHOLDERS,
    TTS_PLACEHOLDERS,
    CommandTemplate,
    SpeechError,
    TemplateError,
    parse_transcript,
)

SCRIPT = REPO / "tests" / "fixtures" / "speech" / "transcribe.py"
PY = shlex.quote(sys.executable)
RECOGNISER = f"{PY} {shlex.quote(str(SCRIPT))}"
ESPEAK = "espeak-ng -v {voice} -s {speed} -w {output_path} -f {input_path}"
HOSTILE_NAME = "it is 'a' \"test\"; cd; touch pwned1; $(cd; touch pwned2) `cd; touch pwned3` & x.wav"


@pytest.fixture(autouse=True)
def no_legacy_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LEGACY_ENV, raising=False)


@pytest.fixture
def espeak() -> str:
    """The espeak-ng the commands below run: the one ``make test-deps`` unpacked in .venv/debs (first on
    PATH, see conftest), else the system's."""
    path = find_program("espeak-ng")
    if path is None:
        pytest.fail("espeak-ng is missing; run `make test-deps` (it unpacks it into .venv/debs)")
    assert shutil.which("espeak-ng") == path, "the commands' PATH finds another espeak-ng than the tests"
    return path


def tts(command: str, **settings: Any) -> dict[str, Any]:
    return {"tts": {"provider": "engine", "providers": {"engine": {"command": command, **settings}}}}


def stt(command: str, **settings: Any) -> dict[str, Any]:
    return {"stt": {"provider": "recogniser", "providers": {"recogniser": {"command": command, **settings}}}}


def write_config(home: Path, *parts: dict[str, Any]) -> None:
    config: dict[str, Any] = {}
    for part in parts:
        config.update(part)
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")


def make_wav(path: Path, seconds: float = 0.5, rate: int = 16000, amplitude: int = 8000) -> Path:
    """A mono 16-bit WAV: a 440 Hz tone (amplitude 0: silence)."""
    count = int(seconds * rate)
    samples = array.array(
        "h", (int(amplitude * math.sin(2 * math.pi * 440 * i / rate)) for i in range(count))
    )
    if sys.byteorder == "big":
        samples.byteswap()
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.tobytes())
    return path


def expected_prefix(path: Path, language: str) -> str:
    """What transcribe.py says about ``path``, up to the voiced share (computed here independently)."""
    with wave.open(str(path), "rb") as w:
        seconds = w.getnframes() / w.getframerate()
        return f"[{language}] {path.name}: {seconds:.2f} s, {w.getframerate()} Hz, {w.getnchannels()} ch, "


def voiced_percent(transcript: str) -> int:
    assert transcript.endswith("% voiced"), transcript
    return int(transcript.rsplit(" ", 2)[-2].rstrip("%"))


def gone_or_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait_until_gone(pids: list[int], deadline: float = 15.0) -> list[int]:
    """The pids still running after ``deadline`` seconds (a deadline for a hang, not a speed check)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        alive = [pid for pid in pids if not gone_or_zombie(pid)]
        if not alive:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if not gone_or_zombie(pid)]


# --------------------------------------------------------------------------
# Text to speech with espeak-ng
# --------------------------------------------------------------------------


def test_espeak_speaks_a_hostile_text_from_a_file(
    espeak: str, home: Path, make_kernel, tmp_path: Path
) -> None:
    canary = tmp_path / "pwned"
    copy = tmp_path / "spoken.txt"
    cmdline = tmp_path / "cmdline"
    text = (
        f'Hello $(touch {canary}); rm -rf x; "quotes" and `touch {canary}-2` & it\'s done; '
        f"naïve café ✓ ${{HOME}} > {canary}-3"
    )
    command = (
        f"cat /proc/$$/cmdline > {shlex.quote(str(cmdline))}; cp {{input_path}} {shlex.quote(str(copy))}; "
    )
    write_config(home, tts(command + ESPEAK, voice="en", speed=170))
    k = make_kernel()

    audio = k.speech.synthesize(text)

    assert audio.parent == (home / "cache" / "audio").resolve()
    assert audio.suffix == ".wav" and audio.is_file()
    head = audio.read_bytes()[:12]
    assert head[:4] == b"RIFF" and head[8:12] == b"WAVE"
    with wave.open(str(audio), "rb") as w:
        assert w.getframerate() == 22050 and w.getnchannels() == 1
        assert w.getnframes() > 22050 * 2  # a long sentence: more than two seconds of speech
    assert copy.read_text(encoding="utf-8") == text
    assert not list(tmp_path.glob("pwned*")), "a shell metacharacter in the text was executed"
    shell_argv = cmdline.read_bytes().split(b"\0")
    assert shell_argv[0] == b"/bin/sh" and b"HERMES_SPEECH_INPUT_PATH" in shell_argv[2]
    assert b"Hello" not in cmdline.read_bytes(), "the text reached the command line"
    assert k.speech.tts_provider == "engine"


def test_every_call_writes_a_new_file(espeak: str, make_kernel) -> None:
    k = make_kernel(config=tts(ESPEAK, voice="en", speed=170))
    first = k.speech.synthesize("one")
    second = k.speech.synthesize("one")
    assert first != second and first.is_file() and second.is_file()


def test_speed_and_voice_reach_espeak(espeak: str, make_kernel) -> None:
    k = make_kernel(config=tts(ESPEAK, voice="en", speed=170))
    sentence = "one two three four five six seven"

    def frames(path: Path) -> int:
        with wave.open(str(path), "rb") as w:
            return w.getnframes()

    slow = frames(k.speech.synthesize(sentence, speed=80))
    fast = frames(k.speech.synthesize(sentence, speed="400"))
    assert slow > 2 * fast
    assert frames(k.speech.synthesize(sentence, voice="en-us")) > 0


def test_a_failing_voice_shows_espeaks_stderr(espeak: str, home: Path, make_kernel) -> None:
    k = make_kernel(config=tts(ESPEAK, voice="en", speed=170))
    with pytest.raises(SpeechError) as info:
        k.speech.synthesize("hello", voice="nosuchvoice")
    err = info.value
    assert "tts provider 'engine'" in str(err) and "exited with status 1" in str(err)
    assert "voice does not exist" in str(err) and "voice does not exist" in err.stderr
    assert err.returncode == 1 and err.provider == "engine" and err.command == ESPEAK
    assert list((home / "cache" / "audio").iterdir()) == []


def test_audio_on_standard_output(espeak: str, make_kernel) -> None:
    k = make_kernel(config=tts("espeak-ng --stdout -f {input_path}"))
    audio = k.speech.synthesize("standard output")
    assert audio.read_bytes()[:4] == b"RIFF" and audio.stat().st_size > 1000
    assert list(audio.parent.iterdir()) == [audio]


def test_text_to_speech_tool_runs_the_whole_pipeline(
    espeak: str, home: Path, make_kernel, plugin_dir, sink, tmp_path: Path
) -> None:
    plugin_dir(
        "rewrite",
        """
        import hook_sink

        def pre(tool_name, args, **kw):
            if tool_name == "text_to_speech":
                return {"action": "modify", "args": {"text": args["text"].upper()}}

        def post(tool_name, status, result, **kw):
            hook_sink.calls.append((tool_name, status, result))

        def register(ctx):
            ctx.register_hook("pre_tool_call", pre)
            ctx.register_hook("post_tool_call", post)
        """,
    )
    copy = tmp_path / "spoken.txt"
    write_config(home, tts(f"cp {{input_path}} {shlex.quote(str(copy))} && {ESPEAK}", voice="en", speed=170))
    k = make_kernel()

    result = run_json(
        k.tools.dispatch("text_to_speech", {"text": "quiet words", "speed": 200}, session_id="s1")
    )

    assert "error" not in result, result
    path = Path(result["path"])
    assert result["format"] == "wav" and result["detected_format"] == "wav" and result["provider"] == "engine"
    assert result["bytes"] == path.stat().st_size > 1000
    assert copy.read_text(encoding="utf-8") == "QUIET WORDS"
    assert sink.calls == [("text_to_speech", "ok", json.dumps(result, ensure_ascii=False))]
    schema = k.tools.get("text_to_speech").schema
    assert set(schema["parameters"]["properties"]) == {"text", "voice", "speed"}
    assert k.tools.get("text_to_speech").plugin == "config:speech"

    failed = run_json(k.tools.dispatch("text_to_speech", {"text": "x", "voice": "nosuchvoice"}))
    assert "voice does not exist" in failed["error"] and "exited with status 1" in failed["error"]
    assert sink.calls[-1][1] == "error"


def test_a_command_that_writes_no_audio(make_kernel) -> None:
    command = "cat {input_path} > /dev/null; echo 'engine: voice data missing' >&2; : {output_path}"
    k = make_kernel(config=tts(command))
    with pytest.raises(SpeechError) as info:
        k.speech.synthesize("hello")
    assert "wrote no audio to {output_path}" in str(info.value)
    assert "engine: voice data missing" in str(info.value) and info.value.returncode == 0


def test_a_failing_command_shows_the_tail_of_stderr_and_leaves_no_file(home: Path, make_kernel) -> None:
    command = (
        "echo partial > {output_path}; i=0; while [ $i -lt 300 ]; do printf 'noise ' >&2; i=$((i+1)); done; "
        "echo 'fatal: engine crashed' >&2; exit 3"
    )
    k = make_kernel(config=tts(command))
    with pytest.raises(SpeechError) as info:
        k.speech.synthesize("hello")
    err = info.value
    assert "exited with status 3" in str(err) and str(err).endswith("fatal: engine crashed")
    assert err.stderr.endswith("fatal: engine crashed") and 20 < len(err.stderr) <= 500
    assert err.returncode == 3 and not err.timed_out
    assert list((home / "cache" / "audio").iterdir()) == []
    assert "speech_failed" in agent_log(home)


def test_a_timeout_ends_the_whole_process_group(make_kernel, tmp_path: Path) -> None:
    shell_pid, child_pid = tmp_path / "shell.pid", tmp_path / "child.pid"
    command = (
        f"echo $$ > {shlex.quote(str(shell_pid))}; sleep 60 & echo $! > {shlex.quote(str(child_pid))}; "
        "wait; : {output_path}"
    )
    k = make_kernel(config=tts(command, timeout=1))
    with pytest.raises(SpeechError) as info:
        k.speech.synthesize("hello")
    err = info.value
    assert err.timed_out and err.returncode is None
    assert "timed out after 1 s" in str(err) and "config.yaml: 'tts.providers.engine.timeout'" in str(err)
    pids = [int(shell_pid.read_text()), int(child_pid.read_text())]
    assert wait_until_gone(pids) == [], "the command's process group outlived the timeout"


def test_output_format_needs_a_format_placeholder(espeak: str, home: Path, make_kernel) -> None:
    k = make_kernel(config=tts(ESPEAK, voice="en", speed=170))
    with pytest.raises(SpeechError, match=r"writes wav: its command has no \{format\} placeholder"):
        k.speech.synthesize("hello", output_format="mp3")
    with pytest.raises(SpeechError, match="must be one of"):
        k.speech.synthesize("hello", output_format="exe")

    # With {format} the call may choose; the file is named for it and the real content is reported.
    k2 = make_kernel(config=tts("espeak-ng -w {output_path} -f {input_path} # writes {format}"), home=home)
    result = run_json(k2.tools.dispatch("text_to_speech", {"text": "hello", "output_format": "flac"}))
    assert (
        result["path"].endswith(".flac") and result["format"] == "flac" and result["detected_format"] == "wav"
    )
    assert "tts_format_mismatch" in agent_log(home)


def test_a_placeholder_without_a_value_is_an_error(make_kernel) -> None:
    k = make_kernel(
        config=tts("espeak-ng -v {voice} -w {output_path} -f {input_path} --model {model}", voice="en")
    )
    with pytest.raises(SpeechError) as info:
        k.speech.synthesize("hello")
    assert "uses {model} but no model was given" in str(info.value)
    assert "config.yaml: 'tts.providers.engine.model'" in str(info.value)


def test_text_checks(make_kernel) -> None:
    k = make_kernel(config=tts("cat {input_path} > {output_path}", max_text_length=10))
    with pytest.raises(SpeechError, match="nothing to say"):
        k.speech.synthesize("   ")
    with pytest.raises(
        SpeechError, match=r"at most 10 \(config.yaml: 'tts.providers.engine.max_text_length'\)"
    ):
        k.speech.synthesize("eleven char")
    with pytest.raises(SpeechError, match="must not start with '-'"):
        k.speech.synthesize("hi", voice="--output=/etc/passwd")
    assert k.speech.synthesize("ten chars!").read_text(encoding="utf-8") == "ten chars!"


def test_secrets_stay_out_of_commands_and_messages(home: Path, make_kernel, monkeypatch) -> None:
    secret = "sk-demo-0123456789abcdef"
    monkeypatch.setenv("DEMO_API_KEY", secret)
    command = 'echo "key=[$DEMO_API_KEY]" >&2; exit 4 # {output_path}'

    k = make_kernel(config=tts(command))
    with pytest.raises(SpeechError) as info:
        k.speech.synthesize("hello")
    assert "key=[]" in str(info.value)

    k2 = make_kernel(config=tts(command, env_passthrough=["DEMO_API_KEY"]), home=home)
    with pytest.raises(SpeechError) as info:
        k2.speech.synthesize("hello")
    assert (
        "key=[***]" in str(info.value) and secret not in str(info.value) and secret not in info.value.stderr
    )
    assert "speech_failed" in agent_log(home) and secret not in agent_log(home)


# --------------------------------------------------------------------------
# Templates: placeholders are quoted for their shell context
# --------------------------------------------------------------------------


def test_values_stay_data_in_every_quoting_context(make_kernel, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    voice = "it's \"q\" $(cd; touch pwned1) `cd; touch pwned2` ; cd; touch pwned3 & \\ * ${HOME} '"
    command = (
        'set -f; printf \'%s\\n\' {voice} \'{voice}\' "{voice}" "$(printf %s {voice})" "`printf %s {voice}`" '
        "$(printf %s {voice}) "
        "x{voice}y \"a'{voice}'b\" '{{literal}}' > {output_path} # it's {voice}\n"
        "printf '%s\\n' `printf %s {voice}` >> {output_path}"
    )
    k = make_kernel(config=tts(command))
    out = k.speech.synthesize("hello", voice=voice).read_text(encoding="utf-8").splitlines()
    split_unquoted = voice.split()  # unquoted $(...), `...` (no globbing): words, never run
    assert out[:5] == [voice] * 5
    assert out[5 : 5 + len(split_unquoted)] == split_unquoted
    rest = out[5 + len(split_unquoted) :]
    assert rest[:3] == [f"x{voice}y", f"a'{voice}'b", "{literal}"]
    assert rest[3:] == split_unquoted
    assert not list(tmp_path.rglob("pwned*")) and not list(Path.home().glob("pwned*"))


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("say {voise}", "unknown placeholder {voise} (did you mean {voice}?"),
        ("say {language}", "unknown placeholder {language}"),
        ("say { voice }", "starts no placeholder; write '{{' for a literal brace"),
        ("awk '{print}'", "unknown placeholder {print}"),
        ("awk '{ print }'", "starts no placeholder"),
        ("say }", "a single '}'"),
        ("say ${voice}", "'${voice}' is ambiguous"),
        ("say \\{voice}", "right after a backslash"),
        ("say $'{voice}'", "inside $'...' quoting"),
        ("say '{voice}", "a ' quote is never closed"),
        ("say $(cat {input_path}", "a $( substitution is never closed"),
        ('say "$(cat {input_path})', 'a " quote is never closed'),
        ("   ", "the command is empty"),
    ],
)
def test_template_errors(template: str, problem: str) -> None:
    with pytest.raises(TemplateError) as info:
        CommandTemplate(template, TTS_PLACEHOLDERS, in_shell=True)
    assert problem in str(info.value)


def test_templates_without_a_shell_fill_placeholders_inside_arguments() -> None:
    template = CommandTemplate(
        "run --in={input_path} '{output_dir}/x y' {{raw}}", STT_PLACEHOLDERS, in_shell=False
    )
    values = {"input_path": "a b; rm -rf ~", "output_dir": "/o'd"}
    assert template.argv(values) == ["run", "--in=a b; rm -rf ~", "/o'd/x y", "{raw}"]
    assert template.names == {"input_path", "output_dir"}
    assert CommandTemplate("a {text_path}", TTS_PLACEHOLDERS, in_shell=True).names == {"input_path"}


def test_transcript_formats() -> None:
    assert parse_transcript('{"text": " hi there "}', "json") == "hi there"
    assert parse_transcript('{"segments": [{"text": "a"}, {"text": " b"}]}', "json") == "a b"
    srt = "1\n00:00:00,000 --> 00:00:01,000\nHello\n\n2\n00:00:01,000 --> 00:00:02,000\n<i>world</i>\n"
    assert parse_transcript(srt, "srt") == "Hello world"
    vtt = "WEBVTT\nKind: captions\n\nNOTE a note\nmore\n\n00:00.000 --> 00:01.000\nHello\n"
    assert parse_transcript(vtt, "vtt") == "Hello"
    with pytest.raises(SpeechError, match="no 'text'"):
        parse_transcript("[1, 2]", "json")


# --------------------------------------------------------------------------
# Speech to text with transcribe.py
# --------------------------------------------------------------------------


def test_round_trip_from_espeak_to_the_recogniser(espeak: str, home: Path, make_kernel) -> None:
    command = f"{RECOGNISER} {{input_path}} --out-dir {{output_dir}} --language {{language}}"
    recogniser = stt(command)
    recogniser["stt"]["language"] = "de"  # the section-wide default
    write_config(home, tts(ESPEAK, voice="en", speed=170), recogniser)
    k = make_kernel()
    audio = k.speech.synthesize("The quick brown fox jumps over the lazy dog.")
    text = k.speech.transcribe(audio)
    assert text.startswith(expected_prefix(audio, "de"))
    assert voiced_percent(text) > 30
    assert k.speech.transcribe(audio, language="pt-BR").startswith(expected_prefix(audio, "pt-BR"))

    silence = make_wav(home / "silence.wav", amplitude=0)
    assert k.speech.transcribe(silence) == expected_prefix(silence, "de") + "0% voiced"


@pytest.mark.parametrize(
    ("args", "fmt"),
    [
        ("--out-dir {output_dir}", "txt"),
        ("--out {output_path}", "txt"),
        ("", "txt"),
        ("--out {output_path} --format json", "json"),
        ("--out-dir {output_dir} --format srt", "srt"),
        ("--format vtt", "vtt"),
    ],
    ids=["txt-in-output-dir", "output-path", "stdout", "json", "srt", "vtt-on-stdout"],
)
def test_where_the_transcript_comes_from(args: str, fmt: str, make_kernel, tmp_path: Path) -> None:
    wav = make_wav(tmp_path / "tone.wav", seconds=0.3)
    k = make_kernel(config=stt(f"{RECOGNISER} {{input_path}} {args}", format=fmt))
    text = k.speech.transcribe(wav)
    assert text == expected_prefix(wav, "en") + "100% voiced"


def test_a_hostile_file_name_cannot_inject(make_kernel, tmp_path: Path) -> None:
    wav = make_wav(tmp_path / HOSTILE_NAME)
    k = make_kernel(
        config=stt(f"{RECOGNISER} {{input_path}} --out-dir {{output_dir}} --language {{language}}")
    )
    text = k.speech.transcribe(wav, language="en-GB")
    assert text.startswith(expected_prefix(wav, "en-GB")) and HOSTILE_NAME in text
    assert not list(Path.home().glob("pwned*")) and not list(tmp_path.rglob("pwned*"))


def test_the_transcribe_audio_tool(make_kernel, tmp_path: Path) -> None:
    wav = make_wav(tmp_path / "note.wav")
    k = make_kernel(config=stt(f"{RECOGNISER} {{input_path}} --language {{language}}"))
    result = run_json(k.tools.dispatch("transcribe_audio", {"path": str(wav), "language": "fr"}))
    assert result["text"] == expected_prefix(wav, "fr") + "100% voiced"
    assert result["provider"] == "recogniser"
    assert set(k.tools.get("transcribe_audio").schema["parameters"]["properties"]) == {"path", "language"}
    missing = run_json(k.tools.dispatch("transcribe_audio", {"path": str(tmp_path / "nope.wav")}))
    assert "no such audio file" in missing["error"]
    assert "needs 'path'" in run_json(k.tools.dispatch("transcribe_audio", {}))["error"]


def test_a_failing_recogniser_shows_its_stderr(make_kernel, tmp_path: Path) -> None:
    wav = make_wav(tmp_path / "a.wav")
    k = make_kernel(config=stt(f"{RECOGNISER} {{input_path}} --fail 7"))
    with pytest.raises(SpeechError) as info:
        k.speech.transcribe(wav)
    assert "stt provider 'recogniser'" in str(info.value) and "exited with status 7" in str(info.value)
    assert "model 'tiny' is not installed" in str(info.value) and info.value.returncode == 7

    k2 = make_kernel(config=stt(f"{RECOGNISER} {{input_path}}"))
    not_audio = tmp_path / "notes.wav"
    not_audio.write_text("not audio")
    with pytest.raises(SpeechError, match=r"status 2; stderr: transcribe.py: cannot read .*notes.wav"):
        k2.speech.transcribe(not_audio)


def test_a_recogniser_that_writes_nothing(make_kernel, tmp_path: Path) -> None:
    wav = make_wav(tmp_path / "a.wav")
    k = make_kernel(config=stt("test -f {input_path} && echo 'warming up' >&2"))
    with pytest.raises(SpeechError) as info:
        k.speech.transcribe(wav)
    assert "wrote no transcript" in str(info.value) and "warming up" in str(info.value)


# --------------------------------------------------------------------------
# HERMES_LOCAL_STT_COMMAND: the legacy form, without a shell
# --------------------------------------------------------------------------


LEGACY_COMMAND = f"{RECOGNISER} {{input_path}} --out-dir {{output_dir}} --language {{language}}"


def test_the_legacy_variable_runs_without_a_shell(make_kernel, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(LEGACY_ENV, LEGACY_COMMAND)
    wav = make_wav(tmp_path / HOSTILE_NAME)
    k = make_kernel(config={"stt": {"language": "nl"}})
    assert k.speech.stt_provider == "local_command"
    assert k.speech.status()["stt"]["shell"] is False
    text = run_json(k.tools.dispatch("transcribe_audio", {"path": str(wav)}))["text"]
    assert text.startswith(expected_prefix(wav, "nl")) and HOSTILE_NAME in text
    assert not list(Path.home().glob("pwned*")) and not list(tmp_path.rglob("pwned*"))


def test_the_legacy_variable_from_the_home_env_file(home: Path, make_kernel, tmp_path: Path) -> None:
    (home / ".env").write_text(f"{LEGACY_ENV}='{LEGACY_COMMAND}'\n", encoding="utf-8")
    wav = make_wav(tmp_path / "a.wav")
    k = make_kernel(config={"stt": {"provider": "local_command"}})
    assert k.speech.transcribe(wav).startswith(expected_prefix(wav, "en"))
    assert "transcribe_audio" in k.tools


def test_the_legacy_variable_times_out_and_warns_about_shell_syntax(
    make_kernel, monkeypatch, tmp_path
) -> None:
    pid_file = tmp_path / "pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    monkeypatch.setenv(LEGACY_ENV, f"{PY} -c {shlex.quote(code)} {{input_path}} | tee out.txt")
    k = make_kernel(config={"stt": {"timeout": 1}})
    record = next(p for p in k.plugins if p.name == "config:speech")
    assert any("runs without a shell, so '|' is passed" in w for w in record.warnings)
    with pytest.raises(SpeechError) as info:
        k.speech.transcribe(make_wav(tmp_path / "a.wav"))
    assert info.value.timed_out and "timed out after 1 s (config.yaml: 'stt.timeout')" in str(info.value)
    assert wait_until_gone([int(pid_file.read_text())]) == []


def test_local_command_without_the_variable(make_kernel) -> None:
    k = make_kernel(config={"stt": {"provider": "local_command"}})
    assert any(LEGACY_ENV in p and "'stt.provider'" in p for p in k.problems)
    with pytest.raises(SpeechError, match=f"{LEGACY_ENV} is not set"):
        k.speech.transcribe("x.wav")


# --------------------------------------------------------------------------
# Configuration: nothing configured, mistakes, status
# --------------------------------------------------------------------------


def test_nothing_configured(make_kernel) -> None:
    k = make_kernel()
    assert "text_to_speech" not in k.tools and "transcribe_audio" not in k.tools
    assert all(p.name != "config:speech" for p in k.plugins)
    assert k.speech.tts_provider is None and k.speech.stt_provider is None
    with pytest.raises(SpeechError, match=r"no text-to-speech provider is configured: set 'tts.provider'"):
        k.speech.synthesize("hello")
    with pytest.raises(SpeechError, match=rf"set 'stt.provider'.*{LEGACY_ENV}"):
        k.speech.transcribe("x.wav")


BAD_CONFIGS = [
    (
        {"tts": {"provider": "x", "providers": {"x": {"voice": "en"}}}},
        "config.yaml: 'tts.providers.x.command'",
    ),
    (
        {"tts": {"provider": "x", "providers": {"x": {"command": "say {voise} > {output_path}"}}}},
        "config.yaml: 'tts.providers.x.command': unknown placeholder {voise} (did you mean {voice}?",
    ),
    (
        {"tts": {"provider": "x", "providers": {"x": {"command": "a", "output_format": "mp4"}}}},
        "config.yaml: 'tts.providers.x.output_format' must be one of",
    ),
    (
        {"tts": {"provider": "x", "providers": {"x": {"command": "a", "timeout": -1}}}},
        "config.yaml: 'tts.providers.x.timeout' must be a positive number",
    ),
    (
        {"tts": {"provider": "x", "providers": {"x": {"command": "a", "type": "openai"}}}},
        "config.yaml: 'tts.providers.x.type' must be 'command'",
    ),
    (
        {"tts": {"provider": "x", "providers": {"x": {"command": "a", "voice": "-x"}}}},
        "config.yaml: 'tts.providers.x.voice'",
    ),
    (
        # (Not a Hermes built-in name such as 'edge': those are warnings,
        # tests/surfaces/test_speech_hermes_names.py.)
        {"tts": {"provider": "espeak"}},
        "config.yaml: 'tts.provider' is 'espeak', but there is no 'tts.providers.espeak'",
    ),
    ({"tts": {"providers": {"a": {"command": "a"}}}}, "config.yaml: 'tts.provider' is not set"),
    ({"tts": "espeak"}, "config.yaml: 'tts' must be a mapping"),
    (
        {"stt": {"provider": "x", "providers": {"x": {"command": "w {input_path}", "format": "docx"}}}},
        "config.yaml: 'stt.providers.x.format' must be one of txt, json, srt, vtt",
    ),
    (
        {"stt": {"provider": "x", "providers": {"x": {"command": "w '{input_path}"}}}},
        "config.yaml: 'stt.providers.x.command': a ' quote is never closed",
    ),
    (
        {"stt": {"provider": "local_command", "providers": {"local_command": {"command": "w"}}}},
        "config.yaml: 'stt.providers.local_command': the name 'local_command' is reserved",
    ),
]


@pytest.mark.parametrize(("config", "problem"), BAD_CONFIGS, ids=[p for _, p in BAD_CONFIGS])
def test_a_bad_section_names_the_key_and_is_isolated(
    config: dict, problem: str, home: Path, make_kernel
) -> None:
    write_config(home, config)
    k = make_kernel()
    assert any(problem in p for p in k.problems), k.problems
    record = next(p for p in k.plugins if p.name == "config:speech")
    assert record.error is not None and problem in record.error
    assert not record.enabled
    assert "text_to_speech" not in k.tools and "transcribe_audio" not in k.tools
    with pytest.raises(SpeechError) as info:
        (k.speech.synthesize("hi") if "tts" in config else k.speech.transcribe("x.wav"))
    assert problem in str(info.value)


def test_a_broken_tts_leaves_stt_working(make_kernel, tmp_path: Path) -> None:
    config = {
        **tts("say {voise}"),
        **stt(f"{RECOGNISER} {{input_path}}"),
    }
    k = make_kernel(config=config)
    record = next(p for p in k.plugins if p.name == "config:speech")
    assert record.enabled and record.error is None
    assert any("'tts.providers.engine.command'" in w for w in record.warnings)
    assert "transcribe_audio" in k.tools and "text_to_speech" not in k.tools
    wav = make_wav(tmp_path / "a.wav")
    assert k.speech.transcribe(wav).startswith(expected_prefix(wav, "en"))


def test_status_and_listing(make_kernel) -> None:
    k = make_kernel(config={**tts(ESPEAK, voice="en", speed=170), **stt(f"{RECOGNISER} {{input_path}}")})
    status = k.speech.status()
    assert status["tts"]["provider"] == "engine" and status["tts"]["format"] == "wav"
    assert (
        status["tts"]["timeout"] == 120 and status["tts"]["voice"] == "en" and status["tts"]["speed"] == 170
    )
    assert status["tts"]["placeholders"] == ["input_path", "output_path", "speed", "voice"]
    assert status["stt"]["provider"] == "recogniser" and status["stt"]["language"] == "en"
    assert status["stt"]["timeout"] == 300 and status["stt"]["format"] == "txt"
    record = next(p for p in k.plugins if p.name == "config:speech")
    assert record.kind == "speech" and record.source == "config"
    assert "tts: engine (wav" in record.description and "stt: recogniser (txt" in record.description


def test_a_missing_program_is_a_warning(make_kernel) -> None:
    k = make_kernel(config=tts("no-such-tts-program -o {output_path} {input_path}"))
    record = next(p for p in k.plugins if p.name == "config:speech")
    assert record.enabled
    assert any("'no-such-tts-program'" in w and "not found" in w for w in record.warnings)
    with pytest.raises(SpeechError, match="status 127"):
        k.speech.synthesize("hello")


def test_doctor_and_plugins_list_show_the_surface(home: Path, bundled: Path) -> None:
    write_config(home, {"tts": {"provider": "x", "providers": {"x": {"command": "say {voise}"}}}})
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled))
    env.pop(LEGACY_ENV, None)
    doctor = subprocess.run([*CLI, "doctor"], env=env, capture_output=True, text=True)
    assert doctor.returncode == 1
    assert "'tts.providers.x.command': unknown placeholder {voise}" in doctor.stdout
    listing = subprocess.run([*CLI, "plugins", "list", "--refresh"], env=env, capture_output=True, text=True)
    assert "config:speech" in listing.stdout, listing.stdout + listing.stderr


def test_a_config_file_alone_is_enough(espeak: str, home: Path, bundled: Path, tmp_path: Path) -> None:
    write_config(home, tts(ESPEAK, voice="en", speed=170))
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled))
    env.pop(LEGACY_ENV, None)
    proc = subprocess.run(
        [*CLI, "tools", "call", "text_to_speech", json.dumps({"text": "from the command line"})],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = run_json(proc.stdout.strip().splitlines()[-1])
    assert Path(result["path"]).read_bytes()[:4] == b"RIFF"
    assert os.path.commonpath([result["path"], str(home)]) == str(home)


def test_unknown_settings_warn_with_the_closest_name(make_kernel) -> None:
    config = tts("cat {input_path} > {output_path}", vioce="en", voice_compatible=True)
    k = make_kernel(config=config)
    record = next(p for p in k.plugins if p.name == "config:speech")
    assert record.enabled and record.warnings == [
        "config.yaml: 'tts.providers.engine.vioce' is not a setting; ignored (did you mean 'voice'?)"
    ]
    assert k.speech.synthesize("still works").read_text(encoding="utf-8") == "still works"
