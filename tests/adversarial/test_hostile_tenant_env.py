"""Two kernels in one process: a Hermes-style lookup off the plugin's stack never reads the other's ``.env``.

Each kernel's home has its own ``.env`` with a different value of the same
variable.  A plugin of each asks Hermes' ``get_env_value`` from places where
no frame of the plugin is on the stack: a ``ThreadPoolExecutor`` it starts,
a ``threading.Timer``, callbacks on an event loop of its own, a worker thread
of ``asyncio.to_thread``.  Each answer is its own kernel's value or what the
process itself sets (here: nothing) — never the other kernel's
(docs/compatibility.md, "Which kernel a module-level call answers to").
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import write_plugin

from kernel import Kernel

NAME = "TENANT_ENV_PROBE"

# A library module the plugins use (not plugin code): what it runs has no plugin frame on the stack.
PROBE_LIBRARY = """\
import threading


def lookup(name):
    from hermes_cli.config import get_env_value

    return get_env_value(name)


def lookup_into(box, name, done=None):
    box.append(lookup(name))
    if done is not None:
        done.set()


async def alookup(name):
    return lookup(name)
"""

PLUGIN = """\
import asyncio
import contextvars
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import tenant_probe
from hermes_cli.config import get_env_value

NAME = "TENANT_ENV_PROBE"
WAIT = 60  # a safety net against a hang, never a wait for an event


def probe(**_ignored):
    seen = {"direct": get_env_value(NAME)}
    with ThreadPoolExecutor(max_workers=1) as pool:
        seen["pool"] = pool.submit(get_env_value, NAME).result(WAIT)
        carried = contextvars.copy_context()
        seen["pool_with_context"] = pool.submit(carried.run, get_env_value, NAME).result(WAIT)
    box = []
    timer = threading.Timer(0.0, tenant_probe.lookup_into, args=(box, NAME))
    timer.start()
    timer.join(WAIT)
    seen["timer"] = box[0]
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        done, box = threading.Event(), []
        loop.call_soon_threadsafe(tenant_probe.lookup_into, box, NAME, done)
        done.wait(WAIT)
        seen["loop_callback"] = box[0]
        seen["loop_task"] = asyncio.run_coroutine_threadsafe(tenant_probe.alookup(NAME), loop).result(WAIT)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT)
        loop.close()
    return seen


async def probe_async(args, **kw):
    return json.dumps({"to_thread": await asyncio.to_thread(get_env_value, NAME)})


def register(ctx):
    schema = {"name": "env_probe", "parameters": {"type": "object"}}
    handler = lambda args, **kw: json.dumps(probe())  # noqa: E731
    ctx.register_tool(name="env_probe", toolset="t", schema=schema, handler=handler)
    schema = {"name": "env_probe_async", "parameters": {"type": "object"}}
    ctx.register_tool(name="env_probe_async", toolset="t", schema=schema, handler=probe_async)
    ctx.register_hook("on_session_start", probe)
