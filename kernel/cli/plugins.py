"""``hermes-kernel plugins info|enable|disable``."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.config import hermes_marker, plugin_names, read_dotenv, section
from ..core.records import BLOCKED, DISABLED_FOR_RUN, NOT_ENABLED, PluginInfo
from ..core.sources.discovery import (
    Candidate,
)
from ..core.sources.manifest import EnvVar, Manifest, declared_commands
from . import output
from .common import (
    DISABLED_BY_CONFIG,
    TIERS,
    candidate_items,
    discover,
    dump_json,
    env_state,
    fail,
    info_items,
    load,
    loaded_kernel,
    plugin_status,
    resolve_name,
    unknown_name,
    unloaded_kernel,
)

if TYPE_CHECKING:
    from .. import Kernel


def add_commands(plugin_actions: Any) -> None:
    """Add this group's subcommands to the ``hermes-kernel`` parser."""
    info = plugin_actions.add_parser(
        "info",
        help="everything about one plugin",
        description="Show one plugin: state, manifest, environment variables, tools, hooks, "
        "commands, skills, warnings and errors. Secret values are never shown.",
    )
    info.add_argument("name", help="the plugin's name as in 'plugins list', or its manifest name")
    info.add_argument("--json", action="store_true", help="print a JSON object")
    info.set_defaults(handler=plugins_info)

    for action, verb in (("enable", "remove it from"), ("disable", "add it to")):
        sub = plugin_actions.add_parser(
            action,
            help=f"{action} a plugin ({verb} plugins.disabled in config.yaml)",
            description=f"{action.capitalize()} a discovered plugin: {verb} the plugins.disabled list "
            "of <home>/config.yaml (the rest of the file is kept). Running it twice changes nothing.",
        )
        sub.add_argument("name", help="the plugin's name as in 'plugins list', or its manifest name")
        sub.set_defaults(handler=plugins_enable if action == "enable" else plugins_disable)


def plugins_info(args: argparse.Namespace) -> int:
    environ = dict(os.environ)  # before load() exports <home>/.env
    with loaded_kernel() as kernel:
        items = info_items(kernel.plugins)
        found = resolve_name(args.name, items)
        if not found:
            return unknown_name(args.name, items)
        info, manifest = found[0].obj
        if info.deferred:
            kernel.providers.list_providers()  # imports the deferred model provider plugins
            info = next((p for p in kernel.plugins if p.name == info.name), info)
        data = plugin_details(kernel, info, manifest, environ)
    if args.json:
        dump_json(data)
    else:
        print(format_plugin_details(data))
    return 0


