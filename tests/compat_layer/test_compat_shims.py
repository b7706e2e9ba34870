"""The Hermes import shims (kernel.compat.finder + kernel.compat.shims), on real kernels.

Plugins written for Hermes Agent import their host's modules by name
(``from agent.memory_provider import MemoryProvider``, ``from tools.registry
import registry``).  While a kernel has the compatibility layer on, those names
resolve to the kernel's own classes, and the module-level functions answer for
that kernel.  Every test leaves ``sys.meta_path`` and the shim names of
``sys.modules`` as it found them (the ``isolated_shims`` fixture).
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import json
import os
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, run_json
from local_server import LocalServer, Reply

from kernel import Kernel, compat, llm, registrations
from kernel.compat import finder, host
from kernel.core.context import PluginContext
from kernel.gateway import base as gateway_base
from kernel.gateway import config as gateway_config
from kernel.providers import context_engine, image_gen, memory, profile, video_gen, web_search
from kernel.surfaces.speech import providers as speech_providers
from kernel.tools import PluginToolOverrideError

SHIM_TOPS = {name.split(".")[0] for name in finder.SHIMS}
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
MP4 = b"\x00\x00\x00\x18ftypmp42" + bytes(32)

# Served name -> every name it offers: the kernel's object, or OWN for what the shim itself defines.
OWN = None
SECRET_SOURCE_NAMES: dict[str, Any] = {
    "SecretSource": registrations.SecretSource,
    "FetchResult": registrations.FetchResult,
    "ErrorKind": registrations.ErrorKind,
    "SECRET_SOURCE_API_VERSION": registrations.SECRET_SOURCE_API_VERSION,
    **dict.fromkeys(
        (
            "DEFAULT_CLI_TIMEOUT_SECONDS",
            "DEFAULT_FETCH_TIMEOUT_SECONDS",
            "is_valid_env_name",
            "run_secret_cli",
            "scrub_ansi",
        ),
        OWN,
    ),
}
GATEWAY_HELPERS = (
    "AUDIO_CACHE_DIR",
    "CachedMedia",
    "DEFAULT_INBOUND_MEDIA_MAX_BYTES",
    "DOCUMENT_CACHE_DIR",
    "EphemeralReply",
    "GATEWAY_SECRET_CAPTURE_UNSUPPORTED_MESSAGE",
    "IMAGE_CACHE_DIR",
    "MEDIA_DELIVERY_ALLOW_DIRS_ENV",
    "MEDIA_DELIVERY_EXTS",
    "MEDIA_DELIVERY_SAFE_ROOTS",
    "MEDIA_DELIVERY_STRICT_ENV",
    "MEDIA_DELIVERY_TRUST_RECENT_ENV",
    "MEDIA_DELIVERY_TRUST_RECENT_SECONDS_ENV",
    "MEDIA_EXTENSIONLESS_TAG_RE",
    "MEDIA_TAG_CLEANUP_RE",
    "ProcessingOutcome",
    "SCREENSHOT_CACHE_DIR",
    "SEND_ERROR_KINDS",
    "SUPPORTED_DOCUMENT_TYPES",
    "SUPPORTED_IMAGE_DOCUMENT_TYPES",
    "SUPPORTED_VIDEO_TYPES",
    "TextDebounceState",
    "VIDEO_CACHE_DIR",
    "cache_audio_from_bytes",
    "cache_audio_from_url",
    "cache_document_from_bytes",
    "cache_image_from_bytes",
    "cache_image_from_url",
    "cache_media_bytes",
    "cache_video_from_bytes",
    "classify_send_error",
    "cleanup_document_cache",
    "cleanup_image_cache",
    "coerce_plaintext_gateway_command",
    "get_audio_cache_dir",
    "get_document_cache_dir",
    "get_image_cache_dir",
    "get_inbound_media_max_bytes",
    "get_video_cache_dir",
    "is_chat_level_not_found",
    "is_host_excluded_by_no_proxy",
    "is_network_accessible",
    "merge_pending_message_event",
    "proxy_kwargs_for_aiohttp",
    "proxy_kwargs_for_bot",
    "resolve_channel_prompt",
    "resolve_channel_skills",
    "resolve_proxy_url",
    "safe_url_for_log",
    "should_bypass_proxy",
    "should_send_media_as_audio",
    "utf16_len",
    "validate_inbound_media_size",
    "validate_media_delivery_path",
)
EXPECTED: dict[str, dict[str, Any]] = {
    "agent": {},
    "agent.memory_provider": {"MemoryProvider": memory.MemoryProvider},
    "agent.context_engine": {
        "ContextEngine": context_engine.ContextEngine,
        "MEMORY_CONTEXT_MAX_CHARS": context_engine.MEMORY_CONTEXT_MAX_CHARS,
        "sanitize_memory_context": context_engine.sanitize_memory_context,
    },
    "agent.context_compressor": dict.fromkeys(
        (
            "COMPRESSED_SUMMARY_METADATA_KEY",
            "HISTORICAL_IN_PROGRESS_HEADING",
            "HISTORICAL_PENDING_ASKS_HEADING",
            "HISTORICAL_REMAINING_WORK_HEADING",
            "HISTORICAL_TASK_HEADING",
            "LEGACY_SUMMARY_PREFIX",
            "MINIMUM_CONTEXT_LENGTH",
            "SUMMARY_PREFIX",
            "ContextCompressor",
        ),
        OWN,
    ),
    "agent.image_gen_provider": {
        "ImageGenProvider": image_gen.ImageGenProvider,
        "success_response": image_gen.success_response,
        "error_response": image_gen.error_response,
        "resolve_aspect_ratio": image_gen.resolve_aspect_ratio,
        "DEFAULT_ASPECT_RATIO": image_gen.DEFAULT_ASPECT_RATIO,
        "ASPECT_RATIOS": image_gen.ASPECT_RATIOS,
        "VALID_ASPECT_RATIOS": OWN,
        "normalize_reference_images": OWN,
        "save_b64_image": OWN,
        "save_url_image": OWN,
    },
    "agent.image_gen_registry": {
        "get_provider": OWN,
        "list_providers": OWN,
        "get_active_provider": OWN,
        "register_provider": OWN,
    },
    "agent.video_gen_provider": {
        "VideoGenProvider": video_gen.VideoGenProvider,
        "success_response": video_gen.success_response,
        "error_response": video_gen.error_response,
        "DEFAULT_OPERATION": video_gen.DEFAULT_OPERATION,
        "DEFAULT_ASPECT_RATIO": video_gen.DEFAULT_ASPECT_RATIO,
        "DEFAULT_RESOLUTION": video_gen.DEFAULT_RESOLUTION,
        "COMMON_ASPECT_RATIOS": video_gen.COMMON_ASPECT_RATIOS,
        "COMMON_RESOLUTIONS": video_gen.COMMON_RESOLUTIONS,
        "save_b64_video": OWN,
        "save_bytes_video": OWN,
        "save_url_video": OWN,
    },
    "agent.web_search_provider": {"WebSearchProvider": web_search.WebSearchProvider, "get_provider_env": OWN},
    "agent.browser_provider": {"BrowserProvider": registrations.BrowserProvider},
    "agent.secret_sources": SECRET_SOURCE_NAMES,
    "agent.secret_sources.base": SECRET_SOURCE_NAMES,
    "hermes_cli.dashboard_auth": {
        "DashboardAuthProvider": registrations.DashboardAuthProvider,
        **dict.fromkeys(
            (
                "Session",
                "TokenPrincipal",
                "LoginStart",
                "ProviderError",
                "InvalidCodeError",
                "InvalidCredentialsError",
                "RefreshExpiredError",
                "assert_protocol_compliance",
                "register_provider",
                "get_provider",
                "list_providers",
                "list_token_providers",
                "list_session_providers",
            ),
            OWN,
        ),
    },
    "agent.tts_provider": {
        "TTSProvider": speech_providers.TTSProvider,
        "DEFAULT_OUTPUT_FORMAT": speech_providers.DEFAULT_OUTPUT_FORMAT,
        "VALID_OUTPUT_FORMATS": speech_providers.VALID_OUTPUT_FORMATS,
        "resolve_output_format": speech_providers.resolve_output_format,
    },
    "agent.tts_registry": {"get_provider": OWN, "list_providers": OWN, "register_provider": OWN},
    "agent.transcription_provider": {"TranscriptionProvider": speech_providers.TranscriptionProvider},
    "agent.transcription_registry": {"get_provider": OWN, "list_providers": OWN, "register_provider": OWN},
    "agent.plugin_llm": {
        "PluginLlm": OWN,
        "PluginLlmCompleteResult": llm.PluginLlmCompleteResult,
        "PluginLlmStructuredResult": llm.PluginLlmStructuredResult,
        "PluginLlmUsage": llm.PluginLlmUsage,
        "PluginLlmTrustError": llm.PluginLlmTrustError,
        "PluginLlmError": llm.PluginLlmError,
        "PluginLlmTextInput": OWN,
        "PluginLlmImageInput": OWN,
        "PluginLlmInput": OWN,
        "_TrustPolicy": OWN,
        "make_plugin_llm_for_test": OWN,
    },
    "providers": {
        "OMIT_TEMPERATURE": profile.OMIT_TEMPERATURE,
        "ProviderProfile": profile.ProviderProfile,
        "register_provider": OWN,
        "get_provider_profile": OWN,
        "list_providers": OWN,
    },
    "providers.base": {
        "ProviderProfile": profile.ProviderProfile,
        "OMIT_TEMPERATURE": profile.OMIT_TEMPERATURE,
    },
    "hermes_constants": {
        "get_hermes_home": OWN,
        "get_default_hermes_root": OWN,
        "hermes_home_key": OWN,
        "profile_name_for_home": OWN,
        **dict.fromkeys(
            (
                "FINISH_REASON_LENGTH",
                "OPENROUTER_BASE_URL",
                "OPENROUTER_MODELS_URL",
                "PARTIAL_STREAM_STUB_ID",
                "VALID_REASONING_EFFORTS",
                "display_hermes_home",
                "get_bundled_skills_dir",
                "get_config_path",
                "get_env_path",
                "get_hermes_dir",
                "get_optional_mcps_dir",
                "get_optional_skills_dir",
                "get_process_hermes_home",
                "get_real_home",
                "get_skills_dir",
                "parse_reasoning_effort",
                "secure_parent_dir",
            ),
            OWN,
        ),
    },
    "hermes_cli": {},
    "hermes_cli.config": {
        "load_config": OWN,
        "load_config_readonly": OWN,
        "save_config": OWN,
        "cfg_get": OWN,
        "get_hermes_home": OWN,
        "get_env_value": OWN,
        "save_env_value": OWN,
        **dict.fromkeys(
            (
                "get_config_path",
                "get_env_path",
                "get_env_value_prefer_dotenv",
                "invalidate_env_cache",
                "is_provider_enabled",
                "load_env",
                "read_raw_config",
                "remove_env_value",
                "save_env_value_secure",
            ),
            OWN,
        ),
    },
    "hermes_cli.plugins": {
        "PluginContext": PluginContext,
        "PluginManagerView": OWN,
        "get_plugin_manager": OWN,
        "get_plugin_commands": OWN,
        "get_plugin_command_handler": OWN,
        "invoke_hook": OWN,
        "resolve_pre_tool_block": OWN,
        "PluginToolOverrideError": PluginToolOverrideError,
        "get_plugin_auxiliary_tasks": OWN,
        **dict.fromkeys(
            (
                "ENTRY_POINTS_GROUP",
                "OBSERVER_SCHEMA_VERSION",
                "VALID_HOOKS",
                "VALID_MIDDLEWARE",
                "discover_plugins",
                "get_bundled_plugins_dir",
                "get_plugin_context_engine",
                "get_plugin_toolsets",
                "get_pre_tool_call_block_message",
                "get_pre_tool_call_directive",
                "get_pre_verify_continue_message",
                "has_hook",
                "has_middleware",
                "resolve_plugin_command_result",
            ),
            OWN,
        ),
    },
    "tools": {},
    "tools.registry": {
        "registry": OWN,
        "HermesToolRegistry": OWN,
        "ToolEntry": OWN,
        "tool_error": OWN,
        "tool_result": OWN,
        "invalidate_check_fn_cache": OWN,
    },
    "gateway": {},
    "gateway.platforms": {},
    "gateway.platforms.base": {
        "BasePlatformAdapter": gateway_base.BasePlatformAdapter,
        "MessageEvent": gateway_base.MessageEvent,
        "MessageType": gateway_base.MessageType,
        "SendResult": gateway_base.SendResult,
        "SessionSource": gateway_base.SessionSource,
        # Hermes 0.19's helpers (tests/compat/test_hermes_surface.py checks their shapes).
        **dict.fromkeys(GATEWAY_HELPERS, OWN),
    },
    "gateway.config": {"Platform": gateway_config.Platform, "PlatformConfig": gateway_config.PlatformConfig},
}


def _drop_shim_modules(keep: set[str]) -> None:
    for name in [n for n in sys.modules if n.split(".")[0] in SHIM_TOPS and n not in keep]:
        del sys.modules[name]


@pytest.fixture(autouse=True)
def isolated_shims() -> Iterator[None]:
    """No kernel attached and no finder at the start; ``sys.meta_path`` and the shim names restored after."""
    with host._lock:
        attached = list(host._kernels)
        host._kernels.clear()
    was_enabled = finder.enabled()
    finder.disable()
    meta_path = list(sys.meta_path)
    before = {n for n in sys.modules if n.split(".")[0] in SHIM_TOPS}
    importlib.invalidate_caches()
    yield
    with host._lock:
        host._kernels.clear()
    finder.disable()
    _drop_shim_modules(before)
    sys.meta_path[:] = meta_path
    importlib.invalidate_caches()
    with host._lock:
        host._kernels.extend(attached)
    if was_enabled:
        finder.enable()


def shim_names_loaded() -> list[str]:
    return sorted(n for n in sys.modules if n in finder.SHIMS)


# --------------------------------------------------------------------------
# What each served module offers
# --------------------------------------------------------------------------


def test_every_served_name_imports_with_exactly_its_names(make_kernel: Callable[..., Kernel]) -> None:
    make_kernel()
    assert finder.enabled()
    for name, names in EXPECTED.items():
        module = importlib.import_module(name)
        assert module.__spec__ is not None and module.__spec__.loader is finder.FINDER, name
        assert module.__name__ == name
        assert sorted(module.__all__) == sorted(names), name
        for attr, expected in names.items():
            value = getattr(module, attr)
            if expected is OWN:
                impl = importlib.import_module(f"kernel.compat.shims.{finder.SHIMS[name][0]}")
                # A constant computed per home (the cache folders) is equal, not identical.
                assert value == getattr(impl, attr) and value is not None, f"{name}.{attr}"
                # A type alias is the typing module's object; a constant's class is the standard library's.
                if isinstance(value, (type, types.FunctionType)):
                    assert getattr(value, "__module__", impl.__name__) == impl.__name__, f"{name}.{attr}"
            else:
                assert value is expected, f"{name}.{attr} is not the kernel's object"
        if finder.SHIMS[name][1]:
            assert module.__path__ == [], f"{name} must be a package serving only listed submodules"
    assert set(EXPECTED) == set(finder.SHIMS)


def test_hermes_spelled_imports_resolve_to_the_kernels_classes(make_kernel: Callable[..., Kernel]) -> None:
    make_kernel()
    from agent.context_engine import ContextEngine
    from agent.memory_provider import MemoryProvider
    from gateway.config import Platform, PlatformConfig
    from gateway.platforms.base import BasePlatformAdapter, MessageEvent, MessageType, SendResult
    from hermes_cli.plugins import PluginContext as HermesContext
    from providers import register_provider
    from providers.base import ProviderProfile

    import kernel.providers as kp

    assert MemoryProvider is kp.MemoryProvider
    assert ContextEngine is kp.ContextEngine
    assert ProviderProfile is kp.ProviderProfile
    assert callable(register_provider)
    assert HermesContext is PluginContext
    # nanogpt annotates `ctx: PluginContext | None` at def time, without postponed annotations.
    assert (HermesContext | None).__args__ == (PluginContext, type(None))
    assert BasePlatformAdapter is gateway_base.BasePlatformAdapter
    assert (MessageEvent, MessageType, SendResult) == (
        gateway_base.MessageEvent,
        gateway_base.MessageType,
        gateway_base.SendResult,
    )
    assert (Platform, PlatformConfig) == (gateway_config.Platform, gateway_config.PlatformConfig)


def test_a_submodule_not_in_the_table_is_not_served(make_kernel: Callable[..., Kernel]) -> None:
    make_kernel()
    import agent

    assert agent.__path__ == []
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("agent.usage_pricing")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("tools.url_safety")
    with pytest.raises(ImportError):
        exec("from hermes_constants import no_such_name", {})


# --------------------------------------------------------------------------
# The finder's rules
# --------------------------------------------------------------------------


def test_the_finder_is_appended_last_and_only_once(make_kernel: Callable[..., Kernel]) -> None:
    before = list(sys.meta_path)
    make_kernel()
    make_kernel()
    finder.enable()
    assert sys.meta_path[-1] is finder.FINDER
    assert sys.meta_path.count(finder.FINDER) == 1
    assert sys.meta_path[:-1] == before


def test_a_real_top_level_package_wins_and_gets_no_shim_grafted(
    make_kernel: Callable[..., Kernel], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    (site / "tools").mkdir(parents=True)
    (site / "tools" / "__init__.py").write_text("ORIGIN = 'real tools'\n")
    (site / "agent").mkdir()
    (site / "agent" / "__init__.py").write_text("")
    (site / "agent" / "memory_provider.py").write_text("class MemoryProvider:\n    ORIGIN = 'real agent'\n")
    monkeypatch.syspath_prepend(str(site))
    make_kernel()

    import tools

    assert tools.ORIGIN == "real tools"
    assert not finder.FINDER.serves(tools)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("tools.registry")
    assert "tools.registry" not in sys.modules

    from agent.memory_provider import MemoryProvider

    assert MemoryProvider.ORIGIN == "real agent"
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("agent.context_engine")
    # The other names are still served.
    from hermes_cli.config import load_config

    assert callable(load_config)


def test_a_real_package_imported_first_is_never_replaced(
    make_kernel: Callable[..., Kernel], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    (site / "gateway").mkdir(parents=True)
    (site / "gateway" / "__init__.py").write_text("ORIGIN = 'real gateway'\n")
    monkeypatch.syspath_prepend(str(site))
    import gateway

    make_kernel()
    assert importlib.import_module("gateway") is gateway
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("gateway.platforms.base")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("gateway.config")


def test_a_module_is_served_completely_or_not_at_all(
    make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    incomplete = type(sys)("kernel.compat.shims._test_incomplete")
    incomplete.__all__ = ["Present", "Missing"]  # type: ignore[attr-defined]
    incomplete.Present = object()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, incomplete.__name__, incomplete)
    monkeypatch.setitem(finder.SHIMS, "agent.test_incomplete", ("_test_incomplete", False))
    monkeypatch.setitem(finder.SHIMS, "agent.test_unbuildable", ("_test_no_such_module", False))
    make_kernel()

    with pytest.raises(ImportError, match=r"incomplete.*Missing"):
        importlib.import_module("agent.test_incomplete")
    assert "agent.test_incomplete" not in sys.modules
    with pytest.raises(ImportError):
        exec("from agent.test_incomplete import Present", {})
    with pytest.raises(ImportError, match="could not build"):
        importlib.import_module("agent.test_unbuildable")
    assert "agent.test_unbuildable" not in sys.modules
    # The rest of the package is unaffected.
    assert importlib.import_module("agent.memory_provider").MemoryProvider is memory.MemoryProvider


# --------------------------------------------------------------------------
# On and off
# --------------------------------------------------------------------------


def test_names_fail_again_after_the_last_kernel_shuts_down(make_kernel: Callable[..., Kernel]) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("agent")
    first, second = make_kernel(), make_kernel()
    from agent.memory_provider import MemoryProvider
    from tools.registry import registry

    assert MemoryProvider is memory.MemoryProvider and registry is not None
    served = shim_names_loaded()
    assert {"agent", "agent.memory_provider", "tools", "tools.registry"} <= set(served)

    first.shutdown()
    assert finder.enabled()
    assert importlib.import_module("agent.memory_provider").MemoryProvider is memory.MemoryProvider

    second.shutdown()
    assert not finder.enabled()
    assert finder.FINDER not in sys.meta_path
    assert shim_names_loaded() == []
    for name in ("agent", "agent.memory_provider", "tools.registry", "hermes_constants", "gateway.config"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(name)


def test_compat_hermes_false_keeps_the_shims_away(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel(config={"compat": {"hermes": False}})
    assert not finder.enabled()
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("agent.memory_provider")
    assert host.current_kernel() is None

    compat.install(k)
    assert host.current_kernel() is k
    assert importlib.import_module("hermes_constants").get_hermes_home() == k.home
    compat.uninstall(k)
    assert host.current_kernel() is None
    assert shim_names_loaded() == []
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("hermes_constants")


# --------------------------------------------------------------------------
# tools.registry
# --------------------------------------------------------------------------

ECHO_PLUGIN = """
from tools.registry import registry, tool_error, tool_result

