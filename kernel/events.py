"""The kernel's event bus (``k.events``): news such as ``session:start`` or ``agent:end``.

Hooks are for decisions; events are for news.  The bus is built on blinker
signals, one per event name in a namespace owned by the kernel, wrapped so
that receivers are held strongly (a lambda stays connected), called in a
defined order (connection order), isolated (a failing
receiver is logged and the rest run) and, when they are coroutine functions,
awaited.  A receiver connected to ``prefix:*`` hears every ``prefix:...``
event, after the receivers of the exact name.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Iterator, MutableSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import blinker

from .core.api import Contained, contained
from .core.services import serviceimpl

if TYPE_CHECKING:
    from .core.kernel import Kernel
    from .core.records import _Record

Receiver = Callable[[str, dict[str, Any]], Any]


class _OrderedSet(MutableSet[Any]):
    """An insertion-ordered set, so that blinker calls receivers in connection order."""

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self._items: dict[Any, None] = dict.fromkeys(items)

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def add(self, value: Any) -> None:
        self._items[value] = None

    def discard(self, value: Any) -> None:
        self._items.pop(value, None)

    def copy(self) -> _OrderedSet:
        return _OrderedSet(self._items)


class _Signal(blinker.Signal):
    """A blinker signal that keeps its receivers in connection order (blinker's documented knob)."""

    set_class = _OrderedSet  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class _Attributed:
    """A receiver with the name of whoever connected it, for failure messages."""

    receiver: Receiver
    owner: str

    def __call__(self, name: str, context: dict[str, Any]) -> Any:
        return self.receiver(name, context)


class EventBus:
    """Named events with ordered, isolated, strongly held receivers (one blinker signal a name)."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._signals: dict[str, _Signal] = {}
        self._lock = threading.Lock()

    def connect(self, name: str, receiver: Receiver, *, owner: str = "host") -> None:
        """Call ``receiver(event_name, context)`` on ``name`` (``prefix:*``: on every ``prefix:...``).

        Receivers of one name are called in the order they were connected.
        """
        if not callable(receiver):
            raise TypeError(f"event receiver for '{name}' must be callable")
        with self._lock:
            signal = self._signals.setdefault(name, _Signal(name))
            signal.connect(_Attributed(receiver, owner), weak=False)

    def disconnect_owner(self, owner: str) -> None:
        """Remove every receiver ``owner`` connected."""
        with self._lock:
            for signal in self._signals.values():
                for receiver in list(signal.receivers_for(blinker.ANY)):
                    if isinstance(receiver, _Attributed) and receiver.owner == owner:
                        signal.disconnect(receiver)

    def listening(self, name: str) -> bool:
        """Whether an event ``name`` may have receivers (a cheap check before building its context)."""
        signals = self._signals
        if not signals:
            return False
        return name in signals or (":" in name and name.split(":", 1)[0] + ":*" in signals)

    def receivers(self, name: str) -> list[_Attributed]:
        """The receivers of ``name`` in call order: exact-name ones, then ``prefix:*`` ones."""
        names = [name]
        if ":" in name and not name.endswith(":*"):
            names.append(name.split(":", 1)[0] + ":*")
        with self._lock:
            return [
                r
                for n in names
                if n in self._signals
                for r in self._signals[n].receivers_for(blinker.ANY)
                if isinstance(r, _Attributed)
            ]

    def emit(self, name: str, context: dict[str, Any] | None = None) -> None:
        """Deliver an event; every receiver runs, whatever the others do."""
        self.emit_collect(name, context)

    def emit_collect(self, name: str, context: dict[str, Any] | None = None) -> list[Any]:
        """Deliver an event and return the receivers' non-None answers, in call order."""
        out = []
        for receiver in self.receivers(name):
            with self._delivery(name, receiver.owner) as call:
                result = receiver(name, dict(context or {}))
                if inspect.isawaitable(result):
                    result = self._kernel.host.run_sync(result)
            if call.failed:
                self._failed(name, receiver.owner, call.error)
            elif result is not None:
                out.append(result)
        return out

    async def aemit(self, name: str, context: dict[str, Any] | None = None) -> list[Any]:
        """As :meth:`emit_collect`, awaiting async receivers on the caller's loop."""
        out = []
        for receiver in self.receivers(name):
            with self._delivery(name, receiver.owner) as call:
                result = receiver(name, dict(context or {}))
                if inspect.isawaitable(result):
                    result = await result
            if call.failed:
                self._failed(name, receiver.owner, call.error)
            elif result is not None:
                out.append(result)
        return out

    def _delivery(self, name: str, owner: str) -> Contained:
        """One receiver called: its failure contained and logged."""
        return contained(self._kernel.log, "event_receiver_failed", event_name=name, owner=owner)

    def _failed(self, name: str, owner: str, error: str) -> None:
        self._kernel.host.note_failure(owner, f"failed on event '{name}': {error}")


# -- the events service (see kernel.core.services) ---------------------------------


@serviceimpl
def service_attach(kernel: Kernel) -> None:
    kernel.host.provide(events=EventBus(kernel))


@serviceimpl
def service_plugin_unloaded(kernel: Kernel, record: _Record) -> None:
    kernel.events.disconnect_owner(record.name)