def plugin_details(
    kernel: Kernel, info: PluginInfo, manifest: Manifest | None, environ: dict[str, str]
) -> dict[str, Any]:
    """``PluginInfo.to_dict()`` plus the manifest, env status, and details of tools, hooks, commands."""
    dotenv = read_dotenv(kernel.home)
    data = info.to_dict()
    data["status"] = plugin_status(info)
    data["manifest"] = None
    if manifest is not None:

        def env(var: EnvVar) -> dict[str, Any]:
            where = env_state(var, environ, dotenv)
            return {
                "name": var.name,
                "description": var.description,
                "url": var.url,
                "secret": var.secret,
                "set": where is not None,
                "where": where,
            }

        data["manifest"] = {
            "path": str(manifest.path) if manifest.path else None,
            "name": manifest.name,
            "version": manifest.version,
            "description": manifest.description,
            "author": manifest.author,
            "kind": manifest.kind,
            "label": manifest.label,
            "provides_tools": list(manifest.provides_tools),
            "provides_hooks": list(manifest.provides_hooks),
            "provides_commands": list(declared_commands(manifest) or ()),
            "requires_env": [env(v) for v in manifest.requires_env],
            "optional_env": [env(v) for v in manifest.optional_env],
            "extra_fields": sorted(manifest.extra),
        }
    tools = []
    for name in info.tools:
        tool = kernel.tools.get(name)
        if tool is None or tool.plugin != info.name:
            continue
        ok, reason = kernel.tools.available(tool)
        tools.append(
            {
                "name": tool.name,
                "toolset": tool.toolset,
                "description": tool.description,
                "requires_env": list(tool.requires_env),
                "available": ok,
                "reason": reason,
            }
        )
    data["tool_details"] = tools
    hooks = []
    for hook in info.hooks:
        callbacks = kernel.hook_callbacks(hook)
        for position, cb in enumerate(callbacks, 1):
            if cb.plugin == info.name:
                hooks.append(
                    {
                        "hook": hook,
                        "callback": cb.label,
                        "position": position,
                        "of": len(callbacks),
                        "order": TIERS.get(cb.tier, str(cb.tier)),
                        "async": cb.is_async,
                        "disabled": cb.error is not None,
                        "error": cb.error,
                    }
                )
    data["hook_details"] = hooks
    commands = []
    for name in info.commands:
        command = kernel.commands.get(name)
        if command is not None:
            commands.append(
                {"name": command.name, "description": command.description, "args_hint": command.args_hint}
            )
    data["command_details"] = commands
    cli_commands = []
    for name in info.cli_commands:
        cli_command = kernel.cli_commands.get(name)
        if cli_command is not None:
            cli_commands.append({"name": name, "help": cli_command.help})
    data["cli_command_details"] = cli_commands
    data["skill_details"] = [
        {"name": s.qualified_name, "description": s.description, "path": str(s.path)}
        for s in kernel.skills.all()
        if s.plugin == info.name
    ]
    data["providers"] = [r.to_dict() for r in kernel.providers.status() if r.plugin == info.name]
    # Auxiliary tasks, browser providers, secret sources, ... (names and labels only, never a secret value).
    attached = "registrations" in kernel.services
    data["registrations"] = kernel.registrations.of_plugin(info.name) if attached else {}
    return data


def registration_line(kind: str, row: dict[str, Any]) -> str:
    """One line of ``plugins info`` for something the plugin registered with ``k.registrations``."""
    line = row["name"]
    if kind == "auxiliary_tasks":
        texts = (row[k].strip() for k in ("display_name", "description"))
        line += "".join(f"  {text.splitlines()[0]}" for text in texts if text)
    elif kind == "secret_sources":
        line += f" ({row['label']}, {row['shape']})"
        line += f": supplies {', '.join(row['applied'])}" if row["applied"] else ""
    elif kind == "dashboard_auth_providers":
        line += f" ({row['display_name']})"
    elif kind == "browser_providers" and not row["active"]:
        line += "  [replaced by another plugin's]"
    return line