SCHEMA = {
    "name": "shim_echo",
    "description": "Echo the text back.",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
}


def echo(args, **kwargs):
    if not args.get("text"):
        return tool_error("no text given", code=400)
    return tool_result({"echo": args["text"]}, session=kwargs.get("session_id"))


registry.register("shim_echo", "shimtools", SCHEMA, echo, description="echo")
"""


def test_a_plugin_registering_on_the_registry_at_import_owns_the_tool(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir("shimtools", ECHO_PLUGIN)
    k = make_kernel()
    info = k.plugin("shimtools")
    assert info.enabled, info.error
    assert info.tools == ["shim_echo"]
    assert k.tools.get("shim_echo").plugin == "shimtools"
    assert k.tools.get("shim_echo").toolset == "shimtools"
    assert run_json(k.tools.dispatch("shim_echo", {"text": "hi"}, session_id="s-1")) == {
        "echo": "hi",
        "session": "s-1",
    }
    assert run_json(k.tools.dispatch("shim_echo", {})) == {"error": "no text given", "code": 400}
    k.unregister("shimtools")
    assert "shim_echo" not in k.tools


def test_registry_register_inside_host_loading_goes_to_that_plugin(
    make_kernel: Callable[..., Kernel],
) -> None:
    k = make_kernel()
    from tools.registry import registry

    def setup(ctx: PluginContext) -> None:
        with host.loading(ctx):
            assert host.current_context() is ctx
            registry.register(
                "loaded_tool",
                "loader",
                {
                    "name": "loaded_tool",
                    "description": "d",
                    "parameters": {"type": "object", "properties": {}},
                },
                lambda args, **kw: json.dumps({"ok": True}),
            )

    k.host.add_surface("test:loader", "test", setup, source="runtime")
    assert k.tools.get("loaded_tool").plugin == "test:loader"
    assert k.plugin("test:loader").tools == ["loaded_tool"]
    assert run_json(k.tools.dispatch("loaded_tool", {})) == {"ok": True}


def test_registry_register_outside_a_load_belongs_to_the_compat_record(
    make_kernel: Callable[..., Kernel],
) -> None:
    k = make_kernel()
    from tools.registry import registry

    schema = {"name": "late_tool", "description": "d", "parameters": {"type": "object", "properties": {}}}
    registry.register(
        "late_tool", "late", schema, lambda args, **kw: json.dumps({"late": True}), max_result_chars=10
    )
    tool = k.tools.get("late_tool")
    assert tool is not None and tool.plugin == "compat:hermes"
    record = k.plugin("compat:hermes")
    assert record.enabled and record.tools == ["late_tool"]
    assert any("max_result_chars" in w for w in record.warnings)
    assert run_json(k.tools.dispatch("late_tool", {})) == {"late": True}
    # The read helpers see the kernel's tools.
    assert "late_tool" in registry.get_all_tool_names()
    assert registry.get_toolset_for_tool("late_tool") == "late"
    assert registry.get_schema("late_tool")["description"] == "d"
    assert [d["function"]["name"] for d in registry.get_definitions(["late_tool"])] == ["late_tool"]
    assert run_json(registry.dispatch("late_tool", {})) == {"late": True}
    assert registry.get_schema("no_such_tool") is None


def test_tool_error_and_tool_result_are_json() -> None:
    from kernel.compat.shims.tools_registry import tool_error, tool_result

    assert json.loads(tool_error("boom")) == {"error": "boom"}
    assert json.loads(tool_error("boom", code=3, detail="x")) == {"error": "boom", "code": 3, "detail": "x"}
    assert json.loads(tool_result({"a": 1})) == {"a": 1}
    assert json.loads(tool_result({"a": 1}, b=2)) == {"a": 1, "b": 2}
    assert json.loads(tool_result(success=True, n=2)) == {"success": True, "n": 2}
    assert json.loads(tool_result([1, 2])) == [1, 2]
    assert json.loads(tool_result("text", n=1)) == {"result": "text", "n": 1}
    assert json.loads(tool_result()) == {}


def test_registry_without_a_kernel_refuses_clearly() -> None:
    from kernel.compat.shims.tools_registry import registry

    with pytest.raises(RuntimeError, match="no hermes-kernel"):
        registry.register("x", "y", {"name": "x"}, lambda args: "")
    assert registry.get_all_tool_names() == []
    assert registry.get_definitions() == []


# --------------------------------------------------------------------------
# agent.image_gen_provider / agent.image_gen_registry / agent.video_gen_provider / web search
# --------------------------------------------------------------------------


def test_save_b64_image_without_home_writes_under_the_kernels_home(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    make_kernel()
    from agent.image_gen_provider import save_b64_image

    path = save_b64_image(base64.b64encode(PNG).decode(), prefix="stepfun_step-1x")
    assert path.parent == home / "cache" / "images"
    assert path.name.startswith("stepfun_step-1x-") and path.suffix == ".png"
    assert path.read_bytes() == PNG
    escaped = save_b64_image(base64.b64encode(PNG).decode(), prefix="../../outside")
    assert escaped.parent == home / "cache" / "images"
    with pytest.raises(ValueError, match="base64"):
        save_b64_image("not base64 !!", prefix="x")


def test_save_url_image_downloads_into_the_kernels_home(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    make_kernel()
    from agent.image_gen_provider import save_url_image

    with LocalServer(bytes_type="image/png") as server:
        server.program(Reply(200, PNG))
        path = save_url_image(f"{server.root}/files/a.png", prefix="remote")
    assert path.parent == home / "cache" / "images" and path.read_bytes() == PNG


def test_without_a_kernel_images_go_to_hermes_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernel.compat.shims.agent_image_gen_provider import save_b64_image

    env_home = tmp_path / "env-home"
    monkeypatch.setenv("HERMES_HOME", str(env_home))
    path = save_b64_image(base64.b64encode(PNG).decode())
    assert path.parent == env_home / "cache" / "images"
    monkeypatch.delenv("HERMES_HOME")
    path = save_b64_image(base64.b64encode(PNG).decode())
    assert path.parent == Path.home() / ".hermes" / "cache" / "images"


def test_normalize_reference_images() -> None:
    from kernel.compat.shims.agent_image_gen_provider import normalize_reference_images as norm

    assert norm(None) is None
    assert norm([]) is None
    assert norm(["", "  ", None, 3]) is None
    assert norm("  https://x/a.png ") == ["https://x/a.png"]
    assert norm(["a.png", " b.png", "a.png", {"url": "c.png"}, {"other": 1}]) == ["a.png", "b.png", "c.png"]
    assert norm(("x",)) == ["x"]
    assert norm(42) is None


IMAGE_PLUGIN = """
from agent.image_gen_provider import ImageGenProvider, success_response, resolve_aspect_ratio


