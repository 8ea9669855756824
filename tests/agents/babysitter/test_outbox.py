"""labbot.agents.babysitter.outbox: due deliveries sent oldest first, accepted/retry/rejected recorded with backoff,
order kept within an incident, notifier crashes and unconfigured channels, recovery of rows cut off mid-send, what
refreshes carry, a delivery sent and recorded only under the leader lease that claimed it, and the PagerDuty notifier
against the PagerDuty fake over real HTTP. Time is a fake clock; nothing sleeps."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fakes.pagerduty import ROUTING_KEY, PagerDutyFake
from sqlalchemy import select, update
from support import Clock, NoJitter

from labbot.agents.babysitter.outbox import Envelope, Notifier, Outbox, Outcome, PagerDutyNotifier
from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.pagerduty import PagerDutyClient
from labbot.agents.babysitter.policy import PagingPolicy
from labbot.storage.db import Database, fenced
from labbot.storage.lease import EXPIRED, Fenced, Lease, holder_id
from labbot.storage.models import Delivery, Incident, LeaderLease, Run
from labbot.training.monitoring import PAGE, Finding

pytestmark = pytest.mark.databases

T0 = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)
ACCEPTED = Outcome("accepted")


class Recorder:
    """A notifier that records each envelope and answers from a script (then accepts), like Slack would: a posted
    message's channel and ts as the result. A scripted exception is raised instead of answered."""

    def __init__(self, *script: Outcome | BaseException) -> None:
        self.script = list(script)
        self.seen: list[Envelope] = []

    async def deliver(self, envelope: Envelope) -> Outcome:
        self.seen.append(envelope)
        answer = self.script.pop(0) if self.script else None
        if isinstance(answer, BaseException):
            raise answer
        if answer is not None:
            return answer
        return Outcome("accepted", result={"channel": f"C-{envelope.target}", "ts": f"1700000001.{len(self.seen):06d}"})

    @property
    def keys(self) -> list[str]:
        return [e.key for e in self.seen]


class Crash(BaseException):
    """labbot killed in the middle of a send (not an Exception: nothing in the outbox catches it)."""


@pytest.fixture
def db(database_url: str) -> Database:
    """A database with run r1 and two of its pages, pa (hung) and pb (failed)."""
    db = Database(database_url)
    with db.session() as s:
        s.add(
            Run(
                id="r1",
                job="tiny-lm",
                name="tiny-lm-r1",
                owner="U0ALICE001",
                config={"params": {}, "gpus": 0, "stall_after_s": 30, "max_restarts": 2},
                status="running",
                attempt=1,
                telemetry_token_hash="x" * 64,
                metrics={},
                thread_ts="1700000000.000100",
                channel="C0LAB00001",
            )
        )
        s.flush()
        for page_id, kind in (("pa", "hung"), ("pb", "failed")):
            s.add(
                Incident(
                    id=page_id,
                    key=f"labbot-r1-{kind}",
                    run_id="r1",
                    kind=kind,
                    severity="page",
                    state="triggered",
                    summary=f"r1 is {kind}",
                    detail={},
                    triggered_at=T0,
                )
            )
    return db


def add(
    db: Database,
    key: str,
    incident_id: str | None = "pa",
    *,
    channel: str = "slack",
    action: str = "post",
    target: str = "thread",
    payload: Mapping[str, Any] | None = None,
    state: str = "pending",
    attempts: int = 0,
) -> int:
    with db.session() as s:
        d = Delivery(
            key=key,
            incident_id=incident_id,
            run_id="r1",
            channel=channel,
            action=action,
            target=target,
            payload=dict(payload if payload is not None else {"template": "page", "level": 0, "renotify": 0}),
            state=state,
            attempts=attempts,
            next_attempt_at=T0,
            result={},
            created_at=T0,
        )
        s.add(d)
        s.flush()
        return d.id


def row(db: Database, key: str) -> Delivery:
    with db.session() as s:
        return s.scalars(select(Delivery).where(Delivery.key == key)).one()


def drain(outbox: Outbox) -> int:
    return asyncio.run(outbox.drain())


