"""Ingest: telemetry points accepted per second by `labbot serve` (claim: >= 5,000/s on this 2-core machine, on
SQLite and on PostgreSQL), batched (500 points a request, as labbot_client.telemetry sends) vs one point a request,
in one run, for each database; then PostgreSQL against SQLite at the same batch sizes.

Each point is one step with two metrics (loss, tokens_per_s), stored as rows in real SQLite (a file in the control
plane's home) or a real PostgreSQL (a scratch database on the server, `LABBOT_DATABASE_URL=postgresql://…`).

    .venv/bin/python benchmarks/ingest.py [--seconds 5] [--clients 4] [--database sqlite|postgresql|both]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import httpx
from _harness import add_database_option, backends, control_plane, report, scratch_database


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


def measure(database_url: str, seconds: float, clients: int) -> tuple[float, float]:
    """(points/s one point a request, points/s 500 points a request) against one control plane on that database."""
    with control_plane(database_url) as plane:
        run_id, token = plane.sink_run()
        url = f"{plane.serve.url}/api/v1/runs/{run_id}/telemetry"
        blast(url, token, 50, 1.0, 1, 0)  # warm-up
        single = blast(url, token, 1, seconds, clients, 10**8)
        batched = blast(url, token, 500, seconds, clients, 2 * 10**8)
    return single, batched


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", type=int, default=4)
    add_database_option(ap)
    a = ap.parse_args()
    figures: dict[str, dict[str, float]] = {}
    for backend in backends(a.database):
        with tempfile.TemporaryDirectory(prefix="lb-ingest-") as tmp, scratch_database(backend, Path(tmp)) as url:
            single, batched = measure(url, a.seconds, a.clients)
        figures[backend] = {"single_points_per_s": single, "batched_points_per_s": batched, "ratio": batched / single}
        print(f"{backend}: points/s, one point a request:   {single:,.0f}")
        print(f"{backend}: points/s, 500 points a request:  {batched:,.0f}  (claim >= 5,000)")
        print(f"{backend}: ratio batched/single = {batched / single:.1f}")
    result: dict[str, object] = {"claim": ">= 5000 points/s batched, on each database"}
    first = next(iter(figures.values()))
    result.update(first)  # the headline figures, as before: SQLite's when it ran
    result["databases"] = figures
    if {"sqlite", "postgresql"} <= set(figures):
        pg, lite = figures["postgresql"], figures["sqlite"]
        result["postgresql_over_sqlite"] = {k: pg[k] / lite[k] for k in ("single_points_per_s", "batched_points_per_s")}
        print(
            f"postgresql/sqlite: batched ×{pg['batched_points_per_s'] / lite['batched_points_per_s']:.2f}, "
            f"one a request ×{pg['single_points_per_s'] / lite['single_points_per_s']:.2f}"
        )
    result["ok"] = all(f["batched_points_per_s"] >= 5000 for f in figures.values())
    report("ingest", result)


if __name__ == "__main__":
    main()
