"""Hostile sources and records for ``plugins install|update|remove``.

Git URLs and refs that look like options (``--upload-pack=...``, an ssh host starting with ``-``),
names and sub-directories that climb out of ``<home>/plugins`` (``../``), a repository whose new commit
breaks its manifest, links outside or does not compile (the update keeps the installed copy), and an
install record edited by someone else (an option-like URL, a ``../`` key, garbage, a site-packages
"target", the kernel's own distribution).  Each is refused naming the plugin, the place and the fix;
nothing runs and nothing outside the plugin's own folder changes.  Real git repositories, real
subprocesses.
"""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import pytest
import yaml
from conftest import cli_env
from test_cli_admin import failed, git, make_repo, ok, run

CODE = """
import json

def register(ctx):
    ctx.register_tool("hostile_tool", "demo", {{"description": "d"}},
                      lambda args, **kw: json.dumps({{"version": "{version}"}}))
"""


@pytest.fixture
def env(home: Path, bundled: Path) -> dict[str, str]:
    return cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled))


def files(version: str, name: str = "target") -> dict[str, str]:
    return {
        "plugin.yaml": yaml.safe_dump({"name": name, "version": version}),
        "__init__.py": CODE.format(version=version),
    }


def commit_all(repo: Path, message: str) -> None:
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", message, cwd=repo)


def records_file(home: Path) -> Path:
    return home / "plugins" / ".installs.json"


def write_records(home: Path, data: object) -> None:
    records_file(home).parent.mkdir(parents=True, exist_ok=True)
    records_file(home).write_text(json.dumps(data), encoding="utf-8")


def tool_version(env: dict[str, str]) -> str:
    return json.loads(ok(run(env, "tools", "call", "hostile_tool", "{}")).stdout)["version"]


# --------------------------------------------------------------------------- option-looking sources


@pytest.mark.parametrize(
    "source",
    [
        "--upload-pack=touch {marker}",
        "git+--upload-pack=touch {marker}",
        "-u touch {marker}",
        "ext::sh -c touch% {marker}",
        "ssh://-oProxyCommand=touch%20{marker}/repo.git",
    ],
    ids=["upload-pack", "git+upload-pack", "short-option", "ext-transport", "ssh-dash-host"],
)
def test_option_looking_sources_run_nothing(home, env, tmp_path, source):
    marker = tmp_path / "PWNED"
    result = run(env, "plugins", "install", "--no-input", "--", source.format(marker=marker))
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.startswith(("error:", "cloning")) and "Traceback" not in result.stderr
    assert not marker.exists()
    assert not (home / "plugins").exists() or not [
        p for p in (home / "plugins").iterdir() if not p.name.startswith(".")
    ]


def test_an_option_looking_ref_is_refused(home, env, tmp_path):
    repo = make_repo(tmp_path / "repo", files("1"))
    marker = tmp_path / "PWNED"
    result = failed(run(env, "plugins", "install", repo.as_uri(), f"--ref=--upload-pack=touch {marker}"))
    assert "is not a branch or tag name" in result.stderr
    assert not marker.exists()


def test_a_repository_whose_path_looks_like_an_option_is_only_a_path(home, env, tmp_path):
    marker = tmp_path / "PWNED"
    repo = make_repo(tmp_path / f"--upload-pack=touch {marker}", files("1"))
    ok(run(env, "plugins", "install", repo.as_uri(), "--no-input"))
    assert not marker.exists()
    assert tool_version(env) == "1"


# --------------------------------------------------------------------------- names that climb out


def test_names_and_subdirs_with_dot_dot_stay_inside_the_home(home, env, tmp_path):
    repo = make_repo(tmp_path / "repo", files("1"))
    result = failed(run(env, "plugins", "install", repo.as_uri(), "--name", "../escaped", "--no-input"))
    assert (
        "'../escaped' is not a plain directory name; choose the directory name with --name" in result.stderr
    )
    result = failed(run(env, "plugins", "install", repo.as_uri(), "--subdir", "../..", "--no-input"))
    assert "--subdir '../..' must be a relative path inside the source" in result.stderr
    evil = make_repo(tmp_path / "evil", files("1", name="../../escaped"))
    result = failed(run(env, "plugins", "install", evil.as_uri(), "--no-input"))
    assert "--name" in result.stderr
    assert not (home / "escaped").exists() and not (tmp_path / "escaped").exists()

    result = failed(run(env, "plugins", "update", "../escaped"))
    assert "no plugin named '../escaped'" in result.stderr
    result = failed(run(env, "plugins", "remove", "../../etc", "--yes"))
    assert "no plugin named '../../etc'" in result.stderr


# --------------------------------------------------------------------------- a new commit that breaks


