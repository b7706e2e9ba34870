"""The ``Kernel``: one instance owns plugins, hooks and the services attached to it."""

from __future__ import annotations

import contextlib
import copy
import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, cast

from .. import hookspecs
from ..base import environ
from ..base.config import hermes_marker, load_config, plugin_names, read_dotenv, resolve_home, section, truthy
from ..base.environ import KernelEnviron
from ..hookspecs import __version__
from . import watchdog
from .callbacks import OBSERVER_KEY, OBSERVER_SCHEMA_VERSION, contained
from .hooks import Callback, HookEngine, Request, context_text, describe, plain_text, plugin_order
from .plugin_manager import KernelPluginManager, PluginError
from .records import (
    BLOCKED,
    RUN_CHOICE_VARIABLES,
    SOURCE_RANK,
    Choice,
    PluginInfo,
    _Record,
    info_from_last_load,
    run_choice,
)
from .registry import PluginRegistry
from .running import RUNNING
from .service_host import ServiceHost
from .services import Service, ServiceManager, config_schema_for

if TYPE_CHECKING:
    from ..base.log import KernelLogging, LazyLogger
    from .sources.discovery import Candidate

#: Where the entry points of the installed distributions are remembered (see discovery.scan_entry_points).
ENTRY_POINTS_CACHE = Path("cache") / "entry-points.json"

__all__ = ["BLOCKED", "DEFAULT_REGISTER_TIMEOUT", "Kernel", "PluginError", "PluginInfo", "merge_context"]

#: Seconds a plugin's import plus its register() may take (plugins.register_timeout; 0 = no bound).
DEFAULT_REGISTER_TIMEOUT = 30.0


