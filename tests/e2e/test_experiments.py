"""An experiment end to end: a real `labbot serve` with `[compute.training] runs = 3` and Slack faked at its HTTP
edge, the session's Ray head. A researcher types `/lab sweep tiny-lm …` (TPE with ASHA pruning, 12 trials, 5 at a
time: 3 on Ray, 2 in the compute queue); labbot is killed with SIGKILL while 3 trials run and 2 are queued, and
started again: the experiment goes on and ends with 12 trials in all, every trial one run and every run one trial, no
trial launched twice, the queue admitted in its order, pruned trials stopped within a tick of the decision, the
study's records agreeing with labbot's — and the researcher reads the answer in the experiment's thread (the card
done, the ranking with the verdict, the two plots, each posted once across the restart). Then two replicas on
PostgreSQL, the leader killed mid-experiment: every trial launched once."""

from __future__ import annotations

import re
import secrets
import signal
from collections.abc import Iterator
from typing import Any

import httpx
import optuna
import pytest
from databases import create_database, drop_database, require_postgresql
from fakes.slack import SlackFake
from ray.job_submission import JobSubmissionClient
from slack_driver import OWNER, SlackSide, slack_env
from support import Serve, wait_for

from labbot.storage.db import Database
from labbot.training.ray_cluster import RayConnection

TICK_S = 1.0
TOML = f"""
[slack]
card_every = "1s"

[watchdog]
tick = "{TICK_S:g}s"

[compute.training]
runs = 3
"""


SLASH = (
    "sweep tiny-lm lr=loguniform(1e-4,3e-1) n_embd=16,32 steps=30 log_every=3 checkpoint_every=15 n_layer=1 n_head=2 "
    "batch_size=8 block_size=32 num_threads=1 min_step_s=0.15 --metric loss --trials 12 --concurrency 5 "
    "--search tpe --prune asha --search-seed 3"
)


@pytest.fixture
def slack(tmp_path: Any, ray_head: RayConnection) -> Iterator[SlackSide]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "labbot.toml").write_text(TOML)
    fake = SlackFake(users={OWNER: "alice"})
    fake.start()
    serve = Serve(home / "state", ray_address=ray_head.address, ray_token=ray_head.token,
                  extra_env=slack_env(fake, home / "labbot.toml"))  # fmt: skip
    serve.start()
    try:
        yield SlackSide(fake, serve)
        fake.check_against_spec()  # every call labbot made, before and after its kill, has the shape Slack gives
    finally:
        serve.stop()
        fake.stop()


def doc_posted(fake: SlackFake, ts: str) -> bool:
    return sum(len(m.files or []) for m in fake.messages(fake.default_channel, thread_ts=ts)) >= 2


def experiment(serve: Serve, exp_id: str) -> dict[str, Any]:
    with serve.client() as api:
        doc: dict[str, Any] = api.get(f"/experiments/{exp_id}").json()["experiment"]
        return doc


