"""hermes-kernel benchmark (``make bench``).

A. Hook dispatch with 10 plugins, in microseconds per call, for ``post_tool_call``
   (callbacks return None) and ``pre_llm_call`` (callbacks return a short string,
   merged into one context).  Every row calls the very same 10 function objects
   with the same keyword arguments: a plain Python loop (the baseline), a bare
   loop, the plain loop inside a function, raw pluggy, the kernel with 10 real
   directory plugins (``k.invoke_hook`` / ``k.pre_llm_context`` and ``k.pm.hook``),
   and the kernel with 10 pluggy-native plugins.  With ``--peer-python`` (``make
   bench-peers``), Hermes Agent's own ``invoke_hook`` (and its ``pre_llm_call``
   merge) on the same plugin code, in its own venv, against its own plain loop.
B. Discovery + ``Kernel(home).load()`` of 10, 100 and 500 generated directory
   plugins, each run in a fresh process, after a warm-up process has written the
   bytecode caches and the kernel's own (as in a real install, whose files are
   older than the caches' two-second window: the generated files are dated back).
C. Start-up against Hermes Agent (``bench_startup.py``): a cold ``plugins list``,
   ``import kernel``, and discovery + load of 500 plugins with the peak RSS.

Targets: ``k.invoke_hook`` and ``k.pre_llm_context`` within 1.1x of the plain
loop, ``k.pm.hook.<name>`` no slower than raw pluggy (issue 13); load under 0.4
ms per plugin.  The script reports whether they were met and exits 0 either way;
it exits non-zero only when the benchmark itself is not sound (a plugin failed
to load, results differ between rows).

Usage::

    python tests/benchmarks/bench_kernel.py [--quick] [--json FILE] [--part all|dispatch|load|startup]
                                            [--peer-python .venv-peers/bin/python]
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import timeit
import types
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_startup import StartupError, age_tree, bench_startup, clean_env, print_startup

DISPATCH_TARGET = 1.10  # kernel / plain loop
LOAD_TARGET_MS = 0.40  # per plugin
N_HOOK_PLUGINS = 10
CHUNKS = 10  # slices per timing repeat, interleaved across the rows

POST_TOOL_ARGS = (
    "tool_name",
    "args",
    "result",
    "task_id",
    "session_id",
    "tool_call_id",
    "turn_id",
    "api_request_id",
    "duration_ms",
    "status",
    "error_type",
    "error_message",
    "telemetry_schema_version",
    "middleware_trace",
)
PRE_LLM_ARGS = (
    "session_id",
    "task_id",
    "turn_id",
    "user_message",
    "conversation_history",
    "is_first_turn",
    "model",
    "platform",
    "parent_session_id",
    "sender_id",
)

POST_KWARGS: dict[str, Any] = {
    "tool_name": "calculate",
    "args": {"expression": "2 + 2"},
    "result": '{"result": 4}',
    "task_id": "task-1",
    "session_id": "session-1",
    "tool_call_id": "call-1",
    "turn_id": "turn-1",
    "api_request_id": "req-1",
    "duration_ms": 3,
    "status": "ok",
    "error_type": None,
    "error_message": None,
    "telemetry_schema_version": "hermes.observer.v1",
    "middleware_trace": [],
}
PRE_KWARGS: dict[str, Any] = {
    "session_id": "session-1",
    "task_id": "task-1",
    "turn_id": "turn-1",
    "user_message": "What is 2 + 2?",
    "conversation_history": [{"role": "user", "content": "hello"}],
    "is_first_turn": False,
    "model": "some-model",
    "platform": "cli",
    "parent_session_id": None,
    "sender_id": "user-1",
    # The kernel adds it to every hook call, as Hermes does: the plain rows pass it, so every row's
    # callbacks are given the same arguments.
    "telemetry_schema_version": "hermes.observer.v1",
}

# Each hook plugin: two Hermes-style callbacks (named arguments + **kwargs), so
# that pluggy, which passes the arguments an impl names, can call the very same
# functions.
HOOK_PLUGIN_CODE = """\
def on_post_tool_call(
    tool_name, args, result, task_id, session_id, tool_call_id, turn_id,
    api_request_id, duration_ms, status, error_type, error_message, **kwargs
):
    return None


