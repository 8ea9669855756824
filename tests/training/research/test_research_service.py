"""The research service over the experiments' real world (``tests/experiment_lab.py``): a plan waits for its
approval, starts only under the hash that was proposed, grows only through a new approval (the approved part runs on),
shrinks at once, acts only as the plan allows, and reports only numbers the store bears out — answered when every
arm ran to its end, incomplete when one was cut short."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from experiment_lab import Lab
from sqlalchemy import func, select

from labbot.common.errors import BadRequest, Conflict
from labbot.common.research_text import plan_text
from labbot.storage.models import Experiment, Run
from labbot.training.claims import StoreSources
from labbot.training.research.plan import PlanRequest
from labbot.training.research.service import ResearchService

OWNER = "U0ALICE001"
ARM = {"name": "lr", "job": "toy", "space": {"lr": [1e-3, 3e-3, 1e-2], "width": 64}, "metric": "loss",
       "search": "grid", "concurrency": 2}  # fmt: skip
PLAN = {"hypothesis": "a larger lr lowers the toy's loss", "arms": [ARM],
        "decision_rule": "the lowest mean final loss wins", "budget": "1cpu-h"}  # fmt: skip


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    return Lab(tmp_path, monkeypatch)


def research(lab: Lab) -> ResearchService:
    sources = StoreSources(lab.telemetry.series, lab.experiments.get)
    return ResearchService(lab.db, lab.experiments, sources, findings=lab.findings)


def plan(**changes: Any) -> PlanRequest:
    return PlanRequest.model_validate({**PLAN, **changes})


def count(lab: Lab, model: type) -> int:
    with lab.db.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def test_a_plan_waits_for_its_approval_and_starts_only_under_its_hash(lab: Lab) -> None:
    svc = research(lab)
    q = svc.open("which lr minimises the toy's loss?", OWNER)
    proposed = svc.propose(q["id"], plan())
    assert proposed["change"] == "needs_approval"
    first = proposed["research"]["plan_hash"]
    assert proposed["research"]["plan"]["projection"]["cap"] == 1.0
    lab.tick()
    assert count(lab, Experiment) == 0 and count(lab, Run) == 0  # nothing runs before the approval
    # the plan changes while the approval is asked for: the old hash releases nothing
    svc.propose(q["id"], plan(budget="0.5cpu-h"))
    with pytest.raises(Conflict, match="the plan changed since"):
        svc.start(q["id"], first)
    assert count(lab, Experiment) == 0
    current = svc.get(q["id"])["plan_hash"]
    started = svc.start(q["id"], current)
    assert started["status"] == "running" and set(started["arms"]) == {"lr"}
    with pytest.raises(Conflict, match="approved already"):
        svc.start(q["id"], current)


def test_more_trials_wait_for_an_approval_of_the_difference_and_the_approved_part_runs_on(lab: Lab) -> None:
    svc = research(lab)
    q = svc.open("which lr?", OWNER)
    svc.start(q["id"], svc.propose(q["id"], plan())["research"]["plan_hash"])
    exp_id = svc.get(q["id"])["arms"]["lr"]
    lab.run_to_end()
    assert lab.experiments.get(exp_id)["status"] == "done" and count(lab, Run) == 3
    wider = {**ARM, "name": "wide", "space": {"lr": [1e-3, 1e-2], "width": [128, 256]}}
    grown = svc.propose(q["id"], plan(arms=[ARM, wider]))
    assert grown["change"] == "needs_approval"
    assert any("a new arm wide" in r for r in grown["needs"])
    lab.run_to_end(max_ticks=5)
    assert count(lab, Run) == 3  # nothing beyond the approved plan launched
    assert svc.get(q["id"])["pending"]["grows"] == grown["needs"]
    svc.start(q["id"], grown["research"]["plan_hash"])
    lab.run_to_end()
    assert count(lab, Run) == 3 + 4


def test_a_smaller_plan_applies_at_once_and_a_running_arm_keeps_its_space(lab: Lab) -> None:
    svc = research(lab)
    q = svc.open("which lr?", OWNER)
    two = [ARM, {**ARM, "name": "b", "space": {"lr": [1e-3], "width": [16, 32]}}]
    svc.start(q["id"], svc.propose(q["id"], plan(arms=two))["research"]["plan_hash"])
    arm_b = svc.get(q["id"])["arms"]["b"]
    shrunk = svc.propose(q["id"], plan(arms=[ARM], budget="0.5cpu-h"))
    assert shrunk["change"] == "applied"
    assert lab.experiments.get(arm_b)["status"] == "stopped"
    with pytest.raises(BadRequest, match="its space cannot change"):
        svc.propose(q["id"], plan(arms=[{**ARM, "space": {"lr": [1e-1], "width": 64}}], budget="0.5cpu-h"))


def test_actions_outside_the_plan_are_refused(lab: Lab) -> None:
    svc = research(lab)
    q = svc.open("which lr?", OWNER)
    svc.start(q["id"], svc.propose(q["id"], plan(on_failure=["drop_trial"]))["research"]["plan_hash"])
    lab.tick()
    with pytest.raises(BadRequest, match="does not allow 'stop_arm'"):
        svc.act(q["id"], "stop_arm", arm="lr")
    svc.act(q["id"], "drop_trial", arm="lr", trial=0)
    lab.tick()
    trial = lab.experiments.get(svc.get(q["id"])["arms"]["lr"])["trials"][0]
    assert trial["status"] == "stopped"


def test_a_wrong_number_refuses_the_report_and_nothing_is_kept(lab: Lab) -> None:
    svc = research(lab)
    q = svc.open("which lr?", OWNER)
    svc.start(q["id"], svc.propose(q["id"], plan())["research"]["plan_hash"])
    lab.run_to_end()
    exp_id = svc.get(q["id"])["arms"]["lr"]
    best = lab.experiments.get(exp_id)["results"]["ranking"][0]
    wrong = f"lr={best['params']['lr']} is best at [[{best['mean'] + 1:.3f} | experiment:{exp_id} best stat:mean]]"
    with pytest.raises(BadRequest, match="its numbers do not check") as e:
        svc.report(q["id"], verdict=wrong, text="")
    assert f"{best['mean']:.3f}" in e.value.message  # the corrected text is handed back
    assert svc.get(q["id"])["report"] is None and svc.get(q["id"])["status"] == "running"
    with pytest.raises(BadRequest, match=r"bound to no source: 2\.5"):
        svc.report(q["id"], verdict="the loss is 2.5", text="")
    right = f"the best config reaches [[{best['mean']:.3f} | experiment:{exp_id} best stat:mean]]"
    reported = svc.report(q["id"], verdict=right, text="")
    assert reported["status"] == "answered" and reported["report"]["counts"]["ok"] == 1
    assert reported["finding_id"] is not None


def test_a_budget_spent_marks_the_answer_incomplete(lab: Lab) -> None:
    svc = research(lab)
    q = svc.open("which lr?", OWNER)
    # a trial is projected at 90 steps × 1 s = 0.025 CPU-h: the budget pays for two of the grid's three
    svc.start(q["id"], svc.propose(q["id"], plan(budget="0.06cpu-h"))["research"]["plan_hash"])
    for _ in range(100):
        lab.tick()
        doc = svc.get(q["id"])
        if doc["all_ended"]:
            break
        lab.train(2)
        lab.offset += timedelta(seconds=30)  # each tick, the runs on Ray use 30 s each
    assert doc["arm_states"][0]["status"] == "budget_spent"
    reported = svc.report(q["id"], verdict="the budget ran out before the grid was done", text="")
    assert reported["status"] == "incomplete" and "budget spent" in reported["reason"]


def test_the_approval_shows_the_price_when_compute_has_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = Lab(tmp_path, monkeypatch, compute={"prices": {"cpu_hour": 0.5, "currency": "EUR"}})
    svc = research(lab)
    q = svc.open("which lr?", OWNER)
    proposed = svc.propose(q["id"], plan())["research"]
    shown = plan_text(svc.preview(q["id"], proposed["plan_hash"]))
    # 3 trials × 90 steps × 1 s (the toy's declared step) = 0.075 CPU-h ≈ 0.04 EUR; the cap: 1 CPU-h = 0.50 EUR
    assert "cost: projected 0.075 CPU-h ≈ 0.04 EUR for all 3 runs; capped at the budget, 1 CPU-h ≈ 0.50 EUR" in shown
    assert "cannot be undone: up to 1 CPU-h of compute spent, 3 runs launched as U0ALICE001" in shown
    (tmp_path / "free").mkdir()
    free = research(Lab(tmp_path / "free", monkeypatch))
    q = free.open("which lr?", OWNER)
    assert "≈" not in plan_text(free.propose(q["id"], plan())["research"])  # no price: hours alone


def test_an_arm_made_before_a_crash_is_adopted_not_made_twice(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    svc = research(lab)
    q = svc.open("which lr?", OWNER)
    two = [ARM, {**ARM, "name": "b", "space": {"lr": [1e-3], "width": [16, 32]}}]
    plan_hash = svc.propose(q["id"], plan(arms=two))["research"]["plan_hash"]
    real = lab.experiments.create
    made: list[str] = []

    def crash_after_the_second(req: Any, **kw: Any) -> dict[str, Any]:
        doc = real(req, **kw)
        made.append(doc["id"])
        if len(made) == 2:
            raise RuntimeError("labbot killed between making the arm's experiment and recording it")
        return doc

    monkeypatch.setattr(lab.experiments, "create", crash_after_the_second)
    with pytest.raises(RuntimeError):
        svc.start(q["id"], plan_hash)
    assert svc.get(q["id"])["approved"] is None  # not approved: started again, the same hash
    monkeypatch.setattr(lab.experiments, "create", real)
    started = svc.start(q["id"], plan_hash)
    assert sorted(started["arms"].values()) == sorted(made) and count(lab, Experiment) == 2