@pytest.mark.parametrize(
    ("breakage", "says"),
    [
        (
            lambda repo, outside: (repo / "plugin.yaml").write_text("name: target\nversion: [1, 2\n"),
            "invalid manifest",
        ),
        (lambda repo, outside: (repo / "plugin.yaml").unlink(), "has no plugin.yaml"),
        (lambda repo, outside: (repo / "__init__.py").write_text("def register(ctx)\n"), "SyntaxError"),
        (lambda repo, outside: (repo / "key").symlink_to(outside), "not regular files or folders"),
        (
            lambda repo, outside: (repo / "plugin.yaml").write_text(
                yaml.safe_dump({"name": "other", "version": "2"})
            ),
            "is named 'other'",
        ),
    ],
    ids=["bad-manifest", "no-manifest", "syntax-error", "link-outside", "renamed"],
)
def test_an_update_to_a_broken_commit_keeps_the_working_copy(home, env, tmp_path, breakage, says):
    outside = tmp_path / "secret-key"
    outside.write_text("canary-secret\n", encoding="utf-8")
    repo = make_repo(tmp_path / "repo", files("1"))
    ok(run(env, "plugins", "install", repo.as_uri(), "--no-input"))
    before = records_file(home).read_text(encoding="utf-8")
    (repo / "__init__.py").write_text(CODE.format(version="2"), encoding="utf-8")
    breakage(repo, outside)
    commit_all(repo, "broken")

    result = failed(run(env, "plugins", "update", "target", "--no-input"))
    assert says in result.stderr
    assert "cannot update 'target'" in result.stderr
    assert f"{home / 'plugins' / 'target'} was kept as it was" in result.stderr
    assert tool_version(env) == "1"
    assert records_file(home).read_text(encoding="utf-8") == before
    installed = home / "plugins" / "target"
    assert not any("canary" in p.read_text(errors="replace") for p in installed.rglob("*") if p.is_file())
    assert [p.name for p in (home / "plugins").iterdir() if p.name.startswith(".install-")] == []


# --------------------------------------------------------------------------- edited records


def test_an_option_looking_url_in_the_record_is_not_cloned(home, env, tmp_path):
    repo = make_repo(tmp_path / "repo", files("1"))
    ok(run(env, "plugins", "install", repo.as_uri(), "--no-input"))
    data = json.loads(records_file(home).read_text(encoding="utf-8"))
    marker = tmp_path / "PWNED"
    data["plugins"]["target"]["url"] = f"--upload-pack=touch {marker}"
    write_records(home, data)
    result = failed(run(env, "plugins", "update", "target"))
    assert "its recorded URL" in result.stderr and "is not a git URL" in result.stderr
    assert str(records_file(home)) in result.stderr
    assert not marker.exists()
    data["plugins"]["target"]["url"] = repo.as_uri()
    data["plugins"]["target"]["ref"] = f"--upload-pack=touch {marker}"
    write_records(home, data)
    assert "its recorded ref" in failed(run(env, "plugins", "update", "target")).stderr
    assert not marker.exists()
    assert tool_version(env) == "1"


def test_record_keys_that_climb_out_are_ignored(home, env, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine\n", encoding="utf-8")
    repo = make_repo(tmp_path / "repo", files("2"))
    write_records(
        home,
        {"plugins": {"../../victim": {"kind": "git", "url": repo.as_uri(), "name": "target", "files": {}}}},
    )
    result = ok(run(env, "plugins", "update", "--all"))
    assert "nothing to update" in result.stdout
    result = failed(run(env, "plugins", "remove", "../../victim", "--yes"))
    assert "no plugin named" in result.stderr
    assert (victim / "keep.txt").read_text() == "mine\n"


def test_a_garbage_record_file_is_ignored_with_a_warning_and_replaced(home, env, tmp_path):
    write_records(home, None)
    records_file(home).write_bytes(b"\xff{not json")
    repo = make_repo(tmp_path / "repo", files("1"))
    result = ok(run(env, "plugins", "install", repo.as_uri(), "--no-input"))
    assert f"warning: {records_file(home)} cannot be read" in result.stderr
    assert (
        json.loads(records_file(home).read_text(encoding="utf-8"))["plugins"]["target"]["url"]
        == repo.as_uri()
    )


def test_a_recorded_target_that_is_site_packages_is_never_emptied(home, env):
    purelib = sysconfig.get_paths()["purelib"]
    record = {
        "name": "hk-not-installed-anywhere",
        "owned": True,
        "target": purelib,
        "entry_points": ["ghost"],
    }
    write_records(home, {"packages": {"hk-not-installed-anywhere": record}})
    result = failed(run(env, "plugins", "remove", "ghost", "--yes"))
    assert "is a site-packages folder of this Python, not a --target folder" in result.stderr


def test_the_kernels_own_distribution_is_never_uninstalled(home, env, tmp_path):
    empty = tmp_path / "empty-target"
    empty.mkdir()
    record = {"name": "hermes-kernel", "owned": True, "target": str(empty), "entry_points": ["kernelish"]}
    write_records(home, {"packages": {"hermes-kernel": record}})
    result = failed(run(env, "plugins", "remove", "kernelish", "--yes"))
    assert "comes from hermes-kernel itself, which this command never uninstalls" in result.stderr
