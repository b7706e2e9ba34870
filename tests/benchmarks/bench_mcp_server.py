"""The kernel as an MCP server: a ``tools/call`` round trip through ``hermes-kernel mcp serve``.

Three servers expose the same function, ``add(a, b) -> '{"sum": a + b}'``, each a real process
spoken to over its stdin and stdout by the ``mcp`` SDK's own stdio client:

* ``plain low-level``: a script on the SDK's low-level ``Server`` (the layer ``mcp serve`` is built
  on), answering the call in its handler;
* ``plain to_thread``: the same script, but the handler runs the function on a worker thread (as a
  server must that does not want a slow function to stall the other requests of the connection);
* ``plain FastMCP``: the same function behind the SDK's ``FastMCP`` decorator (what most plain
  servers are written with);
* ``hermes-kernel``: ``hermes-kernel mcp serve`` on a temporary home whose one plugin registers the
  function as a tool (no bundled plugins): the call goes through the kernel's tool pipeline.

One client holds a session with each; after a warm-up, calls are timed one at a time, in rounds
that visit the servers in turn (so that a slower moment of the machine weighs on all three), and
the median round trip of each is reported.  Target: ``hermes-kernel`` <= 1.20x ``plain low-level``.
The script reports whether it was met and exits 0 either way; it exits non-zero only when the
benchmark is not sound (a server does not start, or answers something else).

Usage::

    python tests/benchmarks/bench_mcp_server.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

RATIO_TARGET = 1.20
REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "hermes-kernel"

FUNCTION = """
import json


def add(a, b):
    return json.dumps({"sum": a + b})
"""

LOWLEVEL = (
    FUNCTION
    + """
import sys

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
          "required": ["a", "b"]}
server = Server("plain")
THREAD = sys.argv[1:] == ["--thread"]


@server.list_tools()
async def list_tools():
    return [types.Tool(name="add", description="Add two integers.", inputSchema=SCHEMA)]


@server.call_tool(validate_input=False)
async def call_tool(name, arguments):
    text = await anyio.to_thread.run_sync(lambda: add(**arguments)) if THREAD else add(**arguments)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
"""
)

FASTMCP = (
    FUNCTION.replace("def add(a, b):", "def add(a: int, b: int) -> str:")
    + """
from mcp.server.fastmcp import FastMCP

server = FastMCP("plain")
server.tool(description="Add two integers.")(add)
server.run("stdio")
"""
)

PLUGIN = (
    FUNCTION.replace("def add(a, b):", "def _add(a, b):")
    + """
SCHEMA = {
    "description": "Add two integers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]},
}


def add(args, **kw):
    return _add(args["a"], args["b"])


def register(ctx):
    ctx.register_tool("add", "bench", SCHEMA, add)
