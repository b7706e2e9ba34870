"""``hermes-kernel plugins update``: fetch installed plugins again from their recorded source."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from ...core.sources.discovery import ENTRY_POINT_GROUP
from ..common import discover, fail, unloaded_kernel
from .checks import _pip_project_links, _source_links, _validate_plugin_dir
from .dists import _distributions, _drop_stale_versions, _installed_names, _plugin_entry_points
from .env import _ask_package_env, _report_env
from .git import _git_clone, _git_head
from .outcome import report_outcome
from .pip import _reported, _run_pip
from .placing import _changes, _place, tree_hashes
from .records import (
    KERNEL_DISTRIBUTION,
    _change_records,
    _now,
    _record_list,
    _record_str,
    normalize_dist,
    read_records,
    records_path,
)
from .sources import _URL, _safe_subdir
from .targets import _Installed, _resolve_installed


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
    unset = _ask_package_env(home, dist, no_input=args.no_input, stays="updated")
    if unset is None:
        return 130
    missing = {ep.name: unset for ep in entry_points}
    report_outcome(
        [(ep.name, "entrypoint", None) for ep in entry_points],
        verb="updated",
        extra_path=target,
        missing=missing,
    )
    return 0
