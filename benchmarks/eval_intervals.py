"""Paired against unpaired: the width of the 95 % interval on the difference of two solvers' pass rates on one suite,
computed by labbot's own statistics (``labbot.evals.stats``, what ``eval compare`` shows) over simulated suites.

Why simulated: two model solvers on a real suite need a model provider, which these machines cannot reach. The
simulation is the situation pairing is for: each task has a difficulty (uniform), both solvers pass a task with a
probability that falls with it (solver B a fixed margin below A), and a task's luck is shared by both solvers with
probability ``--shared`` (else each draws its own): the difficulty alone already makes a hard task hard for both, as
on real suites; ``--shared 0`` leaves only that. For each suite size, ROUNDS suites are drawn; the script reports
the median width of the paired (Newcombe method 10) and unpaired (Newcombe, independent) intervals with their
spread, how often each excludes zero (the power to tell the solvers apart), and the paired interval's coverage of
the true difference. Claim: the paired interval is narrower (median ratio paired/unpaired < 1 at every size).

    .venv/bin/python benchmarks/eval_intervals.py [--rounds 400] [--margin 0.15] [--shared 0.5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from labbot.evals.stats import compare

SIZES = (20, 50, 100)


def suite_round(
    rng: random.Random, n: int, margin: float, shared: float
) -> tuple[dict[str, bool], dict[str, bool], float]:
    ease = [rng.random() for _ in range(n)]
    p_a = [min(1.0, e + margin / 2) for e in ease]
    p_b = [max(0.0, e - margin / 2) for e in ease]
    draw_a = [rng.random() for _ in range(n)]
    draw_b = [d if rng.random() < shared else rng.random() for d in draw_a]
    a = {str(i): draw_a[i] < p_a[i] for i in range(n)}
    b = {str(i): draw_b[i] < p_b[i] for i in range(n)}
    return a, b, (sum(p_a) - sum(p_b)) / n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=400)
    p.add_argument("--margin", type=float, default=0.15, help="how much better solver A is, on average")
    p.add_argument("--shared", type=float, default=0.5, help="how often a task's luck is the same for both solvers")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = random.Random(a.seed)
    rows = []
    for n in SIZES:
        paired, unpaired, ratios = [], [], []
        excl_p = excl_u = covered = 0
        for _ in range(a.rounds):
            va, vb, truth = suite_round(rng, n, a.margin, a.shared)
            c = compare(va, vb)
            paired.append(c.paired.width)
            unpaired.append(c.unpaired.width)
            ratios.append(c.paired.width / c.unpaired.width)
            excl_p += c.paired.excludes_zero()
            excl_u += c.unpaired.excludes_zero()
            covered += c.paired.low <= truth <= c.paired.high
        q = statistics.quantiles(ratios, n=10)
        rows.append(
            {
                "tasks": n,
                "paired_width": round(statistics.median(paired), 3),
                "unpaired_width": round(statistics.median(unpaired), 3),
                "ratio": round(statistics.median(ratios), 3),
                "ratio_p10_p90": [round(q[0], 3), round(q[-1], 3)],
                "tells_apart_paired": round(excl_p / a.rounds, 3),
                "tells_apart_unpaired": round(excl_u / a.rounds, 3),
                "paired_coverage": round(covered / a.rounds, 3),
            }
        )
    print(
        f"two solvers {a.margin:.0%} apart on average, luck shared {a.shared:.0%} of the time, {a.rounds} simulated "
        f"suites per size (seed {a.seed})"
    )
    print(f"{'tasks':>6} {'paired':>8} {'unpaired':>9} {'ratio':>7} {'p10–p90':>13} {'apart: paired':>14} "
          f"{'unpaired':>9} {'coverage':>9}")  # fmt: skip
    for r in rows:
        lo, hi = r["ratio_p10_p90"]
        print(
            f"{r['tasks']:>6} {r['paired_width']:>8.3f} {r['unpaired_width']:>9.3f} {r['ratio']:>7.3f} "
            f"{f'{lo:.3f}–{hi:.3f}':>13} {r['tells_apart_paired']:>14.0%} {r['tells_apart_unpaired']:>9.0%} "
            f"{r['paired_coverage']:>9.0%}"
        )
    ok = all(r["ratio"] < 1 for r in rows)
    print(f"claim (paired interval narrower than unpaired at every size): {'pass' if ok else 'FAIL'}")
    ratio = statistics.median(r["ratio"] for r in rows)
    print(json.dumps({"benchmark": "eval_intervals", "ratio": ratio, "rows": rows,
                      "claim": "paired/unpaired width < 1", "ok": ok}))  # fmt: skip


if __name__ == "__main__":
    main()
