"""IRC text: formatting codes and control characters removed, lines split to fit in bytes, case folding."""

from __future__ import annotations

import re

#: IRC's limit for one line, CR LF included.
LINE_LIMIT = 512
#: The formatting codes IRC clients understand: bold, colour, reset, monospace, reverse, italic,
#: strike-through, underline (``keep_formatting: true`` keeps them in what the bot sends).
FORMATTING = "\x02\x03\x04\x0f\x11\x16\x1d\x1e\x1f"

_NEWLINE_RE = re.compile(r"\r\n|[\r\n\x0b\x0c\x1c\x85\u2028\u2029]")
_COLOUR_RE = re.compile(r"\x03(?:\d{1,2}(?:,\d{1,2})?)?|\x04(?:[0-9A-Fa-f]{6}(?:,[0-9A-Fa-f]{6})?)?")
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROL_KEEP_FORMATTING_RE = re.compile(r"[\x00-\x01\x05-\x0e\x10\x12-\x15\x17-\x1c\x7f-\x9f]")


def strip_formatting(text: str) -> str:
    """``text`` without IRC colour and formatting codes."""
    text = _COLOUR_RE.sub("", text)
    return text.translate({ord(c): None for c in FORMATTING})


def clean(line: str, keep_formatting: bool = False) -> str:
    """One line without control characters (tabs become spaces); formatting codes only when kept."""
    line = line.replace("\t", "    ")
    if keep_formatting:
        return _CONTROL_KEEP_FORMATTING_RE.sub("", line)
    return CONTROL_RE.sub("", strip_formatting(line))


def clean_lines(text: str, keep_formatting: bool = False) -> list[str]:
    """The lines IRC can carry of ``text``: split at every line break, cleaned, blank ones dropped."""
    lines = (clean(line, keep_formatting).rstrip() for line in _NEWLINE_RE.split(text))
    return [line for line in lines if line.strip()]


def split_to_bytes(line: str, budget: int, encoding: str = "utf-8") -> list[str]:
    """``line`` in pieces of at most ``budget`` encoded bytes, cut between words when possible.

    Never cuts inside a character.
    """
    budget = max(budget, 8)
    pieces: list[str] = []
    while line:
        if len(line.encode(encoding, "replace")) <= budget:
            pieces.append(line)
            break
        used = cut = 0
        for ch in line:
            size = len(ch.encode(encoding, "replace"))
            if used + size > budget:
                break
            used += size
            cut += 1
        space = line.rfind(" ", 0, cut + 1)
        if space > cut // 2:
            cut = space
        piece = line[:cut].rstrip()
        if piece:
            pieces.append(piece)
        line = line[cut:].lstrip()
    return pieces


def irc_lower(text: str, casemapping: str = "rfc1459") -> str:
    """IRC's case folding: ASCII, plus ``[]\\~`` as the upper case of ``{}|^`` under rfc1459."""
    text = text.lower()
    if casemapping == "ascii":
        return text
    table = {"[": "{", "]": "}", "\\": "|"}
    if casemapping != "strict-rfc1459":
        table["~"] = "^"
    return text.translate(str.maketrans(table))


def encode_line(line: str, encoding: str) -> bytes:
    """``line`` as it goes on the wire: encoded, cut to IRC's limit, ended by CR LF."""
    return line.encode(encoding, "replace")[: LINE_LIMIT - 2] + b"\r\n"


def decode_line(data: bytes, encoding: str) -> str:
    """A received line as text (Latin-1 when it is not valid in ``encoding``)."""
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        return data.decode("latin-1")