def test_a_sweep_from_slack_survives_a_kill_and_ends_with_every_trial_run_once(
    slack: SlackSide, ray_head: RayConnection
) -> None:
    serve, fake = slack.serve, slack.fake
    assert slack.command(SLASH).status_code == 200
    card = wait_for(lambda: next(iter(fake.messages(fake.default_channel)), None), timeout=30, what="the card")
    exp_id = re.search(r"experiment `(x[a-z0-9]+)`", card.blocks[0]["text"]["text"])[1]  # type: ignore[index]

    def three_running_two_queued() -> bool:
        c = experiment(serve, exp_id)["counts"]
        return c["running"] == 3 and c["queued"] == 2

    wait_for(three_running_two_queued, timeout=120, what="3 trials running and 2 queued")
    serve.stop(signal.SIGKILL)  # no shutdown of any kind: the runs go on on Ray, the queue is rows
    serve.start()
    wait_for(lambda: experiment(serve, exp_id)["status"] == "done", timeout=400, what="the experiment to end")
    doc = experiment(serve, exp_id)

    # 12 trials in all; every trial one run, every run one trial; nothing launched twice
    assert len(doc["trials"]) == 12 and sorted(t["number"] for t in doc["trials"]) == list(range(12))
    db = Database(f"sqlite:///{serve.home / 'labbot.db'}")
    try:
        with db.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT id, status, error, queued_at, attempt_started_at, ended_at, config FROM runs "
                "WHERE experiment_id = ?",
                (exp_id,),
            ).all()
    finally:
        db.dispose()
    assert len(rows) == 12
    assert sorted(r[0] for r in rows) == sorted(run["id"] for t in doc["trials"] for run in t["runs"])
    jobs = JobSubmissionClient(ray_head.address, headers=dict(ray_head.headers)).list_jobs()
    ours = {f"labbot-{r[0]}-" for r in rows}
    submitted = [j.submission_id for j in jobs if (j.submission_id or "")[:-1] in ours]
    assert len(submitted) == len(set(submitted)) == 12  # one Ray job each (no restarts were needed)
    # the queue admitted in its order: runs that waited were submitted in the order they were queued
    waited = sorted((r for r in rows if r[3] is not None and r[4] is not None), key=lambda r: r[3])
    assert len(waited) >= 2
    assert [r[4] for r in waited] == sorted(r[4] for r in waited)
    # ASHA pruned some, and their runs were stopped in the tick that decided it
    pruned = [t for t in doc["trials"] if t["status"] == "pruned"]
    assert pruned, [t["status"] for t in doc["trials"]]
    client = JobSubmissionClient(ray_head.address, headers=dict(ray_head.headers))
    for t in pruned:
        [run] = [r for r in rows if r[0] == t["runs"][0]["id"]]
        # stopped in the tick that pruned it (its error says so); a job that reached its last step before the stop
        # landed ends succeeded on Ray, and the watchdog says so of the run (as of any run stopped too late)
        assert run[1] in ("stopped", "succeeded") and "pruned by asha" in run[2], run
        # Ray was told, not only the database: the job ends (tiny-lm checkpoints on SIGTERM, then exits)
        sid = f"labbot-{run[0]}-1"
        wait_for(lambda sid=sid: client.get_job_status(sid).value in ("STOPPED", "SUCCEEDED"), timeout=60,
                 what=f"{sid} to end on Ray")  # fmt: skip
    # the study agrees with labbot on each trial
    study = optuna.load_study(study_name=doc["study"], storage=f"sqlite:///{serve.home / 'labbot.db'}")
    states = {t.number: t.state.name for t in study.get_trials(deepcopy=False)}
    expected = {"done": "COMPLETE", "pruned": "PRUNED", "failed": "FAIL", "stopped": "FAIL"}
    assert states == {t["number"]: expected[t["status"]] for t in doc["trials"]}
    assert doc["results"]["best"] is not None
    # the answer in the experiment's thread, each piece once across the kill
    wait_for(lambda: doc_posted(fake, card.ts), timeout=60, what="the summary and plots in the thread")
    replies = fake.messages(fake.default_channel, thread_ts=card.ts)[1:]
    assert sum("projected cost" in (m.text or "") for m in replies) == 1  # the plan, posted once
    summaries = [m for m in replies if "RANK" in " ".join(b.get("text", {}).get("text", "") for b in m.blocks or [])]
    assert len(summaries) == 1 and "best vs runner-up" in str(summaries[0].blocks)
    files = sorted(f["name"].split("-", 1)[1] for m in replies for f in m.files or [])
    assert files == ["params.png", "trials.png"]
    [root] = [m for m in fake.messages(fake.default_channel) if m.ts == card.ts]
    counts = root.blocks[1]["text"]["text"]
    assert "— done" in root.blocks[0]["text"]["text"] and f"{len(pruned)} pruned" in counts and "0 to go" in counts


