"""Part C of ``make bench``: start-up, against Hermes Agent measured in the same run.

* ``plugins list``: the whole command in a fresh process (interpreter start
  included), with 10 plugins in the home — ``python -m kernel plugins list``
  against Hermes' ``hermes plugins list`` — after one warm-up run of each (the
  bytecode caches and the kernel's saved plugin list are written then, as on a
  user's machine after the first run).  The runs of the two alternate.
* ``import kernel`` alone in a fresh process.
* the floor of an eager load: importing the 500 plugin modules and nothing else.
* discovery + load of 500 generated plugins (bundled sets left out on both
  sides with ``HERMES_BUNDLED_PLUGINS`` pointing at an empty folder): the
  time of ``Kernel(home)`` + ``load()`` against Hermes' ``PluginManager()`` +
  ``discover_and_load()``, and the process's peak RSS after it.

Targets (issues 15 and 30): ``plugins list`` <= 0.25x Hermes, load of 500 <= 0.25x
Hermes, peak RSS <= 0.75x Hermes.  Without ``--peer-python`` only our figures are shown.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RATIO_TARGET = 0.25
# Peak RSS after the load of 500, against Hermes' (issue 30).
RSS_TARGET = 0.75

LIST_PLUGIN = """\
def register(ctx):
    ctx.register_hook("post_tool_call", lambda **kwargs: None)
"""

# The children's peak RSS: VmHWM, this process image's own high-water mark. ru_maxrss would do
# elsewhere, but Linux carries it over exec from the forked parent, so every child of a big
# benchmark process would report at least the parent's size.
PEAK_RSS = """\
def peak_rss_kb():
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
"""

OUR_LOAD_CHILD = """\
import sys, time, resource, json
t0 = time.perf_counter()
import kernel
t1 = time.perf_counter()
k = kernel.Kernel(sys.argv[1])
k.load()
t2 = time.perf_counter()
loaded = sum(1 for p in k.plugins if p.enabled and p.source == "user")
rss = peak_rss_kb()
print("STARTUP-RESULT " + json.dumps({"import_ms": (t1 - t0) * 1e3, "load_ms": (t2 - t1) * 1e3,
                                      "loaded": loaded, "rss_kb": rss}))
"""

PEER_LOAD_CHILD = """\
import os, sys, time, resource, json
os.environ["HERMES_HOME"] = sys.argv[1]
t0 = time.perf_counter()
from hermes_cli.plugins import PluginManager
t1 = time.perf_counter()
pm = PluginManager()
pm.discover_and_load()
t2 = time.perf_counter()
loaded = sum(1 for p in pm.list_plugins() if p["enabled"] and p["source"] == "user")
rss = peak_rss_kb()
print("STARTUP-RESULT " + json.dumps({"import_ms": (t1 - t0) * 1e3, "load_ms": (t2 - t1) * 1e3,
                                      "loaded": loaded, "rss_kb": rss}))
