"""The ``Kernel``: one instance owns plugins, hooks, tools and slots."""

from __future__ import annotations

import contextlib
import copy
import gc
import importlib
import importlib.util
import inspect
import os
import re
import sys
import threading
import types
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from . import compat, environ, hookspecs, state, surfaces, watchdog
from .commands import CliCommand, CommandRegistry
from .compat import host as compat_host
from .config import load_config, read_dotenv, resolve_home, section, truthy
from .context import PluginContext
from .decisions import (
    ApprovalRequest,
    Approver,
    MalformedDecision,
    Verdict,
    merge_decisions,
    parse_decision,
    terminal_approver,
)
from .discovery import (
    ENTRY_POINT_GROUPS,
    Candidate,
    bundled_root,
    merge_sources,
    scan_entry_points,
    scan_root,
)
from .environ import KernelEnviron
from .events import EventBus
from .gateway.registry import PlatformRegistry
from .hooks import (
    Callback,
    HookEngine,
    Request,
    context_text,
    describe,
    plain_text,
    plugin_order,
    propagates,
    safe_text,
)
from .log import KernelLogging
from .manifest import Manifest
from .markers import PROJECT_NAME, __version__
from .middleware import MiddlewareRegistry
from .plugin_manager import KernelPluginManager, PluginError, PluginHandle
from .providers import registry as provider_registry
from .providers.manager import SLOTS as PROVIDER_SLOTS
from .providers.manager import ProviderManager
from .providers.registry import SOURCE_RANK, collecting
from .skills import VIEW_SCHEMA, SkillRegistry
from .slots import SLOTS, SlotError, SlotRegistry, conform
from .tools import ToolRegistrationError, ToolRegistry, current_call

if TYPE_CHECKING:
    from .gateway.runner import Gateway
    from .surfaces.speech import Speech


# The owner of the kernel's own tools (``skill_view``) in the tool registry.
BUILTIN_PLUGIN = "builtin"
T = TypeVar("T")
#: Seconds a plugin's import plus its register() may take (plugins.register_timeout; 0 = no bound).
DEFAULT_REGISTER_TIMEOUT = 30.0

# The error of a plugin whose name is blocked on k.pm.
BLOCKED = "blocked (k.pm.set_blocked): nothing of it is loaded"


@dataclass(frozen=True)
class PluginInfo:
    """What the kernel knows of one plugin (plain data, safe to serialise)."""

    name: str
    version: str
    kind: str
    source: str
    path: str | None
    enabled: bool
    error: str | None
    tools: list[str]
    hooks: list[str]
    commands: list[str]
    disabled_hooks: list[str]
    description: str = ""
    warnings: list[str] = field(default_factory=list)
    hook_errors: dict[str, str] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)
    cli_commands: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    deferred: bool = False
    middleware: list[str] = field(default_factory=list)
    platforms: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(eq=False)
class _Record:
    """The kernel's mutable state for one plugin."""

    name: str
    source: str
    path: Path | None = None
    manifest: Manifest | None = None
    version: str = ""
    kind: str = "standalone"
    description: str = ""
    enabled: bool = False
    error: str | None = None
    tools: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    cli_commands: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    middleware: list[str] = field(default_factory=list)
    platforms: list[str] = field(default_factory=list)
    callbacks: list[Callback] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)
    module_name: str | None = None
    # The object registered for this plugin in ``k.pm`` while it is active.
    obj: Any = None
    deferred: bool = False
    entry_point: Any = None

    @property
    def is_model_provider(self) -> bool:
        """A model provider plugin: imported on the first provider lookup, may self-register."""
        return self.kind == "model-provider" or self.name.startswith("model-providers/")

    # The module-name part the kernel gave it (unique in its kernel); see :meth:`Kernel._claim_slug`.
    claimed_slug: str | None = None

    @property
    def slug(self) -> str:
        if self.claimed_slug is not None:
            return self.claimed_slug
        slug = re.sub(r"\W", "_", self.name.replace("/", "__").replace("-", "_"))
        return f"_{slug}" if slug[:1].isdigit() else slug

    @classmethod
    def from_candidate(cls, cand: Candidate) -> _Record:
        manifest = cand.manifest
        return cls(
            name=cand.key,
            source=cand.source,
            path=cand.path,
            manifest=manifest,
            version=cand.version,
            kind=manifest.kind if manifest else (cand.kind or "standalone"),
            description=cand.description,
            error=cand.error,
            overrides=list(cand.overrides),
            warnings=list(manifest.warnings) if manifest else [],
            entry_point=cand.entry_point,
        )

    def info(self) -> PluginInfo:
        hooks = list(dict.fromkeys(cb.hook for cb in self.callbacks))
        hook_errors: dict[str, str] = {}
        for cb in self.callbacks:
            if cb.error is not None:
                hook_errors.setdefault(cb.hook, cb.error)
        return PluginInfo(
            name=self.name,
            version=self.version,
            kind=self.kind,
            source=self.source,
            path=str(self.path) if self.path is not None else None,
            enabled=self.enabled,
            error=self.error,
            tools=list(self.tools),
            hooks=hooks,
            commands=list(self.commands),
            disabled_hooks=list(hook_errors),
            description=self.description,
            warnings=list(self.warnings),
            hook_errors=hook_errors,
            overrides=list(self.overrides),
            cli_commands=list(self.cli_commands),
            skills=list(self.skills),
            deferred=self.deferred,
            middleware=list(self.middleware),
            platforms=list(self.platforms),
        )


