"""``hermes-kernel logs``: the records of ``<home>/logs/agent.log``, filtered, followed."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.log import RECORD_HEAD
from . import output

if TYPE_CHECKING:
    pass


LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
LEVEL_ALIASES = {"warn": "warning", "fatal": "critical", "exception": "error"}
# The first line of a record of <home>/logs/agent.log: ``2026-01-02T03:04:05.678Z [warning  ] event k=v``.
LOG_LINE = RECORD_HEAD
#: A record longer than this (lines) shows its first ones and the number left out.
RECORD_LINE_LIMIT = 2000
# After the event: the logger's name in brackets (``[hermes_kernel.k1]``), then the ``key=value`` fields.
_LOGGER = re.compile(r" \[(?P<logger>[\w.-]+)\](?= |$)")
_KEY = re.compile(r"(?<![^ ])([A-Za-z_][\w.-]*)=")
#: A field value longer than this is kept as the text shown, not parsed.
FIELD_PARSE_LIMIT = 10_000
FOLLOW_INTERVAL = 0.25


def add_commands(commands: Any) -> None:
    """Add this group's subcommands to the ``hermes-kernel`` parser."""
    logs = commands.add_parser(
        "logs",
        help="show <home>/logs/agent.log",
        description="Print the last records of <home>/logs/agent.log (a record is a line with its "
        "traceback or the rest of its message), optionally only from a level up, and follow new ones "
        "with -f (Ctrl-C stops). The kernel writes warnings and errors there (everything with "
        "HERMES_PLUGINS_DEBUG=1).",
    )
    logs.add_argument(
        "--level",
        type=_level,
        default=None,
        help="the lowest level shown: debug, info, warning, error, critical",
    )
    logs.add_argument(
        "-n", "--lines", type=_count, default=50, metavar="N", help="how many records to show (default 50)"
    )
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new records until Ctrl-C")
    logs.add_argument("--json", action="store_true", help="print one JSON object per record")
    logs.set_defaults(handler=logs_command)


def _level(text: str) -> str:
    name = LEVEL_ALIASES.get(text.strip().lower(), text.strip().lower())
    if name not in LEVELS:
        raise argparse.ArgumentTypeError(f"unknown level '{text}' (use one of: {', '.join(LEVELS)})")
    return name


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("the number of lines cannot be negative")
    return value


class _LogFilter:
    """Groups the lines of agent.log into records and keeps those from the wanted level up.

    A record starts at a line with the timestamp and level the kernel's formatter writes
    (``kernel.base.log.RECORD_HEAD``); every other line (a traceback, the rest of a multi-line message)
    belongs to the record above it.  Lines before the first record form a record of unknown level,
    which every ``--level`` keeps.  A record longer than :data:`RECORD_LINE_LIMIT` lines keeps its
    first ones and says how many it left out.
    """

    def __init__(self, minimum: str | None, as_json: bool) -> None:
        self.minimum = LEVELS[minimum] if minimum else 0
        self.as_json = as_json
        #: The level of the last record started (a line arriving after it was printed keeps it).
        self.level: str | None = None
        self._lines: list[str] = []
        self._more = 0

    def feed(self, line: str) -> list[str] | None:
        """Take one line (without its newline); the record it ended, as printable lines, if any."""
        if RECORD_HEAD.match(line):
            done = self.flush()
            self.level = line_level(line)
            self._lines = [line]
            return done
        if len(self._lines) < RECORD_LINE_LIMIT:
            self._lines.append(line)
        else:
            self._more += 1
        return None

    def flush(self) -> list[str] | None:
        """End the record in progress: its printable lines, or ``None`` (none, or below the level)."""
        lines, more, self._lines, self._more = self._lines, self._more, [], 0
        if not lines:
            return None
        if more:
            lines.append(f"  [{more} more lines of this record left out]")
        rank = LEVELS.get(self.level or "")
        if rank is not None and rank < self.minimum:
            return None
        if not self.as_json:
            return lines
        record: dict[str, Any] = {
            "time": None,
            "level": self.level,
            "event": None,
            "logger": None,
            "fields": {},
        }
        match = RECORD_HEAD.match(lines[0])
        if match:
            record.update(time=match["time"], **parse_record(match["rest"] or ""))
        record["text"] = "\n".join(lines)
        return [output.json_safe(json.dumps(record, ensure_ascii=False))]


def line_level(line: str) -> str | None:
    """The level of a record's first line (aliases resolved), ``None`` for any other line."""
    match = RECORD_HEAD.match(line)
    if match is None:
        return None
    level = match["level"].lower()
    return LEVEL_ALIASES.get(level, level)


