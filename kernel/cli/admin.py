"""``hermes-kernel plugins info|enable|disable|install|remove``, ``hooks list``, ``logs`` and ``doctor``.

``plugins install SOURCE`` tells its sources apart like this (first rule that applies):

* ``pip:REQUIREMENT``: ``python -m pip install REQUIREMENT`` into the running
  Python environment (a name, a version spec, a wheel, a local project path...).
  The package must declare an entry point in the ``hermes_agent.plugins`` group.
  Extra pip options go through ``--pip-arg=OPTION`` (repeatable), e.g.
  ``--pip-arg=--target=DIR --pip-arg=--no-index``.
* ``git+URL`` or a URL (``https://``, ``http://``, ``ssh://``, ``git://``,
  ``file://``, ``user@host:path``): ``git clone --depth 1`` into a temporary
  directory, then installed like a local directory.
* A local directory holding ``plugin.yaml`` (or ``--subdir`` pointing at one):
  validated and copied into ``<home>/plugins/<name>/`` (``.git`` and
  ``__pycache__`` are left out).
* A local bare git repository, or a directory whose name ends in ``.git``:
  cloned as above.
* A local directory with ``pyproject.toml`` / ``setup.py`` / ``setup.cfg`` and no
  ``plugin.yaml``, or a ``.whl`` / sdist file: installed with pip as above.

Anything else is refused; a bare name is never sent to a package index
without the ``pip:`` prefix.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import read_dotenv, section
from ..discovery import (
    CATEGORIES,
    ENTRY_POINT_GROUP,
    Candidate,
    merge_sources,
)
from ..manifest import MANIFEST_NAMES, EnvVar, Manifest, ManifestError, find_manifest, load_manifest

if TYPE_CHECKING:
    from ..kernel import Kernel, PluginInfo

DISABLED_BY_CONFIG = "disabled via config"
LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
LEVEL_ALIASES = {"warn": "warning", "fatal": "critical", "exception": "error"}
# A record of <home>/logs/agent.log: ``2026-01-02T03:04:05.678Z [warning  ] event key=value``.
LOG_LINE = re.compile(r"^(?P<time>\S+)\s+\[(?P<level>[A-Za-z]+)\s*\]\s?(?P<rest>.*)$")
FOLLOW_INTERVAL = 0.25
_SAFE_DIRNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_URL = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|[\w.-]+@[\w.-]+:)")
# Sources of the surface records (kernel/surfaces): config.yaml sections and <home>/hooks folders.
SURFACE_SOURCES = ("config", "hooks")
_TIERS = {0: "tryfirst", 1: "normal", 2: "trylast", 3: "config"}


def add_commands(commands: Any, *, plugin_actions: Any) -> None:
    """Add this module's subcommands to the ``hermes-kernel`` parser.

    ``plugin_actions`` is the sub-parsers action of ``hermes-kernel plugins``
    (which already has ``list``).
    """
    info = plugin_actions.add_parser(
        "info",
        help="everything about one plugin",
        description="Show one plugin: state, manifest, environment variables, tools, hooks, "
        "commands, skills, warnings and errors. Secret values are never shown.",
    )
    info.add_argument("name", help="the plugin's name as in `plugins list`, or its manifest name")
    info.add_argument("--json", action="store_true", help="print a JSON object")
    info.set_defaults(handler=plugins_info)

    for action, verb in (("enable", "remove it from"), ("disable", "add it to")):
        sub = plugin_actions.add_parser(
            action,
            help=f"{action} a plugin ({verb} plugins.disabled in config.yaml)",
            description=f"{action.capitalize()} a discovered plugin: {verb} the plugins.disabled list "
            "of <home>/config.yaml (the rest of the file is kept). Running it twice changes nothing.",
        )
        sub.add_argument("name", help="the plugin's name as in `plugins list`, or its manifest name")
        sub.set_defaults(handler=plugins_enable if action == "enable" else plugins_disable)

    install = plugin_actions.add_parser(
        "install",
        help="install a plugin from a directory, a git URL or a pip requirement",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    install.add_argument("source", help="a plugin directory, a git URL or path, or pip:REQUIREMENT")
    install.add_argument("--force", action="store_true", help="replace an installed plugin of the same name")
    install.add_argument(
        "--no-input", action="store_true", help="do not ask for missing environment variables"
    )
    install.add_argument(
        "--name", help="the directory name under <home>/plugins (default: the manifest name)"
    )
    install.add_argument("--subdir", help="the plugin's directory inside the source (e.g. a repository)")
    install.add_argument("--ref", help="the git branch or tag to clone")
    install.add_argument(
        "--pip-arg",
        dest="pip_args",
        action="append",
        default=[],
        metavar="OPTION",
        help="an extra option for pip (repeatable; write it as --pip-arg=--no-index)",
    )
    install.set_defaults(handler=plugins_install)

    remove = plugin_actions.add_parser(
        "remove",
        aliases=["rm", "uninstall"],
        help="delete a user plugin from <home>/plugins",
        description="Delete a user plugin's directory under <home>/plugins. Bundled, project and "
        "pip-installed plugins are not removed (disable them instead). Asks for confirmation "
        "unless --yes; without a terminal, --yes is required.",
    )
    remove.add_argument("name", help="the plugin's name as in `plugins list`, its manifest name or directory")
    remove.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    remove.set_defaults(handler=plugins_remove)

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

    logs = commands.add_parser(
        "logs",
        help="show <home>/logs/agent.log",
        description="Print the last lines of <home>/logs/agent.log, optionally only from a level up, "
        "and follow new lines with -f (Ctrl-C stops). The kernel writes warnings and errors there "
        "(everything with HERMES_PLUGINS_DEBUG=1).",
    )
    logs.add_argument(
        "--level",
        type=_level,
        default=None,
        help="the lowest level shown: debug, info, warning, error, critical",
    )
    logs.add_argument(
        "-n", "--lines", type=_count, default=50, metavar="N", help="how many lines to show (default 50)"
    )
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until Ctrl-C")
    logs.add_argument("--json", action="store_true", help="print one JSON object per line")
    logs.set_defaults(handler=logs_command)

    doctor = commands.add_parser(
        "doctor",
        help="find problems and say how to fix them",
        description="Check the configuration, plugins, hooks, environment variables, tools and providers; "
        "print each problem with its fix. Exit code 0 when all is well, 1 when there are problems.",
    )
    doctor.add_argument("--json", action="store_true", help="print a JSON object")
    doctor.set_defaults(handler=doctor_command)


# --------------------------------------------------------------------------- shared helpers


def _fail(message: str, code: int = 1) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def _loaded() -> Kernel:
    from .common import loaded_kernel

    return loaded_kernel()


def _unloaded() -> Kernel:
    from ..kernel import Kernel

    return Kernel()


def _discover(kernel: Kernel) -> tuple[dict[str, Candidate], list[Candidate]]:
    """What ``Kernel.load`` would find, without importing any plugin code.

    Returns the winners by key and every candidate of every source (overridden
    and refused ones too).
    """
    groups = kernel._scan_sources()
    merged, _refused = merge_sources(groups, kernel.log)
    return merged, [c for group in groups for c in group]


@dataclass
class _Named:
    """Something a user may name on the command line: a plugin key, its manifest name, its directory."""

    key: str
    manifest_name: str | None
    dirname: str | None
    obj: Any


def _resolve(name: str, items: list[_Named]) -> list[_Named]:
    """The items ``name`` designates: by key, else manifest name, else directory, else ignoring case."""
    rules = (
        lambda i: i.key == name,
        lambda i: i.manifest_name == name,
        lambda i: i.dirname == name,
        lambda i: name.casefold() in {i.key.casefold(), (i.manifest_name or "").casefold()},
    )
    for rule in rules:
        found = [i for i in items if rule(i)]
        if found:
            return found
    return []


def _unknown(name: str, items: list[_Named]) -> int:
    import difflib

    names = sorted({i.key for i in items} | {i.manifest_name for i in items if i.manifest_name})
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    close += [n for n in names if name.casefold() in n.casefold() and n not in close][: 5 - len(close)]
    if close:
        hint = f"; did you mean: {', '.join(close)}?"
    else:
        hint = f"; known plugins: {', '.join(names)}" if names else "; no plugins were found"
    return _fail(f"no plugin named '{name}'{hint} (see: hermes-kernel plugins list)")


def _manifest_at(path: str | Path | None) -> Manifest | None:
    """The manifest of a plugin directory, or ``None`` (no directory, no manifest, or invalid)."""
    if path is None:
        return None
    file = find_manifest(Path(path))
    if file is None:
        return None
    try:
        return load_manifest(file, Path(path).name)
    except ManifestError:
        return None


def _info_items(plugins: list[PluginInfo]) -> list[_Named]:
    items = []
    for p in plugins:
        manifest = _manifest_at(p.path)
        items.append(_Named(p.name, manifest.name if manifest else None, None, (p, manifest)))
    return items


def _candidate_items(candidates: Iterable[Candidate]) -> list[_Named]:
    return [
        _Named(
            c.key,
            c.manifest.name if c.manifest else None,
            c.path.name if c.path is not None and c.source == "user" else None,
            c,
        )
        for c in candidates
    ]


def _env_state(var: EnvVar, environ: dict[str, str], dotenv: dict[str, str]) -> str | None:
    """Where ``var`` is set: ``environment``, ``.env`` or ``None`` (missing)."""
    if environ.get(var.name):
        return "environment"
    if dotenv.get(var.name):
        return ".env"
    return None


def _status(info: PluginInfo) -> str:
    if info.enabled:
        return "enabled (deferred: imported on the first provider lookup)" if info.deferred else "enabled"
    error = info.error or ""
    if error.startswith(DISABLED_BY_CONFIG):
        return "disabled"
    if "(missing: " in error:
        return "disabled (missing environment variables)"
    return "failed"


def _dump(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


# --------------------------------------------------------------------------- plugins info


def plugins_info(args: argparse.Namespace) -> int:
    environ = dict(os.environ)  # before load() exports <home>/.env
    with _loaded() as kernel:
        items = _info_items(kernel.plugins)
        found = _resolve(args.name, items)
        if not found:
            return _unknown(args.name, items)
        info, manifest = found[0].obj
        if info.deferred:
            kernel.providers.list_providers()  # imports the deferred model provider plugins
            info = next((p for p in kernel.plugins if p.name == info.name), info)
        data = plugin_details(kernel, info, manifest, environ)
    if args.json:
        _dump(data)
    else:
        print(format_plugin_details(data))
    return 0


def plugin_details(
    kernel: Kernel, info: PluginInfo, manifest: Manifest | None, environ: dict[str, str]
) -> dict[str, Any]:
    """``PluginInfo.to_dict()`` plus the manifest, env status, and details of tools, hooks, commands."""
    dotenv = read_dotenv(kernel.home)
    data = info.to_dict()
    data["status"] = _status(info)
    data["manifest"] = None
    if manifest is not None:

        def env(var: EnvVar) -> dict[str, Any]:
            where = _env_state(var, environ, dotenv)
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
                        "order": _TIERS.get(cb.tier, str(cb.tier)),
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
    return data


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
    section_lines("overrides", data["overrides"])
    section_lines("warnings", data["warnings"])
    return "\n".join(lines)


# --------------------------------------------------------------------------- plugins enable / disable


def plugins_enable(args: argparse.Namespace) -> int:
    return _set_disabled(args.name, disable=False)


def plugins_disable(args: argparse.Namespace) -> int:
    return _set_disabled(args.name, disable=True)


def _set_disabled(name: str, *, disable: bool) -> int:
    from ..settings import update_config

    with _unloaded() as kernel:
        merged, _every = _discover(kernel)
        home, config = kernel.home, kernel.config
    items = _candidate_items(merged.values())
    found = _resolve(name, items)
    listed = section(config, "plugins", "disabled")
    listed = listed if isinstance(listed, list) else []
    if found:
        cand: Candidate | None = found[0].obj
        key = found[0].key
        names = {key} | ({found[0].manifest_name} if found[0].manifest_name else set())
    elif not disable and name in listed:
        cand, key, names = None, name, {name}  # a stale entry of a plugin that is gone
    else:
        return _unknown(name, items)
    path = home / "config.yaml"

    def change(data: dict[str, Any]) -> bool:
        plugins = data.setdefault("plugins", {})
        if plugins is None:
            plugins = data["plugins"] = {}
        if not isinstance(plugins, dict):
            raise ValueError(f"{path}: 'plugins' is not a mapping; not changing plugins.disabled")
        current = plugins.get("disabled")
        if current is None:
            current = []
        if not isinstance(current, list) or not all(isinstance(v, str) for v in current):
            raise ValueError(f"{path}: 'plugins.disabled' is not a list of names; fix it by hand first")
        if disable:
            if names & set(current):
                return False
            plugins["disabled"] = [*current, key]
            return True
        kept = [v for v in current if v not in names]
        if len(kept) == len(current):
            return False
        plugins["disabled"] = kept
        return True

    try:
        changed = update_config(home, change, what="plugins.disabled")
    except (ValueError, OSError) as exc:
        return _fail(str(exc))
    if disable:
        if changed:
            print(f"disabled '{key}': added it to plugins.disabled in {path}")
        else:
            print(f"'{key}' is already disabled (plugins.disabled in {path}); nothing changed")
        return 0
    if changed:
        print(f"enabled '{key}': removed it from plugins.disabled in {path}")
    else:
        print(f"'{key}' is already enabled (not in plugins.disabled); nothing changed")
    if cand is not None and cand.manifest is not None:
        environ, dotenv = dict(os.environ), read_dotenv(home)
        missing = [v.name for v in cand.manifest.requires_env if _env_state(v, environ, dotenv) is None]
        if missing:
            print(f"note: '{key}' also needs {', '.join(missing)} (not set): add them to {home / '.env'}")
    if cand is not None and cand.error:
        print(f"note: '{key}' cannot load: {cand.error}")
    return 0


# --------------------------------------------------------------------------- plugins install


class _Aborted(Exception):
    """The user pressed Ctrl-C at a prompt."""


@dataclass
class _Source:
    kind: str  # "dir" | "git" | "pip"
    value: str
    path: Path | None = None
    notes: list[str] = field(default_factory=list)


def classify_source(source: str, subdir: str | None = None) -> _Source:
    """Decide how ``source`` is installed (see the module docstring); ``ValueError`` when it cannot be."""
    if source.startswith("pip:"):
        requirement = source[4:].strip()
        if not requirement or requirement.startswith("-"):
            raise ValueError(f"'{source}': put a requirement after 'pip:' (e.g. pip:some-plugin==1.0)")
        return _Source("pip", requirement)
    if source.startswith("git+"):
        url = source[4:]
        if not (_URL.match(url) or Path(url).expanduser().is_dir()):
            raise ValueError(f"'{source}': after 'git+' comes a URL such as https://host/repo.git")
        return _Source("git", url if _URL.match(url) else Path(url).expanduser().resolve().as_uri())
    if _URL.match(source):
        return _Source("git", source)
    path = Path(source).expanduser()
    if path.is_dir():
        if find_manifest(path) is not None or (subdir and find_manifest(path / subdir) is not None):
            return _Source("dir", str(path), path)
        if path.name.endswith(".git") or _is_bare_repository(path):
            return _Source("git", path.resolve().as_uri())
        if any((path / f).is_file() for f in ("pyproject.toml", "setup.py", "setup.cfg")):
            return _Source("pip", str(path.resolve()))
        return _Source("dir", str(path), path)  # validation explains what is missing
    if path.is_file():
        if path.name.endswith((".whl", ".tar.gz", ".zip")):
            return _Source("pip", str(path.resolve()))
        raise ValueError(f"'{source}' is a file; give a plugin directory, a git URL or pip:REQUIREMENT")
    hint = ""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?\s*([<>=!~].*)?", source):
        hint = f"; to install the Python package '{source}' with pip, use: pip:{source}"
    raise ValueError(f"'{source}' is not a directory, a git URL or a pip requirement{hint}")


def _is_bare_repository(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def plugins_install(args: argparse.Namespace) -> int:
    try:
        source = classify_source(args.source, args.subdir)
    except ValueError as exc:
        return _fail(str(exc))
    if source.kind == "pip":
        if args.name or args.subdir or args.ref:
            return _fail("--name, --subdir and --ref apply to directory and git sources, not to pip")
        return _install_pip(args, source.value)
    if args.pip_args:
        return _fail("--pip-arg applies to pip sources only (pip:REQUIREMENT)")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hermes-kernel-install-") as scratch:
        if source.kind == "git":
            root = Path(scratch) / "clone"
            error = _git_clone(source.value, args.ref, root, interactive=not args.no_input)
            if error is not None:
                return _fail(error)
        else:
            if args.ref:
                return _fail("--ref applies to git sources only")
            assert source.path is not None
            root = source.path
        plugin_dir = root / args.subdir if args.subdir else root
        shown = (root, source.value) if source.kind == "git" else None
        return _install_directory(args, plugin_dir, origin=args.source, shown_root=shown)


def _git_clone(url: str, ref: str | None, dest: Path, *, interactive: bool) -> str | None:
    import shutil
    import subprocess

    git = shutil.which("git")
    if git is None:
        return "git is not installed (it is needed to install from a git URL); install git or clone by hand"
    command = [git, "clone", "--depth", "1", "--quiet"]
    if ref:
        command += ["--branch", ref]
    command += ["--", url, str(dest)]
    env = dict(os.environ)
    env.setdefault("GIT_ALLOW_PROTOCOL", "file:git:http:https:ssh")
    if not interactive or not sys.stdin.isatty():
        env["GIT_TERMINAL_PROMPT"] = "0"
    print(f"cloning {url} ...", file=sys.stderr)
    try:
        result = subprocess.run(
            command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
        )
    except OSError as exc:
        return f"cannot run git: {exc}"
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip() or f"exit code {result.returncode}"
        return f"git clone {url} failed: {detail}"
    return None


def _validate_plugin_dir(plugin_dir: Path) -> Manifest:
    """The plugin's manifest; ``ValueError`` naming the file (and field) when it cannot be installed."""
    if not plugin_dir.is_dir():
        raise ValueError(f"{plugin_dir} is not a directory")
    manifest_file = find_manifest(plugin_dir)
    if manifest_file is None:
        nested = sorted(
            str(p.parent.relative_to(plugin_dir))
            for pattern in ("*/plugin.y*ml", "*/*/plugin.y*ml", "*/*/*/plugin.y*ml")
            for p in plugin_dir.glob(pattern)
            if ".git" not in p.parts
        )
        hint = f" (plugins inside it: {', '.join(nested[:10])}; choose one with --subdir)" if nested else ""
        raise ValueError(
            f"{plugin_dir} has no plugin.yaml: a plugin directory needs plugin.yaml and __init__.py{hint}"
        )
    try:
        manifest = load_manifest(manifest_file, plugin_dir.name)
    except ManifestError as exc:
        raise ValueError(f"invalid manifest: {exc}") from None
    init = plugin_dir / "__init__.py"
    if not init.is_file():
        raise ValueError(f"{plugin_dir} has no __init__.py: the kernel imports the plugin from it")
    try:
        compile(init.read_bytes(), str(init), "exec")
    except SyntaxError as exc:
        raise ValueError(f"{init}: line {exc.lineno}: SyntaxError: {exc.msg}") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{init}: cannot be read: {exc}") from None
    return manifest