def format_plugin_details(data: dict[str, Any]) -> str:
    manifest = data["manifest"] or {}
    title = data["name"] + (f" {data['version']}" if data["version"] else "")
    lines = [f"{title}: {data['status']}"]
    if data["description"]:
        import textwrap

        lines += textwrap.wrap(data["description"], 100, initial_indent="  ", subsequent_indent="  ")
    rows = [
        ("kind", data["kind"]),
        ("source", data["source"]),
        ("path", data["path"] or "-"),
        ("manifest", manifest.get("path") or "none"),
    ]
    if manifest.get("name") and manifest["name"] != data["name"]:
        rows.append(("manifest name", manifest["name"]))
    if manifest.get("author"):
        rows.append(("author", manifest["author"]))
    if manifest.get("label"):
        rows.append(("label", manifest["label"]))
    lines += [f"  {k + ':':<14} {v}" for k, v in rows]
    if data["error"]:
        lines.append(f"  {'error:':<14} {data['error']}")

    def section_lines(title: str, entries: list[str]) -> None:
        if entries:
            lines.append(f"  {title}:")
            lines.extend(f"    {e}" for e in entries)

    for key, title in (("requires_env", "requires env"), ("optional_env", "optional env")):
        entries = []
        for var in manifest.get(key, []):
            state = f"set ({var['where']})" if var["set"] else "MISSING"
            extra = " ".join(x for x in (var["description"], f"<{var['url']}>" if var["url"] else "") if x)
            secret = " [secret]" if var["secret"] else ""
            entries.append(f"{var['name']}: {state}{secret}" + (f"  {extra}" if extra else ""))
        section_lines(title, entries)
    tools = []
    for tool in data["tool_details"]:
        summary = tool["description"].splitlines()[0] if tool["description"] else ""
        state = "" if tool["available"] else f"  [unavailable: {tool['reason']}]"
        tools.append(f"{tool['name']} [{tool['toolset']}]" + (f"  {summary}" if summary else "") + state)
    section_lines(f"tools ({len(tools)})", tools)
    hooks = []
    for hook in data["hook_details"]:
        order = "" if hook["order"] == "normal" else f", {hook['order']}"
        state = f"  [disabled: {hook['error']}]" if hook["disabled"] else ""
        hooks.append(
            f"{hook['hook']}: {hook['callback']} (#{hook['position']} of {hook['of']}{order}){state}"
        )
    section_lines("hooks (position in each hook's call order)", hooks)
    section_lines(
        "commands",
        [
            f"/{c['name']}" + (f"  {c['description']}" if c["description"] else "")
            for c in data["command_details"]
        ],
    )
    section_lines(
        "cli commands",
        [f"hermes-kernel {c['name']}  {c['help']}".rstrip() for c in data["cli_command_details"]],
    )
    section_lines(
        "skills",
        [
            f"{s['name']}" + (f"  {s['description']}" if s["description"] else "")
            for s in data["skill_details"]
        ],
    )
    providers = []
    for row in data["providers"]:
        flags = ", ".join(
            f
            for f in ("active" if row["active"] else "", "available" if row["available"] else "unavailable")
            if f
        )
        providers.append(
            f"{row['slot']} '{row['name']}' ({flags})" + (f": {row['reason']}" if row["reason"] else "")
        )
    section_lines("providers", providers)
    for kind, rows in data.get("registrations", {}).items():
        section_lines(kind.replace("_", " "), [registration_line(kind, row) for row in rows])
    section_lines("overrides", data["overrides"])
    section_lines("warnings", data["warnings"])
    return "\n".join(lines)


# --------------------------------------------------------------------------- plugins list

#: Per list, the declared names a ``--json`` row keeps and a table note shows (the rest are counted).
MAX_DECLARED = 1000
SHOWN_DECLARED = 8
#: A longer name is cut in the table (a valid tool name has at most 64 characters).
MAX_SHOWN_NAME = 64

PLUGIN_HEADERS = ("NAME", "VERSION", "KIND", "SOURCE", "STATUS", "TOOLS", "HOOKS")
_STATUS_STYLES = {"enabled": "ok", "disabled": "warning", "not enabled": "warning", "failed": "error"}
_LOADED_CELLS = {
    "loaded": "yes",
    "last load": "last load*",
    "not loaded yet": "not yet",
    "not loaded": "-",
    "deferred": "on first use",
}


@dataclass
class Listed:
    """One row of ``plugins list``: the plugin's info, where it comes from, and what the listing adds."""

    info: PluginInfo
    basis: str  # "current", "last load" or "unknown" (see Kernel.listing)
    manifest: Manifest | None
    state: str = "loaded"
    why: str | None = None
    missing_env: list[str] = field(default_factory=list)
    declared: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    takeovers: list[dict[str, str]] = field(default_factory=list)

    @property
    def enabled(self) -> bool:
        """Enabled as far as is known: by the load that ran it, else by the config and environment."""
        return self.state == "not loaded yet" or self.info.enabled

    def record(self) -> dict[str, Any]:
        """The ``--json`` row: ``PluginInfo.to_dict()`` and what the listing knows besides."""
        data = {**self.info.to_dict(), "listed_from": self.basis, "enabled": self.enabled}
        if self.state == "not loaded yet":
            data["tools"] = data["hooks"] = data["commands"] = None  # known after a load
        declared: dict[str, Any] = {}
        more: dict[str, int] = {}
        for key in ("tools", "hooks", "commands"):
            names = self.declared.get(key)
            declared[key] = None if names is None else list(names[:MAX_DECLARED])
            if names is not None and len(names) > MAX_DECLARED:
                more[key] = len(names) - MAX_DECLARED
        declared["more"] = more
        data.update(
            state=self.state,
            loaded=self.state in ("loaded", "last load"),
            why=self.why,
            missing_env=self.missing_env,
            declared=declared,
            takeovers=self.takeovers[:MAX_DECLARED],
        )
        return data


