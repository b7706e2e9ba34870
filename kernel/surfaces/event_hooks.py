"""Event hooks from folders: ``<home>/hooks/<name>/HOOK.yaml`` + ``handler.py``.

``HOOK.yaml`` names the events (``name``, ``description``, ``events: [...]``);
``handler.py`` defines ``handle(event_type, context)``, sync or async.  Each
folder becomes the surface record ``hooks:<name>`` whose receivers are
connected to the kernel's event bus (:mod:`kernel.events`) in folder order,
so that handlers of one event run alphabetically; ``prefix:*`` receivers run
after the exact-name ones.  A broken folder is listed with its error and
skipped; a handler that raises is logged (and noted on its record) and never
stops the event.
"""

from __future__ import annotations

import difflib
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..base.safe_yaml import MAX_HOOK_BYTES, read_yaml, yaml_problem
from ..core.api import record_of
from ..core.hooks import plugin_order
from ..core.services import serviceimpl
from . import SurfaceError, load_surface

if TYPE_CHECKING:
    from ..core.context import PluginContext
    from ..core.kernel import Kernel

MANIFEST = "HOOK.yaml"
HANDLER = "handler.py"

# The events the kernel and its gateway emit.  ``command:<name>``
# and ``<prefix>:*`` are open-ended; other names are kept with a warning.
KNOWN_EVENTS = (
    "gateway:startup",
    "session:start",
    "session:end",
    "session:reset",
    "session:compress",
    "agent:start",
    "agent:step",
    "agent:end",
)
_EVENT = re.compile(r"^[a-z][a-z0-9_]*:(\*|[A-Za-z0-9_.-]+)$")


def load(kernel: Kernel) -> None:
    """Add one surface record a folder of ``<home>/hooks``, in alphabetical order."""
    root = kernel.home / "hooks"
    try:
        folders = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))]
    except FileNotFoundError:
        return
    except OSError as exc:
        kernel.host.config_problem(f"event hooks: cannot read {root}: {exc}")
        return
    for folder in sorted(folders, key=lambda p: plugin_order(p.name)):
        _add_folder(kernel, folder)


def _add_folder(kernel: Kernel, folder: Path) -> None:
    name = folder.name
    description = ""
    manifest_path = folder / MANIFEST
    if manifest_path.is_file():
        try:
            data = read_yaml(manifest_path, MAX_HOOK_BYTES, MANIFEST)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            data = None  # reported by setup, on the record
        if isinstance(data, dict):
            if isinstance(data.get("name"), str) and data["name"].strip():
                name = data["name"].strip()
            if isinstance(data.get("description"), str):
                description = data["description"].strip()
    hook = _FolderHook(kernel, folder)
    try:
        kernel.host.add_surface(
            f"hooks:{name}", "event-hook", hook.setup, source="hooks", path=folder, description=description
        )
    except Exception as exc:  # a name already taken
        kernel.host.config_problem(f"event hooks: {folder} skipped: {exc}")


class _FolderHook:
    """Reads, imports and connects one hook folder (the ``setup`` of its record)."""

    def __init__(self, kernel: Kernel, folder: Path) -> None:
        self.kernel = kernel
        self.folder = folder

    def setup(self, ctx: PluginContext) -> None:
        events = self._events(ctx)
        handle = self._handler(ctx)
        for event in events:
            self.kernel.events.connect(event, handle, owner=ctx.plugin_id)
        record = record_of(ctx)
        on = f"on {', '.join(events)}"
        record.description = f"{record.description} ({on})" if record.description else on

    def _fail(self, problem: str, fix: str) -> SurfaceError:
        return SurfaceError(f"hook folder {self.folder}: {problem}; skipped ({fix})")

    def _events(self, ctx: PluginContext) -> list[str]:
        path = self.folder / MANIFEST
        if not path.is_file():
            raise self._fail(f"{MANIFEST} is missing", f"add {MANIFEST} with an 'events' list")
        try:
            data = read_yaml(path, MAX_HOOK_BYTES, MANIFEST)
        except (OSError, UnicodeDecodeError) as exc:
            raise self._fail(f"cannot read {MANIFEST}: {exc}", "check the file") from None
        except yaml.YAMLError as exc:
            raise self._fail(f"{MANIFEST} is not valid YAML: {yaml_problem(exc)}", "fix the YAML") from None
        if not isinstance(data, dict):
            raise self._fail(f"{MANIFEST} must be a mapping", "write name, description and events keys")
        events = data.get("events")
        if isinstance(events, str):
            events = [events]
        if not isinstance(events, list) or not events:
            raise self._fail(f"{MANIFEST} has no events", "list at least one, e.g. 'events: [agent:end]'")
        bad = [e for e in events if not isinstance(e, str) or not _EVENT.match(e.strip())]
        if bad:
            raise self._fail(
                f"{MANIFEST}: not event names: {', '.join(map(repr, bad))}",
                "events look like 'agent:end', 'command:help' or 'command:*'",
            )
        events = list(dict.fromkeys(e.strip() for e in events))
        for event in events:
            if event.startswith("command:") or event.endswith(":*") or event in KNOWN_EVENTS:
                continue
            close = difflib.get_close_matches(event, KNOWN_EVENTS, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            warning = f"{MANIFEST}: event '{event}' is not emitted by the kernel{hint} (kept)"
            self.kernel.log.warning(
                "unknown_event", folder=str(self.folder), event_name=event, hint=hint or None
            )
            record_of(ctx).warnings.append(warning)
        return events

    def _handler(self, ctx: PluginContext) -> Callable[[str, dict[str, Any]], Any]:
        path = self.folder / HANDLER
        if not path.is_file():
            raise self._fail(f"{HANDLER} is missing", "add handler.py defining handle(event_type, context)")
        record = record_of(ctx)
        namespace = self.kernel.host.namespace_module()
        module_name = f"{namespace.__name__}.hook_{record.slug}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise self._fail(f"cannot import {HANDLER}", "check the file")
        module = importlib.util.module_from_spec(spec)
        record.module_name = module_name
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:
            sys.modules.pop(module_name, None)
            if not isinstance(exc, Exception | SystemExit):
                raise
            detail = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, SyntaxError):
                detail = f"SyntaxError: {exc.msg} (line {exc.lineno})"
            raise self._fail(f"{HANDLER} failed to import: {detail}", "fix handler.py") from None
        handle = getattr(module, "handle", None)
        if not callable(handle):
            raise self._fail(
                f"{HANDLER} defines no handle(event_type, context) function", "add one (sync or async)"
            )
        return handle


# -- the event_hooks service (see kernel.core.services) ----------------------------------


@serviceimpl
def service_load_finished(kernel: Kernel) -> None:
    load_surface(kernel, "event_hooks", load)
