"""Compute by purpose end to end: a real `labbot serve` (watchdog, Slack threads) with Slack faked at its HTTP edge,
a real Ray head, and `[compute.training] runs = 1`.

The story: a researcher launches A (it runs), then B and C (queued, their cards say 1st and 2nd in line);
`/lab capacity` shows A using the cap and B, C queued in order; a `--no-queue` launch is refused with the numbers and
creates no run; an admin moves C ahead with `/lab priority`; labbot is stopped and started again with B and C queued
and the queue comes back in order; A is stopped and C starts at once, then C ends by itself and B starts within a
watchdog tick; each thread says when its run left the queue. A short tick (`[watchdog] tick = "1s"`) keeps it to
seconds; the rules are the ones that run with the defaults.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.slack import SlackFake
from ray.job_submission import JobSubmissionClient
from slack_driver import OWNER, SlackSide, slack_env
from support import Serve, wait_for

from labbot.training.ray_cluster import RayConnection

ADMIN = "U0ADMIN001"
TOML = f"""
[slack]
card_every = "1s"

[roles]
admins = ["{ADMIN}"]

[watchdog]
tick = "1s"

[compute.training]
runs = 1

[jobs.holder]
entrypoint = "python -c 'import sys, time; time.sleep(float(sys.argv[-1]))'"
description = "holds a training run open for SECONDS (the last argument)"
params = {{ seconds = 300 }}
"""


@pytest.fixture
def lab(tmp_path: Any, ray_head: RayConnection) -> Iterator[SlackSide]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "labbot.toml").write_text(TOML)
    fake = SlackFake(users={OWNER: "alice", ADMIN: "admin"})
    fake.start()
    env = slack_env(fake, home / "labbot.toml")
    side = SlackSide(fake, Serve(home / "state", ray_address=ray_head.address, ray_token=ray_head.token, extra_env=env))
    side.serve.start()
    try:
        yield side
        fake.check_against_spec()  # every call labbot made, before and after its restart, has the shape Slack gives
    finally:
        with side.serve.client() as api:  # nothing of the story is left holding the Ray head
            for run in api.get("/runs").json()["runs"]:
                if run["status"] not in ("succeeded", "failed", "stopped"):
                    api.post(f"/runs/{run['id']}/stop")
        side.serve.stop()
        fake.stop()


def card_text(lab: SlackSide, run_id: str) -> str:
    return json.dumps(lab.card(run_id).blocks)


def status(lab: SlackSide, run_id: str) -> str:
    return str(lab.run(run_id)["status"])


def run_ids(lab: SlackSide) -> set[str]:
    with lab.serve.client() as api:
        return {r["id"] for r in api.get("/runs", params={"limit": 500}).json()["runs"]}


def block_text(message: Any) -> str:
    return "\n".join(str(b.get("text", {}).get("text", "")) for b in message.blocks or [])


def latest_ephemeral(lab: SlackSide, user: str, words: str) -> Any:
    """The newest ephemeral message to ``user`` whose text or blocks contain ``words``, or None."""
    for m in reversed(lab.fake.ephemeral_messages(lab.ws.channel, user)):
        if words in m.text or words in json.dumps(m.blocks or []):
            return m
    return None


def test_a_launch_beyond_the_cap_queues_and_starts_when_room_frees_in_order_across_a_restart(
    lab: SlackSide, ray_head: RayConnection
) -> None:
    a = lab.launched("launch holder --name A")
    wait_for(lambda: status(lab, a) == "running", timeout=30, what="A to run on Ray")

    # B and C: over the cap of one training run, queued in the order they came, each card with its place
    b = lab.launched("launch holder --name B")
    c = lab.launched("launch holder --name C seconds=4")
    assert status(lab, b) == "queued" and status(lab, c) == "queued"
    wait_for(lambda: "1st in line for training" in card_text(lab, b), timeout=10, what="B's card: 1st in line")
    assert "not on Ray yet" in card_text(lab, b) and lab.run(b)["started_at"] is None
    wait_for(lambda: "2nd in line for training" in card_text(lab, c), timeout=10, what="C's card: 2nd in line")
    told = wait_for(lambda: latest_ephemeral(lab, OWNER, f"run `{c}` is queued"), timeout=10, what="C's queued note")
    assert "training is at 1 of 1 run" in told.text and "it waits 2nd in line" in told.text
    assert any("queued: 2nd in line for training" in m.text for m in lab.thread(c))

    # a queued run stopped (its card's Stop button) leaves the line and never reaches Ray
    e = lab.launched("launch holder --name E")
    assert status(lab, e) == "queued"
    lab.click("stop", e)
    wait_for(lambda: status(lab, e) == "stopped", timeout=10, what="E stopped while queued")
    assert "never started" in lab.run(e)["error"]

    # /lab capacity: A uses the cap; B then C wait, in that order
    assert lab.command("capacity").status_code == 200
    shown = wait_for(lambda: latest_ephemeral(lab, OWNER, "queued, in order"), timeout=10, what="/lab capacity")
    lines = block_text(shown).splitlines()
    [row] = [line for line in lines if line.startswith("training ")]
    assert re.fullmatch(rf"training +1/1 +\S+ +\S+ +2 +{OWNER} \({a}\)", row.rstrip()), lines
    queued = [line.split()[:3] for line in lines if re.match(r"\s+training \d+(st|nd|rd|th): ", line)]
    assert queued == [["training", "1st:", b], ["training", "2nd:", c]], lines

    # --no-queue while the cap is full: refused to the asker alone, with the numbers, and no run is made
    before = run_ids(lab)
    assert lab.command("launch holder --name D --no-queue").status_code == 200
    refusal = wait_for(lambda: latest_ephemeral(lab, OWNER, "not launched"), timeout=10, what="the --no-queue refusal")
    assert "training is at 1 of 1 run; this launch needs 1 CPU; 2 training runs are queued ahead of it" in refusal.text
    assert "without --no-queue it would wait 3rd in line" in refusal.text
    assert run_ids(lab) == before

    # a researcher may not reorder the line; an admin moves C ahead of B
    assert lab.command(f"priority {c} 10").status_code == 200
    no = wait_for(lambda: latest_ephemeral(lab, OWNER, "only an admin"), timeout=10, what="the refusal")
    assert f"<@{ADMIN}>" in no.text and lab.run(c)["priority"] == 0
    assert lab.command(f"priority {c} 10", user=ADMIN).status_code == 200
    moved = wait_for(lambda: latest_ephemeral(lab, ADMIN, f"run `{c}`"), timeout=10, what="the admin's answer")
    assert "priority 10: now 1st in line for training" in moved.text
    wait_for(lambda: "1st in line for training" in card_text(lab, c), timeout=10, what="C's card: 1st in line")
    wait_for(lambda: "2nd in line for training" in card_text(lab, b), timeout=10, what="B's card: 2nd in line")
    assert f"<@{ADMIN}> set the priority to 10" in card_text(lab, c)

    # labbot stops and starts again on the same home: the queue is rows, and it comes back in order
    pid = lab.serve.proc.pid if lab.serve.proc else None
    lab.serve.stop()
    lab.serve.start()  # a new process: same LABBOT_HOME, labbot.toml and port
    assert lab.serve.proc is not None and lab.serve.proc.pid != pid
    wait_for(lambda: status(lab, a) == "running", timeout=10, what="A still running after the restart")
    assert [status(lab, b), status(lab, c)] == ["queued", "queued"]
    assert [lab.run(c)["queue_position"], lab.run(b)["queue_position"]] == [1, 2]

    # A stops: its room goes to C (moved ahead) at once, B keeps waiting
    lab.click("stop", a)
    wait_for(lambda: status(lab, c) in ("pending", "running"), timeout=10, what="C admitted when A stopped")
    assert status(lab, b) == "queued" and lab.run(b)["queue_position"] == 1
    wait_for(lambda: lab.said(c, "left the queue"), timeout=10, what="C's thread to say it started")
    wait_for(lambda: "1st in line for training" in card_text(lab, b), timeout=10, what="B's card: 1st in line")

    # C ends by itself (4 s): B starts within a watchdog tick of that, and its thread says so
    wait_for(lambda: status(lab, c) == "succeeded", timeout=30, what="C to finish")
    wait_for(lambda: status(lab, b) in ("pending", "running"), timeout=5, what="B admitted within a tick of C's end")
    started = wait_for(lambda: lab.said(b, "left the queue"), timeout=10, what="B's thread to say it started")
    assert "capacity for training freed" in started.text and f"labbot-{b}-1" in started.text
    wait_for(lambda: status(lab, b) == "running", timeout=30, what="B to run on Ray")
    wait_for(lambda: f"Ray job `labbot-{b}-1`" in card_text(lab, b), timeout=10, what="B's card to name its Ray job")
    assert lab.run(c)["started_at"] < lab.run(b)["started_at"]  # in order: C, moved ahead, then B
    # A, B and C reached Ray, one at a time; E, stopped while in line, never did
    ray = JobSubmissionClient(ray_head.address, headers=dict(ray_head.headers))
    on_ray = {j.submission_id for j in ray.list_jobs() if j.submission_id and f"-{e}-" in j.submission_id}
    assert on_ray == set() and ray.get_job_info(f"labbot-{b}-1").status == "RUNNING"
