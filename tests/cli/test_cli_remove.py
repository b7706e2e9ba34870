"""``hermes-kernel plugins remove``: a user plugin's directory, or the pip package that install put there.

The rule: a package is uninstalled only when ``plugins install`` installed it (recorded in
``<home>/plugins/.installs.json`` as not there before), never hermes-kernel, never a package another
installed package requires, never what pip pulled in along with it.  Real packages only: local projects
built and installed offline (``--no-index``) into a ``--target`` folder, or into a fresh virtual
environment made here (its ``pip uninstall`` path); every command is a real subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, cli_env, write_pip_project, write_plugin
from test_cli_admin import PIP_OFFLINE, failed, listing, ok, run, run_in_pty, tool_plugin, write_config

PIP = [sys.executable, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps", "-q"]


@pytest.fixture
def env(home: Path, bundled: Path) -> dict[str, str]:
    """The subprocess environment: ``home`` and an empty bundled directory."""
    return cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled))


def make_project(root: Path, dist: str, ep: str | None, requires: list[str] | None = None) -> Path:
    """A local project ``dist`` (module ``dist`` with ``_`` for ``-``) declaring plugin ``ep``."""
    module = dist.replace("-", "_")
    code = (
        "import json\n\ndef register(ctx):\n"
        f"    ctx.register_tool('{module}_tool', 'demo', {{'description': 'd'}},\n"
        "                      lambda a, **k: json.dumps({}))\n"
    )
    return write_pip_project(root, dist, code, entry_point=ep, requires=requires)


def records(home: Path) -> dict[str, Any]:
    return json.loads((home / "plugins" / ".installs.json").read_text(encoding="utf-8"))


def install_into(env: dict[str, str], project: Path, target: Path) -> None:
    ok(run(env, "plugins", "install", f"pip:{project}", f"--pip-arg=--target={target}", *PIP_OFFLINE))


# --------------------------------------------------------------------------- a --target folder


def test_remove_uninstalls_a_package_that_install_put_in_its_target(home, env, tmp_path):
    target = tmp_path / "site"
    install_into(env, make_project(tmp_path / "p", "hk-rm-plugin", "rmplug"), target)
    assert listing(env, PYTHONPATH=str(target))["rmplug"]["enabled"] is True
    write_config(home, {"plugins": {"disabled": ["rmplug"]}})

    result = failed(run(env, "plugins", "remove", "rmplug", PYTHONPATH=str(target)))
    assert "pass --yes" in result.stderr and (target / "hk_rm_plugin").is_dir()

    result = ok(run(env, "plugins", "remove", "rmplug", "--yes", PYTHONPATH=str(target)))
    assert f"uninstalled package hk-rm-plugin 1.0 (plugin(s) 'rmplug') from {target}" in result.stdout
    assert "still listed in plugins.disabled" in result.stdout
    assert list(target.iterdir()) == []  # its module and its .dist-info, nothing else was there
    assert "hk-rm-plugin" not in records(home)["packages"]
    assert "rmplug" not in listing(env, PYTHONPATH=str(target))


def test_remove_finds_a_package_by_its_record_when_its_folder_is_not_on_the_path(home, env, tmp_path):
    target = tmp_path / "site"
    install_into(env, make_project(tmp_path / "p", "hk-rm-plugin", "rmplug"), target)
    (target / "unrelated.txt").write_text("not the package's\n", encoding="utf-8")
    result = ok(run(env, "plugins", "remove", "hk-rm-plugin", "--yes"))  # by distribution name, no PYTHONPATH
    assert "uninstalled package hk-rm-plugin 1.0" in result.stdout
    assert sorted(p.name for p in target.iterdir()) == ["unrelated.txt"]


def test_remove_asks_on_a_terminal_before_uninstalling(home, env, tmp_path):
    target = tmp_path / "site"
    install_into(env, make_project(tmp_path / "p", "hk-rm-plugin", "rmplug"), target)
    code, screen = run_in_pty(
        {**env, "PYTHONPATH": str(target)}, ["plugins", "remove", "rmplug"], [("[y/N] ", "n")]
    )
    assert code == 1 and "Uninstall package hk-rm-plugin 1.0 (plugin(s) 'rmplug')" in screen
    assert (target / "hk_rm_plugin").is_dir()
    code, screen = run_in_pty(
        {**env, "PYTHONPATH": str(target)}, ["plugins", "uninstall", "rmplug"], [("[y/N] ", "y")]
    )
    assert code == 0, screen
    assert not (target / "hk_rm_plugin").exists()


def test_a_package_that_was_there_before_install_is_not_uninstalled(home, env, tmp_path):
    project = make_project(tmp_path / "p", "hk-rm-plugin", "rmplug")
    target = tmp_path / "site"
    subprocess.run([*PIP, "--target", str(target), str(project)], check=True, capture_output=True)
    result = ok(
        run(env, "plugins", "install", f"pip:{project}", f"--pip-arg=--target={target}", *PIP_OFFLINE)
    )
    assert records(home)["packages"]["hk-rm-plugin"]["owned"] is False
    result = failed(run(env, "plugins", "remove", "rmplug", "--yes", PYTHONPATH=str(target)))
    assert "which was already installed before 'plugins install' ran" in result.stderr
    assert "-m pip uninstall hk-rm-plugin" in result.stderr and "plugins disable rmplug" in result.stderr
    assert (target / "hk_rm_plugin").is_dir()


def test_a_package_pip_installed_by_hand_is_not_uninstalled(home, env, tmp_path):
    target = tmp_path / "site"
    project = make_project(tmp_path / "p", "hk-rm-plugin", "rmplug")
    subprocess.run([*PIP, "--target", str(target), str(project)], check=True, capture_output=True)
    result = failed(run(env, "plugins", "remove", "rmplug", "--yes", PYTHONPATH=str(target)))
    assert "which 'plugins install' did not install (no record of it in" in result.stderr
    assert (target / "hk_rm_plugin").is_dir()


def test_a_package_another_package_requires_is_not_uninstalled(home, env, tmp_path):
    target = tmp_path / "site"
    install_into(env, make_project(tmp_path / "p", "hk-rm-plugin", "rmplug"), target)
    needs_it = make_project(tmp_path / "q", "hk-needs-it", None, requires=["hk_rm_plugin>=1"])
    subprocess.run([*PIP, "--target", str(target), str(needs_it)], check=True, capture_output=True)
    result = failed(run(env, "plugins", "remove", "rmplug", "--yes", PYTHONPATH=str(target)))
    assert "the package hk-rm-plugin is required by hk-needs-it" in result.stderr
    assert (target / "hk_rm_plugin").is_dir()


def test_the_plugin_goes_and_what_pip_pulled_in_stays(home, env, tmp_path):
    wheels = tmp_path / "wheels"
    helper = make_project(tmp_path / "helper", "hk-helper-lib", None)
    build = [sys.executable, "-m", "pip", "wheel", "--no-index", "--no-build-isolation", "--no-deps", "-q"]
    subprocess.run([*build, "-w", str(wheels), str(helper)], check=True, capture_output=True)
    project = make_project(tmp_path / "p", "hk-rm-plugin", "rmplug", requires=["hk-helper-lib"])
    target = tmp_path / "site"
    ok(
        run(env, "plugins", "install", f"pip:{project}", f"--pip-arg=--target={target}",
            "--pip-arg=--no-index", "--pip-arg=--no-build-isolation", f"--pip-arg=--find-links={wheels}")
    )  # fmt: skip
    assert records(home)["packages"]["hk-rm-plugin"]["pulled_in"] == ["hk-helper-lib"]
    result = ok(run(env, "plugins", "remove", "rmplug", "--yes", PYTHONPATH=str(target)))
    assert "kept what pip installed along with it: hk-helper-lib" in result.stdout
    assert sorted(p.name for p in target.iterdir()) == ["hk_helper_lib", "hk_helper_lib-1.0.dist-info"]


# --------------------------------------------------------------------------- a Python environment


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment (no pip of its own) that reaches this one's packages (pip, hatchling, the
    kernel's dependencies) through a ``.pth`` path line, and the checkout through another: a
    ``pip install`` with its python goes into its own site-packages, a ``pip uninstall`` takes it out."""
    root = tmp_path_factory.mktemp("venv")
    venv = root / "env"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True
    )
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    outer = sysconfig.get_paths()["purelib"]
    (Path(site) / "_hermes_test_outer.pth").write_text(f"{outer}\n{REPO}\n", encoding="utf-8")
    return python