def on_pre_llm_call(
    session_id, task_id, turn_id, user_message, conversation_history,
    is_first_turn, model, platform, parent_session_id, sender_id, **kwargs
):
    return CONTEXT


CONTEXT = "context from {name}"


def register(ctx):
    ctx.register_hook("post_tool_call", on_post_tool_call)
    ctx.register_hook("pre_llm_call", on_pre_llm_call)
"""

HOOK_PLUGIN_MANIFEST = """\
name: {name}
version: 0.1.0
description: benchmark hook plugin
provides_hooks: [post_tool_call, pre_llm_call]
"""

GEN_PLUGIN_CODE = """\
import json

SCHEMA = {{
    "name": "{tool}",
    "description": "Echo a text back (generated benchmark tool {index}).",
    "parameters": {{
        "type": "object",
        "properties": {{"text": {{"type": "string", "description": "The text to echo."}}}},
        "required": ["text"],
    }},
}}


def echo(args, **kwargs):
    return json.dumps({{"text": args.get("text", "")}})


def observe(tool_name, result, **kwargs):
    return None


def register(ctx):
    ctx.register_tool("{tool}", "bench", SCHEMA, echo)
    ctx.register_hook("post_tool_call", observe)
"""

GEN_PLUGIN_MANIFEST = """\
name: {name}
version: 1.0.{index}
description: generated benchmark plugin {index}
author: bench
provides_tools: [{tool}]
provides_hooks: [post_tool_call]
"""

# Run in a fresh interpreter: times `import kernel`, `Kernel(home)` and `.load()`.
# Only sys and time are imported before kernel, so the import time is honest.
LOAD_CHILD_CODE = """\
import sys, time
t0 = time.perf_counter()
import kernel
t1 = time.perf_counter()
home, expected = sys.argv[1], int(sys.argv[2])
t2 = time.perf_counter()
k = kernel.Kernel(home)
t3 = time.perf_counter()
k.load()
t4 = time.perf_counter()
import json
plugins = k.plugins
report = {
    "import_ms": (t1 - t0) * 1e3,
    "ctor_ms": (t3 - t2) * 1e3,
    "load_ms": (t4 - t3) * 1e3,
    "plugins": len(plugins),
    "loaded": sum(1 for p in plugins if p.enabled and p.source == "user"),
    "failed": [p.name + ": " + str(p.error) for p in plugins if not p.enabled][:5],
    "warnings": sum(len(p.warnings) for p in plugins),
    "tools": sum(1 for t in k.tools.all() if t.plugin != "builtin"),
    "hooks": len(k.hook_callbacks("post_tool_call")),
}
k.shutdown()
print("LOAD-RESULT " + json.dumps(report))
"""


class BenchError(RuntimeError):
    """The benchmark is not sound (wrong setup); its numbers would be meaningless."""


# -- A. dispatch -----------------------------------------------------------------


def write_hook_plugins(root: Path) -> list[str]:
    names = [f"bench_{i:02d}" for i in range(N_HOOK_PLUGINS)]
    for name in names:
        directory = root / name
        directory.mkdir(parents=True)
        (directory / "plugin.yaml").write_text(HOOK_PLUGIN_MANIFEST.format(name=name), encoding="utf-8")
        (directory / "__init__.py").write_text(HOOK_PLUGIN_CODE.format(name=name), encoding="utf-8")
    return names


def make_raw_pluggy(post_cbs: list[Callable[..., Any]], pre_cbs: list[Callable[..., Any]]) -> Any:
    """A plain pluggy manager with the same two hookspecs and 10 plugin objects."""
    import pluggy

    spec = pluggy.HookspecMarker("bench")
    impl = pluggy.HookimplMarker("bench")

    class Specs:
        @spec
        def post_tool_call(
            self,
            tool_name,
            args,
            result,
            task_id,
            session_id,
            tool_call_id,
            turn_id,
            api_request_id,
            duration_ms,
            status,
            error_type,
            error_message,
            telemetry_schema_version,
            middleware_trace,
        ):
            """Observe a finished tool call."""

        @spec
        def pre_llm_call(
            self,
            session_id,
            task_id,
            turn_id,
            user_message,
            conversation_history,
            is_first_turn,
            model,
            platform,
            parent_session_id,
            sender_id,
        ):
            """Return context for the user's message."""

    pm = pluggy.PluginManager("bench")
    pm.add_hookspecs(Specs)
    # pluggy calls the last registered impl first: register in reverse so that
    # the call order (and the merged context) is the same as the kernel's.
    for i in reversed(range(len(post_cbs))):
        plugin = types.SimpleNamespace(post_tool_call=impl(post_cbs[i]), pre_llm_call=impl(pre_cbs[i]))
        pm.register(plugin, name=f"bench_{i:02d}")
    return pm


