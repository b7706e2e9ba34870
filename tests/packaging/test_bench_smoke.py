"""The benchmark script (``make bench``) runs and reports every row; no timing is asserted."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

SCRIPT = REPO / "tests" / "benchmarks" / "bench_kernel.py"
HOOKS = ("post_tool_call", "pre_llm_call")
ROWS = (
    "plain-loop",
    "bare-loop",
    "plain-func",
    "pluggy",
    "kernel",
    "kernel-pm",
    "kernel-native",
    "native-pm",
)
QUICK_COUNTS = (5, 10)

NUM = r"(\d+(?:\.\d+)?)"
DISPATCH_ROW = re.compile(
    rf"^(post_tool_call|pre_llm_call)\s+(\S+)\s+{NUM}\s+{NUM}\s+{NUM}x\s+{NUM}x\s+\S", re.MULTILINE
)
LOAD_ROW = re.compile(
    rf"^load\s+(\d+)\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}\s+(\d+)/(\d+)\s+(\d+)\s*$", re.MULTILINE
)
TARGET_HOOK = re.compile(
    rf"^target (post_tool_call|pre_llm_call): kernel / plain loop = {NUM}x .*: (met|NOT met);", re.MULTILINE
)
TARGET_PM = re.compile(
    rf"^target (post_tool_call|pre_llm_call): k\.pm\.hook / raw pluggy = {NUM}x .*: (met|NOT met)$",
    re.MULTILINE,
)
TARGET_LOAD = re.compile(rf"^target load (\d+) plugins: {NUM} ms/plugin .*: (met|NOT met)$", re.MULTILINE)


def run_quick(tmp_path: Path) -> tuple[str, dict]:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout, json.loads(out.read_text(encoding="utf-8"))


def test_quick_benchmark_reports_every_row(tmp_path: Path) -> None:
    text, data = run_quick(tmp_path)

    # Environment header.
    assert re.search(r"^Python 3\.\d+\.\d+ .*pluggy \d+\.\d+", text, re.MULTILINE), text
    assert re.search(r"^CPU count: \d+", text, re.MULTILINE), text
    assert "best of 3 repeats x 2000 calls" in text
    assert "kernel calls the plugin functions directly (no wrapper): " in text

    # A. Every (hook, row) pair once, with numbers that parse and are positive.
    found = {}
    for hook, row, best, median, vs_plain, vs_pluggy in DISPATCH_ROW.findall(text):
        assert (hook, row) not in found, f"duplicate row {hook} {row}"
        found[(hook, row)] = [float(best), float(median), float(vs_plain), float(vs_pluggy)]
    assert set(found) == {(h, r) for h in HOOKS for r in ROWS}, text
    for (_hook, row), (best, median, vs_plain, vs_pluggy) in found.items():
        assert best > 0 and median >= best and vs_plain > 0 and vs_pluggy > 0
        if row == "plain-loop":
            assert vs_plain == 1.0
        if row == "pluggy":
            assert vs_pluggy == 1.0
    assert {h for h, _, _ in TARGET_HOOK.findall(text)} == set(HOOKS), text
    assert {h for h, _, _ in TARGET_PM.findall(text)} == set(HOOKS), text

    # B. One load row per plugin count, every plugin loaded and byte-compiled.
    loads = LOAD_ROW.findall(text)
    assert [int(row[0]) for row in loads] == list(QUICK_COUNTS), text
    for n, import_ms, ctor_ms, load_ms, total_ms, per_plugin, loaded, of, pyc in loads:
        assert int(loaded) == int(of) == int(n) == int(pyc)
        assert float(import_ms) > 0 and float(load_ms) > 0
        assert abs(float(total_ms) / int(n) - float(per_plugin)) < 0.01
        assert float(ctor_ms) >= 0
    assert [int(n) for n, _, _ in TARGET_LOAD.findall(text)] == list(QUICK_COUNTS), text
    assert re.search(rf"^marginal cost per added plugin, 5 -> 10 plugins: -?{NUM} ms$", text, re.MULTILINE)

    # The JSON document carries the same results.
    assert data["settings"]["quick"] is True
    assert data["environment"]["cpu_count"] >= 1
    for hook in HOOKS:
        rows = data["dispatch"]["hooks"][hook]["rows"]
        assert [r["row"] for r in rows] == list(ROWS)
        for r in rows:
            assert len(r["samples_us"]) == 3
            assert abs(found[(hook, r["row"])][0] - r["best_us"]) <= 0.0006
        assert isinstance(data["dispatch"]["hooks"][hook]["met"], bool)
        assert isinstance(data["dispatch"]["hooks"][hook]["pm_met"], bool)
    assert [(r["n"], r["loaded"]) for r in data["load"]] == [(n, n) for n in QUICK_COUNTS]


GATEWAY_SCRIPT = REPO / "tests" / "benchmarks" / "bench_gateway.py"


def test_quick_gateway_benchmark_answers_every_message_once(tmp_path: Path) -> None:
    """``bench_gateway.py --quick`` (a real Redis, an ingress and 1 then 2 workers, then light load with
    and without the broker): every message is answered, once, each chat in order; the timings are
    reported, never judged here."""
    out = tmp_path / "bench-gateway.json"
    proc = subprocess.run(
        [sys.executable, str(GATEWAY_SCRIPT), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["settings"]["quick"] is True
    assert [row["workers"] for row in data["burst"]] == [1, 2]
    rows = [*data["burst"], data["light"]["broker"], data["light"]["direct"]]
    for row in rows:
        assert row["lost"] == 0 and row["dup"] == 0, row
        assert row["answered"] == row["messages"] and row["out_of_order"] == 0, row
    assert [row["messages"] for row in rows] == [10, 10, 5, 5]
    assert re.search(r"^targets: ", proc.stdout, re.MULTILINE), proc.stdout


@pytest.mark.parametrize(
    ("script", "rows"),
    [
        ("bench_host_session.py", ("by hand", "HostSession")),
        ("bench_integrations.py", ("plain tools", "HermesCapability", "hermes_toolset")),
        ("bench_mcp_server.py", ("plain low-level", "hermes-kernel")),
    ],
)
def test_the_integration_benchmarks_run_and_report_their_targets(script: str, rows: tuple[str, ...]) -> None:
    """``make bench`` runs these after bench_kernel.py: each reports its rows and its target, met or not."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "benchmarks" / script), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    for row in rows:
        assert re.search(rf"^\s*{re.escape(row)}\s+\d", proc.stdout, re.MULTILINE), (row, proc.stdout)
    assert re.search(r"<= \d\.\d\dx\)?:? (met|NOT met)", proc.stdout), proc.stdout
