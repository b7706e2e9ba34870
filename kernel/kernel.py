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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pluggy

from . import compat, hookspecs, state, surfaces
from .commands import CliCommand, CommandRegistry
from .compat import host as compat_host
from .config import load_config, read_dotenv, resolve_home, section, truthy
from .context import PluginContext
from .decisions import ApprovalRequest, Approver, Verdict, merge_decisions, parse_decision, terminal_approver
from .discovery import Candidate, bundled_root, merge_sources, scan_entry_points, scan_root
from .events import EventBus
from .gateway.registry import PlatformRegistry
from .hooks import (
    CONTAINED,
    NORMAL,
    TRY_FIRST,
    TRY_LAST,
    Callback,
    HookDispatcher,
    adapt_pluggy_impl,
    plugin_order,
)
from .log import KernelLogging
from .manifest import Manifest
from .markers import PROJECT_NAME
from .middleware import MiddlewareRegistry
from .providers.manager import SLOTS as PROVIDER_SLOTS
from .providers.manager import ProviderManager
from .providers.registry import SOURCE_RANK, collecting
from .skills import VIEW_SCHEMA, SkillRegistry
from .slots import SLOTS, SlotError, SlotRegistry, conform
from .tools import ToolRegistrationError, ToolRegistry

if TYPE_CHECKING:
    from .gateway.runner import Gateway
    from .surfaces.speech import Speech

__version__ = "0.1.0"

_COROUTINE = types.CoroutineType

# The owner of the kernel's own tools (``skill_view``) in the tool registry.
BUILTIN_PLUGIN = "builtin"


class PluginError(Exception):
    """A plugin that an explicit :meth:`Kernel.register` call could not add."""


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
    native: Any = None
    deferred: bool = False
    entry_point: Any = None

    @property
    def is_model_provider(self) -> bool:
        """A model provider plugin: imported on the first provider lookup, may self-register."""
        return self.kind == "model-provider" or self.name.startswith("model-providers/")

    @property
    def slug(self) -> str:
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


