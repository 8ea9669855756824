"""What the control plane must withstand: Ray unreachable at launch, and its own restart while a job runs."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from support import SMALL_LM, Serve, free_port, wait_for

from labbot.training.ray_cluster import RayConnection


def test_launch_with_ray_unreachable_fails_fast_and_records_the_run(tmp_path: Path) -> None:
    address = f"http://127.0.0.1:{free_port()}"  # nothing listens here
    serve = Serve(tmp_path / "home", ray_address=address, ray_token="tok-never-shown").start()
    try:
        start = time.monotonic()
        out = serve.cli("launch", "tiny-lm", "steps=10")
        elapsed = time.monotonic() - start
        assert out.returncode != 0
        assert elapsed < 15, f"launch took {elapsed:.1f}s to fail"
        assert address in out.stderr and "Ray is unreachable" in out.stderr
        assert "tok-never-shown" not in out.stderr + serve.log()
        runs = json.loads(serve.cli("runs", "--json").stdout)
        assert len(runs) == 1, "the run is recorded, not lost"
        assert runs[0]["status"] == "failed" and address in runs[0]["error"]
    finally:
        serve.stop()


def test_the_control_plane_restarts_while_a_job_runs(tmp_path: Path, ray_head: RayConnection) -> None:
    home = tmp_path / "home"
    serve = Serve(home, ray_address=ray_head.address, ray_token=ray_head.token).start()
    out = serve.cli(
        "launch",
        "tiny-lm",
        "steps=100000",
        "checkpoint_every=1000",
        "num_threads=1",
        "min_step_s=0.05",
        *SMALL_LM,
        "--json",
    )
    assert out.returncode == 0, out.stderr
    run_id = json.loads(out.stdout)["id"]

    def step() -> int:
        with serve.client() as api:
            return int(api.get(f"/runs/{run_id}").json()["run"]["step"] or 0)

    wait_for(lambda: step() > 5, timeout=60, what="training steps")
    serve.stop(signal.SIGKILL)  # the control plane dies hard; the job must not notice
    t_dead = time.monotonic()
    wait_for(lambda: time.monotonic() - t_dead > 3, what="downtime")  # the job trains through the outage

    serve = Serve(home, ray_address=ray_head.address, ray_token=ray_head.token, port=serve.port).start()
    try:
        before = step()
        wait_for(lambda: step() > before + 20, timeout=60, what="telemetry to resume into the same run")
        with serve.client() as api:
            run = api.get(f"/runs/{run_id}").json()["run"]
            steps = [s for s, _ in api.get(f"/runs/{run_id}/metrics/loss").json()["points"]]
        assert run["status"] == "running" and run["attempt"] == 1
        # points logged while the control plane was down were buffered and delivered: no gap
        assert steps == list(range(1, len(steps) + 1)), "telemetry lost steps across the restart"
        assert serve.cli("stop", run_id).returncode == 0
    finally:
        serve.stop()
