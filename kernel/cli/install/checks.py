"""What a plugin folder must be to be installed: a manifest, an ``__init__.py``, no links or special files."""

from __future__ import annotations

import os
from pathlib import Path

from ...core.sources.manifest import MANIFEST_NAMES, Manifest, ManifestError, find_manifest, load_manifest

_NOT_COPIED = (".git", "__pycache__")


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
