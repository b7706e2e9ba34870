"""``hermes-kernel hooks list|test``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.config import read_dotenv
from .common import TIERS, dump_json, fail, loaded_kernel, unloaded_kernel

if TYPE_CHECKING:
    pass


def add_commands(commands: Any) -> None:
    """Add this group's subcommands to the ``hermes-kernel`` parser."""
    hooks = commands.add_parser("hooks", help="list hooks and the plugins on them")
    hook_actions = hooks.add_subparsers(title="hook commands", metavar="ACTION")
    hook_list = hook_actions.add_parser(
        "list",
        help="each hook with its plugins in call order",
        description="Each hook (the kernel's and any other name a plugin registered) with the plugins "
        "on it in call order; disabled callbacks are marked with their error.",
    )
    hook_list.add_argument("--json", action="store_true", help="print a JSON array")
    hook_list.set_defaults(handler=hooks_list)
    hook_test = hook_actions.add_parser(
        "test",
        help="run the shell hooks of EVENT once and show what they returned",
        description="Run every shell hook that config.yaml declares for EVENT once, with a made-up event "
        "(session_id 'hooks-test'; for tool events tool_name from --tool and empty args), and show per "
        "hook its command, exit code, output and the answer the kernel would get. No plugin is loaded. "
        "Exit status: 0 when every matching hook ran (whatever it answered), 1 when one could not be "
        "started or timed out, 2 for an unknown event or an unreadable payload.",
    )
    hook_test.add_argument("event", help="the hook event, e.g. pre_tool_call")
    hook_test.add_argument("--tool", metavar="NAME", help="the tool name of a tool event")
    hook_test.add_argument(
        "--payload",
        metavar="FILE",
        help="a JSON object of the event's arguments (or a stdin payload a hook received); - for stdin",
    )
    hook_test.add_argument("--json", action="store_true", help="print a JSON array, one object per hook")
    hook_test.set_defaults(handler=hooks_test)
    hooks.set_defaults(handler=hooks_list, json=False)


def hooks_list(args: argparse.Namespace) -> int:
    with loaded_kernel() as kernel:
        kernel.providers.list_providers()  # model provider plugins may register hooks too
        known = list(kernel.hook_names)
        others = sorted({h for p in kernel.plugins for h in p.hooks} - set(known))
        rows: list[dict[str, Any]] = []
        for hook in known + others:
            callbacks = [
                {
                    "plugin": cb.plugin,
                    "callback": cb.label,
                    "order": TIERS.get(cb.tier, str(cb.tier)),
                    "async": cb.is_async,
                    "native": cb.native,
                    "disabled": cb.error is not None,
                    "error": cb.error,
                }
                for cb in kernel.hook_callbacks(hook)
            ]
            rows.append({"hook": hook, "known": hook in known, "callbacks": callbacks})
    if args.json:
        dump_json(rows)
        return 0
    width = max(len(r["hook"]) for r in rows) if rows else 4
    for row in rows:
        names = []
        for cb in row["callbacks"]:
            marks = [
                m
                for m in (cb["order"] if cb["order"] != "normal" else "", "async" if cb["async"] else "")
                if m
            ]
            if cb["disabled"]:
                marks.append("DISABLED")
            names.append(cb["plugin"] + (f" ({', '.join(marks)})" if marks else ""))
        unknown = "" if row["known"] else "  [not a kernel hook]"
        print(f"{row['hook']:<{width}}  {', '.join(names) or '-'}{unknown}".rstrip())
        for cb in row["callbacks"]:
            if cb["disabled"]:
                print(f"{'':<{width}}    {cb['plugin']} disabled: {cb['error']}")
    return 0


def hooks_test(args: argparse.Namespace) -> int:
    """``hermes-kernel hooks test EVENT``: run the matching shell hooks once (see docs/shell-hooks.md)."""
    from ..surfaces import shell_hooks

    payload = None
    if args.payload is not None:
        try:
            text = sys.stdin.read() if args.payload == "-" else Path(args.payload).read_text(encoding="utf-8")
            payload = json.loads(text)
        except (OSError, ValueError) as exc:
            return fail(f"cannot read the payload {args.payload}: {exc}", 2)
    with unloaded_kernel() as kernel:
        problem = shell_hooks.unknown_event(args.event, kernel.hook_names)
        if problem is not None:
            return fail(problem, 2)
        try:
            kwargs = shell_hooks.test_kwargs(args.event, args.tool, payload)
        except ValueError as exc:
            return fail(f"{args.payload}: {exc}", 2)
        for key, value in read_dotenv(kernel.home).items():  # as the kernel's load() would
            os.environ.setdefault(key, value)
        rows, parsed = shell_hooks.run_test(kernel, args.event, kwargs)
        problems = list(kernel.problems)  # config.yaml itself unreadable, for one
    for message in problems + parsed.problems + parsed.warnings:
        print(f"warning: {message}", file=sys.stderr)
    if args.json:
        dump_json(rows)
    else:
        print(shell_hooks.format_test(args.event, rows))
    return 1 if any(row.get("error") for row in rows) else 0


# --------------------------------------------------------------------------- logs
