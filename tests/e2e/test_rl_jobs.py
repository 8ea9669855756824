"""RL jobs and metric alerts end to end: a real `labbot serve` (watchdog, pager, outbox) against a real Ray head and the
Slack Web API fake.

A researcher's own job declares an alert in labbot.toml and is paged by it by name, in its thread, and the page clears
when the metric recovers; the built-in `tiny-rl` with a stuck reward pages `no_signal`, with a collapsed entropy
`entropy_collapse`; crashed and restarted with `labbot restart`, it resumes RL from its checkpoint.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.slack import SlackFake
from slack_driver import OWNER, SECRET, SlackSide
from support import Serve, wait_for

from labbot.training.ray_cluster import RayConnection

OWN_JOB = textwrap.dedent(
    """\
    # A researcher's RL job, as far as labbot can tell: its pass rate is low for a while, then recovers.
    import time

    from labbot_client import telemetry

    telemetry.init()
    telemetry.phase("rollout")
    for step in range(1, 100_000):
        telemetry.log(step, pass_rate=0.05 if step <= 80 else 0.6, reward=0.1 * (step % 3))
        time.sleep(0.1)
    """
)


def toml(job_dir: Path) -> str:
    return f"""
[slack]
card_every = "2s"
progress_every = "1h"

[watchdog]
tick = "1s"
startup_grace = "90s"

[paging]
escalate_after = "1h"
renotify_every = "0s"
flap_window = "1s"

[jobs.own-rl]
entrypoint = "python own_rl.py"
working_dir = "{job_dir}"
description = "a researcher's RL job that reports pass_rate and reward"
plot = ["reward", "pass_rate"]

[[jobs.own-rl.alerts]]
metric = "pass_rate"
condition = "below"
threshold = 0.2
for = "3s"
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, ray_head: RayConnection) -> Iterator[SlackSide]:
    home = tmp_path_factory.mktemp("rl")
    job_dir = home / "own-rl"
    job_dir.mkdir()
    (job_dir / "own_rl.py").write_text(OWN_JOB)
    (home / "labbot.toml").write_text(toml(job_dir))
    fake = SlackFake(channels={"C0LAB00001": "lab"}, users={OWNER: "alice"})
    url = fake.start()
    env = {
        "SLACK_BOT_TOKEN": fake.bot_token,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": url,
        "LABBOT_CONFIG": str(home / "labbot.toml"),
    }
    serve = Serve(home / "state", ray_address=ray_head.address, ray_token=ray_head.token, extra_env=env).start()
    side = SlackSide(fake, serve)
    try:
        yield side
        fake.check_against_spec()
    finally:
        serve.stop()
        fake.stop()


def page_of(lab: SlackSide, run_id: str, kind: str, *, state: str | None = None) -> dict[str, Any] | None:
    for p in lab.pages(all="1", run=run_id):
        if p["kind"] == kind and (state is None or p["state"] == state):
            return p
    return None


def stop(lab: SlackSide, run_id: str) -> None:
    with lab.serve.client() as api:
        api.post(f"/runs/{run_id}/stop", params={"by": "test"})


def test_a_researchers_own_job_is_paged_by_the_alert_it_declared_and_the_page_clears(lab: SlackSide) -> None:
    run_id = lab.launched("launch own-rl")
    try:
        page = wait_for(lambda: page_of(lab, run_id, "metric"), timeout=90, what="the declared alert's page")
        assert page["detail"]["alert"] == "pass_rate-below"
        assert page["summary"].startswith("alert pass_rate-below: pass_rate 0.05 is below 0.2")
        assert page["key"] == f"labbot-{run_id}-metric:pass_rate-below"
        posted = wait_for(lambda: lab.page_messages(run_id=run_id), timeout=15, what="the page in the thread")
        assert "*metric pass_rate-below*" in str(posted[0].blocks) and f"<@{OWNER}>" in posted[0].text
        wait_for(
            lambda: page_of(lab, run_id, "metric", state="resolved"), timeout=60, what="cleared when pass_rate is back"
        )
        wait_for(lambda: lab.said(run_id, "*metric pass_rate-below* cleared"), timeout=15, what="the clearing note")
        assert lab.run(run_id)["headline"] == "reward", "the card follows the job's plot"
    finally:
        stop(lab, run_id)