TOY_JOB = """
import argparse, math, time
from labbot_client import telemetry

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float)
p.add_argument("--steps", type=int)
p.add_argument("--seed", type=int)
a = p.parse_args()
telemetry.init()
for step in range(1, a.steps + 1):
    time.sleep(0.1)
    telemetry.log(step, loss=(math.log10(a.lr) + 2.5) ** 2 + math.exp(-step / 10) + 0.001 * a.seed)
telemetry.finish()
"""


@pytest.mark.postgresql
def test_two_replicas_on_postgresql_launch_every_trial_once_across_a_change_of_leader(
    tmp_path: Any, ray_head: RayConnection
) -> None:
    """Replicas ``a`` (leading) and ``b`` on one PostgreSQL database; the experiment is created through the follower;
    the leader is killed with trials running and ``b`` takes the lead: every trial is launched once."""
    require_postgresql()
    url = create_database(migrated=True)
    (tmp_path / "toy_job.py").write_text(TOY_JOB)
    config = tmp_path / "labbot.toml"
    config.write_text(f"""
[watchdog]
tick = "1s"

[leader]
lease = "3s"
renew = "1s"

[jobs.toy]
entrypoint = "python {tmp_path / "toy_job.py"}"
params = {{ lr = 1e-3, steps = 12, seed = 0 }}
reports = ["loss"]
""")
    token = secrets.token_urlsafe(32)
    env = {"LABBOT_CONFIG": str(config), "LABBOT_DATABASE_URL": url, "LABBOT_ADMIN_TOKEN": token}

    def replica(name: str) -> Serve:
        return Serve(tmp_path / name, ray_address=ray_head.address, ray_token=ray_head.token,
                     extra_env={**env, "LABBOT_REPLICA": name})  # fmt: skip

    a = replica("a").start()
    b = replica("b")
    try:
        wait_for(lambda: _role(a) == "leader", timeout=30, what="a leading")
        b.start()
        wait_for(lambda: _role(b) == "follower", timeout=30, what="b following")
        with b.client() as api:
            r = api.post("/experiments", json={
                "job": "toy", "space": {"lr": "loguniform(1e-4,1e-1)"}, "metric": "loss", "trials": 8,
                "concurrency": 3, "search": "random", "seeds": 2, "owner": "U0ALICE001",
            })  # fmt: skip
        assert r.status_code == 201, r.text
        exp_id = r.json()["experiment"]["id"]
        wait_for(lambda: experiment(b, exp_id)["counts"]["running"] >= 2, timeout=90, what="trials running")
        a.stop(signal.SIGKILL)
        wait_for(lambda: _role(b) == "leader", timeout=30, what="b leading")
        wait_for(lambda: experiment(b, exp_id)["status"] == "done", timeout=300, what="the experiment to end")
        doc = experiment(b, exp_id)
        assert len(doc["trials"]) == 8
        run_ids = [run["id"] for t in doc["trials"] for run in t["runs"]]
        assert len(run_ids) == len(set(run_ids)) == 16  # 8 trials × 2 seeds, each once
        db = Database(url)
        try:
            with db.engine.connect() as conn:
                rows = conn.exec_driver_sql(
                    "SELECT id, attempt FROM runs WHERE experiment_id = %(e)s", {"e": exp_id}
                ).all()
        finally:
            db.dispose()
        assert sorted(r[0] for r in rows) == sorted(run_ids)
        jobs = JobSubmissionClient(ray_head.address, headers=dict(ray_head.headers)).list_jobs()
        ours = {f"labbot-{r[0]}-" for r in rows}
        submitted = [j.submission_id for j in jobs if (j.submission_id or "")[:-1] in ours]
        # each run's attempts reached Ray once each (a run the dead leader wrote but never sent is sent by the next)
        assert len(submitted) == len(set(submitted)) == sum(r[1] for r in rows), (submitted, rows)
    finally:
        b.stop()
        a.stop()
        drop_database(url)


def _role(s: Serve) -> str | None:
    try:
        return str(httpx.get(f"{s.url}/readyz", timeout=10).json()["role"])
    except (httpx.HTTPError, KeyError, ValueError):
        return None
