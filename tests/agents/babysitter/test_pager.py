"""labbot.agents.babysitter.pager: incidents opened, re-opened and cleared from findings, their escalation (level 0
thread + DM, level 1 on-call channel, level 2 PagerDuty, re-notifications), acknowledge/resolve from the front doors,
and the
deliveries each step queues in the outbox, on a real SQLite database with a fake clock."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from support import Clock

from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.policy import PagingPolicy
from labbot.common.errors import Conflict, UnknownPage
from labbot.storage.db import Database
from labbot.storage.models import Delivery, Incident, Run
from labbot.training.monitoring import INFRA, PAGE, WARNING, Finding

pytestmark = pytest.mark.databases

T0 = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)
ONCALL = "C0ONCALL01"
OWNER = "U0ALICE001"
POLICY = PagingPolicy(escalate_after_s=60, renotify_every_s=25, flap_window_s=300, oncall_channel=ONCALL)

HUNG = Finding("hung", PAGE, "step 40 has not advanced for 45s (threshold 30s)", {"step": 40, "for_s": 45.0})
FAILED = Finding("failed", PAGE, "Ray says the job failed", {"error_type": "JOB_SUPERVISOR_ACTOR_DIED"})
SLOW = Finding("slow", WARNING, "0.4 steps/s, under half its median of 1.0", {"rate": 0.4})
INFRA_DOWN = Finding(INFRA, PAGE, "the Ray API at http://ray:8265 has not answered for 2m", {"down_for_s": 120.0})


@dataclass
class Lab:
    db: Database
    pager: Pager
    clock: Clock

    def tick(self, findings: Sequence[Finding], at: float, *, run_id: str = "r1") -> None:
        """One watchdog look at ``run_id`` ``at`` seconds after T0: judge, then escalate its existing incidents."""
        now = self.clock.at(at)
        with self.db.session() as s:
            run = s.get_one(Run, run_id)
            incidents = {i.kind: i for i in s.scalars(select(Incident).where(Incident.run_id == run_id))}
            self.pager.judge(s, run, incidents, findings, now)
            for inc in incidents.values():
                self.pager.escalate(s, run, inc, now)

    def tick_cluster(self, finding: Finding | None, at: float) -> None:
        """The watchdog's look at the Ray cluster itself (no run)."""
        now = self.clock.at(at)
        with self.db.session() as s:
            existing = s.scalar(select(Incident).where(Incident.run_id.is_(None), Incident.kind == INFRA))
            incidents = {INFRA: existing} if existing is not None else {}
            self.pager.judge(s, None, incidents, [finding] if finding else [], now, kinds=[INFRA])
            for inc in incidents.values():
                self.pager.escalate(s, None, inc, now)

    def incident(self, run_id: str | None = "r1", kind: str = "hung") -> Incident:
        with self.db.session() as s:
            q = select(Incident).where(Incident.kind == kind)
            q = q.where(Incident.run_id == run_id) if run_id else q.where(Incident.run_id.is_(None))
            return s.scalars(q).one()

    def deliveries(self) -> list[Delivery]:
        with self.db.session() as s:
            return list(s.scalars(select(Delivery).order_by(Delivery.id)))

    def new_deliveries(self, seen: int) -> list[tuple[str, str, str, dict[str, Any]]]:
        """(channel, action, target, payload) of the deliveries queued after the first ``seen``."""
        return [(d.channel, d.action, d.target, dict(d.payload)) for d in self.deliveries()[seen:]]


def add_run(db: Database, run_id: str = "r1", **overrides: Any) -> None:
    row: dict[str, Any] = {
        "id": run_id,
        "job": "tiny-lm",
        "name": f"tiny-lm-{run_id}",
        "owner": OWNER,
        "config": {"params": {}, "gpus": 0, "stall_after_s": 30, "max_restarts": 2},
        "status": "running",
        "attempt": 1,
        "telemetry_token_hash": "x" * 64,
        "metrics": {},
        "thread_ts": "1700000000.000100",
        "channel": "C0LAB00001",
        **overrides,
    }
    with db.session() as s:
        s.add(Run(**row))


