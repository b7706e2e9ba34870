"""The import hook that serves Hermes Agent's module names to Hermes-style plugins.

Plugins written for Hermes Agent import their host's modules by name
(``from agent.memory_provider import MemoryProvider``, ``from tools.registry
import registry``).  While a kernel has the compatibility layer on
(:func:`kernel.compat.install`), :func:`enable` appends one finder to the
**end** of :data:`sys.meta_path`; it answers only for the fixed table of names
in :data:`SHIMS`, and only when nothing else does:

* because it comes last, a real module of the same name (an installed
  distribution, a package on ``sys.path``) is always found first;
* a submodule (``agent.memory_provider``) is served only when its parent
  package in :data:`sys.modules` is itself one of ours: a shim is never
  grafted into a real package that lacks the submodule;
* a served module is complete or absent: its content is copied from the
  implementation module in :mod:`kernel.compat.shims` (every name of its
  ``__all__``), and if any name is missing the import fails as a whole;
* packages are real module objects with an empty ``__path__``, so only the
  submodules listed in the table can be imported from them.

:func:`disable` removes the finder and every module it put in
:data:`sys.modules`, so ``import agent`` fails again once the last kernel
that wanted the shims has shut down.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import threading
import types
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

# Served name -> (implementation module under kernel.compat.shims or None for an empty package, is_package).
SHIMS: dict[str, tuple[str | None, bool]] = {
    "agent": (None, True),
    "agent.memory_provider": ("agent_memory_provider", False),
    "agent.context_engine": ("agent_context_engine", False),
    "agent.context_compressor": ("agent_context_compressor", False),
    "agent.image_gen_provider": ("agent_image_gen_provider", False),
    "agent.image_gen_registry": ("agent_image_gen_registry", False),
    "agent.video_gen_provider": ("agent_video_gen_provider", False),
    "agent.web_search_provider": ("agent_web_search_provider", False),
    "agent.browser_provider": ("agent_browser_provider", False),
    "agent.secret_sources": ("agent_secret_sources", True),
    "agent.secret_sources.base": ("agent_secret_sources", False),
    "agent.tts_provider": ("agent_tts_provider", False),
    "agent.tts_registry": ("agent_tts_registry", False),
    "agent.transcription_provider": ("agent_transcription_provider", False),
    "agent.transcription_registry": ("agent_transcription_registry", False),
    "agent.plugin_llm": ("agent_plugin_llm", False),
    "providers": ("providers", True),
    "providers.base": ("providers_base", False),
    "hermes_constants": ("hermes_constants", False),
    "hermes_cli": (None, True),
    "hermes_cli.config": ("hermes_cli_config", False),
    "hermes_cli.plugins": ("hermes_cli_plugins", False),
    "hermes_cli.dashboard_auth": ("hermes_cli_dashboard_auth", False),
    "tools": (None, True),
    "tools.registry": ("tools_registry", False),
    "gateway": (None, True),
    "gateway.platforms": (None, True),
    "gateway.platforms.base": ("gateway_platforms_base", False),
    "gateway.config": ("gateway_config", False),
}

_IMPL_PACKAGE = "kernel.compat.shims"


class ShimFinder:
    """Finder and loader of the Hermes shim modules (one instance, :data:`FINDER`).

    It has the methods the import system calls (``find_spec``, ``create_module``, ``exec_module``)
    without the ``importlib.abc`` base classes, whose import (``importlib.resources``) would cost more
    than the rest of the compatibility layer.
    """

    def invalidate_caches(self) -> None:
        """Nothing to invalidate (``importlib.invalidate_caches()`` calls it)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._served: dict[str, types.ModuleType] = {}

    # -- finder ------------------------------------------------------------------

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        entry = SHIMS.get(fullname)
        if entry is None or self not in sys.meta_path:
            return None
        parent = fullname.rpartition(".")[0]
        if parent and not self.serves(sys.modules.get(parent)):
            # The parent is a real package (or not imported through us): never graft into it.
            return None
        _impl, is_package = entry
        return importlib.machinery.ModuleSpec(fullname, cast("Loader", self), is_package=is_package)

    def serves(self, module: object) -> bool:
        """Whether ``module`` is one this finder made."""
        spec = getattr(module, "__spec__", None)
        return spec is not None and getattr(spec, "loader", None) is self

    # -- loader ------------------------------------------------------------------

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None  # the default module object

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        impl_name, is_package = SHIMS[name]
        if is_package:
            module.__path__ = []
        if impl_name is None:
            module.__doc__ = f"``{name}`` as served by hermes-kernel for plugins written for Hermes Agent."
            module.__dict__["__all__"] = []
        else:
            try:
                impl = importlib.import_module(f"{_IMPL_PACKAGE}.{impl_name}")
            except Exception as exc:
                raise ImportError(
                    f"hermes-kernel could not build its '{name}' compatibility module: "
                    f"{type(exc).__name__}: {exc}",
                    name=name,
                ) from exc
            names = list(getattr(impl, "__all__", ()))
            missing = [n for n in names if not hasattr(impl, n)]
            if not names or missing:
                raise ImportError(
                    f"hermes-kernel's '{name}' compatibility module is incomplete "
                    f"(missing: {', '.join(missing) or 'everything'}); not serving it",
                    name=name,
                )
            module.__dict__.update({n: getattr(impl, n) for n in names})
            module.__dict__["__all__"] = names
            module.__doc__ = impl.__doc__
        with self._lock:
            self._served[name] = module

    # -- lifecycle ---------------------------------------------------------------

    def forget_all(self) -> list[str]:
        """Drop every module this finder put in :data:`sys.modules`; return their names."""
        with self._lock:
            served, self._served = self._served, {}
        removed = []
        # Children first, so that no parent disappears under an import of its child.
        for name in sorted(served, key=lambda n: n.count("."), reverse=True):
            if sys.modules.get(name) is served[name]:
                del sys.modules[name]
                removed.append(name)
            parent, _, child = name.rpartition(".")
            parent_module = served.get(parent)
            if parent_module is not None and getattr(parent_module, child, None) is served[name]:
                delattr(parent_module, child)
        return removed

    def served(self) -> list[str]:
        """The names served so far (and still in :data:`sys.modules`)."""
        with self._lock:
            return sorted(n for n, m in self._served.items() if sys.modules.get(n) is m)


FINDER = ShimFinder()
_lock = threading.Lock()


def enable() -> None:
    """Put the finder at the end of :data:`sys.meta_path` (once; calling again changes nothing)."""
    with _lock:
        if FINDER not in sys.meta_path:
            sys.meta_path.append(FINDER)


def disable() -> None:
    """Remove the finder and the modules it served; later imports of those names fail normally."""
    with _lock:
        while FINDER in sys.meta_path:
            sys.meta_path.remove(FINDER)
        FINDER.forget_all()


def enabled() -> bool:
    """Whether the finder is on :data:`sys.meta_path`."""
    return FINDER in sys.meta_path