def outbox_for(db: Database, clock: Clock, notifiers: Mapping[str, Notifier], **kwargs: Any) -> Outbox:
    """An outbox on ``clock`` whose retry waits are the bare exponential ones (no jitter)."""
    kwargs.setdefault("rng", NoJitter())
    return Outbox(db, notifiers, clock=clock, **kwargs)


# ----------------------------------------------------------------- accepted


def test_due_deliveries_go_out_oldest_first_and_are_recorded_as_sent(db: Database) -> None:
    clock, slack = Clock(T0), Recorder()
    for key, page in (("d1", "pa"), ("d2", "pb"), ("d3", "pa")):
        add(db, key, page)
    outbox = outbox_for(db, clock, {"slack": slack})

    clock.at(1)
    assert drain(outbox) == 3
    assert slack.keys == ["d1", "d2", "d3"]
    assert [e.attempts for e in slack.seen] == [1, 1, 1]
    d1 = row(db, "d1")
    assert (d1.state, d1.attempts, d1.sent_at, d1.last_error) == ("sent", 1, T0 + timedelta(seconds=1), None)
    assert d1.result == {"channel": "C-thread", "ts": "1700000001.000001"}
    assert slack.seen[0].incident is not None and slack.seen[0].incident["id"] == "pa"
    assert slack.seen[0].run is not None and slack.seen[0].run["id"] == "r1"

    assert drain(outbox) == 0  # sent is sent
    assert len(slack.seen) == 3
    assert outbox.pending() == 0


def test_a_delivery_not_yet_due_waits(db: Database) -> None:
    clock, slack = Clock(T0), Recorder()
    add(db, "d1")
    with db.session() as s:
        s.scalars(select(Delivery)).one().next_attempt_at = T0 + timedelta(seconds=10)
    outbox = outbox_for(db, clock, {"slack": slack})
    clock.at(9.9)
    assert drain(outbox) == 0 and slack.seen == []
    clock.at(10)
    assert drain(outbox) == 1 and slack.keys == ["d1"]


# ----------------------------------------------------------------- retry


