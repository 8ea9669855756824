"""Experiments end to end below the front doors: seeds as repeats with intervals and a verdict, failures that are
not scores, pause and resume, stopping, the budget, and labbot stopping at any point between asking Optuna and
launching (no trial launched twice, none forgotten). What rests on what the database keeps (restarts, replicas, the
budget's clock) runs on SQLite and PostgreSQL; the rest on SQLite."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import optuna
import pytest
from experiment_lab import Lab
from sqlalchemy import func, select

from labbot.common.errors import BadRequest, Conflict
from labbot.storage.models import ExperimentTrial, Run


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str) -> Lab:
    return Lab(tmp_path, monkeypatch, database_url=database_url)


def _count(lab: Lab, model: type) -> int:
    with lab.db.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def test_seeds_repeat_each_config_and_the_verdict_needs_an_interval(lab: Lab) -> None:
    exp = lab.sweep(space=["lr=1e-4,3e-3", "width=64"], search="grid", seeds=3, concurrency=2)
    lab.run_to_end()
    doc = lab.experiments.get(exp["id"])
    assert doc["status"] == "done"
    assert [len(t["runs"]) for t in doc["trials"]] == [3, 3]
    runs = lab.runs_of(exp["id"])
    assert sorted(r.config["params"]["seed"] for r in runs) == [0, 0, 1, 1, 2, 2]
    assert all(r.config["params"]["width"] == 64 for r in runs)
    ranking = doc["results"]["ranking"]
    assert [r["params"]["lr"] for r in ranking] == [3e-3, 1e-4]  # 1e-2.5 is the toy's best
    assert all(r["n"] == 3 and r["low"] < r["mean"] < r["high"] for r in ranking)
    assert doc["results"]["verdict"]["better"] == "best"


def test_one_seed_each_shows_no_difference(lab: Lab) -> None:
    exp = lab.sweep(space=["lr=1e-4,3e-3"], search="grid")
    lab.run_to_end()
    verdict = lab.experiments.get(exp["id"])["results"]["verdict"]
    assert verdict["better"] is None and "one seed" in verdict["words"]


def test_a_seed_that_fails_for_good_fails_its_trial_not_a_score(lab: Lab) -> None:
    exp = lab.sweep(space=["lr=1e-4,3e-3"], search="grid", concurrency=2)
    lab.tick()
    doomed = lab.runs_of(exp["id"])[0].id
    lab.fail_at[doomed] = 40
    lab.run_to_end()
    doc = lab.experiments.get(exp["id"])
    failed = [t for t in doc["trials"] if t["status"] == "failed"]
    assert len(failed) == 1 and doomed in failed[0]["reason"] and failed[0]["value"] is None
    study = optuna.load_study(study_name=doc["study"], storage=lab.studies.storage)
    frozen = {t.number: t for t in study.get_trials(deepcopy=False)}
    assert frozen[failed[0]["number"]].state == optuna.trial.TrialState.FAIL
    assert doc["status"] == "done" and doc["results"]["verdict"] is None  # one config scored: nothing to compare


def test_a_diverged_config_is_failed_without_a_pruner_and_pruned_first_with_one(lab: Lab) -> None:
    exp = lab.sweep(space=["lr=1e-4,3e-3", "mode=nan"], search="grid", concurrency=2)
    lab.run_to_end()
    doc = lab.experiments.get(exp["id"])
    assert {t["status"] for t in doc["trials"]} == {"failed"}
    assert all("no finite loss" in t["reason"] for t in doc["trials"])


def test_pause_launches_nothing_and_resume_goes_on(lab: Lab) -> None:
    exp = lab.sweep(space=["lr=loguniform(1e-4,1e-2)"], trials=4, concurrency=1, search="random")
    lab.tick()
    lab.experiments.pause(exp["id"], by="U1")
    for _ in range(30):
        lab.train()
        lab.tick()
    doc = lab.experiments.get(exp["id"])
    assert doc["status"] == "paused" and len(doc["trials"]) == 1 and doc["trials"][0]["status"] == "done"
    assert len(lab.runs_of(exp["id"])) == 1
    with pytest.raises(Conflict):
        lab.experiments.pause(exp["id"])
    lab.experiments.resume(exp["id"], by="U1")
    lab.run_to_end()
    doc = lab.experiments.get(exp["id"])
    assert doc["status"] == "done" and len(doc["trials"]) == 4


def test_stop_stops_running_trials_and_keeps_the_study(lab: Lab) -> None:
    exp = lab.sweep(space=["lr=loguniform(1e-4,1e-2)"], trials=6, concurrency=2, search="random")
    lab.tick()
    lab.train(3)
    lab.experiments.stop(exp["id"], by="U1")
    doc = lab.experiments.get(exp["id"])
    assert doc["status"] == "stopped" and doc["reason"] == "stopped by U1"
    assert [t["status"] for t in doc["trials"]] == ["stopped", "stopped"]
    assert all(r.status == "stopped" for r in lab.runs_of(exp["id"]))
    lab.run_to_end()
    assert len(lab.experiments.get(exp["id"])["trials"]) == 2  # nothing more launched
    study = optuna.load_study(study_name=doc["study"], storage=lab.studies.storage)
    assert len(study.get_trials()) == 2
    with pytest.raises(Conflict):
        lab.experiments.stop(exp["id"])


def test_stopping_one_trial_goes_on_with_the_next(lab: Lab) -> None:
    exp = lab.sweep(space=["lr=loguniform(1e-4,1e-2)"], trials=3, concurrency=1, search="random")
    lab.tick()
    lab.experiments.stop_trial(exp["id"], 0, by="U1")
    lab.run_to_end()
    doc = lab.experiments.get(exp["id"])
    assert [t["status"] for t in doc["trials"]] == ["stopped", "done", "done"]
    assert "U1" in doc["trials"][0]["reason"]
    with pytest.raises(BadRequest, match="no trial #9"):
        lab.experiments.stop_trial(exp["id"], 9)


@pytest.mark.databases  # what the database must hold across a restart or a replica
def test_the_budget_reached_stops_running_trials_and_launches_nothing_more(lab: Lab) -> None:
    # a trial is projected at 90 steps × 1 s = 0.025 CPU-h; the budget pays for 4
    exp = lab.sweep(space=["lr=loguniform(1e-4,1e-2)"], trials=20, concurrency=2, search="random", budget="0.1cpu-h")
    assert exp["projection"]["trials_allowed"] == 4
    for _ in range(200):
        lab.tick()
        doc = lab.experiments.get(exp["id"])
        if doc["status"] != "running":
            break
        lab.train(2)
        lab.offset += timedelta(seconds=30)  # each tick, the runs on Ray use 30 s each
    assert doc["status"] == "budget_spent", doc
    assert "the budget is spent" in doc["reason"]
    asked = len(doc["trials"])
    assert all(r.status in ("succeeded", "stopped") for r in lab.runs_of(exp["id"]))
    assert doc["counts"]["running"] == 0 and doc["counts"]["stopped"] >= 1
    assert doc["results"]["best"] is not None  # the verdict on what finished
    lab.run_to_end()
    assert len(lab.experiments.get(exp["id"])["trials"]) == asked


# -- labbot stopping between any two steps of a launch ---------------------------------------------------------


def _launched_once(lab: Lab, exp_id: str) -> None:
    runs = lab.runs_of(exp_id)
    keys = [(r.config["params"]["lr"], r.config["params"]["seed"]) for r in runs]
    assert len(keys) == len(set(keys))
    with lab.db.session() as s:
        trials = list(s.scalars(select(ExperimentTrial).where(ExperimentTrial.experiment_id == exp_id)))
    assert sorted(r for t in trials for r in t.run_ids) == sorted(r.id for r in runs)


@pytest.mark.databases  # what the database must hold across a restart or a replica
def test_a_trial_asked_of_optuna_but_not_recorded_is_adopted_not_asked_again(lab: Lab) -> None:
    exp = lab.sweep(space=["lr=1e-4,3e-4,1e-3,3e-3"], search="grid", concurrency=2)
    plan = lab.experiments.controller._load(exp["id"])[1]
    asked = lab.studies.ask(exp["study"], plan)  # labbot stopped right after asking
    report = lab.tick()
    assert (exp["id"], asked.number) in report.launched
    lab.run_to_end()
    doc = lab.experiments.get(exp["id"])
    assert doc["status"] == "done" and len(doc["trials"]) == 4
    assert sorted(t["params"]["lr"] for t in doc["trials"]) == [1e-4, 3e-4, 1e-3, 3e-3]
    _launched_once(lab, exp["id"])


@pytest.mark.databases  # what the database must hold across a restart or a replica
def test_a_trial_recorded_and_half_launched_is_launched_once(lab: Lab) -> None:
    exp = lab.sweep(space=["lr=1e-4,3e-3"], search="grid", seeds=2, concurrency=1)
    controller = lab.experiments.controller
    e, plan, _ = controller._load(exp["id"])
    asked = lab.studies.ask(exp["study"], plan)
    controller._record(exp["id"], asked.number, asked._trial_id, dict(asked.params))
    from labbot.training.experiments.controller import launch_request

    # the first seed's run was made, then labbot stopped before the second and before the trial said so
    lab.service.launch(launch_request(e, plan, asked.number, dict(asked.params), plan.seeds[0]), experiment=e.id)
    lab.tick()
    lab.run_to_end()
    doc = lab.experiments.get(exp["id"])
    assert doc["status"] == "done" and [len(t["runs"]) for t in doc["trials"]] == [2, 2]
    _launched_once(lab, exp["id"])


def test_a_trial_ended_in_labbot_but_not_told_is_told_after_a_restart(lab: Lab) -> None:
    exp = lab.sweep(space=["lr=1e-4,3e-3"], search="grid", concurrency=2)
    controller = lab.experiments.controller
    told = []
    real_tell = lab.studies.tell

    def crash_once(*a, **kw):  # labbot stops right after the trial's row says done
        if not told:
            told.append(a)
            raise SystemExit("killed")
        return real_tell(*a, **kw)

    lab.studies.tell = crash_once  # type: ignore[method-assign]
    with pytest.raises(SystemExit):
        lab.run_to_end()
    lab.studies.tell = real_tell  # type: ignore[method-assign]
    lab.run_to_end()
    doc = lab.experiments.get(exp["id"])
    study = optuna.load_study(study_name=doc["study"], storage=lab.studies.storage)
    assert sorted(t.state.name for t in study.get_trials()) == ["COMPLETE", "COMPLETE"]
    assert doc["status"] == "done" and controller is lab.experiments.controller


@pytest.mark.databases  # what the database must hold across a restart or a replica
def test_two_controllers_taking_turns_launch_every_trial_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    """Two replicas on one database, the lead passing between them every tick: every trial launched once."""
    a = Lab(tmp_path / "a", monkeypatch, database_url=database_url)
    b = Lab(tmp_path / "b", monkeypatch, database_url=database_url, ray=a.ray)
    exp = a.sweep(space=["lr=loguniform(1e-4,1e-2)", "width=16,64"], trials=8, concurrency=3, prune="median")
    for i in range(300):
        (a if i % 2 else b).tick()
        if a.experiments.get(exp["id"])["status"] == "done":
            break
        a.train()
    doc = a.experiments.get(exp["id"])
    assert doc["status"] == "done" and len(doc["trials"]) == 8
    runs = a.runs_of(exp["id"])
    assert len(runs) == 8 and len(a.ray.submitted) == 8
    assert sorted(r.id for r in runs) == sorted(r["id"] for t in doc["trials"] for r in t["runs"])


@pytest.mark.databases  # what the database must hold across a restart or a replica
def test_optunas_tables_and_labbots_live_in_one_database_across_restarts(lab: Lab) -> None:
    exp = lab.sweep(space=["lr=1e-4,3e-3"], search="grid")
    lab.tick()
    head = lab.db.revision()
    lab.db.upgrade()  # the next `labbot serve`: labbot's migrations do not read Optuna's alembic_version
    assert lab.db.revision() == head
    again = Lab.__new__(Lab)  # a new process: a new Optuna storage object on the same URL finds its study
    again.__dict__.update(lab.__dict__, studies=type(lab.studies)(lab.studies.url))
    plan = lab.experiments.controller._load(exp["id"])[1]
    assert [t.number for t in again.studies.trials(exp["study"], plan)] == [0, 1]


def test_a_crashed_seed_restarted_from_its_checkpoint_keeps_its_trial(lab: Lab) -> None:
    """A run that fails and is restarted by the watchdog (attempt 2, from its checkpoint) is still its trial's: the
    trial waits through ``restarting`` and scores with the new attempt's values; nothing is launched for it again."""
    exp = lab.sweep(space=["lr=1e-4,3e-3"], search="grid", concurrency=2)
    lab.tick()
    lab.train(3)
    run_id = lab.runs_of(exp["id"])[0].id
    sid = f"labbot-{run_id}-1"
    lab.ray.status[sid] = "FAILED"
    with lab.db.session() as s:  # what the watchdog does for a restartable failure: attempt 2, due now
        run = s.get_one(Run, run_id)
        run.status, run.attempt, run.ray_submission_id = "restarting", 2, f"labbot-{run_id}-2"
    lab.service.resubmit(run_id)
    lab.progress[f"labbot-{run_id}-2"] = lab.progress[sid]  # it resumes from its checkpoint
    lab.run_to_end()
    doc = lab.experiments.get(exp["id"])
    assert [t["status"] for t in doc["trials"]] == ["done", "done"]
    assert len(lab.runs_of(exp["id"])) == 2 and len(lab.ray.submitted) == 3


@pytest.mark.databases  # what the database must hold across a restart or a replica
def test_a_run_made_but_never_sent_to_ray_is_sent_at_the_next_tick(lab: Lab) -> None:
    """labbot stopped between writing a seed's run and submitting it to Ray: the next tick sends that run (the same
    run, its first attempt) instead of leaving it to be failed as lost a minute later."""
    exp = lab.sweep(space=["lr=1e-4,3e-3"], search="grid", concurrency=1)
    real_submit = lab.service.launcher.submit

    def killed(_sub: object) -> None:
        raise SystemExit("killed between the run's row and Ray")

    lab.service.launcher.submit = killed  # type: ignore[method-assign]
    with pytest.raises(SystemExit):
        lab.tick()
    lab.service.launcher.submit = real_submit  # type: ignore[method-assign]
    [run] = lab.runs_of(exp["id"])
    assert run.status == "pending" and lab.ray.submitted == []
    lab.tick()
    assert [s["submission_id"] for s in lab.ray.submitted] == [f"labbot-{run.id}-1"]
    lab.run_to_end()
    doc = lab.experiments.get(exp["id"])
    assert doc["status"] == "done" and len(lab.runs_of(exp["id"])) == 2 and len(lab.ray.submitted) == 2