def make_lab(
    tmp_path: Path, *, policy: PagingPolicy = POLICY, slack: bool = True, pagerduty: bool = True, **run: Any
) -> Lab:
    db = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    db.upgrade()
    add_run(db, **run)
    clock = Clock(T0)
    return Lab(db, Pager(db, policy, slack=slack, pagerduty=pagerduty, clock=clock), clock)


def page_post(target: str, *, level: int = 0, renotify: int = 0) -> tuple[str, str, str, dict[str, Any]]:
    return ("slack", "post", target, {"template": "page", "level": level, "renotify": renotify})


REFRESH: tuple[str, str, str, dict[str, Any]] = ("slack", "refresh", "pages", {})


def escalate_to_level_2(lab: Lab) -> None:
    lab.tick([HUNG], 0)
    lab.tick([HUNG], 60)
    lab.tick([HUNG], 120)
    assert lab.incident().escalation_level == 2


# ----------------------------------------------------------------- opening a page


def test_a_new_page_finding_opens_one_incident_and_pages_the_thread_and_the_owner(tmp_path: Path) -> None:
    lab = make_lab(tmp_path)
    lab.tick([HUNG], 0)

    inc = lab.incident()
    assert inc.key == "labbot-r1-hung"
    assert (inc.state, inc.escalation_level, inc.occurrence, inc.severity) == ("triggered", 0, 1, PAGE)
    assert inc.summary == HUNG.summary and inc.detail == HUNG.detail
    assert inc.triggered_at == T0
    assert lab.new_deliveries(0) == [page_post("thread"), page_post(f"dm:{OWNER}")]
    assert all(d.incident_id == inc.id and d.run_id == "r1" and d.state == "pending" for d in lab.deliveries())

    lab.tick([HUNG], 5)  # the same finding on the next tick: the timers do the rest
    assert lab.new_deliveries(2) == []
    assert len(lab.pager.pages()) == 1


# ----------------------------------------------------------------- escalation


def test_an_unacknowledged_page_is_renotified_then_escalates_to_the_oncall_channel_then_pagerduty(
    tmp_path: Path,
) -> None:
    lab = make_lab(tmp_path)
    lab.tick([HUNG], 0)
    assert len(lab.deliveries()) == 2

    lab.tick([HUNG], 10)
    assert lab.new_deliveries(2) == []

    lab.tick([HUNG], 25)  # renotify_every: a reminder to the level-0 targets
    assert lab.new_deliveries(2) == [page_post("thread", renotify=1), page_post(f"dm:{OWNER}", renotify=1)]
    assert lab.incident().escalation_level == 0

    lab.tick([HUNG], 60)  # escalate_after: level 1
    assert lab.new_deliveries(4) == [page_post(f"channel:{ONCALL}", level=1)]
    assert lab.incident().escalation_level == 1
    assert not lab.incident().pagerduty_open

    lab.tick([HUNG], 120)  # as long again: level 2, PagerDuty
    [(channel, action, target, payload)] = lab.new_deliveries(5)
    assert (channel, action, target) == ("pagerduty", "trigger", "labbot-r1-hung")
    assert payload["severity"] == "critical"
    assert "run r1" in payload["summary"] and HUNG.summary in payload["summary"]
    assert payload["custom_details"]["kind"] == "hung" and payload["custom_details"]["owner"] == OWNER
    inc = lab.incident()
    assert inc.escalation_level == 2 and inc.pagerduty_open
    assert inc.next_escalation_at is None

    for at in (180, 600, 3600, 86400):  # no level 3, ever: only reminders in the on-call channel
        lab.tick([HUNG], at)
    assert lab.incident().escalation_level == 2
    later = lab.new_deliveries(6)
    assert later and all(d[:3] == ("slack", "post", f"channel:{ONCALL}") for d in later)
    assert all(d[3]["level"] == 2 and d[3]["renotify"] > 0 for d in later)
    assert sum(d.channel == "pagerduty" for d in lab.deliveries()) == 1


