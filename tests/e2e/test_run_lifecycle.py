"""User story: a researcher launches tiny-lm from the CLI, it trains (loss falls, checkpoints written), dies,
and `labbot restart` resumes it from its checkpoint to the end — all on a real Ray head, real SQLite (and the first
story on a real PostgreSQL too)."""

from __future__ import annotations

import json

import pytest
from support import SMALL_LM, Serve, wait_for


def _run(serve: Serve, run_id: str) -> dict:
    """The run as the CLI shows it (``labbot run RUN --json``)."""
    out = serve.cli("run", run_id, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.databases  # the whole story on SQLite and on PostgreSQL (LABBOT_DATABASE_URL=postgresql://…)
def test_launch_train_crash_restart_resume(serve: Serve, backend: str) -> None:
    # --max-restarts 0: the watchdog would restart it by itself (tests/e2e/test_babysitter.py); here a person does
    out = serve.cli(
        "launch", "tiny-lm", "steps=60", "checkpoint_every=10", "crash_at_step=35", "--max-restarts", "0", "--json"
    )
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)
    run_id = run["id"]
    assert run["status"] in ("running", "failed") and run["ray_submission_id"] == f"labbot-{run_id}-1"

    # attempt 1 trains, checkpoints at 10, 20, 30, then the injected crash at step 35 fails it
    wait_for(lambda: serve.run(run_id)["status"] == "failed", timeout=120, what="the crash")
    run = _run(serve, run_id)
    assert run["status"] == "failed" and run["step"] == 34 and run["checkpoint_step"] == 30
    assert "injected crash at step 35" in serve.cli("logs", run_id).stdout
    why = "RuntimeError: injected crash at step 35 (exit code 1)"  # the exception's line, not Ray's envelope
    assert run["error"] == why
    pages = json.loads(serve.cli("pages", "--json").stdout)  # nobody restarts it: that is a page
    assert [(p["run_id"], p["kind"], p["state"]) for p in pages] == [(run_id, "failed", "triggered")]
    assert pages[0]["summary"] == why
    with serve.client() as api:
        losses = [v for _, v in api.get(f"/runs/{run_id}/metrics/loss").json()["points"]]
    assert len(losses) == 34
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5, f"loss did not fall: {losses}"

    # restart: attempt 2 resumes from the step-30 checkpoint, not step 1, and runs to the end
    out = serve.cli("restart", run_id, "--json")
    assert out.returncode == 0, out.stderr
    restarted = json.loads(out.stdout)
    assert restarted["attempt"] == 2 and restarted["step"] == 30  # progress counts from the checkpoint
    # `logs --follow` prints attempt 2 as it trains and returns when it has ended
    followed = serve.cli("logs", run_id, "--follow", timeout=180)
    assert followed.returncode == 0, followed.stderr
    assert "resumed from checkpoint step 30" in followed.stdout and "step 60/60" in followed.stdout
    assert followed.stdout.count("step 40/60 ") == 1, "each line printed once"
    run = _run(serve, run_id)
    assert run["status"] == "succeeded" and run["attempt"] == 2 and run["step"] == 60 and run["checkpoint_step"] == 60
    logs = serve.cli("logs", run_id, "--tail", "50").stdout
    assert "resumed from checkpoint step 30" in logs
    first = serve.cli("logs", run_id, "--attempt", "1", "--tail", "5").stdout
    assert "injected crash at step 35" in first, "attempt 1's crash is still there"
    with serve.client() as api:
        steps = [s for s, _ in api.get(f"/runs/{run_id}/metrics/loss").json()["points"]]
    assert steps.count(31) == 2 and steps.count(30) == 1  # 31..34 ran twice: once per attempt

    table = serve.cli("runs").stdout
    assert run_id in table and "succeeded" in table
    with serve.client() as api:
        wait_for(lambda: api.get("/pages", params={"all": "1"}).json()["pages"], what="the page")
    resolved = json.loads(serve.cli("pages", "--all", "--json").stdout)
    assert resolved[0]["state"] == "resolved" and resolved[0]["resolved_by"] == "labbot"  # the restart fixed it
    if backend == "postgresql":  # labbot chose its driver for the plain postgresql:// URL, and said where it is
        assert "database postgresql+psycopg://" in serve.log()


def test_stop_a_running_job(serve: Serve) -> None:
    out = serve.cli("launch", "tiny-lm", "steps=100000", "num_threads=1", "min_step_s=0.05", *SMALL_LM)
    assert out.returncode == 0, out.stderr
    # a human sees progress while Ray starts the job, then how to follow it
    lines = out.stderr.splitlines()
    assert lines[0].startswith("launched run ") and "as Ray job labbot-" in lines[0]
    assert any("waiting for Ray to start it: pending" in line for line in lines)
    assert any(line.strip().startswith("running after") for line in lines)
    run_id = lines[0].split()[2]
    assert f"labbot logs {run_id}" in lines[-1]
    wait_for(lambda: (_run(serve, run_id)["step"] or 0) > 3, timeout=60, what="training steps")
    out = serve.cli("stop", run_id)
    assert out.returncode == 0 and "stopped" in out.stdout
    with serve.client() as api:
        sid = f"labbot-{run_id}-1"
        wait_for(lambda: api.get(f"/runs/{run_id}").json()["run"]["status"] == "stopped", what="stopped")
    from labbot.training.launcher import RAY_STOPPED, RayLauncher
    from labbot.training.ray_cluster import RayConnection

    launcher = RayLauncher(RayConnection(serve.env["RAY_ADDRESS"], serve.env["RAY_AUTH_TOKEN"]))
    wait_for(lambda: (j := launcher.job(sid)) is not None and j.status == RAY_STOPPED, what="Ray to stop the job")
