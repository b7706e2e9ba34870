"""``hermes-kernel plugins update``: fetch an installed plugin's newest version from where it came from.

Real sources only: a git repository made here (``git init``, commits, a tag), cloned through ``file://``;
a local plugin directory; a pip package built from a local project directory and installed offline
(``--no-index``, no build isolation) into a ``--target`` folder.  Every command is a real subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import cli_env, write_pip_project, write_plugin
from test_cli_admin import PIP_OFFLINE, failed, git, listing, make_repo, ok, run

TOOL_CODE = """
import json

def register(ctx):
    ctx.register_tool("{tool}", "demo", {{"description": "The {tool} tool."}},
                      lambda args, **kw: json.dumps({{"version": "{version}"}}))
"""


@pytest.fixture
def env(home: Path, bundled: Path) -> dict[str, str]:
    """The subprocess environment: ``home`` and an empty bundled directory."""
    return cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled))


def plugin_files(name: str, version: str, tool: str = "gitty_tool") -> dict[str, str]:
    return {
        "plugin.yaml": yaml.safe_dump({"name": name, "version": version, "provides_tools": [tool]}),
        "__init__.py": TOOL_CODE.format(tool=tool, version=version),
    }


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    """Write ``files`` into ``repo``, commit them, return the new commit's hash."""
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", message, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo).strip()


def call_tool(env: dict[str, str], tool: str, **extra: str) -> dict[str, Any]:
    return json.loads(ok(run(env, "tools", "call", tool, "{}", **extra)).stdout)


