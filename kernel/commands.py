"""Slash commands (``/name args``) inside a session: ``k.commands``."""

from __future__ import annotations

import difflib
import inspect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .core.api import Contained, contained, kernel_of, on_rollback, record_of
from .core.context import ServiceContext, live
from .core.services import serviceimpl

if TYPE_CHECKING:
    from .core.kernel import Kernel
    from .core.records import _Record

# Commands of the host.  The kernel answers the first four itself; the others
# belong to the chat session that embeds it (``k.commands.set_host_handler``).
BUILTIN_COMMANDS: dict[str, str] = {
    "help": "List the commands",
    "plugins": "List the plugins and their state",
    "tools": "List the tools the model can use",
    "skills": "List the skills",
    "new": "Start a new session",
    "reset": "Reset the current session",
    "model": "Show or change the model",
    "quit": "Leave the session",
    "exit": "Leave the session",
    "clear": "Clear the screen",
    "history": "Show the conversation so far",
    "config": "Show the configuration",
    "status": "Show the session status",
    "compress": "Compress the conversation context",
    "stop": "Stop the running turn",
}

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


class CommandRefused(ValueError):
    """A slash command that cannot be registered (bad or taken name)."""


@dataclass(frozen=True)
class Command:
    """One slash command: a built-in (``plugin`` is ``None``) or a plugin's."""

    name: str
    description: str
    handler: Callable[[str], Any] | None
    plugin: str | None = None
    args_hint: str = ""


def normalize_command_name(name: str) -> str:
    """Lower case, leading ``/`` dropped, spaces to ``-``: ``" /My Cmd"`` is ``my-cmd``."""
    return "-".join(str(name).strip().lstrip("/").strip().lower().split())


class CommandRegistry:
    """Built-in and plugin slash commands, and the one way to run them."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._commands: dict[str, Command] = {}
        self._host: dict[str, Callable[[str], Any]] = {}
        self._lock = threading.Lock()
        answers = {"help": self._help, "plugins": self._plugins, "tools": self._tools, "skills": self._skills}
        for name, description in BUILTIN_COMMANDS.items():
            self._commands[name] = Command(name, description, answers.get(name))

    def register(
        self,
        name: str,
        handler: Callable[[str], Any],
        *,
        plugin: str,
        description: str = "",
        args_hint: str = "",
    ) -> Command:
        """Add ``/name`` for ``plugin``; raise :class:`CommandRefused` naming the clash."""
        normalized = normalize_command_name(name)
        if not normalized or not _NAME.match(normalized):
            raise CommandRefused(
                f"plugin '{plugin}': command name {name!r} is not usable "
                "(use letters, digits, '-', '_' or '.')"
            )
        if not callable(handler):
            raise CommandRefused(f"plugin '{plugin}': the handler of /{normalized} is not callable")
        with self._lock:
            taken = self._commands.get(normalized)
            if taken is not None:
                owner = "a built-in command" if taken.plugin is None else f"plugin '{taken.plugin}'"
                raise CommandRefused(
                    f"plugin '{plugin}' tried to register /{normalized}, which {owner} already has; refused"
                )
            command = Command(
                name=normalized,
                description=str(description or "Plugin command"),
                handler=handler,
                plugin=plugin,
                args_hint=str(args_hint or ""),
            )
            self._commands[normalized] = command
        return command

    def unregister(self, name: str) -> None:
        with self._lock:
            command = self._commands.get(name)
            if command is not None and command.plugin is not None:
                del self._commands[name]

    def set_host_handler(self, name: str, handler: Callable[[str], Any]) -> None:
        """Let the host answer one of its built-in commands (``/new``, ``/quit``, ...)."""
        name = normalize_command_name(name)
        if name not in BUILTIN_COMMANDS:
            raise KeyError(f"/{name} is not a built-in command")
        self._host[name] = handler

    def get(self, name: str) -> Command | None:
        return self._commands.get(normalize_command_name(name))

    def all(self) -> list[Command]:
        """Every command: built-ins first, then plugin commands by name."""
        return sorted(self._commands.values(), key=lambda c: (c.plugin is not None, c.name))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalize_command_name(name) in self._commands

    # -- running -------------------------------------------------------------

    def run(self, text: str, **context: Any) -> str | None:
        """Run ``"/name args"``; return the reply (``None`` when the command has none).

        Never raises for a plugin's failure: a handler that raises gives a
        one-line error naming the plugin.  ``context`` (``session_id``, ...)
        is what tools dispatched from the handler inherit.
        """
        command, args, reply = self._resolve(text)
        if command is None:
            return reply
        self._kernel.events.emit(f"command:{command.name}", _event(command, args, context))
        handler = self._handler(command)
        if handler is None:
            return f"/{command.name} is handled by the chat session; it is not available here."
        with self._kernel.tools.call_context(**context), self._contained(command) as call:
            result = handler(args)
            if inspect.isawaitable(result):
                result = self._kernel.host.run_sync(result)
        if call.failed:
            return self._failed(command, call.error)
        return None if result is None else str(result)

    async def arun(self, text: str, **context: Any) -> str | None:
        """As :meth:`run`, awaiting an async handler on the caller's loop."""
        command, args, reply = self._resolve(text)
        if command is None:
            return reply
        await self._kernel.events.aemit(f"command:{command.name}", _event(command, args, context))
        handler = self._handler(command)
        if handler is None:
            return f"/{command.name} is handled by the chat session; it is not available here."
        with self._kernel.tools.call_context(**context), self._contained(command) as call:
            result = handler(args)
            if inspect.isawaitable(result):
                result = await result
        if call.failed:
            return self._failed(command, call.error)
        return None if result is None else str(result)

    def _resolve(self, text: str) -> tuple[Command | None, str, str]:
        text = str(text).strip()
        head, _, args = text.partition(" ")
        name = normalize_command_name(head)
        command = self._commands.get(name)
        if command is not None:
            return command, args.strip(), ""
        close = difflib.get_close_matches(name, list(self._commands), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join('/' + c for c in close)}?" if close else ""
        return None, "", f"Unknown command /{name}.{hint} Type /help to see the commands."

    def _handler(self, command: Command) -> Callable[[str], Any] | None:
        if command.plugin is None and command.name in self._host:
            return self._host[command.name]
        return command.handler

    def _contained(self, command: Command) -> Contained:
        """The handler of ``command`` called: its failure contained and logged."""
        return contained(self._kernel.log, "command_failed", command=command.name, plugin=command.plugin)

    def _failed(self, command: Command, detail: str) -> str:
        owner = f"plugin '{command.plugin}'" if command.plugin else "the host"
        return f"/{command.name} failed ({owner}): {' '.join(detail.split())}"

    # -- built-in answers ------------------------------------------------------

    def _help(self, _args: str) -> str:
        lines = ["Commands:"]
        for command in self.all():
            usage = f"/{command.name}" + (f" {command.args_hint}" if command.args_hint else "")
            owner = f"  [{command.plugin}]" if command.plugin else ""
            lines.append(f"  {usage} — {command.description}{owner}")
        return "\n".join(lines)

    def _plugins(self, _args: str) -> str:
        return format_plugins(self._kernel)

    def _tools(self, _args: str) -> str:
        tools = self._kernel.tools
        rows = [t for t in tools.all() if tools.available(t)[0]]
        if not rows:
            return "No tools available."
        lines = [f"Tools ({len(rows)}):"]
        lines += [f"  {t.name} [{t.plugin}] — {_first_line(t.description)}" for t in rows]
        return "\n".join(lines)

    def _skills(self, _args: str) -> str:
        skills = self._kernel.skills.all()
        if not skills:
            return "No skills."
        lines = [f"Skills ({len(skills)}):"]
        lines += [f"  {s.qualified_name} — {_first_line(s.description)}" for s in skills]
        return "\n".join(lines)


