"""What the host must accept from plugins written for Hermes Agent (issue 8), through the real kernel.

Every plugin here is synthetic and written by the tests: directory plugins under a temporary
home, and a real distribution (tests/fixtures/ep_hermes_groups) pip-installed offline into a
private directory, whose entry points cover every Hermes group and target shape.  Models are the
bundled ``scripted`` provider or the bundled ``openai-compatible`` one talking to a real HTTP
server on 127.0.0.1 (tests/local_server.py).  The published packages are tested in tests/compat/.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import shutil
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import (
    CLI,
    REPO,
    agent_log,
    cli_env,
    evict_package,
    pip_install_fixture,
    run_json,
    write_plugin,
)
from local_server import LocalServer, Reply, Seen

from kernel import Kernel
from kernel.agent import AgentError, AgentSession
from kernel.core.sources.manifest import load_manifest
from kernel.providers import (
    ContextEngine,
    MemoryProvider,
    ProviderProfile,
    ProviderSelectionError,
    VideoGenProvider,
    WebSearchProvider,
)
from kernel.testing import scripted_config, write_script

FIXTURE = REPO / "tests" / "fixtures" / "ep_hermes_groups"
PACKAGE = "hermes_kernel_ep_hermes"
DISTRIBUTION = "hermes-kernel-test-hermes-groups"
VERSION = "2.0.0"
MARKS_VARIABLE = "HERMES_EP_HERMES_MARKS"

# name -> kind of every entry-point plugin of the fixture (hg-clash: the second of its targets is refused).
EP_KINDS = {
    "hg-bad-class": "standalone",
    "hg-clash": "standalone",
    "hg-ctx-none": "standalone",
    "hg-duck-memory": "memory",
    "hg-llm": "model-provider",
    "hg-self-llm": "model-provider",
    "hg-self-provider": "standalone",
    "hg-self-tool": "standalone",
    "hg-standalone": "standalone",
    "hg-subclass-memory": "memory",
    "hg-twin": "standalone",
    "hg-web-class": "standalone",
}
GROUPS = (
    "hermes_agent.plugins",
    "hermes.plugins",
    "hermes_agent.model_providers",
    "hermes_agent.memory_providers",
    "hermes.memory_provider",
)

Kit = Callable[..., Kernel]


# ---------------------------------------------------------------------------------------------------
# Fixtures and helpers
# ---------------------------------------------------------------------------------------------------


def _evict_fixture_modules() -> None:
    evict_package(PACKAGE)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """pip-install the fixture distribution once into a private target directory (no network)."""
    return pip_install_fixture(FIXTURE, tmp_path_factory.mktemp("hermes-groups-site"))


@pytest.fixture
def hermes_site(installed: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The installed distribution on sys.path for one test; plugin side effects land in the marks folder."""
    marks = tmp_path / "hg-marks"
    marks.mkdir()
    monkeypatch.setenv(MARKS_VARIABLE, str(marks))
    _evict_fixture_modules()
    monkeypatch.syspath_prepend(str(installed["target"]))
    monkeypatch.setenv("HERMES_KERNEL_ENTRY_POINTS", str(installed["target"]))
    importlib.invalidate_caches()
    yield marks
    _evict_fixture_modules()
    importlib.invalidate_caches()


def marks_of(marks: Path, tag: str) -> int:
    """How many times the fixture code tagged ``tag`` ran."""
    path = marks / tag
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


