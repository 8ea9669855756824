"""Ingest: telemetry points accepted per second by `labbot serve` (claim: >= 5,000/s on this 2-core machine),
batched (500 points a request, as labbot_client.telemetry sends) vs one point a request, in one run.

Each point is one step with two metrics (loss, tokens_per_s), stored as rows in real SQLite.

    .venv/bin/python benchmarks/ingest.py [--seconds 5] [--clients 4]
"""

from __future__ import annotations

import argparse
import threading
import time

import httpx
from _harness import control_plane, report


def blast(url: str, token: str, batch: int, seconds: float, clients: int, step0: int) -> float:
    """Points accepted per second by ``clients`` threads posting ``batch``-point requests for ``seconds``."""
    accepted = [0] * clients
    stop_at = time.monotonic() + seconds

    def worker(i: int) -> None:
        step = step0 + i * 10_000_000
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            while time.monotonic() < stop_at:
                points = [
                    {"step": step + k, "ts": time.time(), "metrics": {"loss": 2.0 / (1 + k), "tokens_per_s": 4e4}}
                    for k in range(batch)
                ]
                step += batch
                r = http.post(url, json={"attempt": 1, "points": points, "events": []})
                r.raise_for_status()
                accepted[i] += r.json()["accepted"]

    start = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(accepted) / (time.monotonic() - start)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", type=int, default=4)
    a = ap.parse_args()
    with control_plane() as plane:
        run_id, token = plane.sink_run()
        url = f"{plane.serve.url}/api/v1/runs/{run_id}/telemetry"
        blast(url, token, 50, 1.0, 1, 0)  # warm-up
        single = blast(url, token, 1, a.seconds, a.clients, 10**8)
        batched = blast(url, token, 500, a.seconds, a.clients, 2 * 10**8)
    print(f"points/s, one point a request:   {single:,.0f}")
    print(f"points/s, 500 points a request:  {batched:,.0f}  (claim >= 5,000)")
    print(f"ratio batched/single = {batched / single:.1f}")
    report(
        "ingest",
        {
            "single_points_per_s": single,
            "batched_points_per_s": batched,
            "ratio": batched / single,
            "claim": ">= 5000 points/s batched",
            "ok": batched >= 5000,
        },
    )


if __name__ == "__main__":
    main()
