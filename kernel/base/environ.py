"""Each kernel's view of the environment: the process's variables plus its own home's ``.env``.

``os.environ`` is one per process, and Hermes plugins read it directly, so a
kernel exports the variables of ``<home>/.env`` that the process does not set.
With two kernels in one process that would hand one home's secrets to the
other, so the kernel keeps two rules:

* **What a kernel does itself** (model providers, ``requires_env``,
  ``ctx.llm``, shell hooks and speech commands it starts, the gateway) reads
  :class:`KernelEnviron`: a variable the process set itself (before any
  kernel, or changed since) wins; otherwise the kernel's own ``.env`` value; a
  value another kernel exported is never seen.
* **What a kernel exports** goes into ``os.environ`` only when no other live
  kernel exported that name: the first exporter keeps it (the others are told
  in the log), and when it shuts down the name passes to the next live kernel
  whose ``.env`` sets it, or is removed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any

_lock = threading.Lock()
# name -> (token of the kernel that exported it, the value it exported)
_owners: dict[str, tuple[object, str]] = {}
# token -> that kernel's .env values, for every live kernel that exported (or wanted to)
_wanted: dict[object, dict[str, str]] = {}


def export(token: object, values: Mapping[str, str]) -> list[str]:
    """Export ``values`` (a kernel's ``.env``) into ``os.environ`` for ``token``.

    Returns the names another live kernel already exported with a different
    value (those stay as they are).
    """
    taken: list[str] = []
    with _lock:
        _wanted[token] = dict(values)
        for name, value in values.items():
            current = os.environ.get(name)
            if current is None:
                os.environ[name] = value
                _owners[name] = (token, value)
                continue
            owner = _owners.get(name)
            if owner is not None and owner[1] == current and owner[0] is not token and current != value:
                taken.append(name)
    return taken


def release(token: object) -> None:
    """Withdraw ``token``'s exports: each passes to another live kernel that wants it, or is removed."""
    with _lock:
        _wanted.pop(token, None)
        for name, (owner, value) in list(_owners.items()):
            if owner is not token:
                continue
            del _owners[name]
            if os.environ.get(name) != value:
                continue  # changed by someone else since: theirs now
            heir = next(((t, w[name]) for t, w in _wanted.items() if name in w), None)
            if heir is None:
                del os.environ[name]
            else:
                os.environ[name] = heir[1]
                _owners[name] = heir


def process_value(name: str) -> str | None:
    """``os.environ[name]`` when the process set it itself; ``None`` when unset or a kernel exported it
    (what a lookup that cannot tell which kernel asks may read)."""
    value = os.environ.get(name)
    owner = _owners.get(name)
    if value is not None and owner is not None and owner[1] == value:
        return None
    return value


class KernelEnviron(Mapping[str, str]):
    """A kernel's environment (``k.environ``): the process's own variables, then its ``.env``.

    Read-only; reads ``os.environ`` live, so a variable set later is seen.
    """

    def __init__(self, token: object, dotenv: Mapping[str, str] | None = None) -> None:
        self._token = token
        self.dotenv: dict[str, str] = dict(dotenv or {})

    def _foreign(self, name: str, value: str) -> bool:
        owner = _owners.get(name)
        return owner is not None and owner[0] is not self._token and owner[1] == value

    def get(self, name: str, default: Any = None) -> Any:
        value = os.environ.get(name)
        if value is not None and not self._foreign(name, value):
            return value
        return self.dotenv.get(name, default)

    def __getitem__(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[str]:
        seen = set()
        for name in list(os.environ):
            if name in self:
                seen.add(name)
                yield name
        for name in self.dotenv:
            if name not in seen:
                yield name

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def child(self) -> dict[str, str]:
        """The environment for a process the kernel starts: this view as a plain dict."""
        return {name: self[name] for name in self}

    def __repr__(self) -> str:
        return f"<KernelEnviron of {len(self)} variables>"