@pytest.fixture
def models(bundled: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The bundled ``scripted`` and ``openai-compatible`` model providers, and nothing else bundled."""
    for name in ("scripted", "openai-compatible"):
        shutil.copytree(REPO / "extensions" / "model-providers" / name, bundled / "model-providers" / name)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return bundled


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer() as chat:
        yield chat


def server_model(server: LocalServer, **extra: Any) -> dict[str, Any]:
    return {
        "provider": "openai-compatible",
        "base_url": server.base_url,
        "model": "local-model",
        "timeout": 10,
        "max_retries": 0,
        **extra,
    }


def completion(message: dict[str, Any], usage: tuple[int, int] = (11, 3)) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "local-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def say(text: str) -> Reply:
    return Reply(200, completion({"role": "assistant", "content": text}))


def scripted(home: Path, turns: list[Any], **config: Any) -> dict[str, Any]:
    return {**scripted_config(write_script(home, turns)), **config}


def plugin(
    plugin_dir: Callable[..., Path],
    name: str,
    code: str,
    *,
    tools: tuple[str, ...] = (),
    hooks: tuple[str, ...] = (),
) -> Path:
    """A directory plugin whose manifest declares what it registers (so no drift warning is expected)."""
    manifest = {
        "name": name,
        "version": "1.0.0",
        "provides_tools": list(tools),
        "provides_hooks": list(hooks),
    }
    return plugin_dir(name, code, manifest=manifest)


def error_of(result: str) -> str:
    data = run_json(result)
    assert isinstance(data, dict) and "error" in data, data
    return data["error"]


# ---------------------------------------------------------------------------------------------------
# Entry-point groups and target shapes (the fixture distribution)
# ---------------------------------------------------------------------------------------------------


def test_the_fixture_installs_cleanly_and_advertises_every_hermes_group(
    installed: dict[str, Any], hermes_site: Path
) -> None:
    assert installed["after"] == installed["before"]
    assert not (FIXTURE / "build").exists() and not list(FIXTURE.glob("*.egg-info"))
    dist = importlib.metadata.distribution(DISTRIBUTION)
    assert dist.version == VERSION
    assert {ep.group for ep in dist.entry_points} == set(GROUPS)


def test_every_group_is_scanned_with_the_kind_it_implies(hermes_site: Path, make_kernel: Kit) -> None:
    k = make_kernel()
    found = sorted(p.name for p in k.plugins if p.name.startswith("hg-"))
    assert found == sorted([*EP_KINDS, "hg-clash"])  # hg-clash: the kept one and the refused one
    for name, kind in EP_KINDS.items():
        info = k.plugin(name)
        assert (info.source, info.version, info.kind) == ("entrypoint", VERSION, kind), info
        assert info.description == "Hermes-group entry-point plugins used by the hermes-kernel test suite."


def test_a_module_with_register_ctx(hermes_site: Path, make_kernel: Kit) -> None:
    k = make_kernel()
    info = k.plugin("hg-standalone")
    assert info.enabled and info.error is None, info
    assert info.tools == ["hg_standalone_tool"]
    assert info.warnings == []
    assert run_json(k.tools.dispatch("hg_standalone_tool", {"text": "hi"})) == {
        "tool": "hg_standalone_tool",
        "origin": "hg-standalone",
        "text": "hi",
    }
    assert marks_of(hermes_site, "hg-standalone") == 1


def test_one_name_with_one_target_in_two_groups_is_one_plugin(hermes_site: Path, make_kernel: Kit) -> None:
    k = make_kernel()
    twins = [p for p in k.plugins if p.name == "hg-twin"]
    assert len(twins) == 1
    info = twins[0]
    assert info.enabled and info.error is None and info.warnings == [], info
    assert info.tools == ["hg_twin_tool"]
    assert marks_of(hermes_site, "hg-twin") == 1  # imported and registered once
    assert run_json(k.tools.dispatch("hg_twin_tool", {}))["origin"] == "hg-twin"


def test_one_name_with_two_targets_keeps_the_first_and_refuses_the_second(
    hermes_site: Path, make_kernel: Kit
) -> None:
    k = make_kernel()
    clashes = [p for p in k.plugins if p.name == "hg-clash"]
    assert len(clashes) == 2
    kept, refused = clashes
    # hermes.plugins is scanned before hermes.memory_provider: its target wins.
    assert kept.enabled and kept.error is None and kept.tools == ["hg_clash_tool"], kept
    assert k.plugin("hg-clash") == kept
    assert refused.enabled is False
    assert refused.error is not None
    assert "plugin name 'hg-clash' (entry point hg-clash = " in refused.error
    assert "is already used by" in refused.error
    # Both targets are named, and the fix fits an entry point (not a manifest rename).
    assert f"{PACKAGE}.clash_first:register" in refused.error
    assert f"{PACKAGE}.clash_memory" in refused.error
    assert "uninstall one" in refused.error
    assert marks_of(hermes_site, "hg-clash-first") == 1
    assert marks_of(hermes_site, "hg-clash-memory-import") == 0  # the refused target is never imported
    assert f"{PACKAGE}.clash_memory" not in sys.modules
    assert "clash" not in k.slots.providers("memory")


def test_register_with_ctx_none_receives_a_context(hermes_site: Path, make_kernel: Kit) -> None:
    k = make_kernel()
    info = k.plugin("hg-ctx-none")
    assert info.enabled and info.tools == ["hg_ctx_none_tool"], info
    assert marks_of(hermes_site, "hg-ctx-none") == 1
    assert marks_of(hermes_site, "hg-ctx-none-without-ctx") == 0


def test_a_module_without_register_that_adds_a_tool_through_tools_registry_is_kept(
    hermes_site: Path, make_kernel: Kit, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERMES_PLUGINS_DEBUG", "1")
    k = make_kernel()
    info = k.plugin("hg-self-tool")
    assert info.enabled and info.error is None, info
    assert info.tools == ["hg_self_tool"]
    assert info.warnings == []
    assert k.tools.get("hg_self_tool").plugin == "hg-self-tool"
    assert run_json(k.tools.dispatch("hg_self_tool", {"text": "t"})) == {
        "origin": "hg-self-tool",
        "text": "t",
    }
    assert marks_of(hermes_site, "hg-self-tool") == 1
    log = agent_log(home)
    assert "plugin_self_registered" in log and "hg-self-tool" in log


def test_a_module_without_register_that_offers_a_model_provider_is_kept(
    hermes_site: Path, make_kernel: Kit
) -> None:
    k = make_kernel()
    info = k.plugin("hg-self-provider")
    assert info.enabled and info.error is None and info.warnings == [], info
    assert marks_of(hermes_site, "hg-self-provider") == 1
    entry = k.providers.catalog.entry("fixture-import-llm")
    assert (entry.plugin, entry.source) == ("hg-self-provider", "entrypoint")


def test_a_self_registering_module_registers_again_in_a_second_kernel(
    hermes_site: Path, home: Path, bundled: Path
) -> None:
    # Embedders and test suites make several kernels in one process; the second must see the same
    # plugins as the first, although the module is already imported.
    profiles = {"fixture-llm", "fixture-self-llm", "fixture-import-llm"}
    with Kernel(home=home) as first:
        first.load()
        assert first.plugin("hg-self-tool").tools == ["hg_self_tool"]
        assert {p.name for p in first.providers.list_providers()} == profiles
    with Kernel(home=home) as second:
        second.load()
        for name in ("hg-self-tool", "hg-self-provider"):
            info = second.plugin(name)
            assert info.enabled and info.error is None, info
        assert second.plugin("hg-self-tool").tools == ["hg_self_tool"]
        assert run_json(second.tools.dispatch("hg_self_tool", {}))["origin"] == "hg-self-tool"
        # The model provider that registers at import must not vanish silently either.
        assert {p.name for p in second.providers.list_providers()} == profiles
        assert second.providers.catalog.entry("fixture-self-llm").plugin == "hg-self-llm"


def test_the_model_provider_group_is_imported_on_the_first_lookup(
    hermes_site: Path, make_kernel: Kit
) -> None:
    k = make_kernel()
    for name in ("hg-llm", "hg-self-llm"):
        info = k.plugin(name)
        assert info.enabled and info.deferred, info
    assert f"{PACKAGE}.llm_provider" not in sys.modules
    assert f"{PACKAGE}.self_llm" not in sys.modules
    assert marks_of(hermes_site, "hg-llm") == 0

    names = [p.name for p in k.providers.list_providers()]
    assert {"fixture-llm", "fixture-self-llm", "fixture-import-llm"} <= set(names)
    # register() takes no argument; its providers.register_provider call is attributed to it.
    assert marks_of(hermes_site, "hg-llm") == 1
    assert k.providers.get_provider_profile("fixture-llm-alias").name == "fixture-llm"
    assert k.providers.catalog.entry("fixture-llm").plugin == "hg-llm"
    assert k.providers.catalog.entry("fixture-self-llm").plugin == "hg-self-llm"
    for name in ("hg-llm", "hg-self-llm"):
        info = k.plugin(name)
        assert info.enabled and not info.deferred and info.error is None and info.warnings == [], info


def test_a_memory_class_listed_in_both_memory_groups_is_instantiated_once(
    hermes_site: Path, make_kernel: Kit
) -> None:
    k = make_kernel(config={"memory": {"provider": "subclassed"}})
    info = k.plugin("hg-subclass-memory")
    assert info.enabled and info.error is None and info.warnings == [], info
    assert len([p for p in k.plugins if p.name == "hg-subclass-memory"]) == 1
    assert marks_of(hermes_site, "hg-subclass-memory-init") == 1
    offered = k.slots.providers("memory")["subclassed"]
    assert offered.plugin == "hg-subclass-memory"
    memory = k.providers.memory()
    assert type(memory).__name__ == "SubclassMemory"
    assert memory.prefetch("tea") == "subclassed recalls tea"


def test_a_duck_typed_memory_class_target_is_accepted_and_its_tools_are_offered(
    hermes_site: Path, make_kernel: Kit
) -> None:
    k = make_kernel(config={"memory": {"provider": "duck"}})
    info = k.plugin("hg-duck-memory")
    assert info.enabled and info.error is None and info.warnings == [], info
    memory = k.providers.memory()
    assert isinstance(memory, MemoryProvider)
    assert memory.name == "duck"
    assert memory.prefetch("ponds") == "duck recalls ponds"  # its own method
    assert memory.system_prompt_block() == ""  # the base class's default
    assert memory.sync_turn("u", "a", session_id="s") is None
    assert info.tools == ["duck_recall"]
    tool = k.tools.get("duck_recall")
    assert (tool.plugin, tool.toolset) == ("hg-duck-memory", "memory-duck")
    assert run_json(k.tools.dispatch("duck_recall", {"topic": "bread"})) == {
        "duck": "duck_recall",
        "topic": "bread",
    }


def test_a_memory_provider_is_selected_by_the_name_of_its_entry_point(
    hermes_site: Path, make_kernel: Kit
) -> None:
    k = make_kernel(config={"memory": {"provider": "hg-duck-memory"}})
    memory = k.providers.memory()
    assert memory is not None and memory.name == "duck"
    assert k.providers.problems() == []
    rows = {(r.slot, r.name): r for r in k.providers.status()}
    assert rows["memory", "duck"].active is True
    assert rows["memory", "subclassed"].active is False


def test_a_class_target_subclassing_a_slot_base_goes_to_that_slot(
    hermes_site: Path, make_kernel: Kit
) -> None:
    k = make_kernel(config={"web_search": {"provider": "fixture-search"}})
    info = k.plugin("hg-web-class")
    assert info.enabled and info.error is None, info
    assert k.slots.providers("web_search")["fixture-search"].plugin == "hg-web-class"
    search = k.providers.active("web_search")
    assert search.search("kernels")["data"]["web"][0]["title"] == "about kernels"
    assert marks_of(hermes_site, "hg-web-class-init") == 1


def test_a_class_target_that_is_no_provider_fails_alone(hermes_site: Path, make_kernel: Kit) -> None:
    k = make_kernel()
    info = k.plugin("hg-bad-class")
    assert info.enabled is False
    assert info.error is not None and "NotAProvider" in info.error and "not a provider" in info.error
    assert marks_of(hermes_site, "hg-bad-class-init") == 0
    assert k.plugin("hg-standalone").enabled


def test_the_cli_lists_the_hermes_group_plugins(installed: dict[str, Any], home: Path, bundled: Path) -> None:
    env = cli_env(home, PYTHONPATH=str(installed["target"]), HERMES_BUNDLED_PLUGINS=str(bundled))
    env.pop(MARKS_VARIABLE, None)
    proc = subprocess.run(
        [*CLI, "plugins", "list", "--refresh", "--json"], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    data = [p for p in json.loads(proc.stdout) if p["name"].startswith("hg-")]
    enabled = {p["name"]: p["kind"] for p in data if p["enabled"]}
    assert enabled == {n: kind for n, kind in EP_KINDS.items() if n != "hg-bad-class"}
    assert [p["name"] for p in data if not p["enabled"]] == ["hg-bad-class", "hg-clash"]


# ---------------------------------------------------------------------------------------------------
# Directory plugins written by installers, and lenient manifests
# ---------------------------------------------------------------------------------------------------


def test_a_directory_plugin_without_plugin_yaml_takes_its_name_from_the_folder(
    plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    code = """
        import json
        import hook_sink

        def register(ctx):
            hook_sink.calls.append(("registered", ctx.plugin_id, ctx.manifest.name))
            ctx.register_tool(
                "folder_tool",
                "folder",
                {"name": "folder_tool", "parameters": {"type": "object", "properties": {}}},
                lambda args, **kw: json.dumps({"from": "local_memory"}),
            )
            ctx.register_hook("pre_llm_call", lambda **kw: "folder context")
    """
    path = plugin_dir("local_memory", code, manifest="")
    assert not (path / "plugin.yaml").exists()
    k = make_kernel()
    info = k.plugin("local_memory")
    assert info.enabled and info.error is None, info
    assert info.source == "user" and info.path == str(path)
    assert info.warnings == []  # no manifest: nothing to drift from
    assert info.tools == ["folder_tool"] and info.hooks == ["pre_llm_call"]
    assert sink.calls == [("registered", "local_memory", "local_memory")]
    assert k.pre_llm_context(user_message="x") == "folder context"


HERMES_MANIFEST = """\
name: rich-manifest
version: 1.2
description: a manifest written for Hermes Agent
author: {name: Someone, email: someone@example.invalid}
homepage: https://example.invalid/rich
manifest_version: 2
type: context_engine
kind: standalone
provides:
  hooks: [pre_llm_call, post_tool_call]
hooks: [on_session_start]
provides_tools: [rich_tool]
config:
  depth: 3
  style: {colour: blue}
dependencies: [requests>=2, "pyyaml"]
provides_context_engine: true
requires_env:
  - RICH_PLAIN_VAR
  - name: RICH_API_KEY
    description: the key
    prompt: "Paste your Rich key"
    password: true
    category: provider
    url: https://example.invalid/keys
"""


def test_a_manifest_with_hermes_extra_keys_loads_without_warnings(
    plugin_dir: Callable[..., Path], make_kernel: Kit, monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    monkeypatch.setenv("RICH_PLAIN_VAR", "1")
    monkeypatch.setenv("RICH_API_KEY", "k")
    code = """
        import json

        def register(ctx):
            ctx.register_tool(
                "rich_tool",
                "rich",
                {"name": "rich_tool", "description": "d", "parameters": {"type": "object", "properties": {}}},
                lambda args, **kw: json.dumps({"ok": True}),
            )
            # Declared under provides: {hooks} and under hooks: — no drift warning for either.
            ctx.register_hook("pre_llm_call", lambda **kw: None)
            ctx.register_hook("post_tool_call", lambda **kw: None)
            ctx.register_hook("on_session_start", lambda **kw: None)
    """
    path = plugin_dir("rich", code, manifest=HERMES_MANIFEST)
    k = make_kernel()
    info = k.plugin("rich-manifest")
    assert info.enabled and info.error is None, info
    assert info.version == "1.2"
    assert info.warnings == []
    assert set(info.hooks) == {"pre_llm_call", "post_tool_call", "on_session_start"}
    assert "manifest_drift" not in agent_log(home)

    manifest = load_manifest(path / "plugin.yaml", "rich")
    assert manifest.warnings == ()
    assert set(manifest.provides_hooks) == {"pre_llm_call", "post_tool_call", "on_session_start"}
    plain, key = manifest.requires_env
    assert (plain.name, plain.secret, plain.prompt) == ("RICH_PLAIN_VAR", False, "")
    assert (key.name, key.secret, key.prompt, key.url) == (
        "RICH_API_KEY",
        True,
        "Paste your Rich key",
        "https://example.invalid/keys",
    )
    assert {"type", "config", "dependencies", "provides", "hooks", "homepage"} <= set(manifest.extra)


def test_a_required_variable_given_as_a_mapping_still_gates_the_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RICH_PLAIN_VAR", "1")
    monkeypatch.delenv("RICH_API_KEY", raising=False)
    plugin_dir(
        "rich", "def register(ctx):\n    raise AssertionError('must not run')\n", manifest=HERMES_MANIFEST
    )
    k = make_kernel()
    info = k.plugin("rich-manifest")
    assert info.enabled is False
    assert info.error is not None and "RICH_API_KEY" in info.error and "RICH_PLAIN_VAR" not in info.error


# ---------------------------------------------------------------------------------------------------
# Hook names the kernel does not define
# ---------------------------------------------------------------------------------------------------

UNKNOWN_HOOKS = ("pre_command", "on_session_resume", "on_stream_delta")


def test_unknown_hooks_are_kept_with_a_warning_and_fire_when_the_host_invokes_them(
    plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    code = """
        import hook_sink

        def make(hook):
            def callback(**kwargs):
                hook_sink.calls.append((hook, kwargs))
                return f"{hook} handled"
            return callback

        def register(ctx):
            for hook in ("pre_command", "on_session_resume", "on_stream_delta"):
                ctx.register_hook(hook, make(hook))
    """
    plugin(plugin_dir, "future-hooks", code, hooks=UNKNOWN_HOOKS)
    k = make_kernel()
    info = k.plugin("future-hooks")
    assert info.enabled and info.error is None, info
    assert info.hooks == list(UNKNOWN_HOOKS)
    for hook in UNKNOWN_HOOKS:
        assert any(f"hook '{hook}' is not defined by the kernel" in w for w in info.warnings), info.warnings
    assert not any("provides_hooks" in w for w in info.warnings)  # declared, so no drift warning

    assert k.invoke_hook("pre_command", command="/status", args="") == ["pre_command handled"]
    assert k.invoke_hook("on_stream_delta", delta="Hel", session_id="s1") == ["on_stream_delta handled"]
    assert k.invoke_hook("on_session_resume", session_id="s1") == ["on_session_resume handled"]
    observed = {"telemetry_schema_version": "hermes.observer.v1"}  # on every hook, as Hermes adds it
    assert sink.calls == [
        ("pre_command", {"command": "/status", "args": "", **observed}),
        ("on_stream_delta", {"delta": "Hel", "session_id": "s1", **observed}),
        ("on_session_resume", {"session_id": "s1", **observed}),
    ]


# ---------------------------------------------------------------------------------------------------
# register_middleware("tool_execution", fn)
# ---------------------------------------------------------------------------------------------------

TOOLS_PLUGIN = """
    import json
    import hook_sink

    def echo(args, **context):
        hook_sink.calls.append(("echo handler", dict(args)))
        return json.dumps({"echo": args})

    def boom(args, **context):
        hook_sink.calls.append(("boom handler", dict(args)))
        raise ValueError("handler broke")

    def schema(name):
        return {"name": name, "description": "d", "parameters": {"type": "object", "properties": {}}}

    def register(ctx):
        ctx.register_tool("echo", "test", schema("echo"), echo)
        ctx.register_tool("boom", "test", schema("boom"), boom)
"""

GUARD_MIDDLEWARE = """
    import json
    import hook_sink

    def guard(tool_name, args, next_call, **context):
        hook_sink.calls.append(("guard", tool_name, dict(args), context.get("session_id")))
        if args.get("forbidden"):
            return json.dumps({"refused_by": "mw-guard", "tool": tool_name})
        result = next_call({**args, "stamped": "by mw-guard"})
        data = json.loads(result)
        data["wrapped_by"] = "mw-guard"
        return json.dumps(data)

    def register(ctx):
        ctx.register_middleware("tool_execution", guard)
"""


@pytest.fixture
def echo_tools(plugin_dir: Callable[..., Path]) -> None:
    plugin(plugin_dir, "echo-tools", TOOLS_PLUGIN, tools=("echo", "boom"))


def test_tool_middleware_sees_the_call_changes_the_args_and_its_result_is_the_result(
    echo_tools: None, plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    plugin(plugin_dir, "mw-guard", GUARD_MIDDLEWARE)
    k = make_kernel()
    assert k.plugin("mw-guard").enabled and k.plugin("mw-guard").warnings == []
    seen_by_hooks: list[Any] = []
    k.register(
        types.SimpleNamespace(
            register=lambda ctx: ctx.register_hook(
                "post_tool_call", lambda result, **kw: seen_by_hooks.append(json.loads(result))
            )
        ),
        name="~post-watch",
    )

    result = run_json(k.tools.dispatch("echo", {"text": "hi"}, session_id="s-1"))
    assert result == {"echo": {"text": "hi", "stamped": "by mw-guard"}, "wrapped_by": "mw-guard"}
    assert sink.calls == [
        ("guard", "echo", {"text": "hi"}, "s-1"),
        ("echo handler", {"text": "hi", "stamped": "by mw-guard"}),
    ]
    assert seen_by_hooks == [result]  # what the middleware returned is the tool's result


def test_tool_middleware_can_refuse_without_calling_the_handler(
    echo_tools: None, plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    plugin(plugin_dir, "mw-guard", GUARD_MIDDLEWARE)
    k = make_kernel()
    result = run_json(k.tools.dispatch("echo", {"forbidden": True}))
    assert result == {"refused_by": "mw-guard", "tool": "echo"}
    assert [c[0] for c in sink.calls] == ["guard"]  # the handler never ran


def test_tool_middleware_of_two_plugins_runs_in_alphabetical_order_outermost_first(
    echo_tools: None, plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    layer = """
        import hook_sink

        def layer(tool_name, args, next_call):
            hook_sink.calls.append(("mw-zulu in", dict(args)))
            result = next_call({**args, "path": args.get("path", "") + "/mw-zulu"})
            hook_sink.calls.append(("mw-zulu out",))
            return result

        def register(ctx):
            ctx.register_middleware("tool_execution", layer)
    """
    plugin(plugin_dir, "mw-zulu", layer)
    k = make_kernel()

    def alpha(tool_name: str, args: dict[str, Any], next_call: Callable[..., Any]) -> Any:
        sink.calls.append(("mw-alpha in", dict(args)))
        result = next_call({**args, "path": args.get("path", "") + "/mw-alpha"})
        sink.calls.append(("mw-alpha out",))
        return result

    # Added later, at run time, but "mw-alpha" sorts first: it is the outermost layer.
    k.register(
        types.SimpleNamespace(register=lambda ctx: ctx.register_middleware("tool_execution", alpha)),
        name="mw-alpha",
    )

    result = run_json(k.tools.dispatch("echo", {}))
    assert result == {"echo": {"path": "/mw-alpha/mw-zulu"}}
    assert sink.calls == [
        ("mw-alpha in", {}),
        ("mw-zulu in", {"path": "/mw-alpha"}),
        ("echo handler", {"path": "/mw-alpha/mw-zulu"}),
        ("mw-zulu out",),
        ("mw-alpha out",),
    ]
    assert [m.plugin for m in k.middleware.of("tool_execution")] == ["mw-alpha", "mw-zulu"]


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_raising_tool_middleware_is_skipped_and_disabled(
    when: str, echo_tools: None, plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    """Issue 16, as in Hermes: a ``tool_execution`` middleware that raises does not fail the call. Raised
    before ``next_call``: the call goes on without it; after: the handler's result stands. Either way the
    handler ran exactly once, and the middleware is disabled and noted on its plugin."""
    code = f"""
        def faulty(tool_name, args, next_call):
            if {when == "after"!r}:
                next_call(args)
            raise RuntimeError("faulty middleware ({when})")

        def register(ctx):
            ctx.register_middleware("tool_execution", faulty)
    """
    plugin(plugin_dir, "mw-faulty", code)
    k = make_kernel()
    assert run_json(k.tools.dispatch("echo", {"n": 1})) == {"echo": {"n": 1}}
    assert sink.calls == [("echo handler", {"n": 1})]

    info = k.plugin("mw-faulty")
    assert info.enabled
    assert any("tool_execution middleware disabled" in w and "faulty middleware" in w for w in info.warnings)
    assert k.middleware.of("tool_execution") == []

    assert run_json(k.tools.dispatch("echo", {"n": 2})) == {"echo": {"n": 2}}  # later calls work
    assert sink.calls[-1] == ("echo handler", {"n": 2})


def test_next_call_runs_the_handler_once(
    echo_tools: None, plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    """Hermes refuses a second ``next_call()``: calling it twice runs the handler once, and the first
    result is the call's result (the refusal is the middleware's failure, so it is disabled)."""
    code = """
        def twice(tool_name, args, next_call):
            first = next_call(args)
            next_call({**args, "again": True})
            return first

        def register(ctx):
            ctx.register_middleware("tool_execution", twice)
    """
    plugin(plugin_dir, "mw-twice", code)
    k = make_kernel()
    assert run_json(k.tools.dispatch("echo", {"n": 1})) == {"echo": {"n": 1}}
    assert sink.calls == [("echo handler", {"n": 1})]
    warnings = k.plugin("mw-twice").warnings
    assert any("more than once" in w for w in warnings), warnings


def test_a_raising_handler_inside_middleware_is_the_handlers_failure(
    echo_tools: None, plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    plugin(plugin_dir, "mw-guard", GUARD_MIDDLEWARE)
    k = make_kernel()
    error = error_of(k.tools.dispatch("boom", {}))
    assert error == "tool 'boom' (plugin echo-tools) failed: ValueError: handler broke"
    assert "middleware" not in error
    assert k.plugin("mw-guard").warnings == []
    assert [m.plugin for m in k.middleware.of("tool_execution")] == ["mw-guard"]  # still live
    assert run_json(k.tools.dispatch("echo", {}))["wrapped_by"] == "mw-guard"


# ---------------------------------------------------------------------------------------------------
# register_middleware("llm_request" / "llm_execution", fn)
# ---------------------------------------------------------------------------------------------------


def test_llm_request_middleware_rewrites_what_the_server_receives(
    models: Path,
    server: LocalServer,
    plugin_dir: Callable[..., Path],
    make_kernel: Kit,
    sink: types.ModuleType,
) -> None:
    rewrite = """
        import hook_sink

        def rewrite(request, provider, model):
            messages = [dict(m) for m in request["messages"]]
            messages[-1]["content"] = messages[-1]["content"].upper()
            return {**request, "messages": messages, "temperature": 0.25}

        def register(ctx):
            ctx.register_middleware("llm_request", rewrite)
    """
    watch = """
        import copy
        import hook_sink

        def watch(request, provider, model):
            hook_sink.calls.append(("watch", copy.deepcopy(request), provider, model))
            return None  # keep the request as it is

        def register(ctx):
            ctx.register_middleware("llm_request", watch)
    """
    plugin(plugin_dir, "llm-a-rewrite", rewrite)
    plugin(plugin_dir, "llm-b-watch", watch)
    server.set_default(say("ok"))
    k = make_kernel(config={"model": server_model(server)})
    with AgentSession(k, session_id="s-llm") as session:
        assert session.run("hello there").reply == "ok"

    (body,) = [s.json for s in server.posts()]
    assert body["messages"][-1] == {"role": "user", "content": "HELLO THERE"}
    assert body["temperature"] == 0.25
    ((_, request, provider, model),) = sink.calls
    assert (provider, model) == ("openai-compatible", "local-model")
    assert request["messages"][-1]["content"] == "HELLO THERE"  # the later plugin sees the rewrite
    assert request["session_id"] == "s-llm"


def test_llm_execution_middleware_wraps_the_call_and_can_replace_the_response(
    models: Path, home: Path, plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    code = """
        import dataclasses
        import hook_sink

        def around(request, next_call, provider, model):
            hook_sink.calls.append(("before", [m["role"] for m in request["messages"]], provider, model))
            response = next_call(request)
            hook_sink.calls.append(("after", response.text))
            return dataclasses.replace(response, text=response.text + " [checked]")

        def register(ctx):
            ctx.register_middleware("llm_execution", around)
    """
    plugin(plugin_dir, "llm-exec", code)
    k = make_kernel(config=scripted(home, ["scripted answer"]))
    with AgentSession(k) as session:
        result = session.run("question")
        assert result.reply == "scripted answer [checked]"
        assert session.messages[-1] == {"role": "assistant", "content": "scripted answer [checked]"}
    assert sink.calls == [
        ("before", ["system", "user"], "scripted", "scripted"),
        ("after", "scripted answer"),
    ]


def test_llm_execution_middleware_can_answer_without_calling_the_model(
    models: Path, home: Path, plugin_dir: Callable[..., Path], make_kernel: Kit
) -> None:
    code = """
        from kernel.providers.transport import ChatResult, Usage

        def around(request, next_call):
            if "offline" in request["messages"][-1]["content"]:
                return ChatResult(
                    text="answered offline", tool_calls=[], usage=Usage(), model="none",
                    provider="llm-offline", finish_reason="stop", raw={},
                )
            return next_call(request)

        def register(ctx):
            ctx.register_middleware("llm_execution", around)
    """
    plugin(plugin_dir, "llm-offline", code)
    k = make_kernel(config=scripted(home, ["from the script"]))
    with AgentSession(k) as session:
        assert session.run("please answer offline").reply == "answered offline"
        assert k.providers.model().played == 0
        assert session.run("now ask the model").reply == "from the script"
        assert k.providers.model().played == 1


@pytest.mark.parametrize("kind", ["llm_request", "llm_execution"])
def test_a_raising_llm_middleware_fails_the_turn_naming_the_plugin_and_is_disabled(
    kind: str, models: Path, home: Path, plugin_dir: Callable[..., Path], make_kernel: Kit
) -> None:
    code = f"""
        def faulty(request, **kwargs):
            raise RuntimeError("llm middleware broke")

        def register(ctx):
            ctx.register_middleware({kind!r}, faulty)
    """
    plugin(plugin_dir, "llm-faulty", code)
    k = make_kernel(config=scripted(home, ["the first scripted turn"]))
    with AgentSession(k) as session:
        with pytest.raises(AgentError, match=r"llm-faulty.*llm middleware broke"):
            session.run("one")
        assert k.providers.model().played == 0
        assert session.run("two").reply == "the first scripted turn"
    info = k.plugin("llm-faulty")
    assert any(f"{kind} middleware disabled" in w for w in info.warnings), info.warnings


REQUEST_MIDDLEWARE = """
    import hook_sink

    def rewrite(tool_name, args, original_args, **context):
        hook_sink.calls.append(("rewrite", tool_name, dict(args), dict(original_args)))
        if args.get("leave"):
            return "not a dict: kept as it was"
        return {"args": {**args, "normalised": True}}

    def register(ctx):
        ctx.register_middleware("tool_request", rewrite)