def plugins_list(args: argparse.Namespace) -> int:
    """``hermes-kernel plugins list``: from the config, the manifests and the last load (no plugin code
    runs), or from a load with ``--refresh``."""
    from .. import Kernel

    kernel = Kernel()
    try:
        if args.refresh or kernel.debug:
            from . import offered  # only a refresh saves what plugins offer

            load(kernel)
            kernel.save_plugin_state()
            offered.save(kernel)
            discovered = kernel.discover()
            rows = [(p, "current") for p in kernel.plugins]
        else:
            # From manifests and the last load's saved list: no plugin code is imported.
            discovered = kernel.discover()
            rows = kernel.listing(discovered)
        listed = listed_rows(kernel, rows, discovered)
        for problem in kernel.problems:
            print(f"warning: {problem}", file=sys.stderr)
        if args.json:
            output.emit_json([row.record() for row in listed])
        else:
            if output.mode().rich:
                _draw_plugin_table(listed)
            else:
                print(_format_rows(listed))
            sources = {row.info.source for row in listed}
            asked = kernel.host.services_asked_for()
            if not args.refresh and asked and not sources & {"config", "hooks"}:
                print(f"config.yaml also sets up {', '.join(asked)}: their entries show after a load.")
    finally:
        kernel.shutdown()
    return 0


def listed_rows(
    kernel: Kernel,
    rows: list[tuple[PluginInfo, str]],
    discovered: tuple[dict[str, Candidate], list[Candidate]],
) -> list[Listed]:
    """The rows of ``plugins list``, each with its state, why it is off, its missing variables, what its
    manifest declares and the takeovers those declarations imply.  Imports no plugin code."""
    merged, refused = discovered
    by_place = {(c.key, str(c.path) if c.path else None): c for c in [*refused, *merged.values()]}
    choice = kernel.plugin_choice()
    dotenv = read_dotenv(kernel.home)
    out = []
    for info, basis in rows:
        cand = by_place.get((info.name, info.path)) or merged.get(info.name)
        if cand is not None and cand.source != info.source:
            cand = None
        manifest = cand.manifest if cand is not None else None
        row = Listed(info, basis, manifest)
        row.state = _state(info, basis, cand)
        row.why = _why(row, choice.opt_in if choice.enabled is None else None)
        if manifest is not None:
            row.missing_env = [
                v.name for v in manifest.requires_env if env_state(v, os.environ, dotenv) is None
            ]
            row.declared = {
                "tools": manifest.provides_tools if manifest.declares_tools else None,
                "hooks": manifest.provides_hooks if manifest.declares_hooks else None,
                "commands": declared_commands(manifest),
            }
        out.append(row)
    _note_takeovers(out)
    return out


def _state(info: PluginInfo, basis: str, cand: Candidate | None) -> str:
    if basis == "unknown":
        return "not loaded yet"
    if info.enabled:
        return "deferred" if info.deferred else ("last load" if basis == "last load" else "loaded")
    error = info.error or ""
    skipped = plugin_status(info) != "failed" or error.startswith(BLOCKED) or error == "refused"
    if skipped or (cand is not None and cand.error is not None):
        return "not loaded"  # the config, the environment or the manifest kept its code from running
    return "last load" if basis == "last load" else "loaded"


