"""The issue's "must withstand": a job environment with only labbot-client (no labbot, no ray, no torch) reports its
telemetry to a real ``labbot serve``; with the control plane down, the job trains on to its end, exits 0 and says
so, and the client never raises.

The job is a plain script run by the fresh venv's python, cwd outside the checkout, no PYTHONPATH, configured only
by the LABBOT_* variables labbot gives a job. The control plane runs without Ray (its address a closed port: the
telemetry route never calls Ray), and the run the job reports to is written into its database as a launch would.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import pytest
from support import Serve, free_port
from venvs import Venv

from labbot.storage.db import Database
from labbot.storage.models import Run
from labbot.training.telemetry_store import token_hash

pytestmark = pytest.mark.subprocess  # fresh virtual environments, and labbot run from them

STEPS = 300
CHECKPOINT_EVERY = 100

JOB = f'''
"""A training job as a user writes it: the standard library and labbot_client, nothing else."""
import time

from labbot_client import telemetry

client = telemetry.init(flush_interval=0.05)  # LABBOT_CONTROL_URL, LABBOT_RUN_ID, LABBOT_TELEMETRY_TOKEN, ...
assert client is not None, "the LABBOT_* variables are not set"
start = time.monotonic()
loss = 4.0
for step in range(1, {STEPS} + 1):
    loss *= 0.99  # one step of "training"
    telemetry.log(step, loss=loss, tokens_per_s=1000 + step)
    if step % {CHECKPOINT_EVERY} == 0:
        telemetry.checkpoint(step, f"ckpt_{{step:08d}}.pt")
    time.sleep(0.001)
trained = time.monotonic() - start
telemetry.finish(timeout=3.0)
print(f"done: {{step}} steps in {{trained:.2f}}s; sent {{client.sent}}, dropped {{client.dropped}}", flush=True)
'''


@pytest.fixture
def job(tmp_path: Path) -> Path:
    path = tmp_path / "job" / "train.py"
    path.parent.mkdir()
    path.write_text(JOB)
    return path


def _run_job(env: Venv, job: Path, url: str, run_id: str, token: str) -> tuple[int, str, str, float]:
    started = time.monotonic()
    done = env.run(
        env.python,
        job,
        cwd=job.parent,
        env=env.env(LABBOT_CONTROL_URL=url, LABBOT_RUN_ID=run_id, LABBOT_TELEMETRY_TOKEN=token, LABBOT_ATTEMPT="1"),
        timeout=60,
    )
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def test_job_env_has_the_client_and_httpx_but_not_labbot_ray_or_torch(job_env: Venv, tmp_path: Path) -> None:
    probe = """
import importlib, labbot_client, httpx
print(labbot_client.__file__)
for name in ("labbot", "ray", "torch"):
    try:
        importlib.import_module(name)
    except ImportError:
        print("missing", name)
"""
    done = job_env.run(job_env.python, "-c", probe, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert Path(lines[0]).is_relative_to(job_env.site)
    assert lines[1:] == ["missing labbot", "missing ray", "missing torch"]


def test_job_telemetry_arrives_at_a_real_labbot_serve(job_env: Venv, job: Path, tmp_path: Path) -> None:
    serve = Serve(tmp_path / "home", ray_address=f"http://127.0.0.1:{free_port()}", ray_token=None).start()
    try:
        run_id, token = "jobenv", secrets.token_urlsafe(32)
        db = Database(f"sqlite:///{serve.home / 'labbot.db'}")
        with db.session() as s:  # what RunService.launch writes before it submits the job to Ray
            s.add(
                Run(
                    id=run_id,
                    job="train",
                    name="train-jobenv",
                    owner="U0ALICE001",
                    config={},
                    status="pending",
                    attempt=1,
                    telemetry_token_hash=token_hash(token),
                    metrics={},
                )
            )
        db.dispose()
        code, out, err, _ = _run_job(job_env, job, serve.url, run_id, token)
        assert code == 0, err
        assert f"done: {STEPS} steps" in out and f"sent {STEPS}, dropped 0" in out, out + err
        assert "Traceback" not in err and "labbot.telemetry" not in err, err
        with serve.client() as api:
            points = api.get(f"/runs/{run_id}/metrics/loss").json()["points"]
            run = api.get(f"/runs/{run_id}").json()["run"]
        assert [p[0] for p in points] == list(range(1, STEPS + 1))
        assert points[-1][1] == pytest.approx(4.0 * 0.99**STEPS)
        assert run["status"] == "running"  # telemetry proves the attempt runs
        assert run["checkpoint_step"] == STEPS and run["metrics"]["tokens_per_s"] == 1000 + STEPS
    finally:
        serve.stop()


def test_job_trains_on_with_the_control_plane_down(job_env: Venv, job: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    code, out, err, took = _run_job(job_env, job, url, "jobenv", secrets.token_urlsafe(32))
    assert code == 0, err
    assert f"done: {STEPS} steps" in out and "sent 0, dropped 0" in out, out + err
    assert "Traceback" not in err, err
    assert err.count("control plane unavailable") == 1, err  # warned once, on stderr
    assert took < 30, f"the job took {took:.1f}s to finish and exit"
