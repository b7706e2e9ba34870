"""``k.speech``: synthesis and transcription through the configured command or plugin providers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...base.config import read_dotenv, section
from .. import end_process_group
from . import dispatch
from .common import AUDIO_FORMATS, KILL_GRACE, LEGACY_ENV, LEGACY_NAME, SHELL, SpeechError
from .config import (
    _choice,
    _ConfigProblem,
    _legacy_provider,
    _parse_provider,
    _PluginChoice,
    _Provider,
    _shorten,
    check_speed,
    check_word,
)
from .files import _child_environment, _Ran, _read_text, _tail, mask_secrets, parse_transcript, sniff_audio

if TYPE_CHECKING:
    from ...core.kernel import Kernel


# --------------------------------------------------------------------------
# The service
# --------------------------------------------------------------------------


class Speech:
    """``k.speech``: the configured text-to-speech and speech-to-text providers.

    The configuration is read once, when this object is made; problems found
    there are in :attr:`problems` (and in ``k.problems`` after ``k.load()``).
    A provider name that no ``providers`` entry runs as a command names a
    plugin's provider (``ctx.register_tts_provider``), looked up at each call;
    ``k.load()`` reports the names no plugin offers.
    """

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self.audio_dir: Path = kernel.home / "cache" / "audio"
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self._tts_problem: str | None = None
        self._stt_problem: str | None = None
        self._tts: _Provider | _PluginChoice | None = None
        self._stt: _Provider | _PluginChoice | None = None
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
            if isinstance(provider, _Provider):
                self.warnings.extend(provider.warnings)
                self.warnings.extend(self._check_program(provider))

    def settle(self) -> None:
        """Match the choices with the plugins' providers (called by ``k.load()``, after the plugins).

        A name no plugin offers becomes a problem of its direction, unless it
        is one of Hermes Agent's built-in providers (a warning then); an
        unavailable plugin provider, or one a same-name command provider
        hides, a warning.
        """
        for kind, chosen in (("tts", self._tts), ("stt", self._stt)):
            if isinstance(chosen, _Provider):
                other = dispatch.offered(self._kernel, kind).get(chosen.name)
                if other is not None:
                    self._warn(
                        f"{chosen.label}: the command of {chosen.key} is used, not the provider of the "
                        f"same name that plugin '{other.plugin}' offers (a command provider wins)"
                    )
                continue
            if not isinstance(chosen, _PluginChoice):
                continue
            found = dispatch.find(self._kernel, chosen)
            if found is None and dispatch.hermes_built_in(chosen):
                # A Hermes home's own setting (its default, often): carried over, with the fix.
                self._warn(dispatch.missing(self._kernel, chosen))
                continue
            if found is None:
                problem = dispatch.missing(self._kernel, chosen)
                if kind == "tts":
                    self._tts_problem = problem
                else:
                    self._stt_problem = problem
                if problem not in self.problems:
                    self.problems.append(problem)
                continue
            ok, reason = dispatch.availability(found)
            if not ok:
                self._warn(f"{found.label} is not available: {reason}; calls will fail until it is")

    def _warn(self, warning: str) -> None:
        if warning not in self.warnings:
            self.warnings.append(warning)

    # -- status ------------------------------------------------------------------

    @property
    def tts_provider(self) -> str | None:
        """The name of the usable text-to-speech provider, ``None`` when there is none."""
        return self._usable(self._tts)

    @property
    def stt_provider(self) -> str | None:
        """The name of the usable speech-to-text provider (``local_command`` for the legacy variable)."""
        return self._usable(self._stt)

    def _usable(self, chosen: _Provider | _PluginChoice | None) -> str | None:
        if isinstance(chosen, _PluginChoice):
            found = dispatch.find(self._kernel, chosen)
            return found.name if found is not None else None
        return chosen.name if chosen is not None else None

    def status(self) -> dict[str, Any]:
        """What is configured: per direction the provider, its command, format and timeout, or the problem."""

        def one(provider: _Provider | _PluginChoice | None, problem: str | None) -> dict[str, Any]:
            if isinstance(provider, _PluginChoice):
                return self._plugin_status(provider)
            if provider is None:
                return {"provider": None, "problem": problem}
            row: dict[str, Any] = {
                "provider": provider.name,
                "type": "command",
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

    def _plugin_status(self, choice: _PluginChoice) -> dict[str, Any]:
        found = dispatch.find(self._kernel, choice)
        ok, reason = dispatch.availability(found) if found is not None else (False, "")
        row: dict[str, Any] = {
            "provider": found.name if found is not None else choice.name,
            "type": "plugin",
            "plugin": found.plugin if found is not None else None,
            "configured_at": f"{choice.kind}.provider",
            "available": ok,
            "reason": reason,
            "format": choice.fmt if choice.kind == "tts" else None,
            "problem": None if found is not None else dispatch.missing(self._kernel, choice),
        }
        extra = (
            ("voice", "model", "speed", "max_text_length") if choice.kind == "tts" else ("language", "model")
        )
        row.update({k: getattr(choice, k) for k in extra})
        return row

    def describe(self) -> str:
        """A one-line status for ``plugins list`` and doctor."""
        parts = []
        for kind, provider, problem in (
            ("tts", self._tts, self._tts_problem),
            ("stt", self._stt, self._stt_problem),
        ):
            if isinstance(provider, _PluginChoice):
                found = dispatch.find(self._kernel, provider)
                if found is not None:
                    parts.append(f"{kind}: {found.name} (plugin '{found.plugin}')")
                elif dispatch.hermes_built_in(provider):
                    parts.append(f"{kind}: not available ('{provider.name}' is built into Hermes Agent only)")
                else:
                    parts.append(f"{kind}: not available (no plugin offers '{provider.name}')")
            elif provider is not None:
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
        :class:`SpeechError`.  A plugin's provider gets all four, as Hermes
        Agent passes them (``format`` defaults to ``tts.output_format``, else
        ``mp3``).
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
        if isinstance(tts, _PluginChoice):
            return self._plugin_synthesize(tts, text, voice, model, speed, output_format)
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

    def _plugin_synthesize(
        self,
        choice: _PluginChoice,
        text: str,
        voice: str | None,
        model: str | None,
        speed: float | int | str | None,
        output_format: str | None,
    ) -> Path:
        fmt = choice.fmt
        if output_format is not None:
            try:
                fmt = _choice(output_format, "output_format", AUDIO_FORMATS, choice.fmt)
            except _ConfigProblem as exc:
                raise SpeechError(str(exc).replace("config.yaml: ", "")) from None
        chosen_voice = check_word(str(voice), "voice") if voice is not None else choice.voice
        chosen_model = check_word(str(model), "model") if model is not None else choice.model
        chosen_speed = check_speed(speed) if speed is not None else choice.speed
        found = dispatch.find(self._kernel, choice)
        if found is None:
            raise SpeechError(dispatch.missing(self._kernel, choice), provider=choice.name)
        dispatch.require_available(self._kernel, found)
        self.audio_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        output = (self.audio_dir / f"tts-{stamp}-{os.urandom(6).hex()}.{fmt}").resolve()
        started = time.monotonic()
        try:
            result = dispatch.call(
                self._kernel,
                found,
                "synthesize",
                text,
                str(output),
                voice=chosen_voice,
                model=chosen_model,
                speed=float(chosen_speed) if chosen_speed is not None else None,
                format=fmt,
            )
            path = dispatch.written_path(self._kernel, found, result, output)
        except BaseException:
            output.unlink(missing_ok=True)
            raise
        if path != output:
            output.unlink(missing_ok=True)  # a file the provider left where it was asked to write
        self._kernel.log.info(
            "tts_done",
            provider=found.name,
            plugin=found.plugin,
            chars=len(text),
            bytes=path.stat().st_size,
            seconds=round(time.monotonic() - started, 3),
        )
        return path

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
        if isinstance(stt, _PluginChoice):
            return self._plugin_transcribe(stt, source, language, model)
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

    def _plugin_transcribe(
        self, choice: _PluginChoice, source: Path, language: str | None, model: str | None
    ) -> str:
        lang = check_word(str(language), "language") if language is not None else choice.language
        mod = check_word(str(model), "model") if model is not None else choice.model
        found = dispatch.find(self._kernel, choice)
        if found is None:
            raise SpeechError(dispatch.missing(self._kernel, choice), provider=choice.name)
        dispatch.require_available(self._kernel, found)
        started = time.monotonic()
        result = dispatch.call(self._kernel, found, "transcribe", str(source), model=mod, language=lang)
        text = dispatch.transcript(self._kernel, found, result)
        self._kernel.log.info(
            "stt_done",
            provider=found.name,
            plugin=found.plugin,
            chars=len(text),
            seconds=round(time.monotonic() - started, 3),
            source=source.name,
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
        if isinstance(self._tts, _PluginChoice):
            names = frozenset(("voice", "speed", "model", "format"))
        else:
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
        if isinstance(self._stt, _PluginChoice) or "language" in self._stt.template.names:
            props["language"] = {
                "type": "string",
                "description": f"language of the speech (default: {self._stt.language or 'detected'})",
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
