"""Shared fixtures: every test runs in a sandboxed HOME, HERMES_HOME and working directory."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from kernel import Kernel
from kernel.core.sources.discovery import ENTRY_POINTS_VARIABLE

if TYPE_CHECKING:  # imported by the fixture: the redis package is for the tests that use it
    from redis_server import RedisServer

REPO = Path(__file__).resolve().parent.parent

#: The folders of tests that mirror the packages (tests/core, tests/gateways, ...).  They have no
#: __init__.py, so none is importable by its name (a tests/tools package would shadow the Hermes shim
#: ``tools``); they go at the end of sys.path so that a test module another one uses (``from test_gateway
#: import ChatServer``) is found by its basename from any folder, whatever pytest collected first.
TEST_FOLDERS = sorted(
    folder
    for folder in Path(__file__).resolve().parent.iterdir()
    if folder.is_dir() and not (folder / "__init__.py").exists() and any(folder.glob("test_*.py"))
)
for _folder in TEST_FOLDERS:
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))

#: The Debian packages the tests run (espeak-ng, ngircd, redis-server), unpacked here by ``make test-deps``
#: (``apt-get download`` + ``dpkg -x``: nothing installed outside the project's folder).
DEBS = REPO / ".venv" / "debs"
#: Wrappers that run the unpacked programs with the libraries and data unpacked beside them.
DEBS_BIN = DEBS / "bin"

# First on PATH, for the tests and for every program they start (the commands of a config.yaml, the
# examples of the docs): the unpacked programs win over the system's, which remain the fallback.
if DEBS_BIN.is_dir():
    _path = [d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if d != str(DEBS_BIN)]
    os.environ["PATH"] = os.pathsep.join([str(DEBS_BIN), *_path])


def find_program(name: str) -> str | None:
    """Where ``name`` is: the copy ``make test-deps`` unpacked in ``.venv/debs``, else the system's
    (``PATH``, then ``/usr/sbin`` and ``/sbin``, where Debian puts servers such as ngircd); ``None`` if
    neither has it."""
    path = os.pathsep.join([str(DEBS_BIN), os.environ.get("PATH", os.defpath), "/usr/sbin", "/sbin"])
    return shutil.which(name, path=path)


_ENV_TO_CLEAR = (
    "HERMES_HOME",
    "HERMES_PLUGINS_DEBUG",
    "HERMES_ENABLE_PROJECT_PLUGINS",
    "HERMES_BUNDLED_PLUGINS",
)


#: The hooks a framework adapter fires around one run with a tool call, in order (tests/integrations/).
TURN_HOOKS = (
    "on_session_start",
    "pre_llm_call",
    "pre_tool_call",
    "post_tool_call",
    "post_llm_call",
    "transform_llm_output",
    "on_session_end",
)


@pytest.fixture(autouse=True)
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh HOME and working directory; no HERMES_* variable leaks in from the machine."""
    for name in _ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)
    # Plugins installed in the environment are not the tests': a test's own are in a folder it puts on
    # PYTHONPATH (a subprocess) or names in this variable (a kernel in the test's process).
    monkeypatch.setenv(ENTRY_POINTS_VARIABLE, "pythonpath")
    user_home = tmp_path / "user"
    user_home.mkdir()
    monkeypatch.setenv("HOME", str(user_home))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


