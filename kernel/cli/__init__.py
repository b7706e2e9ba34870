# PYTHON_ARGCOMPLETE_OK  (argcomplete's marker: this console script answers shell completion)
"""The ``hermes-kernel`` command line: a thin client of the public API."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .. import Kernel
from ..base.safe_yaml import DataRefused, load_json
from ..core.records import DISABLE_VARIABLE, NO_PLUGINS_VARIABLE, matches_for_run, run_choice
from . import completion, output
from . import plugins as plugins_group
from .common import HookFailures, Parser, discover, loaded_kernel
from .output import EscapingStream
from .plugins import format_plugin_table as format_plugin_table

if TYPE_CHECKING:
    from ..commands import CliCommand

HELP_OPTIONS = ("-h", "--help")


def main(argv: Sequence[str] | None = None) -> int:
    output.setup_streams()
    from_environment = _names_given(os.environ.get(DISABLE_VARIABLE))
    argv = _take_run_options(list(sys.argv[1:] if argv is None else argv), set(BUILTIN_COMMANDS))
    kernel: Kernel | None = None
    argv, no_color = _take_no_color(argv)
    output.configure(no_color=no_color)
    options = argv[: argv.index("--")] if "--" in argv else argv
    first = next((a for a in options if not a.startswith("-")), None)
    completing = completion.requested()
    # A command of the CLI's own is parsed by its part of the parser only (and only its module is
    # imported); help, completion and plugins' commands need the whole of it.
    parser, commands = _parser(first if first in BUILTIN_COMMANDS and not completing else None)
    # Only help, the version or completions: nothing is written into the home.
    only_prints = completing or first is None or any(a in HELP_OPTIONS for a in options)
    # The command the line names: a plugin's (not one of the CLI's own) needs the plugins loaded; no
    # command at all (--help, a bare `hermes-kernel`, completing the command's name) lists theirs from
    # the last load, importing no plugin code.
    named = completion.typed_command() if completing else first
    before_command = options[: options.index(first)] if first is not None else options
    wanted = named is not None and named not in BUILTIN_COMMANDS
    listed = named is None and (completing or "--version" not in before_command)
    streams = sys.stdout, sys.stderr
    if first != "chat":  # the chat is interactive; everything else is text a plugin may have written
        sys.stdout, sys.stderr = EscapingStream(sys.stdout), EscapingStream(sys.stderr)
    try:
        if wanted:
            # A plugin's command, or completing its arguments: its parser is its code's.
            kernel = loaded_kernel(save=not only_prints)
            with output.stdout_to_stderr():  # their setup code runs; --help output must stay clean
                _add_plugin_commands(commands, kernel)
        elif listed:
            _add_offered_commands(parser, commands)
        if completing:
            completion.autocomplete(parser)  # answers on argcomplete's channel and exits
        args = parser.parse_args(argv)
        if not only_prints and not run_choice(os.environ)[1]:  # not under --no-plugins
            _report_run_disables(from_environment)
        plugin_command = getattr(args, "plugin_command", None)
        if plugin_command is not None and kernel is not None:
            return _run_plugin_command(plugin_command, args)
        handler = getattr(args, "handler", None)
        if handler is None:
            parser.print_help()
            return 2
        if _prints_json(args):
            # Anything plugins print while they load and run goes to stderr: stdout is the JSON.
            with output.stdout_to_stderr():
                return int(handler(args) or 0)
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away; say nothing more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        if kernel is not None:
            kernel.shutdown()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        sys.stdout, sys.stderr = streams


def _take_no_color(argv: list[str]) -> tuple[list[str], bool]:
    """Remove ``--no-color`` wherever it stands (before ``--``); when given, ``NO_COLOR=1`` for the
    run, so that plugins and child processes leave colour out too."""
    end = argv.index("--") if "--" in argv else len(argv)
    if "--no-color" not in argv[:end]:
        return argv, False
    os.environ["NO_COLOR"] = "1"
    return [a for a in argv[:end] if a != "--no-color"] + argv[end:], True


def _prints_json(args: argparse.Namespace) -> bool:
    """Whether the command's stdout is JSON that plugins' output must stay out of (``logs --json``
    runs no plugin code and streams: it prints as it goes)."""
    handler = getattr(args, "handler", None)
    logs = sys.modules.get(f"{__name__}.logs")  # imported if its command is the one run
    if logs is not None and handler is logs.logs_command:
        return False
    return bool(getattr(args, "json", False)) or handler is _tools_call


class _Version(argparse.Action):
    """``--version``: ``hermes-kernel 0.1.0 (Python 3.12.3, pluggy 1.5.0)``, computed only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kwargs: Any) -> None:
        print(version_line())
        parser.exit()


