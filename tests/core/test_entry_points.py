"""Entry-point plugins from a real installed distribution (tests/fixtures/ep_plugins)."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import (
    CLI,
    REPO,
    cli_env,
    evict_package,
    pip_install_fixture,
    run_json,
    write_plugin,
)

from kernel import Kernel

FIXTURE = REPO / "tests" / "fixtures" / "ep_plugins"
PACKAGE = "hermes_kernel_ep_fixture"
DISTRIBUTION = "hermes-kernel-test-plugins"
SUMMARY = "Entry-point plugins used by the hermes-kernel test suite."
EP_NAMES = ["ep-broken", "ep-default-ctx", "ep-function", "ep-module", "ep-native", "ep-noarg", "shadowed"]
MARKS_VARIABLE = "HERMES_EP_FIXTURE_MARKS"

# A directory plugin: registers an optional tool and a pre_llm_call hook returning its tag.
DIR_PLUGIN = """\
import json
import os
import pathlib

TAG = {tag!r}


def register(ctx):
    marks = os.environ.get({marks_var!r})
    if marks:
        (pathlib.Path(marks) / ("dir-" + TAG)).write_text("ran")
    for name in {tools!r}:
        ctx.register_tool(
            name,
            "dir",
            {{"description": "d", "parameters": {{"type": "object", "properties": {{}}}}}},
            lambda args, **kw: json.dumps({{"origin": "user-dir", "tag": TAG}}),
        )
    ctx.register_hook("pre_llm_call", lambda **kw: TAG)
"""


def dir_plugin(root: Path, name: str, tools: tuple[str, ...] = ()) -> Path:
    code = DIR_PLUGIN.format(tag=name, marks_var=MARKS_VARIABLE, tools=list(tools))
    manifest = {"name": name, "provides_tools": list(tools), "provides_hooks": ["pre_llm_call"]}
    return write_plugin(root, name, code, manifest=manifest)


def _evict_fixture_modules() -> None:
    evict_package(PACKAGE)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """pip-install the fixture distribution once into a private target directory (no network)."""
    return pip_install_fixture(FIXTURE, tmp_path_factory.mktemp("ep-site"))


@pytest.fixture
def ep_site(installed: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Put the installed distribution on sys.path for this test; record plugin side effects in marks."""
    target = installed["target"]
    assert isinstance(target, Path)
    marks = tmp_path / "ep-marks"
    marks.mkdir()
    monkeypatch.setenv(MARKS_VARIABLE, str(marks))
    _evict_fixture_modules()
    monkeypatch.syspath_prepend(str(target))
    monkeypatch.setenv("HERMES_KERNEL_ENTRY_POINTS", str(target))
    importlib.invalidate_caches()
    yield marks
    _evict_fixture_modules()
    importlib.invalidate_caches()


def ran(marks: Path, tag: str) -> bool:
    return (marks / tag).exists()


# -- the installation itself ---------------------------------------------------------------------------


def test_install_leaves_the_fixture_source_clean(installed: dict[str, object]) -> None:
    assert installed["after"] == installed["before"]
    for junk in ("build", "dist"):
        assert not (FIXTURE / junk).exists()
    assert not list(FIXTURE.glob("*.egg-info"))
    assert not list(FIXTURE.glob("*.dist-info"))


def test_the_distribution_is_visible_to_importlib_metadata(ep_site: Path) -> None:
    dist = importlib.metadata.distribution(DISTRIBUTION)
    assert dist.version == "1.2.3"
    names = sorted(ep.name for ep in dist.entry_points if ep.group == "hermes_agent.plugins")
    assert names == EP_NAMES


# -- discovery and metadata ----------------------------------------------------------------------------