@pytest.fixture
def sink(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A module plugins import to record calls (``hook_sink.calls``)."""
    module = types.ModuleType("hook_sink")
    module.calls = []  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "hook_sink", module)
    return module


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The kernel home used by the ``kernel`` fixtures (``<tmp>/hermes``)."""
    path = tmp_path / "hermes"
    path.mkdir()
    return path


@pytest.fixture
def bundled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty bundled-plugins directory, so that tests see only the plugins they write."""
    path = tmp_path / "bundled"
    path.mkdir()
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(path))
    return path


#: How long a terminal reader waits for a child's output: a safety net against a hung child only.
TERMINAL_DEADLINE = 120


def read_until(fd: int, marker: str, seen: bytearray, deadline: float = TERMINAL_DEADLINE) -> str:
    """Read ``fd`` (a pty's or a pipe's end) into ``seen`` until ``marker`` appears or the writer closes
    it; fail after ``deadline`` seconds.  Returns everything read so far, decoded."""
    give_up = time.monotonic() + deadline
    while marker.encode() not in seen:
        remaining = give_up - time.monotonic()
        if remaining <= 0:
            pytest.fail(f"never saw {marker!r}; got {seen.decode(errors='replace')!r}")
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError as exc:  # a pty whose other side closed
            if exc.errno != errno.EIO:
                raise
            chunk = b""
        if not chunk:
            break
        seen.extend(chunk)
    return seen.decode(errors="replace")


def read_rest(fd: int, seen: bytearray, deadline: float = TERMINAL_DEADLINE) -> str:
    """Read ``fd`` into ``seen`` until the writer closes it."""
    return read_until(fd, "\0never\0", seen, deadline)


def write_pip_project(
    root: Path,
    dist: str,
    code: str,
    *,
    version: str = "1.0",
    module: str | None = None,
    entry_point: str | None = None,
    requires: list[str] | None = None,
) -> Path:
    """A local hatchling project at ``root``: distribution ``dist``, package ``module`` (``dist`` with
    ``_`` for ``-``) whose ``__init__.py`` is ``code``, declaring Hermes plugin ``entry_point`` if given."""
    module = module or dist.replace("-", "_")
    (root / module).mkdir(parents=True, exist_ok=True)
    text = (
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
        f'[project]\nname = "{dist}"\nversion = "{version}"\n'
    )
    if requires:
        text += f"dependencies = {json.dumps(requires)}\n"
    if entry_point:
        text += f'\n[project.entry-points."hermes_agent.plugins"]\n{entry_point} = "{module}"\n'
    (root / "pyproject.toml").write_text(text, encoding="utf-8")
    (root / module / "__init__.py").write_text(code, encoding="utf-8")
    return root


def write_plugin(
    root: Path,
    dirname: str,
    code: str = "def register(ctx):\n    pass\n",
    manifest: dict[str, Any] | str | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """Write a directory plugin under ``root``; ``manifest`` defaults to ``{name: dirname}``.

    ``manifest`` may be a dict (dumped as YAML), raw YAML text, or ``False``-y
    empty string to write no manifest at all.
    """
    path = root / dirname
    path.mkdir(parents=True, exist_ok=True)
    if manifest is None:
        manifest = {"name": Path(dirname).name, "version": "0.1.0"}
    if isinstance(manifest, dict):
        (path / "plugin.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    elif manifest:
        (path / "plugin.yaml").write_text(manifest, encoding="utf-8")
    (path / "__init__.py").write_text(textwrap.dedent(code), encoding="utf-8")
    for rel, text in (files or {}).items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def plugin_dir(home: Path) -> Callable[..., Path]:
    """``plugin_dir(dirname, code, manifest=None, files=None)`` writes into ``<home>/plugins``."""

    def make(dirname: str, code: str = "def register(ctx):\n    pass\n", **kwargs: Any) -> Path:
        return write_plugin(home / "plugins", dirname, code, **kwargs)

    return make


@pytest.fixture
def make_kernel(home: Path, bundled: Path) -> Iterator[Callable[..., Kernel]]:
    """``make_kernel(config=None, load=True)``: a kernel in ``home``, shut down after the test."""
    made: list[Kernel] = []

    def make(config: dict[str, Any] | None = None, load: bool = True, **kwargs: Any) -> Kernel:
        k = Kernel(home=kwargs.pop("home", home), config=config)
        made.append(k)
        if load:
            k.load()
        return k

    yield make
    for k in made:
        k.shutdown()


def agent_log(home: Path) -> str:
    """The text of ``<home>/logs/agent.log`` ("" when nothing was logged)."""
    path = home / "logs" / "agent.log"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def run_json(text: str) -> Any:
    """Parse a tool result, failing the test with the text when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError:  # pragma: no cover - shown on failure only
        pytest.fail(f"not JSON: {text!r}")


def age(*paths: Path, seconds: float = 3600) -> None:
    """Date ``paths`` (and everything under a folder among them) ``seconds`` back, as an installed
    system's files are: the kernel's caches trust no file changed in the last two seconds."""
    then = time.time() - seconds
    for root in paths:
        for path in [root, *root.rglob("*")] if root.is_dir() else [root]:
            os.utime(path, (then, then))


def run_probe(code: str, *args: str, cwd: Path, env: dict[str, str], marker: str = "PROBE") -> Any:
    """Run ``code`` in a fresh interpreter; its result is the JSON it prints after ``<marker> ``."""
    command = [sys.executable, "-c", code, *args]
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)
    line = next((x for x in proc.stdout.splitlines() if x.startswith(marker + " ")), None)
    assert proc.returncode == 0 and line is not None, proc.stdout + proc.stderr
    return json.loads(line.split(" ", 1)[1])


