"""Services that break: a missing module, a member it does not have, an attach that raises, a race.

A service is kernel code, not a plugin, but an embedding host can add its own (``Kernel(services=...)``):
whatever goes wrong in one fails only the plugins that use it, with a message naming the service.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from conftest import write_plugin

from kernel import Kernel
from kernel.core.services import Service
from kernel.defaults import BUILTIN_SERVICES

pytestmark = pytest.mark.usefixtures("bundled")

USES_IT = "def register(ctx):\n    ctx.register_thing('x')\n"
PLAIN = "def register(ctx):\n    ctx.register_hook('post_tool_call', lambda **kw: None)\n"


def service_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: str) -> None:
    folder = tmp_path / "services"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(body, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, name, raising=False)


def kernel_with(home: Path, service: Service) -> Kernel:
    write_plugin(home / "plugins", "user-of-it", USES_IT)
    write_plugin(home / "plugins", "bystander", PLAIN)
    k = Kernel(home=home, services=[*BUILTIN_SERVICES, service])
    k.load()
    return k


def test_a_service_whose_module_is_missing_fails_only_its_users(home: Path) -> None:
    k = kernel_with(home, Service("things", "no_such_service_module_x", context=("register_thing",)))
    assert k.plugin("bystander").enabled
    error = k.plugin("user-of-it").error or ""
    assert "no_such_service_module_x" in error
    k.shutdown()


def test_a_member_the_service_does_not_define_is_named(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service_module(tmp_path, monkeypatch, "memberless_service", "class Context:\n    pass\n")
    k = kernel_with(home, Service("things", "memberless_service", context=("register_thing",)))
    error = k.plugin("user-of-it").error or ""
    assert "service 'things'" in error and "register_thing" in error and "memberless_service" in error
    assert k.plugin("bystander").enabled
    k.shutdown()


def test_an_attach_that_raises_leaves_nothing_half_attached(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service_module(
        tmp_path,
        monkeypatch,
        "exploding_service",
        "from kernel.core.services import serviceimpl\n"
        "calls = []\n"
        "@serviceimpl\n"
        "def service_attach(kernel):\n"
        "    calls.append(1)\n"
        "    raise SystemExit('attach exploded')\n",
    )
    k = Kernel(home=home, services=[Service("boom", "exploding_service", attributes=("boom",))])
    with pytest.raises(SystemExit, match="attach exploded"):
        _ = k.boom
    assert "boom" not in k.services
    with pytest.raises(SystemExit):  # tried again, not remembered as attached
        _ = k.boom
    assert sys.modules["exploding_service"].calls == [1, 1]
    k.load()
    k.shutdown()


def test_many_threads_reading_a_service_attribute_attach_it_once(home: Path) -> None:
    k = Kernel(home=home)
    seen: list[object] = []
    barrier = threading.Barrier(8)

    def read() -> None:
        barrier.wait()
        seen.append(k.tools)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8 and all(registry is seen[0] for registry in seen)
    assert k.services.count("tools") == 1
    k.shutdown()


def test_an_unknown_attribute_is_an_ordinary_attribute_error(home: Path) -> None:
    k = Kernel(home=home)
    with pytest.raises(AttributeError, match="no attribute 'toolz'"):
        _ = k.toolz
    assert not hasattr(k, "__wrapped__")  # dunder lookups never attach anything
    assert k.services == []


def test_a_kernel_without_the_tools_service_refuses_a_tool_plugin_clearly(home: Path) -> None:
    """The ctx members are shared by every kernel of the process; a kernel without the service that
    backs one fails the plugin that calls it, with the missing attribute named, and nothing else."""
    other = Kernel(home=home)
    assert len(other.tools) == 0  # another kernel in this process has put ctx.register_tool in place
    write_plugin(
        home / "plugins",
        "tooly",
        "def register(ctx):\n"
        "    ctx.register_tool('t', 'x', {'name': 't', 'description': 'd', "
        "'parameters': {'type': 'object', 'properties': {}}}, lambda args, **kw: '{}')\n",
    )
    write_plugin(home / "plugins", "bystander", PLAIN)
    k = Kernel(home=home, services=[])
    k.load()
    assert "tools" in (k.plugin("tooly").error or "")
    assert k.plugin("bystander").enabled
    k.shutdown()
