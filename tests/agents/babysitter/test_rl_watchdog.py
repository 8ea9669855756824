"""The watchdog on RL runs and metric alerts, against the session's real Ray head: a job's alerts declared in
labbot.toml page by name and clear when the metric recovers, each alert its own page; a launch adds one; an alert on a
metric the job never reports is said once in the thread, never paged; a stuck reward and a collapsed entropy page as
``no_signal`` and ``entropy_collapse``; the thresholds come from the job over ``[watchdog]``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select
from support import Clock
from watched_run import watched_run

from labbot.agents.babysitter.watchdog import Watchdog
from labbot.storage.models import Delivery, Incident
from labbot.training.ray_cluster import RayConnection
from labbot.training.service import RunService
from labbot.training.telemetry_ingest import TelemetryBatch, TelemetryPoint
from labbot.training.telemetry_store import TelemetryStore

RL_SLEEPER = {
    "rl-sleeper": {
        "entrypoint": "sleep 300",
        "description": "stands in for an RL job: the test reports its telemetry",
        "alerts": [
            {"metric": "pass_rate", "condition": "below", "threshold": 0.2, "for": "10m"},
            {"metric": "eval_acc", "condition": "below", "threshold": 0.5},
        ],
        "watch": {"entropy_floor": 0.05},
    }
}


def _setup(tmp_path: Path, ray: RayConnection, **launch: object) -> tuple[RunService, Watchdog, Clock, str]:
    return watched_run(tmp_path, ray, RL_SLEEPER, "rl-sleeper", **launch)


def _report(service: RunService, run_id: str, rows: list[tuple[int, datetime, dict[str, float]]]) -> None:
    points = [TelemetryPoint(step=step, when=when, metrics=metrics) for step, when, metrics in rows]
    TelemetryStore(service.db).ingest(run_id, TelemetryBatch(attempt=1, points=points, events=[]))


def _pages(service: RunService) -> dict[str, Incident]:
    with service.db.session() as s:
        return {f"{i.kind}:{i.detail.get('alert', '')}".rstrip(":"): i for i in s.scalars(select(Incident))}


def _thread_notes(service: RunService) -> list[str]:
    with service.db.session() as s:
        rows = s.scalars(select(Delivery).where(Delivery.target == "thread").order_by(Delivery.id))
        return [str(d.payload.get("text", "")) for d in rows if d.payload.get("template") == "note"]


def _tick_until_running(dog: Watchdog, service: RunService, run_id: str) -> None:
    from support import wait_for

    def running() -> bool:
        dog.clock.now = datetime.now(UTC)  # type: ignore[attr-defined]
        dog.tick()
        return service.get(run_id)["status"] == "running"

    wait_for(running, timeout=60, interval=0.3, what="the sleeper running on Ray")


def test_declared_alerts_page_by_name_and_clear_when_the_metric_recovers(
    tmp_path: Path, ray_head: RayConnection
) -> None:
    service, dog, clock, run_id = _setup(tmp_path, ray_head, alerts=["reward above 0.99 warning as too-good"])
    try:
        _tick_until_running(dog, service, run_id)
        now = datetime.now(UTC)
        _report(
            service,
            run_id,
            [
                (1, now - timedelta(minutes=12), {"pass_rate": 0.5, "eval_acc": 0.9, "reward": 0.3}),
                (2, now - timedelta(minutes=11), {"pass_rate": 0.1, "eval_acc": 0.8, "reward": 0.4}),
                (3, now, {"pass_rate": 0.12, "eval_acc": 0.7, "reward": 1.0}),
            ],
        )
        clock.now = now
        dog.tick()
        pages = _pages(service)
        assert set(pages) == {"metric:pass_rate-below", "metric:too-good"}
        low = pages["metric:pass_rate-below"]
        assert low.severity == "page" and low.state == "triggered"
        assert low.summary.startswith("alert pass_rate-below: pass_rate 0.12 is below 0.2 for 11m")
        assert low.key == f"labbot-{run_id}-metric:pass_rate-below"
        assert pages["metric:too-good"].severity == "warning", "a launch's alert, with its own severity"

        dog.tick()
        assert len(_pages(service)) == 2, "still holding: the same pages, nothing new"

        _report(service, run_id, [(4, datetime.now(UTC), {"pass_rate": 0.35, "eval_acc": 0.7, "reward": 0.5})])
        clock.now = datetime.now(UTC)
        dog.tick()
        pages = _pages(service)
        assert {k: p.state for k, p in pages.items()} == {
            "metric:pass_rate-below": "resolved",
            "metric:too-good": "resolved",
        }
        assert any("*metric pass_rate-below* cleared" in note for note in _thread_notes(service))
    finally:
        service.stop(run_id)


def test_an_alert_on_a_metric_never_reported_is_said_once_and_not_paged(
    tmp_path: Path, ray_head: RayConnection
) -> None:
    service, dog, clock, run_id = _setup(tmp_path, ray_head, stall_after="1h")  # the clock jumps; no silence
    try:
        _tick_until_running(dog, service, run_id)
        start = datetime.now(UTC)
        _report(service, run_id, [(1, start, {"pass_rate": 0.5, "reward": 0.2})])  # no eval_acc, ever
        clock.now = start + timedelta(minutes=9)
        _report(service, run_id, [(2, clock.now, {"pass_rate": 0.5, "reward": 0.3})])
        dog.tick()
        assert not [n for n in _thread_notes(service) if "eval_acc" in n], "under ten minutes of telemetry"
        for minutes in (11, 12, 13):
            clock.now = start + timedelta(minutes=minutes)
            _report(service, run_id, [(minutes, clock.now, {"pass_rate": 0.5, "reward": 0.1 * (minutes % 3)})])
            dog.tick()
        said = [n for n in _thread_notes(service) if "eval_acc" in n]
        assert len(said) == 1 and "alert *eval_acc-below*" in said[0] and "cannot fire" in said[0]
        assert _pages(service) == {}, "said, not paged"
        again = Watchdog(dog.db, dog.launcher, dog.service, dog.pager, dog.policy, address="x", clock=clock)
        again.tick()  # a restarted labbot says it again only through the same outbox key: still once
        assert len([n for n in _thread_notes(service) if "eval_acc" in n]) == 1
    finally:
        service.stop(run_id)


def test_a_stuck_reward_and_a_collapsed_entropy_page_by_name(tmp_path: Path, ray_head: RayConnection) -> None:
    service, dog, clock, run_id = _setup(tmp_path, ray_head)
    try:
        _tick_until_running(dog, service, run_id)
        now = datetime.now(UTC)
        healthy = [
            (i, now - timedelta(seconds=60 - i), {"reward": 0.1 * (i % 4), "frac_reward_zero_std": 0.3, "entropy": 0.9})
            for i in range(10)
        ]
        _report(service, run_id, healthy)
        clock.now = now
        dog.tick()
        assert _pages(service) == {}
        stuck = [
            (i, now + timedelta(seconds=i), {"reward": 0.0, "frac_reward_zero_std": 1.0, "entropy": 0.04})
            for i in range(10, 30)
        ]
        _report(service, run_id, stuck)
        clock.now = now + timedelta(seconds=31)
        dog.tick()
        pages = _pages(service)
        assert set(pages) == {"no_signal", "entropy_collapse"}
        assert "no learning signal" in pages["no_signal"].summary
        assert "under the floor 0.05" in pages["entropy_collapse"].summary, "the job's watch over the default 0.02"
        with service.db.session() as s:
            posts = s.scalars(select(Delivery).where(Delivery.incident_id == pages["no_signal"].id)).all()
        assert {d.target for d in posts} >= {"thread", "dm:U0ALICE001"}, "paged like any other condition"
    finally:
        service.stop(run_id)
