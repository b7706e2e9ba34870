"""hermes-stepfun-imagegen 0.3.0: the ``stepfun`` and ``image-gen-chain`` image backends.

Both modules import ``agent.image_gen_provider`` at import time (served by the
kernel's shim, with ``save_b64_image(b64, prefix=...)`` saving under the
kernel's home) and register with ``ctx.register_image_gen_provider``.  StepFun
reads ``STEPFUN_BASE_URL`` once, when imported, and its model from
``hermes_cli.config.load_config()``; the chain finds its backends through
``agent.image_gen_registry.get_provider`` and tries stepfun, minimax,
pollinations in turn.  The kernel's ``generate_image`` tool calls the backend
``image_gen.provider`` selects.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from local_server import LocalServer, Reply, Seen

from kernel.testing import write_plugin

PACKAGE = "hermes-stepfun-imagegen"
GENERATIONS = "/v1/images/generations"

# A backend the chain knows by name (its second choice), written as a directory plugin of the test.
MINIMAX_PLUGIN = """
from agent.image_gen_provider import ImageGenProvider, success_response

CALLS = []


class Minimax(ImageGenProvider):
    @property
    def name(self):
        return "minimax"

    def generate(self, prompt, aspect_ratio="landscape", **kwargs):
        CALLS.append({"prompt": prompt, "aspect_ratio": aspect_ratio, **kwargs})
        return success_response(
            image="/dev/null/minimax.png",
            model=kwargs.get("model") or "minimax-image",
            prompt=prompt,
            aspect_ratio=aspect_ratio,
            provider="minimax",
        )


def register(ctx):
    ctx.register_image_gen_provider(Minimax())
"""


def tiny_png() -> bytes:
    """A real 1x1 red PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


PNG = tiny_png()


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # pragma: no cover - shown on failure only
        pytest.fail(f"not JSON: {text!r}")


def _image(seen: Seen) -> Reply:
    return Reply(200, {"created": 1, "data": [{"b64_json": base64.b64encode(PNG).decode(), "seed": 7}]})


@pytest.fixture
def stepfun(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalServer]:
    """A local StepFun endpoint; STEPFUN_BASE_URL and a fake key set before the package is imported."""
    with LocalServer(default=_image) as server:
        monkeypatch.setenv("STEPFUN_BASE_URL", server.base_url)
        monkeypatch.setenv("STEPFUN_API_KEY", "fake-stepfun-key")
        yield server


def _config(provider: str, **extra: Any) -> dict[str, Any]:
    return {"image_gen": {"provider": provider, **extra}}


def test_generate_image_with_stepfun_saves_the_png_under_the_home(
    compat_kernel: Any, hermes_home: Path, stepfun: LocalServer
) -> None:
    k = compat_kernel(PACKAGE, config=_config("stepfun", stepfun={"model": "step-2x-large"}))
    for name in ("stepfun-imggen", "image-gen-chain"):
        info = k.plugin(name)
        assert info.enabled, info.error
    assert k.slots.get("image_gen", "stepfun").plugin == "stepfun-imggen"
    assert k.slots.get("image_gen", "image-gen-chain").plugin == "image-gen-chain"
    assert k.providers.image_gen().name == "stepfun"
    assert k.tools.get("generate_image").plugin == "stepfun-imggen"

    result = _json(k.tools.dispatch("generate_image", {"prompt": "a red cube", "aspect_ratio": "square"}))

    assert result["success"] is True, result
    assert result["provider"] == "stepfun"
    # image_gen.stepfun.model was read through hermes_cli.config.load_config().
    assert result["model"] == "step-2x-large"
    assert result["aspect_ratio"] == "square"
    assert result["size"] == "1024x1024"
    assert result["seed"] == 7
    image = Path(result["image"])
    assert image.parent == hermes_home / "cache" / "images"
    assert image.name.startswith("stepfun_step-2x-large")
    assert image.suffix == ".png"
    assert image.read_bytes() == PNG

    [request] = stepfun.posts()
    assert request.path == GENERATIONS
    assert request.headers["authorization"] == "Bearer fake-stepfun-key"
    assert request.headers["content-type"] == "application/json"
    assert request.json == {
        "model": "step-2x-large",
        "prompt": "a red cube",
        "size": "1024x1024",
        "n": 1,
        "response_format": "b64_json",
        "steps": 50,
        "cfg_scale": 6.0,
    }