def records(home: Path) -> dict[str, Any]:
    return json.loads((home / "plugins" / ".installs.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- git


def test_update_fast_forwards_a_git_plugin_to_the_new_commit_and_runs_the_new_code(home, env, tmp_path):
    repo = make_repo(tmp_path / "repo", plugin_files("gitty", "1.0.0"))
    first = git("rev-parse", "HEAD", cwd=repo).strip()
    ok(run(env, "plugins", "install", repo.as_uri(), "--no-input"))
    assert call_tool(env, "gitty_tool") == {"version": "1.0.0"}
    record = records(home)["plugins"]["gitty"]
    assert record["kind"] == "git" and record["url"] == repo.as_uri() and record["commit"] == first
    assert record["branch"] == "main" and record["ref"] is None

    result = ok(run(env, "plugins", "update", "gitty"))
    assert f"'gitty' is up to date: commit {first[:12]} of {repo.as_uri()} (branch main)" in result.stdout

    second = commit(repo, plugin_files("gitty", "2.0.0"), "v2")
    result = ok(run(env, "plugins", "update", "gitty", "--no-input"))
    dest = home / "plugins" / "gitty"
    assert (
        f"updated plugin 'gitty' 1.0.0 -> 2.0.0 (commit {first[:12]} -> {second[:12]}) "
        f"from {repo.as_uri()} (branch main) in {dest}"
    ) in result.stdout
    assert "'gitty' is enabled: it runs from the next start" in result.stdout
    assert call_tool(env, "gitty_tool") == {"version": "2.0.0"}
    assert listing(env)["gitty"]["version"] == "2.0.0"
    assert records(home)["plugins"]["gitty"]["commit"] == second
    assert sorted(p.name for p in dest.iterdir()) == ["__init__.py", "plugin.yaml"]  # no .git, no staging
    assert [p.name for p in (home / "plugins").iterdir() if p.name.startswith(".install-")] == []


def test_update_follows_the_branch_it_was_installed_from(home, env, tmp_path):
    repo = make_repo(tmp_path / "repo", plugin_files("gitty", "1.0.0"))
    git("checkout", "-q", "-b", "stable", cwd=repo)
    commit(repo, plugin_files("gitty", "1.1.0"), "stable 1.1")
    ok(run(env, "plugins", "install", repo.as_uri(), "--ref", "stable", "--no-input"))
    assert call_tool(env, "gitty_tool") == {"version": "1.1.0"}

    commit(repo, plugin_files("gitty", "1.2.0"), "stable 1.2")
    git("checkout", "-q", "main", cwd=repo)
    commit(repo, plugin_files("gitty", "9.0.0"), "main moves on")  # not the installed branch
    result = ok(run(env, "plugins", "update", "gitty"))
    assert "updated plugin 'gitty' 1.1.0 -> 1.2.0" in result.stdout and "at stable" in result.stdout
    assert call_tool(env, "gitty_tool") == {"version": "1.2.0"}


def test_a_plugin_installed_from_a_tag_stays_on_it(home, env, tmp_path):
    repo = make_repo(tmp_path / "repo", plugin_files("gitty", "1.0.0"))
    git("tag", "v1", cwd=repo)
    ok(run(env, "plugins", "install", repo.as_uri(), "--ref", "v1", "--no-input"))
    commit(repo, plugin_files("gitty", "2.0.0"), "v2")
    result = ok(run(env, "plugins", "update", "gitty"))
    assert "'gitty' is up to date" in result.stdout and "at v1" in result.stdout
    assert call_tool(env, "gitty_tool") == {"version": "1.0.0"}
    assert records(home)["plugins"]["gitty"]["branch"] is None  # a tag: no branch


def test_update_of_a_plugin_in_a_repository_subdirectory(home, env, tmp_path):
    repo = make_repo(
        tmp_path / "repo", {f"plugins/inner/{k}": v for k, v in plugin_files("inner", "0.1").items()}
    )
    ok(run(env, "plugins", "install", repo.as_uri(), "--subdir", "plugins/inner", "--no-input"))
    commit(repo, {f"plugins/inner/{k}": v for k, v in plugin_files("inner", "0.2").items()}, "0.2")
    result = ok(run(env, "plugins", "update", "inner"))
    assert "updated plugin 'inner' 0.1 -> 0.2" in result.stdout
    assert call_tool(env, "gitty_tool") == {"version": "0.2"}


def test_local_changes_are_not_overwritten_without_force(home, env, tmp_path):
    repo = make_repo(tmp_path / "repo", plugin_files("gitty", "1.0.0"))
    ok(run(env, "plugins", "install", repo.as_uri(), "--no-input"))
    dest = home / "plugins" / "gitty"
    (dest / "notes.txt").write_text("mine\n", encoding="utf-8")
    with (dest / "__init__.py").open("a", encoding="utf-8") as handle:
        handle.write("# a local fix\n")

    # Nothing new upstream: up to date, with a note about the changes.
    result = ok(run(env, "plugins", "update", "gitty"))
    assert "is up to date" in result.stdout
    assert "changed: __init__.py" in result.stdout and "added: notes.txt" in result.stdout

    commit(repo, plugin_files("gitty", "2.0.0"), "v2")
    result = failed(run(env, "plugins", "update", "gitty"))
    assert "local changes in" in result.stderr and "changed: __init__.py; added: notes.txt" in result.stderr
    assert "hermes-kernel plugins update gitty --force" in result.stderr
    assert (dest / "notes.txt").is_file() and "# a local fix" in (dest / "__init__.py").read_text()

    ok(run(env, "plugins", "update", "gitty", "--force"))
    assert not (dest / "notes.txt").exists()
    assert call_tool(env, "gitty_tool") == {"version": "2.0.0"}


def test_update_asks_for_variables_a_new_version_needs(home, env, tmp_path):
    repo = make_repo(tmp_path / "repo", plugin_files("gitty", "1.0.0"))
    ok(run(env, "plugins", "install", repo.as_uri(), "--no-input"))
    files = plugin_files("gitty", "2.0.0")
    files["plugin.yaml"] = yaml.safe_dump(
        {"name": "gitty", "version": "2.0.0", "requires_env": ["HK_NEW_KEY"]}
    )
    commit(repo, files, "needs a key")
    result = ok(run(env, "plugins", "update", "gitty", stdin="the-key\n"))
    assert "HK_NEW_KEY:" in result.stdout and f"saved HK_NEW_KEY to {home / '.env'}" in result.stdout
    assert "'gitty' is enabled" in result.stdout

    commit(repo, {"README": "3\n"}, "readme")
    result = ok(run(env, "plugins", "update", "gitty", "--no-input", HK_NEW_KEY=""))
    assert "(same version)" in result.stdout  # a new commit, the same manifest version


def test_update_reports_missing_variables_without_asking_with_no_input(home, env, tmp_path):
    repo = make_repo(tmp_path / "repo", plugin_files("gitty", "1.0.0"))
    ok(run(env, "plugins", "install", repo.as_uri(), "--no-input"))
    files = plugin_files("gitty", "2.0.0")
    files["plugin.yaml"] = yaml.safe_dump(
        {"name": "gitty", "version": "2.0.0", "requires_env": ["HK_NEW_KEY"]}
    )
    commit(repo, files, "needs a key")
    result = ok(run(env, "plugins", "update", "gitty", "--no-input", stdin="never-read\n"))
    assert "HK_NEW_KEY:" not in result.stdout
    assert "'gitty' stays disabled until its variables are set: still missing: HK_NEW_KEY" in result.stdout
    assert not (home / ".env").exists()


# --------------------------------------------------------------------------- a local directory


def test_update_copies_a_directory_plugin_again_from_its_source(home, env, tmp_path):
    src = write_plugin(
        tmp_path / "src",
        "local",
        TOOL_CODE.format(tool="local_tool", version="1"),
        {"name": "local", "version": "1"},
    )
    ok(run(env, "plugins", "install", str(src), "--no-input"))
    assert "'local' is up to date: the files of" in ok(run(env, "plugins", "update", "local")).stdout
    (src / "__init__.py").write_text(TOOL_CODE.format(tool="local_tool", version="2"), encoding="utf-8")
    (src / "plugin.yaml").write_text(yaml.safe_dump({"name": "local", "version": "2"}), encoding="utf-8")
    result = ok(run(env, "plugins", "update", "local"))
    assert (
        f"updated plugin 'local' 1 -> 2 from {src.resolve()} in {home / 'plugins' / 'local'}" in result.stdout
    )
    assert call_tool(env, "local_tool") == {"version": "2"}


def test_update_of_a_directory_plugin_whose_source_is_gone(home, env, tmp_path):
    src = write_plugin(tmp_path / "src", "local", manifest={"name": "local", "version": "1"})
    ok(run(env, "plugins", "install", str(src), "--no-input"))
    import shutil

    shutil.rmtree(src)
    result = failed(run(env, "plugins", "update", "local"))
    assert f"installed from the directory {src.resolve()}, which is gone" in result.stderr
    assert "plugins install DIR --force" in result.stderr
    assert (home / "plugins" / "local" / "plugin.yaml").is_file()


# --------------------------------------------------------------------------- pip


def make_project(root: Path, version: str, reply: str) -> Path:
    """A local project ``hk-upd-plugin``: plugin ``updplug``, whose tool ``upd_tool`` answers ``reply``."""
    code = TOOL_CODE.format(tool="upd_tool", version=reply)
    return write_pip_project(root, "hk-upd-plugin", code, version=version, entry_point="updplug")


def test_update_upgrades_a_pip_plugin_in_its_target_folder(home, env, tmp_path):
    project = make_project(tmp_path / "project", "0.1.0", "from 0.1.0")
    target = tmp_path / "site"
    ok(run(env, "plugins", "install", f"pip:{project}", f"--pip-arg=--target={target}", *PIP_OFFLINE))
    on_path = {"PYTHONPATH": str(target)}
    assert call_tool(env, "upd_tool", **on_path) == {"version": "from 0.1.0"}
    record = records(home)["packages"]["hk-upd-plugin"]
    assert (
        record["owned"] is True and record["target"] == str(target) and record["entry_points"] == ["updplug"]
    )

    make_project(project, "0.2.0", "from 0.2.0")
    # Named by its entry point, the folder not on PYTHONPATH: found through the record.
    result = ok(run(env, "plugins", "update", "updplug"))
    assert (
        f"updated package hk-upd-plugin 0.1.0 -> 0.2.0 from {project}: plugin(s) 'updplug'" in result.stdout
    )
    assert "--upgrade" in result.stderr and f"--target={target}" in result.stderr
    assert (
        f"'updplug' is enabled: it runs from the next start that has {target} on PYTHONPATH" in result.stdout
    )
    assert call_tool(env, "upd_tool", **on_path) == {"version": "from 0.2.0"}
    # pip --target --upgrade leaves the old .dist-info behind; update removes it.
    assert sorted(p.name for p in target.iterdir()) == ["hk_upd_plugin", "hk_upd_plugin-0.2.0.dist-info"]
    assert records(home)["packages"]["hk-upd-plugin"]["version"] == "0.2.0"

    # The same version again (a local project is rebuilt): said so.
    result = ok(run(env, "plugins", "update", "hk-upd-plugin", PYTHONPATH=str(target)))
    assert "reinstalled package hk-upd-plugin 0.2.0" in result.stdout and "(same version)" in result.stdout


def test_a_failing_pip_update_keeps_the_installed_version(home, env, tmp_path):
    project = make_project(tmp_path / "project", "0.1.0", "from 0.1.0")
    target = tmp_path / "site"
    ok(run(env, "plugins", "install", f"pip:{project}", f"--pip-arg=--target={target}", *PIP_OFFLINE))
    (project / "pyproject.toml").write_text("[project\nbroken", encoding="utf-8")
    result = run(env, "plugins", "update", "updplug")
    assert result.returncode == 1, result.stderr  # (pip prints its own traceback for the broken file)
    assert "pip could not update hk-upd-plugin" in result.stderr and "0.1.0 stays installed" in result.stderr
    assert call_tool(env, "upd_tool", PYTHONPATH=str(target)) == {"version": "from 0.1.0"}


# --------------------------------------------------------------------------- nothing to update


def test_nothing_to_update_for_bundled_hand_made_and_foreign_plugins(home, env, bundled, tmp_path):
    write_plugin(bundled, "shipped", manifest={"name": "shipped"})
    result = failed(run(env, "plugins", "update", "shipped"))
    assert "'shipped' is bundled with hermes-kernel" in result.stderr
    assert "changes only with hermes-kernel itself" in result.stderr

    write_plugin(home / "plugins", "handmade", manifest={"name": "handmade"})
    result = failed(run(env, "plugins", "update", "handmade"))
    assert (
        f"'handmade' ({home / 'plugins' / 'handmade'}) was not installed by 'plugins install'"
        in result.stderr
    )
    assert (
        "no source to update it from" in result.stderr and "plugins install SOURCE --force" in result.stderr
    )

    # A package pip installed without 'plugins install': pointed to pip.
    project = make_project(tmp_path / "project", "0.1.0", "x")
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps", "-q"]
    subprocess.run([*pip, "--target", str(target), str(project)], check=True, capture_output=True)
    result = failed(run(env, "plugins", "update", "updplug", PYTHONPATH=str(target)))
    assert "which 'plugins install' did not install" in result.stderr
    assert "-m pip install --upgrade hk-upd-plugin" in result.stderr

    result = failed(run(env, "plugins", "update", "no-such-plugin"))
    assert "no plugin named 'no-such-plugin'" in result.stderr


def test_update_needs_names_or_all(home, env):
    result = failed(run(env, "plugins", "update"), code=2)
    assert "name the plugins to update, or pass --all" in result.stderr
    result = ok(run(env, "plugins", "update", "--all"))
    assert "no plugin was installed with 'hermes-kernel plugins install'" in result.stdout


def test_update_all_updates_every_recorded_install(home, env, tmp_path):
    repo = make_repo(tmp_path / "repo", plugin_files("gitty", "1.0.0"))
    ok(run(env, "plugins", "install", repo.as_uri(), "--no-input"))
    project = make_project(tmp_path / "project", "0.1.0", "from 0.1.0")
    target = tmp_path / "site"
    ok(run(env, "plugins", "install", f"pip:{project}", f"--pip-arg=--target={target}", *PIP_OFFLINE))
    write_plugin(home / "plugins", "handmade", manifest={"name": "handmade"})  # not recorded: not touched

    commit(repo, plugin_files("gitty", "2.0.0"), "v2")
    make_project(project, "0.2.0", "from 0.2.0")
    result = ok(run(env, "plugins", "update", "--all", "--no-input"))
    assert "updated plugin 'gitty' 1.0.0 -> 2.0.0" in result.stdout
    assert "updated package hk-upd-plugin 0.1.0 -> 0.2.0" in result.stdout
    assert "handmade" not in result.stdout
    assert call_tool(env, "gitty_tool") == {"version": "2.0.0"}
    assert call_tool(env, "upd_tool", PYTHONPATH=str(target)) == {"version": "from 0.2.0"}


def test_update_help_is_plain_text(env):
    text = ok(run(env, "plugins", "update", "--help")).stdout
    assert text.startswith("usage: hermes-kernel plugins update")
    for word in ("--all", "--force", "git URL", "pip install --upgrade", "Bundled plugins"):
        assert word in text
    assert "`" not in text
