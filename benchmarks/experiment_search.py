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

**Controller overhead.** The same world with its tick on a clock, as ``labbot serve`` runs it: a thread reconciles the
runs with Ray and steps the controller every ``--tick`` seconds (as the watchdog singleton does, the controller right
after the reconcile). An experiment of one trial at a time; at a random moment within a tick the trial's job ends on
Ray (it reported its last step, or — every other round — it is the pruner's decision that ends it: the trial's next
report puts it behind); measured is the time from then until the next trial's run reaches Ray, in seconds and in
ticks. Claim: median and p95 ≤ one tick (the end is seen at the next tick, and the next trial launched in that tick).

    .venv/bin/python benchmarks/experiment_search.py [--steps 150] [--reps 5] [--trials 12] [--concurrency 2]
                                                     [--tick 0.5] [--latency-rounds 16]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import threading
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
        for _ in range(10_000):
            lab.tick()
            doc = lab.experiments.get(exp["id"])
            if doc["status"] == "done":
                break
            lab.train()
        spent = sum(lab.progress.values())  # the steps each run reported before it ended or was pruned
        best = doc["results"]["best"]["mean"]
        pruned = doc["counts"]["pruned"]
        lab.db.dispose()
        return {"best": best, "spent": spent, "pruned": pruned}
    finally:
        mp.undo()


class Scripted(Lab):
    """The tests' experiment world whose running trial can be made to fall far behind (``behind``)."""

    behind = False

    def loss(self, params: dict[str, Any], step: int) -> float:
        return 100.0 if self.behind else super().loss(params, step)


def end_to_launch(folder: Path, tick_s: float, rounds: int, rng: random.Random) -> list[float]:
    """Seconds from a trial's end on Ray (or the report that gets it pruned) to the next trial's run on Ray."""
    mp = MonkeyPatch()
    folder.mkdir(parents=True)
    try:
        lab = Scripted(folder, mp)
        submitted_at: dict[str, float] = {}
        real_submit = lab.ray.submit_job

        def submit_job(**kwargs: Any) -> str:
            submitted_at[kwargs["submission_id"]] = time.perf_counter()
            return real_submit(**kwargs)

        lab.ray.submit_job = submit_job
        lab.sweep(space=["lr=loguniform(1e-4,1e-2)"], trials=rounds + 1, concurrency=1, search="random",
                  prune="median")  # fmt: skip
        lock, stop = threading.Lock(), threading.Event()

        def scheduler() -> None:
            next_at = time.perf_counter()
            while not stop.is_set():
                with lock:
                    lab.tick()
                next_at += tick_s
                stop.wait(max(0.0, next_at - time.perf_counter()))

        thread = threading.Thread(target=scheduler, daemon=True)
        thread.start()
        out: list[float] = []
        try:
            for i in range(rounds):
                wait_until(lambda n=i + 1: len(submitted_at) == n, tick_s)
                time.sleep(tick_s * rng.random())  # the end comes at a random phase of the tick
                with lock:
                    sid = str(lab.ray.submitted[-1]["submission_id"])
                    if i % 2 and i >= 4:  # a report far behind the others: the median pruner stops it
                        lab.behind = True
                        lab.train(10)
                        lab.behind = False
                    else:
                        lab.train(10)  # to its last step: the job succeeds
                        lab.ray.finish(sid)
                    ended = time.perf_counter()
                wait_until(lambda n=i + 2: len(submitted_at) == n, tick_s)
                out.append(max(submitted_at.values()) - ended)
        finally:
            stop.set()
            thread.join()
            lab.db.dispose()
        return out
    finally:
        mp.undo()


def wait_until(done: Any, tick_s: float) -> None:
    deadline = time.perf_counter() + 20 * tick_s
    while not done():
        if time.perf_counter() > deadline:
            raise SystemExit(f"nothing happened within 20 ticks ({20 * tick_s:.1f}s)")
        time.sleep(tick_s / 200)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--tick", type=float, default=0.5, help="the watchdog tick, seconds (labbot's default is 5s)")
    ap.add_argument("--latency-rounds", type=int, default=16)
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
        gaps, fractions = [], []
        for rep in range(a.reps):
            r = search(folder / f"search{rep}", curves, seed=rep + 1, a=a)
            gap = (r["best"] - grid_best) / abs(grid_best)
            gaps.append(gap)
            fractions.append(r["spent"] / grid_steps)
            print(f"  rep {rep + 1}: best {r['best']:.4f} (gap {gap:+.2%}), {r['spent']} steps = "
                  f"{r['spent'] / grid_steps:.2f} × the grid's, {r['pruned']} of {a.trials} pruned")  # fmt: skip
        latencies = end_to_launch(folder / "latency", a.tick, a.latency_rounds, random.Random(0))
    gap_med, frac_med = median(gaps), median(fractions)
    ticks = sorted(x / a.tick for x in latencies)
    p95 = ticks[min(len(ticks) - 1, round(0.95 * (len(ticks) - 1)))]
    print(f"search: median gap {gap_med:+.2%} (spread {min(gaps):+.2%} … {max(gaps):+.2%}); median steps "
          f"{frac_med:.2f} × the grid's (spread {min(fractions):.2f} … {max(fractions):.2f})")  # fmt: skip
    print(f"controller: a trial's end (or pruning) → the next trial on Ray: median {statistics.median(ticks):.2f} "
          f"ticks, p95 {p95:.2f} ticks (max {ticks[-1]:.2f}) over {len(ticks)} rounds at a {a.tick:g} s tick "
          f"({statistics.median(latencies):.3f} s median)")  # fmt: skip
    report("experiment_search", {
        "ratio": frac_med, "claim": "≤0.35 × grid steps, ≤2% gap", "ok": frac_med <= 0.35 and gap_med <= 0.02,
        "gap_median": gap_med, "gaps": gaps, "step_fractions": fractions,
    })  # fmt: skip
    report("experiment_overhead", {
        "ratio": p95, "claim": "median, p95 ≤ 1 tick", "ok": p95 <= 1.0 and statistics.median(ticks) <= 1.0,
        "median_ticks": statistics.median(ticks), "p95_ticks": p95, "tick_s": a.tick,
    })  # fmt: skip


if __name__ == "__main__":
    main()
