"""hermes-kernel benchmark of the framework adapters (``kernel.integrations.*``).

Each part measures one agent framework's own run with the kernel's adapter
against the same run with the framework's plain tools, wrapping the very same
tool function; 10 directory plugins, each with a ``pre_llm_call`` and a
``post_tool_call`` hook, are loaded from a temporary home (no bundled plugin).
A run is one user prompt, one tool call and a final reply, from the
framework's own offline test model.

- ``pydantic-ai``: ``Agent(FunctionModel, tools=[...])`` against
  ``Agent(FunctionModel, capabilities=[HermesCapability(k)])`` (every run a turn
  of one session: hooks, context, the tool through the kernel's pipeline) and
  against ``toolsets=[hermes_toolset(k)]`` (the tools only); a capability that
  only passes the run on is a reference row: what pydantic-ai's capability path
  costs before the adapter does anything.

Timings are the median of ``--repeat`` repeats of ``--number`` runs each, the
rows interleaved within a repeat.  The ratios are reported against their
targets (the adapter run within 1.10x of the plain one) and never asserted:
the script exits 0 unless the benchmark itself is unsound (a run answered
wrongly, a plugin failed to load).

A part is a function ``bench_<name>(quick) -> dict`` listed in :data:`PARTS`.

Usage::

    python tests/benchmarks/bench_integrations.py [--quick] [--part all|pydantic-ai] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

N_PLUGINS = 10
ADAPTER_TARGET = 1.10  # adapter run / plain framework run

# The tool every row calls: one module, imported by the plugin and by the plain rows alike.
TOOL_MODULE = """
import json

def lookup(args, **kwargs):
    return json.dumps({"found": args["key"], "length": len(args["key"])})
"""

PLUGIN = """
import bench_tool

def pre_llm_call(user_message, **kwargs):
    return "plugin {n} knows the user"

def post_tool_call(tool_name, result, **kwargs):
    return None

def register(ctx):
    ctx.register_hook("pre_llm_call", pre_llm_call)
    ctx.register_hook("post_tool_call", post_tool_call)
{tool}
"""

REGISTER_TOOL = """    schema = {"description": "Look a key up.",
              "parameters": {"type": "object", "properties": {"key": {"type": "string"}},
                             "required": ["key"]}}
    ctx.register_tool("lookup", "bench", schema, bench_tool.lookup)
"""


class BenchError(RuntimeError):
    """The benchmark is not sound: a plugin failed to load or a run answered wrongly."""


def write_home(root: Path) -> Path:
    """A kernel home with :data:`N_PLUGINS` directory plugins (the first owns the tool) and the tool
    module on ``sys.path``; returns the home."""
    home = root / "hermes"
    for n in range(N_PLUGINS):
        plugin = home / "plugins" / f"plugin_{n:02d}"
        plugin.mkdir(parents=True)
        tools = ["lookup"] if n == 0 else []
        (plugin / "plugin.yaml").write_text(
            json.dumps(
                {
                    "name": plugin.name,
                    "version": "1.0",
                    "provides_tools": tools,
                    "provides_hooks": ["pre_llm_call", "post_tool_call"],
                }
            ),
            encoding="utf-8",
        )
        code = PLUGIN.replace("{n}", str(n)).replace("{tool}", REGISTER_TOOL if n == 0 else "")
        (plugin / "__init__.py").write_text(code, encoding="utf-8")
    modules = root / "modules"
    modules.mkdir()
    (modules / "bench_tool.py").write_text(TOOL_MODULE, encoding="utf-8")
    sys.path.insert(0, str(modules))
    return home


def load_kernel(root: Path) -> Any:
    """A loaded kernel over :func:`write_home`'s plugins only (the bundled ones left out)."""
    empty = root / "no-bundled"
    empty.mkdir()
    os.environ["HERMES_BUNDLED_PLUGINS"] = str(empty)
    from kernel import Kernel

    k = Kernel(home=write_home(root))
    k.load()
    broken = [(p.name, p.error) for p in k.plugins if not p.enabled]
    if broken or len(k.plugins) != N_PLUGINS:
        raise BenchError(f"plugins did not all load: {broken or [p.name for p in k.plugins]}")
    return k