def _not_regular(root: Path) -> list[str]:
    """Entries of ``root`` (relative paths) that are symbolic links or special files; ``.git`` and
    ``__pycache__`` are not copied and not looked at."""
    import stat

    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if d not in (".git", "__pycache__")]
        for name in [*dirs, *files]:
            path = Path(folder) / name
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                found.append(f"{path.relative_to(root)} -> {os.readlink(path)}")
            elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                found.append(f"{path.relative_to(root)} (not a regular file)")
    return sorted(found)


def _install_directory(
    args: argparse.Namespace, plugin_dir: Path, *, origin: str, shown_root: tuple[Path, str] | None = None
) -> int:
    import shutil
    import tempfile

    try:
        manifest = _validate_plugin_dir(plugin_dir)
    except ValueError as exc:
        message = str(exc)
        if shown_root is not None:  # a temporary clone: name the URL instead
            message = message.replace(str(shown_root[0]), shown_root[1])
        return _fail(f"{message}; nothing was installed")
    dirname = args.name or manifest.name
    if not _SAFE_DIRNAME.match(dirname) or dirname in CATEGORIES:
        why = "is a category folder" if dirname in CATEGORIES else "is not a plain directory name"
        return _fail(f"'{dirname}' {why}; choose the directory name with --name NAME")
    with _unloaded() as kernel:
        home, config = kernel.home, kernel.config
        merged, every = _discover(kernel)
    plugins_root = home / "plugins"
    dest = plugins_root / dirname
    if plugin_dir.resolve() == dest.resolve() or dest.resolve() in plugin_dir.resolve().parents:
        return _fail(f"{plugin_dir} is the installed plugin itself; nothing to do")
    for cand in every:
        if (
            cand.source == "user"
            and cand.key == manifest.name
            and cand.path is not None
            and cand.path != dest
        ):
            return _fail(
                f"a user plugin named '{manifest.name}' is already installed at {cand.path}; "
                f"remove it first (hermes-kernel plugins remove {cand.path.name})"
            )
    replacing = dest.exists() or dest.is_symlink()
    if replacing and not args.force:
        return _fail(f"{dest} already exists; pass --force to replace it")

    unsafe = _not_regular(plugin_dir)
    if unsafe:
        shown = ", ".join(unsafe[:5]) + (f" and {len(unsafe) - 5} more" if len(unsafe) > 5 else "")
        return _fail(
            f"{origin} holds entries that are not regular files or folders ({shown}); a plugin is installed "
            "from its own regular files only (links could copy files from outside it); nothing was installed"
        )
    plugins_root.mkdir(parents=True, exist_ok=True)
    # Staged in a hidden directory (discovery skips dot names), swapped in at the end.
    staging = Path(tempfile.mkdtemp(prefix=f".install-{dirname}-", dir=plugins_root))
    try:
        staged = staging / dirname
        shutil.copytree(
            plugin_dir,
            staged,
            ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc"),
            ignore_dangling_symlinks=True,
        )
        try:
            answers, missing = _ask_env(home, manifest, no_input=args.no_input)
        except _Aborted:
            print("aborted: nothing was installed and nothing saved", file=sys.stderr)
            return 130
        if replacing:
            os.replace(dest, staging / ".replaced")
        os.replace(staged, dest)
    except OSError as exc:
        return _fail(f"cannot copy {plugin_dir} into {dest}: {exc}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    where = f"{dest}" + (f" (replaced the previous {dirname})" if replacing else "")
    version = f" {manifest.version}" if manifest.version else ""
    print(f"installed plugin '{manifest.name}'{version} from {origin} into {where}")
    _report_env(home, answers, missing)
    previous = merged.get(manifest.name)
    if previous is not None and previous.source != "user":
        print(f"note: it overrides the {previous.source} plugin '{manifest.name}' ({previous.where})")
    _report_next_steps(config, manifest.name)
    return 0


def _ask_env(home: Path, manifest: Manifest, *, no_input: bool) -> tuple[dict[str, str], list[EnvVar]]:
    """Ask for each ``requires_env`` variable set neither in the environment nor in ``<home>/.env``.

    The answers are saved to ``.env`` at once; returns them and the variables
    still missing.  Raises :class:`_Aborted` on Ctrl-C (nothing saved).
    """
    dotenv = read_dotenv(home)
    environ = dict(os.environ)
    missing = [v for v in manifest.requires_env if _env_state(v, environ, dotenv) is None]
    if not missing or no_input:
        return {}, missing
    print(
        f"'{manifest.name}' needs {len(missing)} environment variable(s); the answers go to "
        f"{home / '.env'} (press Enter to skip one, Ctrl-C to abort)."
    )
    answers: dict[str, str] = {}
    for var in missing:
        about = " ".join(x for x in (var.description, f"<{var.url}>" if var.url else "") if x)
        if about:
            print(f"  {var.name}: {about}")
        label = var.prompt or var.name
        try:
            if var.secret and sys.stdin.isatty():
                import getpass

                value = getpass.getpass(f"{label} (hidden): ")
            else:
                value = input(f"{label}: ")
        except KeyboardInterrupt:
            print()
            raise _Aborted from None
        except EOFError:
            print()
            break
        value = value.strip()
        if value:
            answers[var.name] = value
    if answers:
        from ..settings import write_env

        write_env(home, answers)
    return answers, [v for v in missing if v.name not in answers]


def _report_env(home: Path, answers: dict[str, str], missing: list[EnvVar]) -> None:
    if answers:
        print(f"saved {', '.join(answers)} to {home / '.env'} (mode 0600)")
        for name, value in answers.items():
            if "${" in value:
                print(f"warning: the value of {name} contains '${{': .env readers expand ${{NAME}} in it")
    if missing:
        names = ", ".join(v.name for v in missing)
        print(f"still missing: {names}; the plugin stays disabled until they are set in {home / '.env'}")


def _report_next_steps(config: dict[str, Any], name: str) -> None:
    listed = section(config, "plugins", "disabled")
    if isinstance(listed, list) and name in listed:
        print(f"it is listed in plugins.disabled; enable it with: hermes-kernel plugins enable {name}")
    else:
        print(f"it is enabled from the next start (to turn it off: hermes-kernel plugins disable {name})")
    print(f"check it with: hermes-kernel plugins info {name}")


def _install_pip(args: argparse.Namespace, requirement: str) -> int:
    import subprocess
    import tempfile

    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check"]
    if args.no_input:
        command.append("--no-input")
    if args.force:
        command.append("--force-reinstall")
    with tempfile.TemporaryDirectory(prefix="hermes-kernel-pip-") as scratch:
        report_file = Path(scratch) / "report.json"
        command += ["--report", str(report_file), *args.pip_args, requirement]
        print(f"running: {' '.join(command)}", file=sys.stderr)
        sys.stdout.flush()
        try:
            result = subprocess.run(command, stdout=sys.stderr, check=False)
        except OSError as exc:
            return _fail(f"cannot run pip: {exc}")
        if result.returncode != 0:
            return _fail(f"pip install {requirement} failed (exit code {result.returncode})")
        try:
            report = json.loads(report_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            report = {}
    target = _pip_target(args.pip_args)
    names = [
        item["metadata"]["name"]
        for item in report.get("install", [])
        if isinstance(item, dict) and isinstance(item.get("metadata"), dict) and item["metadata"].get("name")
    ]
    if not names:  # already installed: pip reports nothing new
        guessed = _requirement_name(requirement)
        names = [guessed] if guessed else []
    found = list(_plugin_entry_points(names, target))
    if not found:
        listed = ", ".join(names) or requirement
        return _fail(
            f"pip installed {listed}, but it declares no '{ENTRY_POINT_GROUP}' entry point, so the kernel "
            f"will not load it; uninstall it with: {sys.executable} -m pip uninstall {listed}"
        )
    with _unloaded() as kernel:
        home, config = kernel.home, kernel.config
    for dist, entry_points in found:
        plugins = ", ".join(f"'{ep.name}' ({ep.value})" for ep in entry_points)
        print(f"installed package {dist.metadata['Name']} {dist.version}: plugin(s) {plugins}")
        manifest = _dist_manifest(dist)
        if manifest is not None:
            try:
                answers, missing = _ask_env(home, manifest, no_input=args.no_input)
            except _Aborted:
                print("aborted: no variables saved (the package stays installed)", file=sys.stderr)
                return 130
            _report_env(home, answers, missing)
        for ep in entry_points:
            _report_next_steps(config, ep.name)
    if target:
        print(f"note: installed into {target}; the kernel finds it only when that directory is on PYTHONPATH")
    return 0


def _pip_target(pip_args: list[str]) -> str | None:
    for i, arg in enumerate(pip_args):
        if arg in ("-t", "--target") and i + 1 < len(pip_args):
            return pip_args[i + 1]
        if arg.startswith("--target="):
            return arg.split("=", 1)[1]
        if arg.startswith("-t") and len(arg) > 2 and not arg.startswith("--"):
            return arg[2:]
    return None


def _requirement_name(requirement: str) -> str | None:
    path = Path(requirement)
    if path.is_dir() and (path / "pyproject.toml").is_file():
        import tomllib

        try:
            name = tomllib.loads((path / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return name if isinstance(name, str) else None
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    return match.group(0) if match and not path.exists() else None


def _plugin_entry_points(names: list[str], target: str | None) -> Iterator[tuple[Any, list[Any]]]:
    from importlib import metadata

    search = [target] if target else sys.path
    for name in names:
        for dist in metadata.distributions(name=name, path=search):
            eps = [ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
            if eps:
                yield dist, eps
            break


def _dist_manifest(dist: Any) -> Manifest | None:
    """A ``plugin.yaml`` shipped inside an installed package, if any."""
    for file in dist.files or []:
        if file.name in MANIFEST_NAMES:
            path = Path(str(dist.locate_file(file)))
            try:
                return load_manifest(path, path.parent.name)
            except ManifestError as exc:
                print(f"warning: {exc}", file=sys.stderr)
                return None
    return None


# --------------------------------------------------------------------------- plugins remove


def plugins_remove(args: argparse.Namespace) -> int:
    import shutil

    with _unloaded() as kernel:
        home, config = kernel.home, kernel.config
        merged, every = _discover(kernel)
    items = _candidate_items(every)
    found = _resolve(args.name, items)
    if not found:
        return _unknown(args.name, items)
    user = [i for i in found if i.obj.source == "user"]
    if not user:
        return _fail(_not_removable(found[0].obj, home))
    if len(user) > 1:
        paths = ", ".join(str(i.obj.path) for i in user)
        return _fail(f"'{args.name}' names several user plugins ({paths}); give the directory name instead")
    cand: Candidate = user[0].obj
    assert cand.path is not None
    root = (home / "plugins").resolve()
    target = cand.path
    resolved_parent = target.parent.resolve()
    if not (resolved_parent == root or root in resolved_parent.parents):
        return _fail(f"{target} is not under {root}; not removing it")
    if not args.yes:
        if not sys.stdin.isatty():
            return _fail(f"about to delete {target}: stdin is not a terminal, so pass --yes to confirm")
        try:
            answer = input(f"Delete plugin '{cand.key}' ({target})? [y/N] ")
        except (EOFError, KeyboardInterrupt):
            print()
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print("cancelled; nothing removed")
            return 1
    try:
        if target.is_symlink():
            target.unlink()
        else:
            shutil.rmtree(target)
    except OSError as exc:
        return _fail(f"cannot delete {target}: {exc}")
    print(f"removed plugin '{cand.key}' ({target})")
    listed = section(config, "plugins", "disabled")
    if isinstance(listed, list) and cand.key in listed:
        print(f"note: '{cand.key}' is still listed in plugins.disabled in {home / 'config.yaml'}")
    fallback = [c for c in every if c.key == cand.key and c.source in ("bundled", "entrypoint")]
    if merged.get(cand.key) is cand and fallback:
        print(f"note: the {fallback[-1].source} plugin '{cand.key}' ({fallback[-1].where}) is used again")
    print(f"its variables in {home / '.env'} and settings in config.yaml were kept")
    return 0


def _not_removable(cand: Candidate, home: Path) -> str:
    disable = f"disable it instead: hermes-kernel plugins disable {cand.key}"
    if cand.source == "bundled":
        return f"'{cand.key}' is bundled with hermes-kernel ({cand.where}) and cannot be removed; {disable}"
    if cand.source == "entrypoint":
        dist = getattr(getattr(cand.entry_point, "dist", None), "name", None) or "its package"
        return (
            f"'{cand.key}' comes from the installed Python package '{dist}' ({cand.where}); "
            f"uninstall it with: {sys.executable} -m pip uninstall {dist}; or {disable}"
        )
    return (
        f"'{cand.key}' is a {cand.source} plugin ({cand.where}); only plugins under {home / 'plugins'} "
        f"are removed by this command; delete that directory yourself, or {disable}"
    )


# --------------------------------------------------------------------------- hooks list


def hooks_list(args: argparse.Namespace) -> int:
    with _loaded() as kernel:
        kernel.providers.list_providers()  # model provider plugins may register hooks too
        known = list(kernel.hook_names)
        others = sorted({h for p in kernel.plugins for h in p.hooks} - set(known))
        rows = []
        for hook in known + others:
            callbacks = [
                {
                    "plugin": cb.plugin,
                    "callback": cb.label,
                    "order": _TIERS.get(cb.tier, str(cb.tier)),
                    "async": cb.is_async,
                    "native": cb.native,
                    "disabled": cb.error is not None,
                    "error": cb.error,
                }
                for cb in kernel.hook_callbacks(hook)
            ]
            rows.append({"hook": hook, "known": hook in known, "callbacks": callbacks})
    if args.json:
        _dump(rows)
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
            return _fail(f"cannot read the payload {args.payload}: {exc}", 2)
    with _unloaded() as kernel:
        problem = shell_hooks.unknown_event(args.event, kernel.hook_names)
        if problem is not None:
            return _fail(problem, 2)
        try:
            kwargs = shell_hooks.test_kwargs(args.event, args.tool, payload)
        except ValueError as exc:
            return _fail(f"{args.payload}: {exc}", 2)
        for key, value in read_dotenv(kernel.home).items():  # as the kernel's load() would
            os.environ.setdefault(key, value)
        rows, parsed = shell_hooks.run_test(kernel, args.event, kwargs)
        problems = list(kernel.problems)  # config.yaml itself unreadable, for one
    for message in problems + parsed.problems + parsed.warnings:
        print(f"warning: {message}", file=sys.stderr)
    if args.json:
        _dump(rows)
    else:
        print(shell_hooks.format_test(args.event, rows))
    return 1 if any(row.get("error") for row in rows) else 0


# --------------------------------------------------------------------------- logs


def _level(text: str) -> str:
    name = LEVEL_ALIASES.get(text.strip().lower(), text.strip().lower())
    if name not in LEVELS:
        raise argparse.ArgumentTypeError(f"unknown level '{text}' (use one of: {', '.join(LEVELS)})")
    return name


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("the number of lines cannot be negative")
    return value


class _LogFilter:
    """Keeps the level of the record in progress, so a traceback line goes with its record."""

    def __init__(self, minimum: str | None, as_json: bool) -> None:
        self.minimum = LEVELS[minimum] if minimum else 0
        self.as_json = as_json
        self.level: str | None = None

    def __call__(self, line: str) -> str | None:
        """The text to print for ``line`` (without its newline), or ``None`` when filtered out."""
        match = LOG_LINE.match(line)
        if match:
            self.level = match["level"].lower()
        level = LEVEL_ALIASES.get(self.level or "", self.level)
        rank = LEVELS.get(level or "")
        if rank is not None and rank < self.minimum:
            return None
        if not self.as_json:
            return line
        if match:
            rest = match["rest"]
            return json.dumps(
                {"time": match["time"], "level": level, "event": rest.split(" ", 1)[0], "text": line},
                ensure_ascii=False,
            )
        return json.dumps({"time": None, "level": level, "event": None, "text": line}, ensure_ascii=False)


def logs_command(args: argparse.Namespace) -> int:
    from ..config import resolve_home

    path = resolve_home(None) / "logs" / "agent.log"
    keep = _LogFilter(args.level, args.json)
    position = 0
    if path.is_file():
        last: deque[str] = deque(maxlen=args.lines)
        with open(path, "rb") as handle:
            for raw in handle:
                text = keep(raw.decode("utf-8", "replace").rstrip("\r\n"))
                if text is not None:
                    last.append(text)
            position = handle.tell()
        for text in last:
            print(text)
    else:
        print(
            f"No log yet: {path} does not exist. The kernel writes warnings and errors there "
            "(everything with HERMES_PLUGINS_DEBUG=1)."
        )
    if not args.follow:
        return 0
    sys.stdout.flush()
    with contextlib.suppress(KeyboardInterrupt):
        _follow(path, position, keep)
    return 0


def _follow(path: Path, position: int, keep: _LogFilter) -> None:
    """Print the lines appended to ``path`` until Ctrl-C; starts over when the file is replaced."""
    handle = None
    inode = None
    pending = b""
    try:
        while True:
            if handle is None:
                try:
                    handle = open(path, "rb")  # noqa: SIM115 - kept open across polls
                except FileNotFoundError:
                    time.sleep(FOLLOW_INTERVAL)
                    continue
                inode = os.fstat(handle.fileno()).st_ino
                handle.seek(position)
            chunk = handle.read()
            if chunk:
                *lines, pending = (pending + chunk).split(b"\n")
                for raw in lines:
                    text = keep(raw.decode("utf-8", "replace").rstrip("\r"))
                    if text is not None:
                        print(text, flush=True)
                continue
            time.sleep(FOLLOW_INTERVAL)
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                continue
            if stat.st_ino != inode or stat.st_size < handle.tell():
                handle.close()
                handle, position, pending = None, 0, b""
    finally:
        if handle is not None:
            handle.close()


# --------------------------------------------------------------------------- doctor


@dataclass
class Finding:
    """One thing ``doctor`` found: ``level`` is ``error``, ``warning`` or ``info``."""

    level: str
    area: str
    subject: str
    problem: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "level": self.level,
            "area": self.area,
            "subject": self.subject,
            "problem": self.problem,
            "fix": self.fix,
        }


def doctor_command(args: argparse.Namespace) -> int:
    from ..kernel import Kernel

    environ = dict(os.environ)
    with Kernel() as kernel:
        kernel.load()
        findings = diagnose(kernel, environ)
        plugins = kernel.plugins
        tools = len(kernel.tools)
        home = kernel.home
    errors = sum(1 for f in findings if f.level == "error")
    warnings = sum(1 for f in findings if f.level == "warning")
    if args.json:
        _dump(
            {
                "ok": errors == 0,
                "home": str(home),
                "errors": errors,
                "warnings": warnings,
                "findings": [f.to_dict() for f in findings],
            }
        )
        return 1 if errors else 0
    print(f"hermes-kernel doctor: home {home}")
    for finding in findings:
        tag = {"error": "[error]", "warning": "[warn] ", "info": "[info] "}[finding.level]
        print(f"{tag} {finding.area} {finding.subject}: {finding.problem}")
        if finding.fix:
            print(f"        fix: {finding.fix}")
    enabled = sum(1 for p in plugins if p.enabled)
    if errors:
        print(f"{errors} problem(s), {warnings} warning(s).")
    else:
        extra = f", {warnings} warning(s)" if warnings else ""
        print(f"All is well: {enabled} plugin(s) enabled, {tools} tool(s){extra}.")
    return 1 if errors else 0


def diagnose(kernel: Kernel, environ: dict[str, str]) -> list[Finding]:
    """Every problem of a loaded kernel, each with the way to fix it."""
    home = kernel.home
    env_file = home / ".env"
    config_file = home / "config.yaml"
    kernel.providers.list_providers()  # import the deferred model provider plugins
    findings: list[Finding] = []

    provider_problems = kernel.providers.problems()
    provider_texts = {text for _slot, text in provider_problems}
    for problem in dict.fromkeys(kernel.problems):
        if problem not in provider_texts:
            findings.append(Finding("error", "config", str(config_file), problem, f"edit {config_file}"))

    for info in kernel.plugins:
        manifest = _manifest_at(info.path)
        subject = f"'{info.name}'"
        error = info.error or ""
        if info.source in SURFACE_SOURCES and error:
            if error in kernel.problems:
                continue  # already reported as a config error
            if error.startswith("disabled"):
                fix = f"set enabled: true in {config_file}"
                findings.append(Finding("info", "surface", subject, error, fix))
                continue
        if error.startswith(DISABLED_BY_CONFIG):
            findings.append(
                Finding(
                    "info",
                    "plugin",
                    subject,
                    "disabled via config (plugins.disabled)",
                    f"hermes-kernel plugins enable {info.name}",
                )
            )
            continue
        if "(missing: " in error:
            variables = manifest.requires_env if manifest else ()
            # The loaded kernel has exported <home>/.env into os.environ.
            missing = [v for v in variables if not os.environ.get(v.name)]
            if not missing:
                findings.append(
                    Finding("error", "plugin", subject, error, f"set the missing variables in {env_file}")
                )
            for var in missing:
                about = " ".join(x for x in (var.description, f"<{var.url}>" if var.url else "") if x)
                findings.append(
                    Finding(
                        "error",
                        "plugin",
                        subject,
                        f"disabled: requires {var.name}, which is not set" + (f" ({about})" if about else ""),
                        f"set {var.name} in {env_file} (or run: hermes-kernel plugins install again without "
                        "--no-input to be asked)",
                    )
                )
            continue
        if error:
            area = "surface" if info.source in SURFACE_SOURCES else "plugin"
            findings.append(Finding("error", area, subject, error, _plugin_fix(info, error)))
        for hook, hook_error in info.hook_errors.items():
            findings.append(
                Finding(
                    "error",
                    "hook",
                    f"{hook} of '{info.name}'",
                    f"callback disabled after it failed: {hook_error}",
                    f"fix the callback in {info.path or info.name}; it runs again on the next start",
                )
            )
        for warning in info.warnings:
            if warning not in kernel.problems:  # already reported as a config error
                findings.append(Finding("warning", "plugin", subject, warning, ""))

    for info in kernel.plugins:
        if info.source in SURFACE_SOURCES and not info.error:
            summary = info.description or info.kind
            findings.append(Finding("info", "surface", f"'{info.name}'", f"{info.kind}: {summary}"))

    for row in kernel.gateway.status():
        state = f"enabled ({row.source})" if row.enabled else f"not enabled: {row.reason}"
        findings.append(Finding("info", "platform", f"'{row.name}'", f"{row.label}: {state}"))

    for tool in kernel.tools.all():
        ok, reason = kernel.tools.available(tool)
        if ok:
            continue
        missing_vars = [v for v in tool.requires_env if not os.environ.get(v)]
        fix = (
            f"set {', '.join(missing_vars)} in {env_file}"
            if missing_vars
            else "see the plugin's documentation"
        )
        findings.append(
            Finding("warning", "tool", f"'{tool.name}' of '{tool.plugin}'", f"unavailable: {reason}", fix)
        )

    for slot, problem in provider_problems:
        findings.append(
            Finding(
                "error",
                "provider",
                slot,
                problem,
                f"choose an available provider in {config_file} (see: hermes-kernel providers list)",
            )
        )
    for row in kernel.providers.status():
        if row.active and not row.available and row.plugin is not None:
            findings.append(
                Finding(
                    "error",
                    "provider",
                    f"{row.slot} '{row.name}'",
                    f"selected but not available: {row.reason}",
                    "make it available (see the reason) or select another provider in "
                    f"{config_file} (see: hermes-kernel providers list)",
                )
            )
    if not kernel.providers.model_config().get("provider"):
        findings.append(
            Finding(
                "info",
                "provider",
                "model",
                "no model provider configured (chat and run need one)",
                f"set model.provider in {config_file} (e.g. scripted, with model.script)",
            )
        )
    return findings


def _plugin_fix(info: PluginInfo, error: str) -> str:
    where = info.path or info.name
    if info.source == "hooks":
        return f"fix the hook folder {where} as the message says, or remove it"
    if info.source == "config":
        return "fix its section of config.yaml as the message says (see: hermes-kernel doctor --json)"
    if error.startswith("invalid manifest"):
        return "fix the manifest file named in the error"
    if "already used by" in error:
        return (
            "rename one of them (manifest 'name') or remove one: "
            f"hermes-kernel plugins remove {Path(where).name}"
        )
    if error.startswith("import failed"):
        return (
            f"fix the import error in {where} (HERMES_PLUGINS_DEBUG=1 writes the traceback to the log), "
            f"or disable it: hermes-kernel plugins disable {info.name}"
        )
    if error.startswith("register() failed"):
        return (
            f"fix register() in {where} (HERMES_PLUGINS_DEBUG=1 writes the traceback to the log), "
            f"or disable it: hermes-kernel plugins disable {info.name}"
        )
    return f"see the error; or disable it: hermes-kernel plugins disable {info.name}"