def test_the_default_model_and_a_failing_endpoint(
    compat_kernel: Any, hermes_home: Path, stepfun: LocalServer
) -> None:
    k = compat_kernel(PACKAGE, config=_config("stepfun"))
    ok = _json(k.tools.dispatch("generate_image", {"prompt": "a lighthouse"}))
    assert ok["success"] is True, ok
    assert ok["model"] == "step-image-edit-2"
    assert stepfun.posts()[-1].json["size"] == "768x1360"  # landscape, height x width for this model
    assert stepfun.posts()[-1].json["steps"] == 8

    stepfun.program(Reply(500, {"error": {"message": "overloaded"}}))
    failed = _json(k.tools.dispatch("generate_image", {"prompt": "a lighthouse"}))
    assert failed["success"] is False
    assert failed["provider"] == "stepfun"
    assert failed["error_type"] == "empty_response"
    assert sorted(p.name for p in (hermes_home / "cache" / "images").iterdir()) == [Path(ok["image"]).name]


def test_the_chain_finds_stepfun_through_the_registry_shim(
    compat_kernel: Any, hermes_home: Path, stepfun: LocalServer
) -> None:
    k = compat_kernel(PACKAGE, config=_config("image-gen-chain"))
    chain = k.providers.image_gen()
    assert chain.name == "image-gen-chain"
    assert chain.is_available() is True
    assert chain.default_model() == "step-image-edit-2"  # asked of stepfun
    assert [m["id"] for m in chain.list_models()] == ["step-image-edit-2", "step-2x-large", "step-1x-medium"]
    assert k.tools.get("generate_image").plugin == "image-gen-chain"

    result = _json(
        k.tools.dispatch("generate_image", {"prompt": "a blue sphere", "aspect_ratio": "portrait"})
    )
    assert result["success"] is True, result
    assert result["provider"] == "image-gen-chain"
    assert result["extra"]["chain"] == {"tried": ["stepfun"], "succeeded": "stepfun"}
    assert Path(result["image"]).read_bytes() == PNG
    assert Path(result["image"]).parent == hermes_home / "cache" / "images"
    [request] = stepfun.posts()
    assert request.json["prompt"] == "a blue sphere"
    assert request.json["size"] == "1360x768"


def test_the_chain_falls_back_when_stepfun_fails(
    compat_kernel: Any, hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LocalServer(default=Reply(503, {"error": {"message": "down"}})) as server:
        monkeypatch.setenv("STEPFUN_BASE_URL", server.base_url)
        monkeypatch.setenv("STEPFUN_API_KEY", "fake-stepfun-key")
        write_plugin(hermes_home, "minimax", MINIMAX_PLUGIN)
        k = compat_kernel(PACKAGE, config=_config("image-gen-chain"))
        assert k.slots.get("image_gen", "minimax").plugin == "minimax"

        result = _json(k.tools.dispatch("generate_image", {"prompt": "a green hill"}))
        # StepFun was tried, failed on the server's 503, and the chain went on to minimax.
        assert [s.path for s in server.posts()] == [GENERATIONS]

    assert result["success"] is True, result
    assert result["provider"] == "image-gen-chain"
    assert result["extra"]["chain"] == {"tried": ["stepfun", "minimax"], "succeeded": "minimax"}
    assert result["image"] == "/dev/null/minimax.png"


def test_the_chain_reports_exhaustion_when_every_backend_fails(
    compat_kernel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LocalServer(default=Reply(401, {"error": {"message": "bad key"}})) as server:
        monkeypatch.setenv("STEPFUN_BASE_URL", server.base_url)
        monkeypatch.setenv("STEPFUN_API_KEY", "fake-stepfun-key")
        k = compat_kernel(PACKAGE, config=_config("image-gen-chain"))
        result = _json(k.tools.dispatch("generate_image", {"prompt": "a yellow star"}))
        assert len(server.posts()) == 1

    assert result["success"] is False
    assert result["provider"] == "image-gen-chain"
    assert result["error_type"] == "chain_exhausted"
    assert "stepfun" in result["error"]


def test_without_a_key_stepfun_is_unavailable_and_the_chain_skips_it(
    compat_kernel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LocalServer() as server:
        monkeypatch.setenv("STEPFUN_BASE_URL", server.base_url)
        monkeypatch.delenv("STEPFUN_API_KEY", raising=False)
        k = compat_kernel(PACKAGE, config=_config("stepfun"))
        rows = {(r.slot, r.name): r for r in k.providers.status()}
        assert rows[("image_gen", "stepfun")].available is False
        assert rows[("image_gen", "stepfun")].active is True
        # The chosen one stays the tool, as in Hermes: a call names the provider and what it lacks.
        answer = json.loads(k.tools.dispatch("generate_image", {"prompt": "a grey cloud"}))
        assert answer["error_type"] == "provider_unavailable" and answer["provider"] == "stepfun"
        assert "image generator 'stepfun' is not available" in answer["error"]

        # The chain counts a registered backend as enough to be available, and skips unavailable ones.
        chain = k.slots.get("image_gen", "image-gen-chain").obj
        assert chain.is_available() is True
        result = chain.generate("a grey cloud")
        assert server.seen == []

    assert result["success"] is False
    assert result["error_type"] == "chain_exhausted"
    assert result["provider"] == "image-gen-chain"
