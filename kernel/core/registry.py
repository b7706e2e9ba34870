"""The plugin registry: the kernel's record of each plugin, and registering, dropping and blocking them.

:class:`PluginRegistry` sits below ``k.pm`` (:mod:`kernel.core.plugin_manager`)
and the loader: both change the records only through its methods.  What a
plugin registered elsewhere (tools, hooks, its object in ``k.pm``) is removed
by the ``unload`` function it is given; it knows neither the kernel nor ``k.pm``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .records import BLOCKED, _Record
from .watchdog import SharedRLock

__all__ = ["PluginError", "PluginRegistry", "source_dir"]


class PluginError(ValueError):
    """A plugin that an explicit :meth:`Kernel.register` (or ``k.pm.register``) call could not add."""


def _ignore(_: Any) -> None:
    return None


class PluginRegistry:
    """The records of a kernel's plugins and surfaces, by name, and the operations on them.

    Every change happens under :attr:`lock` (the kernel's lock).  ``unload``
    removes everything a record's plugin registered (the record stays);
    ``joined`` is told of a plugin registered on ``k.pm`` directly.
    """

    def __init__(
        self,
        lock: SharedRLock,
        *,
        unload: Callable[[_Record], None] = _ignore,
        joined: Callable[[str], None] = _ignore,
    ) -> None:
        self.lock = lock
        self.records: dict[str, _Record] = {}
        # Module-name parts in use by the plugins, and whose they are (see claim_slug).
        self.slugs: dict[str, str] = {}
        self.closed = False
        self.unload = unload
        self.joined = joined

    # -- changing --------------------------------------------------------------

    def refuse_if_closed(self, name: str) -> None:
        """``PluginError`` once the kernel has been shut down."""
        if self.closed:
            raise PluginError(f"cannot register plugin '{name}': this kernel has been shut down")

    def add(self, record: _Record) -> _Record:
        """Keep ``record`` under its name (replacing nothing: the caller checked the name is free)."""
        self.records[record.name] = record
        return record

    def reserve(self, name: str, source: str, path: Path | None = None) -> _Record:
        """A new record for an object registered on ``k.pm``; ``PluginError`` when ``name`` is taken."""
        with self.lock:
            self.refuse_if_closed(name)
            existing = self.records.get(name)
            if existing is not None:
                raise PluginError(
                    f"Plugin name already registered: {name} (a plugin from {existing.source}); "
                    "choose another"
                )
            return self.add(_Record(name=name, source=source, path=path))

    def discard(self, name: str) -> None:
        """Forget the record ``name`` without unloading anything (a registration that failed)."""
        self.records.pop(name, None)

    def drop(self, name: str) -> _Record | None:
        """Unload plugin ``name`` and forget its record; the record, or ``None`` when there was none."""
        with self.lock:
            record = self.records.pop(name, None)
            if record is None:
                return None
            self.unload(record)
            if record.claimed_slug is not None and self.slugs.get(record.claimed_slug) == name:
                del self.slugs[record.claimed_slug]
            return record

    def block(self, name: str) -> None:
        """Unload plugin ``name`` if loaded; its record then says blocked (``k.pm.set_blocked``)."""
        with self.lock:
            record = self.records.get(name)
            if record is None:
                return
            self.unload(record)
            record.enabled = False
            record.deferred = False
            record.error = BLOCKED

    def forget_blocked(self, name: str) -> None:
        """The record that said "blocked" goes, so that the name is free again (``k.pm.unblock``)."""
        with self.lock:
            record = self.records.get(name)
            if record is not None and record.error == BLOCKED:
                del self.records[name]

    def claim_slug(self, record: _Record) -> None:
        """Give ``record`` a module name of its own: names that slug alike (``dash-x``, ``dash_x``,
        ``dash.x``) get ``_2``, ``_3``... in load order, so no plugin runs another's module."""
        if record.claimed_slug is not None:
            return
        base = record.slug
        slug, n = base, 1
        while self.slugs.get(slug, record.name) != record.name:
            n += 1
            slug = f"{base}_{n}"
        self.slugs[slug] = record.name
        record.claimed_slug = slug

    # -- notes on the records ----------------------------------------------------

    def note_unknown_hooks(self, record: _Record, has_spec: Callable[[str], bool]) -> None:
        """Warn on ``record`` of each ``@hookimpl`` of a hook nobody specified (it is kept)."""
        for cb in record.callbacks:
            if cb.native and not cb.impl.optionalhook and not has_spec(cb.hook):
                warning = f"hook '{cb.hook}' is not defined by the kernel (kept)"
                if warning not in record.warnings:
                    record.warnings.append(warning)

    def hooks_specified(self, names: list[str]) -> None:
        """Hooks that just got a spec: earlier "not defined" warnings about them no longer hold."""
        stale = tuple(f"hook '{name}' is not defined" for name in names)
        for record in self.records.values():
            record.warnings[:] = [w for w in record.warnings if not w.startswith(stale)]

    def note_failure(self, plugin: str, problem: str) -> None:
        """Record a run-time failure of ``plugin`` (e.g. an event receiver) once, for the listings."""
        record = self.records.get(plugin)
        if record is not None and problem not in record.warnings and len(record.warnings) < 50:
            record.warnings.append(problem)


def source_dir(target: Any) -> Path | None:
    """The folder of the file that defines ``target`` (a module, function or class), if it has one."""
    if not (inspect.ismodule(target) or inspect.isfunction(target) or inspect.isclass(target)):
        return None
    try:
        return Path(inspect.getfile(target)).parent
    except (TypeError, OSError):
        return None


def file_dir(obj: Any) -> Path | None:
    """The folder of ``obj.__file__``, when it has one."""
    file = getattr(obj, "__file__", None)
    return Path(file).parent if isinstance(file, str) else None
