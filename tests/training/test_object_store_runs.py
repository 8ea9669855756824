"""Runs whose checkpoints live in an object store: the job is told the run's URL (``LABBOT_CHECKPOINT_DIR``) and
given the AWS variables it needs to write there, and nothing else of labbot's; a restart points at the same URL;
no credential reaches the run's JSON. Over the real RunService and RayLauncher with the recording Ray double."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from compute_support import compute_service

from labbot.training.specs import LaunchRequest

AWS = {"AWS_ACCESS_KEY_ID": "AKIA" + "EXAMPLEEXAMPLE00", "AWS_SECRET_ACCESS_KEY": "very-secret-" + "value-0123456789"}


def test_a_run_checkpoints_to_its_url_and_restarts_from_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, ray = compute_service(tmp_path, monkeypatch, None, jobs={"ev": {"entrypoint": "true", "description": "x"}})
    service.checkpoint_url = "s3://bucket/labbot/runs"
    service.job_env = dict(AWS)
    service.local_checkpoint_jobs = frozenset({"ev"})

    run = service.launch(LaunchRequest(job="slow", owner="U1")).run
    env = ray.submitted[-1]["runtime_env"]["env_vars"]
    assert env["LABBOT_CHECKPOINT_DIR"] == f"s3://bucket/labbot/runs/{run['id']}/checkpoints"
    assert {k: env[k] for k in AWS} == AWS
    assert not (tmp_path / "runs" / run["id"]).exists()  # no local folder for a run that keeps none
    assert not any(v in json.dumps(service.get(run["id"])) for v in AWS.values())

    service.restart(run["id"], by="U1")
    again = ray.submitted[-1]["runtime_env"]["env_vars"]
    assert again["LABBOT_ATTEMPT"] == "2" and again["LABBOT_CHECKPOINT_DIR"] == env["LABBOT_CHECKPOINT_DIR"]

    # a job whose files the control plane reads from disk (an eval) keeps the local folder, and no credentials
    ev = service.launch(LaunchRequest(job="ev", owner="U1")).run
    local = ray.submitted[-1]["runtime_env"]["env_vars"]
    assert local["LABBOT_CHECKPOINT_DIR"] == str(tmp_path / "runs" / ev["id"] / "checkpoints")
    assert not set(AWS) & set(local)
