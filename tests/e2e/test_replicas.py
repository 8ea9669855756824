"""Several `labbot serve` replicas on one PostgreSQL database and one Ray cluster: one leader runs the singletons, a
follower takes over when it dies or stops, nothing is paged twice (a leader stopped between claiming a page and
posting it included), PostgreSQL going away is a fast 503, launches with one idempotency key make one run; and on
SQLite a second replica is refused. Real processes, the real PostgreSQL
server, a real Ray head; Slack and PagerDuty faked at their HTTP edge."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from databases import create_database, drop_database, refuse_connections, require_postgresql
from fakes.pagerduty import ROUTING_KEY, PagerDutyFake
from fakes.slack import SlackFake
from slack_driver import OWNER, SlackSide, slack_env
from sqlalchemy import func, select
from support import CRASHER_AND_SLEEPER_TOML, SMALL, Serve, wait_for

from labbot.storage.db import Database
from labbot.storage.models import Delivery, Incident, LeaderLease, MetricPoint, Run
from labbot.training.launcher import RayLauncher
from labbot.training.ray_cluster import RayConnection

ONCALL = "C0ONCALL01"
LEASE_S = 3.0
TICK_S = 1.0
ESCALATE_S = 4.0
LOAD_S = 2.0  # a watchdog tick on two loaded cores takes longer than on an idle one
TOML = f"""
[slack]
card_every = "2s"
progress_every = "1h"

[watchdog]
tick = "{TICK_S:g}s"
startup_grace = "90s"

[paging]
escalate_after = "{ESCALATE_S:g}s"
renotify_every = "0s"
oncall_channel = "{ONCALL}"

[leader]
lease = "{LEASE_S:g}s"
renew = "1s"

