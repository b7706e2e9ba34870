"""``hermes-kernel logs``: the lines of ``<home>/logs/agent.log``, filtered, followed."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
LEVEL_ALIASES = {"warn": "warning", "fatal": "critical", "exception": "error"}
# A record of <home>/logs/agent.log: ``2026-01-02T03:04:05.678Z [warning  ] event key=value``.
LOG_LINE = re.compile(r"^(?P<time>\S+)\s+\[(?P<level>[A-Za-z]+)\s*\]\s?(?P<rest>.*)$")
FOLLOW_INTERVAL = 0.25


def add_commands(commands: Any) -> None:
    """Add this group's subcommands to the ``hermes-kernel`` parser."""
    logs = commands.add_parser(
        "logs",
        help="show <home>/logs/agent.log",
        description="Print the last lines of <home>/logs/agent.log, optionally only from a level up, "
        "and follow new lines with -f (Ctrl-C stops). The kernel writes warnings and errors there "
        "(everything with HERMES_PLUGINS_DEBUG=1).",
    )
    logs.add_argument(
        "--level",
        type=_level,
        default=None,
        help="the lowest level shown: debug, info, warning, error, critical",
    )
    logs.add_argument(
        "-n", "--lines", type=_count, default=50, metavar="N", help="how many lines to show (default 50)"
    )
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until Ctrl-C")
    logs.add_argument("--json", action="store_true", help="print one JSON object per line")
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
    """Keeps the level of the record in progress, so a traceback line goes with its record."""

    def __init__(self, minimum: str | None, as_json: bool) -> None:
        self.minimum = LEVELS[minimum] if minimum else 0
        self.as_json = as_json
        self.level: str | None = None

    def __call__(self, line: str) -> str | None:
        """The text to print for ``line`` (without its newline), or ``None`` when filtered out."""
        match = LOG_LINE.match(line)
        if match:
            self.level = match["level"].lower()
        level = LEVEL_ALIASES.get(self.level or "", self.level)
        rank = LEVELS.get(level or "")
        if rank is not None and rank < self.minimum:
            return None
        if not self.as_json:
            return line
        if match:
            rest = match["rest"]
            return json.dumps(
                {"time": match["time"], "level": level, "event": rest.split(" ", 1)[0], "text": line},
                ensure_ascii=False,
            )
        return json.dumps({"time": None, "level": level, "event": None, "text": line}, ensure_ascii=False)


def logs_command(args: argparse.Namespace) -> int:
    from ..core.config import resolve_home

    path = resolve_home(None) / "logs" / "agent.log"
    keep = _LogFilter(args.level, args.json)
    position = 0
    if path.is_file():
        last: deque[str] = deque(maxlen=args.lines)
        with open(path, "rb") as handle:
            for raw in handle:
                text = keep(raw.decode("utf-8", "replace").rstrip("\r\n"))
                if text is not None:
                    last.append(text)
            position = handle.tell()
        for text in last:
            print(text)
    else:
        print(
            f"No log yet: {path} does not exist. The kernel writes warnings and errors there "
            "(everything with HERMES_PLUGINS_DEBUG=1)."
        )
    if not args.follow:
        return 0
    sys.stdout.flush()
    with contextlib.suppress(KeyboardInterrupt):
        _follow(path, position, keep)
    return 0


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
                    text = keep(raw.decode("utf-8", "replace").rstrip("\r"))
                    if text is not None:
                        print(text, flush=True)
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