def parse_record(rest: str) -> dict[str, Any]:
    """``event [logger] key=value ...`` (what follows the level in agent.log) as ``event``, ``logger``
    and ``fields``; a value is read as the Python literal it was written as, else kept as shown."""
    logger = _LOGGER.search(rest)
    if logger is not None:
        event, tail = rest[: logger.start()], rest[logger.end() :]
    else:
        event, _, tail = rest.partition(" ")
    return {"event": event or None, "logger": logger["logger"] if logger else None, "fields": _fields(tail)}


def _fields(text: str) -> dict[str, Any]:
    """``a=1 b='x y' c=[1, 2]``: each value runs to the next `` key=`` after its quotes or brackets."""
    fields: dict[str, Any] = {}
    key = _KEY.search(text)
    while key is not None:
        start = key.end()
        following = _KEY.search(text, _value_end(text, start))
        stop = following.start() if following is not None else len(text)
        fields[key[1]] = _value(text[start:stop].strip())
        key = following
    return fields


def _value_end(text: str, start: int) -> int:
    """Where a quoted or bracketed value that starts at ``start`` ends (``start`` for any other)."""
    opening = text[start : start + 1]
    if not opening or opening not in "'\"([{":
        return start
    depth, quote, escaped = 0, "", False
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
                if depth == 0:
                    return index + 1
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth <= 0:
                return index + 1
    return len(text)


def _value(shown: str) -> Any:
    import ast

    if not shown or len(shown) > FIELD_PARSE_LIMIT or shown[0] not in "'\"[({-0123456789TFN":
        return shown
    try:
        value = ast.literal_eval(shown)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return shown
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError):  # a set, bytes, a complex number: the text shown
        return shown
    return value


def logs_command(args: argparse.Namespace) -> int:
    from ..base.config import resolve_home

    path = resolve_home(None) / "logs" / "agent.log"
    keep = _LogFilter(args.level, args.json)
    position = 0
    if path.is_file():
        last: deque[tuple[list[str], str | None]] = deque(maxlen=args.lines)
        with open(path, "rb") as handle:
            for raw in handle:
                level = keep.level  # the record a head line ends is the one in progress
                done = keep.feed(raw.decode("utf-8", "replace").rstrip("\r\n"))
                if done is not None:
                    last.append((done, level))
            position = handle.tell()
        done = keep.flush()
        if done is not None:
            last.append((done, keep.level))
        for lines, level in last:
            for text in lines:
                _show(text, level, keep.as_json)
    else:
        print(
            f"No log yet: {path} does not exist. The kernel writes warnings and errors there "
            "(everything with HERMES_PLUGINS_DEBUG=1)."
        )
    if not args.follow:
        return 0
    sys.stdout.flush()
    try:
        _follow(path, position, keep)
    except KeyboardInterrupt:
        return 130  # stopped by Ctrl-C (SIGINT), as a shell reports it
    return 0


_LEVEL_STYLES = {"debug": "debug", "warning": "warning", "error": "error", "critical": "critical"}


def _show(text: str, level: str | None, as_json: bool, flush: bool = False) -> None:
    """Print one line: in its level's colour on a colour terminal (JSON and plain text as they are)."""
    if as_json or not output.mode().color:
        print(text, flush=flush)
        return
    output.line(text, _LEVEL_STYLES.get(LEVEL_ALIASES.get(level or "", level or "")))
    sys.stdout.flush()


def _show_record(lines: list[str] | None, level: str | None, as_json: bool) -> None:
    for text in lines or ():
        _show(text, level, as_json, flush=True)


def _follow(path: Path, position: int, keep: _LogFilter) -> None:
    """Print the lines appended to ``path`` until Ctrl-C; starts over when the file is replaced."""
    handle = None
    inode = None
    pending = b""
    try:
        while True:
            if handle is None:
                try:
                    handle = open(path, "rb")  # noqa: SIM115 - kept open across polls
                except FileNotFoundError:
                    time.sleep(FOLLOW_INTERVAL)
                    continue
                inode = os.fstat(handle.fileno()).st_ino
                handle.seek(position)
            chunk = handle.read()
            if chunk:
                *lines, pending = (pending + chunk).split(b"\n")
                for raw in lines:
                    level = keep.level
                    _show_record(keep.feed(raw.decode("utf-8", "replace").rstrip("\r")), level, keep.as_json)
                # The kernel writes a record at once: what was read of it is printed now.
                _show_record(keep.flush(), keep.level, keep.as_json)
                continue
            time.sleep(FOLLOW_INTERVAL)
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                continue
            if stat.st_ino != inode or stat.st_size < handle.tell():
                handle.close()
                handle, position, pending = None, 0, b""
    finally:
        if handle is not None:
            handle.close()