class Shim(ImageGenProvider):
    @property
    def name(self):
        return "shimimg"

    def generate(self, prompt, aspect_ratio="landscape", **kwargs):
        return success_response(image="/tmp/x.png", model="m", prompt=prompt,
                                aspect_ratio=resolve_aspect_ratio(aspect_ratio), provider=self.name)


def register(ctx):
    ctx.register_image_gen_provider(Shim())
"""


def test_image_gen_registry_answers_with_the_kernels_backends(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir("shimimg", IMAGE_PLUGIN)
    k = make_kernel(config={"image_gen": {"provider": "shimimg"}})
    assert k.plugin("shimimg").enabled, k.plugin("shimimg").error
    from agent.image_gen_registry import get_active_provider, get_provider, list_providers

    mine = k.slots.get("image_gen", "shimimg").obj
    assert get_provider("shimimg") is mine
    assert get_provider("pollinations") is None
    assert list_providers() == [mine]
    assert get_active_provider() is mine
    assert mine.generate("a cat", "tall")["aspect_ratio"] == "landscape"


def test_image_gen_registry_register_provider_outside_a_load(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    from agent.image_gen_provider import ImageGenProvider
    from agent.image_gen_registry import get_provider, register_provider

    class Late(ImageGenProvider):
        name = "late-img"

        def generate(self, prompt: str, aspect_ratio: str = "landscape", **kwargs: Any) -> dict[str, Any]:
            return {}

    backend = Late()
    register_provider(backend)
    assert get_provider("late-img") is backend
    assert k.slots.get("image_gen", "late-img").plugin == "compat:hermes"


def test_image_gen_registry_without_a_kernel_is_empty() -> None:
    from kernel.compat.shims import agent_image_gen_registry as reg

    assert reg.get_provider("stepfun") is None
    assert reg.list_providers() == []
    assert reg.get_active_provider() is None


def test_video_gen_helpers_and_home_less_save(make_kernel: Callable[..., Kernel], home: Path) -> None:
    make_kernel()
    from agent.video_gen_provider import (
        DEFAULT_OPERATION,
        VideoGenProvider,
        error_response,
        save_bytes_video,
        save_url_video,
        success_response,
    )

    class Clip(VideoGenProvider):
        @property
        def name(self) -> str:
            return "clip"

        def generate(self, prompt: str, **kwargs: Any) -> dict[str, Any]:
            if not prompt:
                return error_response(error="no prompt", error_type="invalid_input", provider=self.name)
            path = save_bytes_video(MP4, prefix=f"clip_{kwargs.get('model') or 'm'}")
            return success_response(video=str(path), model="m", prompt=prompt, provider=self.name, duration=5)

    clip = Clip()
    assert clip.display_name == "Clip" and clip.is_available() and clip.default_model() is None
    ok = clip.generate("waves", model="fast", seed=1)
    assert ok["success"] is True and ok["operation"] == DEFAULT_OPERATION and ok["duration"] == 5
    saved = Path(ok["video"])
    assert saved.parent == home / "cache" / "videos" and saved.suffix == ".mp4" and saved.read_bytes() == MP4
    bad = clip.generate("")
    assert bad == {
        "success": False,
        "error": "no prompt",
        "error_type": "invalid_input",
        "provider": "clip",
        "model": "",
        "prompt": "",
        "operation": "generate",
        "aspect_ratio": "",
    }
    assert error_response(error="e", operation="extend", retry_after=3)["retry_after"] == 3
    with LocalServer(bytes_type="video/mp4") as server:
        server.program(Reply(200, MP4))
        fetched = save_url_video(f"{server.root}/files/v.mp4", prefix="dl")
    assert fetched.parent == home / "cache" / "videos" and fetched.read_bytes() == MP4


def test_web_search_provider_contract(make_kernel: Callable[..., Kernel]) -> None:
    make_kernel()
    from agent.web_search_provider import WebSearchProvider

    class Local(WebSearchProvider):
        @property
        def name(self) -> str:
            return "local"

        def search(self, query: str, limit: int = 5) -> dict[str, Any]:
            hits = [
                {"title": f"{query} {i}", "url": f"http://127.0.0.1/{i}", "snippet": "s"} for i in range(9)
            ]
            return web_search.search_success(hits[:limit])

    class ExtractOnly(WebSearchProvider):
        name = "reader"

        def supports_search(self) -> bool:
            return False

        def supports_extract(self) -> bool:
            return True

        def extract(self, urls: list[str], **kwargs: Any) -> list[dict[str, Any]]:
            return [{"url": u, "title": "t", "content": "c"} for u in urls]

    local = Local()
    result = local.search("kernel", limit=2)
    assert result == {
        "success": True,
        "data": {
            "web": [
                {"title": "kernel 0", "url": "http://127.0.0.1/0", "description": "s", "position": 1},
                {"title": "kernel 1", "url": "http://127.0.0.1/1", "description": "s", "position": 2},
            ]
        },
    }
    assert local.supports_search() and not local.supports_extract() and local.is_available()
    assert local.extract(["u"]) == [{"url": "u", "error": "web search backend 'local' does not extract"}]
    reader = ExtractOnly()
    assert reader.search("q") == {"success": False, "error": "web search backend 'reader' does not search"}
    assert reader.extract(["a", "b"])[1] == {"url": "b", "title": "t", "content": "c"}
    with pytest.raises(TypeError):
        WebSearchProvider()  # type: ignore[abstract]


# --------------------------------------------------------------------------
# providers / providers.base
# --------------------------------------------------------------------------

ACME = """
from providers import register_provider
from providers.base import ProviderProfile