def _why(row: Listed, opt_in: str | None) -> str | None:
    """Why ``row``'s plugin is off, as a short code (its ``error`` says it in full)."""
    if row.enabled:
        return None
    error = row.info.error or ""
    if error.startswith(DISABLED_FOR_RUN):
        return "disabled_for_run"
    if error.startswith(DISABLED_BY_CONFIG):
        return "disabled"
    if error.startswith(NOT_ENABLED):
        return "hermes_opt_in" if opt_in is not None else "not_in_allow_list"
    if "(missing: " in error:
        return "missing_env"
    if error.startswith(BLOCKED):
        return "blocked"
    return "failed"


def _note_takeovers(rows: list[Listed]) -> None:
    """Note on both rows each tool a bundled plugin declares that another plugin declares too: a load
    gives it to the other one.  Only where a plugin of the pair was never loaded (a load's own notes
    stand for the rest), and only between plugins that are to load."""
    going = [
        r
        for r in rows
        if r.enabled and r.state in ("not loaded yet", "loaded", "last load") and r.declared.get("tools")
    ]
    owners: dict[str, Listed] = {}
    for row in going:
        if row.info.source == "bundled":
            for tool in row.declared["tools"] or ():
                owners.setdefault(tool, row)
    if not owners:
        return
    taken: set[str] = set()
    for row in going:
        if row.info.source == "bundled":
            continue
        for tool in dict.fromkeys(row.declared["tools"] or ()):
            owner = owners.get(tool)
            if owner is None or tool in taken or "not loaded yet" not in (row.state, owner.state):
                continue
            taken.add(tool)  # the first plugin in load order takes it; a later one conflicts
            row.takeovers.append({"tool": tool, "overrides": owner.info.name})
            owner.takeovers.append({"tool": tool, "overridden_by": row.info.name})


def shown_name(name: str) -> str:
    """``name`` as one short line: what is not printable escaped, a long name cut."""
    if not name.isprintable():
        name = name.encode("unicode_escape").decode("ascii")
    return name if len(name) <= MAX_SHOWN_NAME else name[: MAX_SHOWN_NAME - 1] + "…"


def _names(names: tuple[str, ...], prefix: str = "") -> str:
    shown = ", ".join(prefix + shown_name(n) for n in names[:SHOWN_DECLARED])
    left = len(names) - SHOWN_DECLARED
    return shown + (f", … (+{left:,} more)" if left > 0 else "")


def _count(row: Listed, key: str) -> str:
    """A TOOLS or HOOKS cell: the load's count (``*``: the last load's), else the declared one."""
    if row.state in ("loaded", "last load", "deferred"):
        mark = "*" if row.state == "last load" else ""
        return f"{len(getattr(row.info, key))}{mark}"
    names = row.declared.get(key)
    if names is not None:
        return f"{len(names):,} declared"
    return "?" if row.state == "not loaded yet" else "-"


