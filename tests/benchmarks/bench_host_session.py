"""What ``HostSession`` costs a turn: ``begin_turn`` + ``end_turn`` against the same hooks called by hand.

Ten directory plugins in a temporary home, each with ``pre_llm_call`` (a short string),
``post_llm_call``, ``transform_llm_output`` (no replacement) and ``on_session_end``.  A turn by hand is
what a careful host would write without the class: a fresh turn id, ``k.pre_llm_context``,
``post_llm_call``, ``k.first_text("transform_llm_output")``, ``on_session_end``, with the same arguments
(the history copied for the hooks, as the kernel's payloads are snapshots) and the call context set.
Both rows run the very same callbacks; the medians of interleaved repeats are compared (target <= 1.05x).

Usage: ``python tests/benchmarks/bench_host_session.py [--quick]``; ``bench_host_session(quick)`` returns
the figures for another script.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import textwrap
import timeit
from pathlib import Path
from typing import Any

TARGET = 1.05
N_PLUGINS = 10

PLUGIN = """
def context(**kw):
    return "note from {name}"

def observe(**kw):
    return None

def register(ctx):
    ctx.register_hook("pre_llm_call", context)
    ctx.register_hook("post_llm_call", observe)
    ctx.register_hook("transform_llm_output", observe)
    ctx.register_hook("on_session_end", observe)
"""


def _home(root: Path) -> Path:
    for i in range(N_PLUGINS):
        folder = root / "plugins" / f"p{i:02d}"
        folder.mkdir(parents=True)
        (folder / "plugin.yaml").write_text(f"name: p{i:02d}\nversion: '1.0'\n", encoding="utf-8")
        code = textwrap.dedent(PLUGIN.format(name=f"p{i:02d}"))
        (folder / "__init__.py").write_text(code, encoding="utf-8")
    return root


def bench_host_session(quick: bool = False) -> dict[str, Any]:
    """Microseconds per turn for both rows, and their ratio."""
    from kernel import Kernel
    from kernel.integrations import HostSession

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HERMES_BUNDLED_PLUGINS"] = str(Path(tmp) / "no-bundled")
        (Path(tmp) / "no-bundled").mkdir()
        k = Kernel(_home(Path(tmp) / "home"))
        k.load()
        assert sum(p.enabled for p in k.plugins) == N_PLUGINS, [(p.name, p.error) for p in k.plugins]
        session = HostSession(k, session_id="bench", model="m", platform="bench")
        session.begin_turn("warm-up")
        session.end_turn("reply")
        history: list[dict[str, Any]] = []

        def hosted() -> None:
            session.begin_turn("hello", history=history)
            session.end_turn("reply", history=history)

        base = {"session_id": "bench", "model": "m", "platform": "bench"}

        def by_hand() -> None:
            turn_id = f"turn-{os.urandom(6).hex()}"
            with k.tools.call_context(session_id="bench", task_id="bench", turn_id=turn_id):
                context = k.pre_llm_context(
                    **base,
                    task_id="bench",
                    turn_id=turn_id,
                    user_message="hello",
                    conversation_history=copy.deepcopy(history),
                    is_first_turn=False,
                    parent_session_id=None,
                    sender_id=None,
                )
                assert context
            with k.tools.call_context(session_id="bench", task_id="bench", turn_id=turn_id):
                k.invoke_hook(
                    "post_llm_call",
                    **base,
                    task_id="bench",
                    turn_id=turn_id,
                    user_message="hello",
                    assistant_response="reply",
                    conversation_history=copy.deepcopy(history),
                )
                k.first_text("transform_llm_output", response_text="reply", **base)
                k.invoke_hook("on_session_end", **base, completed=True, interrupted=False)

        number = 200 if quick else 2000
        repeats = 5 if quick else 15
        rows: dict[str, list[float]] = {"by hand": [], "HostSession": []}
        for _ in range(repeats):  # interleaved, so that a noisy moment hits both rows
            for name, fn in (("by hand", by_hand), ("HostSession", hosted)):
                rows[name].append(timeit.timeit(fn, number=number) / number * 1e6)
        session.close()
        k.shutdown()
    hand, hosted_us = statistics.median(rows["by hand"]), statistics.median(rows["HostSession"])
    return {
        "by_hand_us": round(hand, 2),
        "host_session_us": round(hosted_us, 2),
        "ratio": round(hosted_us / hand, 3),
        "target": TARGET,
        "met": hosted_us / hand <= TARGET,
    }


def print_host_session(result: dict[str, Any]) -> None:
    print(f"HostSession turn (begin + end), {N_PLUGINS} plugins, 4 hooks each")
    print(f"  by hand        {result['by_hand_us']:9.2f} us/turn  1.00x")
    print(
        f"  HostSession    {result['host_session_us']:9.2f} us/turn  {result['ratio']:.2f}x"
        f"  (target <= {TARGET:.2f}x: {'met' if result['met'] else 'NOT met'})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    args = parser.parse_args(argv)
    print_host_session(bench_host_session(args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
