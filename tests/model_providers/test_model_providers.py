"""Model providers end to end: lazy discovery of provider plugins, the catalog's override and conflict
rules, the bundled ``openai-compatible`` and ``scripted`` profiles, and ``k.providers.model()``
against a real chat-completions server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import textwrap
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, cli_env, run_json, write_plugin
from local_server import LocalServer, Reply

from kernel import Kernel
from kernel.providers import ProviderLookupError
from kernel.providers.manager import ProviderSelectionError, ProviderStatus
from kernel.providers.scripted import ScriptedTransport
from kernel.providers.transport import ChatCompletionsTransport, ProviderError

BUNDLED_PROVIDERS = REPO / "extensions" / "model-providers"
DEMO_SCRIPT = BUNDLED_PROVIDERS / "scripted" / "demo.yaml"
API_KEY = "sk-test-model-providers-0042"
USER = [{"role": "user", "content": "What is 2**16?"}]


@pytest.fixture(autouse=True)
def no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's own OpenAI settings must not leak into these tests."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ACME_API_KEY", "ACME_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def bundled_providers(bundled: Path) -> Path:
    """The bundled dir holding a copy of the real ``extensions/model-providers`` (and nothing else)."""
    shutil.copytree(BUNDLED_PROVIDERS, bundled / "model-providers")
    return bundled


def provider_code(profile: str, marker: Path | None = None, tag: str = "", extra: str = "") -> str:
    """A provider plugin's ``__init__.py``: optionally appends ``tag`` to ``marker`` when imported."""
    lines = ["from kernel.providers import ProviderProfile, register_provider"]
    if marker is not None:
        lines.append(f"with open({str(marker)!r}, 'a', encoding='utf-8') as fh:")
        lines.append(f"    fh.write({tag!r} + '\\n')")
    lines.append(extra)
    lines.append(f"register_provider({profile})")
    return "\n".join(lines) + "\n"


def imports(marker: Path) -> list[str]:
    return marker.read_text(encoding="utf-8").splitlines() if marker.exists() else []


PROVIDER_MANIFEST = {"name": "acme", "version": "1.0.0", "kind": "model-provider"}


# --------------------------------------------------------------------------
# A chat-completions server on 127.0.0.1
# --------------------------------------------------------------------------


def chat_body(
    text: str | None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    usage: dict[str, int] | None = None,
    model: str = "served-m1",
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
        "usage": usage or {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


@pytest.fixture(scope="module")
def _server() -> Iterator[LocalServer]:
    with LocalServer(default=Reply(418, {"error": {"message": "no reply programmed"}})) as server:
        yield server


@pytest.fixture
def server(_server: LocalServer) -> Iterator[LocalServer]:
    _server.reset()
    yield _server
    _server.reset()


def openai_config(server: LocalServer, **extra: Any) -> dict[str, Any]:
    model = {"provider": "openai-compatible", "model": "m1", "base_url": server.base_url, "api_key": API_KEY}
    model.update(extra)
    return {"model": model}


# --------------------------------------------------------------------------
# Lazy discovery
# --------------------------------------------------------------------------


@pytest.mark.parametrize("first", ["get_provider_profile", "list_providers"])
def test_provider_plugins_are_imported_on_the_first_lookup_and_only_once(
    first: str, make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], tmp_path: Path
) -> None:
    marker = tmp_path / "imports.txt"
    plugin_dir(
        "model-providers/acme",
        provider_code("ProviderProfile(name='acme', base_url='http://127.0.0.1:9/v1')", marker, "acme"),
        manifest=PROVIDER_MANIFEST,
    )
    # A flat user plugin is a provider plugin by its manifest's kind alone.
    plugin_dir(
        "flat-acme",
        provider_code("ProviderProfile(name='flat-acme', base_url='http://127.0.0.1:9/v1')", marker, "flat"),
        manifest={"name": "flat-acme", "version": "0.1.0", "kind": "model-provider"},
    )
    k = make_kernel()
    assert imports(marker) == [], "provider plugins must not be imported at load()"
    for name in ("model-providers/acme", "flat-acme"):
        info = k.plugin(name)
        assert info is not None and info.deferred is True, info
        assert info.enabled is True and info.error is None, info
        assert info.kind == "model-provider"
    k.load()  # idempotent, still nothing imported
    assert imports(marker) == []

    if first == "get_provider_profile":
        assert k.providers.get_provider_profile("acme").base_url == "http://127.0.0.1:9/v1"
    else:
        assert [p.name for p in k.providers.list_providers()] == ["acme", "flat-acme"]
    assert sorted(imports(marker)) == ["acme", "flat"]
    for name in ("model-providers/acme", "flat-acme"):
        info = k.plugin(name)
        assert info is not None and info.deferred is False and info.enabled and info.error is None, info

    for _ in range(3):
        k.providers.get_provider_profile("flat-acme")
        k.providers.list_providers()
        k.providers.catalog.entries()
    assert sorted(imports(marker)) == ["acme", "flat"], "each provider plugin is imported exactly once"
    assert k.providers.catalog.entry("acme").plugin == "model-providers/acme"
    assert k.providers.catalog.entry("flat-acme").plugin == "flat-acme"
    assert k.providers.catalog.entry("acme").source == "user"


def test_other_plugins_are_imported_at_load_but_provider_plugins_are_not(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], tmp_path: Path
) -> None:
    marker = tmp_path / "imports.txt"
    plugin_dir(
        "ordinary",
        f"with open({str(marker)!r}, 'a') as fh:\n    fh.write('ordinary\\n')\n"
        "def register(ctx):\n    pass\n",
    )
    plugin_dir("model-providers/acme", provider_code("ProviderProfile(name='acme')", marker, "acme"))
    k = make_kernel()
    assert imports(marker) == ["ordinary"]
    # Under a model-providers/ folder the manifest does not even need the kind.
    info = k.plugin("model-providers/acme")
    assert info is not None and info.deferred is True
    k.providers.get_provider_profile("acme")
    assert imports(marker) == ["ordinary", "acme"]
    info = k.plugin("model-providers/acme")
    assert info is not None and info.enabled and info.error is None, info


