"""Two kernels in one process never use each other's ``.env`` credentials (docs/embedding.md, "Two homes").

Each kernel's home has its own ``.env``; a real HTTP server on 127.0.0.1 plays
the model endpoint and records the ``Authorization`` header of each request.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import write_plugin
from local_server import LocalServer, Reply

from kernel import Kernel

EXTENSIONS = Path(__file__).resolve().parents[2] / "extensions"
USER = [{"role": "user", "content": "hello"}]
TOOL_PLUGIN = """\
def register(ctx):
    ctx.register_tool(
        name="needs_secret", toolset="t", schema={"name": "needs_secret", "parameters": {"type": "object"}},
        handler=lambda args, **kw: "ran", requires_env=["TENANT_ONLY_SECRET"],
    )
"""


def chat_body(text: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "model": "m1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(default=Reply(body=chat_body("hi"))) as srv:
        yield srv


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, bundled: Path) -> None:
    shutil.copytree(EXTENSIONS / "model-providers", bundled / "model-providers")
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TENANT_ONLY_SECRET", "TENANT_SHARED"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def tenant(tmp_path: Path, server: LocalServer, make_kernel: Callable[..., Kernel]) -> Callable[..., Kernel]:
    """``tenant(name, dotenv)``: a loaded kernel in its own home, whose ``.env`` holds ``dotenv``."""

    def make(
        name: str, dotenv: dict[str, str], plugin: str | None = None, extra: dict[str, Any] | None = None
    ) -> Kernel:
        home = tmp_path / name
        home.mkdir()
        # api_key_env: the local server is not OpenAI's; its key is sent there only when named so.
        model = {
            "provider": "openai-compatible",
            "model": "m1",
            "base_url": server.base_url,
            "api_key_env": "OPENAI_API_KEY",
        }
        config = {"model": model, **(extra or {})}
        (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        (home / ".env").write_text("".join(f"{k}={v}\n" for k, v in dotenv.items()), encoding="utf-8")
        if plugin is not None:
            write_plugin(home / "plugins", "secret-tool", plugin)
        return make_kernel(home=home)

    return make


def bearer_of(k: Kernel, server: LocalServer) -> str:
    before = len(server.seen)
    k.providers.model().complete(USER)
    return server.seen[before].headers["authorization"]


def test_each_kernel_authenticates_with_its_own_homes_key(
    tenant: Callable[..., Kernel], server: LocalServer
) -> None:
    a = tenant("a", {"OPENAI_API_KEY": "sk-home-a"})
    b = tenant("b", {"OPENAI_API_KEY": "sk-home-b"})
    assert bearer_of(a, server) == "Bearer sk-home-a"
    assert bearer_of(b, server) == "Bearer sk-home-b", "kernel B must not borrow kernel A's exported key"
    # The first exporter keeps os.environ; B says in its log why it did not export its own.
    assert os.environ["OPENAI_API_KEY"] == "sk-home-a"
    log = (b.home / "logs" / "agent.log").read_text(encoding="utf-8")
    assert "env_not_exported" in log and "OPENAI_API_KEY" in log
    assert "sk-home-b" not in log and "sk-home-a" not in log


def test_when_the_first_kernel_shuts_down_the_second_keeps_its_variables(
    tenant: Callable[..., Kernel], server: LocalServer
) -> None:
    a = tenant("a", {"OPENAI_API_KEY": "sk-home-a", "TENANT_SHARED": "same"})
    b = tenant("b", {"OPENAI_API_KEY": "sk-home-b", "TENANT_SHARED": "same"})
    a.shutdown()
    assert os.environ.get("OPENAI_API_KEY") == "sk-home-b", "B's own .env value passes into os.environ"
    assert os.environ.get("TENANT_SHARED") == "same"
    assert bearer_of(b, server) == "Bearer sk-home-b"
    b.shutdown()
    assert "OPENAI_API_KEY" not in os.environ and "TENANT_SHARED" not in os.environ


def test_a_variable_only_another_home_sets_does_not_satisfy_requires_env(
    tenant: Callable[..., Kernel],
) -> None:
    a = tenant("a", {"TENANT_ONLY_SECRET": "a-secret"}, plugin=TOOL_PLUGIN)
    b = tenant("b", {}, plugin=TOOL_PLUGIN)
    assert os.environ["TENANT_ONLY_SECRET"] == "a-secret"
    assert a.tools.available(a.tools.get("needs_secret"))[0] is True
    ok, reason = b.tools.available(b.tools.get("needs_secret"))
    assert ok is False and "TENANT_ONLY_SECRET" in reason
    assert b.environ.get("TENANT_ONLY_SECRET") is None and "TENANT_ONLY_SECRET" not in b.environ.child()


def test_a_kernel_without_a_key_of_its_own_sends_none_rather_than_anothers(
    tenant: Callable[..., Kernel], server: LocalServer
) -> None:
    """The openai-compatible profile allows key-less local endpoints: B's request goes out without one."""
    tenant("a", {"OPENAI_API_KEY": "sk-home-a"})
    b = tenant("b", {})
    before = len(server.seen)
    b.providers.model().complete(USER)
    assert "authorization" not in server.seen[before].headers


def test_a_variable_the_process_sets_itself_is_seen_by_every_kernel(
    tenant: Callable[..., Kernel], server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-process")
    a = tenant("a", {"OPENAI_API_KEY": "sk-home-a"})
    b = tenant("b", {})
    assert bearer_of(a, server) == "Bearer sk-process"
    assert bearer_of(b, server) == "Bearer sk-process"
    a.shutdown()
    assert os.environ["OPENAI_API_KEY"] == "sk-process", "a kernel never removes what it did not export"


def test_shell_hooks_a_kernel_starts_see_its_own_environment(
    tenant: Callable[..., Kernel], tmp_path: Path
) -> None:
    """Each kernel's own ``hooks:`` fire through ``invoke_hook``; the program sees that kernel's ``.env``."""
    out = tmp_path / "seen.txt"
    command = f"sh -c 'echo ${{TENANT_ONLY_SECRET:-unset}} >> {out}'"
    hooks = {"hooks": {"on_session_start": [{"command": command}]}}
    a = tenant("a", {"TENANT_ONLY_SECRET": "a-secret"}, extra=hooks)
    b = tenant("b", {}, extra=hooks)
    assert os.environ["TENANT_ONLY_SECRET"] == "a-secret"
    for k in (a, b):
        k.invoke_hook("on_session_start", session_id="s", model="m1", platform="cli")
    assert out.read_text(encoding="utf-8").split() == ["a-secret", "unset"]