# ----------------------------------------------------------------- acknowledge


def test_acknowledge_stops_escalation_refreshes_slack_and_acknowledges_pagerduty(tmp_path: Path) -> None:
    lab = make_lab(tmp_path)
    escalate_to_level_2(lab)
    seen = len(lab.deliveries())
    page_id = lab.incident().id

    lab.clock.at(130)
    view = lab.pager.acknowledge(page_id, by="U0BOB00001")
    assert view["state"] == "acknowledged" and view["acknowledged_by"] == "U0BOB00001"
    assert view["acknowledged_at"] == (T0 + timedelta(seconds=130)).isoformat()
    assert [d[:3] for d in lab.new_deliveries(seen)] == [REFRESH[:3], ("pagerduty", "acknowledge", "labbot-r1-hung")]
    seen += 2
    assert lab.incident().next_escalation_at is None and lab.incident().next_renotify_at is None

    for at in (200, 1000, 86400):  # however long: no reminder, no escalation
        lab.tick([HUNG], at)
    assert lab.new_deliveries(seen) == []
    assert lab.incident().escalation_level == 2

    again = lab.pager.acknowledge(page_id, by="U0CAROL001")  # twice: nothing new
    assert again["acknowledged_by"] == "U0BOB00001"
    assert lab.new_deliveries(seen) == []


def test_acknowledge_before_pagerduty_was_paged_tells_only_slack(tmp_path: Path) -> None:
    lab = make_lab(tmp_path)
    lab.tick([HUNG], 0)
    lab.pager.acknowledge(lab.incident().id, by="U0BOB00001")
    assert lab.new_deliveries(2) == [REFRESH]
    lab.tick([HUNG], 600)
    assert lab.incident().escalation_level == 0
    assert lab.new_deliveries(3) == []


def test_acknowledging_a_resolved_page_is_a_conflict_and_an_unknown_id_says_how_to_list_pages(
    tmp_path: Path,
) -> None:
    lab = make_lab(tmp_path)
    lab.tick([HUNG], 0)
    page_id = lab.incident().id
    lab.tick([], 10)  # cleared: resolved by labbot
    with pytest.raises(Conflict, match="already resolved"):
        lab.pager.acknowledge(page_id, by="U0BOB00001")
    assert lab.incident().state == "resolved"

    for call in (lambda: lab.pager.acknowledge("pzzzzz", by="U0BOB00001"), lambda: lab.pager.get("pzzzzz")):
        with pytest.raises(UnknownPage) as err:
            call()
        assert "pzzzzz" in err.value.message and "labbot pages" in err.value.message


# ----------------------------------------------------------------- the condition clears


@pytest.mark.parametrize("paged_pagerduty", [False, True])
def test_a_cleared_condition_resolves_the_page_with_a_note_a_refresh_and_a_pagerduty_resolve(
    tmp_path: Path, paged_pagerduty: bool
) -> None:
    lab = make_lab(tmp_path)
    if paged_pagerduty:
        escalate_to_level_2(lab)
    else:
        lab.tick([HUNG], 0)
    seen = len(lab.deliveries())

    lab.tick([], 130)
    inc = lab.incident()
    assert (inc.state, inc.resolved_by, inc.resolved_at) == ("resolved", "labbot", T0 + timedelta(seconds=130))
    assert not inc.condition_active and not inc.pagerduty_open
    assert inc.next_escalation_at is None and inc.next_renotify_at is None
    new = lab.new_deliveries(seen)
    note = new[0]
    assert note[:3] == ("slack", "post", "thread") and note[3]["template"] == "note"
    assert "cleared" in note[3]["text"] and "hung" in note[3]["text"]
    assert new[1] == REFRESH
    if paged_pagerduty:
        assert [d[:3] for d in new[2:]] == [("pagerduty", "resolve", "labbot-r1-hung")]
    else:
        assert new[2:] == []

    lab.tick([], 200)  # still clear: nothing more
    assert lab.new_deliveries(seen + len(new)) == []
    assert lab.pager.pages() == []


