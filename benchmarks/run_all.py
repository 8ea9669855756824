"""`make bench`: run every benchmark script, print a table of the claims and write benchmarks/results/latest.json.

``judge_agreement.py`` is not among them: it needs a judge model's provider and key (``--judge PROVIDER/MODEL``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = [
    "telemetry_overhead.py",
    "rl_feedback.py",
    "rl_feedback_hard.py",
    "rl_recovery.py",
    "ingest.py",
    "launch.py",
    "slack_ack.py",
    "slack_calls.py",
    "agent_answer_stream.py",
    "slack_body_limit.py",
    "watchdog_cost.py",
    "detection_lag.py",
    "artifacts.py",
    "agent_loop.py",
    "loop_lag.py",
    "mcp_roundtrip.py",
    "notion_render.py",
    "datadog_summary.py",
    "codebase_regex.py",
    "sandbox_cost.py",
    "isolation_table.py",
    "tamper_table.py",
    "contamination.py",
    "contamination_cost.py",
    "eval_fixed_cost.py",
    "eval_generate.py",
    "eval_throughput.py",
    "eval_intervals.py",
    "compare_runs.py",
    "queue_admission.py",
    "ab_coverage.py",
    "checkpoint_store.py",
    "house.py",
    "experiment_search.py",
    "research_approvals.py",
    "research_eval.py",
    "node_recovery.py",
    "eval_fan_out.py",
]


def main() -> int:
    results = []
    for script in SCRIPTS:
        print(f"== {script}", flush=True)
        out = subprocess.run([sys.executable, str(HERE / script)], capture_output=True, text=True, cwd=HERE.parent)
        lines = out.stdout.splitlines()
        for line in lines:
            if not line.startswith("{"):
                print("  " + line)
        if out.returncode != 0:
            print(out.stderr[-3000:])
            results.append({"benchmark": script, "ok": False, "error": f"exit {out.returncode}"})
            continue
        results.extend(json.loads(line) for line in lines if line.startswith("{"))
    print(f"\n{'benchmark':<22}{'ratio':>10}  {'claim':<28}ok")
    for r in results:
        ratio = f"{r['ratio']:.3f}" if "ratio" in r else "-"
        # a result line without its verdict is a broken benchmark, not a kept claim
        print(f"{r['benchmark']:<22}{ratio:>10}  {r.get('claim', ''):<28}{r.get('ok', 'no verdict (ok missing)')}")
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "latest.json").write_text(json.dumps(results, indent=2))
    return 0 if all(r.get("ok") is True for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