def _plugin_rows(listed: list[Listed]) -> tuple[list[str], list[tuple[str, ...]], list[list[str]], list[str]]:
    """The headers, rows, each plugin's notes (errors, disabled hooks, warnings, declarations,
    takeovers) and the footnotes of the plugin table."""
    loaded_column = any(row.basis != "current" for row in listed)
    headers = [*PLUGIN_HEADERS, "LOADED"] if loaded_column else list(PLUGIN_HEADERS)
    rows, notes = [], []
    for row in listed:
        p = row.info
        if row.state == "not loaded yet":
            status = "enabled"
        else:
            status = plugin_status(p).partition(" (")[0] + ("*" if row.state == "last load" else "")
        counts = _count(row, "tools"), _count(row, "hooks")
        cells = [p.name, p.version or "-", p.kind, p.source, status, *counts]
        if loaded_column:
            cells.append(_LOADED_CELLS[row.state])
        rows.append(tuple(cells))
        lines: list[str] = []
        if p.error:
            lines.append(f"error: {p.error}")
        lines += [f"hook {hook} disabled: {error}" for hook, error in p.hook_errors.items()]
        lines += [f"warning: {w}" for w in p.warnings]
        if row.state == "not loaded yet":
            parts = [
                f"{what} {_names(names, '/' if key == 'commands' else '')}"
                for key, what in (("tools", "tools"), ("hooks", "hooks"), ("commands", "commands"))
                if (names := row.declared.get(key))
            ]
            if parts:
                lines.append(f"declares {'; '.join(parts)}")
        for takeover in row.takeovers[:SHOWN_DECLARED]:
            tool = shown_name(takeover["tool"])
            if "overrides" in takeover:
                what = f"overrides the one plugin '{takeover['overrides']}' declares"
            else:
                what = f"is overridden by plugin '{takeover['overridden_by']}'"
            lines.append(
                f"warning: tool '{tool}' (declared) {what} (a bundled plugin's tool gives way to yours)"
            )
        if len(row.takeovers) > SHOWN_DECLARED:
            lines.append(f"… and {len(row.takeovers) - SHOWN_DECLARED:,} more tools taken over (see --json)")
        notes.append(lines)
    footnotes = []
    bases = {row.basis for row in listed}
    shown = {cell for r in rows for cell in r[5:7]}
    if "last load" in bases:
        footnotes.append("* as of the last load; things changed since.")
    if any(cell.endswith(" declared") for cell in shown):
        footnotes.append(
            "declared: what plugin.yaml says (provides_tools, provides_hooks); a load shows what registers."
        )
    if "?" in shown:
        footnotes.append("? not declared in plugin.yaml: known once the plugin loads.")
    if bases - {"current"}:
        footnotes.append("Listing imports no plugin code: `hermes-kernel plugins list --refresh` loads them.")
    return headers, rows, notes, footnotes


def format_plugin_table(plugins: list[PluginInfo], listed_from: dict[str, str] | None = None) -> str:
    """A readable table of plugins, with each problem on its own indented line.

    ``listed_from`` tells, per plugin, whether its state is ``current``, from the ``last load``
    (counts marked ``*``) or ``unknown`` (never loaded: "not loaded yet").
    """
    listed_from = listed_from or {}
    listed = []
    for info in plugins:
        basis = listed_from.get(info.name, "current")
        row = Listed(info, basis, None)
        row.state = _state(info, basis, None)
        listed.append(row)
    return _format_rows(listed)


def _format_rows(listed: list[Listed]) -> str:
    if not listed:
        return "No plugins found."
    headers, rows, notes, footnotes = _plugin_rows(listed)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row, row_notes in zip(rows, notes, strict=True):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        lines += [f"    {note}" for note in row_notes]
    return "\n".join(lines + footnotes)


def _draw_plugin_table(listed: list[Listed]) -> None:
    """The plugin table drawn with rich (a terminal); the notes under it, by plugin."""
    if not listed:
        output.line("No plugins found.")
        return
    headers, rows, notes, footnotes = _plugin_rows(listed)
    styles = [
        [None, "dim", None, "dim", _STATUS_STYLES.get(row[4].rstrip("*"), "dim"), None, None]
        + (["dim"] if len(headers) > len(PLUGIN_HEADERS) else [])
        for row in rows
    ]
    output.table(headers, rows, styles)
    for row, row_notes in zip(rows, notes, strict=True):
        for note in row_notes:
            output.line(f"{row[0]}: {note}", "error" if note.startswith("error") else "warning")
    for footnote in footnotes:
        output.line(footnote, "dim")


# --------------------------------------------------------------------------- plugins enable / disable


def plugins_enable(args: argparse.Namespace) -> int:
    return _set_disabled(args.name, disable=False)


def plugins_disable(args: argparse.Namespace) -> int:
    return _set_disabled(args.name, disable=True)