def format_plugins(kernel: Kernel) -> str:
    """The ``/plugins`` answer: one line a plugin, ``✓`` loaded or ``✗`` with the reason."""
    plugins = kernel.plugins
    lines = [f"Plugins ({len(plugins)}):"]
    for p in plugins:
        version = f" v{p.version}" if p.version else ""
        if p.enabled:
            counts = f"{_count(len(p.tools), 'tool')}, {_count(len(p.hooks), 'hook')}"
            lines.append(f"  ✓ {p.name}{version} ({counts})")
        else:
            lines.append(f"  ✗ {p.name}{version} — {p.error or 'not loaded'}")
    return "\n".join(lines)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text and text.strip() else ""


# Names of the ``hermes-kernel`` command line's own commands (and ones later
# releases will take); a plugin cannot register a CLI command under them.
CLI_BUILTINS = frozenset(
    {
        "plugins",
        "tools",
        "demo",
        "chat",
        "run",
        "hooks",
        "logs",
        "doctor",
        "providers",
        "gateway",
        "skills",
        "commands",
        "config",
        "help",
        "version",
        "completion",
        "mcp",
    }
)


@dataclass(frozen=True)
class CliCommand:
    """A ``hermes-kernel <name>`` subcommand offered by a plugin."""

    name: str
    help: str
    setup_fn: Callable[[Any], Any]
    handler_fn: Callable[[Any], Any] | None
    plugin: str
    description: str = ""


def _event(command: Command, args: str, context: dict[str, Any]) -> dict[str, Any]:
    """The context of a ``command:<name>`` event (the shape of Hermes' gateway events)."""
    return {
        "platform": context.get("platform", "cli"),
        "user_id": context.get("user_id"),
        "session_id": context.get("session_id"),
        "command": command.name,
        "args": args,
        "plugin": command.plugin,
    }


# -- the commands service (see kernel.core.services) ------------------------------


class Context(ServiceContext):
    """The ``ctx.register_command`` / ``ctx.register_cli_command`` members of this service."""

    @live
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
        kernel, record = kernel_of(self), record_of(self)
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
        on_rollback(self, lambda: kernel.commands.unregister(command.name))
        on_rollback(self, lambda: record.commands.remove(command.name))

    @live
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
        kernel, record = kernel_of(self), record_of(self)
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
        on_rollback(self, lambda: kernel.cli_commands.pop(normalized, None))
        on_rollback(self, lambda: record.cli_commands.remove(normalized))


@serviceimpl
def service_attach(kernel: Kernel) -> None:
    kernel.host.provide(commands=CommandRegistry(kernel), cli_commands={})


@serviceimpl
def service_plugin_unloaded(kernel: Kernel, record: _Record) -> None:
    for command in record.commands:
        kernel.commands.unregister(command)
    for cli_command in record.cli_commands:
        kernel.cli_commands.pop(cli_command, None)