class _KernelPluginManager(pluggy.PluginManager):
    """pluggy's manager, telling the kernel about every plugin added or removed.

    Registering directly on ``k.pm`` is therefore the same as ``k.register``.
    """

    def __init__(self, kernel: Kernel) -> None:
        super().__init__(PROJECT_NAME)
        self._kernel = kernel

    def register(self, plugin: object, name: str | None = None) -> str | None:
        registered = super().register(plugin, name)
        if registered is not None:
            self._kernel._adopt_native(plugin, registered)
        return registered

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any:
        removed = super().unregister(plugin, name)
        if removed is not None:
            self._kernel._forget_native(removed)
        return removed


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

        self._hooks = HookDispatcher(self._on_hook_failure, timeout=self._hook_timeout())
        self._chains = self._hooks.chains
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
        self.pm = _KernelPluginManager(self)
        self.pm.add_hookspecs(hookspecs)
        self.hook_names: list[str] = sorted(
            name for name in vars(hookspecs) if self.pm.parse_hookspec_opts(hookspecs, name)
        )
        self._records: dict[str, _Record] = {}
        self._refused: list[_Record] = []
        self._lock = threading.RLock()
        self._loaded = False
        self._closed = False
        self._env_applied: dict[str, str] = {}
        self._closers: list[tuple[str, Callable[[], None]]] = []
        self._speech: Speech | None = None
        self._compat = False
        self._injected: list[dict[str, str]] = []

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
            for key, value in read_dotenv(self.home).items():
                if key not in os.environ:
                    os.environ[key] = value
                    self._env_applied[key] = value
            disabled = self._disabled_names()
            merged, refused = self._discover()
            self._refused.extend(_Record.from_candidate(c) for c in refused)
            with self._hooks.batch(), _gc_paused():
                for key in sorted(merged, key=plugin_order):
                    self._load_candidate(merged[key], disabled)
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
        present = sorted(n for n in env_names if os.environ.get(n) or dotenv.get(n))
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
        again (unless something changed them meanwhile).
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
            for key, value in self._env_applied.items():
                if os.environ.get(key) == value:
                    del os.environ[key]
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
            if self._closed:
                raise PluginError(f"cannot register plugin '{name}': this kernel has been shut down")
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

    def invoke_hook(self, hook_name: str, /, **kwargs: Any) -> list[Any]:
        """Call every live callback of ``hook_name`` in plugin order; return the non-None results.

        A failing callback is logged and disabled; the others still run.
        Async callbacks are run to completion.
        """
        return self._invoke(hook_name, kwargs)

    def _invoke(self, hook_name: str, kwargs: dict[str, Any]) -> list[Any]:
        # The hot path: a loop over a precomputed chain; the guard costs
        # nothing until a callback raises.
        chain = self._chains.get(hook_name)
        if chain is None:
            return []
        if chain.has_async:
            return [r for _, r in self._hooks.invoke_pairs(hook_name, kwargs)]
        results: list[Any] = []
        append = results.append
        for call in chain.calls:
            try:
                result = call(**kwargs)
            except BaseException as exc:
                self._hooks.failed(chain, call, exc)
                continue
            if result is not None:
                if type(result) is _COROUTINE:
                    result = self._hooks.run_sync(result)
                    if result is None:
                        continue
                append(result)
        return results

    async def ainvoke_hook(self, hook_name: str, /, **kwargs: Any) -> list[Any]:
        """As :meth:`invoke_hook`, awaiting async callbacks on the caller's event loop."""
        return [r for _, r in await self._hooks.ainvoke_pairs(hook_name, kwargs)]

    def pre_llm_context(self, **kwargs: Any) -> str:
        """Fire ``pre_llm_call`` and merge the context pieces with blank lines, in plugin order."""
        return merge_context(self._invoke("pre_llm_call", kwargs))

    async def apre_llm_context(self, **kwargs: Any) -> str:
        """As :meth:`pre_llm_context`, awaiting async callbacks on the caller's loop."""
        return merge_context(await self.ainvoke_hook("pre_llm_call", **kwargs))

    def hook_callbacks(self, hook_name: str) -> list[Callback]:
        """The callbacks of ``hook_name`` (disabled ones too), in call order."""
        return self._hooks.callbacks(hook_name)

    # -- internals: loading ------------------------------------------------------

    def _hook_timeout(self) -> float | None:
        value = section(self.config, "plugins", "hook_timeout")
        if value is None or value == 0:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            self._config_problem(
                f"config.yaml: 'plugins.hook_timeout' must be a number of seconds (0 = none), "
                f"not {value!r}; ignored"
            )
            return None
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
        if record.name in disabled or (manifest is not None and manifest.name in disabled):
            record.error = "disabled via config (plugins.disabled)"
            self.log.debug("skip", plugin=record.name, reason=record.error)
            return
        if manifest is not None:
            missing = [v.name for v in manifest.requires_env if not os.environ.get(v.name)]
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
        """Import and register one plugin; on any failure roll back and return the error."""
        ctx = PluginContext(self, record)
        phase = "import"

        def sink(profile: Any) -> None:
            self._offer_provider("model_provider", profile, record.name)

        try:
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
                phase = "register"
                self._register_target(record, target, ctx)
        except BaseException as exc:
            if not isinstance(exc, CONTAINED):
                raise
            ctx._rollback()
            self._undo_native(record)
            if record.module_name:
                _evict_modules(record.module_name)
            record.error = _load_error(phase, exc)
            record.enabled = False
            self.log.warning(
                "plugin_load_failed", plugin=record.name, error=record.error, exc_info=self.debug or None
            )
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
                return
            where = getattr(target, "__file__", None) or (
                record.path / "__init__.py" if record.path else repr(target)
            )
            raise PluginError(f"no register(ctx) function and no @hookimpl functions in {where}")
        if register is not None:
            _call_register(register, ctx, self._hooks.run_sync)
        if native:
            self.pm.register(target, name=record.name)

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
        for hook, slot in hookspecs.SLOT_HOOKS.items():
            chain = self._hooks.chain(hook)
            for call, cb in zip(chain.calls, chain.callbacks, strict=True):
                if only is not None and cb.plugin != only:
                    continue
                try:
                    result = call(register=self._slot_register(slot, cb.plugin))
                    if inspect.isawaitable(result):
                        self._hooks.run_sync(result)
                except BaseException as exc:
                    self._hooks.failed(chain, call, exc)

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
            for record in deferred:
                record.deferred = False
                if record.entry_point is not None:
                    error = self._activate(record, record.entry_point.load)
                else:
                    error = self._activate(record, lambda r=record: self._import_directory(r))
                if error is not None:
                    # What it registered before failing goes with it.
                    self.providers.catalog.remove_plugin(record.name)
                else:
                    self._fire_slots(record.name)

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

    # -- internals: pluggy-native plugins ------------------------------------

    def _adopt_native(self, obj: Any, name: str) -> None:
        with self._lock:
            record = self._records.get(name)
            if record is None:
                file = getattr(obj, "__file__", None)
                record = _Record(
                    name=name, source="pluggy", path=Path(file).parent if file else None, enabled=True
                )
                self._records[name] = record
            record.native = obj
            for caller in self.pm.get_hookcallers(obj) or []:
                for impl in caller.get_hookimpls():
                    if impl.plugin is not obj:
                        continue
                    if impl.hookwrapper or impl.wrapper:
                        record.warnings.append(
                            f"hook '{caller.name}': pluggy wrappers are not called by the kernel; skipped"
                        )
                        continue
                    if caller.name not in self.hook_names:
                        record.warnings.append(f"hook '{caller.name}' is not defined by the kernel (kept)")
                    tier = TRY_FIRST if impl.tryfirst else TRY_LAST if impl.trylast else NORMAL
                    cb = self._hooks.add(
                        name,
                        caller.name,
                        impl.function,
                        adapt_pluggy_impl(impl.function, impl.argnames),
                        tier=tier,
                        native=True,
                    )
                    record.callbacks.append(cb)
            if record.source == "pluggy":
                self._fire_slots(name)

    def _forget_native(self, obj: Any) -> None:
        with self._lock:
            for record in self._records.values():
                if record.native is obj:
                    for cb in [c for c in record.callbacks if c.native]:
                        self._hooks.remove(cb)
                        record.callbacks.remove(cb)
                    record.native = None
                    if record.source == "pluggy":
                        self._drop(record.name)
                    return

    def _undo_native(self, record: _Record) -> None:
        if record.native is not None and self.pm.is_registered(record.native):
            self.pm.unregister(record.native)

    def _drop(self, name: str) -> None:
        record = self._records.pop(name, None)
        if record is None:
            return
        if record.native is not None and self.pm.is_registered(record.native):
            pluggy.PluginManager.unregister(self.pm, record.native)
        self._hooks.remove_plugin(name)
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
        self.providers.catalog.remove_plugin(name)
        self.slots.remove_plugin(name)
        if record.module_name:
            _evict_modules(record.module_name)

    # -- internals: failures and gates -----------------------------------------

    def _on_hook_failure(self, cb: Callback, exc: BaseException) -> None:
        self.log.warning(
            "hook_failed",
            plugin=cb.plugin,
            hook=cb.hook,
            callback=cb.label,
            error=cb.error,
            action="callback disabled for the life of this kernel",
            exc_info=exc if self.debug else None,
        )

    def inject_message(self, content: str, role: str = "user", *, plugin: str = "host") -> bool:
        """Queue a message for the next model call of a session (see ``ctx.inject_message``)."""
        if role not in ("user", "assistant", "system") or not isinstance(content, str) or not content.strip():
            self.log.warning("inject_message_refused", plugin=plugin, role=role)
            return False
        with self._lock:
            self._injected.append({"role": role, "content": content})
        self.log.debug("message_injected", plugin=plugin, role=role, chars=len(content))
        return True

    def _take_injected(self) -> list[dict[str, str]]:
        """The queued messages, oldest first; the queue is emptied."""
        with self._lock:
            taken, self._injected = self._injected, []
        return taken

    def _note_failure(self, plugin: str, problem: str) -> None:
        """Record a run-time failure of ``plugin`` (e.g. an event receiver) once, for the listings."""
        record = self._records.get(plugin)
        if record is not None and problem not in record.warnings and len(record.warnings) < 50:
            record.warnings.append(problem)

    def _decide_tool_call(self, tool_name: str, args: dict[str, Any], context: dict[str, Any]) -> Verdict:
        """Fire ``pre_tool_call``, merge the decisions, and ask the approver when one asks for it."""
        failures: list[Callback] = []
        kwargs = {**context, "tool_name": tool_name, "args": copy.deepcopy(args)}
        pairs = self._hooks.invoke_pairs("pre_tool_call", kwargs, failures)
        if failures:
            cb = failures[0]
            return Verdict(
                blocked=(
                    f"tool call blocked: the pre_tool_call hook of plugin '{cb.plugin}' failed ({cb.error}); "
                    "that hook is now disabled"
                ),
                args=args,
            )
        decisions = []
        for cb, value in pairs:
            try:
                decision = parse_decision(value)
            except ValueError as exc:
                self.log.warning(
                    "tool_decision_malformed",
                    plugin=cb.plugin,
                    tool=tool_name,
                    problem=str(exc),
                    value=repr(value),
                )
                continue
            if decision is not None:
                decisions.append((cb.plugin, decision))
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
            if not isinstance(exc, CONTAINED):
                raise
            self.log.warning("approver_failed", tool=request.tool_name, error=f"{type(exc).__name__}: {exc}")
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
    pieces = []
    for result in results:
        if isinstance(result, dict):
            result = result.get("context")
            if result is not None and not isinstance(result, str):
                result = str(result)
        if isinstance(result, str) and result.strip():
            pieces.append(result)
    return "\n\n".join(pieces)


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


def _load_error(phase: str, exc: BaseException) -> str:
    if isinstance(exc, surfaces.SurfaceError):
        return str(exc)
    if isinstance(exc, SystemExit):
        detail = f"SystemExit({exc.code!r})"
    elif isinstance(exc, SyntaxError):
        detail = f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    else:
        text = str(exc).strip()
        detail = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
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
