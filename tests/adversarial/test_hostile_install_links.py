"""Installs read only what their source holds: symbolic links in a hostile source.

A repository (or a directory, or a pip project) whose ``--subdir`` is a link, whose parent folder of
the subdir is a link, or whose plugin folder holds links to a directory or a file outside it, each
pointing at a folder that stands for the user's ``~/.ssh``.  ``plugins install`` (and ``plugins
update``) refuses the source, naming the link; nothing is installed and the secret's content is
nowhere under the home.  A link the user made on the way to their own source stays theirs to follow.
Real git repositories cloned through ``file://``, real ``pip install`` subprocesses, real files.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
import yaml
from conftest import cli_env, write_pip_project
from test_cli_admin import PIP_OFFLINE, failed, git, make_repo, ok, run

CANARY = "canary-ssh-key-5f1d"

CODE = """
import json

def register(ctx):
    ctx.register_tool("linked_tool", "demo", {"description": "d"}, lambda args, **kw: json.dumps({}))
"""


@pytest.fixture
def env(home: Path, bundled: Path) -> dict[str, str]:
    return cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside every source, standing for ``~/.ssh``: a secret key, and a plugin a link can
    make look like the source's own."""
    folder = tmp_path / "dot-ssh"
    folder.mkdir()
    (folder / "id_ed25519").write_text(f"-----BEGIN KEY-----\n{CANARY}\n", encoding="utf-8")
    (folder / "plugin.yaml").write_text(yaml.safe_dump({"name": "linked"}), encoding="utf-8")
    (folder / "__init__.py").write_text(CODE, encoding="utf-8")
    return folder


def plugin_files(prefix: str = "") -> dict[str, str]:
    return {f"{prefix}plugin.yaml": yaml.safe_dump({"name": "linked"}), f"{prefix}__init__.py": CODE}


def commit_all(repo: Path, message: str = "links") -> None:
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", message, cwd=repo)


def leaked(home: Path) -> list[str]:
    """The files under ``home`` holding the secret (nothing that is a link is followed)."""
    found = []
    for path in home.rglob("*"):
        if path.is_file() and not path.is_symlink() and CANARY.encode() in path.read_bytes():
            found.append(str(path))
    return found


def installed(home: Path) -> list[str]:
    plugins = home / "plugins"
    return sorted(p.name for p in plugins.iterdir() if not p.name.startswith(".")) if plugins.is_dir() else []


