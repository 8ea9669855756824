"""The research eval separates a competent researcher from a naive one (issue 28, measured).

A fresh `labbot serve` on an embedded Ray head; the built-in suite `research-tiny-lm` (made on first use: tiny-lm
trained here at each lr of its grid, the suite's reference) run through the CLI as a user would —
`labbot eval run research-tiny-lm --solver oracle`, then `--solver naive` — every task on real tiny-lm runs on Ray,
set up and solved through labbot's API and the researcher's tools. Prints each task's verdict, the tune task's
regret for each policy, and the pass rates. Claim: the oracle passes every task with a regret within the suite's
tolerance, the naive policy passes none.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import ROOT, control_plane, report


def run(env: dict[str, str], solver: str, out: Path) -> dict:
    started = time.perf_counter()
    done = subprocess.run(
        [str(Path(sys.executable).with_name("labbot")), "eval", "run", "research-tiny-lm", "--solver", solver,
         "--out", str(out), "--json"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"eval run --solver {solver} failed ({done.returncode}): {done.stderr[-2000:]}")
    results = json.loads(done.stdout[done.stdout.index("{") :])
    results["seconds"] = time.perf_counter() - started
    return results


def main() -> None:
    with control_plane() as plane, tempfile.TemporaryDirectory(prefix="lb-research-") as tmp:
        env = dict(plane.serve.env)
        by = {}
        for solver in ("oracle", "naive"):
            r = run(env, solver, Path(tmp) / solver)
            by[solver] = r
            for s in r["samples"]:
                value = f", regret {s['value']:.4f}" if s["kind"] == "tune" and s["value"] is not None else ""
                print(f"  {solver:6} {s['task']:22} {'pass' if s['passed'] else 'fail'}{value} — {s['why']}")
            print(f"{solver}: {r['passed']}/{r['total']} passed in {r['seconds']:.0f} s")
    regret = {k: next((s["value"] for s in r["samples"] if s["kind"] == "tune"), None) for k, r in by.items()}
    oracle, naive = by["oracle"], by["naive"]
    tolerance = 0.05
    ok = (
        oracle["passed"] == oracle["total"]
        and naive["passed"] == 0
        and regret["oracle"] is not None
        and regret["oracle"] <= tolerance
    )
    print(f"regret at the tune task: oracle {regret['oracle']}, naive {regret['naive']} (tolerance {tolerance})")
    report("research_eval", {
        "ratio": oracle["pass_rate"] - naive["pass_rate"], "claim": "oracle passes all, naive none",
        "ok": ok, "regret_oracle": regret["oracle"], "regret_naive": regret["naive"],
        "pass_rate_oracle": oracle["pass_rate"], "pass_rate_naive": naive["pass_rate"],
    })  # fmt: skip


if __name__ == "__main__":
    main()
