"""Recovery after a node loss, on a real multi-node Ray cluster: from the ``kill -9`` of the node a run trains on to
the run's next step on another node, median of ``--rounds`` (claim: at most Ray's node-death timeout + 30 s).

The cluster is ``labbot.training.local_cluster`` (a head with no CPU and two workers with 1 CPU and
``accelerator=1``, Ray's node-death timeout set to 3 missed health checks 1 s apart: ``NODE_DEATH_TIMEOUT_S``); a
real ``labbot serve`` connected to it with ``RAY_ADDRESS``/``RAY_AUTH_TOKEN`` and a checkpoint folder declared
shared (every node of this machine mounts it). Each round launches tiny-lm with ``--resources accelerator=1``, waits
for its first checkpoint, kills its node (its raylet and the processes it started) and measures, from the kill:

- ``detected``: labbot has the run's restart (attempt 2 exists: Ray failed the job as lost, the watchdog read it);
- ``next_step``: attempt 2 reported a step on the other worker (its ``last_step_at``, labbot's clock).

A worker joins after each round, so every round starts with two. What the time is made of: Ray's node-death timeout
(the GCS missing the node's health checks), the watchdog's tick (1 s here), then a new attempt's start on the other
node — Ray's job supervisor and a Python process importing torch, on two cores shared with the cluster and labbot.

    .venv/bin/python benchmarks/node_recovery.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from _harness import report
from support import SMALL_LM, Serve, wait_for

from labbot.training.local_cluster import NODE_DEATH_TIMEOUT_S, ClusterProcess

CLAIM_SLACK_S = 30.0
TOML = """
[watchdog]
tick = "1s"

[training]
checkpoint_root = "{root}"
"""


def one_round(serve: Serve, cluster: ClusterProcess) -> dict[str, float]:
    with serve.client() as api:
        body = {
            "job": "tiny-lm",
            "params": dict(p.split("=") for p in SMALL_LM)
            | {"steps": "100000", "checkpoint_every": "4", "log_every": "1", "num_threads": "1", "min_step_s": "0.2"},
            "resources": {"accelerator": 1},
        }
        run_id = api.post("/runs", json=body).json()["run"]["id"]
    workers = {w["node_id"] for w in cluster.workers}
    first: Any = wait_for(
        lambda: (
            (r := serve.run(run_id))["status"] == "running"
            and (r.get("node") or {}).get("id") in workers
            and (r.get("checkpoint_step") or 0) >= 4
            and r
        ),
        timeout=120,
        what="the run on a worker with a checkpoint",
    )
    node = first["node"]["id"]
    killed_wall = time.time()
    killed = cluster.kill_node(node)
    wait_for(lambda: serve.run(run_id)["attempt"] == 2, timeout=120, what="the restart", interval=0.05)
    detected = time.monotonic() - killed
    moved: Any = wait_for(
        lambda: (
            (r := serve.run(run_id))["attempt"] == 2
            and r.get("last_step_at")
            and (r.get("node") or {}).get("id") not in (None, node)
            and r
        ),
        timeout=180,
        what="attempt 2's first step on the other worker",
        interval=0.1,
    )
    next_step = datetime.fromisoformat(moved["last_step_at"]).timestamp() - killed_wall
    with serve.client() as api:
        api.post(f"/runs/{run_id}/stop", params={"by": "bench"})
    cluster.add_worker()
    return {"detected_s": detected, "next_step_s": next_step}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lb-recovery-") as tmp:
        root = Path(tmp)
        cluster = ClusterProcess(root / "cluster", workers=2)
        conn = cluster.start()
        (root / "labbot.toml").write_text(TOML.format(root=root / "checkpoints"))
        serve = Serve(
            root / "home",
            ray_address=conn.address,
            ray_token=conn.token,
            extra_env={"LABBOT_CONFIG": str(root / "labbot.toml")},
        ).start()
        rounds = []
        try:
            for i in range(a.rounds):
                rounds.append(one_round(serve, cluster))
                print(f"round {i + 1}: {rounds[-1]}", flush=True)
        finally:
            serve.stop()
            cluster.stop()
    nexts = [r["next_step_s"] for r in rounds]
    detected = [r["detected_s"] for r in rounds]
    bound = NODE_DEATH_TIMEOUT_S + CLAIM_SLACK_S
    report(
        "node_recovery",
        {
            "kill_to_next_step_s_median": statistics.median(nexts),
            "kill_to_next_step_s_spread": [min(nexts), max(nexts)],
            "kill_to_restart_s_median": statistics.median(detected),
            "kill_to_restart_s_spread": [min(detected), max(detected)],
            "node_death_timeout_s": NODE_DEATH_TIMEOUT_S,
            "rounds": len(rounds),
            "claim": f"kill -> next step on another node <= Ray's node-death timeout ({NODE_DEATH_TIMEOUT_S:g} s) + "
            f"{CLAIM_SLACK_S:g} s, median of {len(rounds)}",
            "ok": statistics.median(nexts) <= bound,
        },
    )


if __name__ == "__main__":
    main()