class Kernel:
    """A plugin kernel for one agent.

    ``Kernel(home=None, config=None)`` then :meth:`load`, use, :meth:`shutdown`.
    ``home`` defaults to ``$HERMES_HOME``, else ``~/.hermes``; ``config`` is a
    mapping deep-merged over ``<home>/config.yaml``.  ``approver`` answers
    ``pre_tool_call`` approval requests (default: ask on the terminal, deny
    without one).  Nothing is imported or fired at construction time.
    """

    _namespaces_in_use: ClassVar[set[str]] = set()
    _namespace_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        approver: Approver | None = None,
    ) -> None:
        self.home: Path = resolve_home(home)
        self.approver: Approver = approver or terminal_approver
        self._config_override = copy.deepcopy(dict(config)) if config else None
        self.config, self.problems = load_config(self.home, config)
        self.debug = truthy(os.environ.get("HERMES_PLUGINS_DEBUG"))
        self._namespace = self._claim_namespace()
        self._logging = KernelLogging(self.home, self.debug, self._namespace)
        self.log = self._logging.logger
        for problem in self.problems:
            self.log.warning("config_problem", detail=problem)

        self._records: dict[str, _Record] = {}
        # Module-name parts in use by this kernel's plugins, and whose they are.
        self._slugs: dict[str, str] = {}
        self._closed = False
        self._lock = watchdog.SharedRLock()
        self.pm = KernelPluginManager(self)
        self._hooks = HookEngine(self.pm, self._on_hook_failure, timeout=self._seconds("hook_timeout", None))
        # Each plugin's import and register() are bounded by this (see _each_bounded).
        self._register_timeout = self._seconds("register_timeout", DEFAULT_REGISTER_TIMEOUT)
        self.pm.engine = self._hooks
        self._fast = self._hooks.fast
        if type(self).invoke_hook is Kernel.invoke_hook:
            # The hot path without the method's own call level (a subclass's override is kept).
            self.invoke_hook = self._hooks.hot  # type: ignore[method-assign]
            self._hooks.hot.__doc__ = Kernel.invoke_hook.__doc__
        if type(self).pre_llm_context is Kernel.pre_llm_context:
            self.pre_llm_context = self._context_fn()  # type: ignore[method-assign]
            self.pre_llm_context.__doc__ = Kernel.pre_llm_context.__doc__
        self.pm.add_hookspecs(hookspecs)
        # Slot-hook callbacks already asked for their providers (each is asked once).
        self._slots_asked: weakref.WeakSet[Callback] = weakref.WeakSet()
        self.tools = ToolRegistry(self)
        self.slots = SlotRegistry()
        self.commands = CommandRegistry(self)
        self.cli_commands: dict[str, CliCommand] = {}
        self.skills = SkillRegistry(self.home)
        self.providers = ProviderManager(self)
        self.events = EventBus(self)
        self.middleware = MiddlewareRegistry(self)
        self.platforms = PlatformRegistry()
        self._gateway: Gateway | None = None
        self._refused: list[_Record] = []
        self._loaded = False
        self._env_token = object()
        #: This kernel's environment: the process's variables, then ``<home>/.env`` (see kernel.environ).
        self.environ = KernelEnviron(self._env_token)
        weakref.finalize(self, environ.release, self._env_token)
        self._closers: list[tuple[str, Callable[[], None]]] = []
        self._speech: Speech | None = None
        self._compat = False
        self._injected: list[tuple[str | None, dict[str, str]]] = []
        self._agent_sessions: weakref.WeakSet[Any] = weakref.WeakSet()

    # -- lifecycle -------------------------------------------------------------

    def load(self) -> list[PluginInfo]:
        """Discover and register every plugin; idempotent; never raises for a bad plugin."""
        with self._lock:
            if self._loaded or self._closed:
                return self.plugins
            self._loaded = True
            if self._hermes_compat():
                compat.install(self)
                self._compat = True
            self.environ.dotenv = read_dotenv(self.home)
            for name in environ.export(self._env_token, self.environ.dotenv):
                self.log.warning(
                    "env_not_exported",
                    variable=name,
                    reason="another kernel in this process exported it; this kernel uses its own value, "
                    "plugins reading os.environ see the other one",
                )
            disabled = self._disabled_names()
            merged, refused = self._discover()
            self._refused.extend(_Record.from_candidate(c) for c in refused)
            with self._hooks.batch(), _gc_paused():
                order = [merged[key] for key in sorted(merged, key=plugin_order)]
                self._each_bounded(order, lambda cand: self._load_candidate(cand, disabled))
                if self.providers.catalog.loaded and any(r.deferred for r in self._records.values()):
                    # A plugin looked a provider up while loading, before later provider plugins were
                    # reached: those are imported now rather than never.
                    self._load_model_providers()
            self._fire_slots(None)
            self.providers.register_tools()
            self._add_builtin_tools()
            surfaces.load_all(self)
            enabled = sum(1 for r in self._records.values() if r.enabled)
            self.log.info("plugin_discovery_complete", found=len(self._records), enabled=enabled)
        return self.plugins

    def save_plugin_state(self) -> None:
        """Save the plugin list of this load for :meth:`cached_plugins` (the CLI does, after loading)."""
        with self._lock:
            if not self._loaded or self._closed:
                return
            if any(r.kind == "mcp-server" for r in self._records.values()):
                # A server's health is not a file one can fingerprint: always ask it.
                state.discard(self.home)
                return
            merged, refused = self._discover()
            state.save(self.home, self._fingerprint(merged, refused), [p.to_dict() for p in self.plugins])

    def cached_plugins(self) -> list[PluginInfo] | None:
        """The plugin list saved by :meth:`save_plugin_state`, if nothing it depends on changed since.

        Reads manifests but imports no plugin code; ``None`` when there is no
        saved list or something changed (then call :meth:`load`).
        """
        merged, refused = self._discover()
        saved = state.load(self.home, self._fingerprint(merged, refused))
        if saved is None:
            return None
        try:
            return [PluginInfo(**record) for record in saved]
        except TypeError:  # saved by another version
            return None

    def _discover(self) -> tuple[dict[str, Candidate], list[Candidate]]:
        """The winning candidate of each key, and the refused ones; reads manifests, imports nothing."""
        return merge_sources(self._scan_sources(), self.log)

    def _scan_sources(self) -> list[list[Candidate]]:
        """Every plugin candidate of every source, source by source (bundled, user, project, entry points)."""
        groups = [
            scan_root(bundled_root(), "bundled", self.log),
            scan_root(self.home / "plugins", "user", self.log),
        ]
        if truthy(os.environ.get("HERMES_ENABLE_PROJECT_PLUGINS")):
            groups.append(scan_root(Path.cwd() / ".hermes" / "plugins", "project", self.log))
        else:
            self.log.debug("source_skipped", source="project", reason="HERMES_ENABLE_PROJECT_PLUGINS not set")
        groups.append(scan_entry_points(self.log))
        return groups

    def _fingerprint(self, merged: dict[str, Candidate], refused: list[Candidate]) -> str:
        """What the outcome of a load depends on, for :mod:`kernel.state`."""
        env_names = {v.name for c in merged.values() if c.manifest for v in c.manifest.requires_env}
        dotenv = read_dotenv(self.home)
        present = sorted(n for n in env_names if self.environ.get(n) or dotenv.get(n))
        candidates = [
            (c.key, c.source, str(c.path), c.error, c.version, str(c.entry_point and c.entry_point.value))
            for c in [*merged.values(), *refused]
        ]
        trees = [state.tree_signature(c.path) for c in [*merged.values(), *refused]]
        trees.append(state.tree_signature(self.home / "hooks"))
        stt = os.environ.get("HERMES_LOCAL_STT_COMMAND") or dotenv.get("HERMES_LOCAL_STT_COMMAND")
        return state.fingerprint([__version__, self.config, present, candidates, trees, stt])

    def shutdown(self) -> None:
        """Unregister everything and release the kernel's resources; idempotent.

        Variables that :meth:`load` exported from ``<home>/.env`` are removed
        again (unless something changed them meanwhile), or passed to another
        live kernel whose ``.env`` sets them (see :mod:`kernel.environ`).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            while self._closers:
                name, close = self._closers.pop()
                try:
                    close()
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    self.log.warning("surface_close_failed", surface=name, error=error)
            self.providers.close()
            for name in list(self._records):
                self._drop(name)
            environ.release(self._env_token)
            if self._compat:
                compat.uninstall(self)
            self._hooks.close()
            self._logging.close()
            self._release_namespace()

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def speech(self) -> Speech:
        """Text to speech and speech to text through the command providers of ``config.yaml``."""
        if self._speech is None:
            from .surfaces.speech import Speech

            self._speech = Speech(self)
        return self._speech

    @property
    def gateway(self) -> Gateway:
        """The gateway that runs the platform adapters plugins registered (``hermes-kernel gateway run``)."""
        if self._gateway is None:
            from .gateway.runner import Gateway

            self._gateway = Gateway(self)
        return self._gateway

    # -- plugins -----------------------------------------------------------------

    @property
    def plugins(self) -> list[PluginInfo]:
        """Every known plugin (loaded, disabled or failed), in call order."""
        with self._lock:
            records = sorted(self._records.values(), key=lambda r: plugin_order(r.name))
            return [r.info() for r in records + self._refused]

    def plugin(self, name: str) -> PluginInfo:
        """The :class:`PluginInfo` of plugin ``name``; ``KeyError`` when unknown."""
        with self._lock:
            record = self._records.get(name)
            if record is None:
                raise KeyError(f"no plugin named '{name}'")
            return record.info()

    def register(self, obj: object, name: str | None = None) -> PluginInfo:
        """Add a plugin at run time: a module or object of ``@hookimpl`` functions,
        and/or one with a Hermes-style ``register(ctx)``.

        It takes its place in the alphabetical call order at once.  Raises
        :class:`PluginError` (naming the plugin and the cause) when it cannot be
        added; the kernel is then unchanged.
        """
        name = name or getattr(obj, "__name__", None) or type(obj).__name__
        with self._lock:
            self._refuse_if_closed(name)
            if self.pm.is_blocked(name):
                raise PluginError(f"cannot register plugin '{name}': it is blocked (k.pm.set_blocked)")
            if name in self._records:
                raise PluginError(f"a plugin named '{name}' is already registered; choose another name")
            file = getattr(obj, "__file__", None)
            record = _Record(name=name, source="runtime", path=Path(file).parent if file else None)
            self._records[name] = record
            error = self._activate(record, lambda: obj)
            if error is not None:
                del self._records[name]
                raise PluginError(f"plugin '{name}': {error}")
            self._fire_slots(name)
            self._add_builtin_tools()
            return record.info()

    def unregister(self, name: str) -> None:
        """Remove plugin ``name`` with everything it registered."""
        with self._lock:
            if name not in self._records:
                raise KeyError(f"no plugin named '{name}'")
            self._drop(name)

    # -- hooks -------------------------------------------------------------------

    @property
    def hook_names(self) -> list[str]:
        """Every hook with a spec: the kernel's own and those plugins added (``ctx.add_hookspecs``)."""
        return sorted(name for name, caller in vars(self.pm.hook).items() if caller.has_spec())

    def invoke_hook(self, hook_name: str, /, **kwargs: Any) -> list[Any]:
        """Call every live callback of ``hook_name`` in plugin order; return the non-None results.

        The same call as ``k.pm.hook.<hook_name>(**kwargs)``: wrappers wrap it,
        a ``firstresult`` hook stops at (and returns a list of) the first
        result.  A failing callback is logged and disabled; the others still
        run.  Async callbacks are run to completion (see :meth:`ainvoke_hook`).
        """
        return self._hooks.hot(hook_name, **kwargs)

    async def ainvoke_hook(self, hook_name: str, /, **kwargs: Any) -> list[Any]:
        """As :meth:`invoke_hook`, for async hosts: async callbacks are awaited on the caller's
        loop, sync ones run on a worker thread so that a blocking one does not stall the loop."""
        return await self._hooks.ainvoke(hook_name, kwargs)

    def pre_llm_context(self, **kwargs: Any) -> str:
        """Fire ``pre_llm_call`` and merge the context pieces with blank lines, in plugin order."""
        return self._context_fn()(**kwargs)

    def _context_fn(self) -> Callable[..., str]:
        """``pre_llm_context`` as one function, like ``invoke_hook``'s hot loop.

        The loop keeps one entry per callback (``None`` for no answer or a
        failure), so that the common case — every answer a non-blank string —
        is checked and joined in C after it; any other answer is then read
        with its callback known (:meth:`_context_pieces`).
        """
        fast_get, failed, pieces, slow = (
            self._fast.get,
            self._hooks.failed,
            self._context_pieces,
            self._slow_context,
        )
        strip, join = str.strip, "\n\n".join

        def pre_llm_context(**kwargs: Any) -> str:
            chain = fast_get("pre_llm_call")
            if chain is None:
                return slow(kwargs)
            results: list[Any] = []
            append = results.append
            for call in chain.calls:
                try:
                    append(call(**kwargs))
                except BaseException as exc:
                    failed(chain, call, exc)
                    append(None)
            try:
                # str.strip, a C method, runs no method of a str subclass; anything else is a TypeError.
                if all(map(strip, results)):
                    return join(results)
            except TypeError:
                pass
            return join(pieces(chain, results))

        return pre_llm_context

    def _context_pieces(self, chain: Any, results: list[Any]) -> list[str]:
        """The context pieces of a fast-path call's answers (one per callback), in order."""
        out = []
        for call, result in zip(chain.calls, results, strict=True):
            if result is None:
                continue
            if type(result) is not str:
                result = self._context_piece(chain, call, result)
                if result is None:
                    continue
            if str.strip(result):
                out.append(result)
        return out

    def _slow_context(self, kwargs: dict[str, Any]) -> str:
        request = Request(pairs=[])
        self._hooks.invoke("pre_llm_call", kwargs, request)
        return self._merge_pairs(request.pairs or [])

    async def apre_llm_context(self, **kwargs: Any) -> str:
        """As :meth:`pre_llm_context`, awaiting async callbacks on the caller's loop."""
        request = Request(pairs=[])
        await self._hooks.ainvoke("pre_llm_call", kwargs, request)
        return self._merge_pairs(request.pairs or [])

    def _context_piece(self, chain: Any, call: Any, result: Any) -> str | None:
        """A ``pre_llm_call`` result that is not a plain string, as one (``None`` to leave it out)."""
        result = self._hooks.settle(chain, call, result)
        try:
            return context_text(result)
        except BaseException as exc:
            self._hooks.failed(chain, call, exc)
            return None

    def _merge_pairs(self, pairs: list[tuple[Callback, Any]]) -> str:
        return merge_context([p for p in self._hooks.read(pairs, context_text) if p is not None])

    def hook_callbacks(self, hook_name: str) -> list[Callback]:
        """The callbacks of ``hook_name`` (disabled ones too), in call order."""
        return self._hooks.callbacks(hook_name)

    def _hook_results(self, hook_name: str, kwargs: dict[str, Any]) -> list[tuple[Callback, Any]]:
        """``(callback, result)`` for each non-None result, for a caller that reads the results itself."""
        request = Request(pairs=[])
        self._hooks.invoke(hook_name, kwargs, request)
        return request.pairs or []

    def _first_text(self, hook_name: str, kwargs: dict[str, Any], allow_empty: bool = False) -> str | None:
        """The first string result of a ``transform_*`` hook (``None`` when there is none).

        A result that is not a string is ignored; one whose reading fails
        disables its callback.
        """
        for text in self._hooks.read(self._hook_results(hook_name, kwargs), plain_text):
            if text or (allow_empty and text is not None):
                return text
        return None

    # -- internals: loading ------------------------------------------------------

    def _seconds(self, key: str, default: float | None) -> float | None:
        """``plugins.<key>``: a number of seconds, ``0`` for none; ``default`` when absent or invalid."""
        value = section(self.config, "plugins", key)
        if value is None:
            return default
        if value == 0 and not isinstance(value, bool):
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            shown = "none" if default is None else f"{default:g} s"
            self._config_problem(
                f"config.yaml: 'plugins.{key}' must be a number of seconds (0 = none), "
                f"not {value!r}; using {shown}"
            )
            return default
        return float(value)

    def _hermes_compat(self) -> bool:
        """``compat.hermes`` (default true): serve the Hermes import shims to this kernel's plugins."""
        value = section(self.config, "compat", "hermes")
        if value is None:
            return True
        if not isinstance(value, bool):
            self._config_problem(
                f"config.yaml: 'compat.hermes' must be true or false, not {value!r}; using true"
            )
            return True
        return value

    def _config_problem(self, problem: str) -> None:
        self.problems.append(problem)
        self.log.warning("config_problem", detail=problem)

    def _disabled_names(self) -> set[str]:
        value = section(self.config, "plugins", "disabled")
        if value is None:
            return set()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self._config_problem("config.yaml: 'plugins.disabled' must be a list of plugin names; ignored")
            return set()
        return set(value)

    def _load_candidate(self, cand: Candidate, disabled: set[str]) -> None:
        existing = self._records.get(cand.key)
        if existing is not None:
            # Registered on k.pm before load() (or loaded from its entry point already): adopted once.
            existing.path = existing.path or cand.path
            existing.version = existing.version or cand.version
            existing.description = existing.description or cand.description
            self.log.debug("plugin_adopted", plugin=cand.key, source=existing.source, found_in=cand.source)
            return
        record = _Record.from_candidate(cand)
        self._records[record.name] = record
        manifest = record.manifest
        self.log.debug(
            "plugin_found",
            key=record.name,
            name=manifest.name if manifest else record.name,
            kind=record.kind,
            source=record.source,
            path=cand.where,
        )
        for warning in record.warnings:
            self.log.warning("manifest_warning", plugin=record.name, detail=warning)
        if manifest is not None and manifest.extra:
            self.log.debug("manifest_unknown_fields", plugin=record.name, fields=sorted(manifest.extra))
        if record.error is not None:
            self.log.warning("plugin_invalid", plugin=record.name, error=record.error)
            return
        if self.pm.is_blocked(record.name):
            record.error = BLOCKED
            self.log.debug("skip", plugin=record.name, reason=record.error)
            return
        if record.name in disabled or (manifest is not None and manifest.name in disabled):
            record.error = "disabled via config (plugins.disabled)"
            self.log.debug("skip", plugin=record.name, reason=record.error)
            return
        if manifest is not None:
            missing = [v.name for v in manifest.requires_env if not self.environ.get(v.name)]
            if missing:
                record.error = f"Plugin {record.name} disabled (missing: {', '.join(missing)})"
                self.log.warning("plugin_missing_env", plugin=record.name, missing=missing)
                return
        if record.is_model_provider:
            # Imported on the first provider lookup (k.providers), not at start-up.
            record.enabled = True
            record.deferred = True
            self.log.debug(
                "plugin_deferred", plugin=record.name, reason="model provider: loaded on first lookup"
            )
            return
        if cand.entry_point is not None:
            entry_point = cand.entry_point
            self._activate(record, entry_point.load)
        else:
            self._activate(record, lambda: self._import_directory(record))

    def _activate(self, record: _Record, load_target: Any) -> str | None:
        """Import and register one plugin; on any failure roll back and return the error.

        On a loader thread (see :meth:`_each_bounded`) the plugin may be given
        up while it runs; then nothing here touches the kernel any more.
        """
        with watchdog.settled() as live:
            if not live:
                return "given up (plugins.register_timeout)"
        activation = _Activation(record, PluginContext(self, record))
        ctx = activation.ctx

        def sink(profile: Any) -> None:
            self._offer_provider("model_provider", profile, record.name)

        with watchdog.working(activation):
            try:
                # Its object in k.pm until the import tells whether it has one of its own.
                record.obj = PluginHandle(record.name)
                self.pm._register_object(record.obj, record.name, scan=False)
                # Hermes-style module-level calls (providers.register_provider,
                # tools.registry.registry, ...) made while it loads are its own.
                entry_point = record.entry_point
                preloaded = entry_point is not None and entry_point.module in sys.modules
                with compat_host.loading(ctx), collecting(sink):
                    target = load_target()
                    if preloaded and self._registers_on_import(target):
                        # Imported by an earlier kernel: what it registered on import went there.
                        target = importlib.reload(target)
                    if record.path is None:
                        record.path = _source_dir(target)
                    activation.phase = "register"
                    self._register_target(record, target, ctx)
            except BaseException as exc:
                with watchdog.settled() as live:
                    if not live:
                        return record.error
                    ctx._rollback()
                    self._release(record)
                    if record.module_name:
                        _evict_modules(record.module_name)
                    if propagates(exc):
                        raise
                    record.error = _load_error(activation.phase, exc)
                    record.enabled = False
                    self.log.warning(
                        "plugin_load_failed",
                        plugin=record.name,
                        error=record.error,
                        exc_info=self.debug or None,
                    )
                    return record.error
            with watchdog.settled() as live:
                if not live:
                    return record.error
                record.enabled = True
                record.error = None
                self._check_declarations(record)
                self.log.debug(
                    "plugin_registered",
                    plugin=record.name,
                    tools=list(record.tools),
                    hooks=list(dict.fromkeys(cb.hook for cb in record.callbacks)),
                    commands=list(record.commands),
                )
        return None

    def _each_bounded(self, items: Iterable[T], fn: Callable[[T], None]) -> None:
        """``fn(item)`` for each item (plugins to load), each bounded by ``plugins.register_timeout``.

        They run on a loader thread that borrows the kernel's locks; one that
        overruns is given up (:meth:`_give_up`) and the next go on.
        """
        locks = (self._lock, self._hooks._lock, self.providers._lock, self.providers.catalog._lock)
        watchdog.run_each(items, fn, timeout=self._register_timeout, on_overran=self._give_up, lend=locks)

    def _give_up(self, item: Any, stack: list[Any]) -> None:
        """A load that overran: each plugin it was activating (innermost first) is failed and undone,
        dead first so that its context refuses from now on; its code may go on running."""
        if not stack:
            self.log.warning("plugin_load_overran", item=describe(item), timeout=self._register_timeout)
        for activation in reversed(stack):
            record = activation.record
            self._release(record)
            activation.ctx._rollback()
            self.providers.catalog.remove_plugin(record.name)
            if record.module_name:
                _evict_modules(record.module_name)
            what = "its import" if activation.phase == "import" else "register()"
            record.error = (
                f"{what} did not return within {self._register_timeout:g} s (plugins.register_timeout); "
                "not loaded — its code may still be running in the background: fix the plugin, or raise "
                "the timeout in config.yaml"
            )
            record.enabled = False
            self.log.warning("plugin_load_failed", plugin=record.name, error=record.error)

    def _register_target(self, record: _Record, target: Any, ctx: PluginContext) -> None:
        if inspect.isclass(target):
            self._register_class(record, target)
            return
        if inspect.isfunction(target) or inspect.ismethod(target):
            register, native = target, False
        else:
            register = getattr(target, "register", None)
            register = register if callable(register) else None
            native = self._has_hookimpls(target)
        if register is None and not native:
            if record.is_model_provider or self._registered_anything(record):
                # A module that registered itself when imported (Hermes allows it).
                self.log.debug("plugin_self_registered", plugin=record.name)
                self._take_object(record, target, scan=False)
                return
            where = getattr(target, "__file__", None) or (
                record.path / "__init__.py" if record.path else repr(target)
            )
            raise PluginError(f"no register(ctx) function and no @hookimpl functions in {where}")
        if register is not None:
            _call_register(register, ctx, self._hooks.run_sync)
        if not (inspect.isfunction(target) or inspect.ismethod(target)):
            self._take_object(record, target, scan=native)

    def _take_object(self, record: _Record, target: Any, *, scan: bool) -> None:
        """Make ``target`` (the plugin's module or object) its object in ``k.pm``, with its ``@hookimpl``s.

        The callbacks it registered meanwhile move from its handle to it.  A
        module that is another plugin's object already keeps the handle.
        """
        pm, handle = self.pm, record.obj
        if target is handle:
            return
        del pm._name2plugin[record.name]
        try:
            pm._register_object(target, record.name, scan)
        except ValueError:  # the object is another plugin's already
            pm._name2plugin[record.name] = handle
            if scan:
                raise
            return
        except BaseException:
            pm._name2plugin[record.name] = handle
            raise
        record.obj = target
        for cb in record.callbacks:
            if cb.impl.plugin is handle:
                cb.impl.plugin = target  # type: ignore[misc]
        if scan:
            known = set(record.callbacks)
            record.callbacks.extend(cb for cb in self._hooks.adopt(target) if cb not in known)
            self._note_unknown_hooks(record)

    def _note_unknown_hooks(self, record: _Record) -> None:
        for cb in record.callbacks:
            caller = getattr(self.pm.hook, cb.hook, None)
            if cb.native and not cb.impl.optionalhook and (caller is None or not caller.has_spec()):
                warning = f"hook '{cb.hook}' is not defined by the kernel (kept)"
                if warning not in record.warnings:
                    record.warnings.append(warning)

    def _hooks_specified(self, names: list[str]) -> None:
        """Hooks that just got a spec: earlier "not defined" warnings about them no longer hold."""
        stale = tuple(f"hook '{name}' is not defined" for name in names)
        for record in self._records.values():
            record.warnings[:] = [w for w in record.warnings if not w.startswith(stale)]

    def _add_surface(
        self,
        name: str,
        kind: str,
        setup: Callable[[PluginContext], None],
        *,
        source: str = "config",
        path: Path | None = None,
        description: str = "",
        close: Callable[[], None] | None = None,
    ) -> _Record:
        """Add a surface record (see :mod:`kernel.surfaces`): ``setup(ctx)`` registers what it offers.

        It is listed with the plugins and isolated like one: a ``setup`` that
        raises leaves the record with its error and nothing registered.
        ``close`` runs at shutdown, before the record is dropped.
        """
        with self._lock:
            if name in self._records:
                raise PluginError(f"'{name}' is already used by a plugin from {self._records[name].source}")
            record = _Record(name=name, source=source, path=path, kind=kind, description=description)
            self._records[name] = record
            if close is not None:
                self._closers.append((name, close))
            self._activate(record, lambda: setup)
            return record

    def _register_class(self, record: _Record, cls: type) -> None:
        """An entry point naming a class: a provider to instantiate (a memory provider, usually)."""
        bases = {slot: spec[3] for slot, spec in PROVIDER_SLOTS.items() if spec[3] is not None}
        slot = next((slot for slot, base in bases.items() if issubclass(cls, base)), None)
        if slot is None and record.kind in PROVIDER_SLOTS:
            slot = record.kind
        if slot is None:
            raise PluginError(
                f"the entry point names the class {cls.__module__}.{cls.__qualname__}, which is not a "
                "provider the kernel knows (MemoryProvider, ContextEngine, ImageGenProvider, ...); point "
                "it at a register(ctx) function instead"
            )
        self._offer_provider(slot, cls(), record.name)

    def _registers_on_import(self, target: Any) -> bool:
        """A module that has neither ``register`` nor hookimpls: it can only register as it is imported."""
        return (
            inspect.ismodule(target)
            and not callable(getattr(target, "register", None))
            and not self._has_hookimpls(target)
        )

    def _registered_anything(self, record: _Record) -> bool:
        return bool(
            record.tools
            or record.callbacks
            or record.commands
            or record.skills
            or record.cli_commands
            or self.providers.catalog.has_plugin(record.name)
            or any(p.plugin == record.name for slot in SLOTS for p in self.slots.providers(slot).values())
        )

    def _add_builtin_tools(self) -> None:
        """The kernel's own tools: ``skill_view`` once there is a skill to view."""
        if "skill_view" in self.tools or not self.skills.all():
            return
        self.tools.register("skill_view", "skills", VIEW_SCHEMA, self.skills.view_tool, plugin=BUILTIN_PLUGIN)

    def _has_hookimpls(self, obj: Any) -> bool:
        if inspect.ismodule(obj):
            # pluggy's marker is an attribute on the function; skip the
            # per-attribute parse for modules that carry none.
            marker = f"{PROJECT_NAME}_impl"
            if not any(hasattr(value, marker) for value in vars(obj).values() if callable(value)):
                return False
        for attr in dir(obj):
            try:
                if self.pm.parse_hookimpl_opts(obj, attr) is not None:
                    return True
            except Exception:  # noqa: S112 - an attribute that cannot be read is not a hookimpl
                continue
        return False

    def _import_directory(self, record: _Record) -> types.ModuleType:
        assert record.path is not None
        init = record.path / "__init__.py"
        namespace = self._ensure_namespace_module()
        self._claim_slug(record)
        module_name = f"{self._namespace}.{record.slug}"
        spec = importlib.util.spec_from_file_location(
            module_name, init, submodule_search_locations=[str(record.path)]
        )
        if spec is None or spec.loader is None:
            raise PluginError(f"cannot import {init}")
        module = importlib.util.module_from_spec(spec)
        record.module_name = module_name
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        setattr(namespace, record.slug, module)
        return module

    def _claim_slug(self, record: _Record) -> None:
        """Give ``record`` a module name of its own: names that slug alike (``dash-x``, ``dash_x``,
        ``dash.x``) get ``_2``, ``_3``... in load order, so no plugin runs another's module."""
        if record.claimed_slug is not None:
            return
        base = record.slug
        slug, n = base, 1
        while self._slugs.get(slug, record.name) != record.name:
            n += 1
            slug = f"{base}_{n}"
        self._slugs[slug] = record.name
        record.claimed_slug = slug

    def _check_declarations(self, record: _Record) -> None:
        manifest = record.manifest
        if manifest is None or manifest.path is None:
            return
        undeclared_tools = [t for t in record.tools if t not in manifest.provides_tools]
        if undeclared_tools:
            record.warnings.append(
                f"registers tool(s) not in provides_tools of {manifest.path}: {', '.join(undeclared_tools)}"
            )
        hooks = dict.fromkeys(cb.hook for cb in record.callbacks)
        undeclared_hooks = [h for h in hooks if h not in manifest.provides_hooks]
        if undeclared_hooks:
            record.warnings.append(
                f"registers hook(s) not in provides_hooks of {manifest.path}: {', '.join(undeclared_hooks)}"
            )
        if undeclared_tools or undeclared_hooks:
            self.log.warning(
                "manifest_drift", plugin=record.name, tools=undeclared_tools, hooks=undeclared_hooks
            )

    def _fire_slots(self, only: str | None) -> None:
        """Ask the slot-hook callbacks (of plugin ``only``, or all) for their providers, each once."""
        for hook, slot in hookspecs.SLOT_HOOKS.items():
            chain = self._hooks.chains.get(hook)  # its live callbacks, in call order
            for cb in chain.callbacks if chain is not None else ():
                if cb in self._slots_asked or (only is not None and cb.plugin != only):
                    continue
                self._slots_asked.add(cb)
                self._hooks.execute(
                    hook, [cb.impl], {"register": self._slot_register(slot, cb.plugin)}, False
                )

    def _slot_register(self, slot: str, plugin: str) -> Any:
        def register(provider: Any) -> None:
            self._offer_provider(slot, provider, plugin)

        return register

    def _offer_provider(self, slot: str, provider: Any, plugin: str) -> None:
        """Put ``provider`` into ``slot`` for ``plugin``; a refusal is a warning on the plugin."""
        record = self._records.get(plugin)
        if slot == "model_provider":
            problem = self.providers.catalog.add(provider, plugin, record.source if record else "runtime")
        else:
            spec = PROVIDER_SLOTS.get(slot)
            base = spec[3] if spec is not None else None
            offered = type(provider).__name__
            bases = {s: b for s, (_group, _key, _default, b) in PROVIDER_SLOTS.items() if b is not None}
            other = next((b for s, b in bases.items() if s != slot and isinstance(provider, b)), None)
            problem = None
            if base is not None and other is not None and not isinstance(provider, base):
                problem = (
                    f"plugin '{plugin}' offered a {other.__name__} ({offered}) as a {slot} provider; ignored"
                )
            elif base is not None:
                provider, missing = conform(provider, base)
                if provider is None:
                    problem = (
                        f"plugin '{plugin}' offered {offered} as a {slot} provider, but it is not a "
                        f"{base.__name__} and lacks {', '.join(missing)}; ignored"
                    )
            if problem is None:
                try:
                    self.slots.add(slot, provider, plugin)
                except SlotError as exc:
                    problem = str(exc)
        if problem is not None:
            if record is not None:
                record.warnings.append(problem)
            self.log.error("slot_conflict", slot=slot, plugin=plugin, error=problem)

    def _load_model_providers(self) -> None:
        """Import the deferred model provider plugins: bundled first, so that user ones override."""
        self.load()
        with self._lock:
            deferred = [r for r in self._records.values() if r.deferred]
            deferred.sort(key=lambda r: (SOURCE_RANK.get(r.source, 4), plugin_order(r.name)))

            def load_one(record: _Record) -> None:
                record.deferred = False
                if record.entry_point is not None:
                    error = self._activate(record, record.entry_point.load)
                else:
                    error = self._activate(record, lambda: self._import_directory(record))
                if error is not None:
                    # What it registered before failing goes with it.
                    self.providers.catalog.remove_plugin(record.name)
                else:
                    self._fire_slots(record.name)

            self._each_bounded(deferred, load_one)

    def _plugin_submodule(self, plugin: str, name: str) -> types.ModuleType | None:
        """Import ``<plugin package>.<name>`` (e.g. a memory provider's ``cli.py``), or ``None``."""
        record = self._records.get(plugin)
        if record is None or record.module_name is None or record.path is None:
            return None
        if not (record.path / f"{name}.py").is_file():
            return None
        try:
            return importlib.import_module(f"{record.module_name}.{name}")
        except Exception as exc:
            self.log.warning(
                "plugin_submodule_failed", plugin=plugin, module=name, error=f"{type(exc).__name__}: {exc}"
            )
            return None

    def _add_provider_tool(self, plugin: str, name: str, toolset: str, schema: Any, handler: Any) -> None:
        """Register a tool of an active provider, attributed to the provider's plugin."""
        record = self._records.get(plugin)
        try:
            tool, _warnings = self.tools.register(name, toolset, schema, handler, plugin=plugin)
        except ToolRegistrationError as exc:
            if record is not None:
                record.warnings.append(str(exc))
            self.log.warning("provider_tool_refused", plugin=plugin, tool=name, error=str(exc))
            return
        if record is not None:
            record.tools.append(tool.name)

    # -- internals: k.pm -------------------------------------------------------

    def _refuse_if_closed(self, name: str) -> None:
        if self._closed:
            raise PluginError(f"cannot register plugin '{name}': this kernel has been shut down")

    def _register_pluggy(self, obj: Any, name: str) -> str:
        """``k.pm.register(obj, name)``: a pluggy plugin, recorded like any other."""
        with self._lock:
            self._refuse_if_closed(name)
            existing = self._records.get(name)
            if existing is not None:
                raise PluginError(
                    f"Plugin name already registered: {name} (a plugin from {existing.source}); "
                    "choose another"
                )
            record = _Record(name=name, source="pluggy", path=_source_dir(obj) or _file_dir(obj))
            self._records[name] = record
            try:
                self.pm._register_object(obj, name, scan=True)
            except BaseException:
                del self._records[name]
                raise
            record.obj = obj
            record.enabled = True
            record.callbacks = self._hooks.adopt(obj)
            self._note_unknown_hooks(record)
            if self._loaded:
                self._fire_slots(name)
            return name

    def _unregister_pluggy(self, name: str) -> None:
        """``k.pm.unregister``: the plugin goes with everything it registered."""
        with self._lock:
            if name in self._records:
                self._drop(name)

    def _block(self, name: str) -> None:
        """``k.pm.set_blocked(name)``: unload it if loaded; listed as blocked; never loaded later."""
        with self._lock:
            record = self._records.get(name)
            if record is None:
                return
            self._unload(record)
            record.enabled = False
            record.deferred = False
            record.error = BLOCKED

    def _forget_blocked(self, name: str) -> None:
        """``k.pm.unblock(name)``: the record that said "blocked" goes; the name is free again."""
        with self._lock:
            record = self._records.get(name)
            if record is not None and record.error == BLOCKED:
                del self._records[name]

    def _load_entry_point_group(self, group: str, name: str | None) -> int | None:
        """``k.pm.load_setuptools_entrypoints`` for a Hermes group; ``None`` for any other group."""
        if group not in ENTRY_POINT_GROUPS:
            return None
        with self._lock:
            self._refuse_if_closed(name or group)
            count = 0
            disabled = self._disabled_names()
            wanted = [
                cand
                for cand in scan_entry_points(self.log, groups=(group,))
                if (name is None or cand.key == name)
                and cand.key not in self._records
                and not self.pm.is_blocked(cand.key)
            ]

            def load_one(cand: Candidate) -> None:
                nonlocal count
                self._load_candidate(cand, disabled)
                record = self._records[cand.key]
                if record.enabled:
                    count += 1
                    dist = getattr(cand.entry_point, "dist", None)
                    if dist is not None and record.obj is not None:
                        self.pm._plugin_distinfo.append((record.obj, dist))

            with self._hooks.batch():
                self._each_bounded(wanted, load_one)
            if self._loaded:
                for cand_name in [r.name for r in self._records.values() if r.enabled]:
                    self._fire_slots(cand_name)
                self._add_builtin_tools()
            return count

    def _release(self, record: _Record) -> None:
        """Take ``record``'s object out of ``k.pm``, with every callback it had."""
        if record.obj is not None:
            self.pm._unregister_object(record.obj)
            record.obj = None
        self._hooks.forget(record.name)
        record.callbacks.clear()

    def _drop(self, name: str) -> None:
        record = self._records.pop(name, None)
        if record is not None:
            self._unload(record)
            if record.claimed_slug is not None and self._slugs.get(record.claimed_slug) == name:
                del self._slugs[record.claimed_slug]

    def _unload(self, record: _Record) -> None:
        """Remove everything ``record`` registered; the record itself stays as it is."""
        name = record.name
        self._release(record)
        self.events.disconnect_owner(name)
        self.middleware.remove_plugin(name)
        self.platforms.remove_plugin(name)
        for tool in record.tools:
            self.tools.unregister(tool)
        for command in record.commands:
            self.commands.unregister(command)
        for cli_command in record.cli_commands:
            self.cli_commands.pop(cli_command, None)
        for skill in record.skills:
            self.skills.unregister(f"{name}:{skill}")
        for registered in (record.tools, record.commands, record.cli_commands, record.skills):
            registered.clear()
        record.middleware.clear()
        record.platforms.clear()
        self.providers.catalog.remove_plugin(name)
        self.slots.remove_plugin(name)
        if record.module_name:
            _evict_modules(record.module_name)

    # -- internals: failures and gates -----------------------------------------

    def _on_hook_failure(self, cb: Callback, exc: BaseException) -> None:
        fields = {"plugin": cb.plugin, "hook": cb.hook, "error": cb.error or describe(exc)}
        action = "callback disabled for the life of this kernel"
        try:
            self.log.warning(
                "hook_failed",
                **fields,
                callback=cb.label,
                action=action,
                exc_info=exc if self.debug else None,
            )
        except BaseException as log_exc:
            if propagates(log_exc):
                raise
            # An exception that even the traceback renderer cannot print.
            self.log.warning("hook_failed", **fields, action=action)

    def inject_message(
        self, content: str, role: str = "user", *, plugin: str = "host", session_id: str | None = None
    ) -> bool:
        """Queue a message for the next model call of a session (see ``ctx.inject_message``).

        It goes to ``session_id``, else to the session of the call in progress
        (a turn, a tool call); with neither, to the next model call only while at
        most one agent session is open — with several, it is refused, since it
        could reach the wrong conversation.
        """
        if role not in ("user", "assistant", "system") or not isinstance(content, str) or not content.strip():
            self.log.warning("inject_message_refused", plugin=plugin, role=role)
            return False
        target = session_id if session_id is not None else current_call().get("session_id")
        with self._lock:
            if target is None and len(self._agent_sessions) > 1:
                self.log.warning(
                    "inject_message_refused",
                    plugin=plugin,
                    role=role,
                    reason="no session in progress and several are open; pass session_id",
                )
                return False
            self._injected.append(
                (None if target is None else str(target), {"role": role, "content": content})
            )
        self.log.debug("message_injected", plugin=plugin, role=role, chars=len(content), session=target)
        return True

    def _take_injected(self, session_id: str | None) -> list[dict[str, str]]:
        """The messages queued for ``session_id`` (or for no session in particular), oldest first."""
        with self._lock:
            taken = [m for target, m in self._injected if target is None or target == session_id]
            self._injected = [(t, m) for t, m in self._injected if not (t is None or t == session_id)]
        return taken

    def _drop_injected(self, session_id: str) -> None:
        """Forget the messages queued for a session that has closed."""
        with self._lock:
            self._injected = [(t, m) for t, m in self._injected if t != session_id]

    def _note_failure(self, plugin: str, problem: str) -> None:
        """Record a run-time failure of ``plugin`` (e.g. an event receiver) once, for the listings."""
        record = self._records.get(plugin)
        if record is not None and problem not in record.warnings and len(record.warnings) < 50:
            record.warnings.append(problem)

    def _decide_tool_call(self, tool_name: str, args: dict[str, Any], context: dict[str, Any]) -> Verdict:
        """Fire ``pre_tool_call``, merge the decisions, and ask the approver when one asks for it.

        Each callback gets its own copy of the arguments; a callback that fails,
        or whose answer cannot be read, blocks the call (and is disabled).
        """
        try:
            snapshot = copy.deepcopy(args)
        except BaseException as exc:
            if propagates(exc):
                raise
            return Verdict(
                blocked=f"tool call to '{tool_name}' blocked: its arguments cannot be copied for the "
                f"pre_tool_call guards ({describe(exc)})",
                args=args,
            )
        request = Request(pairs=[], failures=[], prepare=lambda kw: {**kw, "args": copy.deepcopy(snapshot)})
        self._hooks.invoke("pre_tool_call", {**context, "tool_name": tool_name, "args": snapshot}, request)
        # Every answer is read, so that every guard that broke the rules is disabled in this call.
        failed = [(cb, False) for cb in request.failures or []]
        decisions = []
        for cb, value in request.pairs or []:
            try:
                decision = parse_decision(value)
            except MalformedDecision as exc:
                self.log.warning(
                    "tool_decision_malformed",
                    plugin=cb.plugin,
                    tool=tool_name,
                    problem=str(exc),
                    value=safe_text(repr, value),
                )
                continue
            except BaseException as exc:
                if propagates(exc):
                    raise
                self._hooks.fail(cb, exc)
                failed.append((cb, True))
                continue
            if decision is not None:
                decisions.append((cb.plugin, decision))
        if failed:
            cb, reading = failed[0]
            return _guard_failed(cb, args, reading=reading)
        verdict = merge_decisions(args, decisions)
        if verdict.blocked is None:
            for plugin, message, rule_key in verdict.approvals:
                request = ApprovalRequest(
                    tool_name=tool_name,
                    args=copy.deepcopy(verdict.args),
                    message=message,
                    plugin=plugin,
                    rule_key=rule_key,
                    session_id=context.get("session_id"),
                    task_id=context.get("task_id"),
                )
                if not self._approve(request):
                    reason = f": {message}" if message else ""
                    verdict.blocked = (
                        f"tool call to '{tool_name}' was not approved (asked by plugin '{plugin}'){reason}"
                    )
                    break
        return verdict

    def _approve(self, request: ApprovalRequest) -> bool:
        try:
            allowed = bool(self.approver(request))
        except BaseException as exc:
            if propagates(exc):
                raise
            self.log.warning("approver_failed", tool=request.tool_name, error=describe(exc))
            return False
        self.log.info("tool_approval", tool=request.tool_name, plugin=request.plugin, allowed=allowed)
        return allowed

    # -- internals: module namespace ---------------------------------------------

    def _claim_namespace(self) -> str:
        with self._namespace_lock:
            base, n = "hermes_plugins", 1
            name = base
            while name in self._namespaces_in_use:
                n += 1
                name = f"{base}_{n}"
            self._namespaces_in_use.add(name)
            return name

    def _release_namespace(self) -> None:
        with self._namespace_lock:
            self._namespaces_in_use.discard(self._namespace)
        sys.modules.pop(self._namespace, None)

    def _ensure_namespace_module(self) -> types.ModuleType:
        module = sys.modules.get(self._namespace)
        if module is None:
            module = types.ModuleType(self._namespace, "Directory plugins loaded by hermes-kernel.")
            module.__path__ = []
            sys.modules[self._namespace] = module
        return module


