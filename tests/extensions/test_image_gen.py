"""The image generation slot and the bundled ``openai-compatible`` backend, against a real local server.

The server (``LocalServer``, from ``local_server``) listens on 127.0.0.1 and
speaks enough of the Images API: ``POST /v1/images/generations`` answers what
each test programmed, and ``GET /files/<name>`` serves the PNG registered under
that name in ``FILES`` (for results given as a URL).  It records every request
it gets.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import subprocess
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, REPO, cli_env, run_json
from local_server import LocalServer, Reply, Seen

from kernel import Kernel
from kernel.providers import ImageGenProvider
from kernel.providers.manager import ProviderSelectionError

EXTENSIONS = REPO / "extensions"
API_KEY = "sk-img-SECRET-0123456789"


def tiny_png(width: int = 2, height: int = 2, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A real PNG (8-bit RGB, no interlace), made with zlib and struct."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
        )

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


RED = tiny_png()
BLUE = tiny_png(3, 1, (0, 0, 255))


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


FILES: dict[str, bytes] = {}  # what ``GET /files/<name>`` serves; emptied before each test


def serve_file(seen: Seen) -> Reply:
    name = seen.path.rsplit("/", 1)[-1]
    data = FILES.get(name) if seen.path.startswith("/files/") else None
    return Reply(200, data) if data is not None else Reply(404, "no such file")


@pytest.fixture(scope="module")
def image_server() -> Iterator[LocalServer]:
    with LocalServer(bytes_type="image/png") as server:
        server.route("GET", "/", serve_file)
        yield server


@pytest.fixture
def server(image_server: LocalServer) -> Iterator[LocalServer]:
    image_server.reset()
    FILES.clear()
    yield image_server
    image_server.reset()
    FILES.clear()


@pytest.fixture
def kernel_of(make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Kernel]:
    """``make_kernel`` with the checkout's bundled extensions, and no OPENAI_* variables from the machine."""
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(EXTENSIONS))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return make_kernel


def config_for(server: LocalServer, **extra: Any) -> dict[str, Any]:
    return {
        "image_gen": {
            "provider": "openai-compatible",
            "base_url": server.base_url,
            "api_key": API_KEY,
            **extra,
        }
    }


def b64_reply(data: bytes = RED, **item: Any) -> Reply:
    return Reply(200, {"created": 1, "data": [{"b64_json": base64.b64encode(data).decode(), **item}]})


def backend(k: Kernel) -> ImageGenProvider:
    provider = k.providers.image_gen()
    assert provider is not None and provider.name == "openai-compatible"
    return provider


def saved(result: dict[str, Any], home: Path) -> bytes:
    """The bytes of the image a success result points to, checking it lies under <home>/cache/images/."""
    assert result["success"] is True, result
    path = Path(result["image"])
    assert path.parent == home / "cache" / "images", path
    assert path.is_file()
    return path.read_bytes()


# --------------------------------------------------------------------------
# Generation: b64 and URL results
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("aspect", "size", "reported"),
    [
        ("landscape", "1536x1024", "landscape"),
        ("square", "1024x1024", "square"),
        ("portrait", "1024x1536", "portrait"),
        ("PORTRAIT", "1024x1536", "portrait"),
        ("panorama", "1536x1024", "landscape"),
    ],
)
def test_b64_result_is_saved_and_the_request_is_right(
    kernel_of: Callable[..., Kernel], server: LocalServer, home: Path, aspect: str, size: str, reported: str
) -> None:
    server.program(b64_reply(revised_prompt="a red square, flat"))
    k = kernel_of(config_for(server))
    result = backend(k).generate("a red square", aspect)
    assert saved(result, home) == RED
    assert Path(result["image"]).suffix == ".png"
    assert result["provider"] == "openai-compatible"
    assert result["model"] == "gpt-image-1"
    assert result["prompt"] == "a red square"
    assert result["aspect_ratio"] == reported
    assert result["size"] == size
    assert result["revised_prompt"] == "a red square, flat"
    [post] = server.posts()
    assert post.path == "/v1/images/generations"
    assert post.json == {"model": "gpt-image-1", "prompt": "a red square", "n": 1, "size": size}
    assert post.headers["authorization"] == f"Bearer {API_KEY}"
    assert post.headers["content-type"] == "application/json"