def test_the_first_lookup_loads_a_kernel_that_was_never_loaded(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir(
        "model-providers/acme",
        provider_code("ProviderProfile(name='acme', base_url='http://127.0.0.1:9/v1', env_vars=())"),
    )
    k = make_kernel(config={"model": {"provider": "acme", "model": "m"}}, load=False)
    assert k.providers.get_provider_profile("acme").name == "acme"
    assert [p.name for p in k.plugins] == ["model-providers/acme"]
    # The configured provider exists, so the kernel must not record a problem about it.
    assert not [p for p in k.problems if "model.provider" in p], k.problems
    assert k.providers.problems() == []


def test_bundled_profiles_are_offered_by_the_bundled_plugins(
    bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel()
    for name in ("model-providers/openai-compatible", "model-providers/scripted"):
        info = k.plugin(name)
        assert info is not None, [p.name for p in k.plugins]
        assert info.source == "bundled" and info.kind == "model-provider" and info.deferred, info
    assert [p.name for p in k.providers.list_providers()] == ["openai-compatible", "scripted"]
    for name in ("model-providers/openai-compatible", "model-providers/scripted"):
        info = k.plugin(name)
        assert info is not None and info.enabled and info.error is None and info.warnings == [], info

    openai = k.providers.get_provider_profile("openai-compatible")
    assert openai.api_mode == "chat_completions"
    assert openai.env_vars == ("OPENAI_API_KEY", "OPENAI_BASE_URL")
    assert openai.base_url == "", "no default URL: nothing goes to a server the user did not name"
    # A local server needs no key: with a URL it is available without one.
    assert openai.availability({"base_url": "http://127.0.0.1:8080/v1"}, environ={}) == (True, "")
    ok, reason = openai.availability({}, environ={})
    assert not ok and "base_url" in reason
    assert openai.availability({}, environ={"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}) == (True, "")
    hosted = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "https://api.openai.com/v1"}
    assert openai.credentials({}, environ=hosted) == ("k", "https://api.openai.com/v1")
    # OPENAI_API_KEY is OpenAI's: another host gets only a key configured for it.
    local = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://h/v1"}
    assert openai.credentials({}, environ=local) == (None, "http://h/v1")
    assert openai.credentials({"api_key_env": "OPENAI_API_KEY"}, environ=local) == ("k", "http://h/v1")

    scripted = k.providers.get_provider_profile("scripted")
    assert scripted.api_mode == "scripted"
    assert scripted.availability({}, environ={}) == (True, "")


@pytest.mark.parametrize("alias", ["OpenAI-Compatible", "ollama", "OLLAMA", "vLLM", "llama.cpp", "Local"])
def test_aliases_of_the_bundled_openai_compatible_profile(
    alias: str, bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel()
    assert k.providers.get_provider_profile(alias).name == "openai-compatible"


def test_aliases_and_names_resolve_case_insensitively(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir(
        "model-providers/acme",
        provider_code("ProviderProfile(name='Acme', aliases=('Acme-Inference', 'ai'))"),
    )
    k = make_kernel()
    profile = k.providers.get_provider_profile("acme")
    assert profile.name == "Acme"
    for name in ("ACME", "acme-inference", "ACME-INFERENCE", "Ai"):
        assert k.providers.get_provider_profile(name) is profile
    assert k.providers.catalog.entry("AI").plugin == "model-providers/acme"


def test_an_unknown_name_raises_a_lookup_error_listing_the_names(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir("model-providers/acme", provider_code("ProviderProfile(name='acme')"))
    plugin_dir("model-providers/zed", provider_code("ProviderProfile(name='zed', aliases=('z',))"))
    k = make_kernel()
    with pytest.raises(ProviderLookupError) as caught:
        k.providers.get_provider_profile("nope")
    assert isinstance(caught.value, LookupError)
    message = str(caught.value)
    assert "'nope'" in message and "acme, zed" in message, message


def test_an_empty_catalog_says_none(make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    assert k.providers.list_providers() == []
    with pytest.raises(ProviderLookupError, match=r"available: none"):
        k.providers.get_provider_profile("anything")


def test_a_user_profile_overrides_a_bundled_one_of_the_same_name(
    bundled: Path, make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], tmp_path: Path
) -> None:
    marker = tmp_path / "imports.txt"
    write_plugin(
        bundled,
        "model-providers/acme",
        provider_code(
            "ProviderProfile(name='acme', base_url='http://bundled.invalid/v1')", marker, "bundled"
        ),
        manifest=PROVIDER_MANIFEST,
    )
    plugin_dir(
        "model-providers/my-acme",
        provider_code("ProviderProfile(name='ACME', base_url='http://user.invalid/v1')", marker, "user"),
        manifest={**PROVIDER_MANIFEST, "name": "my-acme"},
    )
    k = make_kernel()
    profile = k.providers.get_provider_profile("acme")
    assert profile.base_url == "http://user.invalid/v1"
    entry = k.providers.catalog.entry("acme")
    assert entry.plugin == "model-providers/my-acme" and entry.source == "user"
    # Bundled ones are imported first, so the user's replaces it (no conflict, no warning).
    assert imports(marker) == ["bundled", "user"]
    assert [p.name for p in k.providers.list_providers()] == ["ACME"]
    for name in ("model-providers/acme", "model-providers/my-acme"):
        info = k.plugin(name)
        assert info is not None and info.enabled and info.warnings == [], info


def test_a_user_plugin_in_the_same_folder_replaces_the_bundled_plugin(
    bundled: Path, make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], tmp_path: Path
) -> None:
    marker = tmp_path / "imports.txt"
    write_plugin(
        bundled,
        "model-providers/acme",
        provider_code(
            "ProviderProfile(name='acme', base_url='http://bundled.invalid/v1')", marker, "bundled"
        ),
    )
    plugin_dir(
        "model-providers/acme",
        provider_code("ProviderProfile(name='acme', base_url='http://user.invalid/v1')", marker, "user"),
    )
    k = make_kernel()
    assert k.providers.get_provider_profile("acme").base_url == "http://user.invalid/v1"
    assert imports(marker) == ["user"], "the overridden bundled plugin is never imported"
    info = k.plugin("model-providers/acme")
    assert info is not None and info.source == "user"
    assert any(o.startswith("bundled: ") for o in info.overrides), info.overrides


def test_a_user_plugin_overrides_the_bundled_openai_compatible_profile(
    bundled_providers: Path, make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir(
        "model-providers/my-openai",
        provider_code(
            "ProviderProfile(name='openai-compatible', base_url='http://127.0.0.1:9/v1', auth_type='none')"
        ),
    )
    k = make_kernel()
    entry = k.providers.catalog.entry("openai-compatible")
    assert entry.plugin == "model-providers/my-openai"
    assert entry.profile.base_url == "http://127.0.0.1:9/v1"
    # The bundled aliases went with the bundled profile.
    with pytest.raises(ProviderLookupError):
        k.providers.get_provider_profile("ollama")


def test_two_user_plugins_offering_one_name_the_first_keeps_it_and_the_second_is_warned(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir(
        "model-providers/beta",
        provider_code("ProviderProfile(name='dup', base_url='http://b/v1')"),
        manifest={**PROVIDER_MANIFEST, "name": "beta"},
    )
    plugin_dir(
        "model-providers/Alpha",
        provider_code("ProviderProfile(name='DUP', base_url='http://a/v1')"),
        manifest={**PROVIDER_MANIFEST, "name": "Alpha"},
    )
    k = make_kernel()
    assert k.providers.get_provider_profile("dup").base_url == "http://a/v1"
    assert k.providers.catalog.entry("dup").plugin == "model-providers/Alpha"
    first = k.plugin("model-providers/Alpha")
    second = k.plugin("model-providers/beta")
    assert first is not None and first.enabled and first.warnings == [], first
    assert second is not None and second.enabled and second.error is None, second
    joined = " ".join(second.warnings)
    assert "model-providers/Alpha" in joined and "model-providers/beta" in joined and "dup" in joined, (
        second.warnings
    )
    assert any("model-providers/beta" in p for p in k.providers.catalog.problems)


def test_a_provider_plugin_whose_import_raises_is_listed_with_the_error(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir(
        "model-providers/broken",
        "from kernel.providers import ProviderProfile, register_provider\n"
        "register_provider(ProviderProfile(name='half-done'))\n"
        "raise RuntimeError('boom at import')\n",
    )
    plugin_dir("model-providers/good", provider_code("ProviderProfile(name='good')"))
    k = make_kernel()
    assert [p.name for p in k.providers.list_providers()] == ["good"], (
        "a plugin that failed to import contributes nothing"
    )
    broken = k.plugin("model-providers/broken")
    assert broken is not None
    assert broken.enabled is False and broken.deferred is False
    assert broken.error is not None and "boom at import" in broken.error, broken.error
    good = k.plugin("model-providers/good")
    assert good is not None and good.enabled and good.error is None
    assert "model-providers/broken" in [p.name for p in k.plugins]


def test_a_provider_plugin_offering_something_else_gets_a_warning(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir(
        "model-providers/odd",
        "from kernel.providers import register_provider\nregister_provider({'name': 'not-a-profile'})\n",
    )
    k = make_kernel()
    assert k.providers.list_providers() == []
    info = k.plugin("model-providers/odd")
    assert info is not None
    assert any("not a ProviderProfile" in w for w in info.warnings), info.warnings


SLOT_HOOK_MANIFEST = {"version": "0.1.0", "provides_hooks": ["register_model_providers"]}


def test_profiles_offered_through_the_slot_hook_and_the_context(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir(
        "hooked",
        """
        from kernel import hookimpl
        from kernel.providers import ProviderProfile

        @hookimpl
        def register_model_providers(register):
            register(ProviderProfile(name="via-hook", base_url="http://127.0.0.1:9/v1"))
        """,
        manifest=SLOT_HOOK_MANIFEST | {"name": "hooked"},
    )
    plugin_dir(
        "contextual",
        """
        from kernel.providers import ProviderProfile

        def register(ctx):
            ctx.register_model_provider(ProviderProfile(name="via-ctx", aliases=("vc",)))
        """,
    )
    plugin_dir(
        "hermes-hooked",
        """
        from kernel.providers import ProviderProfile

        def offer(register):
            register(ProviderProfile(name="via-register-hook"))

        def register(ctx):
            ctx.register_hook("register_model_providers", offer)
        """,
        manifest=SLOT_HOOK_MANIFEST | {"name": "hermes-hooked"},
    )
    k = make_kernel()
    names = [p.name for p in k.providers.list_providers()]
    assert names == ["via-ctx", "via-hook", "via-register-hook"]
    assert k.providers.catalog.entry("via-hook").plugin == "hooked"
    assert k.providers.catalog.entry("vc").plugin == "contextual"
    assert k.providers.catalog.entry("via-register-hook").plugin == "hermes-hooked"
    for name in ("hooked", "contextual", "hermes-hooked"):
        info = k.plugin(name)
        assert info is not None and info.enabled and info.warnings == [], info


def test_a_deferred_provider_plugin_may_use_the_context_or_the_slot_hook(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir(
        "model-providers/ctx-style",
        """
        from kernel.providers import ProviderProfile

        def register(ctx):
            ctx.register_model_provider(ProviderProfile(name="deferred-ctx"))
        """,
        manifest={"name": "ctx-style", "version": "0.1.0", "kind": "model-provider"},
    )
    plugin_dir(
        "model-providers/hook-style",
        """
        from kernel import hookimpl
        from kernel.providers import ProviderProfile

        @hookimpl
        def register_model_providers(register):
            register(ProviderProfile(name="deferred-hook"))
        """,
        manifest=SLOT_HOOK_MANIFEST | {"name": "hook-style", "kind": "model-provider"},
    )
    k = make_kernel()
    assert k.plugin("model-providers/ctx-style").deferred  # type: ignore[union-attr]
    assert [p.name for p in k.providers.list_providers()] == ["deferred-ctx", "deferred-hook"]
    assert k.providers.catalog.entry("deferred-ctx").plugin == "model-providers/ctx-style"
    assert k.providers.catalog.entry("deferred-hook").plugin == "model-providers/hook-style"
    for name in ("model-providers/ctx-style", "model-providers/hook-style"):
        info = k.plugin(name)
        assert info is not None and info.enabled and info.warnings == [], info


def test_unregistering_a_plugin_removes_its_profiles(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir(
        "contextual",
        "from kernel.providers import ProviderProfile\n"
        "def register(ctx):\n    ctx.register_model_provider(ProviderProfile(name='gone-soon'))\n",
    )
    k = make_kernel()
    assert k.providers.get_provider_profile("gone-soon").name == "gone-soon"
    k.unregister("contextual")
    with pytest.raises(ProviderLookupError):
        k.providers.get_provider_profile("gone-soon")


# --------------------------------------------------------------------------
# The module-level functions (the process-wide default catalog)
# --------------------------------------------------------------------------

DEFAULT_CATALOG_SCRIPT = """
import json
from kernel.providers import (
    ProviderLookupError, ProviderProfile, get_provider_profile, list_providers, register_provider,
)
from kernel.providers.registry import default_catalog

out = {"names": [p.name for p in list_providers()]}
out["ollama"] = get_provider_profile("Ollama").name
out["plugin"] = default_catalog().entry("user-acme").plugin
try:
    get_provider_profile("missing")
except ProviderLookupError as exc:
    out["missing"] = str(exc)
register_provider(ProviderProfile(name="direct", base_url="http://127.0.0.1:9/v1"))
out["direct"] = [get_provider_profile("direct").base_url, default_catalog().entry("direct").plugin]
print(json.dumps(out))
"""


def test_module_level_functions_use_the_default_catalog_of_hermes_home(home: Path) -> None:
    write_plugin(
        home / "plugins",
        "model-providers/user-acme",
        provider_code("ProviderProfile(name='user-acme', base_url='http://127.0.0.1:9/v1')"),
    )
    # HERMES_BUNDLED_PLUGINS unset: the checkout's extensions/ are the bundled plugins.
    env = cli_env(home)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(DEFAULT_CATALOG_SCRIPT)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    out = run_json(proc.stdout.strip().splitlines()[-1])
    assert {"openai-compatible", "scripted", "user-acme"} <= set(out["names"]), out["names"]
    assert out["names"] == sorted(out["names"], key=str.casefold)
    assert out["ollama"] == "openai-compatible"
    assert out["plugin"] == "model-providers/user-acme"
    assert "'missing'" in out["missing"] and "openai-compatible" in out["missing"]
    assert out["direct"] == ["http://127.0.0.1:9/v1", "(direct)"]


# --------------------------------------------------------------------------
# k.providers.model(): openai-compatible against a real local server
# --------------------------------------------------------------------------

HOOK_RECORDER = """
import hook_sink

def register(ctx):
    ctx.register_hook("pre_api_request", lambda **kw: hook_sink.calls.append(("pre", kw)))
    ctx.register_hook("post_api_request", lambda **kw: hook_sink.calls.append(("post", kw)))
    ctx.register_hook("api_request_error", lambda **kw: hook_sink.calls.append(("error", kw)))
"""

CALCULATE_TOOL = {
    "name": "calculate",
    "description": "Evaluate a math expression.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
}


def test_model_talks_to_the_configured_endpoint(
    server: LocalServer,
    bundled_providers: Path,
    make_kernel: Callable[..., Kernel],
    plugin_dir: Callable[..., Path],
    sink: types.ModuleType,
) -> None:
    plugin_dir("recorder", HOOK_RECORDER)
    k = make_kernel(config=openai_config(server))
    client = k.providers.model()
    assert isinstance(client, ChatCompletionsTransport)
    assert client.provider == "openai-compatible" and client.model == "m1"
    assert k.providers.model() is client, "the client is built once per configuration"

    tool_call = {
        "id": "call_9",
        "type": "function",
        "function": {"name": "calculate", "arguments": '{"expression": "2**16"}'},
    }
    server.program(
        Reply(
            body=chat_body(None, tool_calls=[tool_call], usage={"prompt_tokens": 20, "completion_tokens": 5})
        ),
        Reply(body=chat_body("2**16 is 65536.", usage={"prompt_tokens": 30, "completion_tokens": 6})),
    )
    first = client.complete(USER, tools=[CALCULATE_TOOL], session_id="s1", task_id="t1")
    assert first.text == ""
    assert [(c.id, c.name, c.parsed()) for c in first.tool_calls] == [
        ("call_9", "calculate", {"expression": "2**16"})
    ]
    assert first.finish_reason == "tool_calls"
    assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.total_tokens) == (20, 5, 25)

    conversation = [
        *USER,
        first.as_message(),
        {"role": "tool", "tool_call_id": "call_9", "content": '{"result": 65536}'},
    ]
    second = client.complete(conversation, session_id="s1", task_id="t1")
    assert second.text == "2**16 is 65536."
    assert second.tool_calls == []
    assert (second.usage.input_tokens, second.usage.output_tokens, second.usage.total_tokens) == (30, 6, 36)
    assert second.provider == "openai-compatible" and second.model == "served-m1"

    assert [r.path for r in server.seen] == ["/v1/chat/completions"] * 2
    for request in server.seen:
        assert request.headers["authorization"] == f"Bearer {API_KEY}"
        assert request.json["model"] == "m1"
    assert server.seen[0].json["messages"] == USER
    assert server.seen[0].json["tools"] == [{"type": "function", "function": CALCULATE_TOOL}]
    assert server.seen[1].json["messages"][1]["tool_calls"][0]["function"]["name"] == "calculate"

    kinds = [kind for kind, _ in sink.calls]
    assert kinds == ["pre", "post", "pre", "post"]
    pre, post = sink.calls[0][1], sink.calls[1][1]
    assert pre["provider"] == "openai-compatible" and pre["model"] == "m1"
    assert pre["base_url"] == server.base_url and pre["api_mode"] == "chat_completions"
    assert pre["session_id"] == "s1" and pre["task_id"] == "t1"
    assert pre["request_messages"] == USER
    assert post["api_request_id"] == pre["api_request_id"]
    assert post["usage"]["input_tokens"] == 20 and post["usage"]["output_tokens"] == 5
    assert post["response"]["choices"][0]["message"]["tool_calls"][0]["id"] == "call_9"
    assert API_KEY not in json.dumps([kw for _, kw in sink.calls], default=str), "hooks never see the key"


def test_model_async_complete(
    server: LocalServer, bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel(config=openai_config(server))
    server.program(Reply(body=chat_body("async hello")))
    result = asyncio.run(k.providers.model().acomplete(USER))
    assert result.text == "async hello"
    assert server.seen[0].headers["authorization"] == f"Bearer {API_KEY}"


def test_key_and_url_come_from_the_environment_when_the_config_has_none(
    server: LocalServer,
    bundled_providers: Path,
    make_kernel: Callable[..., Kernel],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOCAL_SERVER_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    # The key of a local server comes from a variable the config names (OPENAI_API_KEY is OpenAI's
    # and never goes to 127.0.0.1: tests/adversarial/test_key_destination.py).
    model = {"provider": "openai-compatible", "model": "env-model", "api_key_env": "LOCAL_SERVER_KEY"}
    k = make_kernel(config={"model": model})
    server.program(Reply(body=chat_body("from env")))
    assert k.providers.model().complete(USER).text == "from env"
    request = server.seen[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-from-env"
    assert request.json["model"] == "env-model"


def test_the_config_overrides_the_environment(
    server: LocalServer,
    bundled_providers: Path,
    make_kernel: Callable[..., Kernel],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/not-this-one")
    k = make_kernel(config=openai_config(server))
    server.program(Reply(body=chat_body("config wins")))
    assert k.providers.model().complete(USER).text == "config wins"
    assert server.seen[0].headers["authorization"] == f"Bearer {API_KEY}"


def test_a_local_server_needs_no_key(
    server: LocalServer, bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel(config={"model": {"provider": "ollama", "model": "llama3", "base_url": server.base_url}})
    server.program(Reply(body=chat_body("no key needed")))
    result = k.providers.model().complete(USER)
    assert result.text == "no key needed" and result.provider == "openai-compatible"
    assert "authorization" not in server.seen[0].headers


def test_the_config_file_in_the_home_selects_the_provider(
    server: LocalServer, bundled_providers: Path, home: Path, make_kernel: Callable[..., Kernel]
) -> None:
    (home / "config.yaml").write_text(
        yaml.safe_dump({"model": {"provider": "vllm", "model": "from-file", "base_url": server.base_url}}),
        encoding="utf-8",
    )
    k = make_kernel()
    server.program(Reply(body=chat_body("file config")))
    assert k.providers.model().complete(USER).text == "file config"
    assert server.seen[0].json["model"] == "from-file"


def test_a_changed_config_builds_a_new_client(
    server: LocalServer, bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel(config=openai_config(server))
    first = k.providers.model()
    assert k.providers.model() is first
    k.config["model"]["model"] = "m2"
    second = k.providers.model()
    assert second is not first and second.model == "m2"
    assert k.providers.model() is second
    server.program(Reply(body=chat_body("from m2")))
    assert second.complete(USER).text == "from m2"
    assert server.seen[0].json["model"] == "m2"


def test_timeout_and_max_retries_come_from_the_config(
    server: LocalServer, bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel(config=openai_config(server, timeout=7.5, max_retries=1))
    client = k.providers.model()
    assert client.timeout == 7.5 and client.max_retries == 1
    overloaded = Reply(503, {"error": {"message": "overloaded"}}, {"Retry-After": "0"})
    server.program(overloaded, overloaded, overloaded)
    with pytest.raises(ProviderError) as caught:
        client.complete(USER)
    assert caught.value.status_code == 503 and "overloaded" in str(caught.value)
    assert len(server.seen) == 2, "max_retries: 1 means one retry"


def test_a_client_error_is_not_retried(
    server: LocalServer, bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel(config=openai_config(server, api_key="sk-wrong"))
    server.program(Reply(401, {"error": {"message": "invalid key sk-wrong"}}))
    with pytest.raises(ProviderError) as caught:
        k.providers.model().complete(USER)
    assert caught.value.status_code == 401
    assert "sk-wrong" not in str(caught.value), "the key is masked even when the server echoes it"
    assert len(server.seen) == 1


def test_no_provider_configured(bundled_providers: Path, make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel()
    with pytest.raises(ProviderSelectionError, match=r"no model provider configured.*model\.provider"):
        k.providers.model()


def test_an_unknown_configured_provider(bundled_providers: Path, make_kernel: Callable[..., Kernel]) -> None:
    k = make_kernel(config={"model": {"provider": "nope", "model": "m"}})
    with pytest.raises(ProviderSelectionError) as caught:
        k.providers.model()
    assert isinstance(caught.value, ValueError)
    message = str(caught.value)
    assert "'nope'" in message and "openai-compatible, scripted" in message, message


def test_openai_compatible_without_a_base_url_is_unavailable(
    bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel(config={"model": {"provider": "openai-compatible", "model": "m1", "api_key": API_KEY}})
    with pytest.raises(ProviderSelectionError) as caught:
        k.providers.model()
    message = str(caught.value)
    assert "'openai-compatible' is not available" in message and "base_url" in message, message


def test_openai_compatible_without_a_model_name(
    server: LocalServer, bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel(config={"model": {"provider": "openai-compatible", "base_url": server.base_url}})
    with pytest.raises(ProviderSelectionError, match=r"model\.model"):
        k.providers.model()


def test_a_key_requiring_profile_without_a_key_is_unavailable(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin_dir(
        "model-providers/acme",
        provider_code(
            "ProviderProfile(name='acme', env_vars=('ACME_API_KEY', 'ACME_BASE_URL'), "
            "base_url='http://127.0.0.1:9/v1', auth_type='api_key')"
        ),
    )
    k = make_kernel(config={"model": {"provider": "acme", "model": "m"}})
    with pytest.raises(ProviderSelectionError, match=r"no API key \(set ACME_API_KEY"):
        k.providers.model()
    monkeypatch.setenv("ACME_API_KEY", "sk-acme")
    assert k.providers.model().model == "m"


def test_model_on_a_kernel_that_was_never_loaded(
    server: LocalServer, bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel(config=openai_config(server), load=False)
    server.program(Reply(body=chat_body("lazy")))
    assert k.providers.model().complete(USER).text == "lazy"
    assert not [p for p in k.problems if "model.provider" in p], k.problems


def test_shutdown_closes_the_client(
    server: LocalServer, bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel(config=openai_config(server))
    client = k.providers.model()
    server.program(Reply(body=chat_body("before")))
    client.complete(USER)
    assert client._client is not None
    k.shutdown()
    assert client._client is None


# --------------------------------------------------------------------------
# The scripted provider and the bundled demo script
# --------------------------------------------------------------------------


def demo_turns() -> list[Any]:
    data = yaml.safe_load(DEMO_SCRIPT.read_text(encoding="utf-8"))
    assert isinstance(data, list)
    return data


def test_the_demo_script_is_questions_each_a_tool_call_then_a_text_turn() -> None:
    turns = demo_turns()
    assert len(turns) == 12
    tools = []
    for call_turn, answer in zip(turns[::2], turns[1::2], strict=True):
        assert isinstance(call_turn, dict) and len(call_turn["tool_calls"]) == 1, call_turn
        tools.append(call_turn["tool_calls"][0]["name"])
        text = answer if isinstance(answer, str) else answer.get("text")
        assert (
            isinstance(text, str)
            and text.strip()
            and not (isinstance(answer, dict) and answer.get("tool_calls"))
        )
    # The seed's four questions first, then a refused one and a question answered from memory.
    assert tools == ["calculate", "unit_convert", "calculate", "unit_convert", "calculate", "calculate"]


def test_scripted_script_is_resolved_against_the_home(
    bundled_providers: Path, home: Path, make_kernel: Callable[..., Kernel]
) -> None:
    shutil.copy(DEMO_SCRIPT, home / "demo.yaml")
    k = make_kernel(config={"model": {"provider": "scripted", "script": "demo.yaml"}})
    client = k.providers.model()
    assert isinstance(client, ScriptedTransport)
    assert client.path == home / "demo.yaml"
    assert client.provider == "scripted" and len(client.turns) == 12


def test_scripted_accepts_an_absolute_path(
    bundled_providers: Path, tmp_path: Path, make_kernel: Callable[..., Kernel]
) -> None:
    script = tmp_path / "elsewhere" / "chat.yaml"
    script.parent.mkdir()
    script.write_text("- Hello from the script.\n", encoding="utf-8")
    k = make_kernel(config={"model": {"provider": "scripted", "script": str(script)}})
    client = k.providers.model()
    assert client.complete(USER).text == "Hello from the script."
    exhausted = client.complete(USER)
    assert exhausted.finish_reason == "script_exhausted" and "no more turns" in exhausted.text


def test_scripted_without_a_script_says_what_to_set(
    bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel(config={"model": {"provider": "scripted"}})
    with pytest.raises(ProviderSelectionError, match=r"model\.script"):
        k.providers.model()


def test_scripted_with_a_missing_script_names_the_file(
    bundled_providers: Path, home: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel(config={"model": {"provider": "scripted", "script": "absent.yaml"}})
    # The transport's error, surfaced as a selection error naming the provider and the file.
    with pytest.raises(
        ProviderSelectionError, match=r"model provider 'scripted': .*absent\.yaml: no such file"
    ):
        k.providers.model()


def _check_arguments(schema: dict[str, Any], args: dict[str, Any]) -> None:
    params = schema["parameters"]
    missing = [name for name in params.get("required", []) if name not in args]
    assert not missing, f"{schema['name']}: missing {missing}"
    unknown = [name for name in args if name not in params["properties"]]
    assert not unknown, f"{schema['name']}: unknown {unknown}"
    kinds = {"string": str, "number": (int, float)}
    for name, value in args.items():
        wanted = kinds[params["properties"][name]["type"]]
        assert isinstance(value, wanted) and not isinstance(value, bool), (schema["name"], name, value)


EXPECTED_DEMO_RESULTS = [65536, 37.7778, 4.44288293815837, 1536]


def test_the_demo_script_plays_against_the_real_calculator(
    home: Path, monkeypatch: pytest.MonkeyPatch, sink: types.ModuleType
) -> None:
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(REPO / "extensions"))
    shutil.copy(DEMO_SCRIPT, home / "demo.yaml")
    write_plugin(home / "plugins", "recorder", HOOK_RECORDER)
    with Kernel(home=home, config={"model": {"provider": "scripted", "script": "demo.yaml"}}) as k:
        k.load()
        model = k.providers.model()
        schemas = {s["function"]["name"] if "function" in s else s["name"]: s for s in k.tools.schemas()}
        assert {"calculate", "unit_convert"} <= set(schemas)

        messages: list[dict[str, Any]] = []
        results = []
        for question in ("2**16?", "100 F in C?", "sqrt(2)*pi?", "1.5 TB in GB?"):
            messages.append({"role": "user", "content": question})
            call_turn = model.complete(messages, tools=list(schemas.values()), session_id="demo")
            assert call_turn.finish_reason == "tool_calls" and len(call_turn.tool_calls) == 1
            call = call_turn.tool_calls[0]
            assert call.name in k.tools.names()
            schema = schemas[call.name]
            _check_arguments(schema.get("function", schema), call.parsed())
            messages.append(call_turn.as_message())
            output = run_json(k.tools.dispatch(call.name, call.arguments, session_id="demo"))
            assert "error" not in output, output
            results.append(output["result"])
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(output)})

            answer = model.complete(messages, session_id="demo")
            assert answer.tool_calls == [] and answer.finish_reason == "stop"
            assert str(output["result"]) in answer.text, (call.name, output, answer.text)
            messages.append(answer.as_message())

        assert results == EXPECTED_DEMO_RESULTS
        assert [c["id"] for m in messages if m.get("tool_calls") for c in m["tool_calls"]] == [
            "call_1",
            "call_2",
            "call_3",
            "call_4",
        ]
        assert model.played == 8
        # The api hooks fired for every turn, with the scripted provider's names.
        pres = [kw for kind, kw in sink.calls if kind == "pre"]
        assert len(pres) == 8 and all(kw["api_mode"] == "scripted" for kw in pres)
        assert all(kw["provider"] == "scripted" for kw in pres)


# --------------------------------------------------------------------------
# status() and problems()
# --------------------------------------------------------------------------


def model_rows(k: Kernel) -> dict[str, ProviderStatus]:
    return {r.name: r for r in k.providers.status() if r.slot == "model_provider"}


def test_status_of_the_bundled_model_providers(
    bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel(config={"model": {"provider": "openai-compatible", "model": "m1"}})
    rows = model_rows(k)
    assert set(rows) == {"openai-compatible", "scripted"}
    openai = rows["openai-compatible"]
    assert openai.plugin == "model-providers/openai-compatible"
    assert openai.active is True and openai.available is False
    assert "base_url" in openai.reason
    scripted = rows["scripted"]
    assert scripted == ProviderStatus(
        "model_provider", "scripted", "model-providers/scripted", False, True, ""
    )
    assert k.providers.problems() == []
    assert openai.to_dict() == {
        "slot": "model_provider",
        "name": "openai-compatible",
        "plugin": "model-providers/openai-compatible",
        "active": True,
        "available": False,
        "reason": openai.reason,
        "endpoint": "",  # no base_url configured: nowhere to send a request
    }


def test_status_follows_the_config_and_aliases(
    server: LocalServer, bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel(config={"model": {"provider": "vLLM", "model": "m1", "base_url": server.base_url}})
    rows = model_rows(k)
    assert rows["openai-compatible"].active and rows["openai-compatible"].available
    assert rows["openai-compatible"].reason == ""
    assert not rows["scripted"].active


def test_status_without_a_configured_provider(
    bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel()
    rows = model_rows(k)
    assert not any(r.active for r in rows.values())
    assert k.providers.problems() == []


def test_an_unknown_configured_provider_is_a_problem_row(
    bundled_providers: Path, make_kernel: Callable[..., Kernel]
) -> None:
    k = make_kernel(config={"model": {"provider": "nope"}})
    problems = k.providers.problems()
    assert len(problems) == 1
    slot, message = problems[0]
    assert slot == "model_provider"
    assert "model.provider" in message and "'nope'" in message and "openai-compatible, scripted" in message
    rows = [r for r in k.providers.status() if r.slot == "model_provider"]
    problem_rows = [r for r in rows if r.plugin is None]
    assert problem_rows == [ProviderStatus("model_provider", "nope", None, True, False, message)]
    assert not any(r.active for r in rows if r.plugin is not None)
    assert message in k.problems, "load() records the configured choice that cannot be used"