def _guard_failed(cb: Callback, args: dict[str, Any], reading: bool = False) -> Verdict:
    what = "returned a decision that could not be read" if reading else "failed"
    return Verdict(
        blocked=(
            f"tool call blocked: the pre_tool_call hook of plugin '{cb.plugin}' {what} ({cb.error}); "
            "that hook is now disabled"
        ),
        args=args,
    )


def _file_dir(obj: Any) -> Path | None:
    file = getattr(obj, "__file__", None)
    return Path(file).parent if isinstance(file, str) else None


def _source_dir(target: Any) -> Path | None:
    """The folder of the file that defines ``target`` (a module, function or class), if it has one."""
    if not (inspect.ismodule(target) or inspect.isfunction(target) or inspect.isclass(target)):
        return None
    try:
        return Path(inspect.getfile(target)).parent
    except (TypeError, OSError):
        return None


def merge_context(results: list[Any]) -> str:
    """Join ``pre_llm_call`` results: non-blank strings and ``{"context": ...}`` values."""
    try:
        # The common case, checked in C: every result is a non-blank string.
        if all(map(str.strip, results)):
            return "\n\n".join(results)
    except TypeError:  # a result that is not a string
        pass
    return "\n\n".join(piece for piece in map(context_text, results) if piece is not None)


