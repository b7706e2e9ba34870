"""Audio and transcript files, and the environment of a command."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...base.redact import is_secret_key
from .common import ENV_PREFIX, MAX_TRANSCRIPT_BYTES, TAIL_CHARS, SpeechError

if TYPE_CHECKING:
    pass


# --------------------------------------------------------------------------
# Audio and transcript files
# --------------------------------------------------------------------------


def sniff_audio(path: Path) -> str | None:
    """The audio format a file's first bytes announce (``wav``, ``mp3``, ...), ``None`` if unknown."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return None
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "wav"
    if head[:4] == b"OggS":
        return "opus" if b"OpusHead" in head else "ogg"
    if head[:4] == b"fLaC":
        return "flac"
    if head[:6] == b"#!AMR\n":
        return "amr"
    if head[4:8] == b"ftyp":
        return "m4a"
    if head[:3] == b"ID3":
        return "mp3"
    if len(head) >= 2 and head[0] == 0xFF:
        if head[1] & 0xF6 == 0xF0:
            return "aac"
        if head[1] & 0xE0 == 0xE0 and (head[1] >> 1) & 0x3:
            return "mp3"
    return None


_CUE_INDEX = re.compile(r"^\d+$")
_TAG = re.compile(r"<[^>]+>")


def _subtitle_text(text: str) -> str:
    """The spoken words of an SRT or WebVTT file: cue lines without numbers, timings and headers."""
    lines: list[str] = []
    skip_block = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            skip_block = False
            continue
        if skip_block or line.startswith(("WEBVTT", "NOTE", "STYLE", "REGION")):
            skip_block = True
            continue
        if "-->" in line or _CUE_INDEX.match(line):
            continue
        lines.append(_TAG.sub("", line))
    return " ".join(" ".join(lines).split())


def parse_transcript(text: str, fmt: str) -> str:
    """The plain text of a transcript in ``txt``, ``json`` (a ``text`` field), ``srt`` or ``vtt``."""
    if fmt == "json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SpeechError(f"the transcript is not valid JSON ({exc})") from None
        if isinstance(data, str):
            return data.strip()
        if isinstance(data, Mapping) and isinstance(data.get("text"), str):
            return str(data["text"]).strip()
        if isinstance(data, Mapping) and isinstance(data.get("segments"), list):
            parts = [s.get("text", "") for s in data["segments"] if isinstance(s, Mapping)]
            return " ".join(" ".join(str(p) for p in parts).split())
        raise SpeechError("the JSON transcript has no 'text' string")
    if fmt in ("srt", "vtt"):
        return _subtitle_text(text)
    return text.strip()


def _read_text(path: Path) -> str:
    with open(path, "rb") as f:
        data = f.read(MAX_TRANSCRIPT_BYTES)
    return data.decode("utf-8", errors="replace")


def _tail(path: Path) -> str:
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            f.seek(max(0, size - TAIL_CHARS * 4))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace").strip()
    return text[-TAIL_CHARS:]


# --------------------------------------------------------------------------
# Running a command
# --------------------------------------------------------------------------


def _secret_values() -> list[str]:
    values = {v for k, v in os.environ.items() if is_secret_key(k) and len(v) >= 4}
    return sorted(values, key=len, reverse=True)


def mask_secrets(text: str) -> str:
    """``text`` with the value of every secret-looking environment variable replaced by ``***``."""
    for value in _secret_values():
        text = text.replace(value, "***")
    return text


def _child_environment(
    passthrough: frozenset[str], extra: Mapping[str, str], environ: Mapping[str, str]
) -> dict[str, str]:
    env = {
        k: v
        for k, v in environ.items()
        if not k.startswith(ENV_PREFIX) and (k in passthrough or not is_secret_key(k))
    }
    env.update(extra)
    return env


@dataclass
class _Ran:
    returncode: int
    stderr: str
    seconds: float