@pytest.mark.parametrize("ended", ["succeeded", "failed"])
def test_a_run_ending_with_a_condition_of_its_numbers_leaves_its_page_open_and_says_so_once(
    tmp_path: Path, ended: str
) -> None:
    lab = make_lab(tmp_path)
    diverged = Finding("diverged", "page", "loss is NaN since step 50", {})
    lab.tick([diverged], 0)
    seen = len(lab.deliveries())
    with lab.db.session() as s:
        s.get_one(Run, "r1").status = ended  # the job ended (Ray says it exited 0, or it failed) still diverged
    lab.tick([], 10)
    inc = lab.incident(kind="diverged")
    assert inc.state == "triggered" and inc.resolved_by is None, "the end of the run fixed nothing"
    [note] = lab.new_deliveries(seen)
    assert note[3]["template"] == "note"
    assert f"the run ended ({ended}) with *diverged* never cleared" in note[3]["text"]
    assert f"Page `{inc.id}` stays open" in note[3]["text"]
    lab.tick([], 20)
    assert [d for d in lab.new_deliveries(seen + 1) if d[3].get("template") == "note"] == [], "said once"
    assert [p["kind"] for p in lab.pager.pages()] == ["diverged"]


def test_a_run_ending_clears_what_was_about_it_running_and_a_stop_clears_everything(tmp_path: Path) -> None:
    lab = make_lab(tmp_path)
    lab.tick([HUNG], 0)
    with lab.db.session() as s:
        s.get_one(Run, "r1").status = "succeeded"
    lab.tick([], 10)
    assert (lab.incident().state, lab.incident().resolved_by) == ("resolved", "labbot")
    (tmp_path / "stopped").mkdir()
    lab2 = make_lab(tmp_path / "stopped")
    lab2.tick([Finding("entropy_collapse", "page", "entropy 0.01", {})], 0)
    with lab2.db.session() as s:
        s.get_one(Run, "r1").status = "stopped"
    lab2.tick([], 10)
    assert lab2.incident(kind="entropy_collapse").state == "resolved", "a person stopped it: acted on"


# ----------------------------------------------------------------- flapping


@pytest.mark.parametrize("acknowledged", [False, True])
def test_a_condition_back_within_the_flap_window_reopens_the_same_page_quietly(
    tmp_path: Path, acknowledged: bool
) -> None:
    lab = make_lab(tmp_path)
    lab.tick([HUNG], 0)
    page_id = lab.incident().id
    if acknowledged:
        lab.pager.acknowledge(page_id, by="U0BOB00001")
    lab.tick([], 10)
    seen = len(lab.deliveries())

    lab.tick([HUNG], 40)  # 30s after clearing, within the 300s flap window
    inc = lab.incident()
    assert inc.id == page_id and inc.occurrence == 1 and inc.reopened == 1
    assert inc.state == ("acknowledged" if acknowledged else "triggered")
    assert inc.resolved_at is None and inc.resolved_by is None
    new = lab.new_deliveries(seen)
    assert [d[:3] for d in new] == [("slack", "post", "thread"), REFRESH[:3]]
    assert new[0][3]["template"] == "note" and "re-opened" in new[0][3]["text"]
    assert not any(d[3].get("template") == "page" for d in new)  # no new round of pages
    seen += 2

    lab.tick([HUNG], 40 + 60)
    if acknowledged:
        assert lab.incident().escalation_level == 0 and lab.new_deliveries(seen) == []
    else:  # the escalation timer runs again from the re-open
        assert lab.incident().escalation_level == 1
        assert lab.new_deliveries(seen) == [page_post(f"channel:{ONCALL}", level=1)]