def _call_register(register: Any, ctx: PluginContext, run_sync: Any) -> None:
    code = getattr(register, "__code__", None)
    if code is not None and inspect.isfunction(register):
        takes_args = bool(code.co_argcount or code.co_kwonlyargcount or code.co_flags & inspect.CO_VARARGS)
    else:
        try:
            takes_args = bool(inspect.signature(register).parameters)
        except (TypeError, ValueError):
            takes_args = True
    result = register(ctx) if takes_args else register()
    if inspect.isawaitable(result):
        run_sync(result)


class _Activation:
    """A plugin being imported and registered: its record, its context, and how far it got."""

    __slots__ = ("ctx", "phase", "record")

    def __init__(self, record: _Record, ctx: PluginContext) -> None:
        self.record, self.ctx, self.phase = record, ctx, "import"


def _load_error(phase: str, exc: BaseException) -> str:
    if isinstance(exc, surfaces.SurfaceError):
        return safe_text(str, exc)
    if isinstance(exc, SyntaxError):
        detail = f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    else:
        detail = describe(exc)
    if phase == "import":
        return f"import failed: {detail}"
    return f"register() failed: {detail}"


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Defer cyclic garbage collection while plugins load.

    Importing hundreds of modules creates many long-lived objects; letting
    the collector walk them again and again costs about a quarter of the
    load time.  Collection resumes (if it was on) as soon as loading ends.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _evict_modules(module_name: str) -> None:
    prefix = module_name + "."
    for name in [n for n in sys.modules if n == module_name or n.startswith(prefix)]:
        sys.modules.pop(name, None)


def _default_catalog() -> Any:
    """The process-wide provider catalog (Hermes' module-level ``providers`` functions): a kernel's."""
    return Kernel().providers.catalog


provider_registry.default_factory = _default_catalog