async def until(condition: Callable[[], Any], what: str, deadline: float = 60.0) -> None:
    """Wait on the event loop until ``condition()`` is true (a state the test waits for, instead of a
    sleep it hopes is long enough); fail after ``deadline`` seconds, naming ``what``."""
    import asyncio

    loop = asyncio.get_running_loop()
    give_up = loop.time() + deadline
    while not condition():
        if loop.time() > give_up:
            pytest.fail(f"timed out after {deadline:g} s waiting for {what}")
        await asyncio.sleep(0.01)


def wait_for(condition: Callable[[], Any], what: str, deadline: float = 60.0) -> None:
    """Poll ``condition()`` until it is true (a process ends, a file is written: things that happen
    elsewhere, with no event to wait on here); fail after ``deadline`` seconds, naming ``what``."""
    give_up = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > give_up:
            pytest.fail(f"timed out after {deadline:g} s waiting for {what}")
        time.sleep(0.02)


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for running ``hermes-kernel`` as a subprocess against ``home``."""
    env = {k: v for k, v in os.environ.items() if k not in _ENV_TO_CLEAR}
    env["HERMES_HOME"] = str(home)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


CLI = [sys.executable, "-m", "kernel"]


def default_sigint() -> None:
    """``preexec_fn`` of a child a test stops with Ctrl-C: SIGINT back to its default in the child, as an
    interactive shell would start it, even when the suite runs with SIGINT ignored (``nohup make test &``,
    some CI runners), a disposition every child would otherwise inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(home: Path, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """``hermes-kernel ARGS`` as a subprocess against ``home`` (``env`` added to its environment), its
    output captured as text; a hung child fails after two minutes."""
    return subprocess.run(
        [*CLI, *args],
        env=cli_env(home, **env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def source_tree(root: Path) -> list[str]:
    """The files under ``root`` (no bytecode), to show an install left a source folder unchanged."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts)


def pip_install_fixture(source: Path, target: Path) -> dict[str, Any]:
    """pip-install the distribution at ``source`` into ``target`` offline (no deps, index or build isolation).

    Returns ``{"target", "before", "after"}``: the target and the source tree before and after.
    """
    before = source_tree(source)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-build-isolation"]
    proc = subprocess.run(
        [*command, "--no-cache-dir", "--target", str(target), str(source)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"target": target, "before": before, "after": source_tree(source)}


def evict_package(package: str) -> None:
    """Forget ``package`` and its submodules, so that the next import runs them again."""
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real redis-server on 127.0.0.1 and a random port, for the module (``tests/redis_server.py``):
    its data in a temporary folder, append-only file on; stopped after the module's last test."""
    from redis_server import RedisServer

    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    """A folder where test plugins leave a file to show that their code ran."""
    path = tmp_path / "marks"
    path.mkdir()
    return path


@pytest.fixture
def irc_spec(tmp_path: Path) -> Iterator[Any]:
    """The IRC platform of a kernel with the checkout's bundled plugins."""
    home = tmp_path / "hermes"  # its log: <tmp_path>/hermes/logs/agent.log
    home.mkdir(exist_ok=True)
    with Kernel(home=home) as k:
        k.load()
        yield k.platforms.get("irc")


def echo_bot(spec: Any, **config: Any) -> Any:
    """An adapter from the irc plugin's factory with ``config``, answering ``echo: <text>`` and
    recording each event in ``bot.events``."""
    from kernel.gateway import MessageEvent, PlatformConfig

    bot = spec.adapter_factory(PlatformConfig.from_dict({"enabled": True, "server": "127.0.0.1", **config}))
    bot.events = []

    def handler(event: MessageEvent) -> str:
        bot.events.append(event)
        return f"echo: {event.text}"

    bot.set_message_handler(handler)
    return bot


def start_gateway(home: Path, *args: str) -> subprocess.Popen[bytes]:
    """``hermes-kernel gateway run ARGS`` against ``home``, its output appended to ``home/gateway.out``
    (``proc.home`` is ``home``)."""
    with (home / "gateway.out").open("ab") as sink:
        proc = subprocess.Popen(
            [*CLI, "gateway", "run", *args], env=cli_env(home), stdout=sink, stderr=subprocess.STDOUT
        )
    proc.home = home  # type: ignore[attr-defined]
    return proc


def end_processes(procs: list[subprocess.Popen[bytes]]) -> None:
    """Kill each process still running (a stopped one is continued first) and reap every one."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.wait(timeout=30)
