"""The minor differences against Hermes Agent 0.19's own plugin behaviour (issue 28), each as Hermes has it.

Every plugin is written to a temporary home the way published Hermes plugins are written and loaded
by the real discovery; downloads come from a real HTTP server on 127.0.0.1, the model is a real HTTP
server that records what it was sent, and the memory command runs the real ``hermes-kernel``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import agent_log, run_cli, run_json
from local_server import LocalServer, Reply, Seen

from kernel import Kernel
from kernel.providers import ProviderProfile
from kernel.providers.image_gen import MAX_IMAGE_BYTES, save_url_image
from kernel.providers.manager import ProviderSelectionError
from kernel.providers.transport import ChatCompletionsTransport

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64

# An image backend written as Hermes' docs show one; ``TAG`` says which copy answered.
SOLID = """
from agent.image_gen_provider import ImageGenProvider, success_response


class Solid(ImageGenProvider):
    def __init__(self, tag, name="solid"):
        self.tag = tag
        self._name = name

    @property
    def name(self):
        return self._name

    def generate(self, prompt, aspect_ratio="landscape", **kwargs):
        return success_response(image="/made/by/" + self.tag, model="m", prompt=prompt,
                                aspect_ratio=aspect_ratio, provider=self.name)


def register(ctx):
    ctx.register_image_gen_provider(Solid("{tag}", "{name}"))
"""


def solid(tag: str, name: str = "solid") -> str:
    return SOLID.replace("{tag}", tag).replace("{name}", name)


def generated_by(k: Kernel) -> str:
    result = run_json(k.tools.dispatch("generate_image", {"prompt": "a red square"}))
    assert result["success"] is True, result
    return str(result["image"]).rsplit("/", 1)[-1]


# --------------------------------------------------------------------------
# 1. A configured image generator that is not installed: fall back as Hermes does
# --------------------------------------------------------------------------


def test_a_missing_configured_image_generator_falls_back_to_the_only_available_one(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], home: Path
) -> None:
    plugin_dir("solid-images", solid("solid-copy"))
    k = make_kernel({"image_gen": {"provider": "dall-e-gone"}})
    assert "generate_image" in k.tools.names()
    assert generated_by(k) == "solid-copy"
    assert k.providers.image_gen() is not None and k.providers.image_gen().name == "solid"
    # The user is told which provider is missing and which one answers in its place.
    told = " ".join(k.problems) + agent_log(home)
    assert "dall-e-gone" in told and "solid" in told, told
    from agent import image_gen_registry

    active = image_gen_registry.get_active_provider()
    assert active is not None and active.name == "solid"


def test_a_missing_configured_image_generator_with_two_available_gives_no_tool(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    """Hermes falls back only to a single available provider (or to ``fal``): two leave none."""
    plugin_dir("solid-images", solid("a"))
    plugin_dir("other-images", solid("b", "other"))
    k = make_kernel({"image_gen": {"provider": "dall-e-gone"}})
    assert "generate_image" not in k.tools.names()
    with pytest.raises(ProviderSelectionError, match="dall-e-gone"):
        k.providers.image_gen()


def test_the_fallback_prefers_fal_when_several_are_available(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir("solid-images", solid("a"))
    plugin_dir("fal-images", solid("from-fal", "fal"))
    k = make_kernel({"image_gen": {"provider": "dall-e-gone"}})
    assert generated_by(k) == "from-fal"


# --------------------------------------------------------------------------
# 2. Registering an image provider again under its name replaces it
# --------------------------------------------------------------------------


REGISTERS_TWICE = (
    solid("unused")
    + """

from agent.image_gen_registry import register_provider


def register(ctx):
    ctx.register_image_gen_provider(Solid("first"))
    ctx.register_image_gen_provider(Solid("second"))
    register_provider(Solid("third"))
