"""The fixed cost of an eval run, before (the battery first, every probe run) and after (the battery alongside the
samples, the suite-independent verdicts cached) — claim: <= 8 s after — and the samples phase against bare tests.

What is measured: ``python -m labbot.evals.running.job`` as a subprocess, end to end (the interpreter's start, labbot's
and inspect's imports, the isolation battery with the tampering probes, inspect's start, every sample, results.json):
its wall time. The *samples phase* is the span from the first sample's start to the last sample's end, as the run's
``.eval`` log records them (inspect's ``started_at``/``completed_at``). The **fixed cost** is the wall time minus the
samples phase: what a run spends before its first sample starts and after its last one ends. Ray's job start is not in
it (``benchmarks/eval_throughput.py`` submits the job to a real Ray head; a job's submission adds the same seconds in
both modes).

Before: ``--battery first`` with ``LABBOT_EVAL_SEAL_CACHE=0``. After: the default (``--battery alongside``, the
seal's cache in a temporary ``XDG_CACHE_HOME``, warmed by one untimed run). The modes alternate over ``--rounds``
rounds (after one untimed run of each); medians with min–max. The suite: ``tests/run_fixtures.make_suite``
(the ``mul`` task, ``--tasks`` copies), gold solver, ``--max-samples`` at once, in a venv with pytest. Bare: each
task's tests on the original tree, one after another, outside any sandbox (as ``eval_throughput.bare``); the ratio
is bare / samples phase (the samples phase of a tiny suite is mostly sandboxes and scoring's own start, so it is
low on this suite; ``eval_throughput.py`` measures it on a real project), printed for each mode to show whether the
battery alongside slows the samples.

    .venv/bin/python benchmarks/eval_fixed_cost.py [--rounds 5] [--tasks 4] [--max-samples 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "evals"), str(ROOT / "benchmarks")]

from eval_throughput import bare, samples_span  # noqa: E402
from run_fixtures import build_pytest_venv, make_suite  # noqa: E402

from labbot.evals.generation.generator import default_cache  # noqa: E402

CLAIM_S = 8.0
CLAIM_RATIO = 0.7


def one_run(mode: str, suite: Path, venv: Path, out: Path, cache_home: Path, max_samples: int) -> dict[str, float]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "client")]),
        "XDG_CACHE_HOME": str(cache_home),
    }
    env["LABBOT_EVAL_SEAL_CACHE"] = "0" if mode == "before" else "1"
    battery = "first" if mode == "before" else "alongside"
    cmd = [
        sys.executable,
        "-m",
        "labbot.evals.running.job",
        "--suite",
        str(suite),
        "--solver",
        "gold",
        "--out",
        str(out),
    ]
    cmd += ["--venv", str(venv), "--max-samples", str(max_samples), "--battery", battery]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the eval job failed ({mode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    results = json.loads((out / "results.json").read_text())
    if results["pass_rate"] != 1.0 or results["untrusted"]:
        raise SystemExit(f"{mode}: gold did not pass sealed: {results['pass_rate']}, untrusted {results['untrusted']}")
    span = samples_span(out / results["log"])
    ran = [p["ran"] for p in results["isolation"]["probes"]]
    return {
        "wall": wall,
        "samples": span,
        "fixed": wall - span,
        "probes": len(ran),
        "cached": sum(r.startswith("cached") for r in ran),
    }


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.1f} s  ({min(values):.1f}–{max(values):.1f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--max-samples", type=int, default=2)
    a = ap.parse_args()
    venv = default_cache() / "bench-pytest-venv"
    if not (venv / "bin" / "python").exists():
        build_pytest_venv(venv)
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="labbot-fixed-cost-") as tmp:
        t = Path(tmp)
        (t / "suite").mkdir()
        make_suite(t / "suite", tasks=a.tasks)
        bare_s = min(bare(t / "suite", venv) for _ in range(3))
        for mode in ("before", "after"):  # untimed: warms the page cache, and the seal's cache for "after"
            one_run(mode, t / "suite", venv, t / f"warm-{mode}", t / "cache", a.max_samples)
        for i in range(a.rounds):
            for mode in ("before", "after") if i % 2 == 0 else ("after", "before"):
                runs[mode].append(one_run(mode, t / "suite", venv, t / f"{mode}-{i}", t / "cache", a.max_samples))
    print(f"suite: {a.tasks} mul tasks, gold, max-samples {a.max_samples}; {a.rounds} rounds, modes alternating")
    print(f"bare tests: {bare_s:.2f} s for {a.tasks} tasks (best of 3)")
    figures = {}
    for mode, label in (("before", "battery first, no cache  "), ("after", "alongside, cache warm    ")):
        r = runs[mode]
        fixed = [x["fixed"] for x in r]
        ratios = [bare_s / x["samples"] for x in r]
        print(f"{mode:6} ({label}) wall {spread([x['wall'] for x in r])}; samples phase "
              f"{spread([x['samples'] for x in r])}; fixed cost {spread(fixed)}; "
              f"probes {int(r[0]['probes'])} ({int(statistics.median(x['cached'] for x in r))} cached)")  # fmt: skip
        print(f"       samples phase vs bare tests: {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}–{max(ratios):.2f})")  # fmt: skip
        figures[mode] = {"fixed_s": round(statistics.median(fixed), 2), "ratio": round(statistics.median(ratios), 3)}
    slow = statistics.median(x["samples"] for x in runs["after"]) / statistics.median(
        x["samples"] for x in runs["before"]
    )
    after = figures["after"]["fixed_s"]
    print(f"samples phase after / before: {slow:.2f} (the battery alongside, on {os.cpu_count()} cores)")
    print(f"fixed cost: {figures['before']['fixed_s']:.1f} s -> {after:.1f} s (claim <= {CLAIM_S:.0f} s: "
          f"{'met' if after <= CLAIM_S else 'NOT met'})")  # fmt: skip
    ok = after <= CLAIM_S
    claim = f"fixed cost after <= {CLAIM_S} s"
    print(json.dumps({"benchmark": "eval_fixed_cost", **figures, "samples_after_over_before": round(slow, 3),
                      "claim": claim, "ok": ok}))  # fmt: skip


if __name__ == "__main__":
    main()