def test_url_result_is_downloaded_from_the_server(
    kernel_of: Callable[..., Kernel], server: LocalServer, home: Path
) -> None:
    FILES["blue.png"] = BLUE
    server.program(Reply(200, {"data": [{"url": f"{server.root}/files/blue.png"}]}))
    k = kernel_of(config_for(server, response_format="url", model="my-diffusion"))
    result = backend(k).generate("a blue line", "portrait")
    assert saved(result, home) == BLUE
    assert result["url"] == f"{server.root}/files/blue.png"
    assert result["model"] == "my-diffusion"
    post, get = server.seen
    assert post.json == {
        "model": "my-diffusion",
        "prompt": "a blue line",
        "n": 1,
        "size": "1024x1536",
        "response_format": "url",
    }
    assert (get.method, get.path) == ("GET", "/files/blue.png")


def test_relative_url_result_is_resolved_against_the_base_url(
    kernel_of: Callable[..., Kernel], server: LocalServer, home: Path
) -> None:
    FILES["red.png"] = RED
    server.program(Reply(200, {"data": [{"url": "/files/red.png"}]}))
    k = kernel_of(config_for(server))
    result = backend(k).generate("red")
    assert saved(result, home) == RED


def test_each_image_gets_its_own_file(
    kernel_of: Callable[..., Kernel], server: LocalServer, home: Path
) -> None:
    server.program(b64_reply(RED), b64_reply(BLUE))
    provider = backend(kernel_of(config_for(server)))
    first, second = provider.generate("one"), provider.generate("two")
    assert first["image"] != second["image"]
    assert (saved(first, home), saved(second, home)) == (RED, BLUE)


@pytest.mark.parametrize(
    ("model", "sizes"),
    [
        ("dall-e-3", ["1792x1024", "1024x1024", "1024x1792"]),
        ("dall-e-2", ["1024x1024", "1024x1024", "1024x1024"]),
        ("gpt-image-1", ["1536x1024", "1024x1024", "1024x1536"]),
        ("flux-schnell", ["1536x1024", "1024x1024", "1024x1536"]),
    ],
)
def test_dall_e_models_get_sizes_they_accept(
    kernel_of: Callable[..., Kernel], server: LocalServer, model: str, sizes: list[str]
) -> None:
    server.program(b64_reply(), b64_reply(), b64_reply())
    provider = backend(kernel_of(config_for(server, model=model)))
    results = [provider.generate("x", aspect) for aspect in ("landscape", "square", "portrait")]
    assert [r["size"] for r in results] == sizes
    assert [p.json["size"] for p in server.posts()] == sizes


def test_model_keyword_overrides_and_unknown_keywords_are_ignored(
    kernel_of: Callable[..., Kernel], server: LocalServer, home: Path
) -> None:
    server.program(b64_reply())
    provider = backend(kernel_of(config_for(server)))
    result = provider.generate("x", "square", model="dall-e-3", quality="hd", image_url=None, seed=7)
    assert result["success"] is True and result["model"] == "dall-e-3"
    assert server.posts()[0].json == {"model": "dall-e-3", "prompt": "x", "n": 1, "size": "1024x1024"}