"""
)


def test_registering_an_image_provider_again_replaces_the_first(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], home: Path
) -> None:
    plugin_dir("solid-images", REGISTERS_TWICE)
    k = make_kernel({"image_gen": {"provider": "solid"}})
    assert k.plugin("solid-images").error is None
    assert generated_by(k) == "third"
    assert [p.name for p in k.slots.providers("image_gen").values()] == ["solid"]
    assert "image_gen_provider_replaced" in agent_log(home)


def test_a_later_plugin_offering_the_same_image_name_replaces_the_earlier(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], home: Path
) -> None:
    plugin_dir("aa-images", solid("from-aa"))
    plugin_dir("zz-images", solid("from-zz"))
    k = make_kernel({"image_gen": {"provider": "solid"}})
    assert generated_by(k) == "from-zz"
    assert k.slots.get("image_gen", "solid").plugin == "zz-images"
    warnings = " ".join(k.plugin("zz-images").warnings)
    assert "aa-images" in warnings and "replaced" in warnings, warnings


# --------------------------------------------------------------------------
# 3. save_url_image: no empty image, and a size bound
# --------------------------------------------------------------------------


BODIES: dict[str, bytes] = {}


@pytest.fixture(scope="module")
def files_server() -> Iterator[LocalServer]:
    def serve(seen: Seen) -> Reply:
        data = BODIES.get(seen.path.rsplit("/", 1)[-1])
        return Reply(200, data) if data is not None else Reply(404, "no such file")

    with LocalServer(bytes_type="image/png") as server:
        server.route("GET", "/", serve)
        yield server


def cached_images(home: Path) -> list[Path]:
    folder = home / "cache" / "images"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def test_save_url_image_refuses_an_empty_body(files_server: LocalServer, home: Path) -> None:
    BODIES["empty.png"] = b""
    with pytest.raises(ValueError, match="0 bytes"):
        save_url_image(f"{files_server.base_url}/empty.png", home)
    assert cached_images(home) == []


def test_save_url_image_takes_a_max_bytes_bound(files_server: LocalServer, home: Path) -> None:
    BODIES["big.png"] = PNG + b"\x00" * 2000
    with pytest.raises(ValueError, match="1000"):
        save_url_image(f"{files_server.base_url}/big.png", home, max_bytes=1000)
    assert cached_images(home) == []
    path = save_url_image(f"{files_server.base_url}/big.png", home, max_bytes=len(BODIES["big.png"]))
    assert path.read_bytes() == BODIES["big.png"]
    assert MAX_IMAGE_BYTES == 25 * 1024 * 1024  # the documented default, Hermes' own


def test_the_hermes_save_url_image_takes_max_bytes_too(
    files_server: LocalServer, home: Path, make_kernel: Callable[..., Kernel]
) -> None:
    make_kernel()  # the running kernel serves Hermes' modules; images go under its home
    from agent.image_gen_provider import save_url_image as hermes_save_url_image

    BODIES["big.png"] = PNG + b"\x00" * 2000
    BODIES["empty.png"] = b""
    with pytest.raises(ValueError):
        hermes_save_url_image(f"{files_server.base_url}/big.png", max_bytes=100, prefix="x")
    with pytest.raises(ValueError):
        hermes_save_url_image(f"{files_server.base_url}/empty.png")
    assert cached_images(home) == []
    saved = hermes_save_url_image(f"{files_server.base_url}/big.png", max_bytes=5000)
    assert saved.read_bytes() == BODIES["big.png"] and saved.parent == home / "cache" / "images"


# --------------------------------------------------------------------------
# 4. telemetry_schema_version reaches every hook's callbacks
# --------------------------------------------------------------------------


OBSERVER = """
import sys

SEEN = sys.modules.setdefault("_observer_seen", type(sys)("_observer_seen"))
SEEN.calls = []


def register(ctx):
    def any_hook(hook):
        def callback(**kwargs):
            SEEN.calls.append((hook, kwargs.get("telemetry_schema_version")))
        return callback

    def named(session_id, telemetry_schema_version):
        SEEN.calls.append(("on_session_end", telemetry_schema_version))

    for hook in ("on_session_start", "pre_llm_call", "post_llm_call", "on_session_finalize"):
        ctx.register_hook(hook, any_hook(hook))
    ctx.register_hook("on_session_end", named)
