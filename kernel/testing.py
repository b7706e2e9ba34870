"""A testing kit for plugin authors: real kernels in temporary homes, without boilerplate.

Everything here is real: plugins are written to disk and loaded by the real
discovery, the model is the bundled ``scripted`` provider replaying turns you
give, and the recorder is an ordinary plugin that sees every hook call.  The
same helpers are pytest fixtures (``hermes_kernel``, ``hermes_plugin``, ...)
through the ``pytest11`` entry point; see ``docs/testing-plugins.md``.
"""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import Kernel
from .agent import AgentSession


def write_plugin(
    home: Path,
    name: str,
    code: str,
    manifest: Mapping[str, Any] | None = None,
    files: Mapping[str, str] | None = None,
) -> Path:
    """Write ``<home>/plugins/<name>/`` with ``plugin.yaml`` and ``__init__.py`` (dedented ``code``).

    ``manifest`` defaults to ``{"name": <last part of name>, "version": "0.0.0"}``;
    ``files`` adds more files (relative path to text) beside it.
    """
    folder = Path(home) / "plugins" / name
    folder.mkdir(parents=True, exist_ok=True)
    data = dict(manifest) if manifest is not None else {"name": Path(name).name, "version": "0.0.0"}
    (folder / "plugin.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    (folder / "__init__.py").write_text(textwrap.dedent(code), encoding="utf-8")
    for rel, text in (files or {}).items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text), encoding="utf-8")
    return folder


def write_script(home: Path, turns: Iterable[Any], name: str = "script.yaml") -> Path:
    """Write a scripted-model script: each turn a reply string or ``{text, tool_calls}``."""
    path = Path(home) / name
    path.write_text(yaml.safe_dump(list(turns), sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def scripted_config(script: Path | str) -> dict[str, Any]:
    """The config that selects the bundled ``scripted`` model with ``script``."""
    return {"model": {"provider": "scripted", "script": str(script)}}


@dataclass
class HookCall:
    """One recorded hook call."""

    hook: str
    kwargs: dict[str, Any]


@dataclass
class HookRecorder:
    """Records every hook call of a kernel, in order (it is called after every plugin)."""

    calls: list[HookCall] = field(default_factory=list)

    NAME = "~hook-recorder"  # sorts after every plugin name: it observes last

    def attach(self, kernel: Kernel) -> HookRecorder:
        recorder = self

        class _Plugin:
            __name__ = recorder.NAME

            @staticmethod
            def register(ctx: Any) -> None:
                for hook in kernel.hook_names:
                    if hook.startswith("register_"):
                        continue
                    ctx.register_hook(hook, recorder._callback(hook))

        kernel.register(_Plugin(), name=self.NAME)
        return self

    def _callback(self, hook: str) -> Any:
        def record(**kwargs: Any) -> None:
            self.calls.append(HookCall(hook, _snapshot(kwargs)))

        return record

    def names(self) -> list[str]:
        """The hooks called, in order (repeats included)."""
        return [c.hook for c in self.calls]

    def of(self, hook: str) -> list[dict[str, Any]]:
        """The keyword arguments of every call of ``hook``."""
        return [c.kwargs for c in self.calls if c.hook == hook]

    def clear(self) -> None:
        self.calls.clear()


class TestKernel:
    """A loaded kernel in ``home`` with a recorder and a chat session at hand; a context manager."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        home: Path,
        config: Mapping[str, Any] | None = None,
        *,
        script: Iterable[Any] | None = None,
        approver: Any = None,
        record: bool = True,
    ) -> None:
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        merged = copy.deepcopy(dict(config or {}))
        if script is not None:
            path = write_script(self.home, script, name=_free_name(self.home, "script", ".yaml"))
            merged.setdefault("model", {}).update(scripted_config(path)["model"])
        self.kernel = Kernel(home=self.home, config=merged, approver=approver)
        self.kernel.load()
        self.recorder = HookRecorder().attach(self.kernel) if record else None

    def session(self, **kwargs: Any) -> AgentSession:
        """A new agent session on this kernel."""
        return AgentSession(self.kernel, **kwargs)

    def chat(self, *messages: str) -> list[str]:
        """Run each message as a turn of one new session; return the replies."""
        with self.session() as session:
            return [session.run(m).reply for m in messages]

    def close(self) -> None:
        self.kernel.shutdown()

    def __enter__(self) -> TestKernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _free_name(folder: Path, stem: str, suffix: str) -> str:
    """``stem+suffix``, or ``stem-2+suffix``, ... : the first name not taken in ``folder``."""
    name, n = f"{stem}{suffix}", 1
    while (folder / name).exists():
        n += 1
        name = f"{stem}-{n}{suffix}"
    return name


def _snapshot(kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        return copy.deepcopy(kwargs)
    except Exception:  # an argument that cannot be copied is recorded as is
        return dict(kwargs)
