"""Hostile middleware answers: whatever a ``tool_request`` middleware returns, the call cannot crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write_plugin

from kernel import Kernel

pytestmark = pytest.mark.usefixtures("bundled")


def load(home: Path) -> Kernel:
    k = Kernel(home=home)
    k.load()
    return k


def test_a_tool_request_middleware_with_a_hostile_answer_is_skipped(home: Path) -> None:
    """A ``tool_request`` answer whose methods raise (its own ``get`` is never called; its args' ``keys``
    and ``__iter__`` are), or whose args cannot be copied, cannot crash the call: the middleware is
    disabled and skipped, and the tool runs with the arguments as they were."""
    write_plugin(
        home / "plugins",
        "hostile-request",
        "import threading\n"
        "class Nasty(dict):\n"
        "    def get(self, *a):\n"
        "        raise RuntimeError('get exploded')\n"
        "    def keys(self):\n"
        "        raise RuntimeError('keys exploded')\n"
        "    def __iter__(self):\n"
        "        raise RuntimeError('iter exploded')\n"
        "def nasty(**kw):\n"
        "    return Nasty(args=Nasty(x=1))\n"
        "def uncopyable(**kw):\n"
        "    return {'args': {'lock': threading.Lock()}}\n"
        "def echo(args, **kw):\n"
        "    import json\n"
        "    return json.dumps({'got': sorted(args)})\n"
        "def register(ctx):\n"
        "    ctx.register_tool('echo', 't', {'name': 'echo', 'description': 'd', "
        "'parameters': {'type': 'object', 'properties': {}}}, echo)\n"
        "    ctx.register_middleware('tool_request', nasty)\n"
        "    ctx.register_middleware('tool_request', uncopyable)\n",
    )
    k = load(home)
    assert json.loads(k.tools.dispatch("echo", {"keep": True})) == {"got": ["keep"]}
    warnings = k.plugin("hostile-request").warnings
    assert sum("tool_request middleware disabled" in w for w in warnings) == 2, warnings
    assert k.middleware.of("tool_request") == []
    k.shutdown()
