"""labbot.agents.babysitter.watchdog: a tick against Ray that does not answer (an infra page after ``infra_after``, runs
left alone, escalation going on), and against the session's real Ray head (a lost submission is a failed page; a restart
that
was submitted just before labbot died is picked up, not submitted twice)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select
from support import SLEEPER, Clock, free_port, make_service, wait_for

from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.policy import PagingPolicy, WatchdogPolicy
from labbot.storage.models import Incident, Run
from labbot.training.launcher import RayLauncher, Submission, submission_id
from labbot.training.ray_cluster import RayConnection
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest

T0 = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)


def _watchdog(service: RunService, clock: Clock):  # type: ignore[no-untyped-def]
    from labbot.agents.babysitter.watchdog import Watchdog

    pager = Pager(service.db, PagingPolicy(escalate_after_s=60), slack=True, pagerduty=False, clock=clock)
    policy = WatchdogPolicy(infra_after_s=120, startup_grace_s=0)
    return Watchdog(service.db, service.launcher, service, pager, policy, address="ray-under-test", clock=clock)


def _incidents(service: RunService) -> list[Incident]:
    with service.db.session() as s:
        return list(s.scalars(select(Incident)))


def _insert_running(service: RunService, run_id: str, *, at: datetime) -> None:
    with service.db.session() as s:
        s.add(
            Run(
                id=run_id,
                job="sleeper",
                name=run_id,
                owner="U0ALICE001",
                config={"params": {}, "gpus": 0, "stall_after_s": 30, "max_restarts": 0},
                status="running",
                attempt=1,
                ray_submission_id=submission_id(run_id, 1),
                telemetry_token_hash="x" * 64,
                metrics={},
                thread_ts="1700000000.000100",
                channel="C0LAB00001",
                attempt_started_at=at,
                last_telemetry_at=at,
                updated_at=at,
            )
        )


def test_ray_unreachable_is_an_infra_page_after_the_threshold_and_runs_are_untouched(tmp_path: Path) -> None:
    dead = RayConnection(f"http://127.0.0.1:{free_port()}", "token")
    service = make_service(tmp_path, dead)
    service.launcher = RayLauncher(dead, timeout=2)
    clock = Clock(T0)
    dog = _watchdog(service, clock)
    _insert_running(service, "r1", at=T0 - timedelta(hours=1))  # silent for an hour, if anyone could tell

    assert not dog.tick().ray_ok
    assert _incidents(service) == []
    clock.now = T0 + timedelta(seconds=119)
    dog.tick()
    assert _incidents(service) == [], "under infra_after: nothing yet"
    clock.now = T0 + timedelta(seconds=121)
    dog.tick()
    [page] = _incidents(service)
    assert (page.kind, page.run_id, page.state) == ("infra", None, "triggered")
    assert "ray-under-test" in page.summary
    clock.now = T0 + timedelta(seconds=200)
    dog.tick()
    [page] = _incidents(service)
    assert page.escalation_level == 1, "escalation goes on while Ray is away"
    with service.db.session() as s:
        assert s.get_one(Run, "r1").status == "running", "the run is not judged while Ray cannot be asked"


def test_a_lost_submission_is_a_failed_page(tmp_path: Path, ray_head: RayConnection) -> None:
    service = make_service(tmp_path, ray_head, SLEEPER)
    clock = Clock(datetime.now(UTC))
    dog = _watchdog(service, clock)
    _insert_running(service, "lost01", at=clock.now - timedelta(minutes=5))  # Ray never heard of it
    dog.tick()
    with service.db.session() as s:
        run = s.get_one(Run, "lost01")
        assert run.status == "failed" and "submission was lost" in (run.error or "")
    [page] = _incidents(service)
    assert page.kind == "failed" and page.detail.get("error_type") == "JobLost"
    dog.tick()  # still failed, still one page: the lost run stays judged failed while its page is open
    [again] = _incidents(service)
    assert again.state == "triggered" and again.condition_active


def test_a_restart_submitted_before_a_crash_is_picked_up_not_repeated(tmp_path: Path, ray_head: RayConnection) -> None:
    service = make_service(tmp_path, ray_head, SLEEPER)
    run = service.launch(LaunchRequest(job="sleeper", owner="U0ALICE001")).run
    run_id = run["id"]
    service.stop(run_id)
    # the state a watchdog leaves when it scheduled attempt 2, submitted it, and died before noting that
    with service.db.session() as s:
        row = s.get_one(Run, run_id)
        row.status, row.stop_requested, row.ended_at = "restarting", False, None
        row.attempt, row.ray_submission_id = 2, submission_id(run_id, 2)
        row.restart_at = datetime.now(UTC) - timedelta(seconds=1)
    sub = Submission(submission_id(run_id, 2), "sleep 60", {}, {"labbot_run_id": run_id})
    service.launcher.submit(sub)
    clock = Clock(datetime.now(UTC))
    dog = _watchdog(service, clock)

    def running() -> bool:
        clock.now = datetime.now(UTC)
        report = dog.tick()
        assert report.restarts_submitted == 0, "attempt 2 is on Ray already: never submitted twice"
        with service.db.session() as s:
            row = s.get_one(Run, run_id)
            return row.status == "running" and row.restart_at is None

    wait_for(running, timeout=30, interval=0.3, what="the restarted attempt picked up as running")
    service.stop(run_id)
    assert service.get(run_id)["status"] == "stopped"


TALKER = {
    "talker": {
        "entrypoint": (
            "python -c \"print('worker 3: waiting on the shm queue', flush=True); import time; time.sleep(120)\""
        ),
        "description": "says one line, then does nothing",
    }
}


def test_a_page_carries_the_jobs_log_tail_as_it_was_when_it_paged(tmp_path: Path, ray_head: RayConnection) -> None:
    """Not only failures: a silent (or hung, NaN, alert) page keeps the log tail of the moment it paged, which the page
    shows and an eval case made from it later is frozen with, though the job's log goes on."""
    service = make_service(tmp_path, ray_head, TALKER)
    run_id = service.launch(LaunchRequest(job="talker", owner="U0ALICE001")).run["id"]
    try:
        wait_for(
            lambda: "worker 3" in service.launcher.logs(submission_id(run_id, 1)),
            timeout=60,
            interval=0.3,
            what="the job's first line in its log",
        )
        clock = Clock(datetime.now(UTC) + timedelta(hours=1))  # an hour without telemetry
        dog = _watchdog(service, clock)
        dog.tick()
        [page] = _incidents(service)
        assert page.kind == "silent" and "worker 3: waiting on the shm queue" in page.detail["log_tail"]
        clock.now += timedelta(minutes=1)
        dog.tick()  # the page stays open: it keeps the tail it was opened with
        [again] = _incidents(service)
        assert again.id == page.id and again.detail == page.detail
    finally:
        service.stop(run_id)


