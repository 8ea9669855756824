"""Launch latency: `labbot launch` (the real CLI, until it reports RUNNING) vs a bare
`JobSubmissionClient.submit_job` of the same entrypoint and runtime_env polled until RUNNING, alternating, in one
run (claim: median ratio <= 1.3). Both poll Ray's status every 0.1 s (labbot's server does, behind a long-poll).

    .venv/bin/python benchmarks/launch.py [--trials 7]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid

from _harness import control_plane, median, report
from ray.job_submission import JobStatus, JobSubmissionClient

# what labbot submits for `labbot launch tiny-lm steps=100000`: the same entrypoint, the same kind of runtime_env
ENTRY = (
    "python -m labbot.training.jobs.tiny_lm --steps 100000 --checkpoint_every 50 --num_workers 0 --batch_size 16 "
    "--lr 0.003 --seed 1337 --device auto --hang_at_step 0 --crash_at_step 0 --nan_at_step 0"
)
ENV_KEYS = ("LABBOT_RUN_ID", "LABBOT_ATTEMPT", "LABBOT_TELEMETRY_TOKEN", "LABBOT_CONTROL_URL", "LABBOT_CHECKPOINT_DIR")


def labbot_launch(plane) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "labbot.bot.cli.main", "launch", "tiny-lm", "steps=100000", "--json"],
        env=plane.serve.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.perf_counter() - start
    run = json.loads(out.stdout)
    assert run["status"] == "running", out.stderr
    with plane.serve.client() as api:
        api.post(f"/runs/{run['id']}/stop")
    settle(JobSubmissionClient(plane.ray.address, headers=dict(plane.ray.headers)), run["ray_submission_id"])
    return elapsed


def bare_launch(client: JobSubmissionClient) -> float:
    start = time.perf_counter()
    sid = f"bare-{uuid.uuid4().hex[:8]}"
    env = {k: "" for k in ENV_KEYS} | {"LABBOT_CHECKPOINT_DIR": f"/tmp/{sid}"}  # telemetry off: no URL
    client.submit_job(entrypoint=ENTRY, submission_id=sid, runtime_env={"env_vars": env}, metadata={"bare": "1"})
    while client.get_job_status(sid) != JobStatus.RUNNING:
        time.sleep(0.1)
    elapsed = time.perf_counter() - start
    client.stop_job(sid)
    settle(client, sid)
    return elapsed


def settle(client: JobSubmissionClient, sid: str) -> None:
    """Let the stopped job's processes go before the next trial, so no trial pays for another's teardown."""
    while not client.get_job_status(sid).is_terminal():
        time.sleep(0.1)
    time.sleep(2.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=7)
    a = ap.parse_args()
    with control_plane() as plane:
        client = JobSubmissionClient(plane.ray.address, headers=dict(plane.ray.headers))
        bare_launch(client)  # warm-up: the first job on a fresh head pays for worker start-up
        labbot_launch(plane)
        ours, bare = [], []
        for i in range(a.trials):
            if i % 2 == 0:
                ours.append(labbot_launch(plane))
                bare.append(bare_launch(client))
            else:
                bare.append(bare_launch(client))
                ours.append(labbot_launch(plane))
    ratio = median(ours) / median(bare)
    print(f"labbot launch → RUNNING: median {median(ours):.2f}s  {[round(x, 2) for x in ours]}")
    print(f"bare submit_job → RUNNING: median {median(bare):.2f}s  {[round(x, 2) for x in bare]}")
    print(f"ratio = {ratio:.2f} (claim <= 1.3)")
    report(
        "launch",
        {"labbot_s": median(ours), "bare_s": median(bare), "ratio": ratio, "claim": "<= 1.3", "ok": ratio <= 1.3},
    )


if __name__ == "__main__":
    main()
