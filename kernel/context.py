"""``PluginContext``: the ``ctx`` a Hermes-style plugin's ``register(ctx)`` receives."""

from __future__ import annotations

import contextlib
import copy
import difflib
import functools
import logging
import types
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .commands import CLI_BUILTINS, CliCommand, CommandRefused, normalize_command_name
from .config import profile_name
from .hooks import NORMAL
from .llm import PluginLlm
from .manifest import Manifest
from .plugin_manager import PluginError
from .settings import get_setting, write_setting
from .tools import ToolConflict

if TYPE_CHECKING:
    from .kernel import Kernel, _Record


def _live(method: Callable[..., Any]) -> Callable[..., Any]:
    """Refuse ``method`` once the plugin is no longer registered (unloaded, blocked, rolled back,
    or its kernel shut down): a thread it left behind cannot add anything any more."""

    @functools.wraps(method)
    def guarded(self: PluginContext, *args: Any, **kwargs: Any) -> Any:
        kernel, record = self._kernel, self._record
        if kernel._closed or record.obj is None or kernel._records.get(record.name) is not record:
            raise PluginError(
                f"plugin '{record.name}' is not registered with the kernel any more: "
                f"{method.__name__} refused"
            )
        return method(self, *args, **kwargs)

    return guarded


class PluginContext:
    """What one plugin may do to the kernel while it registers.

    Everything registered through a context is recorded in a ledger, so that a
    ``register(ctx)`` that fails half-way is rolled back completely.
    """

    def __init__(self, kernel: Kernel, record: _Record) -> None:
        self._kernel = kernel
        self._record = record
        self._undo: list[Callable[[], None]] = []
        self._llm: PluginLlm | None = None

    # -- identity ------------------------------------------------------------

    @property
    def plugin_id(self) -> str:
        """The plugin's key: the manifest name, ``<category>/<dir>``, or the entry-point name."""
        return self._record.name

    @property
    def name(self) -> str:
        return self._record.name

    @property
    def manifest(self) -> Manifest | None:
        """The parsed manifest (``None`` for entry-point plugins)."""
        return self._record.manifest

    @property
    def home(self) -> Path:
        """The kernel's home directory (``HERMES_HOME``)."""
        return self._kernel.home

    @property
    def config(self) -> Mapping[str, Any]:
        """A read-only snapshot of the kernel's configuration."""
        return types.MappingProxyType(copy.deepcopy(self._kernel.config))

    @property
    def logger(self) -> logging.Logger:
        """A stdlib logger for the plugin, rendered like the kernel's own lines."""
        return logging.getLogger(f"{self._kernel._namespace}.{self._record.slug}")

    @property
    def llm(self) -> PluginLlm:
        """The user's model for this plugin's own calls (see :mod:`kernel.llm`)."""
        if self._llm is None:
            self._llm = PluginLlm(self._kernel, self._record.name)
        return self._llm

    # -- tools and hooks -------------------------------------------------------

    @_live
    def register_tool(
        self,
        name: str,
        toolset: str,
        schema: dict[str, Any],
        handler: Callable[..., Any],
        check_fn: Callable[[], Any] | None = None,
        requires_env: Iterable[str] | None = None,
        is_async: bool = False,
        description: str = "",
        emoji: str = "",
    ) -> None:
        """Add a tool.  A bad name, schema or handler raises ``ToolRegistrationError``.

        A name another plugin already owns is refused with a warning (recorded
        on this plugin); the rest of the plugin still loads.
        """
        record = self._record
        try:
            tool, warnings = self._kernel.tools.register(
                name,
                toolset,
                schema,
                handler,
                plugin=record.name,
                check_fn=check_fn,
                requires_env=requires_env,
                is_async=is_async,
                description=description,
                emoji=emoji,
            )
        except ToolConflict as exc:
            record.warnings.append(str(exc))
            self._kernel.log.warning("tool_conflict", tool=name, plugin=record.name, owner=exc.owner)
            return
        for warning in warnings:
            record.warnings.append(warning)
            self._kernel.log.warning("tool_schema", plugin=record.name, detail=warning)
        record.tools.append(tool.name)
        self._undo.append(lambda: self._kernel.tools.unregister(tool.name))
        self._undo.append(lambda: record.tools.remove(tool.name))

    @_live
    def register_hook(self, name: str, callback: Callable[..., Any]) -> None:
        """Call ``callback`` with keyword arguments whenever hook ``name`` fires.

        A name the kernel does not define is kept with a warning: it fires if
        the host ever invokes it.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"register_hook: the hook name must be a non-empty string, not {name!r}")
        if not callable(callback):
            raise TypeError(f"register_hook({name!r}): the callback must be callable, not {callback!r}")
        kernel, record = self._kernel, self._record
        caller = getattr(kernel.pm.hook, name, None)
        if caller is None or not caller.has_spec():
            close = difflib.get_close_matches(name, kernel.hook_names, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            warning = (
                f"hook '{name}' is not defined by the kernel{hint} (kept; fires only if the host calls it)"
            )
            record.warnings.append(warning)
            kernel.log.warning(
                "unknown_hook", plugin=record.name, hook=name, hint=close[0] if close else None
            )
        self._add_hook(name, callback)

    @_live
    def add_hookspecs(self, module_or_class: Any) -> None:
        """Declare hooks of this plugin's own: functions marked with ``kernel.hookspec``.

        As pytest's ``pytest_addhooks``: afterwards ``ctx.register_hook`` (and
        ``@hookimpl`` functions of any plugin) implement them, and the host
        calls them with ``k.invoke_hook``, ``k.ainvoke_hook`` or
        ``k.pm.hook.<name>``.  ``ValueError`` when it declares none.
        """
        # An impl of another plugin that does not fit is disabled, not this plugin's failure.
        self._kernel.pm.add_hookspecs_for(module_or_class, strict=False)

    @_live
    def _add_hook(self, name: str, callback: Callable[..., Any], tier: int = NORMAL) -> None:
        kernel, record = self._kernel, self._record
        cb = kernel._hooks.add(record.obj, record.name, name, callback, tier=tier)
        record.callbacks.append(cb)
        self._undo.append(lambda: kernel._hooks.remove(cb))
        self._undo.append(lambda: record.callbacks.remove(cb))

    @_live
    def dispatch_tool(
        self,
        tool_name: str,
        args: dict[str, Any] | str | None = None,
        *,
        parent_agent: Any = None,
        **context: Any,
    ) -> str:
        """Run another tool through the same pipeline as a model's call; always a JSON string.

        The session and task of the call in progress (or of ``parent_agent``,
        read from its ``session_id`` / ``task_id`` attributes) are passed on, and
        the hooks see ``caller_plugin`` set to this plugin.
        """
        if parent_agent is not None:
            for key in ("session_id", "task_id"):
                value = getattr(parent_agent, key, None)
                if value is not None:
                    context.setdefault(key, value)
        context["caller_plugin"] = self._record.name
        return self._kernel.tools.dispatch(tool_name, args, **context)

    # -- commands ----------------------------------------------------------------

    @_live
    def register_command(
        self,
        name: str,
        handler: Callable[[str], Any],
        description: str = "",
        args_hint: str = "",
        argument_mode: str | None = None,
        **extra: Any,
    ) -> None:
        """Add the slash command ``/name``; ``handler(raw_args) -> str | None`` (may be async).

        A name taken by a built-in or by another plugin is refused with a
        warning recorded on this plugin; the rest of the plugin still loads.
        """
        kernel, record = self._kernel, self._record
        description = description or str(extra.pop("help", "") or "")
        if extra:
            record.warnings.append(
                f"register_command({name!r}): ignored keyword(s) {', '.join(sorted(extra))}"
            )
        try:
            command = kernel.commands.register(
                name, handler, plugin=record.name, description=description, args_hint=args_hint
            )
        except CommandRefused as exc:
            record.warnings.append(str(exc))
            kernel.log.warning("command_refused", plugin=record.name, command=name, reason=str(exc))
            return
        record.commands.append(command.name)
        self._undo.append(lambda: kernel.commands.unregister(command.name))
        self._undo.append(lambda: record.commands.remove(command.name))

    @_live
    def register_cli_command(
        self,
        name: str,
        help: str,
        setup_fn: Callable[[Any], Any],
        handler_fn: Callable[[Any], Any] | None = None,
        description: str = "",
    ) -> None:
        """Add ``hermes-kernel <name>``: ``setup_fn(subparser)`` builds it, ``handler_fn(args)`` runs it.

        A name of the command line's own, or one another plugin took, is
        refused with a warning recorded on this plugin.
        """
        kernel, record = self._kernel, self._record
        if not callable(setup_fn) or (handler_fn is not None and not callable(handler_fn)):
            raise TypeError(f"register_cli_command({name!r}): setup_fn and handler_fn must be callable")
        normalized = normalize_command_name(name)
        taken = kernel.cli_commands.get(normalized)
        if not normalized or normalized in CLI_BUILTINS or taken is not None:
            owner = "the command line itself" if taken is None else f"plugin '{taken.plugin}'"
            warning = f"CLI command '{normalized or name}' of plugin '{record.name}' refused: {owner} has it"
            record.warnings.append(warning)
            kernel.log.warning("cli_command_refused", plugin=record.name, command=name)
            return
        kernel.cli_commands[normalized] = CliCommand(
            normalized, str(help or ""), setup_fn, handler_fn, record.name, str(description or "")
        )
        record.cli_commands.append(normalized)
        self._undo.append(lambda: kernel.cli_commands.pop(normalized, None))
        self._undo.append(lambda: record.cli_commands.remove(normalized))

    # -- skills ------------------------------------------------------------------

    @_live
    def register_skill(
        self, name: str, path: str | Path, description: str = "", frontmatter: Any = None
    ) -> None:
        """Offer a read-only skill, addressed as ``<plugin>:<name>``.

        ``path`` is a ``SKILL.md`` file (or a directory holding one) inside the
        plugin's directory, or an absolute path to a ``SKILL.md`` elsewhere
        (noted as a warning).  A bad name raises ``ValueError``, a missing file
        ``FileNotFoundError``, a relative path leaving the plugin ``ValueError``.
        """
        kernel, record = self._kernel, self._record
        skill = kernel.skills.register(record.name, name, path, description, root=record.path)
        if record.path is not None and not skill.path.is_relative_to(record.path.resolve()):
            record.warnings.append(f"skill '{name}' is read from outside the plugin directory: {skill.path}")
        record.skills.append(skill.name)
        self._undo.append(lambda: kernel.skills.unregister(skill.qualified_name))
        self._undo.append(lambda: record.skills.remove(skill.name))

    # -- provider slots ------------------------------------------------------------

    @_live
    def register_memory_provider(self, provider: Any) -> None:
        """Offer a :class:`~kernel.providers.MemoryProvider`; ``memory.provider`` selects one."""
        self._offer("memory", provider)

    @_live
    def register_context_engine(self, engine: Any) -> None:
        """Offer a :class:`~kernel.providers.ContextEngine`; ``context.engine`` selects one."""
        self._offer("context_engine", engine)

    @_live
    def register_image_gen_provider(self, provider: Any) -> None:
        """Offer an :class:`~kernel.providers.ImageGenProvider`; ``image_gen.provider`` selects one."""
        self._offer("image_gen", provider)

    @_live
    def register_model_provider(self, profile: Any) -> None:
        """Offer a :class:`~kernel.providers.ProviderProfile` (like ``register_provider``)."""
        self._offer("model_provider", profile)

    @_live
    def register_web_search_provider(self, provider: Any) -> None:
        """Offer a :class:`~kernel.providers.WebSearchProvider`; ``web_search.provider`` selects one."""
        self._offer("web_search", provider)

    @_live
    def register_video_gen_provider(self, provider: Any) -> None:
        """Offer a :class:`~kernel.providers.VideoGenProvider`; ``video_gen.provider`` selects one."""
        self._offer("video_gen", provider)

    @_live
    def register_tts_provider(self, provider: Any) -> None:
        """Offer a text-to-speech provider; ``tts.provider`` may name it (command providers win)."""
        self._offer("tts", provider)

    @_live
    def register_transcription_provider(self, provider: Any) -> None:
        """Offer a speech-to-text provider; ``stt.provider`` may name it (command providers win)."""
        self._offer("transcription", provider)

    def _offer(self, slot: str, provider: Any) -> None:
        kernel, record = self._kernel, self._record
        kernel._offer_provider(slot, provider, record.name)
        self._undo.append(lambda: kernel.slots.remove_plugin(record.name))
        self._undo.append(lambda: kernel.providers.catalog.remove_plugin(record.name))

    # -- platforms ---------------------------------------------------------------

    @_live
    def register_platform(
        self,
        name: str,
        label: str,
        adapter_factory: Callable[[Any], Any],
        check_fn: Callable[[], Any] | None = None,
        required_env: Iterable[str] | None = None,
        env_enablement_fn: Callable[[], Any] | None = None,
        cron_deliver_env_var: str | None = None,
        emoji: str = "",
        platform_hint: str = "",
        **extra: Any,
    ) -> None:
        """Offer a messaging platform to the gateway (see ``docs/gateway.md``).

        ``adapter_factory(config)`` builds the adapter from the platform's
        ``PlatformConfig``.  Keywords the kernel does not know are kept in the
        platform's ``extra``.  A taken name raises ``ValueError``.
        """
        from .gateway.registry import PlatformSpec

        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"register_platform: the name must be a non-empty string, not {name!r}")
        if not callable(adapter_factory):
            raise TypeError(f"register_platform({name!r}): adapter_factory must be callable")
        kernel, record = self._kernel, self._record
        spec = PlatformSpec(
            name=name.strip().lower(),
            label=str(label or name),
            adapter_factory=adapter_factory,
            check_fn=check_fn,
            plugin=record.name,
            required_env=tuple(required_env or ()),
            env_enablement_fn=env_enablement_fn,
            cron_deliver_env_var=cron_deliver_env_var,
            emoji=emoji,
            platform_hint=platform_hint,
            extra=dict(extra),
        )
        kernel.platforms.add(spec)
        record.platforms.append(spec.name)
        self._undo.append(lambda: kernel.platforms.remove(spec.name))
        self._undo.append(lambda: record.platforms.remove(spec.name))

    # -- middleware and messages ------------------------------------------------

    @_live
    def register_middleware(self, kind: str, fn: Callable[..., Any]) -> None:
        """Wrap an operation of the kernel: ``tool_execution``, ``llm_request`` or ``llm_execution``.

        See :mod:`kernel.middleware` for what each kind receives and returns.
        """
        kernel, record = self._kernel, self._record
        item = kernel.middleware.add(record.name, kind, fn)
        record.middleware.append(kind)
        self._undo.append(lambda: kernel.middleware.remove(item))
        self._undo.append(lambda: record.middleware.remove(kind))

    @_live
    def inject_message(self, content: str, role: str = "user", *, session_id: str | None = None) -> bool:
        """Queue a message for the conversation: the next model call of a session sees it.

        The session is ``session_id``, else the one whose turn or tool call is in
        progress.  Returns ``True`` when it was queued (``role`` is ``user``,
        ``assistant`` or ``system``, ``content`` a non-empty string, and it is
        clear which conversation it belongs to).
        """
        return self._kernel.inject_message(
            content, role=role, plugin=self._record.name, session_id=session_id
        )

    @property
    def profile_name(self) -> str:
        """The Hermes profile of the kernel's home: ``default`` (``~/.hermes``), ``<name>``
        (``~/.hermes/profiles/<name>``), else ``custom``."""
        return profile_name(self._kernel.home)

    # -- settings ----------------------------------------------------------------

    def get_config(self, key: str, default: Any = None) -> Any:
        """``plugins.entries.<plugin_id>.settings.<key>`` (dotted), or ``default``."""
        return copy.deepcopy(get_setting(self._kernel.config, self.plugin_id, key, default))

    @_live
    def set_config(self, key: str, value: Any) -> None:
        """Store ``value`` at this plugin's ``settings.<key>`` in ``<home>/config.yaml``, atomically.

        A key that is not plain names joined by dots raises ``ValueError``: a
        plugin can change only its own settings.
        """
        write_setting(self._kernel.home, self._kernel.config, self.plugin_id, key, copy.deepcopy(value))

    # -- ledger ------------------------------------------------------------------

    def _rollback(self) -> None:
        while self._undo:
            undo = self._undo.pop()
            with contextlib.suppress(ValueError):  # already gone
                undo()