register_provider(ProviderProfile(
    name="acme",
    aliases=("acme-inference",),
    display_name="Acme Inference",
    env_vars=("ACME_API_KEY", "ACME_BASE_URL"),
    base_url="http://127.0.0.1:9/v1",
    auth_type="api_key",
    default_aux_model="acme-small-fast",
    fallback_models=("acme-large-v3", "acme-medium-v3"),
))
"""


def test_a_provider_plugin_using_providers_lands_in_the_kernels_catalog(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir(
        "model-providers/acme",
        ACME,
        manifest={"name": "acme-provider", "kind": "model-provider", "version": "1"},
    )
    k = make_kernel()
    from providers import get_provider_profile, list_providers

    mine = k.providers.get_provider_profile("acme")
    assert mine.display_name == "Acme Inference"
    assert k.providers.catalog.entry("acme").plugin == "model-providers/acme"
    assert get_provider_profile("acme-inference") is mine
    assert mine in list_providers()
    assert get_provider_profile("nope") is None  # as in Hermes (the kernel's own lookup raises)


def test_providers_register_provider_outside_a_load(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    from providers import ProviderProfile, get_provider_profile, register_provider

    late = ProviderProfile(name="late-provider", auth_type="none", base_url="http://127.0.0.1:9/v1")
    register_provider(late)
    assert get_provider_profile("late-provider") is late
    assert k.providers.catalog.entry("late-provider").plugin == "compat:hermes"


def test_providers_register_provider_while_a_plugin_loads_is_that_plugins(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    """A module-level register_provider() made while a plugin is imported goes to that plugin's record."""
    directory = home / "plugins" / "offers-at-import"
    directory.mkdir(parents=True)
    (directory / "__init__.py").write_text(
        "from providers import ProviderProfile, register_provider\n"
        "register_provider(ProviderProfile(name='collected', auth_type='none'))\n"
        "def register(ctx):\n    pass\n",
        encoding="utf-8",
    )
    k = make_kernel()
    assert k.plugin("offers-at-import").enabled is True
    assert k.providers.catalog.entry("collected").plugin == "offers-at-import"