"""


@pytest.fixture(autouse=True)
def probe_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "tenant_probe.py").write_text(PROBE_LIBRARY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(lib))
    monkeypatch.delenv(NAME, raising=False)
    yield
    sys.modules.pop("tenant_probe", None)


@pytest.fixture
def tenant(tmp_path: Path, make_kernel: Callable[..., Kernel]) -> Callable[[str], Kernel]:
    """``tenant(name)``: a loaded kernel in ``<tmp>/<name>``; ``.env`` sets the probe to ``<name>-secret``."""

    def make(name: str) -> Kernel:
        home = tmp_path / name
        home.mkdir()
        (home / ".env").write_text(f"{NAME}={name}-secret\n", encoding="utf-8")
        write_plugin(home / "plugins", "env-probe", textwrap.dedent(PLUGIN))
        return make_kernel(home=home)

    return make


def through_tool(k: Kernel, tool: str = "env_probe") -> dict[str, Any]:
    result = json.loads(k.tools.dispatch(tool, {}))
    assert isinstance(result, dict) and "error" not in result, result
    return result


def through_hook(k: Kernel) -> dict[str, Any]:
    [seen] = k.invoke_hook("on_session_start", session_id="s", model="m", platform="cli")
    return seen


def test_off_stack_lookups_never_answer_with_the_other_kernels_dotenv(
    tenant: Callable[[str], Kernel],
) -> None:
    a, b = tenant("a"), tenant("b")
    assert os.environ.get(NAME) == "a-secret", "the first kernel exported its value (the attack's premise)"
    for k, own, other in ((a, "a-secret", "b-secret"), (b, "b-secret", "a-secret")):
        for seen in (through_tool(k), through_hook(k), through_tool(k, "env_probe_async")):
            assert other not in seen.values(), f"{k.home.name} read the other kernel's .env: {seen}"
            assert set(seen.values()) <= {own, None}, seen


def test_work_that_carries_the_context_answers_for_its_own_kernel(
    tenant: Callable[[str], Kernel],
) -> None:
    """An event-loop callback or task scheduled from a tool or hook, a pool thread given a copy of the
    context (as docs/compatibility.md advises), and ``asyncio.to_thread`` in an async tool run in a copy of
    the caller's context: the kernel running the plugin is known there."""
    a, b = tenant("a"), tenant("b")
    for k, own in ((a, "a-secret"), (b, "b-secret")):
        for seen in (through_tool(k), through_hook(k)):
            assert seen["direct"] == own
            assert seen["loop_callback"] == own and seen["loop_task"] == own, seen
            assert seen["pool_with_context"] == own, seen
        assert through_tool(k, "env_probe_async") == {"to_thread": own}


def test_a_thread_without_the_context_reads_only_what_the_process_sets(
    tenant: Callable[[str], Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain pool thread or timer cannot tell which kernel started it: the process's own value, or none."""
    a, b = tenant("a"), tenant("b")
    for k in (a, b):
        seen = through_tool(k)
        assert seen["pool"] is None and seen["timer"] is None, seen
    from hermes_cli.config import get_env_value

    assert get_env_value(NAME) is None, "host code with two kernels and none known reads only the process"
    monkeypatch.setenv(NAME, "set-by-the-process")
    for k in (a, b):
        seen = through_tool(k)
        assert seen["pool"] == "set-by-the-process" and seen["timer"] == "set-by-the-process", seen


def test_with_one_kernel_a_plain_thread_answers_for_it(tenant: Callable[[str], Kernel]) -> None:
    a = tenant("a")
    seen = through_tool(a)
    assert seen["pool"] == "a-secret" and seen["timer"] == "a-secret"


def test_home_and_config_off_the_stack_are_the_processs_when_the_kernel_is_unknown(
    tenant: Callable[[str], Kernel], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = tenant("a"), tenant("b")
    process_home = tmp_path / "process-home"
    process_home.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(process_home))
    from hermes_cli.config import get_hermes_home, load_config

    assert get_hermes_home() == process_home
    assert load_config() == {}, "the process's home has no config.yaml: neither kernel's configuration"
    a.shutdown()
    assert get_hermes_home() == b.home, "one live kernel left: unambiguous"


def test_a_registration_or_write_with_two_kernels_and_none_known_is_refused(
    tenant: Callable[[str], Kernel],
) -> None:
    a, b = tenant("a"), tenant("b")
    from hermes_cli.config import save_env_value
    from tools.registry import registry

    schema = {"name": "stray", "parameters": {"type": "object"}}
    with pytest.raises(RuntimeError, match=r"tools\.registry\.registry\.register"):
        registry.register(name="stray", toolset="t", schema=schema, handler=lambda args, **kw: "x")
    assert a.tools.get("stray") is None and b.tools.get("stray") is None
    with pytest.raises(RuntimeError, match=r"save_env_value"):
        save_env_value("TENANT_STRAY", "x")
    assert "TENANT_STRAY" not in os.environ
    for k in (a, b):
        assert "TENANT_STRAY" not in (k.home / ".env").read_text(encoding="utf-8")
