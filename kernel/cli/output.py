"""How the command line writes: decided once per run, and kept apart from what plugins write.

* **Plain or rich.** Through a pipe or into a file (stdout not a terminal), and on a ``TERM=dumb``
  terminal, every command prints the plain text that scripts and tests parse, and ``rich`` is not
  imported.  On a terminal, tables are drawn by rich, in colour unless ``NO_COLOR`` is set or
  ``--no-color`` was given (then without a single escape code).  :func:`mode` tells which.
* **Progress.** :func:`status` shows a spinner on stderr while something slow runs (an install, MCP
  servers connecting, gateway platforms connecting), only when stderr is a terminal.
* **Plugins' output.** :func:`stdout_to_stderr` sends whatever is written to stdout (``print``,
  ``sys.stdout``, file descriptor 1, child processes) to stderr while plugins load or run for a
  command whose stdout is JSON; :func:`emit` writes the command's own output to the real stdout.
* **Encodings.** :func:`setup_streams` makes stdout and stderr write what their encoding cannot
  hold as ``\\uXXXX`` escapes (valid in JSON strings too) instead of raising.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..base.redact import mask_urls, shown

if TYPE_CHECKING:
    from rich.console import Console

#: The error handler :func:`setup_streams` gives stdout and stderr.
ESCAPE_ERRORS = "hermes-kernel-escape"

# What a terminal would obey (C0 but tab and newline, DEL, C1, bidirectional controls), as in kernel.base.log.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")

#: Styles by meaning, for rich (used only when colour is on).
STYLES = {
    "ok": "green",
    "warning": "yellow",
    "error": "bold red",
    "info": "cyan",
    "dim": "dim",
    "heading": "bold",
    "debug": "dim",
    "critical": "bold white on red",
}


class Mode:
    """What this run's stdout gets: ``rich`` tables (a terminal), ``color`` too, and its ``width``."""

    __slots__ = ("color", "rich", "width")

    def __init__(self, rich: bool, color: bool, width: int) -> None:
        self.rich, self.color, self.width = rich, color, width

    def __repr__(self) -> str:
        return f"Mode(rich={self.rich}, color={self.color}, width={self.width})"


_no_color_flag = False
_mode: Mode | None = None
_console: Console | None = None


def configure(*, no_color: bool = False) -> None:
    """Take the command line's ``--no-color`` into account (before anything is printed)."""
    global _no_color_flag, _mode, _console
    _no_color_flag = no_color
    _mode, _console = None, None


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed, detached, or not a file
        return False


def _capable(stream: Any) -> bool:
    return _is_terminal(stream) and os.environ.get("TERM", "") != "dumb"


def color_wanted() -> bool:
    """Whether colour is allowed at all: neither ``NO_COLOR`` (https://no-color.org) nor ``--no-color``."""
    return not _no_color_flag and not os.environ.get("NO_COLOR")


def terminal_columns() -> int:
    """The terminal's width, as ``shutil.get_terminal_size((80, 24)).columns`` tells it (``COLUMNS``,
    then stdout's terminal, then 80), without importing shutil and the compressors it imports."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def mode() -> Mode:
    """This run's :class:`Mode`, decided at the first call (after :func:`configure`)."""
    global _mode
    if _mode is None:
        fancy = _capable(sys.stdout)
        width = terminal_columns() if fancy else 80
        _mode = Mode(rich=fancy, color=fancy and color_wanted(), width=width)
    return _mode


def raw(stream: Any) -> Any:
    """The stream under an :class:`EscapingStream` (rich writes its own escape codes)."""
    return stream.raw if isinstance(stream, EscapingStream) else stream


def console() -> Console:
    """The rich console of stdout (only in rich mode: it imports rich)."""
    global _console
    if _console is None:
        from rich.console import Console

        current = mode()
        _console = Console(
            file=raw(sys.stdout),
            color_system="auto" if current.color else None,
            force_terminal=True,
            no_color=not current.color,
            highlight=False,
            markup=False,
            emoji=False,
            width=current.width,
        )
    return _console


def text(value: str, style: str | None = None) -> Any:
    """A rich ``Text`` of ``value``, shown safely (control characters as escapes), styled if colour is on."""
    from rich.text import Text

    wanted = STYLES.get(style or "", style) if mode().color and style else None
    return Text(shown(value), style=wanted or "")


def line(value: str, style: str | None = None) -> None:
    """Print one line of stdout, in ``style`` (a key of :data:`STYLES`, or a rich style) when coloured."""
    if not mode().color or style is None:
        print(value)
        return
    console().print(text(value, style), soft_wrap=True)


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    styles: Sequence[Sequence[str | None]] | None = None,
) -> None:
    """Draw a table with rich (rich mode only); ``styles`` gives each cell's style, as ``rows``."""
    from rich import box
    from rich.table import Table

    grid = Table(
        box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold" if mode().color else ""
    )
    for header in headers:
        grid.add_column(header, overflow="fold")
    for index, row in enumerate(rows):
        cell_styles = styles[index] if styles is not None else [None] * len(row)
        grid.add_row(*(text(cell, style) for cell, style in zip(row, cell_styles, strict=True)))
    console().print(grid)


def prompt(value: str) -> str:
    """``value`` for ``input()``: bold and coloured on a colour terminal (readline-safe), else as is."""
    if not mode().color:
        return value
    head, space, tail = value.rpartition(" ") if value.endswith(" ") else (value, "", "")
    return f"\001\033[1;36m\002{head}\001\033[0m\002{space}{tail}"


