"""Failover: the leader killed (``SIGKILL``) → the first singleton action of the new leader, against the leader
stopped cleanly (``SIGTERM``: it releases the lease), in one run. Claim: at most 10 s with the default ``[leader]``
(lease 6 s, renewed every 1 s), median of 5.

Each round: two real `labbot serve` replicas on one PostgreSQL database (a scratch ``labbot_bench_…``) and one
embedded Ray head, named like pods (``LABBOT_REPLICA``), started one after the other so the first leads. At a random
moment within a second of both being ready the leader is signalled; measured is the time until the survivor's
``labbot_watchdog_tick_seconds_count`` (its ``/metrics``, polled every 20 ms) leaves 0: a follower never ticks, so
that is the new leader's first watchdog tick, after it took the lease and put the outbox's cut-off deliveries back.
The two kinds of stop alternate in order across rounds. Printed: median and spread of each, and the ratio.

    .venv/bin/python benchmarks/failover.py [--rounds 5] [--lease 6s] [--renew 1s]
"""

from __future__ import annotations

import argparse
import random
import secrets
import signal
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from _harness import postgresql_problem, scratch_database
from prometheus_client.parser import text_string_to_metric_families
from support import Serve, wait_for

from labbot.training.ray_cluster import EmbeddedRayHead, RayConnection

TICKS = "labbot_watchdog_tick_seconds_count"


def ticks(s: Serve) -> float:
    try:
        r = httpx.get(f"{s.url}/metrics", timeout=2)
    except httpx.HTTPError:
        return 0.0
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            if sample.name == TICKS:
                return float(sample.value)
    return 0.0


def role(s: Serve) -> str | None:
    try:
        return str(httpx.get(f"{s.url}/readyz", timeout=2).json().get("role"))
    except (httpx.HTTPError, ValueError):
        return None


def replica(root: Path, name: str, url: str, ray: RayConnection, token: str, config: Path) -> Serve:
    home = root / name
    home.mkdir(parents=True, mode=0o700)
    (home / "admin_token").write_text(token)
    (home / "admin_token").chmod(0o600)
    env = {"LABBOT_DATABASE_URL": url, "LABBOT_REPLICA": name, "LABBOT_CONFIG": str(config)}
    return Serve(home, ray_address=ray.address, ray_token=ray.token, extra_env=env).start()


def one_round(root: Path, i: int, kind: str, url: str, ray: RayConnection, config: Path, rng: random.Random) -> float:
    token = secrets.token_urlsafe(24)
    leader = replica(root, f"r{i}-{kind}-a", url, ray, token, config)
    follower = None
    try:
        wait_for(lambda: role(leader) == "leader", timeout=60, what="the first replica leading")
        follower = replica(root, f"r{i}-{kind}-b", url, ray, token, config)
        wait_for(lambda: role(follower) == "follower", timeout=60, what="the second replica following")
        assert ticks(follower) == 0, "a follower ran the watchdog"
        time.sleep(rng.uniform(0, 1))  # anywhere within a renewal interval
        started = time.monotonic()
        leader.stop(signal.SIGKILL if kind == "kill" else signal.SIGTERM)
        wait_for(lambda: ticks(follower) > 0, timeout=60, interval=0.02, what="the new leader's first tick")
        return time.monotonic() - started
    finally:
        leader.stop()
        if follower is not None:
            follower.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lease", default="6s")
    ap.add_argument("--renew", default="1s")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    problem = postgresql_problem()
    if problem:
        raise SystemExit(f"failover needs PostgreSQL (replicas on SQLite are refused): {problem}")
    rng = random.Random(args.seed)
    results: dict[str, list[float]] = {"kill": [], "term": []}
    with tempfile.TemporaryDirectory(prefix="lb-failover-") as tmp:
        root = Path(tmp)
        config = root / "labbot.toml"
        config.write_text(f'[watchdog]\ntick = "2s"\n\n[leader]\nlease = "{args.lease}"\nrenew = "{args.renew}"\n')
        head = EmbeddedRayHead(root / "ray-home")
        ray = head.ensure()
        try:
            with scratch_database("postgresql", root) as url:
                for i in range(args.rounds):
                    for kind in ("kill", "term") if i % 2 == 0 else ("term", "kill"):
                        seconds = one_round(root, i, kind, url, ray, config, rng)
                        results[kind].append(seconds)
                        print(f"round {i + 1} {kind:>4}: first singleton action after {seconds:.2f} s", flush=True)
        finally:
            head.stop()
    kill, term = statistics.median(results["kill"]), statistics.median(results["term"])
    print()
    print(f"[leader] lease {args.lease}, renew {args.renew}; {args.rounds} rounds each")
    for kind, label in (("kill", "SIGKILL (lease expires)"), ("term", "SIGTERM (lease released)")):
        xs = results[kind]
        print(f"  {label:<26} median {statistics.median(xs):5.2f} s   spread {min(xs):.2f}–{max(xs):.2f} s")
    print(f"  ratio killed / stopped cleanly: {kill / term:.1f}x")
    print(f"  claim (killed, median <= 10 s): {'met' if kill <= 10 else 'NOT met'}")


if __name__ == "__main__":
    main()