def timed(
    rows: dict[str, Callable[[], Awaitable[Any]]], number: int, repeat: int
) -> dict[str, dict[str, float]]:
    """Microseconds per call of each row: the median (and the best) of ``repeat`` repeats of ``number``
    calls, the rows interleaved within each repeat, after a warm-up."""

    async def run() -> dict[str, list[float]]:
        spent: dict[str, list[float]] = {name: [] for name in rows}
        for call in rows.values():
            for _ in range(max(number // 10, 3)):
                await call()
        for _ in range(repeat):
            for name, call in rows.items():
                start = time.perf_counter()
                for _ in range(number):
                    await call()
                spent[name].append((time.perf_counter() - start) / number * 1e6)
        return spent

    spent = asyncio.run(run())
    return {
        name: {"median_us": statistics.median(times), "best_us": min(times)} for name, times in spent.items()
    }


# -- part: pydantic-ai ---------------------------------------------------------------------


def bench_pydantic_ai(quick: bool) -> dict[str, Any]:
    """One pydantic-ai run with one tool call: plain tools against ``HermesCapability`` and
    ``hermes_toolset``, with 10 plugins loaded."""
    from pydantic_ai import Agent, Tool
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from kernel.integrations.pydantic_ai import HermesCapability, hermes_toolset

    number, repeat = (20, 3) if quick else (200, 7)
    with tempfile.TemporaryDirectory(prefix="bench-integrations-") as tmp:
        k = load_kernel(Path(tmp))
        import bench_tool

        def model(messages: list[Any], info: Any) -> ModelResponse:
            last = messages[-1]
            if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
                return ModelResponse(parts=[TextPart("the key is found")])
            return ModelResponse(parts=[ToolCallPart("lookup", '{"key": "k1"}', tool_call_id="call-1")])

        def lookup(key: str) -> str:
            """Look a key up."""
            return bench_tool.lookup({"key": key})

        class NoOp(AbstractCapability[Any]):
            """A capability that only passes the run on: what pydantic-ai's capability path costs itself."""

            async def wrap_run(self, ctx: Any, *, handler: Any) -> Any:
                return await handler()

        plain = Agent(FunctionModel(model), tools=[Tool(lookup, takes_ctx=False)])
        no_op = Agent(FunctionModel(model), tools=[Tool(lookup, takes_ctx=False)], capabilities=[NoOp()])
        hermes = HermesCapability(k)
        adapted = Agent(FunctionModel(model), capabilities=[hermes])
        toolset = hermes_toolset(k)
        tools_only = Agent(FunctionModel(model), toolsets=[toolset])
        agents = {
            "plain tools": plain,
            "no-op capability": no_op,
            "HermesCapability": adapted,
            "hermes_toolset": tools_only,
        }

        async def check() -> None:
            for name, agent in agents.items():
                result = await agent.run("find k1")
                returned = [
                    p.content
                    for m in result.all_messages()
                    if isinstance(m, ModelRequest)
                    for p in m.parts
                    if isinstance(p, ToolReturnPart)
                ]
                if returned != [bench_tool.lookup({"key": "k1"})] or result.output != "the key is found":
                    raise BenchError(f"{name}: the run answered {result.output!r} with results {returned!r}")

        asyncio.run(check())
        rows = {name: (lambda agent=agent: agent.run("find k1")) for name, agent in agents.items()}
        try:
            times = timed(rows, number, repeat)
        finally:
            hermes.close()
            toolset.close()
            k.shutdown()
    base = times["plain tools"]["median_us"]
    return {
        "part": "pydantic-ai",
        "number": number,
        "repeat": repeat,
        "rows": [
            {
                "row": name,
                **t,
                "ratio": t["median_us"] / base,
                "target": None if name in ("plain tools", "no-op capability") else ADAPTER_TARGET,
            }
            for name, t in times.items()
        ],
    }


PARTS: dict[str, Callable[[bool], dict[str, Any]]] = {"pydantic-ai": bench_pydantic_ai}


# -- the report ----------------------------------------------------------------------------


def environment() -> dict[str, str]:
    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "pydantic-ai-slim": version("pydantic-ai-slim"),
    }


def print_part(result: dict[str, Any]) -> None:
    print(
        f"\n{result['part']}: one run, one tool call, {N_PLUGINS} plugins "
        f"(median of {result['repeat']} x {result['number']} runs)"
    )
    print(f"{'row':<20} {'us/run':>10} {'best':>10} {'ratio':>7}  target")
    for row in result["rows"]:
        target = row["target"]
        if target is not None:
            verdict = f"<= {target:.2f}x: {'met' if row['ratio'] <= target else 'NOT met'}"
        else:
            verdict = "baseline" if row["ratio"] == 1 else "reference (the framework's own cost)"
        times = f"{row['median_us']:>10.1f} {row['best_us']:>10.1f} {row['ratio']:>6.2f}x"
        print(f"{row['row']:<20} {times}  {verdict}")


def main(argv: list[str] | None = None) -> int:
    """Run the parts asked for, print their tables; 0 unless a benchmark is unsound."""
    parser = argparse.ArgumentParser(description="hermes-kernel framework adapter benchmark")
    parser.add_argument("--quick", action="store_true", help="few runs per repeat, 3 repeats")
    parser.add_argument("--part", choices=("all", *PARTS), default="all", help="run one part only")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE ('-': stdout)")
    options = parser.parse_args(argv)
    env = environment()
    print("hermes-kernel integrations benchmark: " + ", ".join(f"{k} {v}" for k, v in env.items()))
    results = []
    for name, part in PARTS.items():
        if options.part not in ("all", name):
            continue
        print(f"{name} ...", file=sys.stderr, flush=True)
        try:
            result = part(options.quick)
        except BenchError as exc:
            print(f"benchmark error in {name}: {exc}", file=sys.stderr)
            return 2
        print_part(result)
        results.append(result)
    if options.json:
        text = json.dumps({"environment": env, "quick": options.quick, "parts": results}, indent=2)
        if options.json == "-":
            print(text)
        else:
            Path(options.json).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
