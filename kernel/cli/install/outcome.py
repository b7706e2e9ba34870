"""What the next start does with an installed or updated plugin: enabling it, and saying whether it runs."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

from ...core.sources.manifest import Manifest
from ..common import DISABLED_BY_CONFIG, NOT_ENABLED, loaded_kernel, manifest_at, unloaded_kernel

# The kernel's warning for a tool name another plugin holds (kernel.tools.registry.ToolConflict).
_REFUSED_TOOL = re.compile(r"^tool '([^']+)' of plugin '([^']*)' was refused: plugin '([^']*)' already")
_TOOL_NOTE = re.compile(r"^tool '([^']+)'")


def offer_enable(args: argparse.Namespace, targets: list[tuple[str, str, Manifest | None]]) -> None:
    """Say which rule decides whether the installed plugins (key, source, manifest) run in this home,
    and enable those that need it when ``--enable`` says so or the user, asked on a terminal, agrees.

    The rules: a ``plugins.enabled`` list runs only what it names; a home Hermes Agent has used and
    that has no list runs only bundled plugins (as Hermes); any other home runs every plugin it finds.
    """
    from ...core.records import _Record
    from ..plugins import enable_plugin

    with unloaded_kernel() as kernel:
        home, choice = kernel.home, kernel.plugin_choice()
    config_file = home / "config.yaml"
    left_off = [
        key
        for key, source, manifest in targets
        if choice.unlisted(
            _Record(
                name=key, source=source, manifest=manifest, kind=manifest.kind if manifest else "standalone"
            )
        )
    ]
    if choice.enabled is None and choice.opt_in is None:
        keys = ", ".join(f"'{key}'" for key, _source, _manifest in targets)
        print(
            f"{keys}: no need to enable it here: {config_file} has no plugins.enabled list and Hermes "
            "Agent has not used this home, so every plugin in it runs unless plugins.disabled names it"
            + (" (--no-enable changes nothing here)" if args.enable is False else "")
        )
        return
    if choice.enabled is not None:
        rule = f"{config_file} has a plugins.enabled list: only the plugins it names run"
    else:
        rule = (
            f"Hermes Agent has used this home ({choice.opt_in}) and {config_file} has no plugins.enabled: "
            "as in Hermes, only bundled plugins run until others are enabled"
        )
    for key in left_off:
        wanted = args.enable
        if wanted is None and not args.no_input and sys.stdin.isatty():
            print(rule)
            try:
                answer = input(f"Enable '{key}' now (it is added to plugins.enabled)? [y/N] ")
            except (EOFError, KeyboardInterrupt):
                print()
                answer = ""
            wanted = answer.strip().lower() in ("y", "yes")
        if wanted:
            enable_plugin(key)


def report_outcome(
    targets: list[tuple[str, str, str | None]],
    *,
    verb: str,
    extra_path: str | None = None,
    missing: dict[str, list[str]] | None = None,
) -> None:
    """Load the kernel as the next start will and say what each plugin of ``targets`` (key, source,
    path) does there: enabled, disabled and why (with the command that changes it), failing; and,
    on stderr, the tool names it shares with other plugins and which plugin has them.

    ``extra_path`` (a pip ``--target`` directory) is on ``sys.path`` during the load.  ``missing``:
    the variables each plugin still lacks, named when another reason keeps it off.
    """
    missing = missing or {}
    added = extra_path is not None and extra_path not in sys.path
    if added:
        assert extra_path is not None
        sys.path.insert(0, extra_path)
    # As the next start will have it, also for HERMES_KERNEL_ENTRY_POINTS=pythonpath.
    pythonpath = os.environ.get("PYTHONPATH")
    if extra_path is not None:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, pythonpath) if p)
    sys.stdout.flush()
    import importlib

    importlib.invalidate_caches()  # pip just wrote into a folder this process may have listed already
    try:
        with loaded_kernel() as kernel:
            home = kernel.home
            infos = {p.name: p for p in kernel.plugins}
            for key, source, path in targets:
                info = infos.get(key)
                if info is None:
                    print(
                        f"warning: the kernel does not find '{key}' now that it is {verb}; "
                        "see: hermes-kernel plugins list --refresh",
                        file=sys.stderr,
                    )
                    continue
                if info.source != source or (path is not None and info.path != path):
                    print(
                        f"warning: '{key}' is {verb}, but the kernel uses the {info.source} plugin of "
                        f"the same name ({info.path or 'an entry point'}) instead; see: "
                        f"hermes-kernel plugins info {key}",
                        file=sys.stderr,
                    )
                    continue
                line, bad = _status_line(info, home, extra_path, missing.get(key, []))
                if bad:
                    print(f"warning: {line}", file=sys.stderr)
                else:
                    print(line)
                for warning in _load_warnings(kernel, info, verb):
                    print(f"warning: {warning}", file=sys.stderr)
                print(f"check it with: hermes-kernel plugins info {key}")
    finally:
        if added:
            sys.path.remove(extra_path)  # type: ignore[arg-type]
        if extra_path is not None:
            if pythonpath is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = pythonpath


def _status_line(info: Any, home: Path, extra_path: str | None, missing: list[str]) -> tuple[str, bool]:
    """One true sentence on whether the plugin runs from the next start, and whether it is a failure."""
    key = info.name
    later = "from the next start" + (f" that has {extra_path} on PYTHONPATH" if extra_path else "")
    also = f"; it also needs {', '.join(missing)} (not set; add them to {home / '.env'})" if missing else ""
    if info.enabled:
        deferred = " (a model provider: imported when a model is first looked up)" if info.deferred else ""
        return (
            f"'{key}' is enabled{deferred}: it runs {later} "
            f"(to turn it off: hermes-kernel plugins disable {key})",
            False,
        )
    error = info.error or ""
    absent = re.search(r"\(missing: ([^)]*)\)", error)
    if error.startswith(DISABLED_BY_CONFIG):
        return (
            f"'{key}' is disabled: plugins.disabled in {home / 'config.yaml'} lists it; "
            f"turn it on with: hermes-kernel plugins enable {key}{also}"
        ), False
    if error.startswith(NOT_ENABLED) and "plugins.enabled does not list it" not in error:
        return (
            f"'{key}' does not run: Hermes Agent has used {home} and {home / 'config.yaml'} has no "
            f"plugins.enabled list, so only bundled plugins run; turn it on with: "
            f"hermes-kernel plugins enable {key}{also}"
        ), False
    if error.startswith(NOT_ENABLED):
        return (
            f"'{key}' does not run: {home / 'config.yaml'} has a plugins.enabled list (only the plugins it "
            f"names run) without it; add it with: hermes-kernel plugins enable {key}{also}"
        ), False
    if absent:
        return (
            f"'{key}' stays disabled until its variables are set: still missing: {absent[1]}; add them to "
            f"{home / '.env'} (or the environment) and it runs {later}"
        ), False
    if error.startswith("disabled"):
        return f"'{key}' does not run in this command: {error}{also}", False
    return f"'{key}' fails to load: {error}; see: hermes-kernel plugins info {key}", True


def _load_warnings(kernel: Any, info: Any, verb: str) -> list[str]:
    """What the load shows about ``info``'s tools that other plugins provide too, then its other warnings."""
    key = info.name
    manifest = manifest_at(info.path)
    declared = list(manifest.provides_tools) if manifest is not None else []
    refused = [m[1] for w in info.warnings if (m := _REFUSED_TOOL.match(w)) and m[2] == key]
    wanted = list(dict.fromkeys([*declared, *info.tools, *refused]))
    others = {p.name: p for p in kernel.plugins if p.name != key}
    running = info.enabled and not info.deferred
    taken: dict[str, list[str]] = {}
    kept: dict[str, list[str]] = {}
    would: dict[str, list[str]] = {}
    for name in wanted:
        tool = kernel.tools.get(name)
        if tool is None:
            continue
        if running and tool.plugin == key:
            for other in others.values():
                lost = any(
                    (m := _REFUSED_TOOL.match(w)) and m[1] == name and m[3] == key for w in other.warnings
                )
                if name in other.tools or lost:
                    taken.setdefault(other.name, []).append(name)
        elif tool.plugin != key:
            (kept if running else would).setdefault(tool.plugin, []).append(name)

    def owner(name: str) -> str:
        other = others.get(name)
        return f"the {other.source} plugin '{name}'" if other is not None else f"'{name}'"

    def tools(names: list[str]) -> tuple[str, str, str]:
        return (
            (f"tools {', '.join(names)}", "are", "them")
            if len(names) > 1
            else (f"tool {names[0]}", "is", "it")
        )

    out = []
    for other, names in taken.items():
        what, be, it = tools(names)
        out.append(
            f"{verb} '{key}'; its {what} {be} provided by {owner(other)} too; "
            f"the {verb} plugin takes {it} over from the next start"
        )
    for other, names in kept.items():
        what, be, it = tools(names)
        out.append(
            f"{verb} '{key}'; its {what} {be} provided by {owner(other)}, which keeps {it}: the kernel "
            f"refused the {verb} plugin's (to let '{key}' have {it}: hermes-kernel plugins disable {other})"
        )
    for other, names in would.items():
        what, be, _it = tools(names)
        out.append(
            f"{verb} '{key}'; its manifest lists {what}, which {owner(other)} provides; which plugin gets "
            f"{'them' if len(names) > 1 else 'it'} shows once '{key}' runs (hermes-kernel plugins info {key})"
        )
    summarized = set(wanted)
    for warning in info.warnings:
        note = _TOOL_NOTE.match(warning)
        if note is None or note[1] not in summarized:
            out.append(f"plugin '{key}': {warning}")
    return out