"""
)


def _servers(root: Path) -> dict[str, StdioServerParameters]:
    """The three servers' commands, their files written under ``root``."""
    (root / "lowlevel.py").write_text(LOWLEVEL, encoding="utf-8")
    (root / "fastmcp.py").write_text(FASTMCP, encoding="utf-8")
    home, bundled = root / "home", root / "bundled"
    (home / "plugins" / "bench").mkdir(parents=True)
    bundled.mkdir()
    (home / "plugins" / "bench" / "plugin.yaml").write_text("name: bench\nversion: 1.0.0\n", encoding="utf-8")
    (home / "plugins" / "bench" / "__init__.py").write_text(PLUGIN, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    kernel_env = {**env, "HERMES_HOME": str(home), "HERMES_BUNDLED_PLUGINS": str(bundled)}
    return {
        "plain low-level": StdioServerParameters(
            command=sys.executable, args=[str(root / "lowlevel.py")], env=env
        ),
        "plain to_thread": StdioServerParameters(
            command=sys.executable, args=[str(root / "lowlevel.py"), "--thread"], env=env
        ),
        "plain FastMCP": StdioServerParameters(
            command=sys.executable, args=[str(root / "fastmcp.py")], env=env
        ),
        "hermes-kernel": StdioServerParameters(command=str(SCRIPT), args=["mcp", "serve"], env=kernel_env),
    }


@contextlib.asynccontextmanager
async def _session(params: StdioServerParameters, errlog: Any) -> AsyncIterator[ClientSession]:
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(120):
            await session.initialize()
        yield session


async def _call(session: ClientSession, n: int) -> float:
    """One timed round trip; checks the answer."""
    start = time.perf_counter()
    result = await session.call_tool("add", {"a": n, "b": 1})
    elapsed = time.perf_counter() - start
    content = result.content[0]
    if (
        result.isError
        or not isinstance(content, types.TextContent)
        or content.text != json.dumps({"sum": n + 1})
    ):
        raise SystemExit(f"unsound benchmark: add({n}, 1) answered {result!r}")
    return elapsed


async def _measure(servers: dict[str, StdioServerParameters], root: Path, quick: bool) -> dict[str, Any]:
    warm_up, rounds, per_round = (20, 5, 20) if quick else (200, 20, 150)
    samples: dict[str, list[float]] = {}
    with open(root / "stderr.log", "w", encoding="utf-8") as errlog:
        async with contextlib.AsyncExitStack() as stack:
            sessions = {}
            for name, params in servers.items():
                sessions[name] = await stack.enter_async_context(_session(params, errlog))
                for n in range(warm_up):
                    await _call(sessions[name], n)
                samples[name] = []
            for _ in range(rounds):
                for name, session in sessions.items():
                    for n in range(per_round):
                        samples[name].append(await _call(session, n))
    rows = {}
    for name, times in samples.items():
        ordered = sorted(times)
        rows[name] = {
            "median_us": statistics.median(ordered) * 1e6,
            "p90_us": ordered[int(len(ordered) * 0.9) - 1] * 1e6,
            "calls": len(ordered),
        }
    base = rows["plain low-level"]["median_us"]
    for row in rows.values():
        row["vs_plain"] = row["median_us"] / base
    ratio = rows["hermes-kernel"]["vs_plain"]
    return {
        "warm_up": warm_up,
        "calls": rounds * per_round,
        "rows": rows,
        "ratio": ratio,
        "target": RATIO_TARGET,
        "met": ratio <= RATIO_TARGET,
    }


def _in_process(home: Path, bundled: Path, quick: bool) -> dict[str, float]:
    """Where the kernel's time goes, in this process: the function alone, the kernel's tool pipeline
    (``HostSession.dispatch``), a bare thread hop, and ``HostSession.adispatch`` (the pipeline on a
    worker thread, as ``mcp serve`` runs it); medians in microseconds."""
    import asyncio

    os.environ["HERMES_BUNDLED_PLUGINS"] = str(bundled)
    from kernel import Kernel
    from kernel.integrations import HostSession

    calls = 500 if quick else 5000
    namespace: dict[str, Any] = {}
    exec(FUNCTION, namespace)  # the very function the servers expose
    add = namespace["add"]

    def median_of(fn: Any) -> float:
        times = []
        for n in range(calls):
            start = time.perf_counter()
            fn(n)
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e6

    with Kernel(home=home) as k:
        k.load()
        session = HostSession(k, platform="mcp")
        figures = {
            "function": median_of(lambda n: add(n, 1)),
            "dispatch": median_of(lambda n: session.dispatch("add", {"a": n, "b": 1}, tool_call_id=str(n))),
        }

        async def hops() -> None:
            loop = asyncio.get_running_loop()

            async def median_async(make: Any) -> float:
                times = []
                for n in range(calls):
                    start = time.perf_counter()
                    await make(n)
                    times.append(time.perf_counter() - start)
                return statistics.median(times) * 1e6

            figures["thread hop"] = await median_async(lambda n: loop.run_in_executor(None, add, n, 1))
            figures["adispatch"] = await median_async(
                lambda n: session.adispatch("add", {"a": n, "b": 1}, tool_call_id=str(n))
            )

        asyncio.run(hops())
        session.close()
    return figures


def bench_mcp_server(quick: bool) -> dict[str, Any]:
    """Run the benchmark; its figures: per server ``median_us``, ``p90_us``, ``vs_plain``; the ratio
    of ``hermes-kernel`` to ``plain low-level`` and whether it met the target; ``in_process_us``."""
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        root = Path(tmp)
        result = anyio.run(_measure, _servers(root), root, quick)
        saved = os.environ.get("HERMES_BUNDLED_PLUGINS")
        try:
            result["in_process_us"] = _in_process(root / "home", root / "bundled", quick)
        finally:
            if saved is None:
                os.environ.pop("HERMES_BUNDLED_PLUGINS", None)
            else:
                os.environ["HERMES_BUNDLED_PLUGINS"] = saved
    return result


def report(result: dict[str, Any]) -> str:
    lines = [
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"mcp {metadata.version('mcp')}; CPU count: {os.cpu_count()}",
        f"MCP tools/call round trip over stdio, one client: median of {result['calls']} calls "
        f"after {result['warm_up']} warm-up calls",
        "",
        f"{'server':<18}{'median us':>12}{'p90 us':>12}{'vs plain':>11}",
    ]
    for name, row in result["rows"].items():
        lines.append(f"{name:<18}{row['median_us']:>12.1f}{row['p90_us']:>12.1f}{row['vs_plain']:>10.2f}x")
    inside = result["in_process_us"]
    lines += [
        "",
        "in this process (median us): " + ", ".join(f"{name} {value:.1f}" for name, value in inside.items()),
        "  (dispatch: the kernel's tool pipeline; adispatch: the pipeline on a worker thread, as served)",
    ]
    verdict = "met" if result["met"] else "NOT met"
    lines += [
        "",
        f"target: hermes-kernel / plain low-level = {result['ratio']:.2f}x "
        f"(<= {result['target']:.2f}x): {verdict}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    result = bench_mcp_server(args.quick)
    print(report(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
