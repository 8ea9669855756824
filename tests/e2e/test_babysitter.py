"""The babysitter end to end: a real `labbot serve` (watchdog, pager, outbox) against a real Ray head, the Slack Web
API fake and the PagerDuty fake; real jobs that hang, crash, diverge, wait for GPUs — and one SIGSTOPped for real.

Short thresholds (`--stall-after 6s`, escalation after 4 s, a 1 s tick) keep each story to seconds; the rules
themselves are the same ones that run with the defaults.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psutil
import pytest
from fakes.pagerduty import ROUTING_KEY, PagerDutyFake
from fakes.slack import SlackFake
from slack_driver import OWNER, SlackSide, slack_env
from support import SMALL, Serve, wait_for

from labbot.training.ray_cluster import RayConnection

ONCALL = "C0ONCALL01"
TOML = f"""
[slack]
card_every = "2s"
progress_every = "1h"

[watchdog]
tick = "1s"
restart_backoff = "1s"
startup_grace = "90s"

[paging]
escalate_after = "4s"
renotify_every = "0s"
flap_window = "1m"
oncall_channel = "{ONCALL}"

[jobs.crasher]
entrypoint = "python -c 'import sys; print(\\"boom: out of memory\\", file=sys.stderr); sys.exit(3)'"
description = "fails at once, every attempt"
max_restarts = 1
"""


class DeadmanCheck(ThreadingHTTPServer):
    """An external heartbeat check (healthchecks.io-style): counts the pings it gets."""

    def __init__(self) -> None:
        self.pings: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(handler) -> None:
                self.pings.append(handler.path)
                handler.send_response(200)
                handler.end_headers()
                handler.wfile.write(b"OK")

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/ping/secret-uuid"


class Babysat(SlackSide):
    def __init__(self, fake: SlackFake, serve: Serve, pd: PagerDutyFake, deadman: DeadmanCheck) -> None:
        super().__init__(fake, serve)
        self.pd = pd
        self.deadman = deadman

    def page_of(self, run_id: str, kind: str, *, state: str | None = None) -> dict[str, Any] | None:
        for p in self.pages(all="1", run=run_id):
            if p["kind"] == kind and (state is None or p["state"] == state):
                return p
        return None

    def stop_run(self, run_id: str) -> None:
        with self.serve.client() as api:
            api.post(f"/runs/{run_id}/stop", params={"by": "test"})


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, ray_head: RayConnection) -> Iterator[Babysat]:
    home = tmp_path_factory.mktemp("babysitter")
    deadman = DeadmanCheck()
    (home / "labbot.toml").write_text(TOML + f'\n[deadman]\nurl = "{deadman.url}"\nevery = "1s"\n')
    fake = SlackFake(channels={"C0LAB00001": "lab", ONCALL: "oncall"}, users={OWNER: "alice"})
    fake.start()
    pd = PagerDutyFake().__enter__()
    env = {
        **slack_env(fake, home / "labbot.toml"),
        "PAGERDUTY_ROUTING_KEY": ROUTING_KEY,
        "PAGERDUTY_EVENTS_URL": pd.url,
    }
    serve = Serve(home / "state", ray_address=ray_head.address, ray_token=ray_head.token, extra_env=env).start()
    side = Babysat(fake, serve, pd, deadman)
    try:
        yield side
        fake.check_against_spec()
    finally:
        serve.stop()
        fake.stop()
        pd.__exit__(None, None, None)
        deadman.shutdown()


def job_process(run_id: str) -> psutil.Process:
    """The training process of a run, found as the job sees itself: LABBOT_RUN_ID in its environment."""

    def find() -> psutil.Process | None:
        for proc in psutil.process_iter(["cmdline"]):
            cmdline = proc.info["cmdline"] or []
            try:
                # the python process itself, not the shell Ray's job supervisor starts it with
                if (
                    cmdline[1:3] == ["-m", "labbot.training.jobs.tiny_lm"]
                    and proc.environ().get("LABBOT_RUN_ID") == run_id
                ):
                    return proc
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return None

    return wait_for(find, timeout=60, what=f"the training process of run {run_id}")


def test_sigstopped_job_is_paged_silent_and_resolves_on_sigcont(lab: Babysat) -> None:
    run_id = lab.launched(
        f"launch tiny-lm steps=100000 log_every=1 num_threads=1 min_step_s=0.05 {SMALL} --stall-after 6s"
    )
    wait_for(lambda: (lab.run(run_id)["step"] or 0) > 3, timeout=90, what="the run's first steps")
    proc = job_process(run_id)
    os.kill(proc.pid, signal.SIGSTOP)  # a real hang: the process, its telemetry thread included, stops
    try:
        page = wait_for(lambda: lab.page_of(run_id, "silent", state="triggered"), timeout=30, what="a silent page")
        assert page["state"] == "triggered" and "no telemetry" in page["summary"]
        posted = wait_for(lambda: lab.page_messages(run_id=run_id), timeout=15, what="the page in the thread")
        assert f"<@{OWNER}>" in posted[0].text
        buttons = {el["action_id"] for b in posted[0].blocks if b["type"] == "actions" for el in b["elements"]}
        assert buttons == {"page_ack", "page_resolve", "run_stop"}
        dm = lab.fake.dm_channel(OWNER)
        assert wait_for(lambda: lab.page_messages(dm), timeout=15, what="the owner's DM")
        assert lab.run(run_id)["status"] == "stalled"
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    wait_for(lambda: lab.page_of(run_id, "silent", state="resolved"), timeout=30, what="the page auto-resolved")
    assert lab.page_of(run_id, "silent", state="resolved")["resolved_by"] == "labbot"  # type: ignore[index]
    wait_for(
        lambda: any("cleared" in m.text and "telemetry resumed" in m.text for m in lab.thread(run_id)),
        timeout=15,
        what="the resolution note in the thread",
    )
    wait_for(lambda: lab.run(run_id)["status"] == "running", timeout=15, what="the run back to running")
    lab.stop_run(run_id)


def test_hang_escalates_to_oncall_then_pagerduty_and_ack_reaches_both(lab: Babysat) -> None:
    run_id = lab.launched(
        f"launch tiny-lm steps=100000 log_every=1 hang_at_step=8 num_threads=1 min_step_s=0.05 {SMALL} --stall-after 5s"
    )
    page = wait_for(lambda: lab.page_of(run_id, "hung"), timeout=90, what="a hung page")
    assert "heartbeats" in page["summary"]
    oncall = wait_for(
        lambda: [m for m in lab.page_messages(ONCALL) if page["id"] in str(m.blocks)],
        timeout=20,
        what="level 1: the on-call channel",
    )
    assert "Escalated" in str(oncall[0].blocks)
    key = f"labbot-{run_id}-hung"
    wait_for(lambda: lab.pd.incidents.get(key) == "triggered", timeout=20, what="level 2: PagerDuty triggered")
    assert lab.page_of(run_id, "hung")["escalation_level"] == 2  # type: ignore[index]

    message = lab.page_messages(run_id=run_id)[0]
    assert lab.click_page("ack", page["id"], message).status_code == 200
    wait_for(lambda: lab.pd.incidents.get(key) == "acknowledged", timeout=20, what="PagerDuty acknowledged")
    acked = lab.page_of(run_id, "hung")
    assert acked is not None and acked["state"] == "acknowledged" and acked["acknowledged_by"] == OWNER

    def shows_ack() -> bool:
        m = lab.fake.message(message.channel, message.ts)
        return m is not None and "acknowledged by" in str(m.blocks) and "page_ack" not in str(m.blocks)

    wait_for(shows_ack, timeout=15, what="the page message re-rendered as acknowledged")
    triggers = [e for e in lab.pd.events if e["dedup_key"] == key and e["event_action"] == "trigger"]
    assert len(triggers) == 1, "PagerDuty is triggered once per incident"

    lab.stop_run(run_id)  # the fix: the page resolves itself, and PagerDuty hears of it
    wait_for(lambda: lab.pd.incidents.get(key) == "resolved", timeout=20, what="PagerDuty resolved")
    resolved = lab.page_of(run_id, "hung")
    assert resolved is not None and resolved["state"] == "resolved"
    cli = lab.serve.cli("pages", "--all", "--json")
    assert cli.returncode == 0 and any(p["id"] == page["id"] for p in json.loads(cli.stdout))


def test_crash_is_restarted_from_the_checkpoint_not_step_zero(lab: Babysat) -> None:
    run_id = lab.launched("launch tiny-lm steps=90 checkpoint_every=25 log_every=5 crash_at_step=60 num_threads=1")
    wait_for(lambda: lab.run(run_id)["status"] == "succeeded", timeout=150, interval=0.5, what="the run to succeed")
    run = lab.run(run_id)
    assert run["attempt"] == 2
    texts = [m.text for m in lab.thread(run_id)]
    note = next(t for t in texts if ":recycle:" in t)
    assert "attempt 1 failed" in note and "checkpoint step 50" in note and "automatic restart 1 of 2" in note
    with lab.serve.client() as api:
        points = api.get(f"/runs/{run_id}/metrics/loss").json()["points"]
    assert points[-1][0] == 90
    assert lab.page_of(run_id, "failed") is None, "a restart that works pages nobody"
    # attempt 2 started at the checkpoint: the loss curve has no second step 5
    steps = [s for s, _ in points]
    assert steps.count(5) == 1 and steps.count(55) == 2


def test_nan_loss_is_a_diverged_page(lab: Babysat) -> None:
    run_id = lab.launched(
        f"launch tiny-lm steps=100000 log_every=1 nan_at_step=10 num_threads=1 min_step_s=0.05 {SMALL}"
    )
    page = wait_for(lambda: lab.page_of(run_id, "diverged"), timeout=90, what="a diverged page")
    assert "NaN" in page["summary"]
    acked = lab.serve.cli("ack", page["id"], "--json")  # from a terminal, through /api/v1
    assert acked.returncode == 0 and json.loads(acked.stdout)["state"] == "acknowledged"
    unknown = lab.serve.cli("ack", "pnope1")
    assert unknown.returncode == 2 and "unknown page" in unknown.stderr
    lab.stop_run(run_id)
    wait_for(lambda: lab.page_of(run_id, "diverged", state="resolved"), timeout=20, what="resolved by the stop")


def test_a_gpu_job_on_a_cpu_cluster_is_a_pending_page(lab: Babysat) -> None:
    run_id = lab.launched("launch tiny-lm --gpus 1 --pending-after 3s")
    page = wait_for(lambda: lab.page_of(run_id, "pending"), timeout=30, what="a pending page")
    assert "pending for" in page["summary"]
    assert lab.run(run_id)["status"] == "pending"
    lab.stop_run(run_id)  # Ray's stop does nothing to a PENDING job; labbot keeps at it
    wait_for(lambda: lab.page_of(run_id, "pending", state="resolved"), timeout=20, what="resolved by the stop")


def test_a_run_failing_after_its_restarts_pages_with_the_log_tail(lab: Babysat) -> None:
    run_id = lab.launched("launch crasher")
    page = wait_for(lambda: lab.page_of(run_id, "failed"), timeout=60, what="a failed page")
    assert "after 1 automatic restart" in page["summary"]
    assert lab.run(run_id)["attempt"] == 2 and lab.run(run_id)["status"] == "failed"
    assert "boom: out of memory" in page["detail"].get("log_tail", "")
    texts = [m.text for m in lab.thread(run_id)]
    assert any("attempt 1 failed" in t for t in texts)


def test_the_dead_man_switch_pings_while_labbot_lives(lab: Babysat) -> None:
    wait_for(lambda: len(lab.deadman.pings) >= 2, timeout=15, what="two dead-man pings")
    assert set(lab.deadman.pings) == {"/ping/secret-uuid"}
    assert "secret-uuid" not in lab.serve.log(), "the check's URL holds a secret: never logged"
