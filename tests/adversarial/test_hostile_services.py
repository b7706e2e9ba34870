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
from kernel.core.context import PluginContext
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


def test_a_service_cannot_set_a_kernel_attribute_it_does_not_declare(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``k.host.provide`` sets only what a service of the kernel declares: a service that would put
    ``tools`` (or ``_records``) on a kernel without that service fails its attach, and nothing is set."""
    service_module(
        tmp_path,
        monkeypatch,
        "grabbing_service",
        "from kernel.core.services import serviceimpl\n"
        "@serviceimpl\n"
        "def service_attach(kernel):\n"
        "    kernel.host.provide(grab=1, _records={})\n",
    )
    k = Kernel(home=home, services=[Service("grab", "grabbing_service", attributes=("grab",))])
    records = k._records
    with pytest.raises(AttributeError, match="'_records'"):
        _ = k.grab
    assert k._records is records and "grab" not in k.services and "grab" not in vars(k)
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
    """Each kernel's plugins get a context class of that kernel's own: another kernel of the process
    having attached the tools service gives ``ctx.register_tool`` to no one else.  A kernel without
    the service fails the plugin that calls it, with the missing attribute named, and nothing else."""
    other = Kernel(home=home)
    assert len(other.tools) == 0
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
    assert "has no attribute 'register_tool'" in (k.plugin("tooly").error or "")
    assert k.plugin("bystander").enabled
    assert "register_tool" in vars(other._services.context_class)
    assert not hasattr(PluginContext, "register_tool")  # the shared base stays the core's
    assert not hasattr(k._services.context_class, "register_tool")
    k.shutdown()


def test_two_kernels_with_different_services_give_different_contexts(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host's own service adds its ``ctx`` member to its kernel only, even in one process."""
    service_module(
        tmp_path,
        monkeypatch,
        "thing_service",
        "seen = []\nclass Context:\n    def register_thing(self, value):\n        seen.append(value)\n",
    )
    with_it = kernel_with(home, Service("things", "thing_service", context=("register_thing",)))
    assert with_it.plugin("user-of-it").enabled
    assert sys.modules["thing_service"].seen == ["x"]
    second_home = tmp_path / "second"
    second_home.mkdir()
    without = kernel_with(second_home, Service("other", "thing_service"))
    assert "has no attribute 'register_thing'" in (without.plugin("user-of-it").error or "")
    assert sys.modules["thing_service"].seen == ["x"]
    with_it.shutdown()
    without.shutdown()
