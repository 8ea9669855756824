"""The pager when things around it break: labbot itself killed -9 mid-incident while Slack is down, and Ray's
dashboard killed under a running job. Real `labbot serve` processes, real Ray heads, the Slack and PagerDuty fakes."""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from fakes.pagerduty import ROUTING_KEY, PagerDutyFake
from fakes.slack import SlackFake
from slack_driver import OWNER, SlackSide, slack_env
from support import CRASHER_AND_SLEEPER_TOML, Serve, wait_for

from labbot.training.ray_cluster import EmbeddedRayHead, RayConnection

ONCALL = "C0ONCALL01"


def _toml(extra: str = "") -> str:
    return f"""
[slack]
card_every = "2s"
progress_every = "1h"

[watchdog]
tick = "1s"
infra_after = "3s"

[paging]
escalate_after = "5s"
renotify_every = "0s"
oncall_channel = "{ONCALL}"

{CRASHER_AND_SLEEPER_TOML}{extra}"""


@pytest.fixture
def slack_and_pd() -> Iterator[tuple[SlackFake, PagerDutyFake]]:
    fake = SlackFake(channels={"C0LAB00001": "lab", ONCALL: "oncall"}, users={OWNER: "alice"})
    fake.start()
    with PagerDutyFake() as pd:
        try:
            yield fake, pd
        finally:
            fake.stop()


def _serve(home: Path, fake: SlackFake, pd: PagerDutyFake, ray: RayConnection) -> Serve:
    home.mkdir(parents=True, exist_ok=True)
    (home / "labbot.toml").write_text(_toml())
    env = {
        **slack_env(fake, home / "labbot.toml"),
        "PAGERDUTY_ROUTING_KEY": ROUTING_KEY,
        "PAGERDUTY_EVENTS_URL": pd.url,
    }
    return Serve(home / "state", ray_address=ray.address, ray_token=ray.token, extra_env=env)


def _deliveries(home: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(home / "state" / "labbot.db") as db:
        return list(db.execute("SELECT key, state, attempts FROM deliveries ORDER BY id"))


def test_kill_9_mid_incident_loses_no_page_and_duplicates_none(
    tmp_path: Path, ray_head: RayConnection, slack_and_pd: tuple[SlackFake, PagerDutyFake]
) -> None:
    fake, pd = slack_and_pd
    serve = _serve(tmp_path / "home", fake, pd, ray_head).start()
    lab = SlackSide(fake, serve)
    try:
        run_id = lab.launched("launch crasher", recorded=False)  # Slack goes down before the crasher can page
        fake.fail_next(500, on="chat.postMessage", times=100_000)  # Slack is down from here on
        fake.fail_next(500, on="conversations.open", times=100_000)
        page = wait_for(lambda: lab.pages(run=run_id), timeout=60, what="the failed page")[0]
        wait_for(
            lambda: any(state == "pending" and attempts >= 1 for _, state, attempts in _deliveries(tmp_path / "home")),
            timeout=30,
            what="a page delivery failing against Slack",
        )
        serve.stop(signal.SIGKILL)  # mid-incident, with the page not yet delivered
    finally:
        serve.stop()
    assert not lab.page_messages(run_id=run_id), "Slack was down: nothing could be posted"

    serve = _serve(tmp_path / "home", fake, pd, ray_head).start()
    lab = SlackSide(fake, serve)
    try:
        fake.clear_failures()  # Slack is back
        key = f"labbot-{run_id}-failed"
        # escalation timers resumed from the database: level 1 (on-call) then level 2 (PagerDuty)
        wait_for(lambda: pd.incidents.get(key) == "triggered", timeout=40, what="level 2 after the restart")
        wait_for(lambda: lab.page_messages(run_id=run_id), timeout=20, what="the page in the thread")
        wait_for(lambda: all(state == "sent" for _, state, _ in _deliveries(tmp_path / "home")), timeout=20)
        assert [p["id"] for p in lab.pages(all="1", run=run_id)] == [page["id"]], "one incident, not two"
        assert len(lab.page_messages(run_id=run_id)) == 1
        assert len(lab.page_messages(fake.dm_channel(OWNER))) == 1
        assert len([m for m in lab.page_messages(ONCALL) if page["id"] in str(m.blocks)]) == 1
        assert len([e for e in pd.events if e.get("dedup_key") == key and e["event_action"] == "trigger"]) == 1
    finally:
        serve.stop()


def _dashboard_process(temp_dir: Path) -> psutil.Process | None:
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "dashboard/dashboard.py" in cmdline and str(temp_dir) in cmdline:
            return proc
    return None


def test_ray_dashboard_killed_is_an_infra_page_and_runs_are_not_failed(
    tmp_path: Path, slack_and_pd: tuple[SlackFake, PagerDutyFake]
) -> None:
    fake, pd = slack_and_pd
    head = EmbeddedRayHead(tmp_path / "ray-home")
    ray = head.ensure()
    serve = _serve(tmp_path / "home", fake, pd, ray)
    try:  # from here: a serve that does not come up must not leave this test's own Ray head running
        serve.start()
        lab = SlackSide(fake, serve)
        run_id = lab.launched("launch sleeper")
        wait_for(lambda: lab.run(run_id)["status"] == "running", timeout=60, what="the run to start")
        dashboard = wait_for(lambda: _dashboard_process(head.temp_dir), timeout=10, what="Ray's dashboard process")
        dashboard.kill()
        page = wait_for(
            lambda: next((p for p in lab.pages() if p["kind"] == "infra"), None), timeout=30, what="an infra page"
        )
        assert page["run_id"] is None and "has not answered" in page["summary"]
        oncall = wait_for(lambda: lab.page_messages(ONCALL), timeout=20, what="the infra page in the on-call channel")
        assert "Ray cluster" in oncall[0].text or "the Ray cluster" in str(oncall[0].blocks)
        assert lab.run(run_id)["status"] == "running", "the cluster is in trouble, not the run: it is not failed"
    finally:
        serve.stop()
        head.stop()
