"""What the CLI's command groups share: the argument parser, loading the kernel as a command does,
telling the user about failed hooks, finding a plugin by name."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from .. import Kernel, PluginInfo
from ..core.sources.discovery import (
    Candidate,
    merge_sources,
)
from ..core.sources.manifest import EnvVar, Manifest, ManifestError, find_manifest, load_manifest
from . import output


def loaded_kernel(home: str | None = None, *, save: bool = True) -> Kernel:
    """A kernel loaded for a command (see :func:`load`): its plugin list saved (unless ``save`` is
    false: a command that only prints help writes nothing), its config problems printed as warnings."""
    kernel = Kernel(home=home)
    kernel.write_caches = save
    load(kernel)
    if save:
        kernel.save_plugin_state()
        from .offered import save as save_offered

        save_offered(kernel)  # the help texts of its commands, for --help and completion
    for problem in kernel.problems:
        print(f"warning: {problem}", file=sys.stderr)
    return kernel


def load(kernel: Kernel) -> None:
    """``kernel.load()`` with whatever plugins print on stdout sent to stderr (stdout is the
    command's), and a spinner on a terminal while the MCP servers of config.yaml connect."""
    servers = kernel.config.get("mcp_servers") if isinstance(kernel.config, dict) else None
    waiting: Any = contextlib.nullcontext()
    if isinstance(servers, dict) and servers:
        names = ", ".join(str(name) for name in list(servers)[:5]) + (", ..." if len(servers) > 5 else "")
        waiting = output.status(f"Connecting to MCP servers: {names}")
    with waiting, output.stdout_to_stderr():
        kernel.load()


class HookFailures:
    """Tells the user, once each, about the hook callbacks the kernel disabled after they failed.

    The kernel disables a failing callback and logs ``hook_failed`` to ``agent.log``; a command that
    runs turns (``run``, ``chat``, ``tools call``) calls :meth:`report` after each, so the user sees
    one line on stderr instead of having to read the log.
    """

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._seen = set(self._failed())

    def _failed(self) -> dict[tuple[str, str], str]:
        return {(p.name, hook): error for p in self._kernel.plugins for hook, error in p.hook_errors.items()}

    def report(self, write: Callable[[str], None] | None = None) -> list[str]:
        """Write (default: to stderr) and return one ``warning:`` line per newly disabled callback."""
        log = self._kernel.home / "logs" / "agent.log"
        lines = []
        for (plugin, hook), error in self._failed().items():
            if (plugin, hook) in self._seen:
                continue
            self._seen.add((plugin, hook))
            reason = " ".join(str(error).split())
            reason = reason if len(reason) <= 200 else reason[:199] + "…"
            lines.append(
                f"warning: plugin '{plugin}': its {hook} hook failed ({reason}) and is disabled; see {log}"
            )
        for text in lines:
            if write is None:
                print(text, file=sys.stderr, flush=True)
            else:
                write(text)
        return lines


# --------------------------------------------------------------------------- the parser

# reStructuredText marks in help texts: ``literal``, `interpreted`, :role:`target`, `link`_.
_RST = re.compile(r":[\w.:-]+:`~?([^`]+)`|``(.+?)``|`([^`]+)`_{0,2}")


def plain_text(text: str) -> str:
    """``text`` without reStructuredText marks: literals, interpreted text, roles and links become plain."""
    if "`" not in text:
        return text
    return _RST.sub(lambda match: next(group for group in match.groups() if group is not None), text)


class _PlainText(argparse.HelpFormatter):
    """A help formatter that writes help texts as plain text (see :func:`plain_text`)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return super()._fill_text(plain_text(text), width, indent)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return super()._split_lines(plain_text(text), width)


_PLAIN_FORMATTERS: dict[type, type] = {}


def _plain_formatter(cls: type) -> type:
    if issubclass(cls, _PlainText):
        return cls
    made = _PLAIN_FORMATTERS.get(cls)
    if made is None:
        made = _PLAIN_FORMATTERS[cls] = type(f"Plain{cls.__name__}", (_PlainText, cls), {})
    return made


def unknown_command(name: str, known: Iterable[str]) -> str:
    """``unknown command 'plugin' — did you mean 'plugins'?`` (or the known commands, when none is close)."""
    import difflib

    names = sorted(set(known))
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    close += [n for n in names if n.startswith(name) and n not in close][: 3 - len(close)] if name else []
    if close:
        return f"unknown command '{name}' — did you mean {' or '.join(repr(c) for c in close)}?"
    return f"unknown command '{name}' (choose from: {', '.join(names)})"


class Parser(argparse.ArgumentParser):
    """The CLI's argument parser, also for plugins' commands and their subcommands.

    Help texts read as plain text (no reStructuredText backticks), whatever formatter a command
    chose, and a mistyped subcommand, at any level, gets the closest known ones:
    ``error: unknown command 'plugin' — did you mean 'plugins'?`` (exit status 2).
    """

    def _get_formatter(self) -> argparse.HelpFormatter:
        cls = _plain_formatter(cast(type, self.formatter_class))
        # argparse's own __init__ would import shutil (and its compressors) for the width.
        if vars(argparse.HelpFormatter)["__init__"] is getattr(cls, "__init__", None):
            return cast(argparse.HelpFormatter, cls(prog=self.prog, width=output.terminal_columns() - 2))
        return cast(argparse.HelpFormatter, cls(prog=self.prog))

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if isinstance(action, argparse._SubParsersAction) and choices is not None and value not in choices:
            raise argparse.ArgumentError(None, unknown_command(str(value), choices))
        super()._check_value(action, value)


DISABLED_BY_CONFIG = "disabled via config"
NOT_ENABLED = "not enabled in config"  # kernel.core.records.NOT_ENABLED, without importing the core
DISABLED_FOR_RUN = "disabled for this run"  # kernel.core.records.DISABLED_FOR_RUN
TIERS = {0: "tryfirst", 1: "normal", 2: "trylast", 3: "config"}


def fail(message: str, code: int = 1) -> int:
    """Print ``error: message`` on stderr; the exit code."""
    print(f"error: {message}", file=sys.stderr)
    return code


def unloaded_kernel() -> Kernel:
    """A kernel of the home, not loaded (for commands that only read files)."""
    return Kernel()


def discover(kernel: Kernel) -> tuple[dict[str, Candidate], list[Candidate]]:
    """What ``Kernel.load`` would find, without importing any plugin code.

    Returns the winners by key and every candidate of every source (overridden
    and refused ones too).
    """
    groups = kernel.host.scan_sources()
    merged, _refused = merge_sources(groups, kernel.log)
    return merged, [c for group in groups for c in group]


@dataclass
class Named:
    """Something a user may name on the command line: a plugin key, its manifest name, its directory."""

    key: str
    manifest_name: str | None
    dirname: str | None
    obj: Any


def resolve_name(name: str, items: list[Named]) -> list[Named]:
    """The items ``name`` designates: by key, else manifest name, else directory, else ignoring case."""
    rules = (
        lambda i: i.key == name,
        lambda i: i.manifest_name == name,
        lambda i: i.dirname == name,
        lambda i: name.casefold() in {i.key.casefold(), (i.manifest_name or "").casefold()},
    )
    for rule in rules:
        found = [i for i in items if rule(i)]
        if found:
            return found
    return []


def unknown_name(name: str, items: list[Named]) -> int:
    import difflib

    names = sorted({i.key for i in items} | {i.manifest_name for i in items if i.manifest_name})
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    close += [n for n in names if name.casefold() in n.casefold() and n not in close][: 5 - len(close)]
    if close:
        hint = f"; did you mean: {', '.join(close)}?"
    else:
        hint = f"; known plugins: {', '.join(names)}" if names else "; no plugins were found"
    return fail(f"no plugin named '{name}'{hint} (see: hermes-kernel plugins list)")


def manifest_at(path: str | Path | None) -> Manifest | None:
    """The manifest of a plugin directory, or ``None`` (no directory, no manifest, or invalid)."""
    if path is None:
        return None
    file = find_manifest(Path(path))
    if file is None:
        return None
    try:
        return load_manifest(file, Path(path).name)
    except ManifestError:
        return None


def info_items(plugins: list[PluginInfo]) -> list[Named]:
    items = []
    for p in plugins:
        manifest = manifest_at(p.path)
        items.append(Named(p.name, manifest.name if manifest else None, None, (p, manifest)))
    return items


def candidate_items(candidates: Iterable[Candidate]) -> list[Named]:
    return [
        Named(
            c.key,
            c.manifest.name if c.manifest else None,
            c.path.name if c.path is not None and c.source == "user" else None,
            c,
        )
        for c in candidates
    ]


def env_state(var: EnvVar, environ: Mapping[str, str], dotenv: Mapping[str, str]) -> str | None:
    """Where ``var`` is set: ``environment``, ``.env`` or ``None`` (missing)."""
    if environ.get(var.name):
        return "environment"
    if dotenv.get(var.name):
        return ".env"
    return None


def plugin_status(info: PluginInfo) -> str:
    if info.enabled:
        return "enabled (deferred: imported on the first provider lookup)" if info.deferred else "enabled"
    error = info.error or ""
    if error.startswith((DISABLED_BY_CONFIG, DISABLED_FOR_RUN)):
        return "disabled"
    if error.startswith(NOT_ENABLED):
        return "not enabled"
    if "(missing: " in error:
        return "disabled (missing environment variables)"
    return "failed"


#: The plugins the CLI has said a home Hermes used leaves off (so that it says so once), under the home.
TOLD_FILE = Path("cache") / "left-off-told.json"


def left_off(kernel: Kernel) -> tuple[str | None, list[str]]:
    """What shows that Hermes Agent used the kernel's home, when config.yaml has no ``plugins.enabled``
    (``None`` otherwise), and the plugins that leaves off for that reason."""
    from ..base.config import hermes_marker, section

    if section(kernel.config, "plugins", "enabled") is not None:
        return None, []
    marker = hermes_marker(kernel.home, kernel.config)
    if marker is None:
        return None, []
    return marker, [p.name for p in kernel.plugins if (p.error or "").startswith(NOT_ENABLED)]


def told_left_off(kernel: Kernel, names: Iterable[str]) -> None:
    """Remember that the user was told ``names`` are left off (see :func:`left_off_notice`)."""
    from ..base import state

    path = kernel.home / TOLD_FILE
    known = _told(path)
    if not set(names) <= known:
        state.write_atomic(path, json.dumps(sorted(known | set(names))))


def left_off_notice(kernel: Kernel) -> str | None:
    """Once per plugin: which plugins a home Hermes Agent has used leaves off, why, and how to turn
    one on; ``None`` when there is nothing new to say.  What was said is remembered in the home's
    cache folder (:data:`TOLD_FILE`)."""
    marker, names = left_off(kernel)
    new = [name for name in names if name not in _told(kernel.home / TOLD_FILE)]
    if marker is None or not new:
        return None
    told_left_off(kernel, new)
    return (
        f"note: Hermes Agent has used {kernel.home} ({marker}) and its config.yaml has no plugins.enabled, "
        f"so, as in Hermes, only bundled plugins run; left off: {', '.join(new)}. To turn one on: "
        + "; ".join(f"hermes-kernel plugins enable {name}" for name in new)
        + " (said once)"
    )


def _told(path: Path) -> set[str]:
    try:
        if path.stat().st_size > 1024 * 1024:
            return set()
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return {name for name in data if isinstance(name, str)} if isinstance(data, list) else set()


def dump_json(data: Any) -> None:
    """Print ``data`` as indented JSON on the command's stdout (see :func:`output.emit_json`)."""
    output.emit_json(data)


# --------------------------------------------------------------------------- plugins info
