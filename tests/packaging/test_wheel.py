"""The built wheel carries the bundled extensions, and an installed kernel finds them.

The wheel is built from the checkout without network access, installed into a fresh venv,
and run from a directory outside the checkout.  The fresh venv reaches the runtime
dependencies through a plain path line in a ``.pth`` file pointing at this venv's
site-packages: a plain path does not make Python process the ``.pth`` files found there,
so the editable install of the checkout stays invisible to the fresh venv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

ISOLATION = {"PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HERMES_", "PIP_", "PYTHON")) and k not in ("VIRTUAL_ENV",)
    }
    env.update(ISOLATION)
    env.update(extra)
    return env


def check(argv: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, **kwargs)
    assert result.returncode == 0, f"{argv} failed:\n{result.stdout}\n{result.stderr}"
    return result


class Installed:
    def __init__(self, root: Path, wheel: Path, venv: Path, outside: Path, home: Path) -> None:
        self.root, self.wheel, self.venv, self.outside, self.home = root, wheel, venv, outside, home
        self.python = venv / "bin" / "python"
        self.script = venv / "bin" / "hermes-kernel"

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` from outside the checkout with an empty home."""
        return subprocess.run(
            argv,
            cwd=self.outside,
            env=clean_env(HERMES_HOME=str(self.home)),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    outer = sys.executable
    check(
        [
            outer,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--no-cache-dir",
            "-w",
            str(dist),
            str(REPO),
        ],
        env=clean_env(),
        cwd=root,
    )
    wheels = sorted(dist.glob("hermes_kernel-*.whl"))
    assert len(wheels) == 1, list(dist.iterdir())
    wheel = wheels[0]

    venv = root / "fresh"
    # ensurepip installs pip from the wheel bundled with Python: no network.
    check([outer, "-m", "venv", str(venv)], env=clean_env(), cwd=root)
    python = venv / "bin" / "python"
    # Installed before the .pth below exists, so that this pip cannot see the checkout's
    # editable install and call the wheel "already installed".
    check(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--no-cache-dir", str(wheel)],
        env=clean_env(),
        cwd=root,
    )
    fresh_site = Path(
        check(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            env=clean_env(),
            cwd=root,
        ).stdout.strip()
    )
    outer_site = sysconfig.get_paths()["purelib"]
    (fresh_site / "_hermes_test_outer_deps.pth").write_text(outer_site + "\n", encoding="utf-8")

    outside = root / "elsewhere"
    outside.mkdir()
    home = root / "empty-home"
    home.mkdir()
    return Installed(root, wheel, venv, outside, home)


def test_wheel_contains_the_bundled_calculator(installed):
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
    assert "kernel/_extensions/calculator/plugin.yaml" in names
    assert "kernel/_extensions/calculator/__init__.py" in names
    assert "kernel/_extensions/calculator/tools.py" in names
    assert "kernel/__init__.py" in names
    assert "kernel/py.typed" in names  # plugin authors' type checkers read the kernel's annotations
    assert not any(name.startswith("extensions/") for name in names), "extensions must live inside kernel/"
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(installed.wheel) as wheel:
        text = wheel.read(entry_points).decode()
    assert "hermes-kernel = kernel.cli:main" in text


def test_installed_kernel_is_the_wheel_not_the_checkout(installed):
    result = installed.run(
        [str(installed.python), "-c", "import kernel, yaml, pluggy, structlog; print(kernel.__file__)"]
    )
    assert result.returncode == 0, result.stderr
    location = Path(result.stdout.strip()).resolve()
    assert location.is_relative_to(installed.venv.resolve()), location
    assert not location.is_relative_to(REPO), location


def check_plugins(installed: Installed, stdout: str) -> None:
    plugins = json.loads(stdout)
    calc = next(p for p in plugins if p["name"] == "calculator")
    assert calc["source"] == "bundled"
    assert calc["enabled"] is True, calc["error"]
    assert calc["tools"] == ["calculate", "unit_convert"]
    path = Path(calc["path"]).resolve()
    assert path.is_relative_to(installed.venv.resolve()), path
    assert not path.is_relative_to(REPO), path
    assert (path / "plugin.yaml").is_file()


def test_python_m_kernel_lists_the_bundled_calculator(installed):
    result = installed.run([str(installed.python), "-m", "kernel", "plugins", "list", "--refresh", "--json"])
    assert result.returncode == 0, result.stderr
    check_plugins(installed, result.stdout)


def test_console_script_lists_the_bundled_calculator(installed):
    assert installed.script.is_file(), "pip did not create the hermes-kernel console script"
    shebang = installed.script.read_text(encoding="utf-8").splitlines()[0]
    assert str(installed.venv) in shebang, shebang
    result = installed.run([str(installed.script), "plugins", "list", "--refresh", "--json"])
    assert result.returncode == 0, result.stderr
    check_plugins(installed, result.stdout)
    table = installed.run([str(installed.script), "plugins", "list", "--refresh"])
    assert table.returncode == 0, table.stderr
    assert any(line.startswith("calculator") and "bundled" in line for line in table.stdout.splitlines())


def test_tool_call_works_from_the_installed_wheel(installed):
    result = installed.run([str(installed.script), "tools", "call", "calculate", '{"expression": "6*7"}'])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"expression": "6*7", "result": 42}
    convert = installed.run(
        [
            str(installed.python),
            "-m",
            "kernel",
            "tools",
            "call",
            "unit_convert",
            '{"value": 1.5, "from_unit": "TB", "to_unit": "GB"}',
        ]
    )
    assert convert.returncode == 0, convert.stderr
    assert json.loads(convert.stdout)["result"] == 1536