def test_environment_supplies_the_url_and_the_openai_key_stays_with_openai(
    kernel_of: Callable[..., Kernel], server: LocalServer, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$OPENAI_BASE_URL`` names any compatible server: ``$OPENAI_API_KEY`` is not sent there (a key
    meant for OpenAI goes to OpenAI's hosts only, as for the model providers)."""
    k = kernel_of({"image_gen": {"provider": "openai-compatible"}})
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url + "/")
    monkeypatch.setenv("OPENAI_API_KEY", "env-key-42")
    server.program(b64_reply())
    result = backend(k).generate("from env")
    assert saved(result, home) == RED
    assert "authorization" not in server.posts()[0].headers
    assert server.posts()[0].path == "/v1/images/generations"
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.openai.com/v1")
    assert backend(k).api_key == "env-key-42"


def test_config_wins_over_the_environment(
    kernel_of: Callable[..., Kernel], server: LocalServer, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    server.program(b64_reply())
    result = backend(kernel_of(config_for(server))).generate("config")
    assert result["success"] is True, result
    assert server.posts()[0].headers["authorization"] == f"Bearer {API_KEY}"


def test_no_key_sends_no_authorization(
    kernel_of: Callable[..., Kernel], server: LocalServer, home: Path
) -> None:
    server.program(b64_reply())
    k = kernel_of({"image_gen": {"provider": "openai-compatible", "base_url": server.base_url}})
    assert saved(backend(k).generate("local"), home) == RED
    assert "authorization" not in server.posts()[0].headers


# --------------------------------------------------------------------------
# Failures become error_response
# --------------------------------------------------------------------------


def error_of(result: dict[str, Any], error_type: str) -> str:
    assert result["success"] is False, result
    assert result["error_type"] == error_type, result
    assert result["provider"] == "openai-compatible"
    assert API_KEY not in json.dumps(result)
    return result["error"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(500, {"error": {"message": "upstream exploded"}}), "HTTP 500: upstream exploded"),
        (
            Reply(400, {"error": {"message": "Your prompt was rejected by the safety system", "code": "x"}}),
            "HTTP 400: Your prompt was rejected by the safety system",
        ),
        (Reply(422, {"detail": "size must be one of 256x256"}), "HTTP 422: size must be one of 256x256"),
        (Reply(503, "overloaded, try later"), "HTTP 503: overloaded, try later"),
        (Reply(502, b""), "HTTP 502: (empty body)"),
    ],
)
def test_http_errors_carry_the_server_message(
    kernel_of: Callable[..., Kernel], server: LocalServer, home: Path, reply: Reply, expected: str
) -> None:
    server.program(reply)
    result = backend(kernel_of(config_for(server))).generate("a cat", "square")
    assert expected in error_of(result, "http_error")
    assert (result["prompt"], result["aspect_ratio"], result["model"]) == ("a cat", "square", "gpt-image-1")
    assert not (home / "cache" / "images").exists() or not any((home / "cache" / "images").iterdir())


def test_the_key_is_never_echoed_back(kernel_of: Callable[..., Kernel], server: LocalServer) -> None:
    server.program(Reply(401, {"error": {"message": f"Incorrect API key provided: {API_KEY}"}}))
    error = error_of(backend(kernel_of(config_for(server))).generate("x"), "http_error")
    assert "Incorrect API key provided: ***" in error


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("this is {not json", "not JSON"),
        ({"created": 1}, "data[0]"),
        ({"data": []}, "data[0]"),
        ({"data": ["text"]}, "data[0]"),
        ([1, 2], "data[0]"),
        ({"data": [{"revised_prompt": "?"}]}, "neither b64_json nor url"),
        ({"data": [{"b64_json": "!!! not base64 !!!"}]}, "not valid base64"),
    ],
)
def test_malformed_bodies(
    kernel_of: Callable[..., Kernel], server: LocalServer, body: Any, expected: str
) -> None:
    server.program(Reply(200, body))
    assert expected in error_of(backend(kernel_of(config_for(server))).generate("x"), "malformed_response")


def test_a_url_that_cannot_be_downloaded(kernel_of: Callable[..., Kernel], server: LocalServer) -> None:
    server.program(Reply(200, {"data": [{"url": f"{server.root}/files/missing.png"}]}))
    error = error_of(backend(kernel_of(config_for(server))).generate("x"), "download_error")
    assert "/files/missing.png" in error and "404" in error


def test_timeout(kernel_of: Callable[..., Kernel], server: LocalServer) -> None:
    server.program(Reply(200, {"data": []}, delay=2.0))
    error = error_of(backend(kernel_of(config_for(server, timeout=0.3))).generate("slow"), "timeout")
    assert "timed out after 0.3s" in error


