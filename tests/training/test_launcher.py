"""labbot.training.launcher against a real Ray head: idempotent submission, unreachable and unauthorised clusters."""

from __future__ import annotations

import time
import uuid

import pytest
from support import free_port, wait_for

from labbot.common.errors import Conflict, RayUnavailable
from labbot.training.launcher import RAY_SUCCEEDED, RayLauncher, Submission
from labbot.training.ray_cluster import RayConnection


def _sub(run_id: str) -> Submission:
    return Submission(
        submission_id=f"labbot-{run_id}-1",
        entrypoint="echo hello-from-$LABBOT_RUN_ID",
        runtime_env={"env_vars": {"LABBOT_RUN_ID": run_id}},
        metadata={"labbot_run_id": run_id},
    )


def test_the_same_submission_twice_is_one_ray_job(ray_head: RayConnection) -> None:
    launcher = RayLauncher(ray_head)
    run_id = uuid.uuid4().hex[:8]
    assert launcher.submit(_sub(run_id)) == launcher.submit(_sub(run_id)) == f"labbot-{run_id}-1"
    mine = [sid for sid in launcher.jobs() if run_id in sid]
    assert mine == [f"labbot-{run_id}-1"]
    job = wait_for(lambda: (j := launcher.job(mine[0])) and j.status == RAY_SUCCEEDED and j, what="job to finish")
    assert job.metadata["labbot_run_id"] == run_id
    assert f"hello-from-{run_id}" in launcher.logs(mine[0])
    # the watchdog's list (plain JSON, no pydantic) reads exactly what the SDK's JobDetails say
    assert launcher.jobs()[mine[0]] == job


def test_a_foreign_job_with_our_submission_id_is_a_conflict(ray_head: RayConnection) -> None:
    launcher = RayLauncher(ray_head)
    run_id = uuid.uuid4().hex[:8]
    launcher.submit(_sub(run_id))
    other = Submission(f"labbot-{run_id}-1", "true", {}, {"labbot_run_id": "someone-else"})
    with pytest.raises(Conflict, match="not this run's"):
        launcher.submit(other)


def test_unreachable_ray_is_named_and_fast() -> None:
    address = f"http://127.0.0.1:{free_port()}"
    launcher = RayLauncher(RayConnection(address, "t0ken-value"), timeout=5)
    start = time.monotonic()
    with pytest.raises(RayUnavailable) as err:
        launcher.submit(_sub("x"))
    assert time.monotonic() - start < 15
    assert address in err.value.message and "t0ken-value" not in err.value.message


def test_a_wrong_token_says_so_without_showing_it(ray_head: RayConnection) -> None:
    launcher = RayLauncher(RayConnection(ray_head.address, "wrong-token-123"))
    with pytest.raises(RayUnavailable, match="refused labbot's token") as err:
        launcher.jobs()
    assert "wrong-token-123" not in err.value.message
    assert ray_head.token and ray_head.token not in err.value.message
