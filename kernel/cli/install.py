"""``hermes-kernel plugins install|update|remove``: where plugins come from, and where they go.

Each install is recorded in ``<home>/plugins/.installs.json`` (see :func:`read_records`): the source of
a directory plugin (a git URL with its ref and commit, or a local directory) with a hash of every file
it installed, and for a pip package its requirement, pip options, environment and whether the package
was already there before.  ``plugins update`` fetches from that source again; ``plugins remove``
uninstalls a package only when this record says ``plugins install`` put it there.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.config import plugin_names, read_dotenv, section
from ..core.loader.discovery import (
    CATEGORIES,
    ENTRY_POINT_GROUP,
    Candidate,
)
from ..core.loader.manifest import (
    MANIFEST_NAMES,
    EnvVar,
    Manifest,
    ManifestError,
    find_manifest,
    load_manifest,
)
from .common import (
    DISABLED_BY_CONFIG,
    NOT_ENABLED,
    candidate_items,
    discover,
    env_state,
    fail,
    loaded_kernel,
    manifest_at,
    resolve_name,
    unknown_name,
    unloaded_kernel,
)

_SAFE_DIRNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_URL = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|[\w.-]+@[\w.-]+:)")
#: Where installs are recorded, under the home.
RECORDS_FILE = Path("plugins") / ".installs.json"
_RECORDS_FORMAT = 1
_MAX_RECORDS_BYTES = 4 * 1024 * 1024
#: The kernel's own distribution: never uninstalled by ``plugins remove``.
KERNEL_DISTRIBUTION = "hermes-kernel"
_NOT_COPIED = (".git", "__pycache__")

INSTALL_DESCRIPTION = """\
Install a plugin. SOURCE is told apart by the first rule that applies:

  pip:REQUIREMENT
      python -m pip install REQUIREMENT into the running Python environment (a
      name, a version spec, a wheel, a local project path...). The package
      must declare an entry point in the hermes_agent.plugins group. Extra pip
      options go through --pip-arg=OPTION (repeatable), for example
      --pip-arg=--target=DIR --pip-arg=--no-index.
  git+URL, or a URL (https://, http://, ssh://, git://, file://, user@host:path)
      git clone --depth 1 into a temporary directory, then installed like a
      local directory (--ref for a branch or a tag).
  a local directory holding plugin.yaml (or --subdir pointing at one)
      validated, then copied into <home>/plugins/<name>/ (.git and __pycache__
      are left out).
  a local bare git repository, or a directory whose name ends in .git
      cloned as above.
  a local directory with pyproject.toml, setup.py or setup.cfg and no
  plugin.yaml, or a .whl or sdist file
      installed with pip as above.

Anything else is refused; a bare name is never sent to a package index without
the pip: prefix. An installed plugin of the same name is replaced only with
--force; to get the newest version of an installed plugin's source, use
'hermes-kernel plugins update NAME'.

Where each plugin came from is recorded in <home>/plugins/.installs.json: that
is what 'plugins update' fetches from again, and how 'plugins remove' knows that
a pip package was installed by this command (only such a package is
uninstalled)."""

UPDATE_DESCRIPTION = """\
Fetch the newest version of installed plugins from where 'plugins install'
got them:

  from a git URL: cloned again at the branch or tag it was installed from (the
      remote's default branch when none was given); the new commit's manifest is
      validated before anything is replaced, and a broken one leaves the
      installed copy as it was.
  from a local directory: copied again from that directory.
  from pip: python -m pip install --upgrade with the same requirement and pip
      options (a --target directory stays the target).

A plugin whose directory was changed since it was installed is not replaced
unless --force. Bundled plugins change with hermes-kernel itself; a plugin
directory made by hand, a project plugin and a package that 'plugins install'
did not install have no recorded source: the command says so and changes
nothing."""

REMOVE_DESCRIPTION = """\
Remove an installed plugin: delete a user plugin's directory under
<home>/plugins, or uninstall the pip package of an entry-point plugin, but only
a package that 'plugins install' installed (recorded in
<home>/plugins/.installs.json). A package that was already installed before (by
you, or as another package's dependency), one that another installed package
requires, and hermes-kernel itself are never uninstalled; neither are the
dependencies pip installed with the plugin. Bundled and project plugins are not
removed (disable them instead). Asks for confirmation unless --yes; without a
terminal, --yes is required."""


def add_commands(plugin_actions: Any) -> None:
    """Add this group's subcommands to the ``hermes-kernel`` parser."""
    install = plugin_actions.add_parser(
        "install",
        help="install a plugin from a directory, a git URL or a pip requirement",
        description=INSTALL_DESCRIPTION,
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
        "--enable",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="where only enabled plugins run (a home Hermes Agent has used, or a plugins.enabled list), "
        "enable it (--enable) or leave it off (--no-enable) without asking",
    )
    _add_pip_arg(install, "an extra pip option, repeatable (--pip-arg=--no-index)")
    install.set_defaults(handler=plugins_install)

    update = plugin_actions.add_parser(
        "update",
        aliases=["upgrade"],
        help="fetch the newest version of installed plugins from their source",
        description=UPDATE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    update.add_argument(
        "names", nargs="*", metavar="NAME", help="a plugin's name as in 'plugins list', or its directory"
    )
    update.add_argument("--all", action="store_true", help="update every plugin 'plugins install' installed")
    update.add_argument(
        "--force", action="store_true", help="replace a plugin directory even if it was changed by hand"
    )
    update.add_argument(
        "--no-input", action="store_true", help="do not ask for environment variables a new version needs"
    )
    _add_pip_arg(update, "a pip option added to those of the install (repeatable)")
    update.set_defaults(handler=plugins_update)

    remove = plugin_actions.add_parser(
        "remove",
        aliases=["rm", "uninstall"],
        help="delete a user plugin, or uninstall a pip plugin that install put there",
        description=REMOVE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    remove.add_argument(
        "name", help="the plugin's name as in 'plugins list', its manifest name, directory or package"
    )
    remove.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    remove.set_defaults(handler=plugins_remove)


def _add_pip_arg(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument(
        "--pip-arg", dest="pip_args", action="append", default=[], metavar="OPTION", help=text
    )


class _Aborted(Exception):
    """The user pressed Ctrl-C at a prompt."""


# --------------------------------------------------------------------------- the install records


def records_path(home: Path) -> Path:
    """``<home>/plugins/.installs.json`` (a dot name: plugin discovery never looks at it)."""
    return home / RECORDS_FILE


def read_records(home: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """The install records: ``{"plugins": {dirname: {...}}, "packages": {dist: {...}}}``.

    ``plugins`` is keyed by the directory under ``<home>/plugins``; its records
    have ``kind`` ``git`` (``url``, ``ref``, ``subdir``, ``commit``, ``branch``)
    or ``dir`` (``path``), and ``name``, ``version``, ``files`` (relative path
    to SHA-256 of each installed file).  ``packages`` is keyed by the
    normalized distribution name: ``name``, ``requirement``, ``pip_args``,
    ``target``, ``prefix``, ``python``, ``cwd``, ``version``,
    ``entry_points``, ``owned`` (pip installed it in that run; it was not
    there before) and ``pulled_in`` (what pip installed along with it).  A
    missing, unreadable or malformed file counts as empty; an entry whose key
    is not a plain name is ignored.
    """
    path = records_path(home)
    empty: dict[str, dict[str, dict[str, Any]]] = {"plugins": {}, "packages": {}}
    try:
        if path.stat().st_size > _MAX_RECORDS_BYTES:
            print(f"warning: {path} is larger than {_MAX_RECORDS_BYTES} bytes; ignoring it", file=sys.stderr)
            return empty
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return empty
    except (OSError, ValueError) as exc:
        print(f"warning: {path} cannot be read ({exc}); ignoring it", file=sys.stderr)
        return empty
    if not isinstance(data, dict):
        return empty
    for kind in ("plugins", "packages"):
        entries = data.get(kind)
        if isinstance(entries, dict):
            empty[kind] = {
                str(k): v for k, v in entries.items() if isinstance(v, dict) and _SAFE_DIRNAME.match(str(k))
            }
    return empty


def _change_records(home: Path, change: Callable[[dict[str, dict[str, dict[str, Any]]]], None]) -> None:
    """Re-read the records under a lock, apply ``change``, write them back atomically (mode 0600)."""
    from ..base.yamledit import atomic_write, file_lock

    path = records_path(home)
    try:
        with file_lock(path):
            records = read_records(home)
            change(records)
            data = {"format": _RECORDS_FORMAT, **records}
            atomic_write(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    except OSError as exc:
        print(
            f"warning: cannot write {path}: {exc}; 'plugins update' will not know this source",
            file=sys.stderr,
        )


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def normalize_dist(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``Hk_Pip.Plugin`` is ``hk-pip-plugin``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _record_str(record: dict[str, Any], key: str) -> str | None:
    value = record.get(key)
    return value if isinstance(value, str) and value else None


def _record_list(record: dict[str, Any], key: str) -> list[str]:
    value = record.get(key)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


# --------------------------------------------------------------------------- sources


@dataclass
class _Source:
    kind: str  # "dir" | "git" | "pip"
    value: str
    path: Path | None = None
    notes: list[str] = field(default_factory=list)


def classify_source(source: str, subdir: str | None = None) -> _Source:
    """Decide how ``source`` is installed (see ``INSTALL_DESCRIPTION``); ``ValueError`` when it cannot be."""
    if source.startswith("-"):
        raise ValueError(f"'{source}' looks like an option, not a source; a source never starts with '-'")
    if source.startswith("pip:"):
        requirement = source[4:].strip()
        if not requirement or requirement.startswith("-"):
            raise ValueError(f"'{source}': put a requirement after 'pip:' (e.g. pip:some-plugin==1.0)")
        return _Source("pip", requirement)
    if source.startswith("git+"):
        url = source[4:]
        if url.startswith("-") or not (_URL.match(url) or Path(url).expanduser().is_dir()):
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


def _safe_subdir(subdir: str | None) -> str | None:
    """``subdir`` when it stays inside its root (no absolute path, no ``..``); ``ValueError`` otherwise."""
    if subdir is None:
        return None
    parts = Path(subdir).parts
    if not subdir.strip() or Path(subdir).is_absolute() or ".." in parts:
        raise ValueError(f"--subdir '{subdir}' must be a relative path inside the source, without '..'")
    return subdir


# --------------------------------------------------------------------------- plugins install


def plugins_install(args: argparse.Namespace) -> int:
    try:
        source = classify_source(args.source, args.subdir)
        _safe_subdir(args.subdir)
    except ValueError as exc:
        return fail(str(exc))
    if source.kind == "pip":
        if args.name or args.subdir or args.ref:
            return fail("--name, --subdir and --ref apply to directory and git sources, not to pip")
        return _install_pip(args, source.value)
    if args.pip_args:
        return fail("--pip-arg applies to pip sources only (pip:REQUIREMENT)")
    if args.ref is not None and (not args.ref.strip() or args.ref.startswith("-")):
        return fail(f"--ref '{args.ref}' is not a branch or tag name")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hermes-kernel-install-") as scratch:
        origin: dict[str, Any]
        if source.kind == "git":
            root = Path(scratch) / "clone"
            error = _git_clone(source.value, args.ref, root, interactive=not args.no_input)
            if error is not None:
                return fail(error)
            commit, branch = _git_head(root)
            origin = {"kind": "git", "url": source.value, "ref": args.ref, "subdir": args.subdir}
            origin |= {"commit": commit, "branch": branch}
        else:
            if args.ref:
                return fail("--ref applies to git sources only")
            assert source.path is not None
            root = source.path
            plugin_path = (root / args.subdir) if args.subdir else root
            origin = {"kind": "dir", "path": str(plugin_path.resolve())}
        plugin_dir = root / args.subdir if args.subdir else root
        shown = (root, source.value) if source.kind == "git" else None
        linked = _source_links(root, args.subdir)
        if linked is not None:
            if shown is not None:  # a temporary clone: name the URL instead
                linked = linked.replace(str(root), source.value)
            return fail(f"{args.source}: {linked}; nothing was installed")
        return _install_directory(args, plugin_dir, origin=origin, shown_root=shown)


def _install_command(args: argparse.Namespace, *extra: str) -> str:
    """The ``hermes-kernel plugins install ...`` command line of ``args``, plus ``extra``."""
    words = ["hermes-kernel", "plugins", "install", args.source]
    for option in ("name", "subdir", "ref"):
        value = getattr(args, option, None)
        if value:
            words += [f"--{option}", value]
    words += [f"--pip-arg={a}" for a in getattr(args, "pip_args", [])]
    return shlex.join([*words, *extra])


def _git_clone(url: str, ref: str | None, dest: Path, *, interactive: bool) -> str | None:
    """Clone ``url`` (at ``ref``) into ``dest``; the error message, or ``None``."""
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
    from . import output

    print(f"cloning {url}" + (f" (at {ref})" if ref else "") + " ...", file=sys.stderr)
    try:
        with output.status("git clone in progress ..."):
            result = subprocess.run(
                command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
            )
    except OSError as exc:
        return f"cannot run git: {exc}"
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip() or f"exit code {result.returncode}"
        return f"git clone {url} failed: {detail}"
    return None


def _git_head(clone: Path) -> tuple[str | None, str | None]:
    """The commit a clone is at, and its branch (``None`` for a tag: a detached head)."""
    import shutil
    import subprocess

    git = shutil.which("git") or "git"

    def ask(*words: str) -> str | None:
        try:
            result = subprocess.run(
                [git, "-C", str(clone), *words],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=False,
            )
        except OSError:
            return None
        return (result.stdout.strip() or None) if result.returncode == 0 else None

    return ask("rev-parse", "HEAD"), ask("symbolic-ref", "--short", "-q", "HEAD")


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
        dirs[:] = [d for d in dirs if d not in _NOT_COPIED]
        for name in [*dirs, *files]:
            path = Path(folder) / name
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                found.append(f"{path.relative_to(root)} -> {os.readlink(path)}")
            elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                found.append(f"{path.relative_to(root)} (not a regular file)")
    return sorted(found)


def _link_on_the_way(root: Path, subdir: str | None) -> str | None:
    """The first folder of ``subdir`` under ``root`` that is a symbolic link (``path -> target``)."""
    at = root
    for part in Path(subdir).parts if subdir else ():
        at = at / part
        if at.is_symlink():
            return f"{at.relative_to(root).as_posix()} -> {os.readlink(at)}"
    return None


def _source_links(root: Path, subdir: str | None) -> str | None:
    """Why the plugin folder ``root/subdir`` is not installed for a link on the way to it or inside it;
    ``None`` when there is none.  Nothing a link points to is read: not even the manifest."""
    link = _link_on_the_way(root, subdir)
    if link is not None:
        return (
            f"--subdir {subdir} goes through the symbolic link '{link}' inside the source; an install "
            "copies only what its source holds, never what a link points to: give --subdir the real "
            "folder, or put the plugin's own files in the source instead of the link"
        )
    plugin_dir = root / subdir if subdir else root
    # Only a folder that is meant to be the plugin: without a manifest, validation says what is missing.
    if not any(os.path.lexists(plugin_dir / name) for name in MANIFEST_NAMES):
        return None
    unsafe = _not_regular(plugin_dir)
    if not unsafe:
        return None
    shown = ", ".join(unsafe[:5]) + (f" and {len(unsafe) - 5} more" if len(unsafe) > 5 else "")
    return (
        f"{plugin_dir} holds entries that are not regular files or folders ({shown}); a plugin is installed "
        "from its own regular files only (a symbolic link could copy files from outside it): replace each "
        "link by the file or folder itself"
    )


def _pip_project_links(project: Path) -> str | None:
    """Why the local pip project ``project`` is not built: a symbolic link in it that leads outside it
    (the build would copy what it points to into the package); ``None`` when there is none.  Links
    inside its top-level ``.git`` and virtual environments (a ``pyvenv.cfg``) are not looked at."""
    top = os.path.realpath(project)
    for folder, dirs, files in os.walk(project, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            if path.is_symlink() and os.path.commonpath([top, os.path.realpath(path)]) != top:
                rel = path.relative_to(project).as_posix()
                return (
                    f"{project}: '{rel} -> {os.readlink(path)}' is a symbolic link to outside the project; "
                    "building it would copy what the link points to into the installed package: replace "
                    "the link by the file or folder itself"
                )
        if Path(folder) == project:  # os.walk never enters a linked folder; these are not packaged
            dirs[:] = [d for d in dirs if d != ".git" and not (project / d / "pyvenv.cfg").is_file()]
    return None


def tree_hashes(root: Path) -> dict[str, str]:
    """SHA-256 of each file under ``root`` that an install copies (relative path: hex digest)."""
    import hashlib

    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in _NOT_COPIED)
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = Path(folder) / name
            try:
                if path.is_symlink():
                    digest = "link:" + os.readlink(path)
                else:
                    digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError as exc:
                digest = f"unreadable: {exc}"
            out[path.relative_to(root).as_posix()] = digest
    return out


def _changes(recorded: dict[str, str], current: dict[str, str]) -> list[str]:
    """What differs between two :func:`tree_hashes` (``changed: a``, ``added: b``, ``deleted: c``)."""
    changed = sorted(k for k in recorded.keys() & current.keys() if recorded[k] != current[k])
    added = sorted(current.keys() - recorded.keys())
    deleted = sorted(recorded.keys() - current.keys())
    out = []
    for label, names in (("changed", changed), ("added", added), ("deleted", deleted)):
        if names:
            more = f" and {len(names) - 5} more" if len(names) > 5 else ""
            out.append(f"{label}: {', '.join(names[:5])}{more}")
    return out


@dataclass
class _Placed:
    """A plugin directory copied into place, and the variables asked for on the way."""

    manifest: Manifest
    dest: Path
    replaced: bool
    answers: dict[str, str]
    missing: list[EnvVar]
    files: dict[str, str]


def _place(
    plugin_dir: Path,
    dest: Path,
    manifest: Manifest,
    home: Path,
    *,
    origin: str,
    no_input: bool,
    nothing: str = "nothing was installed",
) -> _Placed | int:
    """Copy ``plugin_dir`` to ``dest`` through a hidden staging directory, asking for missing variables
    on the way; the old ``dest`` is swapped out only at the end.  The exit code on failure (``nothing``
    says what that left)."""
    import shutil
    import tempfile

    unsafe = _not_regular(plugin_dir)
    if unsafe:
        shown = ", ".join(unsafe[:5]) + (f" and {len(unsafe) - 5} more" if len(unsafe) > 5 else "")
        return fail(
            f"{origin} holds entries that are not regular files or folders ({shown}); a plugin is installed "
            f"from its own regular files only (links could copy files from outside it); {nothing}"
        )
    plugins_root = dest.parent
    replacing = dest.exists() or dest.is_symlink()
    try:
        plugins_root.mkdir(parents=True, exist_ok=True)
        # Staged in a hidden directory (discovery skips dot names), swapped in at the end.
        staging = Path(tempfile.mkdtemp(prefix=f".install-{dest.name}-", dir=plugins_root))
    except OSError as exc:
        return fail(f"cannot create {plugins_root}: {exc}; {nothing}")
    try:
        staged = staging / dest.name
        # A link that appeared after the check above is copied as a link, never followed, then refused.
        shutil.copytree(
            plugin_dir, staged, symlinks=True, ignore=shutil.ignore_patterns(*_NOT_COPIED, "*.pyc")
        )
        unsafe = _not_regular(staged)
        if unsafe:
            return fail(f"{origin} changed while it was copied (a link appeared: {unsafe[0]}); {nothing}")
        files = tree_hashes(staged)
        try:
            answers, missing = _ask_env(home, manifest, no_input=no_input)
        except _Aborted:
            print(f"aborted: {nothing} and nothing saved", file=sys.stderr)
            return 130
        if replacing:
            os.replace(dest, staging / ".replaced")
        try:
            os.replace(staged, dest)
        except OSError:
            if replacing:  # put the previous copy back before the staging directory goes
                os.replace(staging / ".replaced", dest)
            raise
    except OSError as exc:
        return fail(f"cannot copy {plugin_dir} into {dest}: {exc}; {nothing}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _Placed(manifest, dest, replacing, answers, missing, files)


def _install_directory(
    args: argparse.Namespace,
    plugin_dir: Path,
    *,
    origin: dict[str, Any],
    shown_root: tuple[Path, str] | None = None,
) -> int:
    try:
        manifest = _validate_plugin_dir(plugin_dir)
    except ValueError as exc:
        message = str(exc)
        if shown_root is not None:  # a temporary clone: name the URL instead
            message = message.replace(str(shown_root[0]), shown_root[1])
        return fail(f"{message}; nothing was installed")
    dirname = args.name or manifest.name
    if not _SAFE_DIRNAME.match(dirname) or dirname in CATEGORIES:
        why = "is a category folder" if dirname in CATEGORIES else "is not a plain directory name"
        return fail(f"'{dirname}' {why}; choose the directory name with --name NAME")
    with unloaded_kernel() as kernel:
        home = kernel.home
        merged, every = discover(kernel)
    dest = home / "plugins" / dirname
    if plugin_dir.resolve() == dest.resolve() or dest.resolve() in plugin_dir.resolve().parents:
        return fail(f"{plugin_dir} is the installed plugin itself; nothing to do")
    for cand in every:
        if (
            cand.source == "user"
            and cand.key == manifest.name
            and cand.path is not None
            and cand.path != dest
        ):
            return fail(
                f"a user plugin named '{manifest.name}' is already installed at {cand.path}; "
                f"remove it first (hermes-kernel plugins remove {cand.path.name})"
            )
    if (dest.exists() or dest.is_symlink()) and not args.force:
        return fail(_exists_message(args, dest, read_records(home)["plugins"].get(dirname)))
    placed = _place(plugin_dir, dest, manifest, home, origin=args.source, no_input=args.no_input)
    if isinstance(placed, int):
        return placed
    record = {**origin, "name": manifest.name, "version": manifest.version, "files": placed.files}
    record["installed_at"] = _now()
    _change_records(home, lambda records: records["plugins"].__setitem__(dirname, record))
    where = f"{dest}" + (f" (replaced the previous {dirname})" if placed.replaced else "")
    version = f" {manifest.version}" if manifest.version else ""
    print(f"installed plugin '{manifest.name}'{version} from {args.source} into {where}")
    _report_env(home, placed.answers)
    previous = merged.get(manifest.name)
    if previous is not None and previous.source != "user":
        print(f"note: it overrides the {previous.source} plugin '{manifest.name}' ({previous.where})")
    missing = {manifest.name: [v.name for v in placed.missing]}
    offer_enable(args, [(manifest.name, "user", manifest)])
    report_outcome([(manifest.name, "user", str(dest))], verb="installed", missing=missing)
    return 0


def _exists_message(args: argparse.Namespace, dest: Path, record: dict[str, Any] | None) -> str:
    """What to run when ``install`` finds its target directory taken: ``update`` or ``--force``."""
    replace = f"to replace it with {args.source}: {_install_command(args, '--force')}"
    if record is None:
        return (
            f"{dest} already exists (a plugin that 'plugins install' did not install); {replace} "
            "(the directory is deleted first)"
        )
    came_from = _record_str(record, "url") or _record_str(record, "path") or "its recorded source"
    return (
        f"'{dest.name}' is already installed at {dest} (from {came_from}); to fetch its newest version: "
        f"hermes-kernel plugins update {dest.name}; {replace}"
    )


# --------------------------------------------------------------------------- environment variables


def _ask_env(home: Path, manifest: Manifest, *, no_input: bool) -> tuple[dict[str, str], list[EnvVar]]:
    """Ask for each ``requires_env`` variable set neither in the environment nor in ``<home>/.env``.

    The answers are saved to ``.env`` at once; returns them and the variables
    still missing.  Raises :class:`_Aborted` on Ctrl-C (nothing saved).
    """
    dotenv = read_dotenv(home)
    environ = dict(os.environ)
    missing = [v for v in manifest.requires_env if env_state(v, environ, dotenv) is None]
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
        from ..base.yamledit import write_env

        write_env(home, answers)
    return answers, [v for v in missing if v.name not in answers]


def _ask_package_env(home: Path, dist: Any, *, no_input: bool, stays: str) -> list[str] | None:
    """Ask for the variables an installed package's manifest needs; the names still missing, or
    ``None`` when the user aborted (nothing saved; the package ``stays`` installed or updated)."""
    manifest = _dist_manifest(dist)
    if manifest is None:
        return []
    try:
        answers, still = _ask_env(home, manifest, no_input=no_input)
    except _Aborted:
        print(f"aborted: no variables saved (the package stays {stays})", file=sys.stderr)
        return None
    _report_env(home, answers)
    return [v.name for v in still]


def _report_env(home: Path, answers: dict[str, str]) -> None:
    if answers:
        print(f"saved {', '.join(answers)} to {home / '.env'} (mode 0600)")
        for name, value in answers.items():
            if "${" in value:
                print(f"warning: the value of {name} contains '${{': .env readers expand ${{NAME}} in it")


# --------------------------------------------------------------------------- what the next start does

# The kernel's warning for a tool name another plugin holds (kernel.tools.registry.ToolConflict).
_REFUSED_TOOL = re.compile(r"^tool '([^']+)' of plugin '([^']*)' was refused: plugin '([^']*)' already")
_TOOL_NOTE = re.compile(r"^tool '([^']+)'")


def offer_enable(args: argparse.Namespace, targets: list[tuple[str, str, Manifest | None]]) -> None:
    """Say which rule decides whether the installed plugins (key, source, manifest) run in this home,
    and enable those that need it when ``--enable`` says so or the user, asked on a terminal, agrees.

    The rules: a ``plugins.enabled`` list runs only what it names; a home Hermes Agent has used and
    that has no list runs only bundled plugins (as Hermes); any other home runs every plugin it finds.
    """
    from ..core.records import _Record
    from .plugins import enable_plugin

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


# --------------------------------------------------------------------------- pip


def _pip_env() -> dict[str, str]:
    return {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _run_pip(command: list[str], *, cwd: str | None = None) -> tuple[int, dict[str, Any]]:
    """Run ``python -m pip install ...`` with ``--report``; pip's output goes to stderr.  The exit code
    (``-1`` when pip cannot be run) and pip's installation report (``{}`` when it wrote none)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hermes-kernel-pip-") as scratch:
        report_file = Path(scratch) / "report.json"
        i = command.index("install") + 1
        full = [*command[:i], "--report", str(report_file), *command[i:]]
        print(f"running: {shlex.join(full)}", file=sys.stderr)
        sys.stdout.flush()
        try:
            result = subprocess.run(full, stdout=sys.stderr, check=False, cwd=cwd, env=_pip_env())
        except OSError as exc:
            print(f"error: cannot run pip: {exc}", file=sys.stderr)
            return -1, {}
        try:
            report = json.loads(report_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            report = {}
    return result.returncode, report if isinstance(report, dict) else {}


def _reported(report: dict[str, Any]) -> dict[str, str]:
    """Name to version of what pip's report says it installed."""
    out = {}
    for item in report.get("install", []):
        metadata = item.get("metadata") if isinstance(item, dict) else None
        if isinstance(metadata, dict) and isinstance(metadata.get("name"), str):
            out[metadata["name"]] = str(metadata.get("version", ""))
    return out


def _search_path(target: str | None) -> list[str]:
    return [target] if target else sys.path


def _installed_names(target: str | None) -> set[str]:
    """The normalized names of the distributions installed in ``target`` (else on ``sys.path``)."""
    from importlib import metadata

    names = set()
    for dist in metadata.distributions(path=_search_path(target)):
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            names.add(normalize_dist(name))
    return names


def _absolute_target(pip_args: list[str]) -> tuple[list[str], str | None]:
    """``pip_args`` with a ``--target`` directory made absolute (pip reads it from the working directory),
    and that directory."""
    out = list(pip_args)
    for i, arg in enumerate(out):
        if arg in ("-t", "--target") and i + 1 < len(out):
            out[i + 1] = str(Path(out[i + 1]).expanduser().resolve())
            return out, out[i + 1]
        if arg.startswith("--target="):
            value = str(Path(arg.split("=", 1)[1]).expanduser().resolve())
            out[i] = f"--target={value}"
            return out, value
        if arg.startswith("-t") and len(arg) > 2 and not arg.startswith("--"):
            value = str(Path(arg[2:]).expanduser().resolve())
            out[i] = f"-t{value}"
            return out, value
    return out, None


def _install_pip(args: argparse.Namespace, requirement: str) -> int:
    linked = _pip_project_links(Path(requirement)) if Path(requirement).is_dir() else None
    if linked is not None:
        return fail(f"{linked}; nothing was installed")
    pip_args, target = _absolute_target(args.pip_args)
    before = _installed_names(target)
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check"]
    if args.no_input:
        command.append("--no-input")
    if args.force:
        command.append("--force-reinstall")
    code, report = _run_pip([*command, *pip_args, requirement])
    if code != 0:
        if code < 0:
            return 1
        return fail(f"pip install {requirement} failed (exit code {code}); nothing was recorded")
    reported = _reported(report)
    names = list(reported)
    if not names:  # already installed: pip reports nothing new
        guessed = _requirement_name(requirement)
        names = [guessed] if guessed else []
    found = list(_plugin_entry_points(names, target))
    if not found:
        listed = ", ".join(names) or requirement
        new = [n for n in names if normalize_dist(n) not in before]
        undo = f"; uninstall it with: {sys.executable} -m pip uninstall {' '.join(new)}" if new else ""
        return fail(
            f"pip installed {listed}, but it declares no '{ENTRY_POINT_GROUP}' entry point, so the kernel "
            f"will not load it{undo}"
        )
    with unloaded_kernel() as kernel:
        home = kernel.home
    old_records = read_records(home)["packages"]
    targets: list[tuple[str, str, str | None]] = []
    missing: dict[str, list[str]] = {}
    for dist, entry_points in found:
        dist_name = dist.metadata["Name"]
        key = normalize_dist(dist_name)
        plugins = ", ".join(f"'{ep.name}' ({ep.value})" for ep in entry_points)
        if dist_name in reported or normalize_dist(dist_name) in {normalize_dist(n) for n in reported}:
            print(f"installed package {dist_name} {dist.version}: plugin(s) {plugins}")
        else:
            first = entry_points[0].name
            print(
                f"package {dist_name} {dist.version} was already installed (pip changed nothing): plugin(s) "
                f"{plugins}; to upgrade it: hermes-kernel plugins update {first}"
            )
        previous = old_records.get(key, {})
        owned = key not in before or (previous.get("owned") is True and previous.get("target") == target)
        record = {
            "name": dist_name,
            "requirement": str(Path(requirement).resolve()) if Path(requirement).exists() else requirement,
            "pip_args": pip_args,
            "target": target,
            "prefix": sys.prefix,
            "python": sys.executable,
            "cwd": os.getcwd(),
            "location": str(Path(str(dist.locate_file(""))).resolve()),
            "version": dist.version,
            "entry_points": [ep.name for ep in entry_points],
            "owned": owned,
            "pulled_in": sorted(
                n for n in reported if normalize_dist(n) not in before and normalize_dist(n) != key
            ),
            "installed_at": _now(),
        }
        _change_records(
            home, lambda records, key=key, record=record: records["packages"].__setitem__(key, record)
        )
        still = _ask_package_env(home, dist, no_input=args.no_input, stays="installed")
        if still is None:
            return 130
        for ep in entry_points:
            missing[ep.name] = still
        targets += [(ep.name, "entrypoint", None) for ep in entry_points]
    if target:
        print(f"note: installed into {target}; the kernel finds it only when that directory is on PYTHONPATH")
    offer_enable(args, [(name, source, None) for name, source, _path in targets])
    report_outcome(targets, verb="installed", extra_path=target, missing=missing)
    return 0


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


def _distributions(name: str, target: str | None) -> list[Any]:
    """The installed distributions named ``name`` in ``target`` (else on ``sys.path``), first found first."""
    from importlib import metadata

    wanted = normalize_dist(name)
    return [
        d
        for d in metadata.distributions(path=_search_path(target))
        if d.metadata and d.metadata["Name"] and normalize_dist(d.metadata["Name"]) == wanted
    ]


def _plugin_entry_points(names: list[str], target: str | None) -> Iterator[tuple[Any, list[Any]]]:
    for name in names:
        for dist in _distributions(name, target)[:1]:
            eps = [ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
            if eps:
                yield dist, eps


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


# --------------------------------------------------------------------------- naming an installed plugin


@dataclass
class _Installed:
    """What a name given to ``update`` or ``remove`` stands for."""

    key: str
    cand: Candidate | None = None
    dirname: str | None = None  # a user plugin's directory under <home>/plugins
    dir_record: dict[str, Any] | None = None
    package: str | None = None  # the records' key of a pip package
    package_record: dict[str, Any] | None = None
    dist_name: str | None = None  # the distribution of an entry-point plugin, when known


def _package_for(records: dict[str, dict[str, Any]], ep_name: str, dist_name: str | None) -> str | None:
    """The package record of an entry-point plugin: by its distribution's name, else by entry point."""
    if dist_name is not None:
        key = normalize_dist(dist_name)
        return key if key in records else None
    matches = [k for k, r in records.items() if ep_name in _record_list(r, "entry_points")]
    return matches[0] if len(matches) == 1 else None


def _resolve_installed(
    name: str, every: list[Candidate], records: dict[str, dict[str, dict[str, Any]]]
) -> _Installed | int:
    """The plugin ``name`` designates (user plugins first, then packages, then the rest); else it is looked
    up in the install records (a package whose folder is not on ``sys.path``); else an error."""
    items = candidate_items(every)
    found = resolve_name(name, items)
    if found:
        for source in ("user", "entrypoint"):
            of_source = [i for i in found if i.obj.source == source]
            if len(of_source) > 1 and source == "user":
                paths = ", ".join(str(i.obj.path) for i in of_source)
                return fail(f"'{name}' names several user plugins ({paths}); give the directory name instead")
            if of_source:
                cand: Candidate = of_source[0].obj
                if source == "user":
                    assert cand.path is not None
                    dirname = cand.path.name
                    return _Installed(cand.key, cand, dirname, records["plugins"].get(dirname))
                dist = getattr(getattr(cand.entry_point, "dist", None), "metadata", None)
                dist_name = dist["Name"] if dist else None
                package = _package_for(records["packages"], cand.key, dist_name)
                record = records["packages"].get(package) if package else None
                return _Installed(cand.key, cand, package=package, package_record=record, dist_name=dist_name)
        return _Installed(found[0].obj.key, found[0].obj)
    for dirname, record in records["plugins"].items():
        if name in (dirname, record.get("name")):
            return _Installed(str(record.get("name") or dirname), None, dirname, record)
    for package, record in records["packages"].items():
        if normalize_dist(name) == package or name in _record_list(record, "entry_points"):
            eps = _record_list(record, "entry_points")
            return _Installed(eps[0] if eps else package, None, package=package, package_record=record)
    return unknown_name(name, items)


def _not_updatable(target: _Installed, home: Path) -> str:
    """Why ``target`` has nothing ``plugins update`` could fetch, and what to do instead."""
    cand = target.cand
    key = target.key
    if cand is None or cand.source == "user":
        dest = home / "plugins" / (target.dirname or key)
        if not dest.exists():
            came_from = _record_str(target.dir_record or {}, "url") or _record_str(
                target.dir_record or {}, "path"
            )
            again = (
                f"hermes-kernel plugins install {shlex.quote(came_from)}" if came_from else "plugins install"
            )
            return f"'{key}' was installed into {dest}, which is gone; install it again with: {again}"
        return (
            f"'{key}' ({dest}) was not installed by 'plugins install' (no record of it in "
            f"{records_path(home)}), so there is no source to update it from; to install it from one "
            f"(a directory, a git URL or pip:REQUIREMENT): hermes-kernel plugins install SOURCE --force"
        )
    if cand.source == "bundled":
        return (
            f"'{key}' is bundled with hermes-kernel ({cand.where}): it changes only with hermes-kernel "
            f"itself (upgrade that package: {sys.executable} -m pip install --upgrade "
            f"{KERNEL_DISTRIBUTION}); nothing to update"
        )
    if cand.source == "entrypoint":
        dist = target.dist_name or "its package"
        return (
            f"'{key}' comes from the Python package '{dist}', which 'plugins install' did not install (no "
            f"record of it in {records_path(home)}); upgrade it with pip: "
            f"{sys.executable} -m pip install --upgrade {dist}"
        )
    return (
        f"'{key}' is a {cand.source} plugin ({cand.where}): 'plugins install' did not put it there, so there "
        "is no source to update it from; update it where it lives (for example with git pull)"
    )


# --------------------------------------------------------------------------- plugins update


def plugins_update(args: argparse.Namespace) -> int:
    if args.all == bool(args.names):
        return fail("name the plugins to update, or pass --all (not both)", code=2)
    with unloaded_kernel() as kernel:
        home = kernel.home
        _merged, every = discover(kernel)
    records = read_records(home)
    jobs: list[_Installed] = []
    if args.all:
        jobs += [
            _Installed(str(r.get("name") or d), None, d, r) for d, r in sorted(records["plugins"].items())
        ]
        for package, record in sorted(records["packages"].items()):
            eps = _record_list(record, "entry_points")
            jobs.append(_Installed(eps[0] if eps else package, None, package=package, package_record=record))
        if not jobs:
            print(f"no plugin was installed with 'hermes-kernel plugins install' (see {records_path(home)}); "
                  "nothing to update")  # fmt: skip
            return 0
    else:
        for name in args.names:
            target = _resolve_installed(name, every, records)
            if isinstance(target, int):
                return target
            jobs.append(target)
    failures = 0
    for job in jobs:
        if job.package_record is not None and job.package is not None:
            code = _update_package(home, job.package, job.package_record, args)
        elif (
            job.dir_record is not None
            and job.dirname is not None
            and (home / "plugins" / job.dirname).is_dir()
        ):
            code = _update_directory(home, job.dirname, job.dir_record, args)
        elif args.all and job.dirname is not None:
            print(f"skipped '{job.key}': {_not_updatable(job, home)}")
            code = 0
        else:
            code = fail(_not_updatable(job, home))
        failures += code != 0
    return 1 if failures else 0


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "unknown"


def _versions(old: str | None, new: str | None) -> str:
    if (old or "") == (new or ""):
        return f" {new} (same version)" if new else ""
    return f" {old or '(no version)'} -> {new or '(no version)'}"


def _update_directory(home: Path, dirname: str, record: dict[str, Any], args: argparse.Namespace) -> int:
    """Fetch a directory plugin again from its recorded git URL or directory; keep the old copy on failure."""
    import tempfile

    dest = home / "plugins" / dirname
    name = _record_str(record, "name") or dirname
    kept = f"{dest} was kept as it was"
    recorded_files = record.get("files") if isinstance(record.get("files"), dict) else None
    local = _changes(recorded_files, tree_hashes(dest)) if recorded_files is not None else []
    kind = record.get("kind")
    with tempfile.TemporaryDirectory(prefix="hermes-kernel-update-") as scratch:
        commit: str | None = None
        branch: str | None = None
        if kind == "git":
            url, ref, subdir = _record_str(record, "url"), record.get("ref"), record.get("subdir")
            try:
                if not url or url.startswith("-") or not _URL.match(url):
                    raise ValueError(f"its recorded URL {url!r} is not a git URL")
                if ref is not None and (not isinstance(ref, str) or not ref.strip() or ref.startswith("-")):
                    raise ValueError(f"its recorded ref {ref!r} is not a branch or tag name")
                subdir = _safe_subdir(subdir if isinstance(subdir, str) else None)
            except ValueError as exc:
                return fail(
                    f"cannot update '{name}': {exc} (in {records_path(home)}); {kept}; install it again: "
                    f"hermes-kernel plugins install URL --force"
                )
            root = Path(scratch) / "clone"
            error = _git_clone(url, ref, root, interactive=not args.no_input)
            if error is not None:
                return fail(f"cannot update '{name}': {error}; {kept}")
            commit, branch = _git_head(root)
            plugin_dir = root / subdir if subdir else root
            where = url + (f" at {ref}" if ref else (f" (branch {branch})" if branch else ""))
            same = commit is not None and commit == record.get("commit")
            current = f"commit {_short(commit)} of {where}"
        elif kind == "dir":
            path = _record_str(record, "path")
            if path is None or not Path(path).is_dir():
                return fail(
                    f"cannot update '{name}': it was installed from the directory {path}, which is gone; "
                    f"{kept}; install it from where it is now: hermes-kernel plugins install DIR --force"
                )
            plugin_dir, root, where = Path(path), Path(path), path
            same = recorded_files is not None and tree_hashes(plugin_dir) == recorded_files
            current = f"the files of {where}"
        else:
            return fail(
                f"cannot update '{name}': its record in {records_path(home)} has an unknown kind {kind!r}"
            )
        if same and not (local and args.force):
            print(f"'{name}' is up to date: {current} is what is installed in {dest}")
            if local:
                print(
                    f"note: {dest} was changed since it was installed ({'; '.join(local)}); to put back the "
                    f"installed version: hermes-kernel plugins update {dirname} --force"
                )
            return 0
        if local and not args.force:
            return fail(
                f"'{name}' has local changes in {dest} ({'; '.join(local)}); the new version from {where} "
                "would replace them: copy them elsewhere, then run: "
                f"hermes-kernel plugins update {dirname} --force"
            )
        linked = _source_links(root, subdir if kind == "git" else None)
        if linked is not None:
            linked = linked.replace(str(root), where) if kind == "git" else linked
            return fail(
                f"cannot update '{name}': the new version from {where} is not installable: {linked}; {kept}"
            )
        try:
            manifest = _validate_plugin_dir(plugin_dir)
        except ValueError as exc:
            message = str(exc).replace(str(root), where) if kind == "git" else str(exc)
            return fail(
                f"cannot update '{name}': the new version from {where} is not installable: {message}; {kept}"
            )
        if manifest.name != name:
            return fail(
                f"cannot update '{name}': the new version from {where} is named '{manifest.name}'; {kept}; "
                f"to switch: hermes-kernel plugins remove {dirname}, then plugins install it again"
            )
        origin = f"cannot update '{name}': the new version from {where}"
        placed = _place(plugin_dir, dest, manifest, home, origin=origin, no_input=args.no_input, nothing=kept)
        if isinstance(placed, int):
            return placed
    new_record = {**record, "version": manifest.version, "files": placed.files, "updated_at": _now()}
    if kind == "git":
        new_record |= {"commit": commit, "branch": branch}
    _change_records(home, lambda records: records["plugins"].__setitem__(dirname, new_record))
    change = f" (commit {_short(_record_str(record, 'commit'))} -> {_short(commit)})" if kind == "git" else ""
    print(
        f"updated plugin '{name}'{_versions(_record_str(record, 'version'), manifest.version)}{change} "
        f"from {where} in {dest}"
    )
    _report_env(home, placed.answers)
    report_outcome(
        [(name, "user", str(dest))], verb="updated", missing={name: [v.name for v in placed.missing]}
    )
    return 0


def _update_package(home: Path, package: str, record: dict[str, Any], args: argparse.Namespace) -> int:
    """``pip install --upgrade`` a recorded package with the requirement and options of its install."""
    name = _record_str(record, "name") or package
    target = _record_str(record, "target")
    requirement = _record_str(record, "requirement")
    prefix, python = _record_str(record, "prefix"), _record_str(record, "python") or "python"
    eps = _record_list(record, "entry_points")
    if requirement is None or requirement.startswith("-"):
        return fail(f"cannot update '{name}': its record in {records_path(home)} has no requirement")
    if target is None and prefix != sys.prefix:
        return fail(
            f"cannot update '{name}': it was installed into the Python environment {prefix}, and this "
            f"command runs in {sys.prefix}; run it with that Python: "
            f"{python} -m kernel plugins update {eps[0] if eps else name}"
        )
    linked = _pip_project_links(Path(requirement)) if Path(requirement).is_dir() else None
    if linked is not None:
        return fail(f"cannot update '{name}': {linked}; the installed version stays")
    before = _installed_names(target)
    old = _distributions(name, target)
    old_version = old[0].version if old else None
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--upgrade"]
    if args.no_input:
        command.append("--no-input")
    pip_args = [*_record_list(record, "pip_args"), *args.pip_args]
    cwd = _record_str(record, "cwd")
    code, report = _run_pip(
        [*command, *pip_args, requirement], cwd=cwd if cwd and Path(cwd).is_dir() else None
    )
    if code != 0:
        if code < 0:
            return 1
        still = f"{name} {old_version} stays installed" if old_version else f"{name} is not installed"
        return fail(f"pip could not update {name} from {requirement} (exit code {code}); {still}")
    reported = {normalize_dist(n): v for n, v in _reported(report).items()}
    new = _distributions(name, target)
    new_version = reported.get(package) or (new[0].version if new else None)
    if target is not None:
        _drop_stale_versions(name, target, new_version)
    found = list(_plugin_entry_points([name], target))
    if not found:
        return fail(
            f"pip updated {name} to {new_version}, which declares no '{ENTRY_POINT_GROUP}' entry point: "
            f"the kernel no longer loads it; to go back: "
            f"{sys.executable} -m pip install {name}=={old_version}"
        )
    dist, entry_points = found[0]
    plugins = ", ".join(f"'{ep.name}'" for ep in entry_points)
    if package not in reported:
        print(f"package {name} {old_version} is up to date: pip found nothing newer for {requirement}")
    elif old_version == new_version:
        print(
            f"reinstalled package {name} {new_version} from {requirement} (same version): plugin(s) {plugins}"
        )
    else:
        print(
            f"updated package {name} {old_version} -> {new_version} from {requirement}: plugin(s) {plugins}"
        )
    pulled = sorted(
        {*_record_list(record, "pulled_in"), *(n for n in reported if n not in before and n != package)}
    )
    new_record = {
        **record,
        "version": dist.version,
        "entry_points": [ep.name for ep in entry_points],
        "pulled_in": pulled,
        "updated_at": _now(),
    }
    _change_records(home, lambda records: records["packages"].__setitem__(package, new_record))
    still = _ask_package_env(home, dist, no_input=args.no_input, stays="updated")
    if still is None:
        return 130
    missing = {ep.name: still for ep in entry_points}
    report_outcome(
        [(ep.name, "entrypoint", None) for ep in entry_points],
        verb="updated",
        extra_path=target,
        missing=missing,
    )
    return 0


def _drop_stale_versions(name: str, target: str, keep_version: str | None) -> None:
    """``pip install --upgrade --target`` leaves the old version's ``.dist-info`` (and files the new one
    no longer has) behind; delete them, keeping every file of the version installed now."""
    dists = _distributions(name, target)
    keep = [d for d in dists if d.version == keep_version][:1] or dists[:1]
    if not keep:
        return
    kept = {os.path.abspath(str(keep[0].locate_file(f))) for f in keep[0].files or []}
    for dist in dists:
        if dist is not keep[0] and dist.files is not None:
            _delete_dist_files(dist, Path(target), kept)


def _delete_dist_files(dist: Any, root: Path, keep: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Delete the files a distribution's RECORD lists that are inside ``root`` (never outside it), except
    ``keep``; then the folders that left empty.  The problems met (files that could not be deleted)."""
    root = root.resolve()
    problems: list[str] = []
    folders: set[Path] = set()
    for file in dist.files or []:
        located = Path(os.path.abspath(str(dist.locate_file(file))))
        path = located.parent.resolve() / located.name  # the folders resolved, a link itself not followed
        if path == root or not path.is_relative_to(root) or str(located) in keep or str(path) in keep:
            continue
        try:
            if path.is_symlink() or path.is_file():
                path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            problems.append(f"{path}: {exc}")
        folders.add(path.parent)
        if path.suffix == ".py":
            cache = path.parent / "__pycache__"
            for compiled in cache.glob(f"{path.stem}.*.pyc") if cache.is_dir() else []:
                with _suppress_os_error():
                    compiled.unlink()
            folders.add(cache)
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        while folder != root and folder.is_relative_to(root):
            try:
                folder.rmdir()  # only when empty
            except OSError:
                break
            folder = folder.parent
    return problems


def _suppress_os_error() -> Any:
    import contextlib

    return contextlib.suppress(OSError)


# --------------------------------------------------------------------------- plugins remove


def _confirm(question: str, what: str, yes: bool) -> int | None:
    """``None`` when confirmed (``--yes``, or "y" on a terminal); else the exit code, having said why."""
    if yes:
        return None
    if not sys.stdin.isatty():
        return fail(f"about to {what}: stdin is not a terminal, so pass --yes to confirm")
    try:
        answer = input(f"{question} [y/N] ")
    except (EOFError, KeyboardInterrupt):
        print()
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        print("cancelled; nothing removed")
        return 1
    return None


def plugins_remove(args: argparse.Namespace) -> int:
    import shutil

    with unloaded_kernel() as kernel:
        home, config = kernel.home, kernel.config
        merged, every = discover(kernel)
    records = read_records(home)
    target = _resolve_installed(args.name, every, records)
    if isinstance(target, int):
        return target
    cand = target.cand
    if (cand is not None and cand.source == "entrypoint") or (cand is None and target.package is not None):
        return _remove_package(home, config, target, merged, every, args)
    if cand is None:  # only a record: its directory is gone
        dirname = target.dirname or target.key
        _change_records(home, lambda records: records["plugins"].pop(dirname, None))
        print(f"'{target.key}' is no longer in {home / 'plugins' / dirname}; removed its install record")
        return 0
    if cand.source != "user":
        return fail(_not_removable(cand, home))
    assert cand.path is not None
    root = (home / "plugins").resolve()
    path = cand.path
    resolved_parent = path.parent.resolve()
    if not (resolved_parent == root or root in resolved_parent.parents):
        return fail(f"{path} is not under {root}; not removing it")
    refused = _confirm(f"Delete plugin '{cand.key}' ({path})?", f"delete {path}", args.yes)
    if refused is not None:
        return refused
    try:
        if path.is_symlink():
            path.unlink()
        else:
            shutil.rmtree(path)
    except OSError as exc:
        return fail(f"cannot delete {path}: {exc}")
    if path.name in records["plugins"]:
        _change_records(home, lambda records: records["plugins"].pop(path.name, None))
    print(f"removed plugin '{cand.key}' ({path})")
    _after_removal(home, config, cand.key, cand, merged, every)
    return 0


def _after_removal(
    home: Path,
    config: dict[str, Any],
    key: str,
    cand: Candidate | None,
    merged: dict[str, Candidate],
    every: list[Candidate],
) -> None:
    listed, _note = plugin_names(section(config, "plugins", "disabled"), "disabled")
    if listed and key in listed:
        print(f"note: '{key}' is still listed in plugins.disabled in {home / 'config.yaml'}")
    fallback = [c for c in every if c.key == key and c is not cand and c.error is None]
    if cand is not None and merged.get(key) is cand and fallback:
        print(f"note: the {fallback[-1].source} plugin '{key}' ({fallback[-1].where}) is used again")
    print(f"its variables in {home / '.env'} and settings in config.yaml were kept")


def _remove_package(
    home: Path,
    config: dict[str, Any],
    target: _Installed,
    merged: dict[str, Candidate],
    every: list[Candidate],
    args: argparse.Namespace,
) -> int:
    """Uninstall an entry-point plugin's distribution, if ``plugins install`` installed it (see
    ``REMOVE_DESCRIPTION`` for the rule)."""
    record, package, key = target.package_record, target.package, target.key
    disable = f"disable the plugin instead: hermes-kernel plugins disable {key}"
    if record is None or package is None:
        assert target.cand is not None
        return fail(_not_removable(target.cand, home, target.dist_name))
    name = _record_str(record, "name") or package
    recorded_target = _record_str(record, "target")
    if normalize_dist(name) == KERNEL_DISTRIBUTION:
        return fail(
            f"'{key}' comes from {KERNEL_DISTRIBUTION} itself, which this command never uninstalls; {disable}"
        )
    uninstall = f"{sys.executable} -m pip uninstall {name}"
    if record.get("owned") is not True:
        return fail(
            f"'{key}' comes from the package {name}, which was already installed before 'plugins install' "
            f"ran (by you, or as another package's dependency), so it is not uninstalled; to uninstall it "
            f"anyway: {uninstall}; or {disable}"
        )
    prefix, python = _record_str(record, "prefix"), _record_str(record, "python") or "python"
    if recorded_target is None and prefix != sys.prefix:
        return fail(
            f"'{key}' was installed into the Python environment {prefix}, and this command runs in "
            f"{sys.prefix}; run it with that Python: {python} -m kernel plugins remove {key}"
        )
    if recorded_target is not None and _is_site_packages(recorded_target):
        return fail(
            f"the recorded target {recorded_target} of {name} is a site-packages folder of this Python, "
            f"not a --target folder; not deleting files there: {uninstall}"
        )
    dists = _distributions(name, recorded_target)
    where = recorded_target or sys.prefix
    if not dists:
        _change_records(home, lambda records: records["packages"].pop(package, None))
        print(f"package {name} is no longer installed in {where}; removed its install record")
        return 0
    dist = dists[0]
    version = dist.version
    if any(str(f).replace("\\", "/").startswith("kernel/") for f in dist.files or []):
        return fail(
            f"the package {name} holds the kernel's own 'kernel' package; not uninstalling it; {disable}"
        )
    dependents = _dependents(name, recorded_target)
    if dependents:
        return fail(
            f"the package {name} is required by {', '.join(dependents)} (installed in {where}); not "
            f"uninstalling it; {disable}"
        )
    if recorded_target is not None and dist.files is None:
        return fail(
            f"the package {name} in {recorded_target} has no RECORD file listing its files; {uninstall}"
        )
    eps = ", ".join(f"'{n}'" for n in _record_list(record, "entry_points")) or f"'{key}'"
    refused = _confirm(
        f"Uninstall package {name} {version} (plugin(s) {eps}) from {where}?",
        f"uninstall {name} from {where}",
        args.yes,
    )
    if refused is not None:
        return refused
    if recorded_target is not None:
        problems = _delete_dist_files(dist, Path(recorded_target))
        if problems:
            return fail(f"could not delete every file of {name}: {'; '.join(problems[:5])}")
    else:
        import subprocess

        command = [sys.executable, "-m", "pip", "uninstall", "--yes", "--disable-pip-version-check", name]
        print(f"running: {shlex.join(command)}", file=sys.stderr)
        sys.stdout.flush()
        try:
            result = subprocess.run(command, stdout=sys.stderr, check=False, env=_pip_env())
        except OSError as exc:
            return fail(f"cannot run pip: {exc}")
        if result.returncode != 0:
            return fail(f"pip uninstall {name} failed (exit code {result.returncode}); it stays installed")
    _change_records(home, lambda records: records["packages"].pop(package, None))
    print(f"uninstalled package {name} {version} (plugin(s) {eps}) from {where}")
    pulled = _record_list(record, "pulled_in")
    if pulled:
        print(
            f"kept what pip installed along with it: {', '.join(pulled)} (other packages may need them; "
            f"uninstall them with pip if nothing does)"
        )
    for ep in _record_list(record, "entry_points") or [key]:
        cand = next((c for c in every if c.key == ep and c.source == "entrypoint"), None)
        _after_removal(home, config, ep, cand, merged, every)
    return 0


def _is_site_packages(folder: str) -> bool:
    import site
    import sysconfig

    places = {*site.getsitepackages(), site.getusersitepackages(), *sysconfig.get_paths().values()}
    resolved = Path(folder).resolve()
    return any(Path(p).resolve() == resolved for p in places if p)


def _dependents(name: str, target: str | None) -> list[str]:
    """The installed distributions (in ``target``, else on ``sys.path``) whose requirements name ``name``."""
    from importlib import metadata

    wanted = normalize_dist(name)
    out: set[str] = set()
    for dist in metadata.distributions(path=_search_path(target)):
        dist_name = dist.metadata["Name"] if dist.metadata else None
        if not dist_name or normalize_dist(dist_name) == wanted:
            continue
        for requirement in dist.requires or []:
            marker = requirement.split(";", 1)[1] if ";" in requirement else ""
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
            if match and normalize_dist(match[1]) == wanted and "extra" not in marker:
                out.add(dist_name)
    return sorted(out)


def _not_removable(cand: Candidate, home: Path, dist_name: str | None = None) -> str:
    disable = f"disable it instead: hermes-kernel plugins disable {cand.key}"
    if cand.source == "bundled":
        return f"'{cand.key}' is bundled with hermes-kernel ({cand.where}) and cannot be removed; {disable}"
    if cand.source == "entrypoint":
        dist = dist_name or getattr(getattr(cand.entry_point, "dist", None), "name", None) or "its package"
        return (
            f"'{cand.key}' comes from the installed Python package '{dist}' ({cand.where}), which 'plugins "
            f"install' did not install (no record of it in {records_path(home)}), so it is not uninstalled "
            f"here; to uninstall it yourself: {sys.executable} -m pip uninstall {dist}; or {disable}"
        )
    return (
        f"'{cand.key}' is a {cand.source} plugin ({cand.where}); only plugins under {home / 'plugins'} "
        f"are removed by this command; delete that directory yourself, or {disable}"
    )