# --------------------------------------------------------------------------- progress


class Status:
    """What :func:`status` yields: :meth:`update` changes the text shown, :meth:`stop` ends it early."""

    def __init__(self, live: Any = None, spinner: Any = None) -> None:
        self._live, self._spinner = live, spinner

    def update(self, value: str) -> None:
        if self._spinner is not None:
            self._spinner.update(text=shown(value))

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()


@contextlib.contextmanager
def status(value: str) -> Iterator[Status]:
    """A spinner with ``value`` on stderr while the block runs, when stderr is a terminal; else nothing.

    ``with output.status("Installing weather...") as progress: ...; progress.update("Running pip...")``.
    Without colour (``NO_COLOR``, ``--no-color``) the text is printed once, without animation.
    """
    stream = raw(sys.stderr)
    if not _capable(stream):
        yield Status()
        return
    if not color_wanted():
        stream.write(shown(value) + "\n")
        stream.flush()
        yield Status()
        return
    from rich.console import Console
    from rich.live import Live
    from rich.spinner import Spinner

    spinner = Spinner("dots", text=shown(value), style="cyan")
    err = Console(file=stream, force_terminal=True, highlight=False, markup=False, emoji=False)
    live = Live(spinner, console=err, transient=True, redirect_stdout=False, redirect_stderr=True)
    with live:
        # What is written to sys.stderr meanwhile is printed above the spinner by rich: shown safely.
        proxy = sys.stderr
        sys.stderr = EscapingStream(proxy)
        try:
            yield Status(live, spinner)
        finally:
            if isinstance(sys.stderr, EscapingStream) and sys.stderr.raw is proxy:
                sys.stderr = proxy


# --------------------------------------------------------------------------- streams


class EscapingStream:
    """A text stream that writes control characters as visible escapes (``\\x1b``, ``\\u202e``)
    and URLs without their credentials (``https://***@host/?api-key=***``).

    Plugin names, descriptions, errors and log lines are text from outside:
    printed raw, ``ESC[2J`` would clear the user's screen.
    """

    def __init__(self, stream: Any) -> None:
        self.raw = stream

    def write(self, value: str) -> int:
        self.raw.write(shown(value))
        return len(value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def _escape_unencodable(error: UnicodeError) -> tuple[str, int]:
    """``\\uXXXX`` for each character the encoding cannot hold (a surrogate pair beyond the BMP)."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    pieces = []
    for char in error.object[error.start : error.end]:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            pieces.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            pieces.append(f"\\u{code:04x}")
    return "".join(pieces), error.end


def setup_streams() -> None:
    """Let stdout and stderr escape what their encoding cannot hold (``PYTHONIOENCODING=ascii``,
    ``LC_ALL=C``, lone surrogates), and stdin replace bytes it cannot decode, instead of raising."""
    try:
        codecs.lookup_error(ESCAPE_ERRORS)
    except LookupError:
        codecs.register_error(ESCAPE_ERRORS, _escape_unencodable)
    for stream, errors in ((sys.stdout, ESCAPE_ERRORS), (sys.stderr, ESCAPE_ERRORS), (sys.stdin, "replace")):
        reconfigure = getattr(raw(stream), "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(Exception):  # a detached or closed stream keeps what it has
                reconfigure(errors=errors)


_depth = 0
_pending: list[str] = []


def json_safe(value: str) -> str:
    """``value`` (JSON text) with URLs masked and terminal controls as JSON escapes: still valid JSON."""
    return _CONTROL.sub(lambda match: f"\\u{ord(match.group()):04x}", mask_urls(value))


def emit(value: str) -> None:
    """Write ``value`` (JSON text, see :func:`json_safe`) and a newline to the command's real stdout:
    at once, or, inside :func:`stdout_to_stderr`, when it ends (stdout is stderr until then)."""
    value = json_safe(value) + "\n"
    if _depth:
        _pending.append(value)
        return
    stream = raw(sys.stdout)
    stream.write(value)
    _flush(stream)


def emit_json(data: Any) -> None:
    """:func:`emit` ``data`` as indented JSON."""
    import json

    emit(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _flush(*streams: Any) -> None:
    for stream in streams:
        with contextlib.suppress(Exception):
            stream.flush()


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """While the block runs, stdout is stderr: ``print``, ``sys.stdout``, writes to file descriptor 1
    and child processes' output all go to stderr.  What :func:`emit` gets is written to the real
    stdout when the outermost block ends.  Nests."""
    global _depth
    saved_stream = sys.stdout
    _flush(saved_stream, sys.stderr)
    saved_fd: int | None = None
    with contextlib.suppress(OSError, ValueError, AttributeError):
        out_fd, err_fd = raw(saved_stream).fileno(), raw(sys.stderr).fileno()
        saved_fd = os.dup(out_fd)
        os.dup2(err_fd, out_fd)
    sys.stdout = sys.stderr
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        # A plugin may hold the stdout object of before: what it buffered goes where fd 1 points now.
        _flush(sys.stdout, saved_stream, sys.stderr)
        sys.stdout = saved_stream
        if saved_fd is not None:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                os.dup2(saved_fd, raw(saved_stream).fileno())
            os.close(saved_fd)
        if not _depth and _pending:
            pending = "".join(_pending)
            _pending.clear()
            target = raw(saved_stream)
            target.write(pending)
            _flush(target)