def _set_disabled(name: str, *, disable: bool) -> int:
    from ..base.yamledit import update_config

    with unloaded_kernel() as kernel:
        merged, _every = discover(kernel)
        home, config = kernel.home, kernel.config
    opt_in = hermes_marker(home, config)
    items = candidate_items(merged.values())
    found = resolve_name(name, items)
    listed = section(config, "plugins", "disabled")
    listed = listed if isinstance(listed, list) else []
    if found:
        cand: Candidate | None = found[0].obj
        key = found[0].key
        names = {key} | ({found[0].manifest_name} if found[0].manifest_name else set())
    elif not disable and name in listed:
        cand, key, names = None, name, {name}  # a stale entry of a plugin that is gone
    else:
        return unknown_name(name, items)
    path = home / "config.yaml"

    done: list[str] = []

    def change(data: dict[str, Any]) -> bool:
        plugins = data.setdefault("plugins", {})
        if plugins is None:
            plugins = data["plugins"] = {}
        if not isinstance(plugins, dict):
            raise ValueError(f"{path}: 'plugins' is not a mapping; not changing plugins.disabled")
        lists = {}
        for list_key in ("disabled", "enabled"):
            current = plugins.get(list_key)
            if current is not None:
                # Read as the kernel reads it (``disabled: calculator`` is one name), written back as a list.
                current, _note = plugin_names(current, list_key)
                if current is None:
                    raise ValueError(
                        f"{path}: 'plugins.{list_key}' is not a list of names; fix it by hand first"
                    )
            lists[list_key] = current
        done.clear()
        disabled, allowed = lists["disabled"] or [], lists["enabled"]
        if disable:
            if not names & set(disabled):
                plugins["disabled"] = [*disabled, key]
                done.append("added it to plugins.disabled")
            if allowed is not None and names & set(allowed):
                plugins["enabled"] = [v for v in allowed if v not in names]
                done.append("removed it from plugins.enabled")
            return bool(done)
        if names & set(disabled):
            plugins["disabled"] = [v for v in disabled if v not in names]
            done.append("removed it from plugins.disabled")
        # Hermes' allow-list: once config.yaml has one, a plugin runs only when listed in it.
        if allowed is not None and not names & set(allowed):
            plugins["enabled"] = [*allowed, key]
            done.append("added it to plugins.enabled")
        elif allowed is None and cand is not None and _needs_listing(cand, opt_in):
            # A home Hermes has used: the list starts here, with the bundled plugins that ran without it.
            kept = [
                c.key
                for c in merged.values()
                if c.source == "bundled" and _needs_listing(c, "") and c.key not in disabled
            ]
            plugins["enabled"] = [*kept, key]
            also = f" and the bundled plugins that ran without a list ({', '.join(kept)})" if kept else ""
            done.append(f"created plugins.enabled with it{also}")
        return bool(done)

    try:
        changed = update_config(home, change, what="plugins.disabled")
    except (ValueError, OSError) as exc:
        return fail(str(exc))
    verb = "disabled" if disable else "enabled"
    if changed:
        print(f"{verb} '{key}': {' and '.join(done)} in {path}")
    else:
        print(f"'{key}' is already {verb} (plugins.disabled and plugins.enabled in {path}); nothing changed")
    if disable:
        return 0
    if cand is not None and cand.manifest is not None:
        environ, dotenv = dict(os.environ), read_dotenv(home)
        missing = [v.name for v in cand.manifest.requires_env if env_state(v, environ, dotenv) is None]
        if missing:
            print(f"note: '{key}' also needs {', '.join(missing)} (not set): add them to {home / '.env'}")
    if cand is not None and cand.error:
        print(f"note: '{key}' cannot load: {cand.error}")
    return 0


def _needs_listing(cand: Candidate, opt_in: str | None) -> bool:
    """Whether ``cand`` runs only when ``plugins.enabled`` lists it: with any list (``opt_in`` ``""``),
    or with none in a home Hermes has used (``opt_in`` the marker; ``None``: a home the kernel made)."""
    from ..core.records import Choice, _Record

    if opt_in is None:
        return False
    choice = Choice(disabled=set(), enabled=set() if opt_in == "" else None, opt_in=opt_in or None)
    return choice.unlisted(_Record.from_candidate(cand))


def enable_plugin(name: str) -> int:
    """``hermes-kernel plugins enable NAME``: the exit code (the command's own output is printed)."""
    return _set_disabled(name, disable=False)


# --------------------------------------------------------------------------- plugins install
