"""Tool schemas a plugin builds to hurt the kernel: nested without end, containing themselves, with NaN
or objects inside.  Each fails its plugin's ``register()`` with the tool and the problem named (the
plugin rolled back, its neighbours loaded); a schema JSON can read (a tuple, a key that is a number)
is read as JSON reads it.

Real plugin directories loaded by ``Kernel.load()``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kernel import Kernel
from kernel.tools.registry import MAX_SCHEMA_DEPTH

NEIGHBOUR = """\
def register(ctx):
    ctx.register_tool("echo", "demo", {"name": "echo", "parameters": {"type": "object"}}, lambda a, **k: "{}")
"""


def schema_plugin(plugin_dir: Callable[..., Path], build: str) -> None:
    """A plugin whose ``register(ctx)`` registers tool ``t`` with the schema ``build`` makes."""
    code = (
        "import collections, math\n\n\ndef make():\n"
        + "".join(f"    {line}\n" for line in build.strip().splitlines())
        + '\n\ndef register(ctx):\n    ctx.register_tool("t", "demo", make(), lambda a, **k: "{}")\n'
    )
    plugin_dir("hostile", code)
    plugin_dir("neighbour", NEIGHBOUR)


def nested(depth: int) -> str:
    return (
        'inner = {"type": "string"}\n'
        f"for _ in range({depth}):\n"
        '    inner = {"type": "object", "properties": {"a": inner}}\n'
        'return {"name": "t", "parameters": inner}'
    )


@pytest.mark.parametrize(
    ("build", "problem"),
    [
        pytest.param(nested(10_000), f"nests deeper than {MAX_SCHEMA_DEPTH} levels", id="10000-levels"),
        pytest.param(
            nested(MAX_SCHEMA_DEPTH // 2), f"nests deeper than {MAX_SCHEMA_DEPTH} levels", id="one-level-over"
        ),
        pytest.param(
            'schema = {"name": "t", "parameters": {"type": "object", "properties": {}}}\n'
            'schema["parameters"]["properties"]["me"] = schema\nreturn schema',
            "contains itself",
            id="itself",
        ),
        pytest.param(
            'return {"name": "t", "parameters": {"type": "object", "properties": '
            '{"a": {"type": "number", "default": math.nan}}}}',
            "not JSON-serialisable",
            id="nan",
        ),
        pytest.param(
            'return {"name": "t", "parameters": {"type": "object", "properties": '
            '{"a": {"default": object()}}}}',
            "not JSON-serialisable",
            id="object",
        ),
        pytest.param(
            'return collections.OrderedDict(name="t", parameters={"type": "object", "properties": '
            '{"a": {"default": (1, math.inf)}}})',
            "not JSON-serialisable",
            id="inf-in-a-tuple",
        ),
    ],
)
def test_a_hostile_schema_fails_only_its_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], build: str, problem: str
) -> None:
    schema_plugin(plugin_dir, build)
    k = make_kernel()
    info = k.plugin("hostile")
    assert not info.enabled and info.error is not None
    assert "tool 't'" in info.error and problem in info.error, info.error
    assert "t" not in k.tools.names()
    assert k.plugin("neighbour").enabled and k.tools.names() == ["echo"]


def test_a_schema_json_can_read_is_read_as_json_reads_it(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    """Tuples become lists, number keys strings, an OrderedDict a dict: what the model is sent."""
    schema_plugin(
        plugin_dir,
        'return collections.OrderedDict(name="t", parameters={"type": "object", "properties": '
        '{"a": {"type": "string", "enum": ("x", "y")}, 7: {"type": "integer"}}, "required": ("a",)})',
    )
    k = make_kernel()
    assert k.plugin("hostile").enabled, k.plugin("hostile").error
    (schema,) = [s["function"] for s in k.tools.schemas() if s["function"]["name"] == "t"]
    assert schema["parameters"] == {
        "type": "object",
        "properties": {"a": {"type": "string", "enum": ["x", "y"]}, "7": {"type": "integer"}},
        "required": ["a"],
    }
    assert type(schema) is dict and type(schema["parameters"]["required"]) is list


def test_the_deepest_schema_allowed_loads(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    # nested(n) puts the string schema n + 1 levels under the top-level dict (parameters, then n objects).
    schema_plugin(plugin_dir, nested((MAX_SCHEMA_DEPTH - 2) // 2))
    k = make_kernel()
    assert k.plugin("hostile").enabled, k.plugin("hostile").error
