"""What a real control plane (``ControlPlane.build``; Ray unreachable, its S3 a local moto server) hands its jobs: their
telemetry at ``LABBOT_INTERNAL_URL`` (the Service), not the public URL (labbot's own ``lab`` server calls it in
process: tests/bot/test_in_process_api.py); the jobs' key pair (``LABBOT_JOB_AWS_*``) rather than labbot's own, with
a warning at start when there is none (docs/deploy.md, "6. The Ray cluster")."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from s3_server import MotoS3

from labbot.bot.config import Settings
from labbot.bot.serve import ControlPlane

UNREACHABLE_RAY = "http://127.0.0.1:9"
JOBS = {
    "LABBOT_JOB_AWS_ACCESS_KEY_ID": "AKIA" + "JOBSKEYONLYRUNS0",
    "LABBOT_JOB_AWS_SECRET_ACCESS_KEY": "jobs-" + "s3cr3t-0123",
}
WARNING = "jobs write their checkpoints with labbot's own object-store key pair"


def _env(tmp_path: Path, s3: MotoS3) -> dict[str, str]:
    return {
        "LABBOT_HOME": str(tmp_path / "home"),
        "RAY_ADDRESS": UNREACHABLE_RAY,
        "LABBOT_PUBLIC_URL": "https://labbot.example.com",
        "LABBOT_INTERNAL_URL": "http://labbot.labbot.svc",
        "LABBOT_ARTIFACTS_URL": f"s3://{s3.bucket()}/prod",
        **s3.env,
    }


@pytest.fixture
def built(tmp_path: Path, s3: MotoS3) -> Iterator[list[ControlPlane]]:
    planes: list[ControlPlane] = []
    yield planes
    for plane in planes:
        plane.close()


def test_jobs_get_the_internal_url_and_their_own_key_pair(
    tmp_path: Path, s3: MotoS3, built: list[ControlPlane], caplog: pytest.LogCaptureFixture
) -> None:
    env = _env(tmp_path, s3) | JOBS
    with caplog.at_level(logging.WARNING, logger="labbot"):
        plane = ControlPlane.build(Settings.from_env(env))
    built.append(plane)
    assert plane.service.control_url == "http://labbot.labbot.svc"  # LABBOT_CONTROL_URL of every job
    assert plane.service.job_env == {
        "AWS_ACCESS_KEY_ID": JOBS["LABBOT_JOB_AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": JOBS["LABBOT_JOB_AWS_SECRET_ACCESS_KEY"],
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "1",
    }
    assert env["AWS_SECRET_ACCESS_KEY"] not in plane.service.job_env.values()
    assert WARNING not in caplog.text


def test_without_a_job_key_pair_labbot_warns_that_jobs_hold_its_own(
    tmp_path: Path, s3: MotoS3, built: list[ControlPlane], caplog: pytest.LogCaptureFixture
) -> None:
    env = _env(tmp_path, s3)
    with caplog.at_level(logging.WARNING, logger="labbot"):
        plane = ControlPlane.build(Settings.from_env(env))
    built.append(plane)
    assert plane.service.job_env["AWS_SECRET_ACCESS_KEY"] == env["AWS_SECRET_ACCESS_KEY"]
    assert WARNING in caplog.text and env["AWS_SECRET_ACCESS_KEY"] not in caplog.text