"""


# The floor of any eager loader: import each plugin's __init__.py (no manifest, no registration).
FLOOR_LOAD_CHILD = """\
import sys, time, resource, json, importlib.util
from pathlib import Path
dirs = sorted(p for p in (Path(sys.argv[1]) / "plugins").iterdir() if p.is_dir())
t0 = time.perf_counter()
for d in dirs:
    spec = importlib.util.spec_from_file_location("floor_" + d.name, d / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
t1 = time.perf_counter()
rss = peak_rss_kb()
print("STARTUP-RESULT " + json.dumps({"import_ms": 0.0, "load_ms": (t1 - t0) * 1e3,
                                      "loaded": len(dirs), "rss_kb": rss}))
"""
OUR_LOAD_CHILD, PEER_LOAD_CHILD, FLOOR_LOAD_CHILD = (
    PEAK_RSS + code for code in (OUR_LOAD_CHILD, PEER_LOAD_CHILD, FLOOR_LOAD_CHILD)
)


class StartupError(RuntimeError):
    """The start-up benchmark is not sound (a command failed, a plugin did not load)."""


def age_tree(root: Path, seconds: float = 3600) -> None:
    """Date ``root`` and everything under it ``seconds`` back, as the files of an installed system are:
    the kernel's caches trust no file changed in the last two seconds (see docs/decisions.md)."""
    then = time.time() - seconds
    for path in [root, *root.rglob("*")]:
        os.utime(path, (then, then))


def clean_env(bundled: Path, home: Path | None = None) -> dict[str, str]:
    """The environment of a measuring child: no HERMES_* of this machine, bytecode caches on, the
    bundled plugins replaced by ``bundled`` (an empty folder)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("HERMES_") and k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    }
    env["HERMES_BUNDLED_PLUGINS"] = str(bundled)
    if home is not None:
        env["HERMES_HOME"] = str(home)
    return env


def _write_list_home(home: Path, n: int = 10) -> None:
    names = [f"listed_{i:02d}" for i in range(n)]
    for name in names:
        directory = home / "plugins" / name
        directory.mkdir(parents=True)
        (directory / "plugin.yaml").write_text(
            f"name: {name}\nversion: 1.0.0\ndescription: start-up benchmark plugin\n"
            "provides_hooks: [post_tool_call]\n",
            encoding="utf-8",
        )
        (directory / "__init__.py").write_text(LIST_PLUGIN, encoding="utf-8")
    # Hermes loads only the plugins its allow-list names; the kernel reads the same file.
    enabled = "".join(f"    - {name}\n" for name in names)
    (home / "config.yaml").write_text(f"plugins:\n  enabled:\n{enabled}", encoding="utf-8")


def _wall(command: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    proc = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    elapsed = (time.perf_counter() - started) * 1e3
    if proc.returncode != 0:
        raise StartupError(f"{' '.join(command)} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return elapsed


def _interleaved(commands: dict[str, list[str]], env: dict[str, str], cwd: Path, runs: int) -> dict[str, Any]:
    for command in commands.values():
        _wall(command, env, cwd)  # warm-up: bytecode, the saved plugin list
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            samples[name].append(_wall(command, env, cwd))
    return {
        name: {"median_ms": statistics.median(s), "min_ms": min(s), "samples_ms": s}
        for name, s in samples.items()
    }


def _load_child(python: str, code: str, home: Path, env: dict[str, str], cwd: Path, n: int) -> dict[str, Any]:
    proc = subprocess.run(
        [python, "-c", code, str(home)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("STARTUP-RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise StartupError(f"load child failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    report = json.loads(line.split(" ", 1)[1])
    if report["loaded"] != n:
        raise StartupError(f"the load child loaded {report['loaded']} of {n} plugins ({python})")
    return report


def bench_startup(
    write_plugins: Callable[[Path, int], None],
    peer_python: str | None,
    runs: int,
    n: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Measure part C; ``write_plugins(root, n)`` writes the generated plugins of part B."""
    if peer_python is not None:
        peer_python = str(Path(peer_python).absolute())  # the children run in a folder of their own
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-startup-"))
    try:
        bundled = tmp / "bundled"
        bundled.mkdir()
        cwd = tmp / "cwd"
        cwd.mkdir()
        out: dict[str, Any] = {"runs": runs, "n": n, "peer": peer_python is not None}

        home = tmp / "list-home"
        _write_list_home(home)
        age_tree(home)
        age_tree(cwd)
        env = clean_env(bundled, home)
        commands = {
            "kernel": [sys.executable, "-m", "kernel", "plugins", "list"],
            "import_kernel": [sys.executable, "-c", "import kernel"],
            "python": [sys.executable, "-c", "pass"],
        }
        if peer_python:
            commands["hermes"] = [str(Path(peer_python).with_name("hermes")), "plugins", "list"]
        log("  plugins list, interleaved ...")
        out["plugins_list"] = _interleaved(commands, env, cwd, runs)

        home = tmp / "load-home"
        write_plugins(home / "plugins", n)
        names = "".join(f"    - gen_{i:04d}\n" for i in range(n))
        (home / "config.yaml").write_text(f"plugins:\n  enabled:\n{names}", encoding="utf-8")
        age_tree(home)
        env = clean_env(bundled, home)
        sides = {
            "kernel": (sys.executable, OUR_LOAD_CHILD),
            "import-only floor": (sys.executable, FLOOR_LOAD_CHILD),
        }
        if peer_python:
            sides["hermes"] = (peer_python, PEER_LOAD_CHILD)
        reports: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
        for python, code in sides.values():
            _load_child(python, code, home, env, cwd, n)  # warm-up: bytecode caches
        log(f"  load of {n} plugins, interleaved ...")
        for _ in range(max(3, runs // 2)):
            for name, (python, code) in sides.items():
                reports[name].append(_load_child(python, code, home, env, cwd, n))
        out["load"] = {
            name: {
                "load_ms": statistics.median(r["load_ms"] for r in rs),
                "import_ms": statistics.median(r["import_ms"] for r in rs),
                "rss_mb": statistics.median(r["rss_kb"] for r in rs) / 1024,
            }
            for name, rs in reports.items()
        }
        if peer_python:
            ours, theirs = out["plugins_list"]["kernel"], out["plugins_list"]["hermes"]
            out["ratios"] = {
                "plugins_list": ours["median_ms"] / theirs["median_ms"],
                "load": out["load"]["kernel"]["load_ms"] / out["load"]["hermes"]["load_ms"],
                "rss": out["load"]["kernel"]["rss_mb"] / out["load"]["hermes"]["rss_mb"],
            }
            out["met"] = {
                "plugins_list": out["ratios"]["plugins_list"] <= RATIO_TARGET,
                "load": out["ratios"]["load"] <= RATIO_TARGET,
                "rss": out["ratios"]["rss"] <= RSS_TARGET,
            }
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def print_startup(startup: dict[str, Any]) -> None:
    listing, load, n = startup["plugins_list"], startup["load"], startup["n"]
    rows = [
        ("python -c pass", listing["python"]["median_ms"]),
        ("python -c 'import kernel'", listing["import_kernel"]["median_ms"]),
        ("kernel: plugins list (10 plugins)", listing["kernel"]["median_ms"]),
    ]
    if "hermes" in listing:
        rows.append(("hermes: plugins list (10 plugins)", listing["hermes"]["median_ms"]))
    for side, figures in load.items():
        rows.append((f"{side}: discovery + load of {n}", figures["load_ms"]))
    print(f"C. start-up (fresh processes, median of {startup['runs']}; bundled plugins left out)")
    for label, value in rows:
        print(f"startup  {label:<40} {value:9.1f} ms")
    for side, figures in load.items():
        print(f"startup  {side + ': peak RSS after the load':<40} {figures['rss_mb']:9.1f} MB")
    for key, target in (("plugins_list", RATIO_TARGET), ("load", RATIO_TARGET), ("rss", RSS_TARGET)):
        if "ratios" in startup:
            mark = "met" if startup["met"][key] else "NOT met"
            print(
                f"target startup {key}: kernel/hermes = {startup['ratios'][key]:.2f}x (<= {target}x): {mark}"
            )