def version_line() -> str:
    """The line ``hermes-kernel --version`` prints."""
    import platform

    import pluggy

    from ..hookspecs import __version__

    return f"hermes-kernel {__version__} (Python {platform.python_version()}, pluggy {pluggy.__version__})"


def _add_offered_commands(parser: argparse.ArgumentParser, commands: Any) -> None:
    """List the plugins' commands as the last load saw them (see :mod:`.offered`); imports nothing."""
    from . import offered

    kernel = Kernel()
    kernel.write_caches = False
    try:
        found, unknown = offered.offered(kernel)
    except Exception as exc:  # help must print whatever the saved state holds
        print(f"warning: plugins' commands cannot be listed: {type(exc).__name__}: {exc}", file=sys.stderr)
        found, unknown = [], True
    finally:
        kernel.shutdown()
    for command in found:
        if command.name in commands.choices:
            continue
        label = f"[plugin {command.plugin}]"
        commands.add_parser(command.name, help=f"{command.help} {label}" if command.help else label)
    if unknown:
        parser.epilog = (
            "Plugins not loaded yet may add commands of their own: `hermes-kernel plugins list --refresh` "
            "loads them (help and completion import no plugin code)."
        )


def _add_plugin_commands(commands: Any, kernel: Kernel) -> None:
    """Add each plugin's ``hermes-kernel <name>``; a setup that fails is reported, not fatal."""
    memory_cli = kernel.providers.memory_cli()
    if memory_cli is not None and memory_cli[0] not in commands.choices:
        name, register_cli = memory_cli
        sub = commands.add_parser(name, help=f"the active memory provider '{name}'")
        plugin = kernel.slots.get("memory", name).plugin
        from ..commands import CliCommand

        sub.set_defaults(plugin_command=CliCommand(name, "", register_cli, None, plugin))
        try:
            register_cli(sub)
            handler = kernel.providers.memory_cli_handler()
            if handler is not None:
                sub.set_defaults(func=handler)
        except Exception as exc:
            print(
                f"warning: memory provider '{name}': its CLI failed: {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
    for name, command in sorted(kernel.cli_commands.items()):
        if name in commands.choices:  # a command of the CLI's own that the kernel does not reserve
            print(
                f"warning: plugin '{command.plugin}': command '{name}' is the command line's own; refused",
                file=sys.stderr,
            )
            continue
        sub = commands.add_parser(
            name,
            help=f"{command.help} [plugin {command.plugin}]",
            description=command.description or command.help,
        )
        sub.set_defaults(plugin_command=command)
        try:
            command.setup_fn(sub)
        except Exception as exc:
            print(
                f"warning: plugin '{command.plugin}': setting up command '{name}' failed: "
                f"{type(exc).__name__}: {exc}",
                file=sys.stderr,
            )


def _run_plugin_command(command: CliCommand, args: argparse.Namespace) -> int:
    handler = command.handler_fn or getattr(args, "func", None)
    if handler is None:
        print(f"error: plugin '{command.plugin}' gave command '{command.name}' no handler", file=sys.stderr)
        return 2
    try:
        result = handler(args)
    except Exception as exc:
        print(
            f"error: command '{command.name}' of plugin '{command.plugin}' failed: "
            f"{type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return 1
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


def _take_run_options(argv: list[str], builtins: set[str]) -> list[str]:
    """Apply and remove the options that switch plugins off for this run: ``--disable NAME``
    (repeatable, or ``--disable=a,b``) and ``--no-plugins``, as ``HERMES_DISABLE_PLUGINS`` /
    ``HERMES_NO_PLUGINS`` (so that every kernel of the run sees them).

    They are taken wherever they stand in a command of the kernel's own; after the name of a
    plugin's command they are that command's own options, left to it."""
    rest: list[str] = []
    names: list[str] = []
    args = iter(argv)
    command: str | None = None
    for arg in args:
        if command is not None and command not in builtins:
            rest.append(arg)
            continue
        if arg == "--":
            rest.append(arg)
            rest.extend(args)
            break
        if arg == "--no-plugins":
            os.environ[NO_PLUGINS_VARIABLE] = "1"
        elif arg == "--disable":
            value = next(args, None)
            if value is None:
                print("hermes-kernel: error: --disable needs a plugin name", file=sys.stderr)
                raise SystemExit(2)
            names.append(value)
        elif arg.startswith("--disable="):
            names.append(arg.partition("=")[2])
        else:
            if command is None and not arg.startswith("-"):
                command = arg
            rest.append(arg)
    if names:
        given = [n for n in os.environ.get(DISABLE_VARIABLE, "").split(",") if n.strip()]
        os.environ[DISABLE_VARIABLE] = ",".join([*given, *names])
    return rest


def _names_given(value: str | None) -> list[str]:
    """The names of a ``HERMES_DISABLE_PLUGINS`` value, in order, each once."""
    return list(dict.fromkeys(n.strip() for n in (value or "").split(",") if n.strip()))


def _report_run_disables(from_environment: list[str]) -> None:
    """Say on stderr which plugin each ``--disable`` / ``HERMES_DISABLE_PLUGINS`` name switches off for
    this run, and warn about a name that matches none (reads manifests; imports nothing)."""
    given = _names_given(os.environ.get(DISABLE_VARIABLE))
    if not given:
        return
    kernel = Kernel()
    kernel.write_caches = False
    try:
        merged, _every = discover(kernel)
    finally:
        kernel.shutdown()
    for name in given:
        origin = DISABLE_VARIABLE if name in from_environment else "--disable"
        hits = [key for key in sorted(merged) if matches_for_run({name}, merged[key]) is not None]
        if hits:
            plugins = ", ".join(f"'{key}'" for key in hits)
            told = f"plugin {plugins} is" if len(hits) == 1 else f"plugins {plugins} are"
            print(f"{origin} {name}: {told} off for this run", file=sys.stderr)
        else:
            print(
                f"warning: {origin} {name} matches no plugin (a plugin is matched by its name, folder, "
                "entry-point name or category path such as platforms/irc, in any case); see "
                "`hermes-kernel plugins list`",
                file=sys.stderr,
            )


def _parser(command: str | None = None) -> tuple[argparse.ArgumentParser, Any]:
    """The ``hermes-kernel`` parser: with ``command`` (one of :data:`BUILTIN_COMMANDS`) only the part
    that parses that command, else every command."""
    parser = Parser(
        prog="hermes-kernel",
        description="A plugin kernel for AI agents, compatible with Hermes Agent plugins.",
    )
    parser.add_argument(
        "--version", action=_Version, help="print the version (and Python's, pluggy's) and exit"
    )
    # Taken out of the command line before parsing (see _take_no_color); listed here for --help.
    parser.add_argument(
        "--no-color",
        action="store_true",
        help="no colour on a terminal (as NO_COLOR=1; anywhere on the line); piped output is plain anyway",
    )
    # Taken out of the command line before parsing (see _take_run_options); listed here for --help.
    parser.add_argument(
        "--disable",
        metavar="NAME",
        action="append",
        help="switch plugin NAME off for this run (repeatable; also HERMES_DISABLE_PLUGINS=a,b)",
    )
    parser.add_argument(
        "--no-plugins", action="store_true", help="load no plugin for this run (also HERMES_NO_PLUGINS=1)"
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for names, add in _COMMAND_GROUPS:
        if command is None or command in names:
            add(commands)
    return parser, commands


def _add_plugins(commands: Any) -> None:
    plugins = commands.add_parser("plugins", help="list and inspect plugins")
    plugin_commands = plugins.add_subparsers(title="plugin commands", metavar="ACTION")
    listing = plugin_commands.add_parser("list", aliases=["ls"], help="list every plugin with its state")
    listing.add_argument("--json", action="store_true", help="print a JSON array of plugin records")
    listing.add_argument(
        "--refresh", action="store_true", help="load the plugins even if the list of the last load is current"
    )
    listing.set_defaults(handler=plugins_group.plugins_list)
    plugins.set_defaults(handler=plugins_group.plugins_list, json=False, refresh=False)
    plugins_group.add_commands(plugin_commands)
    from . import install

    install.add_commands(plugin_commands)


def _add_tools(commands: Any) -> None:
    tools = commands.add_parser("tools", help="list and call tools")
    tool_commands = tools.add_subparsers(title="tool commands", metavar="ACTION")
    tool_list = tool_commands.add_parser("list", help="list the registered tools")
    tool_list.add_argument("--json", action="store_true", help="print the tools' OpenAI schemas")
    tool_list.set_defaults(handler=_tools_list)
    tool_call = tool_commands.add_parser("call", help="call a tool through the full hook pipeline")
    tool_call.add_argument("name", help="the tool's name")
    tool_call.add_argument("arguments", nargs="?", default="{}", help="the arguments as a JSON object")
    tool_call.set_defaults(handler=_tools_call)
    tools.set_defaults(handler=_tools_list, json=False)


def _add_providers(commands: Any) -> None:
    providers = commands.add_parser("providers", help="list the providers of every slot")
    provider_commands = providers.add_subparsers(title="provider commands", metavar="ACTION")
    provider_list = provider_commands.add_parser(
        "list", help="every provider: slot, plugin, active, available"
    )
    provider_list.add_argument("--json", action="store_true", help="print a JSON array")
    provider_list.set_defaults(handler=_providers_list)
    providers.set_defaults(handler=_providers_list, json=False)


def _module_commands(module: str) -> Callable[[Any], None]:
    """The ``add_commands`` of command module ``module`` of this package, imported when called."""

    def add(commands: Any) -> None:
        importlib.import_module(f"{__name__}.{module}").add_commands(commands)

    return add


#: The CLI's own commands, in the order help lists them, each group with what adds it to the parser.
_COMMAND_GROUPS: tuple[tuple[tuple[str, ...], Callable[[Any], None]], ...] = (
    (("plugins",), _add_plugins),
    (("tools",), _add_tools),
    (("providers",), _add_providers),
    (("chat", "run", "demo"), _module_commands("chat")),
    (("hooks",), _module_commands("hooks")),
    (("logs",), _module_commands("logs")),
    (("doctor",), _module_commands("doctor")),
    (("gateway",), _module_commands("gateway")),
    (("mcp",), _module_commands("mcp")),
    (("completion",), _module_commands("completion")),
)
#: Every command of the CLI's own (a plugin's command may not take one of these names).
BUILTIN_COMMANDS = frozenset(name for names, _add in _COMMAND_GROUPS for name in names)


def _providers_list(args: argparse.Namespace) -> int:
    with loaded_kernel() as kernel:
        rows = kernel.providers.status()
        if args.json:
            output.emit_json([r.to_dict() for r in rows])
            return 0
        if not rows:
            print("No providers.")
            return 0
        headers = ("SLOT", "NAME", "PLUGIN", "ACTIVE", "AVAILABLE")
        table = [
            (r.slot, r.name, r.plugin or "-", "yes" if r.active else "", "yes" if r.available else "no")
            for r in rows
        ]
        if output.mode().rich:
            styles = [
                [None, "heading" if r.active else None, "dim", "ok", "ok" if r.available else "error"]
                for r in rows
            ]
            output.table(headers, table, styles)
            for status in rows:
                if status.reason:
                    output.line(f"{status.slot} {status.name}: {status.reason}", "dim")
            return 0
        widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(headers)]
        print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
        for row, status in zip(table, rows, strict=True):
            print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
            if status.reason:
                print(f"    {status.reason}")
    return 0


def tool_records(kernel: Kernel) -> list[dict[str, Any]]:
    """``tools list --json``: every registered tool (as the text lists them), each its OpenAI schema
    (``type``, ``function``) plus ``plugin``, ``toolset``, ``summary``, ``available`` and ``reason``."""
    records = []
    for tool in kernel.tools.all():
        ok, reason = kernel.tools.available(tool)
        records.append(
            {
                "type": "function",
                "function": tool.schema,
                "plugin": tool.plugin,
                "toolset": tool.toolset,
                "summary": tool.description.splitlines()[0] if tool.description else "",
                "available": ok,
                "reason": reason or None,
            }
        )
    return records


def _tools_list(args: argparse.Namespace) -> int:
    with loaded_kernel() as kernel:
        if args.json:
            output.emit_json(tool_records(kernel))
            return 0
        records = tool_records(kernel)
        if not records:
            print("No tools registered.")
            return 0
        if output.mode().rich:
            rows = [
                (r["function"]["name"], f"{r['plugin']}/{r['toolset']}", r["summary"], r["reason"] or "")
                for r in records
            ]
            styles = [["heading", "dim", None, "error"] for _ in rows]
            output.table(("TOOL", "PLUGIN/TOOLSET", "SUMMARY", "UNAVAILABLE"), rows, styles)
            return 0
        for r in records:
            state = "" if r["available"] else f"  (unavailable: {r['reason']})"
            print(f"{r['function']['name']}  [{r['plugin']}/{r['toolset']}]  {r['summary']}{state}")
    return 0


def _tools_call(args: argparse.Namespace) -> int:
    try:
        arguments: Any = load_json(args.arguments, "the arguments")
    except DataRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: arguments are not valid JSON: {exc}", file=sys.stderr)
        return 2
    with loaded_kernel() as kernel:
        if args.name not in kernel.tools:
            print(
                load_json(kernel.tools.dispatch(args.name, arguments), "the error")["error"], file=sys.stderr
            )
            return 1
        failures = HookFailures(kernel)
        result = kernel.tools.dispatch(args.name, arguments, session_id="cli", task_id="cli")
        failures.report()
        output.emit(result)
        return 1 if _is_error(result) else 0


def _is_error(result: str) -> bool:
    try:
        data = load_json(result, "the result")
    except ValueError:
        return False
    return isinstance(data, dict) and "error" in data


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
