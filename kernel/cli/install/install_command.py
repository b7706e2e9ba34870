"""``hermes-kernel plugins install``: from a plugin directory, a git URL or a pip requirement."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from ...core.sources.discovery import CATEGORIES, ENTRY_POINT_GROUP
from ..common import discover, fail, unloaded_kernel
from .checks import _pip_project_links, _source_links, _validate_plugin_dir
from .dists import _installed_names, _plugin_entry_points, _requirement_name
from .env import _ask_package_env, _report_env
from .git import _git_clone, _git_head
from .outcome import offer_enable, report_outcome
from .pip import _absolute_target, _reported, _run_pip
from .placing import _place
from .records import _SAFE_DIRNAME, _change_records, _now, _record_str, normalize_dist, read_records
from .sources import _safe_subdir, classify_source


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
            home,
            lambda records, key=key, record=record: records["packages"].__setitem__(key, record),  # type: ignore[misc]  # a lambda's default argument
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
