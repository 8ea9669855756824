"""Security finding 7: what a job wrote comes back from the launcher (labbot's one door to Ray) with the secrets
labbot knows of redacted — its environment's secret values, Ray's token, credential-shaped strings — so ``/lab logs``,
the API, agents and a failed job's message (Ray puts the log tail there) show none of them."""

from __future__ import annotations

import secrets as secrets_module
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support import make_service

from labbot.training.launcher import RayLauncher
from labbot.training.ray_cluster import RayConnection
from labbot.training.specs import LaunchRequest, resolve_launch

SLACK_SHAPED = "xoxb-" + "1234567890-abcdefghijkl"  # a Slack bot token's shape (split: no literal token in the source)


class PrintingRay:
    """Ray's job client, as far as logs and job details go: the job printed ``text``."""

    def __init__(self, text: str) -> None:
        self.text = text

    def get_job_logs(self, sid: str) -> str:
        return self.text

    def get_job_info(self, sid: str) -> Any:
        return SimpleNamespace(
            submission_id=sid, status="FAILED", message=f"Job failed, last logs:\n{self.text}", error_type="JOB",
            metadata={}, start_time=None, end_time=None,
        )  # fmt: skip


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {"SLACK_SIGNING_SECRET": uuid.uuid4().hex, "SOME_VENDOR_API_KEY": f"plain{uuid.uuid4().hex}"}
    for name, value in values.items():
        monkeypatch.setenv(name, value)  # labbot's environment, before labbot starts
    return values


def printed(secrets: dict[str, str], ray_token: str) -> str:
    return "\n".join(
        [
            "step 1 loss 2.5",
            f"SLACK_SIGNING_SECRET={secrets['SLACK_SIGNING_SECRET']}",
            f"vendor key: {secrets['SOME_VENDOR_API_KEY']}",
            f"RAY_AUTH_TOKEN={ray_token}",
            f"SLACK_BOT_TOKEN={SLACK_SHAPED}",
            "step 2 loss 2.4",
        ]
    )


def test_secret_values_in_a_jobs_logs_are_redacted(
    tmp_path: Path, secrets: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ray_token = uuid.uuid4().hex
    service = make_service(tmp_path, RayConnection("http://127.0.0.1:9", ray_token))
    req = LaunchRequest(job="tiny-lm", owner="U0ALICE001")
    run_id = service._insert_run(req, resolve_launch(service.registry.get("tiny-lm"), req), "telemetry")
    ray = PrintingRay(printed(secrets, ray_token))
    monkeypatch.setattr(service.launcher, "_call", lambda what, fn: fn(ray))
    shown = service.logs(run_id)
    for secret in (*secrets.values(), ray_token, SLACK_SHAPED):
        assert secret not in shown
    assert shown.count("[redacted]") == 4
    assert "step 1 loss 2.5" in shown and "step 2 loss 2.4" in shown
    assert service.logs(run_id, tail=1) == "step 2 loss 2.4"


def test_a_failed_jobs_message_is_redacted(secrets: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    ray_token = uuid.uuid4().hex
    launcher = RayLauncher(RayConnection("http://127.0.0.1:9", ray_token))
    ray = PrintingRay(printed(secrets, ray_token))
    monkeypatch.setattr(launcher, "_call", lambda what, fn: fn(ray))
    job = launcher.job("labbot-abc234-1")
    assert job is not None and job.message.count("[redacted]") == 4
    assert not any(s in job.message for s in (*secrets.values(), ray_token))
    launcher.close()


def test_the_runs_own_telemetry_token_is_redacted_from_its_logs_and_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """labbot keeps only the hash of a run's telemetry token: a job that prints ``LABBOT_TELEMETRY_TOKEN`` is caught
    by hashing each token-shaped word, and other words of that shape (a different run's token, a hash) stay."""
    service = make_service(tmp_path, RayConnection("http://127.0.0.1:9", None))
    req = LaunchRequest(job="tiny-lm", owner="U0ALICE001")
    own, other = secrets_module.token_urlsafe(32), secrets_module.token_urlsafe(32)
    run_id = service._insert_run(req, resolve_launch(service.registry.get("tiny-lm"), req), own)
    ray = PrintingRay(f"step 3 loss 2.1\nLABBOT_TELEMETRY_TOKEN={own}\nquoted '{own}' and {other}")
    monkeypatch.setattr(service.launcher, "_call", lambda what, fn: fn(ray))
    shown = service.logs(run_id)
    assert own not in shown and shown.count("[redacted]") == 2
    assert other in shown and "step 3 loss 2.1" in shown
    error = service.get(run_id, wait=5)["error"]  # Ray says it failed: the log tail's last line is the run's error
    assert own not in error and "[redacted]" in error and other in error