class _CountingLauncher(RayLauncher):
    """A launcher over an address nobody answers that counts how often the watchdog asks Ray for its jobs."""

    def __init__(self, up: bool) -> None:
        super().__init__(RayConnection(f"http://127.0.0.1:{free_port()}", "token"), timeout=1)
        self.up = up
        self.listings = 0

    def jobs(self) -> dict:  # type: ignore[override]
        self.listings += 1
        return {} if self.up else super().jobs()


def test_an_idle_watchdog_asks_ray_only_every_idle_look_but_every_tick_while_a_run_is_watched(tmp_path: Path) -> None:
    service = make_service(tmp_path, RayConnection("http://127.0.0.1:9", None))
    launcher = _CountingLauncher(up=True)
    service.launcher = launcher
    clock = Clock(T0)
    dog = _watchdog(service, clock)
    assert dog.policy.idle_look_s == 30.0  # a quarter of infra_after (2m)
    for second in range(0, 30):  # nothing to watch: one listing, then none until idle_look_s has passed
        clock.now = T0 + timedelta(seconds=second)
        dog.tick()
    assert launcher.listings == 1
    clock.now = T0 + timedelta(seconds=30)
    dog.tick()
    assert launcher.listings == 2, "Ray is still looked at, for the infra page"
    _insert_running(service, "r1", at=clock.now)
    for second in range(31, 36):  # a run to watch: every tick
        clock.now = T0 + timedelta(seconds=second)
        dog.tick()
    assert launcher.listings == 7


def test_ray_going_down_while_labbot_is_idle_is_still_paged(tmp_path: Path) -> None:
    service = make_service(tmp_path, RayConnection("http://127.0.0.1:9", None))
    launcher = _CountingLauncher(up=True)
    service.launcher = launcher
    clock = Clock(T0)
    dog = _watchdog(service, clock)
    dog.tick()
    launcher.up = False
    for second in range(1, 182):
        clock.now = T0 + timedelta(seconds=second)
        dog.tick()
        if _incidents(service):
            break
    [page] = _incidents(service)
    assert page.kind == "infra"
    # Ray went away after the first look: the idle look at 30 s finds it down, and from then on every tick looks
    assert 150 <= (clock.now - T0).total_seconds() <= 151, "paged at most idle_look_s later than a busy labbot would"
