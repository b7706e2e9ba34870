"""What a memory provider hands over before a compression (``on_pre_compress``) goes on to the context
engine, and from there to a model: secrets in it are hidden and its size is bounded, as Hermes 0.19's
``sanitize_memory_context`` does, on the agent loop's own path too."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conftest import write_plugin
from test_memory_hermes import (  # noqa: F401  (bundled_checkout and kernel: its fixtures)
    MEMORY_AWARE_ENGINE,
    ONE_TOOL_TURN,
    RECORDING_MEMORY,
    bundled_checkout,
    kernel,
    memory_plugin,
)

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.providers.context_engine import MEMORY_CONTEXT_MAX_CHARS

SECRET = "sk-live-0123456789abcdef0123456789abcdef"


def test_a_secret_and_a_flood_in_the_memory_context_never_reach_the_engine(
    home: Path,
    kernel: Callable[..., Kernel],  # noqa: F811
) -> None:
    leaky = RECORDING_MEMORY.replace(
        'return "Keep in mind: the user\'s favourite colour is teal."',
        f"return 'api_key={SECRET} Authorization: Bearer {SECRET} ' + 'x' * 200_000",
    )
    assert leaky != RECORDING_MEMORY
    memory_plugin(home, leaky)
    write_plugin(home / "plugins", "context_engine/memory-aware", MEMORY_AWARE_ENGINE, manifest="")
    k = kernel(ONE_TOOL_TURN, memory={"provider": "recording"}, context={"engine": "memory-aware"})
    with AgentSession(k) as session:
        session.run("What is 2**16?")
    (given,) = k.providers.context_engine().contexts
    assert SECRET not in given
    assert given.startswith("api_key=")
    assert len(given) <= MEMORY_CONTEXT_MAX_CHARS + 100