class Kernel:
    """A plugin kernel for one agent.

    ``Kernel(home=None, config=None)`` then :meth:`load`, use, :meth:`shutdown`.
    ``home`` defaults to ``$HERMES_HOME``, else ``~/.hermes``; ``config`` is a
    mapping deep-merged over ``<home>/config.yaml``.  ``approver`` answers
    ``pre_tool_call`` approval requests (default, ``None``: ask on the
    terminal, deny without one).  Nothing is imported or fired at construction
    time: the services (``k.tools``, ``k.providers``, ``k.gateway``, ...) are
    attached when first used (see :mod:`kernel.core.services`).
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        approver: Callable[[Any], bool] | None = None,
        services: list[Service] | None = None,
    ) -> None:
        self.home: Path = resolve_home(home)
        self.approver = approver
        self._config_override = copy.deepcopy(dict(config)) if config else None
        # Caches to write once the kernel writes any (a constructed kernel writes nothing).
        self._remember: list[Callable[[], object]] = []
        #: Whether a load may make ``<home>/cache`` for its caches (a CLI printing only help says no).
        self.write_caches = True
        schema = config_schema_for(services)
        self.config, self.problems = load_config(self.home, config, self._remember, check=schema)
        self.debug = truthy(os.environ.get("HERMES_PLUGINS_DEBUG"))
        from ..base import state
        from .loader import Loader, claim_namespace  # with the first kernel: `import kernel` loads neither

        self._namespace = claim_namespace()
        self._made_logging: KernelLogging | None = None
        #: The kernel's logger (structlog's API); its loggers and handlers are made with the first
        #: record anyone could see, or when plugins load (see :class:`_DeferredLog`).
        deferred = _DeferredLog(lambda: self._logging.logger, self._log_unheard)
        self.log: LazyLogger = cast("LazyLogger", deferred)

        self._lock = watchdog.SharedRLock()
        #: The plugin records, below ``k.pm`` and the loader (see :mod:`kernel.core.registry`).
        self._registry = PluginRegistry(self._lock)
        self._records: dict[str, _Record] = self._registry.records
        for problem in self.problems:
            self.log.warning("config_problem", detail=problem)
        # Locks of attached services that a loader thread borrows along with the kernel's (each_bounded).
        self._lendable: list[watchdog.SharedRLock] = []
        self.pm = KernelPluginManager(self._registry)
        self._hooks = HookEngine(
            self.pm, self._on_hook_failure, timeout=self._seconds("hook_timeout", None), owner=self
        )
        # Each plugin's import and register() are bounded by this (see Loader.each_bounded).
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
        self._refused: list[_Record] = []
        self._env_token = object()
        #: This kernel's environment: the process's variables, then ``<home>/.env`` (see kernel.environ).
        self.environ = KernelEnviron(self._env_token)
        weakref.finalize(self, environ.release, self._env_token)
        self._closers: list[tuple[str, Callable[[], None]]] = []
        #: Parsed manifests of earlier runs, by file identity (see kernel.base.state.ManifestCache).
        self._manifests = state.ManifestCache(self.home)
        #: What a service may use of this kernel (see :mod:`kernel.core.api`).
        self.host: ServiceHost = ServiceHost(self)
        self._services = ServiceManager(self, services)
        self._loader = Loader(
            self,
            self._registry,
            self.pm,
            self._hooks,
            self._services,
            log=self.log,
            environ=self.environ,
            debug=self.debug,
            namespace=self._namespace,
            register_timeout=self._register_timeout,
            lendable=self._lendable,
            closers=self._closers,
        )
        self._registry.unload = self._loader.unload
        self._registry.joined = self._loader.joined
        self.pm.load_group = self._loader.load_entry_point_group

    @property
    def _closed(self) -> bool:
        return self._registry.closed

    @property
    def _loaded(self) -> bool:
        return self._loader.loaded

    def __getattr__(self, name: str) -> Any:
        # Only for names not set yet: a service's attribute attaches the service that sets it.
        services = self.__dict__.get("_services")
        service = services.for_attribute(name) if services is not None else None
        if services is None or service is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        services.attach(service.name)
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(
                f"service '{service.name}' ({service.module}) did not set the attribute '{name}' it declares"
            ) from None

    def service(self, name: str) -> Any:
        """The module of service ``name``, attached to this kernel (imported on first use)."""
        return self._services.attach(name)

    @property
    def services(self) -> list[str]:
        """The names of the services attached to this kernel so far, in the order they were attached."""
        return list(self._services.attached)

    # -- lifecycle -------------------------------------------------------------

    @property
    def _logging(self) -> KernelLogging:
        """The kernel's loggers and handlers (:mod:`kernel.base.log`), made on first use; after
        :meth:`shutdown`, made without handlers (records go where the host's logging sends them)."""
        made = self._made_logging
        if made is None:
            from ..base.log import KernelLogging

            with _LOGGING_LOCK:
                made = self._made_logging
                if made is None:
                    made = KernelLogging(self.home, self.debug, self._namespace)
                    if self._closed:
                        made.close()
                    self._made_logging = made
        return made

    def _log_unheard(self) -> bool:
        """Whether a DEBUG or INFO record now would reach nobody (see :class:`_DeferredLog`)."""
        return self._made_logging is None and not self.debug and "logging" not in sys.modules

    def load(self) -> list[PluginInfo]:
        """Discover and register every plugin; idempotent; never raises for a bad plugin."""
        from .loader import _gc_paused

        with self._lock:
            if self._loaded or self._closed:
                return self.plugins
            self._loader.loaded = True
            self._logging  # noqa: B018 - made now: plugin loggers get the kernel handlers before they run
            self.environ.dotenv = read_dotenv(self.home)
            for name in environ.export(self._env_token, self.environ.dotenv):
                self.log.warning(
                    "env_not_exported",
                    variable=name,
                    reason="another kernel in this process exported it; this kernel uses its own value, "
                    "plugins reading os.environ see the other one",
                )
            services = self._services
            services.attach_declared()
            services.hook.service_load_started(kernel=self)
            disabled = self.plugin_choice()
            merged, refused = self.discover()
            self._refused.extend(_Record.from_candidate(c) for c in refused)
            with self._hooks.batch(), _gc_paused():
                order = [merged[key] for key in sorted(merged, key=plugin_order)]
                loader = self._loader
                loader.each_bounded(order, lambda cand: loader.load_candidate(cand, disabled))
                if loader.deferred_wanted and any(r.deferred for r in self._records.values()):
                    # A plugin looked a provider up while loading, before later provider plugins were
                    # reached: those are imported now rather than never.
                    loader.load_deferred()
            services.attach_for_hooks(self._loader.implemented_hooks())
            services.hook.service_load_finished(kernel=self)
            enabled = sum(1 for r in self._records.values() if r.enabled)
            self.log.info("plugin_discovery_complete", found=len(self._records), enabled=enabled)
        return self.plugins

    def save_plugin_state(self) -> None:
        """Save the plugin list of this load for :meth:`cached_plugins` (the CLI does, after loading)."""
        from ..base import state

        with self._lock:
            if not self._loaded or self._closed:
                return
            plugins = [p.to_dict() for p in self.plugins]
            if any(r.kind == "mcp-server" for r in self._records.values()):
                # A server's health is not a file one can fingerprint: kept for the counts, never current.
                state.save(self.home, state.NEVER_CURRENT, plugins)
                return
            merged, refused = self.discover()
            state.save(self.home, self._fingerprint(merged, refused), plugins)

    def cached_plugins(self) -> list[PluginInfo] | None:
        """The plugin list saved by :meth:`save_plugin_state`, if nothing it depends on changed since.

        Reads manifests but imports no plugin code; ``None`` when there is no
        saved list or something changed (then call :meth:`load`).
        """
        from ..base import state

        merged, refused = self.discover()
        saved = state.load(self.home, self._fingerprint(merged, refused))
        if saved is None:
            return None
        try:
            return [PluginInfo(**record) for record in saved]
        except TypeError:  # saved by another version
            return None

    def listing(
        self, discovered: tuple[dict[str, Candidate], list[Candidate]] | None = None
    ) -> list[tuple[PluginInfo, str]]:
        """What :attr:`plugins` would be after a load, without importing any plugin code.

        Each plugin comes with where its state and counts come from: ``"current"`` (the list saved
        by the last load still holds, or the plugin would not be imported: disabled, not enabled,
        missing variables, a broken manifest), ``"last load"`` (from the last load's saved list;
        something changed since), or ``"unknown"`` (never loaded here: its tools and hooks are not
        known).  The kernel's own plugins that only a load makes (shell hooks, MCP servers) are
        listed from the last load, when there was one.  ``discovered`` is what :meth:`discover`
        returned, for a caller that needs the candidates too (discovery is then not done twice).
        """
        from ..base import state

        if not self._loaded:  # required variables set in <home>/.env count, as they do for load()
            self.environ.dotenv = read_dotenv(self.home)
        merged, refused = discovered if discovered is not None else self.discover()
        current = self._fingerprint(merged, refused)
        fingerprint, saved = state.last(self.home)
        if fingerprint == current:
            try:
                return [(PluginInfo(**record), "current") for record in saved]
            except TypeError:  # saved by another version
                saved = []
        previous: dict[str, dict[str, Any]] = {}
        for saved_record in saved:
            previous.setdefault(saved_record["name"], saved_record)
        choice = self.plugin_choice()
        rows: list[tuple[PluginInfo, str]] = []
        for cand in [*(merged[key] for key in sorted(merged, key=plugin_order)), *refused]:
            record = _Record.from_candidate(cand)
            if record.error is None and cand in refused:
                record.error = "refused"
            if record.error is None:
                record.error = self._loader.skip_reason(record, choice)[0]
            old = previous.pop(record.name, None)
            if record.error is not None:
                rows.append((record.info(), "current"))
            elif record.is_model_provider:
                record.enabled = record.deferred = True
                rows.append((record.info(), "current"))
            elif old is not None and (last := info_from_last_load(old, record)) is not None:
                rows.append((last, "last load"))
            else:
                rows.append((record.info(), "unknown"))
        for old in previous.values():
            if old.get("source") not in SOURCE_RANK:  # the kernel's own, made by a load
                with contextlib.suppress(TypeError):
                    rows.append((PluginInfo(**old), "last load"))
        return rows

    def discover(self) -> tuple[dict[str, Candidate], list[Candidate]]:
        """The winning candidate of each key, and the refused ones; reads manifests, imports nothing."""
        from .sources.discovery import merge_sources

        return merge_sources(self._scan_sources(), self.log)

    def _scan_sources(self) -> list[list[Candidate]]:
        """Every plugin candidate of every source, source by source (bundled, user, project, entry points)."""
        from .sources.discovery import bundled_root, scan_entry_points, scan_root

        cache = self._manifests
        if self.write_caches:
            with contextlib.suppress(OSError):
                cache.path.parent.mkdir(parents=True, exist_ok=True)
        groups = [
            scan_root(bundled_root(), "bundled", self.log, cache),
            scan_root(self.home / "plugins", "user", self.log, cache),
        ]
        if truthy(os.environ.get("HERMES_ENABLE_PROJECT_PLUGINS")):
            groups.append(scan_root(Path.cwd() / ".hermes" / "plugins", "project", self.log, cache))
        else:
            self.log.debug("source_skipped", source="project", reason="HERMES_ENABLE_PROJECT_PLUGINS not set")
        groups.append(scan_entry_points(self.log, cache=self.home / ENTRY_POINTS_CACHE))
        cache.save()
        if cache.path.parent.is_dir():
            while self._remember:
                self._remember.pop()()
        return groups

    def _fingerprint(self, merged: dict[str, Candidate], refused: list[Candidate]) -> str:
        """What the outcome of a load depends on, for :mod:`kernel.state`."""
        from ..base import state

        env_names = {v.name for c in merged.values() if c.manifest for v in c.manifest.requires_env}
        dotenv = read_dotenv(self.home)
        present = sorted(n for n in env_names if self.environ.get(n) or dotenv.get(n))
        candidates = [
            (c.key, c.source, str(c.path), c.error, c.version, str(c.entry_point and c.entry_point.value))
            for c in [*merged.values(), *refused]
        ]
        trees = [state.tree_signature(c.path) for c in [*merged.values(), *refused]]
        # What makes a service join at load() (a folder of the home, a variable) changes the outcome too.
        trees.extend(state.tree_signature(self.home / path) for path in self._services.paths())
        service_env = [os.environ.get(n) or dotenv.get(n) for n in self._services.env_names()]
        for_run = [self.environ.get(n) for n in RUN_CHOICE_VARIABLES]
        # Whether Hermes has used the home (a SOUL.md written since) changes which plugins load.
        for_run.append(hermes_marker(self.home, self.config))
        return state.fingerprint([__version__, self.config, present, candidates, trees, service_env, for_run])

    def shutdown(self) -> None:
        """Unregister everything and release the kernel's resources; idempotent.

        Variables that :meth:`load` exported from ``<home>/.env`` are removed
        again (unless something changed them meanwhile), or passed to another
        live kernel whose ``.env`` sets them (see :mod:`kernel.environ`).
        """
        from .loader import release_namespace

        with self._lock:
            if self._closed:
                return
            self._registry.closed = True
            while self._closers:
                name, close = self._closers.pop()
                try:
                    close()
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    self.log.warning("surface_close_failed", surface=name, error=error)
            self._services.hook.service_shutdown(kernel=self)
            # Each hook's chain is compiled once, not once per plugin dropped; the plugins' modules leave
            # sys.modules with the namespace (release_namespace), in one pass.
            self._loader.evict_each = False
            with self._hooks.batch():
                for name in list(self._records):
                    self._registry.drop(name)
            environ.release(self._env_token)
            self._hooks.close()
            if self._made_logging is not None:
                self._made_logging.close()
            release_namespace(self._namespace)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

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
            self._registry.refuse_if_closed(name)
            if self.pm.is_blocked(name):
                raise PluginError(f"cannot register plugin '{name}': it is blocked (k.pm.set_blocked)")
            if name in self._records:
                raise PluginError(f"a plugin named '{name}' is already registered; choose another name")
            file = getattr(obj, "__file__", None)
            record = _Record(name=name, source="runtime", path=Path(file).parent if file else None)
            self._registry.add(record)
            error = self._loader.activate(record, lambda: obj)
            if error is not None:
                self._registry.discard(name)
                raise PluginError(f"plugin '{name}': {error}")
            self._loader.added(name)
            return record.info()

    def unregister(self, name: str) -> None:
        """Remove plugin ``name`` with everything it registered."""
        with self._lock:
            if name not in self._records:
                raise KeyError(f"no plugin named '{name}'")
            self._registry.drop(name)

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
        fast_get, failed, pieces, slow, native = (
            self._fast.get,
            self._hooks.failed,
            self._context_pieces,
            self._slow_context,
            self._hooks.native_results,
        )
        strip, join = str.strip, "\n\n".join
        mark, unmark = RUNNING.set, RUNNING.reset

        def pre_llm_context(**kwargs: Any) -> str:
            chain = fast_get("pre_llm_call")
            if chain is None:
                return slow(kwargs)
            token = mark(self)
            try:
                if chain.native is not None:
                    results = native(chain, kwargs, True)  # pluggy-native impls, called as pluggy calls them
                else:
                    kwargs.setdefault(OBSERVER_KEY, OBSERVER_SCHEMA_VERSION)
                    results = []
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
            finally:
                unmark(token)

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
        return self._merge_pairs(self._hook_results("pre_llm_call", kwargs))

    async def apre_llm_context(self, **kwargs: Any) -> str:
        """As :meth:`pre_llm_context`, awaiting async callbacks on the caller's loop."""
        request = Request(pairs=[])
        outcome = await self._hooks.ainvoke("pre_llm_call", kwargs, request)
        return self._merge_pairs(self._hooks.results_of(outcome, request))

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

    def has_async_callbacks(self, hook_name: str) -> bool:
        """Whether a live callback of ``hook_name`` is a coroutine function: an async host awaits such a
        hook on its own loop (:meth:`ainvoke_hook`) and may call any other from a worker thread."""
        chain = self._hooks.chains.get(hook_name)
        return chain is not None and any(cb.is_async for cb in chain.callbacks)

    def has_callbacks(self, hook_name: str) -> bool:
        """Whether calling ``hook_name`` now would reach anything (a live callback, a wrapper, a monitor,
        a historic hook's record): a caller may skip building costly arguments (copies) for a hook
        nobody hears."""
        hooks = self._hooks
        chain = hooks.chains.get(hook_name)
        return chain is not None and bool(
            chain.callbacks or chain.wrappers or hooks.monitors or chain.history is not None
        )

    def hook_callbacks(self, hook_name: str) -> list[Callback]:
        """The callbacks of ``hook_name`` (disabled ones too), in call order."""
        return self._hooks.callbacks(hook_name)

    def _hook_results(self, hook_name: str, kwargs: dict[str, Any]) -> list[tuple[Callback, Any]]:
        """``(callback, result)`` for each non-None result of the whole (wrapped) call, for a caller
        that reads the results itself (see :meth:`HookEngine.results_of`)."""
        request = Request(pairs=[])
        outcome = self._hooks.invoke(hook_name, kwargs, request)
        return self._hooks.results_of(outcome, request)

    def read_hook(self, hook_name: str, reader: Callable[[Any], Any], /, **kwargs: Any) -> list[Any]:
        """Fire ``hook_name`` and return ``reader(result)`` of each non-None result, in plugin order.

        For a host that reads the answers itself (a decision, a replacement): a
        result whose reading raises — a hostile ``__eq__`` or ``__str__``, an
        answer of the wrong shape the reader refuses — is left out and disables
        the callback that gave it, as a raising hook is disabled.
        """
        return self._hooks.read(self._hook_results(hook_name, kwargs), reader)

    async def aread_hook(self, hook_name: str, reader: Callable[[Any], Any], /, **kwargs: Any) -> list[Any]:
        """As :meth:`read_hook`, awaiting async callbacks on the caller's loop (see :meth:`ainvoke_hook`)."""
        request = Request(pairs=[])
        outcome = await self._hooks.ainvoke(hook_name, kwargs, request)
        return self._hooks.read(self._hooks.results_of(outcome, request), reader)

    def first_text(self, hook_name: str, /, *, allow_empty: bool = False, **kwargs: Any) -> str | None:
        """The first string answer of a ``transform_*`` hook: the replacement; ``None`` when none.

        Answers that are not strings are passed over; an empty string counts
        only with ``allow_empty`` (``transform_tool_result`` may empty a result,
        ``transform_llm_output`` may not).
        """
        return _first(self.read_hook(hook_name, plain_text, **kwargs), allow_empty)

    async def afirst_text(self, hook_name: str, /, *, allow_empty: bool = False, **kwargs: Any) -> str | None:
        """As :meth:`first_text`, awaiting async callbacks on the caller's loop."""
        return _first(await self.aread_hook(hook_name, plain_text, **kwargs), allow_empty)

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

    def _config_problem(self, problem: str) -> None:
        self.problems.append(problem)
        self.log.warning("config_problem", detail=problem)

    def plugin_choice(self) -> Choice:
        """Which plugins the configuration lets load: ``plugins.disabled``, ``plugins.enabled`` (Hermes'
        allow-list) when config.yaml has it, the plugins switched off for this run, and whether Hermes
        Agent has used the home (then, without ``plugins.enabled``, only bundled plugins run).

        A name written as a string (``disabled: calculator``) counts as a one-item list; what is
        wrong with either is reported once (see :func:`~kernel.base.config.plugin_names`).
        """
        choice = Choice(disabled=set(), enabled=None)
        for key in ("disabled", "enabled"):
            value = section(self.config, "plugins", key)
            if value is None:
                continue
            names, problem = plugin_names(value, key, str(self.home / "config.yaml"))
            if problem is not None and problem not in self.problems:
                self._config_problem(problem)
            if names is not None:
                setattr(choice, key, set(names))
        choice.for_run, choice.none = run_choice(self.environ)
        if choice.enabled is None:
            choice.opt_in = hermes_marker(self.home, self.config)
        return choice

    # -- internals: failures and gates -----------------------------------------

    def _on_hook_failure(self, cb: Callback, exc: BaseException) -> None:
        fields = {"plugin": cb.plugin, "hook": cb.hook, "error": cb.error or describe(exc)}
        action = "callback disabled for the life of this kernel"
        with contained() as logging_it:
            self.log.warning(
                "hook_failed",
                **fields,
                callback=cb.label,
                action=action,
                exc_info=exc if self.debug else None,
            )
        if logging_it.failed:  # an exception that even the traceback renderer cannot print
            self.log.warning("hook_failed", **fields, action=action)


def _first(texts: list[str | None], allow_empty: bool) -> str | None:
    for text in texts:
        if text or (allow_empty and text is not None):
            return text
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


_LOGGING_LOCK = threading.Lock()


class _DeferredLog:
    """A kernel's logger before its loggers and handlers exist (``import logging`` and structlog
    cost a CLI command that logs nothing, such as ``plugins list`` from the saved list).

    A DEBUG or INFO record is dropped while nobody could see it (``unheard()``): the kernel's own
    handlers take neither without ``HERMES_PLUGINS_DEBUG``, and a host's could only exist once
    something imported ``logging``.  Anything else goes to ``real()``, the kernel's logger, made then.
    """

    __slots__ = ("_real", "_unheard")

    def __init__(self, real: Callable[[], LazyLogger], unheard: Callable[[], bool]) -> None:
        self._real, self._unheard = real, unheard

    def debug(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return None if self._unheard() else self._real().debug(event, *args, **kw)

    def info(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return None if self._unheard() else self._real().info(event, *args, **kw)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._real(), name)