def test_a_condition_back_after_the_flap_window_is_a_new_occurrence_paged_from_level_0(tmp_path: Path) -> None:
    lab = make_lab(tmp_path)
    lab.tick([HUNG], 0)
    lab.tick([HUNG], 60)
    lab.pager.acknowledge(lab.incident().id, by="U0BOB00001")
    lab.tick([], 70)
    seen = len(lab.deliveries())

    lab.tick([HUNG], 70 + 301)
    inc = lab.incident()
    assert (inc.occurrence, inc.reopened, inc.state, inc.escalation_level) == (2, 0, "triggered", 0)
    assert inc.acknowledged_by is None and inc.triggered_at == T0 + timedelta(seconds=371)
    assert lab.new_deliveries(seen) == [page_post("thread"), page_post(f"dm:{OWNER}")]
    assert len(lab.pager.pages(include_resolved=True)) == 1  # the same row, ever


# ----------------------------------------------------------------- a human resolves


def test_a_page_resolved_by_hand_stays_resolved_while_the_condition_holds(tmp_path: Path) -> None:
    lab = make_lab(tmp_path)
    lab.tick([HUNG], 0)
    page_id = lab.incident().id

    lab.clock.at(20)
    view = lab.pager.resolve(page_id, by="U0BOB00001")
    assert view["state"] == "resolved" and view["resolved_by"] == "U0BOB00001"
    new = lab.new_deliveries(2)
    assert new[0][:3] == ("slack", "post", "thread") and "<@U0BOB00001>" in new[0][3]["text"]
    assert new[1:] == [REFRESH]
    assert lab.pager.resolve(page_id, by="U0CAROL001")["resolved_by"] == "U0BOB00001"  # twice: a no-op
    seen = 4
    assert len(lab.deliveries()) == seen

    for at in (30, 100, 1000):  # still hung: no re-open, no page
        lab.tick([HUNG], at)
    assert lab.incident().state == "resolved" and lab.incident().reopened == 0
    assert lab.new_deliveries(seen) == []

    lab.tick([], 1100)  # clears: already resolved, nothing to say
    assert lab.incident().state == "resolved"
    assert lab.new_deliveries(seen) == []

    lab.tick([HUNG], 1100 + 301)  # back after the window: paged again
    inc = lab.incident()
    assert (inc.id, inc.occurrence, inc.state) == (page_id, 2, "triggered")
    assert lab.new_deliveries(seen) == [page_post("thread"), page_post(f"dm:{OWNER}")]


def test_a_page_resolved_by_hand_that_returns_within_the_window_pages_again(tmp_path: Path) -> None:
    """Only labbot's own auto-resolution is a flap: a person who resolved it thought it fixed; its return is news."""
    lab = make_lab(tmp_path)
    lab.tick([HUNG], 0)
    page_id = lab.incident().id
    lab.clock.at(10)
    lab.pager.resolve(page_id, by="U0BOB00001")
    lab.tick([], 20)
    seen = len(lab.deliveries())
    lab.tick([HUNG], 40)  # well within the 300 s flap window
    inc = lab.incident()
    assert (inc.occurrence, inc.reopened, inc.state) == (2, 0, "triggered")
    assert lab.new_deliveries(seen) == [page_post("thread"), page_post(f"dm:{OWNER}")]


# ----------------------------------------------------------------- warnings, channels off, nowhere to go


