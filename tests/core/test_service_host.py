"""``k.host`` and :mod:`kernel.core.api`: the public host API the services use, on a real kernel and home."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from kernel import Kernel, PluginError, hookimpl
from kernel.core.api import ServiceHost, add_hook, kernel_of, on_rollback, record_of


class Greeter:
    """A plugin object registered with ``k.register``: it greets at session start."""

    @hookimpl
    def on_session_start(self, **kwargs: Any) -> None:
        return None


def test_the_records_view_is_live_and_read_only(tmp_path: Path) -> None:
    with Kernel(tmp_path) as k:
        assert isinstance(k.host, ServiceHost)
        records = k.host.records
        k.register(Greeter(), name="greeter")
        assert records["greeter"].name == "greeter"  # the view follows the kernel
        with pytest.raises(TypeError):
            records["other"] = records["greeter"]  # type: ignore[index]
        k.unregister("greeter")
        assert "greeter" not in records


def test_a_noted_failure_shows_once_in_the_plugins_listing(tmp_path: Path) -> None:
    with Kernel(tmp_path) as k:
        k.register(Greeter(), name="greeter")
        k.host.note_failure("greeter", "receiver broke")
        k.host.note_failure("greeter", "receiver broke")
        k.host.note_failure("nobody", "ignored: no such plugin")
        assert k.plugin("greeter").warnings.count("receiver broke") == 1


def test_a_config_problem_is_kept_with_the_others(tmp_path: Path) -> None:
    with Kernel(tmp_path) as k:
        k.host.config_problem("config.yaml: 'x' is wrong; fix it")
        assert k.problems[-1] == "config.yaml: 'x' is wrong; fix it"


def test_a_surface_is_listed_and_isolated_like_a_plugin(tmp_path: Path) -> None:
    closed: list[str] = []

    def setup(ctx: Any) -> None:
        assert kernel_of(ctx) is k and record_of(ctx).name == "demo:one"
        add_hook(ctx, "on_session_start", lambda **kw: closed.append("started"))

    def broken(ctx: Any) -> None:
        add_hook(ctx, "on_session_start", lambda **kw: closed.append("must not fire"))
        on_rollback(ctx, lambda: closed.append("rolled back"))
        raise RuntimeError("surface setup failed")

    with Kernel(tmp_path) as k:
        k.load()
        record = k.host.add_surface("demo:one", "demo", setup, close=lambda: closed.append("closed"))
        assert record.error is None and record.callbacks
        bad = k.host.add_surface("demo:two", "demo", broken)
        assert bad.error is not None and not bad.callbacks
        assert closed == ["rolled back"]
        with pytest.raises(PluginError):
            k.host.add_surface("demo:one", "demo", setup)
        k.invoke_hook("on_session_start", session_id="s")
        assert closed == ["rolled back", "started"]
        assert {"demo:one", "demo:two"} <= {p.name for p in k.plugins}
    assert closed[-1] == "closed" and k.host.closed


def test_reread_config_reads_the_file_again_under_the_overrides(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("agent:\n  max_turns: 3\n", encoding="utf-8")
    with Kernel(tmp_path, {"display": {"compact": True}}) as k:
        (tmp_path / "config.yaml").write_text("agent:\n  max_turns: 7\n", encoding="utf-8")
        fresh, _problems = k.host.reread_config()
        assert fresh["agent"]["max_turns"] == 7 and fresh["display"]["compact"] is True
        assert k.config["agent"]["max_turns"] == 3  # the kernel's own copy is not changed


def test_each_kernel_has_its_own_namespace_module(tmp_path: Path) -> None:
    with Kernel(tmp_path / "a") as a, Kernel(tmp_path / "b") as b:
        assert a.host.namespace != b.host.namespace
        module = a.host.namespace_module()
        assert sys.modules[a.host.namespace] is module is a.host.namespace_module()
        assert a.host.env_token is not b.host.env_token
