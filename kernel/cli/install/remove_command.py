"""``hermes-kernel plugins remove``: delete a user plugin, or uninstall a pip plugin install put there."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from ...base.config import plugin_names, section
from ...core.sources.discovery import Candidate
from ..common import discover, fail, unloaded_kernel
from .dists import _delete_dist_files, _dependents, _distributions, _is_site_packages
from .pip import _pip_env
from .records import (
    KERNEL_DISTRIBUTION,
    _change_records,
    _record_list,
    _record_str,
    normalize_dist,
    read_records,
    records_path,
)
from .targets import _Installed, _resolve_installed


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
