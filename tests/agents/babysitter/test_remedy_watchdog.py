"""The watchdog acting on a remedy, against the session's real Ray head: an entropy collapse rolls the run back to the
last checkpoint written before the collapse began (not the newest), restarts it with the remedy's change, says so in
the thread with the evidence, sets the later checkpoints aside; a second collapse after the remedy's last attempt
pages with the attempts listed; a finding no remedy covers pages as always; a labbot that dies after deciding restarts
the run exactly once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select
from support import Clock, wait_for
from watched_run import watchdog, watched_run

from labbot.agents.babysitter.watchdog import Watchdog
from labbot.storage.models import Delivery, Incident
from labbot.training.launcher import submission_id
from labbot.training.ray_cluster import RayConnection
from labbot.training.service import RunService
from labbot.training.telemetry_ingest import TelemetryBatch, TelemetryEvent, TelemetryPoint
from labbot.training.telemetry_store import TelemetryStore

RL_SLEEPER = {
    "rl-sleeper": {
        "entrypoint": "sh -c 'sleep 300' job",  # the parameters follow as $1, $2, …
        "description": "stands in for an RL job: the test reports its telemetry and writes its checkpoints",
        "params": {"temperature": 1.0, "lr": 0.001, "seed": 0},
        "checks": {"temperature": {"min": 0.05, "max": 3.0}},
        "remedies": [{"on": ["entropy_collapse"], "change": ["temperature += 0.5"], "max_attempts": 1}],
        "watch": {"entropy_floor": 0.05},
    }
}


def _setup(tmp_path: Path, ray: RayConnection, **launch: object) -> tuple[RunService, Watchdog, Clock, str]:
    return watched_run(tmp_path, ray, RL_SLEEPER, "rl-sleeper", restart_backoff_s=5, **launch)


def _dog(service: RunService, clock: Clock) -> Watchdog:
    return watchdog(service, clock, restart_backoff_s=5)


def _tick_until(dog: Watchdog, service: RunService, run_id: str, status: str, attempt: int) -> None:
    def there() -> bool:
        dog.clock.now = datetime.now(UTC)  # type: ignore[attr-defined]
        dog.tick()
        run = service.get(run_id)
        return bool(run["status"] == status and run["attempt"] == attempt)

    wait_for(there, timeout=60, what=f"attempt {attempt} {status}")


def _attempt(service: RunService, run_id: str, attempt: int, start: datetime, entropies: dict[int, float]) -> None:
    """The job's telemetry for ``attempt``: the entropy at each step, a checkpoint written every 25 steps (and the
    file, as the job would write it)."""
    ckpt_dir = service.checkpoint_dir(run_id)
    assert isinstance(ckpt_dir, Path)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    points = [
        TelemetryPoint(
            step=step, when=start + timedelta(seconds=step), metrics={"entropy": e, "reward": 0.1 * (step % 3)}
        )
        for step, e in entropies.items()
    ]
    events = []
    for step in entropies:
        if step % 25 == 0:
            (ckpt_dir / f"ckpt_{step:08d}.pt").write_bytes(f"attempt {attempt} step {step}".encode())
            events.append(TelemetryEvent(kind="checkpoint", step=step, path=str(ckpt_dir / f"ckpt_{step:08d}.pt")))
    TelemetryStore(service.db).ingest(run_id, TelemetryBatch(attempt=attempt, points=points, events=events))


def _notes(service: RunService) -> list[str]:
    with service.db.session() as s:
        rows = s.scalars(select(Delivery).where(Delivery.target == "thread").order_by(Delivery.id))
        return [str(d.payload.get("text", "")) for d in rows if d.payload.get("template") == "note"]


def _pages(service: RunService) -> dict[str, Incident]:
    with service.db.session() as s:
        return {i.kind: i for i in s.scalars(select(Incident))}


def test_a_collapse_is_rolled_back_to_the_checkpoint_before_it_and_restarted_with_the_change(
    tmp_path: Path, ray_head: RayConnection
) -> None:
    service, dog, clock, run_id = _setup(tmp_path, ray_head)
    try:
        _tick_until(dog, service, run_id, "running", 1)
        start = datetime.now(UTC) - timedelta(seconds=120)
        # healthy to step 61, collapsed from 62 on; checkpoints at 25, 50 and 75 (75: after the collapse began)
        _attempt(service, run_id, 1, start, {s: (0.9 if s < 62 else 0.001) for s in range(1, 80)})
        clock.now = datetime.now(UTC)
        dog.tick()

        run = service.get(run_id)
        assert run["status"] == "restarting" and run["attempt"] == 2
        assert run["params"]["temperature"] == 1.5
        [lineage] = run["lineage"]
        assert lineage["condition"] == "entropy_collapse" and lineage["signal_step"] == 62
        assert lineage["checkpoint_step"] == 50, "the newest checkpoint before the signal, not the newest (75)"
        assert lineage["changes"] == [{"param": "temperature", "from": 1.0, "to": 1.5, "change": "temperature += 0.5"}]
        assert _pages(service) == {}, "a remedy acts instead of paging"
        [note] = [n for n in _notes(service) if "entropy_collapse" in n]
        assert "from step 62" in note and "checkpoint step 50" in note and "`temperature` 1 → 1.5" in note
        assert "0.001 at 79" in note, "the evidence: the metric's window"

        clock.now = datetime.now(UTC) + timedelta(seconds=6)  # past the backoff: attempt 2 goes to Ray
        dog.tick()
        _tick_until(dog, service, run_id, "running", 2)
        ckpt_dir = service.checkpoint_dir(run_id)
        assert isinstance(ckpt_dir, Path)
        assert sorted(p.name for p in ckpt_dir.glob("ckpt_*")) == ["ckpt_00000025.pt", "ckpt_00000050.pt"]
        assert (ckpt_dir / "rolled-back" / "attempt-2" / "ckpt_00000075.pt").read_bytes() == b"attempt 1 step 75"
        job = service.launcher.job(submission_id(run_id, 1))
        assert job is not None and job.status in ("STOPPED", "FAILED"), "the collapsed attempt was stopped"

        # attempt 2 collapses again: the remedy's one attempt is used, so this pages, with the attempt listed
        _attempt(
            service, run_id, 2, start + timedelta(seconds=200), {s: (0.8 if s < 70 else 0.002) for s in range(51, 80)}
        )
        clock.now = datetime.now(UTC) + timedelta(seconds=7)
        dog.tick()
        page = _pages(service)["entropy_collapse"]
        assert "after 1 remedial restart (attempt 2 from checkpoint step 50 with temperature 1 → 1.5)" in page.summary
        assert service.get(run_id)["attempt"] == 2, "no third attempt"
    finally:
        service.stop(run_id)


def test_a_labbot_killed_after_deciding_restarts_the_run_once(tmp_path: Path, ray_head: RayConnection) -> None:
    service, dog, clock, run_id = _setup(tmp_path, ray_head)
    try:
        _tick_until(dog, service, run_id, "running", 1)
        start = datetime.now(UTC) - timedelta(seconds=120)
        _attempt(service, run_id, 1, start, {s: (0.9 if s < 40 else 0.001) for s in range(1, 60)})
        clock.now = datetime.now(UTC)
        report = dog.tick()  # decided and committed; Ray's stop of attempt 1 went out after the commit
        assert report.restarts_scheduled == 1
        # labbot dies here (the Watchdog object is gone); a new one with a fresh view of the same database
        again = _dog(service, clock)
        for _ in range(3):
            clock.now = datetime.now(UTC) + timedelta(seconds=6)
            again.tick()
        _tick_until(again, service, run_id, "running", 2)
        for _ in range(3):
            again.tick()
        run = service.get(run_id)
        assert run["attempt"] == 2 and len(run["lineage"]) == 1, "exactly one remedial attempt"
        assert service.launcher.job(submission_id(run_id, 3)) is None
        assert run["lineage"][0]["checkpoint_step"] == 25
    finally:
        service.stop(run_id)


def test_a_finding_no_remedy_covers_pages_as_always(tmp_path: Path, ray_head: RayConnection) -> None:
    service, dog, clock, run_id = _setup(tmp_path, ray_head)
    try:
        _tick_until(dog, service, run_id, "running", 1)
        start = datetime.now(UTC) - timedelta(seconds=60)
        points = [
            TelemetryPoint(step=s, when=start + timedelta(seconds=s), metrics={"kl": 0.01 if s < 30 else 5.0})
            for s in range(1, 40)
        ]
        TelemetryStore(service.db).ingest(run_id, TelemetryBatch(attempt=1, points=points, events=[]))
        clock.now = datetime.now(UTC)
        dog.tick()
        assert set(_pages(service)) == {"kl_blowup"}
        assert service.get(run_id)["attempt"] == 1
    finally:
        service.stop(run_id)
