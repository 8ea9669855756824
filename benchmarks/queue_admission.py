"""Queue admission: launches per second through the [compute] cap check vs the same launches with no caps, and the
time from capacity freed to the queued run submitted (claim: at most one watchdog tick), in one run.

Launches: each round, two fresh SQLite databases (migrated like `labbot serve`'s) and two real RunServices, one with
`[compute.training] share = 1.0, runs = 1000000` (every launch admitted, so what is timed is the check itself: the
process lock, the admission_lock row, the queue and active-run queries, the pure decision) and one without
`[compute]`; N launches of one job through each, in alternating order. Ray's Jobs SDK client is the recording double
of the tests (`tests/compute_support.py`): submissions are kept, not made, so the Ray head's own cost is not counted
and both sides pay the same. The ratio is capped / uncapped launches per second (median over rounds).

Freed → submitted: a watchdog (the product's `Watchdog`, its tick run by a thread every `--tick` seconds, as
APScheduler does) over a service with `runs = 1`: one run on Ray, one queued. At a random moment within a tick
interval Ray says the running run SUCCEEDED; measured is the time until the queued run's submission reaches Ray, in
seconds and in ticks (1.0 = one full tick interval).

    .venv/bin/python benchmarks/queue_admission.py [--launches 200] [--rounds 5] [--tick 0.5] [--latency-rounds 8]
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

from _harness import median, report  # noqa: F401  (sets sys.path: the tests' helpers)
from compute_support import SLOW, RecordingRay
from support import make_service

from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.policy import PagingPolicy, WatchdogPolicy
from labbot.agents.babysitter.watchdog import Watchdog
from labbot.training.capacity import ComputePolicy
from labbot.training.ray_cluster import RayConnection
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest

CAPPED = {"training": {"share": 1.0, "runs": 1_000_000}}


def service(folder: Path, compute: dict[str, Any] | None, ray: RecordingRay) -> RunService:
    folder.mkdir(parents=True)
    svc = make_service(folder, RayConnection("http://127.0.0.1:9", "tok"), SLOW)
    svc.compute = ComputePolicy.from_config(compute)
    svc.launcher._call = lambda what, fn: fn(ray)  # type: ignore[method-assign]
    return svc


def launches_per_s(svc: RunService, n: int) -> float:
    started = time.perf_counter()
    for i in range(n):
        svc.launch(LaunchRequest(job="slow", owner=f"U{i % 7}"))
    return n / (time.perf_counter() - started)


def freed_to_submitted(folder: Path, tick_s: float, rng: random.Random) -> float:
    ray = RecordingRay()
    submitted_at: dict[str, float] = {}
    real_submit = ray.submit_job

    def submit_job(**kwargs: Any) -> str:
        submitted_at[kwargs["submission_id"]] = time.perf_counter()
        return real_submit(**kwargs)

    ray.submit_job = submit_job  # type: ignore[method-assign]
    svc = service(folder, {"training": {"runs": 1}}, ray)
    pager = Pager(svc.db, PagingPolicy(), slack=False, pagerduty=False)
    dog = Watchdog(svc.db, svc.launcher, svc, pager, WatchdogPolicy(), address="bench")
    first = svc.launch(LaunchRequest(job="slow", owner="U1")).run
    queued = svc.launch(LaunchRequest(job="slow", owner="U2")).run
    assert queued["status"] == "queued"
    stop = threading.Event()

    def scheduler() -> None:
        next_at = time.perf_counter()
        while not stop.is_set():
            dog.tick()
            next_at += tick_s
            stop.wait(max(0.0, next_at - time.perf_counter()))

    thread = threading.Thread(target=scheduler, daemon=True)
    thread.start()
    try:
        time.sleep(tick_s * (1 + rng.random()))  # capacity frees at a random phase of the tick
        freed = time.perf_counter()
        ray.finish(first["ray_submission_id"])
        sid = queued["ray_submission_id"]
        deadline = freed + 10 * tick_s
        while sid not in submitted_at and time.perf_counter() < deadline:
            time.sleep(tick_s / 100)
        if sid not in submitted_at:
            raise SystemExit(f"the queued run was not submitted within 10 ticks ({10 * tick_s:.1f}s)")
        return submitted_at[sid] - freed
    finally:
        stop.set()
        thread.join()
        svc.db.dispose()


def spread(xs: list[float]) -> str:
    return f"{min(xs):.1f}–{max(xs):.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tick", type=float, default=0.5, help="the watchdog tick, seconds (labbot's default is 2s)")
    ap.add_argument("--latency-rounds", type=int, default=8)
    a = ap.parse_args()
    rng = random.Random(0)
    capped: list[float] = []
    uncapped: list[float] = []
    ratios: list[float] = []
    with tempfile.TemporaryDirectory(prefix="lb-queue-") as tmp:
        root = Path(tmp)
        for r in range(a.rounds):
            with_caps = service(root / f"capped-{r}", CAPPED, RecordingRay())
            without = service(root / f"uncapped-{r}", None, RecordingRay())
            pair = [(with_caps, capped), (without, uncapped)]
            for svc, out in pair if r % 2 == 0 else reversed(pair):
                out.append(launches_per_s(svc, a.launches))
                svc.db.dispose()
            ratios.append(capped[-1] / uncapped[-1])
            print(f"round {r + 1}: capped {capped[-1]:.0f}/s, uncapped {uncapped[-1]:.0f}/s, ratio {ratios[-1]:.2f}")
        latencies = [freed_to_submitted(root / f"latency-{i}", a.tick, rng) for i in range(a.latency_rounds)]
    ticks = [lat / a.tick for lat in latencies]
    ratio = statistics.median(ratios)
    print(
        f"launches/s through the cap check: median {statistics.median(capped):.0f} (spread {spread(capped)}); "
        f"without [compute]: median {statistics.median(uncapped):.0f} (spread {spread(uncapped)}); "
        f"ratio capped/uncapped {ratio:.2f} (spread {min(ratios):.2f}–{max(ratios):.2f}), {a.launches} launches × "
        f"{a.rounds} rounds"
    )
    print(
        f"capacity freed → queued run submitted: median {statistics.median(latencies):.3f}s = "
        f"{statistics.median(ticks):.2f} ticks, max {max(latencies):.3f}s = {max(ticks):.2f} ticks "
        f"(tick {a.tick}s, {a.latency_rounds} rounds; claim ≤ 1 tick: {'holds' if max(ticks) <= 1.0 else 'FAILS'})"
    )
    report(
        "queue_admission",
        {
            "launches_per_s_capped_median": statistics.median(capped),
            "launches_per_s_uncapped_median": statistics.median(uncapped),
            "launches_per_s_capped_spread": [min(capped), max(capped)],
            "launches_per_s_uncapped_spread": [min(uncapped), max(uncapped)],
            "ratio_capped_vs_uncapped": ratio,
            "ratio_spread": [min(ratios), max(ratios)],
            "freed_to_submitted_s_median": statistics.median(latencies),
            "freed_to_submitted_s_max": max(latencies),
            "freed_to_submitted_ticks_median": statistics.median(ticks),
            "freed_to_submitted_ticks_max": max(ticks),
            "tick_s": a.tick,
            "claim": "freed capacity admitted within one tick",
            "ok": max(ticks) <= 1.0,
        },
    )


if __name__ == "__main__":
    main()
