"""``hermes-kernel plugins install|remove``.

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
without the ``pip:`` prefix."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.config import read_dotenv, section
from ..core.discovery import (
    CATEGORIES,
    ENTRY_POINT_GROUP,
    Candidate,
)
from ..core.manifest import MANIFEST_NAMES, EnvVar, Manifest, ManifestError, find_manifest, load_manifest
from .common import candidate_items, discover, env_state, fail, resolve_name, unknown_name, unloaded_kernel

if TYPE_CHECKING:
    pass


_SAFE_DIRNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_URL = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|[\w.-]+@[\w.-]+:)")


def add_commands(plugin_actions: Any) -> None:
    """Add this group's subcommands to the ``hermes-kernel`` parser."""
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
        return fail(str(exc))
    if source.kind == "pip":
        if args.name or args.subdir or args.ref:
            return fail("--name, --subdir and --ref apply to directory and git sources, not to pip")
        return _install_pip(args, source.value)
    if args.pip_args:
        return fail("--pip-arg applies to pip sources only (pip:REQUIREMENT)")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hermes-kernel-install-") as scratch:
        if source.kind == "git":
            root = Path(scratch) / "clone"
            error = _git_clone(source.value, args.ref, root, interactive=not args.no_input)
            if error is not None:
                return fail(error)
        else:
            if args.ref:
                return fail("--ref applies to git sources only")
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
        return fail(f"{message}; nothing was installed")
    dirname = args.name or manifest.name
    if not _SAFE_DIRNAME.match(dirname) or dirname in CATEGORIES:
        why = "is a category folder" if dirname in CATEGORIES else "is not a plain directory name"
        return fail(f"'{dirname}' {why}; choose the directory name with --name NAME")
    with unloaded_kernel() as kernel:
        home, config = kernel.home, kernel.config
        merged, every = discover(kernel)
    plugins_root = home / "plugins"
    dest = plugins_root / dirname
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
    replacing = dest.exists() or dest.is_symlink()
    if replacing and not args.force:
        return fail(f"{dest} already exists; pass --force to replace it")

    unsafe = _not_regular(plugin_dir)
    if unsafe:
        shown = ", ".join(unsafe[:5]) + (f" and {len(unsafe) - 5} more" if len(unsafe) > 5 else "")
        return fail(
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
        return fail(f"cannot copy {plugin_dir} into {dest}: {exc}")
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
        from ..core.settings import write_env

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
            return fail(f"cannot run pip: {exc}")
        if result.returncode != 0:
            return fail(f"pip install {requirement} failed (exit code {result.returncode})")
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
        return fail(
            f"pip installed {listed}, but it declares no '{ENTRY_POINT_GROUP}' entry point, so the kernel "
            f"will not load it; uninstall it with: {sys.executable} -m pip uninstall {listed}"
        )
    with unloaded_kernel() as kernel:
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

    with unloaded_kernel() as kernel:
        home, config = kernel.home, kernel.config
        merged, every = discover(kernel)
    items = candidate_items(every)
    found = resolve_name(args.name, items)
    if not found:
        return unknown_name(args.name, items)
    user = [i for i in found if i.obj.source == "user"]
    if not user:
        return fail(_not_removable(found[0].obj, home))
    if len(user) > 1:
        paths = ", ".join(str(i.obj.path) for i in user)
        return fail(f"'{args.name}' names several user plugins ({paths}); give the directory name instead")
    cand: Candidate = user[0].obj
    assert cand.path is not None
    root = (home / "plugins").resolve()
    target = cand.path
    resolved_parent = target.parent.resolve()
    if not (resolved_parent == root or root in resolved_parent.parents):
        return fail(f"{target} is not under {root}; not removing it")
    if not args.yes:
        if not sys.stdin.isatty():
            return fail(f"about to delete {target}: stdin is not a terminal, so pass --yes to confirm")
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
        return fail(f"cannot delete {target}: {exc}")
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
