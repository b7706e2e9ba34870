"""Hostile multimodal tool results (Hermes' ``{"_multimodal": True, "content": [...]}`` envelope): every
bound the kernel promises holds, and a result that breaks one is an error for the model, never a crash."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import run_json

from kernel import Kernel
from kernel.tools.registry import MAX_MULTIMODAL_PARTS

TOOL = """
import json

def shot(args, **kwargs):
    kind = args["kind"]
    if kind == "many":
        return {"_multimodal": True, "content": [{"type": "text", "text": "x"}] * (MAX_PARTS + 1)}
    if kind == "deep":
        inner = {"type": "text"}
        for _ in range(10_000):
            inner = {"type": "text", "nested": inner}
        return {"_multimodal": True, "content": [inner]}
    if kind == "subclass":
        class Sneaky(dict):
            def get(self, key, default=None):
                raise RuntimeError("get() of a hostile dict")
        return Sneaky(_multimodal=True, content=[{"type": "text", "text": "x"}])
    if kind == "nan":
        return {"_multimodal": True, "content": [{"type": "text", "value": float("nan")}]}
    if kind == "not-parts":
        return {"_multimodal": True, "content": ["a string, not a part"]}
    if kind == "truthy-flag":
        return {"_multimodal": 1, "content": [{"type": "text", "text": "x"}]}
    return {"_multimodal": True, "content": [{"type": "text", "text": "fine"}]}

def register(ctx):
    ctx.register_tool("shot", "screen", {"description": "x", "parameters": {"type": "object",
                      "properties": {"kind": {"type": "string"}}}}, shot)
""".replace("MAX_PARTS", str(MAX_MULTIMODAL_PARTS))


@pytest.mark.parametrize("kind", ["many", "deep", "subclass", "nan", "not-parts", "truthy-flag"])
def test_a_hostile_envelope_is_an_error_result_and_the_tool_stays(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], kind: str
) -> None:
    plugin_dir("screen", TOOL)
    k = make_kernel()
    answer = run_json(k.tools.dispatch("shot", {"kind": kind}))
    assert "expected a JSON string" in answer["error"], answer
    fine = json.loads(k.tools.dispatch("shot", {"kind": "fine"}))
    if kind == "deep":
        # A result too deep even to show is the handler's fault: the tool is disabled (the kernel's rule).
        assert "disabled" in fine["error"] and "cannot be shown" in fine["error"]
    else:
        assert fine["content"][0]["text"] == "fine"  # the tool still works afterwards


def test_is_error_result_reads_only_a_json_object_with_an_error_key_and_never_raises() -> None:
    """What the MCP server's ``isError`` and the LangGraph tool message's status are made from: a
    handler's text may be anything — deeply nested, huge, not JSON — and is never an error by accident."""
    from kernel.tools import error_json, is_error_result

    assert is_error_result(error_json("blocked"))
    assert is_error_result(' {"error": null, "detail": 1}')
    assert not is_error_result('{"result": "the word \\"error\\" inside"}')
    assert not is_error_result('["error"]')
    assert not is_error_result('{"error": ')  # broken JSON
    assert not is_error_result('plain text with "error"')
    # Too deep to read within the kernel's JSON bounds: not reported as an error, and no RecursionError.
    deep = '{"error": ' + "[" * 200_000 + "]" * 200_000 + "}"
    assert not is_error_result(deep)
