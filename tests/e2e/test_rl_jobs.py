"""RL jobs and metric alerts end to end: a real `labbot serve` (watchdog, pager, outbox) against a real Ray head and the
Slack Web API fake.

A researcher's own job declares an alert in labbot.toml and is paged by it by name, in its thread, and the page clears
when the metric recovers; the built-in `tiny-rl` with a stuck reward pages `no_signal`, with a collapsed entropy
`entropy_collapse`; crashed and restarted with `labbot restart`, it resumes RL from its checkpoint.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.slack import SlackFake
from slack_driver import OWNER, SlackSide, slack_env
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


PREWARM = ("--steps", "1", "--num_threads", "1")
# the module's first test also waits for the warm-up the fixture trains when pytest's cache holds none for this code
# (1,000 to 3,000 steps on one thread: a minute alone, several beside the other test workers)
pytestmark = pytest.mark.timeout(900)


class RLLab(SlackSide):
    warmup_dir: Path

    def tiny_rl(self, words: str) -> str:
        """Launch tiny-rl from Slack, its warm-up read from the cache the fixture filled (or found filled)."""
        return self.launched(f"launch tiny-rl warmup_dir={self.warmup_dir} num_threads=1 {words}")


def warmup_cache(config: pytest.Config, factory: pytest.TempPathFactory) -> Path:
    """Where the warm-up is kept: pytest's cache folder between sessions (as the eval tests keep their wheels and
    venvs), in a folder named by a hash of the reference jobs' code and torch's version, so a change to either trains
    it again (the job's own cache key covers only the config); a temporary folder without pytest's cache."""
    cache = getattr(config, "cache", None)
    if cache is None:
        return factory.mktemp("warmup")
    jobs = Path(__file__).resolve().parents[2] / "training" / "jobs"
    code = hashlib.sha256(importlib.metadata.version("torch").encode())
    for source in sorted(jobs.rglob("*.py")):
        code.update(source.relative_to(jobs).as_posix().encode() + b"\0" + source.read_bytes())
    name = f"labbot-tiny-rl-warmup-{code.hexdigest()[:12]}"
    root = Path(cache.mkdir(name))
    for stale in root.parent.glob("labbot-tiny-rl-warmup-*"):  # the warm-ups of code that has changed since
        if stale != root:
            shutil.rmtree(stale, ignore_errors=True)
    return root


@pytest.fixture(scope="module")
def lab(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, ray_head: RayConnection
) -> Iterator[RLLab]:
    home = tmp_path_factory.mktemp("rl")
    warmup_dir = warmup_cache(request.config, tmp_path_factory)
    # the warm-up every tiny-rl run here starts from, trained once (it is cached under its config's hash), and kept
    # for the next session: training it is a minute alone, several beside the other test workers
    subprocess.run(
        # one torch thread: next to the other test workers, two threads each would oversubscribe the cores
        [sys.executable, "-m", "labbot.training.jobs.tiny_rl", *PREWARM, "--warmup_dir", str(warmup_dir)],
        env={"PATH": "/usr/bin:/bin", "LABBOT_CHECKPOINT_DIR": str(home / "prewarm"), "HOME": str(home)},
        check=True,
        capture_output=True,
        timeout=600,
    )
    job_dir = home / "own-rl"
    job_dir.mkdir()
    (job_dir / "own_rl.py").write_text(OWN_JOB)
    (home / "labbot.toml").write_text(toml(job_dir))
    fake = SlackFake(channels={"C0LAB00001": "lab"}, users={OWNER: "alice"})
    fake.start()
    env = slack_env(fake, home / "labbot.toml")
    serve = Serve(home / "state", ray_address=ray_head.address, ray_token=ray_head.token, extra_env=env).start()
    side = RLLab(fake, serve)
    side.warmup_dir = warmup_dir
    try:
        yield side
        fake.check_against_spec()
    finally:
        serve.stop()
        fake.stop()


def page_of(lab: RLLab, run_id: str, kind: str, *, state: str | None = None) -> dict[str, Any] | None:
    for p in lab.pages(all="1", run=run_id):
        if p["kind"] == kind and (state is None or p["state"] == state):
            return p
    return None


def stop(lab: RLLab, run_id: str) -> None:
    with lab.serve.client() as api:
        api.post(f"/runs/{run_id}/stop", params={"by": "test"})


def test_a_researchers_own_job_is_paged_by_the_alert_it_declared_and_the_page_clears(lab: RLLab) -> None:
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


def test_tiny_rl_trains_to_a_rising_pass_rate_with_its_reward_and_pass_rate_plotted_in_the_thread(lab: RLLab) -> None:
    run_id = lab.tiny_rl("algo=sdpo steps=60 eval_every=10")
    wait_for(lambda: lab.run(run_id)["status"] == "succeeded", timeout=300, interval=1, what="tiny-rl to finish")
    with lab.serve.client() as api:
        passes = api.get(f"/runs/{run_id}/metrics/pass_rate").json()["points"]
        rewards = api.get(f"/runs/{run_id}/metrics/reward").json()["points"]
    assert len(rewards) >= 60 and passes[-1][1] > passes[0][1], f"pass rate did not rise: {passes}"
    run = lab.run(run_id)
    assert run["headline"] == "pass_rate" and run["plot"][:2] == ["reward", "pass_rate"]
    assert "pass_rate below 0.5 for 2m (page, as pass_rate-below)" in run["alerts"], "the alert tiny-rl ships"
    card = lab.card(run_id)
    assert "pass_rate" in str(card.blocks), "the card shows the job's headline metric"
    plots = wait_for(
        lambda: [f for m in lab.thread(run_id) for f in (m.files or []) if f.get("name", "").endswith(".png")],
        timeout=30,
        what="the run's plot in its thread",
    )
    assert plots
    assert lab.pages(run=run_id) == [], "a healthy RL run pages nobody"


def test_a_stuck_reward_is_paged_as_no_signal_in_the_thread(lab: RLLab) -> None:
    run_id = lab.tiny_rl("steps=100000 log_every=1 reward_stuck_at_step=3 min_step_s=0.05")
    try:
        page = wait_for(lambda: page_of(lab, run_id, "no_signal"), timeout=240, what="a no_signal page")
        assert "no learning signal" in page["summary"] and "frac_reward_zero_std" in page["summary"]
        posted = wait_for(lambda: lab.page_messages(run_id=run_id), timeout=15, what="the page in the thread")
        assert "*no_signal*" in str(posted[0].blocks)
    finally:
        stop(lab, run_id)


def test_a_collapsed_entropy_is_paged_as_entropy_collapse(lab: RLLab) -> None:
    run_id = lab.tiny_rl("steps=100000 log_every=1 entropy_collapse_at_step=3 min_step_s=0.05")
    try:
        page = wait_for(lambda: page_of(lab, run_id, "entropy_collapse"), timeout=240, what="an entropy page")
        assert "entropy" in page["summary"] and "stopped exploring" in page["summary"]
    finally:
        stop(lab, run_id)


def test_a_crashed_rl_run_restarted_by_hand_resumes_from_its_checkpoint(lab: RLLab) -> None:
    run_id = lab.tiny_rl("steps=40 checkpoint_every=10 crash_at_step=25 --max-restarts 0")
    wait_for(lambda: page_of(lab, run_id, "failed"), timeout=240, what="the crash paged")
    assert lab.run(run_id)["checkpoint_step"] == 20
    restarted = lab.serve.cli("restart", run_id)
    assert restarted.returncode == 0, restarted.stderr
    wait_for(lambda: lab.run(run_id)["status"] == "succeeded", timeout=240, interval=1, what="attempt 2 to finish")
    with lab.serve.client() as api:
        steps = [s for s, _ in api.get(f"/runs/{run_id}/metrics/reward").json()["points"]]
    # attempt 1 reported steps 1..24; attempt 2 resumed RL at step 21 (after checkpoint 20), not from the warm-up
    assert steps.count(1) == 1 and steps.count(21) == 2 and steps.count(25) == 1 and max(steps) == 40
    assert lab.run(run_id)["attempt"] == 2


def test_a_collapse_with_a_remedy_is_rolled_back_and_cured_once_across_a_kill_9_without_a_page(lab: RLLab) -> None:
    """The last of the module: it kills the module's `labbot serve` and starts it again."""
    run_id = lab.tiny_rl(
        "steps=60 checkpoint_every=10 eval_every=10 log_every=1 entropy_collapse_at_step=35 min_step_s=0.15"
        " --remedy 'entropy_collapse: temperature += 1.0; max 1'"
    )
    note = wait_for(lambda: lab.said(run_id, "*entropy_collapse*"), timeout=300, what="the remedy said in the thread")
    assert "checkpoint step 30" in note.text and "`temperature` 1 → 2" in note.text and "entropy:" in note.text
    # labbot dies between stopping attempt 1 and starting attempt 2 (the remedy's backoff), and comes back
    lab.serve.stop(signal.SIGKILL)
    lab.serve.start()
    wait_for(lambda: lab.run(run_id)["status"] == "succeeded", timeout=300, interval=1, what="attempt 2 to finish")
    run = lab.run(run_id)
    assert run["attempt"] == 2 and len(run["lineage"]) == 1, "exactly one remedial attempt"
    [step] = run["lineage"]
    assert (step["condition"], step["checkpoint_step"]) == ("entropy_collapse", 30)
    assert 35 <= step["signal_step"] <= 40 and run["params"]["temperature"] == 2.0
    with lab.serve.client() as api:
        passes = dict(api.get(f"/runs/{run_id}/metrics/pass_rate").json()["points"])
        entropy = api.get(f"/runs/{run_id}/metrics/entropy").json()["points"]
    assert passes[60] >= 0.9, f"the cured run reaches the target: {passes}"
    assert min(v for s, v in entropy if s > 50) > 0.02, "attempt 2 explores past the step the collapse came at"
    assert lab.pages(run=run_id) == [], "cured without a page"
    assert run["remedies"] == ["entropy_collapse: temperature += 1; max 1"]