# --------------------------------------------------------------------------
# hermes_constants / hermes_cli.config
# --------------------------------------------------------------------------


def test_hermes_constants_answer_with_the_kernels_home(
    make_kernel: Callable[..., Kernel], home: Path, tmp_path: Path
) -> None:
    make_kernel()
    from hermes_constants import (
        get_default_hermes_root,
        get_hermes_home,
        hermes_home_key,
        profile_name_for_home,
    )

    assert get_hermes_home() == home
    root = get_default_hermes_root()
    assert isinstance(root, Path) and root == home
    # llm-logger uses it like this, outside any try.
    assert (get_default_hermes_root() / "config.yaml").resolve() == (home / "config.yaml").resolve()
    assert hermes_home_key() == os.path.normcase(str(home.resolve()))
    assert hermes_home_key(str(home / "x" / "..")) == hermes_home_key(home)
    assert profile_name_for_home() == "custom"
    assert profile_name_for_home(Path.home() / ".hermes") == "default"
    assert profile_name_for_home(tmp_path / "root" / "profiles" / "work") == "work"


def test_a_profile_home_has_its_root_above_the_profiles(
    make_kernel: Callable[..., Kernel], tmp_path: Path
) -> None:
    profile_home = tmp_path / "root" / "profiles" / "work"
    profile_home.mkdir(parents=True)
    make_kernel(home=profile_home)
    from hermes_constants import get_default_hermes_root, profile_name_for_home

    assert get_default_hermes_root() == tmp_path / "root"
    assert profile_name_for_home() == "work"


def test_without_a_kernel_the_home_is_hermes_home_then_dot_hermes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernel.compat.shims import hermes_cli_config, hermes_constants

    assert hermes_constants.get_hermes_home() == Path.home() / ".hermes"
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "h"))
    assert hermes_constants.get_hermes_home() == tmp_path / "h"
    assert hermes_cli_config.get_hermes_home() == tmp_path / "h"


def test_load_config_is_a_copy_of_the_kernels_config(make_kernel: Callable[..., Kernel], home: Path) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump({"image_gen": {"stepfun": {"model": "step-2x"}}}))
    k = make_kernel(config={"host": {"set": True}})
    from hermes_cli.config import cfg_get, load_config, load_config_readonly

    cfg = load_config()
    assert cfg == k.config
    assert cfg["image_gen"]["stepfun"]["model"] == "step-2x" and cfg["host"] == {"set": True}
    cfg["image_gen"]["stepfun"]["model"] = "changed"
    cfg["new"] = 1
    assert k.config["image_gen"]["stepfun"]["model"] == "step-2x" and "new" not in k.config
    readonly = load_config_readonly()
    readonly["image_gen"].clear()
    assert k.config["image_gen"] == {"stepfun": {"model": "step-2x"}}
    assert cfg_get(k.config, "image_gen.stepfun.model") == "step-2x"
    assert cfg_get(k.config, "image_gen", "stepfun", "model") == "step-2x"
    assert cfg_get(k.config, "image_gen.missing.model", default="d") == "d"
    assert cfg_get(None, "a") is None