"""


def test_tool_request_middleware_rewrites_the_args_before_the_guards_see_them(
    echo_tools: None, plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    """Issue 16: ``tool_request`` (Hermes' fourth kind) is accepted; its ``{"args": ...}`` replaces the
    arguments that pre_tool_call, the handler and post_tool_call see; any other answer keeps them."""
    plugin(plugin_dir, "mw-request", REQUEST_MIDDLEWARE)
    k = make_kernel()
    assert k.plugin("mw-request").enabled, k.plugin("mw-request").error
    guarded: list[dict[str, Any]] = []
    k.register(
        types.SimpleNamespace(
            register=lambda ctx: ctx.register_hook(
                "pre_tool_call", lambda args, **kw: guarded.append(dict(args))
            )
        ),
        name="~guard-watch",
    )
    assert run_json(k.tools.dispatch("echo", {"text": "hi"})) == {"echo": {"text": "hi", "normalised": True}}
    assert guarded == [{"text": "hi", "normalised": True}]
    assert sink.calls == [
        ("rewrite", "echo", {"text": "hi"}, {"text": "hi"}),
        ("echo handler", {"text": "hi", "normalised": True}),
    ]
    sink.calls.clear()
    assert run_json(k.tools.dispatch("echo", {"leave": 1})) == {"echo": {"leave": 1}}


def test_a_raising_tool_request_middleware_is_skipped_and_disabled(
    echo_tools: None, plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    """As in Hermes, a request middleware that fails does not fail the call: it is logged, disabled and
    noted on its plugin, and the call goes on with the arguments as they were."""
    plugin(
        plugin_dir,
        "mw-request-broken",
        "def rewrite(**kw):\n    raise RuntimeError('request mw broke')\n"
        "def register(ctx):\n    ctx.register_middleware('tool_request', rewrite)\n",
    )
    k = make_kernel()
    assert run_json(k.tools.dispatch("echo", {"text": "hi"})) == {"echo": {"text": "hi"}}
    assert run_json(k.tools.dispatch("echo", {"text": "again"})) == {"echo": {"text": "again"}}
    info = k.plugin("mw-request-broken")
    assert any("tool_request middleware disabled" in w and "request mw broke" in w for w in info.warnings)


def test_an_unknown_middleware_kind_fails_the_plugin_with_the_known_kinds(
    plugin_dir: Callable[..., Path], make_kernel: Kit
) -> None:
    plugin(
        plugin_dir, "mw-odd", "def register(ctx):\n    ctx.register_middleware('stream', lambda **kw: None)\n"
    )
    k = make_kernel()
    info = k.plugin("mw-odd")
    assert info.enabled is False
    assert info.error is not None and "'stream'" in info.error and "tool_execution" in info.error


# ---------------------------------------------------------------------------------------------------
# Web search, video generation, speech slots
# ---------------------------------------------------------------------------------------------------

MEDIA_PLUGIN = """
    from kernel.providers import WebSearchProvider

    class Search(WebSearchProvider):
        name = "fakesearch"

        def search(self, query, limit=5):
            hit = {"title": query, "url": "u", "description": "", "position": 1}
            return {"success": True, "data": {"web": [hit]}}

    class Video:  # duck-typed: no base class
        name = "fakevideo"

        def generate(self, prompt, **kwargs):
            return {"success": True, "video": "/tmp/none.mp4", "prompt": prompt, "model": "fake"}

    class Nameless:
        def search(self, query, limit=5):
            return {}

    class NoGenerate:
        name = "stillvideo"

    class Speaker:
        name = "fake-tts"

    class Listener:
        name = "fake-stt"

    def register(ctx):
        ctx.register_web_search_provider(Search())
        ctx.register_video_gen_provider(Video())
        ctx.register_web_search_provider(Nameless())
        ctx.register_video_gen_provider(NoGenerate())
        ctx.register_tts_provider(Speaker())
        ctx.register_transcription_provider(Listener())
"""


def test_web_search_and_video_providers_are_selected_by_config_and_listed(
    plugin_dir: Callable[..., Path], make_kernel: Kit
) -> None:
    plugin(plugin_dir, "media", MEDIA_PLUGIN)
    k = make_kernel(config={"web_search": {"provider": "fakesearch"}, "video_gen": {"provider": "fakevideo"}})
    search = k.providers.active("web_search")
    assert isinstance(search, WebSearchProvider)
    assert search.search("kernels")["data"]["web"][0]["title"] == "kernels"
    video = k.providers.active("video_gen")
    assert isinstance(video, VideoGenProvider)  # the duck-typed one, seen as a VideoGenProvider
    assert video.generate("a cat")["prompt"] == "a cat"
    assert video.capabilities()["operations"] == ["generate"]  # the base class's default

    rows = {(r.slot, r.name): r for r in k.providers.status()}
    assert rows["web_search", "fakesearch"].active and rows["web_search", "fakesearch"].plugin == "media"
    assert rows["video_gen", "fakevideo"].active and rows["video_gen", "fakevideo"].available
    assert ("video_gen", "stillvideo") not in rows


def test_providers_of_the_wrong_shape_are_refused_with_a_warning(
    plugin_dir: Callable[..., Path], make_kernel: Kit
) -> None:
    plugin(plugin_dir, "media", MEDIA_PLUGIN)
    k = make_kernel()
    info = k.plugin("media")
    assert info.enabled and info.error is None, info
    web = [w for w in info.warnings if "web_search provider" in w]
    video = [w for w in info.warnings if "video_gen provider" in w]
    assert len(web) == 1 and "WebSearchProvider" in web[0] and "name" in web[0]
    assert len(video) == 1 and "VideoGenProvider" in video[0] and "generate" in video[0]
    assert sorted(k.slots.providers("web_search")) == ["fakesearch"]
    assert sorted(k.slots.providers("video_gen")) == ["fakevideo"]


def test_unselected_and_unknown_web_search_choices(plugin_dir: Callable[..., Path], make_kernel: Kit) -> None:
    plugin(plugin_dir, "media", MEDIA_PLUGIN)
    assert make_kernel().providers.active("web_search") is None
    k = make_kernel(config={"web_search": {"provider": "nosuch"}})
    with pytest.raises(ProviderSelectionError, match=r"nosuch.*available: fakesearch"):
        k.providers.active("web_search")
    assert any(slot == "web_search" for slot, _ in k.providers.problems())


def test_tts_and_transcription_providers_land_in_their_slots(
    plugin_dir: Callable[..., Path], make_kernel: Kit
) -> None:
    plugin(plugin_dir, "media", MEDIA_PLUGIN)
    k = make_kernel()
    tts = k.slots.providers("tts")
    stt = k.slots.providers("transcription")
    assert sorted(tts) == ["fake-tts"] and tts["fake-tts"].plugin == "media"
    assert sorted(stt) == ["fake-stt"] and stt["fake-stt"].plugin == "media"
    assert type(tts["fake-tts"].obj).__name__ == "Speaker"
    k.unregister("media")
    assert k.slots.providers("tts") == {} and k.slots.providers("transcription") == {}


# ---------------------------------------------------------------------------------------------------
# inject_message, profile_name, config
# ---------------------------------------------------------------------------------------------------

INJECTOR = """
    import json
    import hook_sink

    def register(ctx):
        hook_sink.ctx = ctx

        def note(args, **context):
            ok = ctx.inject_message("note from the tool: " + args.get("text", ""), role="user")
            return json.dumps({"queued": ok})

        ctx.register_tool(
            "inject_note",
            "test",
            {"name": "inject_note", "description": "d", "parameters": {"type": "object", "properties": {}}},
            note,
        )
"""


def test_inject_message_is_queued_for_the_next_model_request(
    models: Path,
    server: LocalServer,
    plugin_dir: Callable[..., Path],
    make_kernel: Kit,
    sink: types.ModuleType,
) -> None:
    plugin(plugin_dir, "injector", INJECTOR, tools=("inject_note",))
    server.set_default(say("fine"))
    k = make_kernel(config={"model": server_model(server)})
    ctx = sink.ctx
    assert ctx.inject_message("Reminder: answer briefly.", role="system") is True
    assert ctx.inject_message("a tool message", role="tool") is False
    assert ctx.inject_message("   ") is False
    assert ctx.inject_message(42) is False  # type: ignore[arg-type]

    with AgentSession(k) as session:
        session.run("hello")
        session.run("again")
    first, second = (s.json["messages"] for s in server.posts())
    assert first[1:] == [
        {"role": "user", "content": "hello"},
        {"role": "system", "content": "Reminder: answer briefly."},
    ]
    # Delivered once: it stays in the conversation, it is not queued again.
    assert [m["content"] for m in second].count("Reminder: answer briefly.") == 1
    assert second[-1] == {"role": "user", "content": "again"}


def test_a_message_injected_during_a_turn_reaches_the_next_call_of_that_turn(
    models: Path,
    server: LocalServer,
    plugin_dir: Callable[..., Path],
    make_kernel: Kit,
    sink: types.ModuleType,
) -> None:
    plugin(plugin_dir, "injector", INJECTOR, tools=("inject_note",))

    def respond(seen: Seen) -> Reply:
        if not any(m["role"] == "tool" for m in seen.json["messages"]):
            call = {
                "id": "call_1",
                "type": "function",
                "function": {"name": "inject_note", "arguments": json.dumps({"text": "blue"})},
            }
            return Reply(200, completion({"role": "assistant", "content": None, "tool_calls": [call]}))
        return say("done")

    server.set_default(respond)
    k = make_kernel(config={"model": server_model(server)})
    with AgentSession(k) as session:
        result = session.run("use the tool")
    assert result.reply == "done"
    assert run_json(result.tool_calls[0].result) == {"queued": True}
    second = server.posts()[1].json["messages"]
    assert [m["role"] for m in second[-3:]] == ["assistant", "tool", "user"]
    assert second[-1]["content"] == "note from the tool: blue"


def test_profile_name_and_the_read_only_config(
    plugin_dir: Callable[..., Path], make_kernel: Kit, home: Path, tmp_path: Path, sink: types.ModuleType
) -> None:
    code = """
        import hook_sink

        def register(ctx):
            hook_sink.ctx = ctx
    """
    plugin(plugin_dir, "profiled", code)
    # The Hermes profile of the home: ~/.hermes is "default", <root>/profiles/<name> is <name>.
    for where, expected in (
        (Path.home() / ".hermes", "default"),
        (tmp_path / "root" / "profiles" / "travel", "travel"),
    ):
        write_plugin(where / "plugins", "profiled", code, manifest={"name": "profiled"})
        make_kernel(home=where)
        assert sink.ctx.profile_name == expected
    k = make_kernel(config={"profile": "ignored", "style": {"colour": "blue"}})
    ctx = sink.ctx
    assert ctx.profile_name == "custom"  # any other home
    assert ctx.config["style"] == {"colour": "blue"}
    with pytest.raises(TypeError):
        ctx.config["style"] = {}  # type: ignore[index]
    ctx.config["style"]["colour"] = "red"  # a snapshot: the kernel's config is untouched
    assert k.config["style"] == {"colour": "blue"}

    ctx.set_config("depth", 3)
    assert ctx.get_config("depth") == 3
    assert ctx.get_config("missing", "fallback") == "fallback"
    saved = yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))
    assert saved["plugins"]["entries"]["profiled"]["settings"] == {"depth": 3}
    with pytest.raises(ValueError):
        ctx.set_config("../other", 1)


# ---------------------------------------------------------------------------------------------------
# Duck-typed memory providers (conform) and selection by plugin name
# ---------------------------------------------------------------------------------------------------

LOCAL_MEMORY = """
    import hook_sink
    from pathlib import Path

    class LocalMemory:  # what an installer-written Hermes memory plugin looks like: no base class
        name = "local"

        def __init__(self):
            self.calls = []

        def is_available(self):
            return True

        def initialize(self, session_id, **kwargs):
            self.calls.append(("initialize", session_id, sorted(kwargs)))

        def get_tool_schemas(self):
            return []

        def prefetch(self, query, *, session_id=""):
            return "local memory recalls: " + query

        def sync_turn(self, user_content, assistant_content, *, session_id="", **kwargs):
            self.calls.append(("sync_turn", user_content, assistant_content))

    PROVIDER = LocalMemory()
    hook_sink.local_memory = PROVIDER

    def register(ctx):
        ctx.register_memory_provider(PROVIDER)
        if hasattr(ctx, "register_skill"):
            ctx.register_skill("local-memory", Path({skill!r}))
"""

API_WATCH = """
    import hook_sink

    def record(request_messages, **kwargs):
        hook_sink.calls.append(request_messages)

    def register(ctx):
        ctx.register_hook("pre_api_request", record)
"""


@pytest.fixture
def skill_file(tmp_path: Path) -> Path:
    """A SKILL.md shipped by an "installed package", outside any plugin directory."""
    path = tmp_path / "site-packages" / "local_memory_pkg" / "skills" / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\ndescription: remember things locally\n---\n# Local memory\n", encoding="utf-8")
    return path


def test_a_duck_typed_memory_provider_is_seen_as_a_memory_provider(
    plugin_dir: Callable[..., Path], make_kernel: Kit, skill_file: Path, sink: types.ModuleType
) -> None:
    plugin_dir("local_memory", LOCAL_MEMORY.format(skill=str(skill_file)), manifest="")
    k = make_kernel(config={"memory": {"provider": "local"}})
    info = k.plugin("local_memory")
    assert info.enabled and info.error is None, info
    memory = k.providers.memory()
    assert isinstance(memory, MemoryProvider)
    assert memory.name == "local"
    assert memory.prefetch("tea") == "local memory recalls: tea"  # its own method
    assert memory.system_prompt_block() == ""  # base defaults for what it lacks
    assert memory.on_session_end([]) is None and memory.shutdown() is None
    assert "'local' has no tool 'nope'" in run_json(memory.handle_tool_call("nope", {}))["error"]
    memory.sync_turn("u", "a", session_id="s")
    assert sink.local_memory.calls == [("sync_turn", "u", "a")]


def test_a_memory_provider_is_selected_by_its_plugin_name_and_serves_a_real_turn(
    models: Path,
    home: Path,
    plugin_dir: Callable[..., Path],
    make_kernel: Kit,
    skill_file: Path,
    sink: types.ModuleType,
) -> None:
    plugin_dir("local_memory", LOCAL_MEMORY.format(skill=str(skill_file)), manifest="")
    plugin(plugin_dir, "api-watch", API_WATCH, hooks=("pre_api_request",))
    k = make_kernel(config=scripted(home, ["I remember."], memory={"provider": "local_memory"}))
    assert k.providers.problems() == []
    assert k.providers.memory().name == "local"
    with AgentSession(k, session_id="s-mem") as session:
        assert session.run("what did I say?").reply == "I remember."
    (messages,) = sink.calls
    assert messages[-1]["role"] == "user"
    assert "local memory recalls: what did I say?" in messages[-1]["content"]
    calls = sink.local_memory.calls
    assert calls[0] == ("initialize", "s-mem", ["hermes_home", "platform"])
    assert ("sync_turn", "what did I say?", "I remember.") in calls
    assert "memory_sync_failed" not in agent_log(home)


def test_a_memory_provider_lacking_an_abstract_member_is_refused_naming_it(
    plugin_dir: Callable[..., Path], make_kernel: Kit
) -> None:
    code = """
        class Half:
            name = "half"

            def is_available(self):
                return True

            def get_tool_schemas(self):
                return []

        def register(ctx):
            ctx.register_memory_provider(Half())
    """
    plugin(plugin_dir, "half-memory", code)
    k = make_kernel(config={"memory": {"provider": "half"}})
    info = k.plugin("half-memory")
    assert info.enabled, info
    (warning,) = info.warnings
    assert "MemoryProvider" in warning and "initialize" in warning and "half-memory" in warning
    assert "half" not in k.slots.providers("memory")
    with pytest.raises(ProviderSelectionError, match="half"):
        k.providers.memory()


# ---------------------------------------------------------------------------------------------------
# Context engines: their tools, and the usage they are given
# ---------------------------------------------------------------------------------------------------

ENGINE_PLUGIN = """
    import json
    import hook_sink
    from kernel.providers import ContextEngine

    class Lookup(ContextEngine):
        name = "lookup"

        def __init__(self):
            super().__init__()
            self.usages = []
            self.tool_calls = []

        def should_compress(self, prompt_tokens=None):
            return False

        def compress(self, messages, current_tokens=None, focus_topic=None, force=False):
            return messages

        def update_from_response(self, usage):
            self.usages.append(dict(usage))

        def get_tool_schemas(self):
            return [{
                "name": "ctx_lookup",
                "description": "Look something up in the compressed history.",
                "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
            }]

        def handle_tool_call(self, tool_name, args, **kwargs):
            self.tool_calls.append((tool_name, dict(args), kwargs.get("session_id")))
            return json.dumps({"found": args.get("query")})

    ENGINE = Lookup()
    hook_sink.engine = ENGINE

    def register(ctx):
        ctx.register_context_engine(ENGINE)
"""


def test_the_active_context_engines_tools_are_registered_and_dispatched_to_it(
    models: Path, home: Path, plugin_dir: Callable[..., Path], make_kernel: Kit, sink: types.ModuleType
) -> None:
    plugin(plugin_dir, "lookup-engine", ENGINE_PLUGIN)
    turns = [{"tool_calls": [{"name": "ctx_lookup", "arguments": {"query": "earlier"}}]}, "found it"]
    k = make_kernel(config=scripted(home, turns, context={"engine": "lookup"}))
    assert isinstance(k.providers.context_engine(), ContextEngine)
    tool = k.tools.get("ctx_lookup")
    assert (tool.plugin, tool.toolset) == ("lookup-engine", "context-lookup")
    assert k.plugin("lookup-engine").tools == ["ctx_lookup"]

    with AgentSession(k, session_id="s-ctx") as session:
        result = session.run("look it up")
    assert result.reply == "found it"
    assert run_json(result.tool_calls[0].result) == {"found": "earlier"}
    assert sink.engine.tool_calls == [("ctx_lookup", {"query": "earlier"}, "s-ctx")]

    # update_from_response: both spellings of the counts, on every model call of the turn.
    usages = sink.engine.usages
    assert len(usages) == 2
    for usage in usages:
        assert usage["prompt_tokens"] == usage["input_tokens"] > 0
        assert usage["completion_tokens"] == usage["output_tokens"]
    assert sum(u["input_tokens"] for u in usages) == result.usage["input_tokens"]
    assert sum(u["completion_tokens"] for u in usages) == result.usage["output_tokens"]


def test_update_from_response_gets_the_servers_counts_under_both_names(
    models: Path,
    server: LocalServer,
    plugin_dir: Callable[..., Path],
    make_kernel: Kit,
    sink: types.ModuleType,
) -> None:
    plugin(plugin_dir, "lookup-engine", ENGINE_PLUGIN)
    server.set_default(Reply(200, completion({"role": "assistant", "content": "hi"}, (123, 45))))
    k = make_kernel(config={"model": server_model(server), "context": {"engine": "lookup"}})
    with AgentSession(k) as session:
        session.run("hello")
    (usage,) = sink.engine.usages
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (123, 45)
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (123, 45, 168)
    # The engine's tool was offered to the model.
    (body,) = [s.json for s in server.posts()]
    assert "ctx_lookup" in {t["function"]["name"] for t in body["tools"]}


def test_an_inactive_context_engine_offers_no_tools(
    plugin_dir: Callable[..., Path], make_kernel: Kit
) -> None:
    plugin(plugin_dir, "lookup-engine", ENGINE_PLUGIN)
    k = make_kernel()
    assert "ctx_lookup" not in k.tools
    assert k.plugin("lookup-engine").tools == []


# ---------------------------------------------------------------------------------------------------
# register_skill with a SKILL.md outside the plugin
# ---------------------------------------------------------------------------------------------------


def test_register_skill_accepts_an_absolute_skill_file_outside_the_plugin_with_a_warning(
    plugin_dir: Callable[..., Path], make_kernel: Kit, skill_file: Path, sink: types.ModuleType
) -> None:
    plugin_dir("local_memory", LOCAL_MEMORY.format(skill=str(skill_file)), manifest="")
    k = make_kernel()
    info = k.plugin("local_memory")
    assert info.enabled and info.skills == ["local-memory"], info
    (warning,) = info.warnings
    assert "outside the plugin directory" in warning and str(skill_file) in warning
    skill = k.skills.get("local_memory:local-memory")
    assert skill.path == skill_file.resolve()
    assert skill.description == "remember things locally"
    viewed = run_json(k.tools.dispatch("skill_view", {"name": "local_memory:local-memory"}))
    assert "# Local memory" in viewed["content"]


# ---------------------------------------------------------------------------------------------------
# ProviderProfile.key_vars: settings beside the key are not the key
# ---------------------------------------------------------------------------------------------------


def test_key_vars_prefers_variables_named_like_keys() -> None:
    profile = ProviderProfile(
        name="nano-like",
        env_vars=("NANO_MODEL_LIST_ENDPOINT", "NANO_API_KEY", "NANO_BASE_URL"),
        base_url="http://127.0.0.1:9/v1",
    )
    assert profile.key_vars() == ["NANO_API_KEY"]
    endpoint_only = {"NANO_MODEL_LIST_ENDPOINT": "http://127.0.0.1:9/models"}
    assert profile.credentials({}, endpoint_only) == (None, "http://127.0.0.1:9/v1")
    ok, reason = profile.availability({}, endpoint_only)
    assert ok is False and "NANO_API_KEY" in reason and "ENDPOINT" not in reason
    both = {**endpoint_only, "NANO_API_KEY": "sk-nano"}
    assert profile.credentials({}, both)[0] == "sk-nano"
    for var, kind in (("A_TOKEN", "token"), ("A_SECRET", "secret"), ("A_KEY", "key")):
        assert ProviderProfile(name=kind, env_vars=(var, "A_REGION")).key_vars() == [var]
    # With no variable named like a key, every one but *_BASE_URL may hold it (older profiles).
    assert ProviderProfile(name="old", env_vars=("OLD_CREDENTIAL", "OLD_BASE_URL")).key_vars() == [
        "OLD_CREDENTIAL"
    ]


def test_an_entry_point_provider_sends_its_key_not_its_model_list_endpoint(
    hermes_site: Path, server: LocalServer, make_kernel: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIXTURE_LLM_MODEL_LIST_ENDPOINT", "http://127.0.0.1:9/not-a-key")
    monkeypatch.setenv("FIXTURE_LLM_BASE_URL", server.base_url)
    monkeypatch.delenv("FIXTURE_LLM_API_KEY", raising=False)
    model = {"provider": "fixture-llm", "model": "m1", "timeout": 10, "max_retries": 0}
    k = make_kernel(config={"model": model})
    with pytest.raises(ProviderSelectionError, match="FIXTURE_LLM_API_KEY") as refused:
        k.providers.model()
    assert "ENDPOINT" not in str(refused.value)

    monkeypatch.setenv("FIXTURE_LLM_API_KEY", "sk-fixture")
    server.set_default(say("keyed"))
    k = make_kernel(config={"model": model})
    with AgentSession(k) as session:
        assert session.run("hi").reply == "keyed"
    (seen,) = server.posts()
    assert seen.headers["authorization"] == "Bearer sk-fixture"
    assert seen.json["model"] == "m1"
