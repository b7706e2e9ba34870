"""Hook dispatch in Hermes Agent itself, for ``bench_kernel.py --peer-python`` (``make bench-peers``).

Runs under the interpreter of a separate venv that has ``hermes-agent`` installed
(never the project's venv).  It loads the benchmark's 10 hook plugins through
Hermes' own discovery (``HERMES_HOME`` is the home the parent wrote, with
``plugins.enabled`` naming them), then times, interleaved as the parent does
(the same ``time_rows``): a plain inline loop over the very callbacks Hermes
registered, the same loop in a function, Hermes' ``PluginManager.invoke_hook``,
and for ``pre_llm_call`` the call plus the merge Hermes applies to its results
(a dict's ``context`` or a non-blank string, joined with blank lines; the
spill-to-disk step is left out, so Hermes' real cost is a little higher).
Prints one ``PEER-RESULT`` JSON line.

Usage (by the parent)::

    <peer python> peer_hermes.py HOME NUMBER REPEAT
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_kernel import POST_KWARGS, PRE_KWARGS, _plain_post, _plain_pre, time_rows

PLAIN = (
    "results = []\n"
    "for cb in callbacks:\n"
    "    r = cb(**kwargs)\n"
    "    if r is not None:\n"
    "        results.append(r)"
)


def merge(results: list[Any]) -> str:
    """Hermes' pre_llm_call merge (agent/turn_context.py), without the spill to disk."""
    parts = []
    for r in results:
        if isinstance(r, dict) and r.get("context"):
            parts.append(str(r["context"]))
        elif isinstance(r, str) and r.strip():
            parts.append(r)
    return "\n\n".join(parts)


def main() -> int:
    home, number, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    os.environ["HERMES_HOME"] = home

    from hermes_cli.plugins import PluginManager

    pm = PluginManager()
    pm.discover_and_load()
    out: dict[str, Any] = {"hooks": {}, "python": sys.version.split()[0]}
    for hook, given, plain in (
        ("post_tool_call", POST_KWARGS, _plain_post),
        ("pre_llm_call", PRE_KWARGS, _plain_pre),
    ):
        callbacks = list(pm._hooks.get(hook, []))
        if len(callbacks) != 10 or any("bench_" not in getattr(cb, "__module__", "") for cb in callbacks):
            print(json.dumps({"error": f"Hermes registered {callbacks!r} for {hook}"}))
            return 2
        # Hermes adds this argument to every call; the plain rows get it too, so all rows do the same work.
        kwargs = {**given, "telemetry_schema_version": "hermes.observer.v1"}
        namespace = {
            "callbacks": callbacks,
            "kwargs": kwargs,
            "pm": pm,
            "merge": merge,
            "plain_func": plain(callbacks),
        }
        if hook == "post_tool_call":
            rows = {
                "plain-loop": PLAIN,
                "plain-func": "plain_func(**kwargs)",
                "hermes": "pm.invoke_hook('post_tool_call', **kwargs)",
            }
        else:
            rows = {
                "plain-loop": PLAIN + "\ntext = '\\n\\n'.join(results)",
                "plain-func": "plain_func(**kwargs)",
                "hermes": "merge(pm.invoke_hook('pre_llm_call', **kwargs))",
            }
        samples = time_rows(rows, namespace, number, repeat)
        best = {key: min(values) for key, values in samples.items()}
        out["hooks"][hook] = {
            "best_us": best,
            "hermes_vs_plain": best["hermes"] / best["plain-loop"],
            "plain_func_vs_plain": best["plain-func"] / best["plain-loop"],
        }
    print("PEER-RESULT " + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
