"""Files from outside the kernel's control that try to hang or exhaust it: YAML alias bombs,
self-references and oversized files, in manifests, ``config.yaml`` and ``HOOK.yaml``, and
values a plugin stores with ``ctx.set_config``.

Each is refused with a message naming the file and what to do, the rest of the
kernel keeps working, and the CLI commands that would fix the problem still run
(real subprocesses; their ``timeout`` only guards against a hang, it is not a
performance assertion).
"""

from __future__ import annotations

import json
import subprocess
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, cli_env

from kernel import Kernel
from kernel.base.safe_yaml import MAX_NODES, load_yaml

# Nine levels of ten aliases: 10**9 values once expanded.
BOMB = "\n".join(
    ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
)
SELF_REFERENCE = "loop: &loop [1, *loop]\n"


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        env=cli_env(home),
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (BOMB, "alias bomb"),
        (SELF_REFERENCE, "self-reference"),
        ("name: x\nauthor: &a {name: *a}\n", "self-reference"),
    ],
)
def test_loader_refuses_bombs_and_self_references(text: str, problem: str) -> None:
    """The loader counts what aliases expand to over the parser's events, before building anything."""
    with pytest.raises(yaml.YAMLError, match=problem):
        load_yaml(text)


def test_loader_keeps_ordinary_aliases() -> None:
    """Aliases that expand to a sane size are YAML as usual."""
    text = "base: &base {model: m, retries: 2}\nfirst: *base\nsecond: *base\nstar: '*not an alias*'\n"
    data = load_yaml(text)
    assert data["first"] == data["second"] == {"model": "m", "retries": 2}
    assert data["star"] == "*not an alias*"
    wide = (
        "a: &a [" + ", ".join(["x"] * 1000) + "]\nb: [" + ", ".join(["*a"] * (MAX_NODES // 1000 - 2)) + "]\n"
    )
    assert len(load_yaml(wide)["b"]) == MAX_NODES // 1000 - 2


@pytest.mark.parametrize("body", [BOMB, SELF_REFERENCE])
def test_a_bombed_manifest_disables_only_that_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path, body: str
) -> None:
    """A manifest with a bomb (in any field) is that plugin's error, naming the file and the line;
    the other plugins load, and ``plugins list`` answers."""
    bad = plugin_dir("bombed", manifest="name: bombed\n" + body + "\n")
    plugin_dir("fine")
    k = make_kernel()
    info = k.plugin("bombed")
    assert not info.enabled and info.error is not None
    assert str(bad / "plugin.yaml") in info.error and "line" in info.error
    assert k.plugin("fine").enabled
    proc = cli(home, "plugins", "list", "--refresh", "--json")
    assert proc.returncode == 0, proc.stderr
    listed = {p["name"]: p for p in json.loads(proc.stdout)}
    assert listed["fine"]["enabled"] and not listed["bombed"]["enabled"]


def test_an_oversized_manifest_is_refused_without_being_parsed(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    """A 3 MB ``plugin.yaml`` (the limit is 1 MiB) is refused with its size and the limit."""
    big = plugin_dir("big", manifest="name: big\ndescription: " + "x" * 3_000_000 + "\n")
    k = make_kernel()
    error = k.plugin("big").error or ""
    assert str(big / "plugin.yaml") in error and "read up to 1,048,576 bytes" in error


@pytest.mark.parametrize("body", [BOMB, SELF_REFERENCE])
def test_a_bombed_config_is_reported_and_the_fixing_commands_still_run(
    plugin_dir: Callable[..., Path], home: Path, body: str
) -> None:
    """A bombed ``config.yaml``: the kernel starts on defaults with a problem naming the file; the
    CLI answers (``doctor`` reports it; ``plugins disable`` refuses to write, naming the file)."""
    plugin_dir("fine")
    (home / "config.yaml").write_text(body + "\n", encoding="utf-8")
    with Kernel(home=home) as k:
        assert any(str(home / "config.yaml") in p for p in k.problems), k.problems
        k.load()
        assert k.plugin("fine").enabled
    doctor = cli(home, "doctor")
    assert str(home / "config.yaml") in doctor.stdout + doctor.stderr
    disable = cli(home, "plugins", "disable", "fine")
    assert disable.returncode != 0
    assert str(home / "config.yaml") in disable.stdout + disable.stderr
    assert (home / "config.yaml").read_text(encoding="utf-8") == body + "\n"  # left untouched


def test_an_oversized_config_is_refused(home: Path) -> None:
    (home / "config.yaml").write_text("# " + "x" * (5 * 1024 * 1024) + "\n", encoding="utf-8")
    with Kernel(home=home) as k:
        assert any("read up to 4,194,304 bytes" in p for p in k.problems), k.problems


def test_an_oversized_dotenv_is_refused_and_reported(home: Path, plugin_dir: Callable[..., Path]) -> None:
    """A 2 MB ``.env`` (the limit is 1 MiB): none of it is exported, and the kernel says why."""
    (home / ".env").write_text("BIG_TOKEN=1\n" + "# padding\n" * 250_000, encoding="utf-8")
    plugin_dir("needs", manifest={"name": "needs", "requires_env": ["BIG_TOKEN"]})
    with Kernel(home=home) as k:
        assert any(".env files are read up to 1,048,576 bytes" in p for p in k.problems), k.problems
        k.load()
        assert not k.plugin("needs").enabled and "BIG_TOKEN" in (k.plugin("needs").error or "")


def test_a_bombed_hook_folder_is_a_listed_error(make_kernel: Callable[..., Kernel], home: Path) -> None:
    """``<home>/hooks/<name>/HOOK.yaml`` with a bomb: the folder's record carries the error."""
    folder = home / "hooks" / "bombed"
    folder.mkdir(parents=True)
    (folder / "HOOK.yaml").write_text("events: [agent:end]\n" + BOMB + "\n", encoding="utf-8")
    (folder / "handler.py").write_text("def handle(event, context):\n    pass\n", encoding="utf-8")
    k = make_kernel()
    info = next(p for p in k.plugins if p.name == "hooks:bombed")
    assert not info.enabled and "alias bomb" in (info.error or "")


def shared_bomb() -> Any:
    level: Any = ["x"] * 10
    for _ in range(8):
        level = [level] * 10
    return level


def recursive() -> Any:
    value: list[Any] = [1]
    value.append(value)
    return value


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (recursive, "appears twice"),
        (shared_bomb, "appears twice"),
        (lambda: list(range(20_000)), "more than 10,000 values"),
    ],
)
def test_set_config_refuses_values_that_would_make_the_file_unreadable(
    make_kernel: Callable[..., Kernel], home: Path, make: Callable[[], Any], problem: str
) -> None:
    """A plugin storing a value that contains itself, a shared-structure bomb or a huge value gets a
    ``ValueError``; ``config.yaml`` stays readable for everyone and the plugin keeps working."""
    kept: dict[str, Any] = {}
    k = make_kernel()
    k.register(types.SimpleNamespace(register=lambda ctx: kept.update(ctx=ctx)), name="writer")
    ctx = kept["ctx"]
    ctx.set_config("ok", {"a": [1, 2]})
    with pytest.raises(ValueError, match=problem):
        ctx.set_config("bad", make())
    with Kernel(home=home) as fresh:
        assert fresh.problems == []
        assert fresh.config["plugins"]["entries"]["writer"]["settings"] == {"ok": {"a": [1, 2]}}