def test_retries_back_off_exponentially_up_to_the_cap(db: Database, caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock(T0)
    slack = Recorder(*[Outcome("retry", "Slack answered 500 internal_error")] * 4)
    add(db, "d1")
    outbox = outbox_for(db, clock, {"slack": slack}, max_backoff_s=3.0)

    t = 0.0
    for attempt, wait in enumerate([1.0, 2.0, 3.0, 3.0], start=1):  # 1s, 2s, 4s capped at 3s, 8s capped at 3s
        clock.at(t)
        with caplog.at_level(logging.WARNING, logger="labbot.agents.babysitter.outbox"):
            assert drain(outbox) == 0
        d = row(db, "d1")
        assert (d.state, d.attempts, d.last_error) == ("pending", attempt, "Slack answered 500 internal_error")
        assert d.next_attempt_at == T0 + timedelta(seconds=t + wait)
        assert len(slack.seen) == attempt

        clock.at(t + wait - 0.1)  # not before it is due
        assert drain(outbox) == 0
        assert len(slack.seen) == attempt
        t += wait

    clock.at(t)  # due: the script is spent, accepted
    assert drain(outbox) == 1
    assert [e.attempts for e in slack.seen] == [1, 2, 3, 4, 5]
    d = row(db, "d1")
    assert (d.state, d.attempts, d.last_error) == ("sent", 5, None)
    assert "failed (try 1), again in 1s" in caplog.text


def test_a_retry_after_from_the_receiver_is_the_wait(db: Database) -> None:
    clock, slack = Clock(T0), Recorder(Outcome("retry", "ratelimited", retry_after_s=7.0))
    add(db, "d1")
    outbox = outbox_for(db, clock, {"slack": slack})
    assert drain(outbox) == 0
    assert row(db, "d1").next_attempt_at == T0 + timedelta(seconds=7)
    clock.at(6.9)
    assert drain(outbox) == 0 and len(slack.seen) == 1
    clock.at(7)
    assert drain(outbox) == 1 and row(db, "d1").state == "sent"


def test_the_waits_are_the_shared_backoffs_jittered_and_a_retry_after_is_capped_at_an_hour(db: Database) -> None:
    clock = Clock(T0)
    slack = Recorder(Outcome("retry", "Slack answered 500"), Outcome("retry", "ratelimited", retry_after_s=86400.0))
    add(db, "d1")
    outbox = outbox_for(db, clock, {"slack": slack}, rng=random.Random(3))
    assert drain(outbox) == 0
    first = (row(db, "d1").next_attempt_at - T0).total_seconds()
    assert 0.5 <= first <= 1.0  # equal jitter: the upper half of the first 1 s ceiling
    clock.at(first)
    assert drain(outbox) == 0
    assert row(db, "d1").next_attempt_at == T0 + timedelta(seconds=first + 3600)


# ----------------------------------------------------------------- rejected


def test_a_rejected_delivery_is_dead_logged_and_never_retried(db: Database, caplog: pytest.LogCaptureFixture) -> None:
    clock, slack = Clock(T0), Recorder(Outcome("rejected", "Slack refused it: channel_not_found"))
    add(db, "d1", target="channel:C0GONE0001")
    add(db, "d2", "pb")
    outbox = outbox_for(db, clock, {"slack": slack})
    with caplog.at_level(logging.ERROR, logger="labbot.agents.babysitter.outbox"):
        assert drain(outbox) == 1
    d = row(db, "d1")
    assert (d.state, d.last_error, d.attempts) == ("dead", "Slack refused it: channel_not_found", 1)
    assert "d1" in caplog.text and "channel_not_found" in caplog.text

    clock.at(86400)
    assert drain(outbox) == 0
    assert slack.keys == ["d1", "d2"]
    assert row(db, "d1").state == "dead"


# ----------------------------------------------------------------- order


def test_within_an_incident_a_newer_delivery_waits_for_an_older_ones_retry(db: Database) -> None:
    clock, slack = Clock(T0), Recorder(Outcome("retry", "Slack did not answer"))
    add(db, "pa-page", "pa")
    add(db, "pa-refresh", "pa", action="refresh", target="pages", payload={})
    add(db, "pb-page", "pb")
    outbox = outbox_for(db, clock, {"slack": slack})

    assert drain(outbox) == 1
    assert slack.keys == ["pa-page", "pb-page"]  # pa's refresh waits behind pa's page; pb's page goes
    assert row(db, "pa-refresh").state == "pending" and row(db, "pa-refresh").attempts == 0

    clock.at(0.5)  # pa's page not due yet: pa's refresh still waits
    assert drain(outbox) == 0
    assert slack.keys == ["pa-page", "pb-page"]

    clock.at(1)
    assert drain(outbox) == 2
    assert slack.keys == ["pa-page", "pb-page", "pa-page", "pa-refresh"]


def test_a_notifier_that_raises_is_retried_and_logged(db: Database, caplog: pytest.LogCaptureFixture) -> None:
    clock, slack = Clock(T0), Recorder(RuntimeError("bug in the renderer"))
    add(db, "d1")
    outbox = outbox_for(db, clock, {"slack": slack})
    with caplog.at_level(logging.ERROR, logger="labbot.agents.babysitter.outbox"):
        assert drain(outbox) == 0
    d = row(db, "d1")
    assert (d.state, d.attempts) == ("pending", 1)
    assert d.last_error == "RuntimeError inside labbot"
    [record] = [r for r in caplog.records if r.exc_info]
    assert "d1" in record.getMessage() and "bug in the renderer" in caplog.text

    clock.at(1)
    assert drain(outbox) == 1 and row(db, "d1").state == "sent"


def test_a_channel_without_a_notifier_stays_pending_with_one_warning(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    clock, slack = Clock(T0), Recorder()
    add(db, "pd-1", channel="pagerduty", action="trigger", target="labbot-r1-hung", payload={"summary": "s"})
    add(db, "pd-2", "pb", channel="pagerduty", action="trigger", target="labbot-r1-failed", payload={"summary": "s"})
    add(db, "slack-1")
    outbox = outbox_for(db, clock, {"slack": slack})
    with caplog.at_level(logging.WARNING, logger="labbot.agents.babysitter.outbox"):
        assert drain(outbox) == 1  # Slack's delivery of the same page still goes
        clock.at(60)
        assert drain(outbox) == 0
    assert slack.keys == ["slack-1"]
    for key in ("pd-1", "pd-2"):
        d = row(db, key)
        assert (d.state, d.attempts, d.last_error) == ("pending", 0, None)
    warnings = [r for r in caplog.records if "pagerduty is not configured" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert outbox.pending() == 2


# ----------------------------------------------------------------- crash recovery


def test_a_delivery_cut_off_mid_send_is_sent_again_after_recover_with_attempts_above_1(db: Database) -> None:
    clock = Clock(T0)
    add(db, "done")
    add(db, "d1")
    first = outbox_for(db, clock, {"slack": Recorder(ACCEPTED, Crash())})
    with pytest.raises(Crash):
        drain(first)
    assert row(db, "done").state == "sent"
    assert (row(db, "d1").state, row(db, "d1").attempts) == ("sending", 1)

    assert drain(first) == 0  # a row in "sending" is not picked up without recover()

    clock.at(30)  # labbot starts again
    slack = Recorder()
    second = outbox_for(db, clock, {"slack": slack})
    assert second.recover() == 1
    d = row(db, "d1")
    assert (d.state, d.next_attempt_at) == ("pending", T0 + timedelta(seconds=30))
    assert drain(second) == 1
    assert slack.keys == ["d1"] and slack.seen[0].attempts == 2  # > 1: look for an earlier copy first
    assert (row(db, "d1").state, row(db, "done").state) == ("sent", "sent")
    assert second.recover() == 0


# ----------------------------------------------------------------- the leader lease


class Frozen:
    """A replica's monotonic clock, which it reads as it likes: stood still (``now`` 0, a replica paused and resumed
    that has not looked at the time again), or moved on by the test."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def leader(db: Database, name: str = "replica-a") -> tuple[Lease, Frozen]:
    clock = Frozen()
    lease = Lease(db, holder=holder_id(name), ttl_s=30.0, clock=clock)
    with fenced(None):
        assert lease.step()
    return lease, clock


def take_over(db: Database) -> Lease:
    """Another replica takes the lease: its row expired (as the paused holder's TTL would), then taken with the next
    token."""
    with fenced(None):
        with db.session() as s:
            s.execute(update(LeaderLease).values(expires_at=EXPIRED))
        b = Lease(db, holder=holder_id("replica-b"), ttl_s=30.0)
        assert b.step()
    return b


def paused_after_claiming(
    monkeypatch: pytest.MonkeyPatch, outbox: Outbox, key: str, pause: Callable[[], object]
) -> None:
    """The replica of ``outbox`` pauses (``pause`` runs) right after it claimed delivery ``key``, before its send."""
    claim = outbox._claim

    def claimed_then_paused(env: Envelope) -> Envelope | None:
        claimed = claim(env)
        if env.key == key:
            with fenced(None):
                pause()
        return claimed

    monkeypatch.setattr(outbox, "_claim", claimed_then_paused)


def test_a_claim_whose_lease_was_taken_before_the_send_is_not_sent_and_the_batch_stops(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader paused between claiming a delivery and sending it, and superseded meanwhile: resumed, it sends nothing
    (by its own clock, which has not moved, it still leads: only the database tells it), the rest of its batch stays
    queued, and the new leader sends the claimed one, looking for an earlier copy first (attempts 2)."""
    clock, slack = Clock(T0), Recorder()
    for key, page in (("d1", "pa"), ("d2", "pb"), ("d3", "pa")):
        add(db, key, page)
    a, _ = leader(db)
    outbox = outbox_for(db, clock, {"slack": slack})
    taken: list[Lease] = []
    paused_after_claiming(monkeypatch, outbox, "d2", lambda: taken.append(take_over(db)))
    with pytest.raises(Fenced, match="lost the singletons lease"), fenced(a):
        drain(outbox)
    assert slack.keys == ["d1"]  # d2 claimed, never sent; d3 never claimed
    assert not a.held(), "the database told it"
    assert (row(db, "d2").state, row(db, "d2").attempts) == ("pending", 1)  # the claim back in the queue
    assert (row(db, "d3").state, row(db, "d3").attempts) == ("pending", 0)

    [b] = taken
    new = outbox_for(db, clock, {"slack": (sent := Recorder())})
    with fenced(b):
        new.recover()
        assert drain(new) == 2
    assert [(e.key, e.attempts, e.claim_token) for e in sent.seen] == [("d2", 2, 2), ("d3", 1, 2)]
    assert [row(db, k).state for k in ("d1", "d2", "d3")] == ["sent"] * 3


@pytest.mark.parametrize("taken_back", [False, True], ids=["superseded", "taken-back"])
def test_a_send_that_finishes_after_its_lease_was_lost_is_not_recorded_as_sent(db: Database, taken_back: bool) -> None:
    """The lease moves on while a send is in flight (the leader paused mid-send): the send's outcome is not recorded
    by the replica that lost it, whether another replica leads now or it took the lease back under a new token;
    whoever leads sends it again with attempts 2, which makes the Slack notifier look for this copy first."""
    clock = Clock(T0)
    add(db, "d1", "pa")
    add(db, "d2", "pb")
    a, _ = leader(db)
    leads: list[Lease] = []

    class LeaseLostMidSend(Recorder):
        async def deliver(self, envelope: Envelope) -> Outcome:
            with fenced(None):
                b = take_over(db)
                Outbox(db, {}, clock=clock).recover()  # the new leader's first act
                if taken_back:
                    b.release()
                    assert a.step() and a.token == 3  # renewal refused (token 2), then the free lease taken
            leads.append(a if taken_back else b)
            return await super().deliver(envelope)

    slack = LeaseLostMidSend()
    with pytest.raises(Fenced), fenced(a):
        drain(outbox_for(db, clock, {"slack": slack}))
    assert slack.keys == ["d1"]
    d1 = row(db, "d1")
    assert (d1.state, d1.sent_at, d1.result) == ("pending", None, {}), "not recorded as sent"
    assert (row(db, "d2").state, row(db, "d2").attempts) == ("pending", 0)  # the rest of the batch stopped

    again = Recorder()
    with fenced(leads[0]):
        assert drain(outbox_for(db, clock, {"slack": again})) == 2
    assert [(e.key, e.attempts) for e in again.seen] == [("d1", 2), ("d2", 1)]
    assert row(db, "d1").result == {"channel": "C-thread", "ts": "1700000001.000001"}  # the new send's


def test_a_lease_that_lapses_between_claim_and_send_sends_nothing_and_puts_the_claim_back(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader's own deadline passes between a claim and its send (a pause, the database slow to renew) and
    nobody took over: nothing is sent, the batch stops, and the claim goes back to the queue (a lease renewed under
    the same token would never recover it); renewed, the replica sends all of it, the claimed one with attempts 2."""
    clock, slack = Clock(T0), Recorder()
    for key, page in (("d1", "pa"), ("d2", "pb"), ("d3", "pa")):
        add(db, key, page)
    a, local = leader(db)
    outbox = outbox_for(db, clock, {"slack": slack})
    paused_after_claiming(monkeypatch, outbox, "d1", lambda: setattr(local, "now", 100.0))
    with pytest.raises(Fenced, match="does not hold"), fenced(a):
        drain(outbox)
    assert slack.seen == []
    assert [(row(db, k).state, row(db, k).attempts) for k in ("d1", "d2", "d3")] == [
        ("pending", 1),
        ("pending", 0),
        ("pending", 0),
    ]
    with fenced(None):
        assert a.step() and a.token == 1  # still its row: renewed under the same token
    monkeypatch.undo()
    with fenced(a):
        assert drain(outbox) == 3
    assert [(e.key, e.attempts) for e in slack.seen] == [("d1", 2), ("d2", 1), ("d3", 1)]


# ----------------------------------------------------------------- refreshes


def test_a_refresh_carries_the_sent_page_posts_of_its_incident(db: Database) -> None:
    clock, slack = Clock(T0), Recorder()
    level0 = {"template": "page", "level": 0, "renotify": 0}
    level1 = {"template": "page", "level": 1, "renotify": 0}
    add(db, "pa-thread", payload=level0)
    add(db, "pa-dm", target="dm:U0ALICE001", payload=level0)
    add(db, "pa-note", payload={"template": "note", "text": "hung cleared"})
    add(db, "pb-thread", "pb", payload=level0)
    add(db, "pa-oncall", target="channel:C0ONCALL01", payload=level1)
    add(db, "pa-refresh", action="refresh", target="pages", payload={})
    outbox = outbox_for(db, clock, {"slack": slack})
    assert drain(outbox) == 6  # the posts go out in the same drain as the refresh, just before it

    refresh = slack.seen[-1]
    assert refresh.key == "pa-refresh" and refresh.action == "refresh"
    by_key = {e.key: i + 1 for i, e in enumerate(slack.seen)}
    assert refresh.posts == [
        {"channel": "C-thread", "ts": f"1700000001.{by_key['pa-thread']:06d}", "payload": level0, "target": "thread"},
        {
            "channel": "C-dm:U0ALICE001",
            "ts": f"1700000001.{by_key['pa-dm']:06d}",
            "payload": level0,
            "target": "dm:U0ALICE001",
        },
        {
            "channel": "C-channel:C0ONCALL01",
            "ts": f"1700000001.{by_key['pa-oncall']:06d}",
            "payload": level1,
            "target": "channel:C0ONCALL01",
        },
    ]
    assert all(e.posts == [] for e in slack.seen[:-1])  # only refreshes carry posts


def test_a_refresh_leaves_out_posts_that_did_not_go_out(db: Database) -> None:
    clock = Clock(T0)
    add(db, "pa-thread")
    add(db, "pa-dm", target="dm:U0ALICE001")
    add(db, "pa-refresh", action="refresh", target="pages", payload={})
    slack = Recorder(ACCEPTED, Outcome("rejected", "Slack refused it: user_not_found"))  # the first: no ts
    outbox = outbox_for(db, clock, {"slack": slack})
    assert drain(outbox) == 1  # the thread post; the dead DM holds the refresh back until the next drain
    assert drain(outbox) == 1
    assert slack.keys == ["pa-thread", "pa-dm", "pa-refresh"] and slack.seen[-1].posts == []


# ----------------------------------------------------------------- PagerDuty


@pytest.fixture(scope="module")
def server() -> Iterator[PagerDutyFake]:
    with PagerDutyFake() as pd:
        yield pd


@pytest.fixture
def fake(server: PagerDutyFake) -> PagerDutyFake:
    """The module's PagerDuty fake, with nothing recorded or queued."""
    server.reset()
    return server


SILENT = Finding("silent", PAGE, "no telemetry for 45s (threshold 30s)", {"for_s": 45.0})
KEY = "labbot-r1-silent"


def page_pagerduty(db: Database, clock: Clock) -> Pager:
    """The pager's own level-2 trigger: r1 silent and unacknowledged for twice escalate_after (60s)."""
    pager = Pager(db, PagingPolicy(escalate_after_s=60), slack=False, pagerduty=True, clock=clock)
    for at in (0, 60, 120):
        now = clock.at(at)
        with db.session() as s:
            run = s.get_one(Run, "r1")
            incidents = {i.kind: i for i in s.scalars(select(Incident).where(Incident.run_id == "r1"))}
            pager.judge(s, run, incidents, [SILENT], now, kinds=["silent"])
            for inc in incidents.values():
                pager.escalate(s, run, inc, now)
    return pager


def pd_rows(db: Database) -> list[Delivery]:
    with db.session() as s:
        return list(s.scalars(select(Delivery).where(Delivery.channel == "pagerduty").order_by(Delivery.id)))


def drains(outbox: Outbox, fake: PagerDutyFake, steps: list[Callable[[], object]]) -> list[tuple[int, dict[str, str]]]:
    """For each step: run it (move the clock, acknowledge ...), drain through a PagerDutyNotifier on a client for
    the fake, and note (accepted, the fake's alerts)."""

    async def go() -> list[tuple[int, dict[str, str]]]:
        async with PagerDutyClient(ROUTING_KEY, url=fake.url) as client:
            outbox.notifiers["pagerduty"] = PagerDutyNotifier(client)
            out = []
            for step in steps:
                step()
                out.append((await outbox.drain(), fake.incidents))
            return out

    return asyncio.run(go())


def test_pagerduty_deliveries_trigger_acknowledge_and_resolve_the_alert_of_the_incident_key(
    db: Database, fake: PagerDutyFake
) -> None:
    clock = Clock(T0)
    pager = page_pagerduty(db, clock)
    [trigger] = pd_rows(db)
    assert (trigger.action, trigger.target) == ("trigger", KEY)
    page_id = next(p["id"] for p in pager.pages() if p["key"] == KEY)

    steps: list[Callable[[], object]] = [
        lambda: None,
        lambda: pager.acknowledge(page_id, by="U0BOB00001"),
        lambda: pager.resolve(page_id, by="U0BOB00001"),
    ]
    assert drains(outbox_for(db, clock, {}), fake, steps) == [
        (1, {KEY: "triggered"}),
        (1, {KEY: "acknowledged"}),
        (1, {KEY: "resolved"}),
    ]
    assert [(e["event_action"], e["dedup_key"]) for e in fake.events] == [
        ("trigger", KEY),
        ("acknowledge", KEY),
        ("resolve", KEY),
    ]
    payload = fake.events[0]["payload"]
    assert payload["severity"] == "critical" and payload["source"] == "labbot"
    assert "run r1" in payload["summary"] and SILENT.summary in payload["summary"]
    assert payload["custom_details"]["kind"] == "silent" and payload["custom_details"]["page"] == page_id
    assert [(d.state, d.result, d.attempts) for d in pd_rows(db)] == [("sent", {"status": 202}, 1)] * 3


def test_pagerduty_429_is_retried_after_its_retry_after(db: Database, fake: PagerDutyFake) -> None:
    clock = Clock(T0)
    page_pagerduty(db, clock)
    fake.fail_next(429, retry_after=3)
    outbox = outbox_for(db, clock, {})
    results = drains(outbox, fake, [lambda: None, lambda: clock.at(122.9), lambda: clock.at(123)])
    assert results == [(0, {}), (0, {}), (1, {KEY: "triggered"})]
    assert [r.status for r in fake.requests] == [429, 202]  # nothing was sent before it was due
    [d] = pd_rows(db)
    assert (d.state, d.attempts, d.last_error) == ("sent", 2, None)


def pd_envelope(action: str, payload: Mapping[str, Any]) -> Envelope:
    return Envelope(
        id=1,
        key="hand-made",
        channel="pagerduty",
        action=action,
        target=KEY,
        payload=payload,
        attempts=1,
        created_at=T0,
        incident=None,
        run=None,
        posts=[],
    )


def deliver(fake: PagerDutyFake, envelope: Envelope) -> Outcome:
    async def go() -> Outcome:
        async with PagerDutyClient(ROUTING_KEY, url=fake.url) as client:
            return await PagerDutyNotifier(client).deliver(envelope)

    return asyncio.run(go())


def test_the_pagerduty_notifier_answers_what_pagerduty_made_of_the_event(fake: PagerDutyFake) -> None:
    trigger = pd_envelope("trigger", {"summary": "[labbot] silent: run r1", "severity": "critical"})
    fake.fail_next(429, retry_after=3)
    fake.fail_next(503)
    fake.fail_next(400)
    retry_429, retry_503, rejected, accepted = (deliver(fake, trigger) for _ in range(4))
    assert (retry_429.status, retry_429.retry_after_s) == ("retry", 3.0)
    assert (retry_503.status, retry_503.retry_after_s) == ("retry", None)
    assert rejected.status == "rejected" and "400" in rejected.message
    assert (accepted.status, dict(accepted.result)) == ("accepted", {"status": 202})
    assert all(ROUTING_KEY not in o.message for o in (retry_429, retry_503, rejected, accepted))
    assert fake.incidents == {KEY: "triggered"}

    refused = deliver(fake, pd_envelope("trigger", {"summary": "", "severity": "critical"}))
    assert refused.status == "rejected" and "summary" in refused.message
    assert len(fake.requests) == 4  # never sent: PagerDuty would have answered 400


def test_pagerduty_503_is_retried_with_backoff(db: Database, fake: PagerDutyFake) -> None:
    clock = Clock(T0)
    page_pagerduty(db, clock)
    fake.fail_next(503)
    outbox = outbox_for(db, clock, {})
    results = drains(outbox, fake, [lambda: None, lambda: clock.at(120.9), lambda: clock.at(121)])
    assert results == [(0, {}), (0, {}), (1, {KEY: "triggered"})]
    assert [r.status for r in fake.requests] == [503, 202]
    assert pd_rows(db)[0].state == "sent"


def test_pagerduty_400_is_dead_logged_and_not_retried(
    db: Database, fake: PagerDutyFake, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(T0)
    page_pagerduty(db, clock)
    fake.fail_next(400)
    outbox = outbox_for(db, clock, {})
    with caplog.at_level(logging.ERROR, logger="labbot.agents.babysitter.outbox"):
        results = drains(outbox, fake, [lambda: None, lambda: clock.at(86400)])
    assert results == [(0, {}), (0, {})]
    assert [r.status for r in fake.requests] == [400]
    [d] = pd_rows(db)
    assert d.state == "dead" and d.last_error is not None and "HTTP 400" in d.last_error
    assert any(r.levelno == logging.ERROR and KEY in r.getMessage() for r in caplog.records)


def test_a_pagerduty_event_the_client_refuses_is_dead_not_retried_forever(
    db: Database, fake: PagerDutyFake, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(T0)
    add(db, "pd-empty", channel="pagerduty", action="trigger", target="labbot-r1-hung", payload={"summary": " "})
    add(db, "pd-resolve", channel="pagerduty", action="resolve", target="labbot-r1-hung", payload={})
    outbox = outbox_for(db, clock, {})
    with caplog.at_level(logging.ERROR, logger="labbot.agents.babysitter.outbox"):
        results = drains(outbox, fake, [lambda: None, lambda: clock.at(86400)])
    assert results == [(0, {}), (1, {})]  # the resolve behind it is not held up for good
    assert [r.json()["event_action"] for r in fake.requests] == ["resolve"]  # the empty trigger never left
    d = row(db, "pd-empty")
    assert (d.state, d.attempts) == ("dead", 1)
    assert d.last_error is not None and "summary" in d.last_error
    assert any(r.levelno == logging.ERROR and "pd-empty" in r.getMessage() for r in caplog.records)


class SlowRecorder(Recorder):
    """A notifier whose sends take a while (Slack under load): drains that start meanwhile overlap this one."""

    async def deliver(self, envelope: Envelope) -> Outcome:
        await asyncio.sleep(0.05)
        return await super().deliver(envelope)


def test_overlapping_drains_send_each_delivery_once(db: Database) -> None:
    """The watchdog's drain, the outbox's own every second and a button's may run at once (and replicas each run
    theirs): each delivery is claimed by one of them, never sent twice (an on-call post was, after a restart)."""
    clock = Clock(T0)
    slack = SlowRecorder()
    ids = [add(db, "page-thread", "pa"), add(db, "page-oncall", "pb", target="oncall")]
    outboxes = [Outbox(db, {"slack": slack}, clock=clock) for _ in range(2)]  # this process twice, or two replicas

    async def drains() -> list[int]:
        return list(await asyncio.gather(*(o.drain() for o in outboxes for _ in range(3))))

    accepted = asyncio.run(drains())
    assert sorted(slack.keys) == ["page-oncall", "page-thread"]
    assert sum(accepted) == 2
    with db.session() as s:
        rows = {d.id: (d.state, d.attempts) for d in s.scalars(select(Delivery).where(Delivery.id.in_(ids)))}
    assert rows == {ids[0]: ("sent", 1), ids[1]: ("sent", 1)}