def test_entry_points_are_listed_with_distribution_metadata(
    ep_site: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel()
    infos = [p for p in k.plugins if p.source == "entrypoint"]
    assert [p.name for p in infos] == EP_NAMES
    for info in infos:
        assert info.version == "1.2.3", info
        assert info.description == SUMMARY, info
        assert info.overrides == []


def test_without_the_distribution_on_sys_path_nothing_is_found(make_kernel: Callable[..., Kernel]) -> None:
    _evict_fixture_modules()
    k = make_kernel()
    assert [p for p in k.plugins if p.source == "entrypoint" and p.name in EP_NAMES] == []


# -- every target shape ------------------------------------------------------------------------------


def test_module_with_register_ctx(ep_site: Path, make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    info = k.plugin("ep-module")
    assert info.enabled, info.error
    assert info.tools == ["ep_module_tool"]
    assert info.hooks == ["pre_llm_call"]
    assert run_json(k.tools.dispatch("ep_module_tool", {"text": "x"})) == {
        "tool": "ep_module_tool",
        "origin": "ep-module",
        "text": "x",
    }
    assert (ep_site / "ep-module").read_text().splitlines() == ["ran"]


def test_function_target(ep_site: Path, make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    info = k.plugin("ep-function")
    assert info.enabled, info.error
    assert info.tools == ["ep_function_tool"]
    assert run_json(k.tools.dispatch("ep_function_tool", '{"text": "json string args"}'))["origin"] == (
        "ep-function"
    )
    assert ran(ep_site, "ep-function")


def test_register_without_a_parameter(ep_site: Path, make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    info = k.plugin("ep-noarg")
    assert info.enabled, info.error
    assert info.error is None
    assert info.tools == [] and info.hooks == []
    assert (ep_site / "ep-noarg").read_text().splitlines() == ["ran"]


def test_register_with_ctx_none_default_gets_a_context(
    ep_site: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel()
    info = k.plugin("ep-default-ctx")
    assert info.enabled, info.error
    assert ran(ep_site, "ep-default-ctx")
    assert not ran(ep_site, "ep-default-ctx-without-ctx")
    assert info.tools == ["ep_default_tool"]
    assert run_json(k.tools.dispatch("ep_default_tool", {}))["origin"] == "ep-default-ctx"


def test_module_of_pluggy_hookimpls(ep_site: Path, make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    info = k.plugin("ep-native")
    assert info.enabled, info.error
    assert set(info.hooks) == {"pre_llm_call", "post_tool_call"}
    # The impls declare a subset of the spec's arguments; the rest are not passed to them.
    context = k.pre_llm_context(
        session_id="s1",
        task_id="t1",
        turn_id="u1",
        user_message="hello",
        conversation_history=[],
        is_first_turn=True,
        model="m",
        platform="cli",
    )
    assert context == "ep-module saw hello\n\nep-native saw hello"
    assert not ran(ep_site, "ep-native-post-ep_function_tool")
    k.tools.dispatch("ep_function_tool", {}, task_id="t1", session_id="s1")
    assert ran(ep_site, "ep-native-post-ep_function_tool")
    assert info.disabled_hooks == []
    assert k.plugin("ep-native").disabled_hooks == []


def test_broken_entry_point_is_isolated(
    ep_site: Path, make_kernel: Callable[..., Kernel], home: Path
) -> None:
    k = make_kernel(load=False)
    k.load()  # does not raise
    broken = k.plugin("ep-broken")
    assert broken.enabled is False
    assert broken.error is not None
    assert "RuntimeError" in broken.error
    assert "ep-broken cannot be imported on purpose" in broken.error
    assert ran(ep_site, "ep-broken-import")
    for name in EP_NAMES:
        if name != "ep-broken":
            info = k.plugin(name)
            assert info.enabled, (name, info.error)
            assert info.warnings == [], (name, info.warnings)
    assert sorted(k.tools.names()) == [
        "ep_default_tool",
        "ep_function_tool",
        "ep_module_tool",
        "shadow_tool",
    ]
    log = (home / "logs" / "agent.log").read_text(encoding="utf-8")
    assert "plugin_load_failed" in log and "ep-broken" in log


# -- ordering, overrides and config ----------------------------------------------------------------------


def test_alphabetical_order_across_entry_points_and_directories(
    ep_site: Path, home: Path, bundled: Path, make_kernel: Callable[..., Kernel]
) -> None:
    dir_plugin(home / "plugins", "aardvark")
    dir_plugin(bundled, "ep-mid")  # between ep-function and ep-module
    dir_plugin(home / "plugins", "Zebra")  # capital letter: order ignores case
    k = make_kernel()
    names = [p.name for p in k.plugins]
    assert names == sorted(names, key=str.casefold)
    assert names == ["aardvark", *EP_NAMES[:3], "ep-mid", *EP_NAMES[3:], "Zebra"]
    assert k.invoke_hook("pre_llm_call", user_message="hi") == [
        "aardvark",
        "ep-mid",
        "ep-module saw hi",
        "ep-native saw hi",
        "Zebra",
    ]


def test_entry_point_overrides_a_user_plugin_of_the_same_name(
    ep_site: Path, home: Path, make_kernel: Callable[..., Kernel]
) -> None:
    user_dir = dir_plugin(home / "plugins", "shadowed", tools=("shadow_tool",))
    k = make_kernel()
    shadowed = [p for p in k.plugins if p.name == "shadowed"]
    assert len(shadowed) == 1
    info = shadowed[0]
    assert info.enabled, info.error
    assert info.source == "entrypoint"
    assert info.version == "1.2.3"
    assert info.overrides == [f"user: {user_dir}"]
    assert run_json(k.tools.dispatch("shadow_tool", {}))["origin"] == "entrypoint"
    assert ran(ep_site, "shadowed-entrypoint")
    assert not ran(ep_site, "dir-shadowed")
    assert "shadowed" not in k.invoke_hook("pre_llm_call", user_message="x")


def test_plugins_disabled_applies_to_entry_points(ep_site: Path, make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel(config={"plugins": {"disabled": ["ep-module", "ep-native", "ep-broken"]}})
    for name in ("ep-module", "ep-native", "ep-broken"):
        info = k.plugin(name)
        assert info.enabled is False
        assert "disabled" in (info.error or ""), info.error
        assert info.tools == [] and info.hooks == []
    # Never imported.
    assert f"{PACKAGE}.module_target" not in sys.modules
    assert f"{PACKAGE}.native_target" not in sys.modules
    assert not ran(ep_site, "ep-native-import")
    assert not ran(ep_site, "ep-broken-import")
    assert not ran(ep_site, "ep-module")
    assert "ep_module_tool" not in k.tools
    assert k.pre_llm_context(user_message="x") == ""
    assert k.plugin("ep-function").enabled


def test_plugins_disabled_in_config_yaml_for_entry_points(
    ep_site: Path, home: Path, make_kernel: Callable[..., Kernel]
) -> None:
    (home / "config.yaml").write_text("plugins:\n  disabled:\n    - ep-function\n")
    k = make_kernel()
    assert k.plugin("ep-function").enabled is False
    assert not ran(ep_site, "ep-function")
    assert "ep_function_tool" not in k.tools


def test_shutdown_unregisters_entry_point_plugins(ep_site: Path, home: Path, bundled: Path) -> None:
    k = Kernel(home=home)
    k.load()
    assert "ep_module_tool" in k.tools
    native = sys.modules[f"{PACKAGE}.native_target"]
    assert k.pm.is_registered(native)
    k.shutdown()
    assert not k.pm.is_registered(native)
    assert "ep_module_tool" not in k.tools


# -- the CLI in a fresh process ---------------------------------------------------------------------


def test_cli_listing_imports_no_entry_point_plugin(
    installed: dict[str, object], home: Path, bundled: Path, tmp_path: Path
) -> None:
    """A real installed distribution: ``plugins list`` names its plugins (name, version, source) without
    importing any module of it; only a load (``--refresh``) does, and the next listing shows its outcome."""
    target = installed["target"]
    marks = tmp_path / "list-marks"
    marks.mkdir()
    env = cli_env(home, PYTHONPATH=str(target), HERMES_BUNDLED_PLUGINS=str(bundled))
    env[MARKS_VARIABLE] = str(marks)
    listing = [*CLI, "plugins", "list", "--json"]
    first = subprocess.run(listing, env=env, capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stderr
    by_name = {p["name"]: p for p in json.loads(first.stdout)}
    assert sorted(by_name) == EP_NAMES
    assert {(p["source"], p["version"], p["listed_from"]) for p in by_name.values()} == {
        ("entrypoint", "1.2.3", "unknown")
    }
    assert sorted(p.name for p in marks.iterdir()) == []  # nothing of the package ran
    subprocess.run(
        [*CLI, "plugins", "list", "--refresh"], env=env, capture_output=True, text=True, check=True
    )
    assert (marks / "ep-native-import").exists()
    for path in marks.iterdir():
        path.unlink()
    again = subprocess.run(listing, env=env, capture_output=True, text=True, check=False)
    by_name = {p["name"]: p for p in json.loads(again.stdout)}
    assert (
        by_name["ep-module"]["tools"] == ["ep_module_tool"]
        and by_name["ep-module"]["listed_from"] == "current"
    )
    assert sorted(p.name for p in marks.iterdir()) == []


def test_cli_lists_entry_point_plugins(installed: dict[str, object], home: Path, bundled: Path) -> None:
    target = installed["target"]
    env = cli_env(home, PYTHONPATH=str(target), HERMES_BUNDLED_PLUGINS=str(bundled))
    env.pop(MARKS_VARIABLE, None)
    proc = subprocess.run(
        [*CLI, "plugins", "list", "--refresh", "--json"], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    by_name = {p["name"]: p for p in data}
    assert sorted(by_name) == EP_NAMES
    for name in EP_NAMES:
        assert by_name[name]["source"] == "entrypoint"
        assert by_name[name]["version"] == "1.2.3"
        assert by_name[name]["enabled"] is (name != "ep-broken"), by_name[name]
    assert "ep-broken cannot be imported on purpose" in by_name["ep-broken"]["error"]
    assert by_name["ep-module"]["tools"] == ["ep_module_tool"]
    assert set(by_name["ep-native"]["hooks"]) == {"pre_llm_call", "post_tool_call"}

    table = subprocess.run(
        [*CLI, "plugins", "list", "--refresh"], env=env, capture_output=True, text=True, check=False
    )
    assert table.returncode == 0, table.stderr
    assert "ep-native" in table.stdout and "entrypoint" in table.stdout

    call = subprocess.run(
        [*CLI, "tools", "call", "ep_function_tool", json.dumps({"text": "from the cli"})],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert call.returncode == 0, call.stderr
    assert run_json(call.stdout) == {
        "tool": "ep_function_tool",
        "origin": "ep-function",
        "text": "from the cli",
    }
