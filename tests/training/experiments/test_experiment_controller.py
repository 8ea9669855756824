"""The experiment controller over the real run service, database and Optuna study (Ray is the recording double):
trials launched up to the concurrency, followed, pruned, scored and ended; the study's records and labbot's runs
agree."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from experiment_lab import Lab

pytestmark = pytest.mark.databases


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str) -> Lab:
    return Lab(tmp_path, monkeypatch, database_url=database_url)


def test_twelve_trials_three_at_a_time_with_asha(lab: Lab) -> None:
    exp = lab.sweep(
        space=["lr=loguniform(1e-4,1e-1)", "width=choice(16,64,256)"],
        trials=12, concurrency=3, search="tpe", prune="asha", search_seed=7,
    )  # fmt: skip
    most_at_once = 0
    for _ in range(300):
        report = lab.tick()
        doc = lab.experiments.get(exp["id"])
        running = sum(1 for t in doc["trials"] if t["status"] in ("launching", "running"))
        most_at_once = max(most_at_once, running)
        for _exp_id, number in report.pruned:  # stopped within the tick that decided it
            trial = next(t for t in doc["trials"] if t["number"] == number)
            assert all(r["status"] == "stopped" for r in trial["runs"]), trial
        if doc["status"] == "done":
            break
        lab.train()
    doc = lab.experiments.get(exp["id"])
    assert doc["status"] == "done", doc["reason"]
    assert most_at_once == 3
    assert len(doc["trials"]) == 12
    assert doc["counts"]["pruned"] >= 1
    # every trial a run, every run a trial; the study agrees with labbot on each trial's fate
    runs = lab.runs_of(exp["id"])
    assert sorted(r.id for r in runs) == sorted(r["id"] for t in doc["trials"] for r in t["runs"])
    assert len(runs) == 12
    study = optuna.load_study(study_name=doc["study"], storage=lab.studies.storage)
    states = {t.number: t.state.name for t in study.get_trials(deepcopy=False)}
    expected = {"done": "COMPLETE", "pruned": "PRUNED", "failed": "FAIL", "stopped": "FAIL"}
    assert states == {t["number"]: expected[t["status"]] for t in doc["trials"]}
    for t in doc["trials"]:
        if t["status"] == "done":
            frozen = next(f for f in study.get_trials(deepcopy=False) if f.number == t["number"])
            assert frozen.value == pytest.approx(t["value"])
    best = doc["results"]["best"]
    assert best is not None and best["mean"] == min(t["value"] for t in doc["trials"] if t["status"] == "done")