def test_install_refuses_a_repository_whose_links_point_outside_it(home: Path, tmp_path: Path) -> None:
    """``plugins install`` from a git repository holding a symbolic link to a key outside it (the test's
    own ``~/.ssh/id_ed25519``) refuses, naming the link, and copies nothing."""
    secret = tmp_path / "user" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY----- canary\n", encoding="utf-8")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "plugin.yaml").write_text("name: linker\nversion: 1.0.0\n", encoding="utf-8")
    (repo / "__init__.py").write_text("def register(ctx):\n    pass\n", encoding="utf-8")
    (repo / "key").symlink_to(secret)

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "linked")
    proc = cli(home, "plugins", "install", repo.as_uri(), "--no-input")
    assert proc.returncode != 0
    assert "key -> " in proc.stderr and "nothing was installed" in proc.stderr
    assert not (home / "plugins" / "linker").exists()
    installed = list((home / "plugins").rglob("*")) if (home / "plugins").exists() else []
    assert not any("canary" in p.read_text(errors="replace") for p in installed if p.is_file())


def test_the_chat_never_prints_terminal_controls_from_the_model_or_plugins(
    plugin_dir: Callable[..., Path], home: Path
) -> None:
    """``chat`` (left out of the CLI's escaping stream, it owns the terminal): a model reply carrying
    ``ESC[2J``, a bell and a right-to-left override is shown escaped; so is ``/plugins``."""
    evil = "nice\x1b[2J\x07\u202eplugin"
    plugin_dir("evil", "def register(ctx):\n    pass\n", manifest={"name": "evil", "description": evil})
    (home / "script.yaml").write_text(yaml.safe_dump([f"reply {evil}"]), encoding="utf-8")
    config = {"model": {"provider": "scripted", "script": "script.yaml"}}
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    proc = subprocess.run(
        [*CLI, "chat"],
        env=cli_env(home),
        input="hello\n/plugins\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 0, shown
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown, shown
    assert "reply nice\\x1b[2J\\x07\\u202eplugin" in proc.stdout, "the model's reply, escaped"


def test_the_cli_never_prints_terminal_controls_from_plugins(
    plugin_dir: Callable[..., Path], home: Path
) -> None:
    """A plugin's description, tool description and error text carrying ``ESC[2J`` (clear screen), a
    bell and a right-to-left override reach the terminal as visible escapes, never as controls."""
    evil = "nice\x1b[2J\x07\u202eplugin"
    plugin_dir(
        "evil",
        "import json\n\n"
        "def register(ctx):\n"
        f"    schema = {{'description': {evil!r}, 'parameters': {{'type': 'object'}}}}\n"
        "    ctx.register_tool('evil_tool', 'x', schema, lambda args, **kw: json.dumps({}))\n",
        manifest={"name": "evil", "description": evil, "provides_tools": ["evil_tool"]},
    )
    plugin_dir("broken", f"raise RuntimeError({evil!r})\n")
    for args in (
        ("plugins", "list", "--refresh"),
        ("plugins", "info", "evil"),
        ("doctor",),
        ("tools", "list"),
    ):
        proc = cli(home, *args)
        shown = proc.stdout + proc.stderr
        assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown, (args, shown)
        if args != ("tools", "list"):
            assert "\\x1b[2J" in shown, (args, shown)