"""


def test_every_hook_gets_the_observer_schema_version(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    import sys

    plugin_dir("observer", OBSERVER)
    k = make_kernel()
    seen = sys.modules["_observer_seen"].calls
    k.invoke_hook("on_session_start", session_id="s", model="m", platform="cli")
    k.pm.hook.on_session_finalize(
        session_id="s", platform="cli", old_session_id=None, new_session_id=None, reason="exit"
    )
    k.invoke_hook(
        "on_session_end", session_id="s", completed=True, interrupted=False, model="m", platform="cli"
    )
    k.pre_llm_context(session_id="s", user_message="hi", conversation_history=[], is_first_turn=True)
    asyncio.run(k.ainvoke_hook("post_llm_call", session_id="s", user_message="hi", assistant_response="yo"))
    assert sorted(seen) == sorted(
        [
            ("on_session_start", "hermes.observer.v1"),
            ("on_session_finalize", "hermes.observer.v1"),
            ("on_session_end", "hermes.observer.v1"),
            ("pre_llm_call", "hermes.observer.v1"),
            ("post_llm_call", "hermes.observer.v1"),
        ]
    )
    seen.clear()
    k.invoke_hook("on_session_start", session_id="s", telemetry_schema_version="caller.v2")
    assert seen == [("on_session_start", "caller.v2")]  # a caller's own value is kept


# --------------------------------------------------------------------------
# 5. A memory plugin's cli.py: <name>_command handles its command
# --------------------------------------------------------------------------


MEMORY = """
from agent.memory_provider import MemoryProvider


class Notes(MemoryProvider):
    @property
    def name(self):
        return "notes"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        pass

    def get_tool_schemas(self):
        return []


def register(ctx):
    ctx.register_memory_provider(Notes())
"""

MEMORY_CLI = """
def notes_command(args):
    print(f"notes handled action={args.notes_action} flag={getattr(args, 'flag', None)}")
    return 3 if args.notes_action == "status" else 0


def register_cli(subparser):
    actions = subparser.add_subparsers(dest="notes_action")
    status = actions.add_parser("status")
    status.add_argument("--flag", default="plain")
"""


def test_a_memory_plugins_name_command_handles_its_cli(plugin_dir: Callable[..., Path], home: Path) -> None:
    plugin_dir("notes", MEMORY, files={"cli.py": MEMORY_CLI})
    (home / "config.yaml").write_text("memory:\n  provider: notes\n", encoding="utf-8")
    proc = run_cli(home, "notes", "status", "--flag", "z")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "notes handled action=status flag=z" in proc.stdout
    bare = run_cli(home, "notes")
    assert bare.returncode == 0, bare.stdout + bare.stderr
    assert "notes handled action=None" in bare.stdout


# --------------------------------------------------------------------------
# 6. Multimodal tool results reach the model as content parts
# --------------------------------------------------------------------------


PICTURE_TOOL = """
def picture(args, **kwargs):
    return {
        "_multimodal": True,
        "content": [
            {"type": "text", "text": "a red square"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
        "text_summary": "a red square (image)",
    }


def register(ctx):
    schema = {"name": "picture", "description": "draw", "parameters": {"type": "object", "properties": {}}}
    ctx.register_tool("picture", "pictures", schema, picture)
"""


def reply(text: str = "ok") -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]
    }


@pytest.fixture
def model_server() -> Iterator[LocalServer]:
    with LocalServer() as server:
        yield server


def tool_turn(result: str) -> list[dict[str, Any]]:
    call = {"id": "call-1", "type": "function", "function": {"name": "picture", "arguments": "{}"}}
    return [
        {"role": "user", "content": "draw"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call-1", "content": result},
    ]


def test_a_multimodal_tool_result_reaches_the_model_as_content_parts(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], model_server: LocalServer
) -> None:
    plugin_dir("pictures", PICTURE_TOOL)
    k = make_kernel()
    result = k.tools.dispatch("picture", {})
    model_server.program(Reply(200, reply()), Reply(200, reply()))
    with ChatCompletionsTransport(
        ProviderProfile(name="local"), model="m", api_key=None, base_url=model_server.base_url
    ) as transport:
        transport.complete(tool_turn(result))
        sent = model_server.seen[-1].json["messages"][-1]
        assert sent["role"] == "tool" and sent["tool_call_id"] == "call-1"
        assert sent["content"] == [
            {"type": "text", "text": "a red square"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ]
    # A provider that refuses images in tool messages gets the text summary, as Hermes sends it.
    text_only = ProviderProfile(name="text-only", supports_vision_tool_messages=False)
    with ChatCompletionsTransport(
        text_only, model="m", api_key=None, base_url=model_server.base_url
    ) as transport:
        transport.complete(tool_turn(result))
        assert model_server.seen[-1].json["messages"][-1]["content"] == "a red square (image)"