def test_remove_pip_uninstalls_a_package_install_put_in_the_environment(
    home, bundled, tmp_path, fresh_python
):
    # The subject is a plugin installed in an environment: its entry points are read.
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled), HERMES_KERNEL_ENTRY_POINTS="all")
    cli = [str(fresh_python), "-m", "kernel"]

    def hk(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*cli, *args], env=env, capture_output=True, text=True, timeout=300, check=False
        )

    project = make_project(tmp_path / "p", "hk-env-plugin", "envplug")
    result = ok(hk("plugins", "install", f"pip:{project}", *PIP_OFFLINE))
    assert "installed package hk-env-plugin 1.0: plugin(s) 'envplug'" in result.stdout
    assert "'envplug' is enabled: it runs from the next start (" in result.stdout
    record = records(home)["packages"]["hk-env-plugin"]
    venv = fresh_python.parent.parent
    assert record["owned"] is True and record["target"] is None and Path(record["prefix"]) == venv

    # This Python (another environment) is told to use that one.
    result = failed(run(env, "plugins", "remove", "hk-env-plugin", "--yes"))
    assert f"installed into the Python environment {venv}" in result.stderr
    assert f"run it with that Python: {fresh_python} -m kernel plugins remove envplug" in result.stderr

    result = ok(hk("plugins", "remove", "envplug", "--yes"))
    assert f"uninstalled package hk-env-plugin 1.0 (plugin(s) 'envplug') from {venv}" in result.stdout
    assert "pip uninstall" in result.stderr
    found = subprocess.run(
        [str(fresh_python), "-c", "import importlib.util; print(importlib.util.find_spec('hk_env_plugin'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == "None"
    assert "hk-env-plugin" not in records(home)["packages"]


# --------------------------------------------------------------------------- directories


def test_remove_of_an_installed_directory_drops_its_record(home, env, tmp_path):
    src = tool_plugin(tmp_path / "src", "weather", "forecast")
    ok(run(env, "plugins", "install", str(src), "--no-input"))
    assert "weather" in records(home)["plugins"]
    result = ok(run(env, "plugins", "remove", "weather", "--yes"))
    assert f"removed plugin 'weather' ({home / 'plugins' / 'weather'})" in result.stdout
    assert records(home)["plugins"] == {}
    assert not (home / "plugins" / "weather").exists()


def test_remove_of_a_record_whose_directory_is_gone(home, env, tmp_path):
    import shutil

    src = tool_plugin(tmp_path / "src", "weather", "forecast")
    ok(run(env, "plugins", "install", str(src), "--no-input"))
    shutil.rmtree(home / "plugins" / "weather")
    result = ok(run(env, "plugins", "remove", "weather", "--yes"))
    assert "is no longer in" in result.stdout and "removed its install record" in result.stdout
    assert records(home)["plugins"] == {}


def test_bundled_and_project_plugins_are_not_removed(home, env, bundled):
    write_plugin(bundled, "shipped", manifest={"name": "shipped"})
    result = failed(run(env, "plugins", "remove", "shipped", "--yes"))
    assert "bundled with hermes-kernel" in result.stderr and "plugins disable shipped" in result.stderr
    assert (bundled / "shipped").is_dir()


def test_remove_help_states_the_rule(env):
    text = " ".join(ok(run(env, "plugins", "remove", "--help")).stdout.split())
    for words in ("only a package", "never uninstalled", "dependencies pip installed"):
        assert words in text
    assert "`" not in text
