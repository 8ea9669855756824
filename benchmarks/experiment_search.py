"""An experiment's search, measured: TPE + ASHA against the exhaustive grid on tiny-lm, and the controller's overhead.

**Search efficiency.** The space is tiny-lm's learning rate × width (``n_embd``): 6 × 3 = 18 configs, each trained
here for ``--steps`` steps with one seed, in process, one thread (deterministic: the same config and seed give the
same curve, bit for bit). The grid's best objective (the mean of the last three reported losses, as an experiment
scores it) is the minimum over all 18; its cost is 18 × steps. The search is the product's: the experiment service,
controller and Optuna study on a SQLite database, Ray the tests' recording double, each trial's run reporting the
curve its config trained to (so the search sees exactly what it would have seen, and pays only for the steps its
runs reported before they ended or were pruned). Measured per repetition (a different search seed each): the best
scored objective's gap to the grid's best, and the steps spent over the grid's. Claim: within 2 % of the grid's best
using ≤ 0.35 × the grid's steps (median over ``--reps`` repetitions, with the spread).

**Controller overhead.** In the same runs: for every trial that ended (or was pruned) while another was still to be
asked, the time from the tick that saw it end to the next trial's launch in that tick — wall time inside the tick, the
watchdog tick itself not counted — as median and p95, against the watchdog's default tick (5 s); claim: ≤ one tick.
(A trial's end is seen at the first tick after it, as any run's is: so end → next launch is at most one tick plus this.)

    .venv/bin/python benchmarks/experiment_search.py [--steps 150] [--reps 5] [--trials 12] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import median, report
from experiment_lab import Lab
from pytest import MonkeyPatch

from labbot.training.experiments.scores import seed_objective
from labbot.training.jobs.tiny_lm import TinyLMConfig, train

LRS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)
WIDTHS = (16, 32, 64)
LOG_EVERY = 10
WINDOW = 3
DEFAULT_TICK_S = 5.0


def curve(lr: float, width: int, steps: int, folder: Path) -> dict[int, float]:
    losses: dict[int, float] = {}
    cfg = TinyLMConfig(steps=steps, checkpoint_every=10**9, log_every=LOG_EVERY, lr=lr, n_embd=width, n_head=4,
                       num_threads=1, seed=1337, device="cpu")  # fmt: skip
    train(cfg, checkpoint_dir=folder / f"{lr:g}-{width}", on_step=lambda step, m: losses.__setitem__(step, m["loss"]))
    return {s: v for s, v in losses.items() if s % LOG_EVERY == 0}


class Replay(Lab):
    """The experiment world of the tests, its runs reporting recorded tiny-lm curves."""

    def __init__(self, folder: Path, mp: MonkeyPatch, curves: dict[tuple[float, int], dict[int, float]]) -> None:
        super().__init__(folder, mp)
        self.curves = curves

    def loss(self, params: dict[str, Any], step: int) -> float:
        return self.curves[(float(params["lr"]), int(params["width"]))][step]


def search(folder: Path, curves: dict[tuple[float, int], dict[int, float]], seed: int, a: argparse.Namespace) -> dict:
    mp = MonkeyPatch()
    try:
        folder.mkdir(parents=True)
        lab = Replay(folder, mp, curves)
        exp = lab.sweep(
            space=[f"lr={','.join(f'{x:g}' for x in LRS)}", f"width={','.join(map(str, WIDTHS))}",
                   f"steps={a.steps}", f"log_every={LOG_EVERY}"],
            trials=a.trials, concurrency=a.concurrency, search="tpe", prune="asha", search_seed=seed, window=WINDOW,
        )  # fmt: skip
        overheads: list[float] = []
        for _ in range(10_000):
            lab.sync()
            started = time.perf_counter()
            rep = lab.experiments.controller.tick()
            if rep.launched and (rep.ended or rep.pruned):
                overheads.append(time.perf_counter() - started)
            doc = lab.experiments.get(exp["id"])
            if doc["status"] == "done":
                break
            lab.train()
        spent = sum(lab.progress.values())  # the steps each run reported before it ended or was pruned
        best = doc["results"]["best"]["mean"]
        pruned = doc["counts"]["pruned"]
        lab.db.dispose()
        return {"best": best, "spent": spent, "overheads": overheads, "pruned": pruned}
    finally:
        mp.undo()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--concurrency", type=int, default=2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        curves = {(lr, w): curve(lr, w, a.steps, folder / "ckpt") for lr in LRS for w in WIDTHS}
        objective: dict[tuple[float, int], float] = {}
        for key, c in curves.items():  # a diverged config has no objective: it cannot be the grid's best
            value = seed_objective(sorted(c.items()), at_step=None, window=WINDOW)
            objective[key] = value if value is not None else float("inf")
        grid_best_key = min(objective, key=objective.__getitem__)
        grid_best = objective[grid_best_key]
        grid_steps = len(curves) * a.steps
        print(f"grid: {len(curves)} configs × {a.steps} steps trained in {time.perf_counter() - t0:.0f}s; best "
              f"lr={grid_best_key[0]:g} n_embd={grid_best_key[1]} → loss {grid_best:.4f}")  # fmt: skip
        gaps, fractions, overheads = [], [], []
        for rep in range(a.reps):
            r = search(folder / f"search{rep}", curves, seed=rep + 1, a=a)
            gap = (r["best"] - grid_best) / abs(grid_best)
            gaps.append(gap)
            fractions.append(r["spent"] / grid_steps)
            overheads.extend(r["overheads"])
            print(f"  rep {rep + 1}: best {r['best']:.4f} (gap {gap:+.2%}), {r['spent']} steps = "
                  f"{r['spent'] / grid_steps:.2f} × the grid's, {r['pruned']} of {a.trials} pruned")  # fmt: skip
    gap_med, frac_med = median(gaps), median(fractions)
    over = sorted(overheads)
    p95 = over[min(len(over) - 1, round(0.95 * (len(over) - 1)))] if over else float("nan")
    print(f"search: median gap {gap_med:+.2%} (spread {min(gaps):+.2%} … {max(gaps):+.2%}); median steps "
          f"{frac_med:.2f} × the grid's (spread {min(fractions):.2f} … {max(fractions):.2f})")  # fmt: skip
    print(f"controller: end or pruning → next launch inside the tick: median {statistics.median(over) * 1000:.0f} ms, "
          f"p95 {p95 * 1000:.0f} ms over {len(over)} launches (one tick: {DEFAULT_TICK_S:g} s)")  # fmt: skip
    report("experiment_search", {
        "ratio": frac_med, "claim": "≤0.35 × grid steps, ≤2% gap", "ok": frac_med <= 0.35 and gap_med <= 0.02,
        "gap_median": gap_med, "gaps": gaps, "step_fractions": fractions,
    })  # fmt: skip
    report("experiment_overhead", {
        "ratio": p95 / DEFAULT_TICK_S, "claim": "p95 ≤ one tick", "ok": p95 <= DEFAULT_TICK_S,
        "median_s": statistics.median(over), "p95_s": p95,
    })  # fmt: skip


if __name__ == "__main__":
    main()