def test_a_warning_is_a_thread_post_only_without_dm_or_escalation(tmp_path: Path) -> None:
    lab = make_lab(tmp_path)
    lab.tick([SLOW], 0)
    inc = lab.incident(kind="slow")
    assert inc.severity == WARNING and inc.key == "labbot-r1-slow"
    assert inc.next_escalation_at is None and inc.next_renotify_at is None
    assert lab.new_deliveries(0) == [page_post("thread")]

    for at in (25, 60, 120, 86400):
        lab.tick([SLOW], at)
    assert lab.incident(kind="slow").escalation_level == 0
    assert len(lab.deliveries()) == 1


def test_without_slack_no_slack_delivery_is_queued(tmp_path: Path) -> None:
    lab = make_lab(tmp_path, slack=False)
    escalate_to_level_2(lab)
    lab.tick([HUNG], 200)
    lab.pager.acknowledge(lab.incident().id, by="alice")
    lab.tick([], 300)
    assert [d.channel for d in lab.deliveries()] == ["pagerduty"] * 3
    assert [d.action for d in lab.deliveries()] == ["trigger", "acknowledge", "resolve"]


def test_without_pagerduty_level_2_advances_but_queues_nothing_for_pagerduty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lab = make_lab(tmp_path, pagerduty=False)
    with caplog.at_level(logging.WARNING, logger="labbot.agents.babysitter.pager"):
        escalate_to_level_2(lab)
    assert "level 2 has nowhere to go" in caplog.text
    inc = lab.incident()
    assert not inc.pagerduty_open and inc.next_escalation_at is None
    lab.pager.acknowledge(inc.id, by="U0BOB00001")
    lab.tick([], 300)
    assert lab.deliveries() and all(d.channel == "slack" for d in lab.deliveries())


def test_a_run_without_thread_and_a_cli_owner_pages_the_oncall_channel(tmp_path: Path) -> None:
    lab = make_lab(tmp_path, owner="alice", thread_ts=None, channel=None)
    lab.tick([HUNG], 0)
    assert lab.new_deliveries(0) == [page_post(f"channel:{ONCALL}")]
    lab.tick([], 10)  # the clearing note goes there too
    note = lab.new_deliveries(1)[0]
    assert note[:3] == ("slack", "post", f"channel:{ONCALL}") and note[3]["template"] == "note"


def test_a_run_without_thread_and_without_oncall_channel_has_nobody_to_page_on_slack(tmp_path: Path) -> None:
    lab = make_lab(tmp_path, policy=PagingPolicy(), owner="alice", thread_ts=None, channel=None)
    lab.tick([HUNG], 0)
    assert lab.incident().state == "triggered"  # still a page: the CLI and the API list it
    assert lab.deliveries() == []


def test_a_cluster_wide_incident_is_keyed_by_the_cluster(tmp_path: Path) -> None:
    lab = make_lab(tmp_path)
    lab.tick_cluster(INFRA_DOWN, 0)
    inc = lab.incident(run_id=None, kind=INFRA)
    assert inc.key == "labbot-cluster-infra" and inc.run_id is None
    assert lab.new_deliveries(0) == [page_post(f"channel:{ONCALL}")]
    assert lab.deliveries()[0].run_id is None

    lab.tick_cluster(INFRA_DOWN, 60)
    lab.tick_cluster(INFRA_DOWN, 120)
    trigger = lab.deliveries()[-1]
    assert (trigger.channel, trigger.action, trigger.target) == ("pagerduty", "trigger", "labbot-cluster-infra")
    assert "the Ray cluster" in trigger.payload["summary"]
    assert trigger.payload["custom_details"]["scope"] == "cluster"

    lab.tick_cluster(None, 130)
    inc = lab.incident(run_id=None, kind=INFRA)
    assert inc.state == "resolved" and inc.resolved_by == "labbot"
    assert lab.deliveries()[-1].action == "resolve"


# ----------------------------------------------------------------- listing