# Each layout: (what to build in a source folder, the --subdir, the link the refusal names).
def subdir_is_a_link(root: Path, outside: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text("plugins\n", encoding="utf-8")
    (root / "plug").symlink_to(outside)


def parent_is_a_link(root: Path, outside: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text("plugins\n", encoding="utf-8")
    (root / "pkgs").symlink_to(outside.parent)


def inside_link_to_a_directory(root: Path, outside: Path) -> None:
    for rel, text in plugin_files("plug/").items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    (root / "plug" / "keys").symlink_to(outside)


def inside_link_to_a_file(root: Path, outside: Path) -> None:
    for rel, text in plugin_files("plug/").items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    (root / "plug" / "data").mkdir()
    (root / "plug" / "data" / "key.txt").symlink_to(outside / "id_ed25519")


def manifest_is_a_link(root: Path, outside: Path) -> None:
    (root / "plug").mkdir(parents=True, exist_ok=True)
    (root / "plug" / "__init__.py").write_text(CODE, encoding="utf-8")
    # The manifest read from outside: its text must never reach the terminal.
    (outside / "config").write_text(f"{CANARY}: [unclosed\n", encoding="utf-8")
    (root / "plug" / "plugin.yaml").symlink_to(outside / "config")


LAYOUTS = [
    pytest.param(subdir_is_a_link, "plug", "plug", id="subdir-is-a-link"),
    pytest.param(parent_is_a_link, "pkgs/dot-ssh", "pkgs", id="parent-is-a-link"),
    pytest.param(inside_link_to_a_directory, "plug", "keys", id="link-to-a-directory-inside"),
    pytest.param(inside_link_to_a_file, "plug", "key.txt", id="link-to-a-file-inside"),
    pytest.param(manifest_is_a_link, "plug", "plugin.yaml", id="manifest-is-a-link"),
]


@pytest.mark.parametrize(("build", "subdir", "link"), LAYOUTS)
def test_a_git_source_with_a_link_is_refused(home, env, tmp_path, outside, build, subdir, link):
    repo = tmp_path / "repo"
    build(repo, outside)
    git("init", "-q", cwd=repo)
    commit_all(repo)

    result = failed(run(env, "plugins", "install", repo.as_uri(), "--subdir", subdir, "--no-input"))
    assert link in result.stderr and "link" in result.stderr
    assert CANARY not in result.stderr + result.stdout
    assert installed(home) == [] and leaked(home) == []


@pytest.mark.parametrize(("build", "subdir", "link"), LAYOUTS)
def test_a_local_source_with_a_link_is_refused(home, env, tmp_path, outside, build, subdir, link):
    source = tmp_path / "source"
    build(source, outside)

    result = failed(run(env, "plugins", "install", str(source), "--subdir", subdir, "--no-input"))
    assert link in result.stderr and "link" in result.stderr
    assert CANARY not in result.stderr + result.stdout
    assert installed(home) == [] and leaked(home) == []
    if link not in subdir.split("/"):  # a link inside the plugin: refused however the plugin is named
        result = failed(run(env, "plugins", "install", str(source / subdir), "--no-input"))
        assert link in result.stderr and CANARY not in result.stderr + result.stdout
        assert installed(home) == [] and leaked(home) == []


def test_a_link_the_user_made_to_their_own_source_is_followed(home, env, tmp_path):
    source = make_repo(tmp_path / "work" / "plugin", plugin_files())
    shortcut = tmp_path / "shortcut"
    shortcut.symlink_to(source.parent)
    ok(run(env, "plugins", "install", str(shortcut / "plugin"), "--no-input"))
    assert installed(home) == ["linked"]
    assert (home / "plugins" / "linked" / "__init__.py").read_text(encoding="utf-8") == CODE


def test_an_update_whose_subdir_became_a_link_keeps_the_installed_copy(home, env, tmp_path, outside):
    repo = make_repo(tmp_path / "repo", plugin_files("plug/"))
    ok(run(env, "plugins", "install", repo.as_uri(), "--subdir", "plug", "--no-input"))
    records = (home / "plugins" / ".installs.json").read_text(encoding="utf-8")
    git("rm", "-q", "-r", "plug", cwd=repo)
    (repo / "plug").symlink_to(outside)
    commit_all(repo, "plug is now a link")

    result = failed(run(env, "plugins", "update", "linked", "--no-input"))
    assert "plug" in result.stderr and "link" in result.stderr and "was kept as it was" in result.stderr
    assert sorted(p.name for p in (home / "plugins" / "linked").iterdir()) == ["__init__.py", "plugin.yaml"]
    assert (home / "plugins" / ".installs.json").read_text(encoding="utf-8") == records
    assert leaked(home) == []


# --------------------------------------------------------------------------- pip sources


def pip_project(root: Path) -> Path:
    return write_pip_project(root, "hk-linked", CODE, entry_point="linked")


@pytest.mark.parametrize(
    ("make_link", "link"),
    [
        (lambda project, outside: (project / "hk_linked" / "keys").symlink_to(outside), "keys"),
        (
            lambda project, outside: (project / "hk_linked" / "key.txt").symlink_to(outside / "id_ed25519"),
            "key.txt",
        ),
    ],
    ids=["link-to-a-directory", "link-to-a-file"],
)
def test_a_pip_project_with_a_link_outside_is_refused_before_pip_runs(
    home, env, tmp_path, outside, make_link, link
):
    project = pip_project(tmp_path / "project")
    make_link(project, outside)
    target = tmp_path / "site"
    for source in (str(project), f"pip:{project}"):
        result = failed(run(env, "plugins", "install", source, f"--pip-arg=--target={target}", *PIP_OFFLINE))
        assert link in result.stderr and "link" in result.stderr
        assert not target.exists() and leaked(home) == []  # pip never ran


def test_a_pip_project_whose_package_is_a_link_is_refused(home, env, tmp_path, outside):
    project = pip_project(tmp_path / "project")
    real = tmp_path / "elsewhere"
    (project / "hk_linked").rename(real)
    (real / "key.txt").write_text(CANARY, encoding="utf-8")
    (project / "hk_linked").symlink_to(real)
    target = tmp_path / "site"
    result = failed(
        run(env, "plugins", "install", str(project), f"--pip-arg=--target={target}", *PIP_OFFLINE)
    )
    assert "hk_linked" in result.stderr and "link" in result.stderr
    assert not target.exists() or leaked(target) == []


def test_a_pip_update_from_a_project_that_gained_a_link_keeps_the_installed_version(
    home, env, tmp_path, outside
):
    project = pip_project(tmp_path / "project")
    target = tmp_path / "site"
    ok(run(env, "plugins", "install", str(project), f"--pip-arg=--target={target}", *PIP_OFFLINE))
    installed_files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*"))
    (project / "hk_linked" / "keys").symlink_to(outside)
    result = failed(run(env, "plugins", "update", "linked", "--no-input"))
    assert "keys" in result.stderr and "link" in result.stderr
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*")) == installed_files
    assert leaked(target) == []


def test_links_that_stay_inside_a_pip_project_are_kept(home, env, tmp_path):
    project = pip_project(tmp_path / "project")
    (project / "docs").mkdir()
    (project / "docs" / "README.md").write_text("the plugin\n", encoding="utf-8")
    (project / "README.md").symlink_to(Path("docs") / "README.md")
    target = tmp_path / "site"
    ok(run(env, "plugins", "install", str(project), f"--pip-arg=--target={target}", *PIP_OFFLINE))
    assert (target / "hk_linked" / "__init__.py").read_text(encoding="utf-8") == CODE


def test_an_sdist_with_links_outside_installs_nothing_from_outside(home, env, tmp_path, outside):
    """pip itself refuses an archive member that links out of the unpacked folder (a guard: the kernel
    relies on it)."""
    project = pip_project(tmp_path / "hk_linked-1.0")
    (project / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: hk-linked\nVersion: 1.0\n")
    sdist = tmp_path / "hk_linked-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        archive.add(project, arcname="hk_linked-1.0")
        for name, target in (("keys", str(outside)), ("key.txt", "../../dot-ssh/id_ed25519")):
            member = tarfile.TarInfo(f"hk_linked-1.0/hk_linked/{name}")
            member.type, member.linkname = tarfile.SYMTYPE, target
            archive.addfile(member, io.BytesIO(b""))
    target = tmp_path / "site"
    failed(run(env, "plugins", "install", str(sdist), f"--pip-arg=--target={target}", *PIP_OFFLINE))
    assert not target.exists() or leaked(target) == []
    assert leaked(home) == []