def test_load_config_without_a_kernel_reads_the_file_safely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernel.compat.shims.hermes_cli_config import load_config

    env_home = tmp_path / "h"
    env_home.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(env_home))
    assert load_config() == {}
    (env_home / "config.yaml").write_text("model:\n  provider: acme\n")
    assert load_config() == {"model": {"provider": "acme"}}
    (env_home / "config.yaml").write_text("model: [unclosed\n")
    assert load_config() == {}
    (env_home / "config.yaml").write_text("!!python/object:os.system ls\n")
    assert load_config() == {}


def test_save_config_writes_atomically_and_the_kernel_follows(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump({"model": {"provider": "x"}}))
    (home / "config.yaml").chmod(0o640)
    k = make_kernel()
    from hermes_cli.config import load_config, save_config

    cfg = load_config()
    cfg.setdefault("plugins", {})["enabled"] = ["noisegate"]
    save_config(cfg)
    on_disk = yaml.safe_load((home / "config.yaml").read_text())
    assert on_disk == {"model": {"provider": "x"}, "plugins": {"enabled": ["noisegate"]}}
    assert (home / "config.yaml").stat().st_mode & 0o777 == 0o640
    assert k.config["plugins"] == {"enabled": ["noisegate"]}
    assert [p.name for p in home.iterdir() if p.name.endswith(".tmp")] == []

    before = (home / "config.yaml").read_text()
    with pytest.raises(ValueError, match="mapping"):
        save_config(["not", "a", "mapping"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="YAML"):
        save_config({"bad": object()})
    assert (home / "config.yaml").read_text() == before


def test_get_env_value_reads_the_environment_then_dot_env(
    make_kernel: Callable[..., Kernel], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_kernel()
    from hermes_cli.config import get_env_value

    monkeypatch.delenv("SHIM_FROM_FILE", raising=False)
    monkeypatch.delenv("SHIM_BOTH", raising=False)
    (home / ".env").write_text("SHIM_FROM_FILE=from-file\nSHIM_BOTH=file\n")
    assert get_env_value("SHIM_FROM_FILE") == "from-file"
    monkeypatch.setenv("SHIM_BOTH", "environment")
    assert get_env_value("SHIM_BOTH") == "environment"
    assert get_env_value("SHIM_NOT_SET_ANYWHERE") is None


def test_save_env_value_writes_dot_env(
    make_kernel: Callable[..., Kernel], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_kernel()
    from hermes_cli.config import get_env_value, save_env_value

    monkeypatch.delenv("SHIM_SAVED", raising=False)
    (home / ".env").write_text("# keep me\nOTHER=1\n")
    save_env_value("SHIM_SAVED", "a value with spaces")
    text = (home / ".env").read_text()
    assert "# keep me" in text and "OTHER=1" in text
    assert (home / ".env").stat().st_mode & 0o777 == 0o600
    assert os.environ["SHIM_SAVED"] == "a value with spaces"
    monkeypatch.delenv("SHIM_SAVED")
    assert get_env_value("SHIM_SAVED") == "a value with spaces"
    with pytest.raises(ValueError):
        save_env_value("BAD NAME", "x")
    with pytest.raises(ValueError):
        save_env_value("SHIM_MULTI", "two\nlines")


# --------------------------------------------------------------------------
# hermes_cli.plugins
# --------------------------------------------------------------------------

HOOKED = """
import hook_sink


def on_start(session_id, **kwargs):
    hook_sink.calls.append(("start", session_id))
    return "seen " + session_id


def guard(tool_name, args, task_id=None, tool_call_id=None, **kwargs):
    hook_sink.calls.append(("guard", tool_name, task_id, tool_call_id))
    if tool_name == "danger":
        return {"action": "block", "message": "danger is blocked"}
    return None


def hello(raw):
    return "hello " + raw


def register(ctx):
    ctx.register_hook("on_session_start", on_start)
    ctx.register_hook("pre_tool_call", guard)
    ctx.register_command("hello", hello, description="say hello", args_hint="<name>")
"""


def test_the_plugin_manager_view(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], sink: Any
) -> None:
    plugin_dir("hooked", HOOKED)
    k = make_kernel(load=False)
    compat.install(k)  # before load(), as a host that drives discovery through the manager would
    from hermes_cli import plugins as hp

    manager = hp.get_plugin_manager()
    assert manager.kernel is k
    assert k.plugins == []
    manager.discover_and_load()
    assert [p["name"] for p in manager.list_plugins()] == ["hooked"]
    assert manager.list_plugins()[0]["enabled"] is True

    assert manager.invoke_hook("on_session_start", session_id="s-9") == ["seen s-9"]
    assert hp.invoke_hook("on_session_start", session_id="s-10") == ["seen s-10"]
    assert sink.calls == [("start", "s-9"), ("start", "s-10")]

    hooks = manager._hooks
    assert [fn.__name__ for fn in hooks["pre_tool_call"]] == ["guard"]
    assert hooks["pre_tool_call"][0].__module__ == k._records["hooked"].module_name
    with pytest.raises(TypeError):
        hooks["new"] = []  # type: ignore[index]

    commands = hp.get_plugin_commands()
    assert set(commands) == {"hello"}
    assert commands["hello"]["description"] == "say hello" and commands["hello"]["plugin"] == "hooked"
    assert hp.get_plugin_command_handler("/hello")("there") == "hello there"
    assert hp.get_plugin_command_handler("nope") is None

    assert hp.resolve_pre_tool_block("danger", {"x": 1}, task_id="t", tool_call_id="c") == "danger is blocked"
    assert hp.resolve_pre_tool_block("safe", {}) is None
    assert ("guard", "danger", "t", "c") in sink.calls and ("guard", "safe", "", "") in sink.calls


def test_a_disabled_callback_leaves_the_hooks_view(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir(
        "flaky",
        """
        def boom(**kwargs):
            raise RuntimeError("broken")

        def register(ctx):
            ctx.register_hook("on_session_end", boom)
        """,
    )
    k = make_kernel()
    from hermes_cli.plugins import get_plugin_manager

    manager = get_plugin_manager()
    assert [fn.__name__ for fn in manager._hooks["on_session_end"]] == ["boom"]
    k.invoke_hook("on_session_end", session_id="s")
    assert "on_session_end" not in manager._hooks


def test_the_plugin_manager_without_a_kernel_raises() -> None:
    from kernel.compat.shims import hermes_cli_plugins

    with pytest.raises(RuntimeError, match="no hermes-kernel"):
        hermes_cli_plugins.get_plugin_manager()


def test_calls_answer_for_the_kernel_loading_the_plugin(
    make_kernel: Callable[..., Kernel], tmp_path: Path, plugin_dir: Callable[..., Path], sink: Any
) -> None:
    """Two live kernels: a plugin's module-level calls during its load go to its own kernel."""
    other_home = tmp_path / "other"
    other_home.mkdir()
    plugin_dir(
        "where",
        """
        import hook_sink
        from hermes_cli.config import get_hermes_home

        hook_sink.calls.append(get_hermes_home())

        def register(ctx):
            pass
        """,
    )
    first = make_kernel()
    make_kernel(home=other_home)
    assert sink.calls == [first.home]
    from hermes_constants import get_hermes_home

    # Outside a load, two kernels, no plugin of either calling: the process's home, not the latest kernel's.
    assert get_hermes_home() not in (first.home, other_home)


# --------------------------------------------------------------------------
# gateway.platforms.base / gateway.config
# --------------------------------------------------------------------------


def test_a_platform_adapter_round_trip(make_kernel: Callable[..., Kernel]) -> None:
    make_kernel()
    from gateway.config import Platform, PlatformConfig
    from gateway.platforms.base import BasePlatformAdapter, MessageEvent, MessageType, SendResult

    class EchoAdapter(BasePlatformAdapter):
        MAX_MESSAGE_LENGTH = 500

        def __init__(self, config: PlatformConfig) -> None:
            super().__init__(config, Platform("echo-chat"))
            self.sent: list[tuple[str, str, str | None]] = []

        async def connect(self, *, is_reconnect: bool = False) -> bool:
            self._mark_connected()
            return True

        async def disconnect(self) -> None:
            self._mark_disconnected()

        async def send(
            self,
            chat_id: str,
            content: str,
            reply_to: str | None = None,
            metadata: dict[str, Any] | None = None,
        ) -> SendResult:
            self.sent.append((chat_id, content, reply_to))
            return SendResult(success=True, message_id=f"m{len(self.sent)}")

    config = PlatformConfig.from_dict({"enabled": True, "token": "t", "room": "lobby"})
    assert config.enabled and config.token == "t" and config.extra == {"room": "lobby"}
    adapter = EchoAdapter(config)
    assert adapter.platform is Platform("echo-chat") and adapter.name == "echo-chat"
    assert adapter.max_message_length == 500

    def event(text: str, chat: str = "c1") -> MessageEvent:
        source = gateway_base.SessionSource(platform=adapter.platform, chat_id=chat, user_id="u1")
        return MessageEvent(text=text, message_type=MessageType.TEXT, source=source, message_id="7")

    async def scenario() -> list[Any]:
        out: list[Any] = [await adapter.connect(), adapter.is_connected]
        out.append(await adapter.handle_message(event("dropped")))  # no handler yet

        async def handler(ev: MessageEvent) -> str:
            return f"got {ev.text}"

        adapter.set_message_handler(handler)
        out.append(await adapter.handle_message(event("hi")))
        adapter.set_message_handler(lambda ev: None)
        out.append(await adapter.handle_message(event("quiet")))

        def broken(ev: MessageEvent) -> str:
            raise RuntimeError("handler bug")

        adapter.set_message_handler(broken)
        out.append(await adapter.handle_message(event("oops")))
        out.append(await adapter.get_chat_info("c1"))
        await adapter.send_typing("c1")
        await adapter.disconnect()
        out.append(adapter.is_connected)
        return out

    assert asyncio.run(scenario()) == [
        True,
        True,
        None,
        "got hi",
        None,
        None,
        {"id": "c1", "name": "c1", "type": "dm"},
        False,
    ]
    assert adapter.sent == [("c1", "got hi", "7")]


def test_the_seed_guides_minimal_adapter_can_be_built(make_kernel: Callable[..., Kernel]) -> None:
    make_kernel()
    from gateway.config import Platform, PlatformConfig
    from gateway.platforms.base import BasePlatformAdapter

    class MyPlatformAdapter(BasePlatformAdapter):
        async def connect(self) -> bool:  # type: ignore[override]
            return True

        async def send(self, chat_id: str, text: str) -> None:  # type: ignore[override]
            return None

        async def disconnect(self) -> None:
            return None

    adapter = MyPlatformAdapter(PlatformConfig(), "myplatform")
    assert adapter.platform is Platform("myplatform")
    assert adapter.max_message_length == BasePlatformAdapter.MAX_MESSAGE_LENGTH
    assert not adapter.is_connected
    with pytest.raises(TypeError):
        BasePlatformAdapter(PlatformConfig(), "x")  # type: ignore[abstract]


def test_platform_names() -> None:
    from kernel.gateway import Platform

    assert Platform("Telegram") is Platform.TELEGRAM
    assert Platform("irc-bridge") is Platform("irc-bridge")
    assert Platform("irc-bridge") == "irc-bridge" and str(Platform("irc-bridge")) == "irc-bridge"
    assert Platform.DISCORD.value == "discord"
    with pytest.raises(ValueError):
        Platform("")
    with pytest.raises(ValueError):
        Platform(3)  # type: ignore[arg-type]


def test_a_gateway_plugin_module_imports_with_the_shims(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir(
        "platforms/irc",
        """
        from gateway.config import Platform, PlatformConfig
        from gateway.platforms.base import BasePlatformAdapter, MessageEvent, MessageType, SendResult

        class IrcAdapter(BasePlatformAdapter):
            MAX_MESSAGE_LENGTH = 400

            def __init__(self, config: PlatformConfig):
                super().__init__(config, Platform("irc"))

            async def connect(self, *, is_reconnect=False):
                return False

            async def disconnect(self):
                pass

            async def send(self, chat_id, content, reply_to=None, metadata=None):
                return SendResult(success=False, error="offline")

        def register(ctx):
            ctx.register_hook("on_session_start", lambda **kw: None)
        """,
        manifest={"name": "irc", "kind": "platform", "version": "1"},
    )
    k = make_kernel()
    info = k.plugin("platforms/irc")
    assert info.enabled, info.error
    module = sys.modules[k._records["platforms/irc"].module_name]
    adapter = module.IrcAdapter(gateway_config.PlatformConfig(enabled=True))
    assert isinstance(adapter, gateway_base.BasePlatformAdapter)
    assert adapter.platform is gateway_config.Platform("irc") and adapter.max_message_length == 400
    result = asyncio.run(adapter.send("#chan", "hello"))
    assert result == gateway_base.SendResult(success=False, error="offline")


def test_a_provider_looked_up_during_load_before_its_plugin_is_reached_still_loads(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], sink: types.ModuleType
) -> None:
    """``aaa-looker`` (loaded first, alphabetically) asks for ``acme`` in register(): too early for it;
    the provider plugin is still imported once the load reaches it, not latched out for good."""
    plugin_dir(
        "model-providers/acme",
        ACME,
        manifest={"name": "acme-provider", "kind": "model-provider", "version": "1"},
    )
    plugin_dir(
        "aaa-looker",
        "import hook_sink\nfrom providers import get_provider_profile\n\n"
        "def register(ctx):\n"
        "    hook_sink.calls.append(get_provider_profile('acme'))\n",
    )
    k = make_kernel()
    assert sink.calls == [None]
    assert k.providers.get_provider_profile("acme").display_name == "Acme Inference"


# --------------------------------------------------------------------------
# agent.plugin_llm
# --------------------------------------------------------------------------

HERMES_LLM_PLUGIN = """
import hook_sink
from agent.plugin_llm import (
    PluginLlm,
    PluginLlmCompleteResult,
    PluginLlmImageInput,
    PluginLlmStructuredResult,
    PluginLlmTextInput,
    PluginLlmTrustError,
    PluginLlmUsage,
)

BUILT_AT_LOAD = []


def ask(args):
    result: PluginLlmCompleteResult = hook_sink.ctx.llm.complete(
        [{"role": "user", "content": args}], purpose="ask"
    )
    hook_sink.calls.append(("complete", isinstance(result, PluginLlmCompleteResult), result.text))
    hook_sink.calls.append(("usage", isinstance(result.usage, PluginLlmUsage), result.usage.total_tokens))
    try:
        hook_sink.ctx.llm.complete([{"role": "user", "content": args}], model="another-model")
    except PluginLlmTrustError as exc:
        hook_sink.calls.append(("refused", str(exc)))
    shaped = hook_sink.ctx.llm.complete_structured(
        instructions="Describe.",
        input=[
            PluginLlmTextInput(text="a picture:"),
            PluginLlmImageInput(data=b"PNGDATA", mime_type="image/png"),
            PluginLlmImageInput(url="https://example.invalid/a.png"),
        ],
        json_mode=True,
    )
    hook_sink.calls.append(("structured", isinstance(shaped, PluginLlmStructuredResult), shaped.parsed))
    hook_sink.calls.append(("facade", isinstance(hook_sink.ctx.llm, PluginLlm)))
    own = PluginLlm(plugin_id="somebody-else")
    text = own.complete([{"role": "user", "content": "x"}]).text
    hook_sink.calls.append(("own", own.plugin_id, BUILT_AT_LOAD[0].plugin_id, text))
    return "done"


def register(ctx):
    hook_sink.ctx = ctx
    BUILT_AT_LOAD.append(PluginLlm(plugin_id="borrowed-name"))
    ctx.register_command("ask", ask, description="ask the model")
"""


def user_model(server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The ``model`` section naming ``server``, with the checkout's bundled model providers."""
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(REPO / "extensions"))
    return {"provider": "openai-compatible", "model": "m1", "base_url": server.base_url, "api_key": "k-1"}


def chat_reply(text: str) -> Reply:
    body = {
        "id": "c1",
        "object": "chat.completion",
        "model": "m1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    return Reply(200, body)


def test_plugin_llm_names_are_what_ctx_llm_returns_and_raises(
    make_kernel: Callable[..., Kernel],
    plugin_dir: Callable[..., Path],
    sink: types.ModuleType,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Hermes plugin's type hints, isinstance checks and except clauses hold for ``ctx.llm``; the input
    dataclasses go out as the dict blocks do; a facade the plugin builds is its own, whatever id it gives."""
    plugin_dir("asker", HERMES_LLM_PLUGIN)
    with LocalServer() as server:
        server.program(chat_reply("pong"), chat_reply('{"seen": "a picture"}'), chat_reply("mine"))
        k = make_kernel(config={"model": user_model(server, monkeypatch)})
        assert k.plugin("asker").enabled, k.plugin("asker").error
        assert k.commands.run("/ask ping") == "done"
        structured = server.seen[1].json
    assert sink.calls[:3] == [("complete", True, "pong"), ("usage", True, 5), sink.calls[2]]
    assert (
        sink.calls[2][0] == "refused" and "plugins.entries.asker.llm.allow_model_override" in sink.calls[2][1]
    )
    assert sink.calls[3:] == [
        ("structured", True, {"seen": "a picture"}),
        ("facade", True),
        ("own", "asker", "asker", "mine"),
    ]
    assert structured["response_format"] == {"type": "json_object"}
    assert structured["messages"][-1]["content"][1:] == [
        {"type": "text", "text": "a picture:"},
        {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64," + base64.b64encode(b"PNGDATA").decode()},
        },
        {"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}},
    ]


def test_a_plugin_llm_built_by_host_code_answers_for_the_current_kernel(
    make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    with LocalServer() as server:
        server.program(chat_reply("from the host"))
        make_kernel(config={"model": user_model(server, monkeypatch)})
        from agent.plugin_llm import PluginLlm, PluginLlmCompleteResult, PluginLlmTrustError

        llm = PluginLlm(plugin_id="host-script")
        assert llm.plugin_id == "host-script" and isinstance(llm, PluginLlm)
        result = llm.complete([{"role": "user", "content": "hi"}])
        assert isinstance(result, PluginLlmCompleteResult) and result.text == "from the host"
        assert result.audit["plugin_id"] == "host-script"
        with pytest.raises(PluginLlmTrustError, match=r"plugins\.entries\.host-script\.llm\.allow_provider"):
            llm.complete([{"role": "user", "content": "hi"}], provider="elsewhere")


def _openai_response(text: str, **usage: int) -> types.SimpleNamespace:
    message = types.SimpleNamespace(content=text, role="assistant")
    return types.SimpleNamespace(
        choices=[types.SimpleNamespace(message=message)], usage=types.SimpleNamespace(**usage), model="fake"
    )


def test_make_plugin_llm_for_test_answers_from_the_callers_with_the_policy() -> None:
    """What plugin test suites do: a facade with a fake caller and a policy; no kernel, no config."""
    from kernel.compat.shims.agent_plugin_llm import (
        PluginLlmStructuredResult,
        PluginLlmTextInput,
        PluginLlmTrustError,
        _TrustPolicy,
        make_plugin_llm_for_test,
    )

    calls: list[dict[str, Any]] = []

    def caller(**kwargs: Any) -> tuple[str, str, Any]:
        calls.append(kwargs)
        model = kwargs["model_override"] or "fake-model"
        return (
            "openai",
            model,
            _openai_response('```json\n{"n": 3}\n```', prompt_tokens=4, completion_tokens=6),
        )

    async def async_caller(**kwargs: Any) -> tuple[str, str, Any]:
        return "openai", "async-model", _openai_response("awaited", total_tokens=9)

    policy = _TrustPolicy(
        plugin_id="anansi", allow_model_override=True, allowed_models=frozenset({"small-m"})
    )
    llm = make_plugin_llm_for_test(
        plugin_id="anansi", policy=policy, sync_caller=caller, async_caller=async_caller
    )
    result = llm.complete([{"role": "user", "content": "count"}], model=" Small-M ", purpose="count")
    assert (result.text, result.provider, result.model, result.agent_id) == (
        '```json\n{"n": 3}\n```',
        "openai",
        "Small-M",
        "default",
    )
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.total_tokens) == (4, 6, 10)
    assert result.audit == {"plugin_id": "anansi", "purpose": "count", "profile": ""}
    assert calls[0] == {
        "messages": [{"role": "user", "content": "count"}],
        "provider_override": None,
        "model_override": "Small-M",
        "profile_override": None,
        "temperature": None,
        "max_tokens": None,
        "timeout": None,
        "extra_body": None,
    }
    with pytest.raises(PluginLlmTrustError, match=r"not in plugins\.entries\.anansi\.llm\.allowed_models"):
        llm.complete([{"role": "user", "content": "x"}], model="big-m")
    with pytest.raises(PluginLlmTrustError, match=r"plugins\.entries\.anansi\.llm\.allow_provider_override"):
        llm.complete([{"role": "user", "content": "x"}], provider="other")

    shaped = llm.complete_structured(
        instructions="Count.",
        input=[PluginLlmTextInput(text="one two three")],
        json_mode=True,
        schema_name="n",
    )
    assert isinstance(shaped, PluginLlmStructuredResult)
    assert shaped.parsed == {"n": 3} and shaped.content_type == "json" and shaped.audit["schema_name"] == "n"
    assert calls[-1]["extra_body"] == {"response_format": {"type": "json_object"}}
    assert calls[-1]["messages"][-1]["content"][-1] == {"type": "text", "text": "one two three"}
    plain = llm.complete_structured(instructions="Count.", input=[{"type": "text", "text": "x"}])
    assert plain.parsed is None and plain.content_type == "text"

    awaited = asyncio.run(llm.acomplete([{"role": "user", "content": "x"}]))
    assert (awaited.text, awaited.model, awaited.usage.total_tokens) == ("awaited", "async-model", 9)
    assert len(calls) == 3  # the async call went to the async caller


def test_a_test_facade_whose_caller_returns_garbage_says_what_it_needs() -> None:
    from kernel.compat.shims.agent_plugin_llm import PluginLlmError, _TrustPolicy, make_plugin_llm_for_test

    llm = make_plugin_llm_for_test(plugin_id="p", policy=_TrustPolicy("p"), sync_caller=lambda **kw: "text")
    with pytest.raises(PluginLlmError, match=r"must return \(provider, model, response\), not str"):
        llm.complete([{"role": "user", "content": "x"}])
    odd = make_plugin_llm_for_test(
        plugin_id="p", policy=_TrustPolicy("p"), sync_caller=lambda **kw: ("a", "b", {"choices": []})
    )
    assert odd.complete([{"role": "user", "content": "x"}]).text == ""


def test_plugin_llm_input_blocks_read_as_dicts() -> None:
    from kernel.compat.shims.agent_plugin_llm import PluginLlmImageInput, PluginLlmTextInput

    assert dict(PluginLlmTextInput(text="hi")) == {"type": "text", "text": "hi"}
    image = PluginLlmImageInput(data=b"x", file_name="a.png")
    assert dict(image) == {"type": "image", "mime_type": "image/png", "file_name": "a.png", "data": b"x"}
    assert image == PluginLlmImageInput(data=b"x", file_name="a.png") and image.url is None
    assert PluginLlmImageInput(url="https://x/y.png")["url"] == "https://x/y.png"