def test_connection_refused(kernel_of: Callable[..., Kernel]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    k = kernel_of({"image_gen": {"provider": "openai-compatible", "base_url": f"http://127.0.0.1:{port}/v1"}})
    error = error_of(backend(k).generate("x"), "connection_error")
    assert f"127.0.0.1:{port}" in error


# --------------------------------------------------------------------------
# Through the kernel: the generate_image tool
# --------------------------------------------------------------------------


def test_generate_image_tool_end_to_end(
    kernel_of: Callable[..., Kernel], server: LocalServer, home: Path
) -> None:
    server.program(b64_reply())
    k = kernel_of(config_for(server))
    assert "generate_image" in [s["function"]["name"] for s in k.tools.schemas()]
    assert k.tools.get("generate_image").plugin == "image_gen/openai-compatible"
    result = run_json(
        k.tools.dispatch("generate_image", {"prompt": "a red square", "aspect_ratio": "square"})
    )
    assert saved(result, home) == RED
    assert result["aspect_ratio"] == "square" and result["provider"] == "openai-compatible"
    assert server.posts()[0].json["size"] == "1024x1024"
    bad = run_json(k.tools.dispatch("generate_image", {"prompt": "  "}))
    assert bad["success"] is False and "prompt" in bad["error"]
    server.program(Reply(500, {"error": {"message": "no GPU today"}}))
    failed = run_json(k.tools.dispatch("generate_image", json.dumps({"prompt": "again"})))
    assert failed["success"] is False and "no GPU today" in failed["error"]


def test_no_image_config_means_no_tool(kernel_of: Callable[..., Kernel]) -> None:
    k = kernel_of()
    assert "generate_image" not in k.tools.names()
    assert k.providers.image_gen() is None
    rows = [r for r in k.providers.status() if r.slot == "image_gen"]
    assert [(r.name, r.active, r.available) for r in rows] == [("openai-compatible", False, False)]


def test_unavailable_backend_is_reported_not_used(kernel_of: Callable[..., Kernel]) -> None:
    k = kernel_of({"image_gen": {"provider": "openai-compatible"}})
    with pytest.raises(ProviderSelectionError, match="not available: no base URL"):
        k.providers.image_gen()
    # As in Hermes, the tool stays; a call says which provider lacks what, and nothing is sent.
    answer = run_json(k.tools.dispatch("generate_image", {"prompt": "a cat"}))
    assert answer["success"] is False and answer["error_type"] == "provider_unavailable"
    assert "image generator 'openai-compatible' is not available" in answer["error"]
    assert "image_gen.base_url" in answer["error"] and answer["provider"] == "openai-compatible"
    provider = k.slots.get("image_gen", "openai-compatible").obj
    assert provider.is_available() is False
    assert "image_gen.base_url" in provider.unavailable_reason()
    assert "OPENAI_BASE_URL" in provider.unavailable_reason()
    result = provider.generate("x")
    assert result["success"] is False and result["error_type"] == "not_configured"


def test_a_base_url_that_is_not_http_is_unavailable(kernel_of: Callable[..., Kernel]) -> None:
    k = kernel_of({"image_gen": {"provider": "openai-compatible", "base_url": "ftp://files.example/v1"}})
    with pytest.raises(ProviderSelectionError, match="must be an http"):
        k.providers.image_gen()


def test_providers_list_cli_shows_the_reason(
    home: Path, bundled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    (home / "config.yaml").write_text(yaml.safe_dump({"image_gen": {"provider": "openai-compatible"}}))
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(EXTENSIONS))
    proc = subprocess.run([*CLI, "providers", "list", "--json"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rows = [r for r in run_json(proc.stdout) if r["slot"] == "image_gen"]
    assert len(rows) == 1, rows
    row = rows[0]
    assert (row["name"], row["plugin"], row["active"], row["available"]) == (
        "openai-compatible",
        "image_gen/openai-compatible",
        True,
        False,
    )
    assert "no base URL" in row["reason"] and "image_gen.base_url" in row["reason"]
    text = subprocess.run([*CLI, "providers", "list"], env=env, capture_output=True, text=True)
    assert text.returncode == 0, text.stderr
    assert "openai-compatible" in text.stdout and "no base URL" in text.stdout


def test_unknown_provider_lists_the_available_names(
    kernel_of: Callable[..., Kernel],
    plugin_dir: Callable[..., Path],
    server: LocalServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plugin_dir("solid-images", SOLID_PLUGIN)
    k = kernel_of({"image_gen": {"provider": "nope"}})
    # As in Hermes, the only available generator (solid) answers in place of the missing one.
    assert k.tools.get("generate_image").plugin == "solid-images"
    message = next(p for p in k.problems if "'nope'" in p)
    assert "image_gen.provider" in message and "openai-compatible" in message and "solid" in message
    # With two available, Hermes falls back to neither: the unknown name is an error listing the names.
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    k = kernel_of({"image_gen": {"provider": "nope"}})
    with pytest.raises(ProviderSelectionError) as caught:
        k.providers.image_gen()
    message = str(caught.value)
    assert "image_gen.provider" in message and "'nope'" in message
    assert "openai-compatible" in message and "solid" in message
    assert "generate_image" not in k.tools.names()


def test_another_plugin_backend_can_be_selected(
    kernel_of: Callable[..., Kernel], plugin_dir: Callable[..., Path], home: Path
) -> None:
    plugin_dir("solid-images", SOLID_PLUGIN)
    k = kernel_of({"image_gen": {"provider": "solid"}})
    assert k.tools.get("generate_image").plugin == "solid-images"
    result = run_json(k.tools.dispatch("generate_image", {"prompt": "anything"}))
    assert saved(result, home) == RED
    active = {r.name: r.active for r in k.providers.status() if r.slot == "image_gen"}
    assert active == {"openai-compatible": False, "solid": True}


def test_the_only_available_generator_is_chosen_without_config(
    kernel_of: Callable[..., Kernel], plugin_dir: Callable[..., Path], home: Path
) -> None:
    """No ``image_gen.provider``: the bundled backend is unavailable (no URL), ``solid`` is ready, so
    ``solid`` serves ``generate_image`` (Hermes' single-available-provider rule)."""
    plugin_dir("solid-images", SOLID_PLUGIN)
    k = kernel_of()
    assert k.providers.selected("image_gen") == "solid"
    assert k.tools.get("generate_image").plugin == "solid-images"
    assert saved(run_json(k.tools.dispatch("generate_image", {"prompt": "anything"})), home) == RED
    active = {r.name: r.active for r in k.providers.status() if r.slot == "image_gen"}
    assert active == {"openai-compatible": False, "solid": True}


def test_two_available_generators_and_no_config_choose_none(
    kernel_of: Callable[..., Kernel],
    plugin_dir: Callable[..., Path],
    server: LocalServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plugin_dir("solid-images", SOLID_PLUGIN)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    k = kernel_of()
    assert k.providers.selected("image_gen") is None
    assert "generate_image" not in k.tools.names()


def test_two_plugins_offering_the_same_name_warn_naming_both(
    kernel_of: Callable[..., Kernel], plugin_dir: Callable[..., Path], server: LocalServer, home: Path
) -> None:
    """As in Hermes' registry, the later registration of a name replaces the earlier one (warned)."""
    plugin_dir("zz-images", SOLID_PLUGIN.replace('"solid"', '"openai-compatible"'))
    k = kernel_of(config_for(server))
    assert k.slots.get("image_gen", "openai-compatible").plugin == "zz-images"
    warnings = " ".join(k.plugin("zz-images").warnings)
    assert "zz-images" in warnings and "image_gen/openai-compatible" in warnings, warnings
    assert saved(run_json(k.tools.dispatch("generate_image", {"prompt": "p"})), home) == RED
    assert server.seen == []
    # Without the replacing plugin, the bundled provider answers again.
    k.unregister("zz-images")
    assert k.slots.get("image_gen", "openai-compatible").plugin == "image_gen/openai-compatible"


def test_descriptive_methods(kernel_of: Callable[..., Kernel], server: LocalServer) -> None:
    provider = backend(kernel_of(config_for(server, model="dall-e-3")))
    assert isinstance(provider, ImageGenProvider)
    assert provider.default_model() == "dall-e-3"
    ids = [m["id"] for m in provider.list_models()]
    assert ids[0] == "gpt-image-1" and "dall-e-3" in ids
    assert all(m["display"] for m in provider.list_models())
    schema = provider.get_setup_schema()
    assert {v["key"] for v in schema["env_vars"]} == {"OPENAI_API_KEY", "OPENAI_BASE_URL"}
    assert provider.display_name == "OpenAI-compatible images"
    assert provider.is_available() and provider.unavailable_reason() == ""


SOLID_PLUGIN = """
import struct
import zlib

from kernel.providers import ImageGenProvider, resolve_aspect_ratio, success_response
from kernel.providers.image_gen import save_image_bytes

def _png():
    def chunk(tag, data):
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)
    rows = b"".join(b"\\x00" + bytes((200, 30, 30)) * 2 for _ in range(2))
    return (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


class Solid(ImageGenProvider):
    def __init__(self, home):
        self.home = home

    @property
    def name(self):
        return "solid"

    def generate(self, prompt, aspect_ratio="landscape", **kwargs):
        path = save_image_bytes(_png(), self.home, prefix="solid")
        return success_response(image=str(path), model="solid", prompt=prompt,
                                aspect_ratio=resolve_aspect_ratio(aspect_ratio), provider=self.name)


def register(ctx):
    ctx.register_image_gen_provider(Solid(ctx.home))
"""