def test_pages_lists_open_pages_newest_first_with_the_contract_fields(tmp_path: Path) -> None:
    lab = make_lab(tmp_path)
    add_run(lab.db, "r2")
    lab.tick([HUNG], 0)
    lab.tick([FAILED], 10, run_id="r2")
    lab.tick([HUNG, SLOW], 20)
    hung, failed, slow = lab.incident(), lab.incident("r2", "failed"), lab.incident(kind="slow")

    assert [p["id"] for p in lab.pager.pages()] == [slow.id, failed.id, hung.id]
    assert [p["id"] for p in lab.pager.pages(run_id="r2")] == [failed.id]

    lab.clock.at(30)
    lab.pager.resolve(failed.id, by="alice")
    assert [p["id"] for p in lab.pager.pages()] == [slow.id, hung.id]
    everything = lab.pager.pages(include_resolved=True)
    assert [p["id"] for p in everything] == [slow.id, failed.id, hung.id]

    view = everything[1]
    contract = {
        "id": failed.id,
        "run_id": "r2",
        "kind": "failed",
        "state": "resolved",
        "escalation_level": 0,
        "triggered_at": (T0 + timedelta(seconds=10)).isoformat(),
    }
    assert {k: view[k] for k in contract} == contract
    assert view["resolved_by"] == "alice" and view["key"] == "labbot-r2-failed"
    assert lab.pager.get(failed.id) == view
    assert lab.pager.get(f"  {failed.id} ") == view  # typed by a human


# ----------------------------------------------------------------- idempotent enqueueing


def count_deliveries(db: Database) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count()).select_from(Delivery)) or 0)


def test_enqueueing_is_idempotent_by_key(tmp_path: Path) -> None:
    lab = make_lab(tmp_path)
    lab.tick([HUNG], 0)
    assert count_deliveries(lab.db) == 2

    with lab.db.session() as s:  # the same level-0 step queued again (a tick replayed): once
        inc = s.scalars(select(Incident)).one()
        lab.pager._post(s, inc, "thread", level=0)
        lab.pager._post(s, inc, f"dm:{OWNER}", level=0)
    assert count_deliveries(lab.db) == 2

    with lab.db.session() as s:
        run = s.get_one(Run, "r1")
        for _ in range(3):
            lab.pager.tell_thread(s, run, "auto-restart-2", "restarting from checkpoint step 40 in 10s")
    with lab.db.session() as s:
        lab.pager.tell_thread(s, s.get_one(Run, "r1"), "auto-restart-2", "restarting again")
        lab.pager.tell_thread(s, s.get_one(Run, "r1"), "auto-restart-3", "restarting from step 80 in 20s")
    notes = [d for d in lab.deliveries() if d.incident_id is None]
    assert [(d.key, d.payload["text"]) for d in notes] == [
        ("r1:auto-restart-2", "restarting from checkpoint step 40 in 10s"),
        ("r1:auto-restart-3", "restarting from step 80 in 20s"),
    ]
    assert count_deliveries(lab.db) == 4


def test_linking_a_page_to_linear_keeps_the_link_refreshes_every_copy_and_notes_it_in_the_thread(
    tmp_path: Path,
) -> None:
    lab = make_lab(tmp_path)
    lab.tick([HUNG], 0)
    seen = len(lab.deliveries())
    page_id = lab.incident().id
    link = {"identifier": "ENG-7", "url": "https://linear.app/acme/issue/ENG-7", "by": OWNER}
    view = lab.pager.link(page_id, "linear", link, note="filed as ENG-7")
    assert view["links"] == {"linear": link} and lab.pager.get(page_id)["links"] == {"linear": link}
    kinds = [(d[0], d[1], d[2]) for d in lab.new_deliveries(seen)]
    assert ("slack", "refresh", "pages") in kinds and ("slack", "post", "thread") in kinds
    seen = len(lab.deliveries())
    lab.pager.link(page_id, "linear", link, note="filed as ENG-7")  # the same link again: keyed, nothing new
    assert lab.new_deliveries(seen) == []
    with pytest.raises(UnknownPage):
        lab.pager.link("nope", "linear", link)