def check_spec_arguments() -> None:
    """The benchmark's kwargs must be exactly the kernel hookspecs' arguments."""
    from kernel import hookspecs

    for hook, expected in (("post_tool_call", POST_TOOL_ARGS), ("pre_llm_call", PRE_LLM_ARGS)):
        declared = tuple(inspect.signature(getattr(hookspecs, hook)).parameters)
        if declared != expected:
            raise BenchError(f"kernel hookspec {hook}{declared} differs from the benchmark's {expected}")


def dispatch_rows(hook: str) -> list[tuple[str, str, str]]:
    """(key, statement, description) of each row, in display order."""
    if hook == "post_tool_call":
        plain = (
            "results = []\n"
            "for cb in callbacks:\n"
            "    r = cb(**kwargs)\n"
            "    if r is not None:\n"
            "        results.append(r)"
        )
        return [
            ("plain-loop", plain, "plain Python loop, collecting non-None (baseline)"),
            ("bare-loop", "for cb in callbacks:\n    cb(**kwargs)", "bare loop `for cb: cb(**kwargs)`"),
            ("plain-func", "plain_func(**kwargs)", "the plain loop inside a function f(**kwargs)"),
            ("pluggy", "pm.hook.post_tool_call(**kwargs)", "raw pluggy pm.hook.post_tool_call(**kwargs)"),
            ("kernel", "k.invoke_hook('post_tool_call', **kwargs)", "kernel invoke_hook, 10 dir plugins"),
            (
                "kernel-pm",
                "k.pm.hook.post_tool_call(**kwargs)",
                "kernel k.pm.hook.post_tool_call, 10 dir plugins",
            ),
            (
                "kernel-native",
                "kn.invoke_hook('post_tool_call', **kwargs)",
                "kernel invoke_hook, 10 pluggy-native plugins",
            ),
            (
                "native-pm",
                "kn.pm.hook.post_tool_call(**kwargs)",
                "kernel k.pm.hook, 10 pluggy-native plugins",
            ),
        ]
    plain = (
        "results = []\n"
        "for cb in callbacks:\n"
        "    r = cb(**kwargs)\n"
        "    if r is not None:\n"
        "        results.append(r)\n"
        "text = SEP.join(results)"
    )
    return [
        ("plain-loop", plain, "plain Python loop + '\\n\\n'.join (baseline)"),
        (
            "bare-loop",
            "for cb in callbacks:\n    cb(**kwargs)",
            "bare loop `for cb: cb(**kwargs)` (no merge)",
        ),
        ("plain-func", "plain_func(**kwargs)", "the plain loop + join inside a function f(**kwargs)"),
        ("pluggy", "SEP.join(pm.hook.pre_llm_call(**kwargs))", "raw pluggy + '\\n\\n'.join"),
        ("kernel", "k.pre_llm_context(**kwargs)", "kernel pre_llm_context, 10 dir plugins"),
        ("kernel-pm", "SEP.join(k.pm.hook.pre_llm_call(**kwargs))", "kernel k.pm.hook.pre_llm_call + join"),
        ("kernel-native", "kn.pre_llm_context(**kwargs)", "kernel pre_llm_context, 10 pluggy-native plugins"),
        (
            "native-pm",
            "SEP.join(kn.pm.hook.pre_llm_call(**kwargs))",
            "kernel k.pm.hook + join, 10 native plugins",
        ),
    ]