{CRASHER_AND_SLEEPER_TOML}"""


class Replicas:
    """`labbot serve` replicas of one deployment: one database, one Ray, one admin token, one Slack app."""

    def __init__(self, root: Path, url: str, ray: RayConnection, fake: SlackFake, pd: PagerDutyFake) -> None:
        self.root, self.url, self.ray, self.fake, self.pd = root, url, ray, fake, pd
        self.token = secrets.token_urlsafe(32)  # the Secret every replica mounts
        self.config = root / "labbot.toml"
        self.config.write_text(TOML)
        self.serves: dict[str, Serve] = {}

    def serve(self, name: str) -> Serve:
        home = self.root / name
        env = {
            **slack_env(self.fake, self.config),
            "PAGERDUTY_ROUTING_KEY": ROUTING_KEY,
            "PAGERDUTY_EVENTS_URL": self.pd.url,
            "LABBOT_DATABASE_URL": self.url,
            "LABBOT_REPLICA": name,
            "LABBOT_ADMIN_TOKEN": self.token,  # from the Secret, as deploy/labbot.yaml gives it
        }
        s = Serve(home, ray_address=self.ray.address, ray_token=self.ray.token, extra_env=env)
        self.serves[name] = s
        return s.start()

    def side(self, name: str) -> SlackSide:
        return SlackSide(self.fake, self.serves[name])

    def stop(self) -> None:
        for s in self.serves.values():
            if s.proc is not None and s.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(s.proc.pid, signal.SIGCONT)  # a stopped one must hear the SIGTERM
            s.stop()


def readyz(s: Serve) -> dict[str, Any]:
    r = httpx.get(f"{s.url}/readyz", timeout=10)
    body: dict[str, Any] = r.json()
    return body


def role(s: Serve) -> str | None:
    try:
        return str(readyz(s)["role"])
    except (httpx.HTTPError, KeyError, ValueError):
        return None


def lease_row(url: str) -> tuple[str, int]:
    db = Database(url)
    try:
        with db.session() as s:
            row = s.get_one(LeaderLease, "singletons")
            return row.holder, row.token
    finally:
        db.dispose()


def deliveries(url: str) -> list[tuple[str, str]]:
    db = Database(url)
    try:
        with db.session() as s:
            return [(d.key, d.state) for d in s.scalars(select(Delivery).order_by(Delivery.id))]
    finally:
        db.dispose()


def escalations(url: str, page_id: str) -> tuple[datetime, datetime, datetime]:
    """When the page was triggered, and when its level 1 (on-call) and level 2 (PagerDuty) were queued."""
    db = Database(url)
    try:
        with db.session() as s:
            triggered = s.get_one(Incident, page_id).triggered_at
            rows = s.scalars(select(Delivery).where(Delivery.incident_id == page_id).order_by(Delivery.id)).all()
            level1 = min(d.created_at for d in rows if d.target == f"channel:{ONCALL}")
            level2 = min(d.created_at for d in rows if d.channel == "pagerduty" and d.action == "trigger")
            return triggered, level1, level2
    finally:
        db.dispose()


def pages_of(side: SlackSide, run_id: str) -> list[dict[str, Any]]:
    return side.pages(all="1", run=run_id)


def about(messages: list[Any], page_id: str) -> list[Any]:
    return [m for m in messages if page_id in str(m.blocks)]


def oncall_posts(side: SlackSide, page_id: str) -> list[Any]:
    return [m for m in side.page_messages(ONCALL) if page_id in str(m.blocks)]


@pytest.fixture
def pg_url() -> Iterator[str]:
    require_postgresql()
    url = create_database(migrated=True)
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture
def replicas(tmp_path: Path, pg_url: str, ray_head: RayConnection) -> Iterator[Replicas]:
    fake = SlackFake(channels={"C0LAB00001": "lab", ONCALL: "oncall"}, users={OWNER: "alice"})
    fake.start()
    with PagerDutyFake() as pd:
        r = Replicas(tmp_path, pg_url, ray_head, fake, pd)
        try:
            yield r
        finally:
            r.stop()
            fake.stop()


def two(replicas: Replicas) -> tuple[Serve, Serve]:
    """Replica ``a`` started first (it leads), then ``b`` (it follows)."""
    a = replicas.serve("a")
    wait_for(lambda: role(a) == "leader", timeout=30, what="a leading")
    b = replicas.serve("b")
    wait_for(lambda: role(b) == "follower", timeout=30, what="b following")
    return a, b


@pytest.mark.postgresql
def test_two_replicas_and_a_hung_job_page_dm_escalate_and_trigger_once(replicas: Replicas) -> None:
    a, b = two(replicas)
    ra, rb = readyz(a), readyz(b)
    assert ra["role"] == "leader" and rb["role"] == "follower"
    assert ra["leader"] == rb["leader"] == ra["replica"] and ra["replica"].startswith("a:")
    assert not (a.home / "admin_token").exists(), "the token given is the one used; none of its own is written"
    lab = replicas.side("b")  # Slack's events reach the follower: it serves them all the same
    run_id = lab.launched(
        f"launch tiny-lm steps=100000 log_every=1 hang_at_step=8 num_threads=1 min_step_s=0.05 {SMALL} --stall-after 5s"
    )
    page = wait_for(
        lambda: next((p for p in pages_of(lab, run_id) if p["kind"] == "hung"), None), timeout=90, what="a hung page"
    )
    key = f"labbot-{run_id}-hung"
    wait_for(lambda: replicas.pd.incidents.get(key) == "triggered", timeout=40, what="level 2: PagerDuty")
    wait_for(lambda: oncall_posts(lab, page["id"]), timeout=20, what="level 1: on-call")
    wait_for(lambda: all(state == "sent" for _, state in deliveries(replicas.url)), timeout=20, what="all delivered")
    assert [p["id"] for p in pages_of(lab, run_id) if p["kind"] == "hung"] == [page["id"]]
    # every page of the run (under load a silent page may come before the hung one): one message each, everywhere
    for p in pages_of(lab, run_id):
        assert len(about(lab.page_messages(run_id=run_id), p["id"])) == 1, f"one {p['kind']} page in the thread"
        assert len(about(lab.page_messages(replicas.fake.dm_channel(OWNER)), p["id"])) == 1, f"one {p['kind']} DM"
    assert len(oncall_posts(lab, page["id"])) == 1, "one escalation to on-call"
    triggers = [e for e in replicas.pd.events if e.get("dedup_key") == key and e["event_action"] == "trigger"]
    assert len(triggers) == 1, "PagerDuty triggered once"
    assert "leads now" in a.log() and "leads now" not in b.log()
    with b.client() as api:
        api.post(f"/runs/{run_id}/stop", params={"by": "test"})


@pytest.mark.postgresql
def test_leader_killed_mid_incident_with_slack_down_loses_no_page_and_doubles_none(replicas: Replicas) -> None:
    a, b = two(replicas)
    lab = replicas.side("a")
    fake = replicas.fake
    run_id = lab.launched("launch crasher", recorded=False)
    fake.fail_next(500, on="chat.postMessage", times=100_000)  # Slack is down from here on
    fake.fail_next(500, on="conversations.open", times=100_000)
    page = wait_for(lambda: pages_of(lab, run_id), timeout=60, what="the failed page")[0]
    wait_for(
        lambda: any(state == "pending" for _, state in deliveries(replicas.url)),
        timeout=30,
        what="a page delivery failing against Slack",
    )
    killed = time.monotonic()
    a.stop(signal.SIGKILL)  # the leader, mid-incident, its page not yet delivered
    wait_for(lambda: role(b) == "leader", timeout=LEASE_S + 10, what="b taking over")
    assert time.monotonic() - killed < LEASE_S + 5
    assert not lab.page_messages(run_id=run_id), "Slack was down: nothing could be posted"
    fake.clear_failures()  # Slack is back
    lab = replicas.side("b")
    key = f"labbot-{run_id}-failed"
    wait_for(lambda: replicas.pd.incidents.get(key) == "triggered", timeout=40, what="level 2 by the new leader")
    wait_for(lambda: lab.page_messages(run_id=run_id), timeout=20, what="the page in the thread")
    wait_for(lambda: all(state == "sent" for _, state in deliveries(replicas.url)), timeout=30, what="all sent")
    assert [p["id"] for p in pages_of(lab, run_id)] == [page["id"]], "one incident, not two"
    assert len(lab.page_messages(run_id=run_id)) == 1
    assert len(lab.page_messages(fake.dm_channel(OWNER))) == 1
    assert len(oncall_posts(lab, page["id"])) == 1
    assert len([e for e in replicas.pd.events if e.get("dedup_key") == key and e["event_action"] == "trigger"]) == 1
    assert lease_row(replicas.url)[0].startswith("b:")
    # the escalation timer kept its schedule across the takeover: each level ESCALATE_S after the one before, late by
    # at most one tick and the lease (the time no one led), plus what a loaded machine adds to a tick
    triggered, level1, level2 = escalations(replicas.url, page["id"])
    for before, after in ((triggered, level1), (level1, level2)):
        gap = (after - before).total_seconds()
        assert ESCALATE_S - TICK_S <= gap <= ESCALATE_S + TICK_S + LEASE_S + LOAD_S, (before, after, gap)


@pytest.mark.postgresql
def test_leader_stopped_past_its_lease_is_replaced_and_follows_when_it_resumes(replicas: Replicas) -> None:
    a, b = two(replicas)
    holder_a, token_a = lease_row(replicas.url)
    assert a.proc is not None
    os.kill(a.proc.pid, signal.SIGSTOP)  # a GC pause, a frozen VM: alive, silent, holding its connections
    try:
        wait_for(lambda: role(b) == "leader", timeout=30, what="b taking over from the stopped leader")
        holder_b, token_b = lease_row(replicas.url)
        assert holder_b.startswith("b:") and token_b == token_a + 1
        lab = replicas.side("b")
        run_id = lab.launched("launch crasher", recorded=False)  # paged by the new leader while a is stopped
        wait_for(lambda: lab.page_messages(run_id=run_id), timeout=60, what="the page, by b")
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    wait_for(lambda: role(a) == "follower", timeout=30, what="a following once resumed")
    wait_for(lambda: "follows now" in a.log(), timeout=15, what="a saying it follows")
    wait_for(lambda: all(state == "sent" for _, state in deliveries(replicas.url)), timeout=30, what="all sent")
    assert lease_row(replicas.url) == (holder_b, token_b), "the resumed replica did not take the lease back"
    assert len(lab.page_messages(run_id=run_id)) == 1
    assert len(lab.page_messages(replicas.fake.dm_channel(OWNER))) == 1
    assert holder_a.startswith("a:")


@pytest.mark.postgresql
def test_a_leader_stopped_between_claiming_a_page_and_posting_it_does_not_post_it_when_it_resumes(
    replicas: Replicas,
) -> None:
    """Leader a claims the owner's DM of a page and, before posting it, is stopped (SIGSTOP) past its lease; b takes
    over, recovers the claim and posts the page; a, resumed, posts nothing: one chat.postMessage of the page to the DM.

    The stop lands between the claim and the post with no hook in labbot: the Slack notifier opens the DM
    (conversations.open) after the delivery is claimed and before chat.postMessage, and only the leader's outbox calls
    conversations.open, so the Slack fake stops a when that call arrives (then answers it: a reads the answer when it
    resumes, as after any pause)."""
    a, b = two(replicas)
    fake, dm = replicas.fake, replicas.fake.dm_channel(OWNER)
    assert a.proc is not None
    pid = a.proc.pid
    fake.when_called("conversations.open", lambda _: os.kill(pid, signal.SIGSTOP))
    lab = replicas.side("b")
    run_id = lab.launched("launch crasher", recorded=False)
    try:
        wait_for(lambda: fake.calls_to("conversations.open"), timeout=60, what="a opening the owner's DM to page")
        wait_for(lambda: role(b) == "leader", timeout=LEASE_S + 10, what="b taking over from the stopped leader")
        wait_for(lambda: lab.page_messages(dm), timeout=30, what="the page in the DM, posted by b")
        resumed = len(a.log())
    finally:
        os.kill(pid, signal.SIGCONT)
    # a's send in flight ends refused, before its post (fixed) or after it, at its record (not): either way it says so
    wait_for(lambda: re.search(r"is refused \((send|watch)\)", a.log()[resumed:]), timeout=30, what="a's send refused")
    [page] = pages_of(lab, run_id)
    posts = [
        c for c in fake.calls_to("chat.postMessage") if c.params.get("channel") == dm and page["id"] in str(c.params)
    ]
    assert len(posts) == 1, f"the page was posted {len(posts)} times to the owner's DM"
    assert fake.calls_to("conversations.history"), "b looked for a's copy before posting it"


@pytest.mark.postgresql
def test_postgresql_restarted_under_load_is_a_fast_503_and_stores_no_point_twice(replicas: Replicas) -> None:
    a, b = two(replicas)
    with a.client() as api:
        launched = api.post(
            "/runs",
            json={"job": "tiny-lm", "params": {"steps": 100000, "log_every": 1, "min_step_s": 0.02, "num_threads": 1}},
        )
        assert launched.status_code in (200, 201), launched.text
        run_id = launched.json()["run"]["id"]
        wait_for(lambda: (api.get(f"/runs/{run_id}").json()["run"]["step"] or 0) > 20, timeout=90, what="steps")
        cut = refuse_connections(replicas.url)  # the restart, as labbot's connections see it
        assert cut >= 1
        try:
            for _ in range(5):  # every request while it is away: a 503 that says so, at once
                started = time.monotonic()
                r = api.get(f"/runs/{run_id}")
                assert r.status_code == 503, r.text
                assert r.json()["error"]["code"] == "database_unavailable"
                assert time.monotonic() - started < 2.0
                assert replicas.url not in r.text
            ready = httpx.get(f"{a.url}/readyz", timeout=10)
            assert ready.status_code == 503 and ready.json()["database"] != "ok"
            assert httpx.get(f"{a.url}/healthz", timeout=10).status_code == 200  # alive all the same
            time.sleep(3)  # the outage lasts: the job's telemetry is refused and buffered meanwhile
        finally:
            refuse_connections(replicas.url, refuse=False)
        stepped = api.get(f"/runs/{run_id}").json()["run"]["step"]
        wait_for(
            lambda: api.get(f"/runs/{run_id}").json()["run"]["step"] > stepped + 20, timeout=60, what="steps again"
        )
        api.post(f"/runs/{run_id}/stop", params={"by": "test"})
    # the lease expired during the outage: whichever replica checks first leads, and only one
    wait_for(lambda: sorted([role(a), role(b)]) == ["follower", "leader"], timeout=30, what="one leader again")
    db = Database(replicas.url)
    try:
        with db.session() as s:
            rows = s.execute(
                select(MetricPoint.step, func.count())
                .where(MetricPoint.run_id == run_id, MetricPoint.name == "loss")
                .group_by(MetricPoint.step)
            ).all()
    finally:
        db.dispose()
    steps = sorted(step for step, _ in rows)
    assert all(n == 1 for _, n in rows), "no point stored twice"
    assert steps == list(range(steps[0], steps[0] + len(steps))), "no point lost across the outage"


@pytest.mark.postgresql
def test_a_hundred_launches_with_one_key_across_replicas_make_one_run_and_one_ray_job(replicas: Replicas) -> None:
    a, b = two(replicas)
    key = f"deploy-retry-{secrets.token_hex(4)}"
    token = replicas.token

    def launch(i: int) -> tuple[int, str]:
        target = (a, b)[i % 2]
        r = httpx.post(
            f"{target.url}/api/v1/runs",
            json={"job": "sleeper", "idempotency_key": key},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        return r.status_code, r.json()["run"]["id"] if r.status_code < 300 else r.text

    with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
        answers = list(pool.map(launch, range(100)))
    assert all(status in (200, 201) for status, _ in answers), [a for a in answers if a[0] >= 300][:3]
    run_ids = {run_id for _, run_id in answers}
    assert len(run_ids) == 1
    (run_id,) = run_ids
    db = Database(replicas.url)
    try:
        with db.session() as s:
            assert s.scalar(select(func.count()).select_from(Run)) == 1
    finally:
        db.dispose()
    launcher = RayLauncher(replicas.ray)
    try:
        ours = [sid for sid in launcher.jobs() if run_id in sid]
        assert len(ours) == 1, ours
    finally:
        with a.client() as api:
            api.post(f"/runs/{run_id}/stop", params={"by": "test"})
        launcher.close()


def test_a_second_replica_on_sqlite_is_refused_saying_why(tmp_path: Path, ray_head: RayConnection) -> None:
    first = Serve(tmp_path / "home", ray_address=ray_head.address, ray_token=ray_head.token).start()
    try:
        env = {**first.env, "LABBOT_PORT": str(first.port + 1 if first.port < 65000 else first.port - 1)}
        second = subprocess.run(
            [sys.executable, "-m", "labbot.bot.cli.main", "serve"], env=env, capture_output=True, text=True, timeout=120
        )
        assert second.returncode == 2, second.stderr
        assert "SQLite serves one replica" in second.stderr and "postgresql://" in second.stderr
        assert "Traceback" not in second.stderr
        assert role(first) == "leader"  # the first one is untouched (its Ray head, its lease)
    finally:
        first.stop()
