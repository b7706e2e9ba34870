"""The ``hermes-kernel`` command line: a thin client of the public API."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.kernel import Kernel, PluginInfo
from ..core.log import shown
from ..core.records import DISABLE_VARIABLE, NO_PLUGINS_VARIABLE
from ..core.safe_yaml import DataRefused, load_json
from . import chat, doctor, gateway, hooks, install, logs
from . import plugins as plugins_group
from .common import loaded_kernel, plugin_status

if TYPE_CHECKING:
    from ..commands import CliCommand


def main(argv: Sequence[str] | None = None) -> int:
    argv = _take_run_options(list(sys.argv[1:] if argv is None else argv))
    parser, commands = _parser()
    kernel: Kernel | None = None
    first = next((a for a in argv if not a.startswith("-")), None)
    streams = sys.stdout, sys.stderr
    if first != "chat":  # the chat is interactive; everything else is text a plugin may have written
        sys.stdout, sys.stderr = EscapingStream(sys.stdout), EscapingStream(sys.stderr)
    try:
        if first is None or first not in commands.choices:
            # A plugin's command, or --help: the plugins' CLI commands are needed.
            kernel = loaded_kernel()
            _add_plugin_commands(commands, kernel)
        args = parser.parse_args(argv)
        plugin_command = getattr(args, "plugin_command", None)
        if plugin_command is not None and kernel is not None:
            return _run_plugin_command(plugin_command, args)
        handler = getattr(args, "handler", None)
        if handler is None:
            parser.print_help()
            return 2
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


class EscapingStream:
    """A text stream that writes control characters as visible escapes (``\\x1b``, ``\\u202e``)
    and URLs without their credentials (``https://***@host/?api-key=***``).

    Plugin names, descriptions, errors and log lines are text from outside:
    printed raw, ``ESC[2J`` would clear the user's screen.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(shown(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


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
        except Exception as exc:
            print(
                f"warning: memory provider '{name}': its CLI failed: {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
    for name, command in sorted(kernel.cli_commands.items()):
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


def _take_run_options(argv: list[str]) -> list[str]:
    """Apply and remove the options that switch plugins off for this run, wherever they stand:
    ``--disable NAME`` (repeatable, or ``--disable=a,b``) and ``--no-plugins``, as
    ``HERMES_DISABLE_PLUGINS`` / ``HERMES_NO_PLUGINS`` (so that every kernel of the run sees them)."""
    rest: list[str] = []
    names: list[str] = []
    args = iter(argv)
    for arg in args:
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
            rest.append(arg)
    if names:
        given = [n for n in os.environ.get(DISABLE_VARIABLE, "").split(",") if n.strip()]
        os.environ[DISABLE_VARIABLE] = ",".join([*given, *names])
    return rest


def _parser() -> tuple[argparse.ArgumentParser, Any]:
    parser = argparse.ArgumentParser(
        prog="hermes-kernel",
        description="A plugin kernel for AI agents, compatible with Hermes Agent plugins.",
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

    plugins = commands.add_parser("plugins", help="list and inspect plugins")
    plugin_commands = plugins.add_subparsers(title="plugin commands", metavar="ACTION")
    listing = plugin_commands.add_parser("list", aliases=["ls"], help="list every plugin with its state")
    listing.add_argument("--json", action="store_true", help="print a JSON array of plugin records")
    listing.add_argument(
        "--refresh", action="store_true", help="load the plugins even if the list of the last load is current"
    )
    listing.set_defaults(handler=_plugins_list)
    plugins.set_defaults(handler=_plugins_list, json=False, refresh=False)

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

    providers = commands.add_parser("providers", help="list the providers of every slot")
    provider_commands = providers.add_subparsers(title="provider commands", metavar="ACTION")
    provider_list = provider_commands.add_parser(
        "list", help="every provider: slot, plugin, active, available"
    )
    provider_list.add_argument("--json", action="store_true", help="print a JSON array")
    provider_list.set_defaults(handler=_providers_list)
    providers.set_defaults(handler=_providers_list, json=False)

    chat.add_commands(commands)
    plugins_group.add_commands(plugin_commands)
    install.add_commands(plugin_commands)
    hooks.add_commands(commands)
    logs.add_commands(commands)
    doctor.add_commands(commands)
    gateway.add_commands(commands)
    return parser, commands


def _plugins_list(args: argparse.Namespace) -> int:
    kernel = Kernel()
    try:
        if args.refresh or kernel.debug:
            kernel.load()
            kernel.save_plugin_state()
            rows = [(p, "current") for p in kernel.plugins]
        else:
            # From manifests and the last load's saved list: no plugin code is imported.
            rows = kernel.listing()
        for problem in kernel.problems:
            print(f"warning: {problem}", file=sys.stderr)
        if args.json:
            out = []
            for info, basis in rows:
                record = {**info.to_dict(), "listed_from": basis}
                if basis == "unknown":
                    record["tools"] = record["hooks"] = None
                out.append(record)
            print(json.dumps(out, indent=2, ensure_ascii=False))
        else:
            print(format_plugin_table([info for info, _ in rows], dict((i.name, b) for i, b in rows)))
            listed = {info.source for info, _ in rows}
            asked = kernel._services.asked_for()
            if not args.refresh and asked and not listed & {"config", "hooks"}:
                print(f"config.yaml also sets up {', '.join(asked)}: their entries show after a load.")
    finally:
        kernel.shutdown()
    return 0


def format_plugin_table(plugins: list[PluginInfo], listed_from: dict[str, str] | None = None) -> str:
    """A readable table of plugins, with each problem on its own indented line.

    ``listed_from`` (``plugins list`` without loading) tells, per plugin, whether its state is
    ``current``, from the ``last load`` (counts marked ``*``) or ``unknown`` (counts ``?``).
    """
    if not plugins:
        return "No plugins found."
    listed_from = listed_from or {}
    headers = ("NAME", "VERSION", "KIND", "SOURCE", "STATUS", "TOOLS", "HOOKS")
    rows = []
    for p in plugins:
        basis = listed_from.get(p.name, "current")
        if basis == "unknown":
            status, tools, hooks = "not loaded yet", "?", "?"
        else:
            mark = "*" if basis == "last load" else ""
            status = plugin_status(p).partition(" (")[0] + mark
            tools, hooks = f"{len(p.tools)}{mark}", f"{len(p.hooks)}{mark}"
        rows.append((p.name, p.version or "-", p.kind, p.source, status, tools, hooks))
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for p, row in zip(plugins, rows, strict=True):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        notes: list[str] = []
        if p.error:
            notes.append(f"error: {p.error}")
        notes += [f"hook {hook} disabled: {error}" for hook, error in p.hook_errors.items()]
        notes += [f"warning: {w}" for w in p.warnings]
        lines += [f"    {note}" for note in notes]
    bases = set(listed_from.values())
    if "last load" in bases:
        lines.append("* as of the last load; things changed since.")
    if "unknown" in bases:
        lines.append("? not known until the plugins load.")
    if bases - {"current"}:
        lines.append("Listing imports no plugin code: `hermes-kernel plugins list --refresh` loads them.")
    return "\n".join(lines)


def _providers_list(args: argparse.Namespace) -> int:
    with loaded_kernel() as kernel:
        rows = kernel.providers.status()
        if args.json:
            print(json.dumps([r.to_dict() for r in rows], indent=2, ensure_ascii=False))
            return 0
        if not rows:
            print("No providers.")
            return 0
        headers = ("SLOT", "NAME", "PLUGIN", "ACTIVE", "AVAILABLE")
        table = [
            (r.slot, r.name, r.plugin or "-", "yes" if r.active else "", "yes" if r.available else "no")
            for r in rows
        ]
        widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(headers)]
        print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
        for row, status in zip(table, rows, strict=True):
            print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
            if status.reason:
                print(f"    {status.reason}")
    return 0


def _tools_list(args: argparse.Namespace) -> int:
    with loaded_kernel() as kernel:
        if args.json:
            print(json.dumps(kernel.tools.schemas(), indent=2, ensure_ascii=False))
            return 0
        tools = kernel.tools.all()
        if not tools:
            print("No tools registered.")
        for tool in tools:
            ok, reason = kernel.tools.available(tool)
            state = "" if ok else f"  (unavailable: {reason})"
            summary = tool.description.splitlines()[0] if tool.description else ""
            print(f"{tool.name}  [{tool.plugin}/{tool.toolset}]  {summary}{state}")
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
            print(json.loads(kernel.tools.dispatch(args.name, arguments))["error"], file=sys.stderr)
            return 1
        result = kernel.tools.dispatch(args.name, arguments, session_id="cli", task_id="cli")
        print(result)
        return 1 if _is_error(result) else 0


def _is_error(result: str) -> bool:
    try:
        data = load_json(result, "the result")
    except ValueError:
        return False
    return isinstance(data, dict) and "error" in data


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