def time_rows(
    statements: dict[str, str], namespace: dict[str, Any], number: int, repeat: int
) -> dict[str, list[float]]:
    """µs per call of each statement: ``repeat`` samples of ``number`` calls each.

    Each repeat times every row interleaved in CHUNKS slices round-robin, so
    that a slow moment of a busy machine hits all rows alike and the ratios
    stay comparable.  (Also used by ``peer_hermes.py`` in Hermes' own venv.)
    """
    timers = {key: timeit.Timer(stmt, globals=namespace) for key, stmt in statements.items()}
    for timer in timers.values():  # warm-up
        timer.timeit(max(number // 10, 100))
    samples: dict[str, list[float]] = {key: [] for key in timers}
    chunks = [number // CHUNKS + (1 if i < number % CHUNKS else 0) for i in range(CHUNKS)]
    chunks = [c for c in chunks if c]
    for _ in range(repeat):
        spent = dict.fromkeys(timers, 0.0)
        for chunk in chunks:
            for key, timer in timers.items():
                spent[key] += timer.timeit(chunk)
        for key in timers:
            samples[key].append(spent[key] / number * 1e6)
    return samples


def _plain_post(callbacks: list[Callable[..., Any]]) -> Callable[..., list[Any]]:
    def plain_func(**kwargs: Any) -> list[Any]:
        results = []
        for cb in callbacks:
            r = cb(**kwargs)
            if r is not None:
                results.append(r)
        return results

    return plain_func


def _plain_pre(callbacks: list[Callable[..., Any]]) -> Callable[..., str]:
    def plain_func(**kwargs: Any) -> str:
        results = []
        for cb in callbacks:
            r = cb(**kwargs)
            if r is not None:
                results.append(r)
        return "\n\n".join(results)

    return plain_func


def bench_dispatch(number: int, repeat: int, log: Callable[[str], None]) -> dict[str, Any]:
    from kernel import Kernel, hookimpl

    check_spec_arguments()
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-dispatch-"))
    saved_env = {k: os.environ.get(k) for k in ("HERMES_BUNDLED_PLUGINS", "HERMES_ENABLE_PROJECT_PLUGINS")}
    kernels: list[Any] = []
    try:
        bundled = tmp / "bundled"
        bundled.mkdir()
        os.environ["HERMES_BUNDLED_PLUGINS"] = str(bundled)
        os.environ.pop("HERMES_ENABLE_PROJECT_PLUGINS", None)
        home = tmp / "home"
        names = write_hook_plugins(home / "plugins")

        k = Kernel(home)
        kernels.append(k)
        k.load()
        broken = [f"{p.name}: {p.error}" for p in k.plugins if not p.enabled]
        if broken or [p.name for p in k.plugins] != names:
            raise BenchError(f"hook plugins did not load as expected: {[p.name for p in k.plugins]} {broken}")

        # The callbacks of the plain loop and of pluggy: the functions of the
        # loaded plugin modules (hermes_plugins.<name>), checked to be the very
        # objects the kernel calls.
        modules = [sys.modules.get(f"hermes_plugins.{name}") for name in names]
        if None in modules:
            raise BenchError("the hook plugins are not importable as hermes_plugins.<name>")
        post_cbs = [m.on_post_tool_call for m in modules]
        pre_cbs = [m.on_pre_llm_call for m in modules]
        direct = True
        for hook, cbs in (("post_tool_call", post_cbs), ("pre_llm_call", pre_cbs)):
            registered = k.hook_callbacks(hook)
            if len(registered) != len(cbs) or any(
                r.fn is not c for r, c in zip(registered, cbs, strict=False)
            ):
                raise BenchError(f"the kernel's {hook} callbacks are not the plugin functions")
            direct = direct and all(r.call is c for r, c in zip(registered, cbs, strict=True))

        pm = make_raw_pluggy(post_cbs, pre_cbs)

        native_home = tmp / "native-home"
        native_home.mkdir()
        kn = Kernel(native_home)
        kernels.append(kn)
        kn.load()
        for i, name in enumerate(names):
            obj = types.SimpleNamespace(
                post_tool_call=hookimpl(post_cbs[i]), pre_llm_call=hookimpl(pre_cbs[i])
            )
            kn.register(obj, name=name)
        if len(kn.hook_callbacks("post_tool_call")) != N_HOOK_PLUGINS:
            raise BenchError("the pluggy-native kernel does not have 10 post_tool_call callbacks")

        # Every row must compute the same thing.
        expected_ctx = "\n\n".join(f"context from {n}" for n in names)
        outcomes = {
            "plain": _plain_pre(pre_cbs)(**PRE_KWARGS),
            "pluggy": "\n\n".join(pm.hook.pre_llm_call(**PRE_KWARGS)),
            "kernel": k.pre_llm_context(**PRE_KWARGS),
            "kernel-pm": "\n\n".join(k.pm.hook.pre_llm_call(**PRE_KWARGS)),
            "kernel-native": kn.pre_llm_context(**PRE_KWARGS),
        }
        wrong = {key: v for key, v in outcomes.items() if v != expected_ctx}
        posts = [
            k.invoke_hook("post_tool_call", **POST_KWARGS),
            k.pm.hook.post_tool_call(**POST_KWARGS),
            kn.invoke_hook("post_tool_call", **POST_KWARGS),
            pm.hook.post_tool_call(**POST_KWARGS),
            _plain_post(post_cbs)(**POST_KWARGS),
        ]
        if wrong or any(p != [] for p in posts):
            raise BenchError(f"rows disagree: pre_llm {wrong!r}, post_tool_call {posts!r}")

        results: dict[str, Any] = {"kernel_calls_plugin_functions_directly": direct, "hooks": {}}
        for hook, cbs, kwargs, plain_func in (
            ("post_tool_call", post_cbs, POST_KWARGS, _plain_post(post_cbs)),
            ("pre_llm_call", pre_cbs, PRE_KWARGS, _plain_pre(pre_cbs)),
        ):
            namespace = {
                "callbacks": cbs,
                "kwargs": dict(kwargs),
                "pm": pm,
                "k": k,
                "kn": kn,
                "plain_func": plain_func,
                "SEP": "\n\n",
            }
            rows = dispatch_rows(hook)
            samples = time_rows({key: stmt for key, stmt, _ in rows}, namespace, number, repeat)
            table = []
            for key, _, description in rows:
                table.append(
                    {
                        "row": key,
                        "description": description,
                        "best_us": min(samples[key]),
                        "median_us": statistics.median(samples[key]),
                        "samples_us": samples[key],
                    }
                )
            base = next(r for r in table if r["row"] == "plain-loop")["best_us"]
            pluggy_us = next(r for r in table if r["row"] == "pluggy")["best_us"]
            for row in table:
                row["vs_plain"] = row["best_us"] / base
                row["vs_pluggy"] = row["best_us"] / pluggy_us
            kernel_ratio = next(r for r in table if r["row"] == "kernel")["vs_plain"]
            pm_vs_pluggy = next(r for r in table if r["row"] == "kernel-pm")["vs_pluggy"]
            native_vs_pluggy = next(r for r in table if r["row"] == "native-pm")["vs_pluggy"]
            # The same ratio taken within each round (rows measured back to back),
            # which a slow phase of a busy machine affects less than best/best.
            paired = [kr / pr for kr, pr in zip(samples["kernel"], samples["plain-loop"], strict=True)]
            results["hooks"][hook] = {
                "rows": table,
                "kernel_vs_plain": kernel_ratio,
                "kernel_vs_plain_paired_median": statistics.median(paired),
                "kernel_vs_plain_paired": paired,
                "target": DISPATCH_TARGET,
                "met": kernel_ratio <= DISPATCH_TARGET,
                "pm_vs_pluggy": pm_vs_pluggy,
                "pm_met": pm_vs_pluggy <= 1.0,
                "native_pm_vs_pluggy": native_vs_pluggy,
                "native_pm_met": native_vs_pluggy <= 1.0,
            }
            log(f"  measured {hook}")
        return results
    finally:
        for kernel in kernels:
            kernel.shutdown()
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(tmp, ignore_errors=True)


def bench_peer_dispatch(
    peer_python: str, number: int, repeat: int, log: Callable[[str], None]
) -> dict[str, Any]:
    """Hermes Agent's own dispatch of the same 10 plugins, in its own venv (``peer_hermes.py``)."""
    if os.sep in peer_python:
        peer_python = os.path.abspath(peer_python)  # the child runs in a temporary folder
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-peer-"))
    try:
        home = tmp / "home"
        names = write_hook_plugins(home / "plugins")
        enabled = "".join(f"    - {name}\n" for name in names)
        (home / "config.yaml").write_text(f"plugins:\n  enabled:\n{enabled}", encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
        env["HOME"] = str(tmp)
        script = Path(__file__).with_name("peer_hermes.py")
        command = [peer_python, str(script), str(home), str(number), str(repeat)]
        report = child_report(command, "PEER-RESULT", env, tmp, 900, "the Hermes peer")
        log("  measured Hermes Agent")
        return report
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- B. discovery + load -----------------------------------------------------------


def write_generated_plugins(root: Path, n: int) -> None:
    for i in range(n):
        name = f"gen_{i:04d}"
        tool = f"gen_{i:04d}_echo"
        directory = root / name
        directory.mkdir(parents=True)
        (directory / "plugin.yaml").write_text(
            GEN_PLUGIN_MANIFEST.format(name=name, tool=tool, index=i), encoding="utf-8"
        )
        (directory / "__init__.py").write_text(GEN_PLUGIN_CODE.format(tool=tool, index=i), encoding="utf-8")
    age_tree(root)  # as an installed plugin's files are (the kernel's caches skip files changed just now)


def child_report(
    command: list[str], marker: str, env: dict[str, str], cwd: Path, timeout: int, what: str
) -> dict[str, Any]:
    """Run a measuring child process; its result is the JSON on its ``<marker> `` line."""
    proc = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout, check=False
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith(marker + " ")), None)
    if proc.returncode != 0 or line is None:
        raise BenchError(f"{what} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr[-3000:]}")
    return json.loads(line.split(" ", 1)[1])


def run_load_child(home: Path, n: int, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    command = [sys.executable, "-c", LOAD_CHILD_CODE, str(home), str(n)]
    report = child_report(command, "LOAD-RESULT", env, cwd, 300, "load child")
    if report["loaded"] != n or report["tools"] != n or report["hooks"] != n or report["plugins"] != n:
        raise BenchError(f"the child did not load all {n} plugins: {report}")
    return report


def bench_load(counts: list[int], runs: int, log: Callable[[str], None]) -> list[dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-load-"))
    try:
        bundled = tmp / "bundled"
        bundled.mkdir()
        cwd = tmp / "cwd"
        cwd.mkdir()
        age_tree(cwd)
        env = clean_env(bundled)
        out = []
        for n in counts:
            home = tmp / f"home-{n}"
            write_generated_plugins(home / "plugins", n)
            run_load_child(home, n, env, cwd)  # warm-up: writes __pycache__
            cached = sum(
                1 for d in (home / "plugins").iterdir() if any((d / "__pycache__").glob("__init__.*.pyc"))
            )
            reports = [run_load_child(home, n, env, cwd) for _ in range(runs)]
            import_ms = statistics.median(r["import_ms"] for r in reports)
            ctor_ms = statistics.median(r["ctor_ms"] for r in reports)
            load_ms = statistics.median(r["load_ms"] for r in reports)
            total_ms = statistics.median(r["ctor_ms"] + r["load_ms"] for r in reports)
            out.append(
                {
                    "n": n,
                    "runs": runs,
                    "import_ms": import_ms,
                    "ctor_ms": ctor_ms,
                    "load_ms": load_ms,
                    "total_ms": total_ms,
                    "ms_per_plugin": total_ms / n,
                    "loaded": reports[0]["loaded"],
                    "bytecode_cached": cached,
                    "warnings": reports[0]["warnings"],
                    "samples_total_ms": [r["ctor_ms"] + r["load_ms"] for r in reports],
                    "target_ms_per_plugin": LOAD_TARGET_MS,
                    "met": total_ms / n <= LOAD_TARGET_MS,
                }
            )
            log(f"  measured load of {n} plugins")
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- report --------------------------------------------------------------------------


def environment() -> dict[str, Any]:
    import pluggy

    try:
        kernel_version = metadata.version("hermes-kernel")
    except metadata.PackageNotFoundError:
        kernel_version = "not installed"
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "pluggy": pluggy.__version__,
        "hermes_kernel": kernel_version,
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "platform": platform.platform(),
        "machine": platform.machine(),
    }


def print_peer(dispatch: Any, peer: Any) -> None:
    print("Hermes Agent: the same 10 plugin functions, loaded by its own discovery, in its own venv;")
    print("each side's ratio is against its own plain loop, measured in the same process:")
    header = f"{'hook':<15} {'Hermes µs':>10} {'Hermes/plain':>13} {'kernel/plain':>13} {'f(**kw)/plain':>14}"
    print(header)
    print("-" * len(header))
    for hook, data in peer["hooks"].items():
        ours = dispatch["hooks"][hook]["kernel_vs_plain"] if dispatch else float("nan")
        print(
            f"{hook:<15} {data['best_us']['hermes']:>10.3f} {data['hermes_vs_plain']:>12.2f}x "
            f"{ours:>12.2f}x {data['plain_func_vs_plain']:>13.2f}x"
        )


def print_report(
    env: dict[str, Any], settings: dict[str, Any], dispatch: Any, load: Any, peer: Any = None
) -> None:
    print("hermes-kernel benchmark")
    print(
        f"Python {env['python']} ({env['implementation']}), pluggy {env['pluggy']}, "
        f"hermes-kernel {env['hermes_kernel']}"
    )
    print(f"CPU count: {env['cpu_count']} (usable: {env['cpus_usable']}), {env['platform']}")
    print(f"mode: {'quick' if settings['quick'] else 'full'}")
    if dispatch is not None:
        print()
        print_dispatch(settings, dispatch)
    if peer is not None:
        print()
        print_peer(dispatch, peer)
    if load is not None:
        print()
        print_load(settings, load)


def print_dispatch(settings: dict[str, Any], dispatch: Any) -> None:
    print(
        f"A. Hook dispatch, {N_HOOK_PLUGINS} plugins, µs per call: best of {settings['repeat']} repeats "
        f"x {settings['number']} calls (median of the repeats also shown; ratios use the best)"
    )
    print(f"   each repeat interleaves the rows in {CHUNKS} slices, round-robin")
    print("   every row calls the same 10 plugin functions with the same keyword arguments;")
    direct = "yes" if dispatch["kernel_calls_plugin_functions_directly"] else "NO (wrapped)"
    print(f"   kernel calls the plugin functions directly (no wrapper): {direct}")
    print()
    header = f"{'hook':<15} {'row':<14} {'µs/call':>8} {'median':>8} {'vs plain':>9} {'vs pluggy':>10}  what"
    print(header)
    print("-" * len(header) + "-" * 40)
    for hook, data in dispatch["hooks"].items():
        for row in data["rows"]:
            print(
                f"{hook:<15} {row['row']:<14} {row['best_us']:>8.3f} {row['median_us']:>8.3f} "
                f"{row['vs_plain']:>8.2f}x {row['vs_pluggy']:>9.2f}x  {row['description']}"
            )
        print()
    for hook, data in dispatch["hooks"].items():
        verdict = "met" if data["met"] else "NOT met"
        print(
            f"target {hook}: kernel / plain loop = {data['kernel_vs_plain']:.2f}x "
            f"(target <= {DISPATCH_TARGET:.2f}x): {verdict}; "
            f"per-round paired ratio: median {data['kernel_vs_plain_paired_median']:.2f}x"
        )
        verdict = "met" if data["pm_met"] else "NOT met"
        print(
            f"target {hook}: k.pm.hook / raw pluggy = {data['pm_vs_pluggy']:.2f}x "
            f"(target <= 1.00x): {verdict}"
        )
        verdict = "met" if data["native_pm_met"] else "NOT met"
        print(
            f"target {hook}: k.pm.hook, pluggy-native plugins / raw pluggy = "
            f"{data['native_pm_vs_pluggy']:.2f}x (target <= 1.00x): {verdict}"
        )


def print_load(settings: dict[str, Any], load: Any) -> None:
    print(
        f"B. Discovery + load in a fresh process, median of {settings['load_runs']} runs per N "
        "(a warm-up run wrote the bytecode first)"
    )
    print("   total = Kernel(home) + .load(); `import kernel` is measured separately and not in total")
    print()
    header = (
        f"{'':<5} {'plugins':>7} {'import ms':>10} {'Kernel() ms':>12} {'load() ms':>10} "
        f"{'total ms':>9} {'ms/plugin':>10} {'loaded':>9} {'.pyc':>5}"
    )
    print(header)
    print("-" * len(header))
    for row in load:
        print(
            f"{'load':<5} {row['n']:>7} {row['import_ms']:>10.2f} {row['ctor_ms']:>12.2f} "
            f"{row['load_ms']:>10.2f} {row['total_ms']:>9.2f} {row['ms_per_plugin']:>10.3f} "
            f"{row['loaded']:>4}/{row['n']:<4} {row['bytecode_cached']:>5}"
        )
    print()
    # Cost of each added plugin between two counts: fixed costs (the entry-point
    # scan, logging set-up) cancel out; a slope that grows with N means the
    # load is superlinear.
    for small, large in itertools.pairwise(load):
        slope = (large["total_ms"] - small["total_ms"]) / (large["n"] - small["n"])
        print(f"marginal cost per added plugin, {small['n']} -> {large['n']} plugins: {slope:.3f} ms")
    for row in load:
        verdict = "met" if row["met"] else "NOT met"
        print(
            f"target load {row['n']} plugins: {row['ms_per_plugin']:.3f} ms/plugin "
            f"(target < {LOAD_TARGET_MS:.2f}): {verdict}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="hermes-kernel benchmark")
    parser.add_argument("--quick", action="store_true", help="few iterations and small plugin counts")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE ('-': stdout)")
    parser.add_argument("--number", type=int, help="calls per timing repeat (default 20000, quick 2000)")
    parser.add_argument("--repeat", type=int, help="timing repeats per row (default 7, quick 3)")
    parser.add_argument(
        "--part",
        choices=("all", "dispatch", "load", "startup"),
        default="all",
        help="run only part A, B or C",
    )
    parser.add_argument(
        "--peer-python",
        metavar="PYTHON",
        help="the interpreter of a venv with hermes-agent installed: also measure Hermes' own dispatch",
    )
    options = parser.parse_args(argv)

    if options.quick:
        settings = {
            "number": 2000,
            "repeat": 3,
            "counts": [5, 10],
            "load_runs": 2,
            "startup_runs": 2,
            "startup_n": 10,
        }
    else:
        settings = {
            "number": 20000,
            "repeat": 7,
            "counts": [10, 100, 500],
            "load_runs": 5,
            "startup_runs": 9,
            "startup_n": 500,
        }
    settings["number"] = max(1, options.number or settings["number"])
    settings["repeat"] = max(1, options.repeat or settings["repeat"])
    settings["quick"] = options.quick

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    env = environment()
    try:
        dispatch = load = peer = startup = None
        if options.part in ("all", "dispatch"):
            log("A. hook dispatch ...")
            dispatch = bench_dispatch(settings["number"], settings["repeat"], log)
            if options.peer_python:
                peer = bench_peer_dispatch(options.peer_python, settings["number"], settings["repeat"], log)
        if options.part in ("all", "load"):
            log("B. discovery + load ...")
            load = bench_load(settings["counts"], settings["load_runs"], log)
        if options.part in ("all", "startup"):
            log("C. start-up ...")
            startup = bench_startup(
                write_generated_plugins,
                options.peer_python,
                settings["startup_runs"],
                settings["startup_n"],
                log,
            )
    except (BenchError, StartupError) as exc:
        print(f"benchmark setup error: {exc}", file=sys.stderr)
        return 2
    print_report(env, settings, dispatch, load, peer)
    if startup is not None:
        print()
        print_startup(startup)
    if options.json:
        document = json.dumps(
            {
                "environment": env,
                "settings": settings,
                "dispatch": dispatch,
                "load": load,
                "peer": peer,
                "startup": startup,
            },
            indent=2,
        )
        if options.json == "-":
            print(document)
        else:
            Path(options.json).write_text(document + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
