"""The research plan's pure judgment: what an approval is bound to (the scope's hash), how the budget is shared,
what grows a plan (a new approval) and what cannot change on an arm that runs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from labbot.common.errors import BadRequest
from labbot.training.experiments.plan import Budget
from labbot.training.research.plan import PlanRequest, fixed_changes, growth, plan_hash, resolve_plan, split_budget

ARM = {"name": "lr", "job": "tiny-lm", "metric": "loss", "goal": "min", "at_step": None, "window": 3,
       "space": {"dimensions": [{"name": "lr", "kind": "loguniform", "low": 1e-4, "high": 1e-2}], "fixed": {}},
       "trials": 12, "concurrency": 4, "seeds": 1, "search": "tpe", "prune": "asha"}  # fmt: skip
SCOPE = {"hypothesis": "h", "decision_rule": "lowest loss", "budget": {"amount": 2.0, "unit": "cpu"},
         "on_failure": ["drop_trial", "restart"], "publish": ["notion"], "arms": [ARM]}  # fmt: skip


def changed(**kw: Any) -> dict[str, Any]:
    scope = copy.deepcopy(SCOPE)
    scope.update(kw)
    return scope


def arm(**kw: Any) -> dict[str, Any]:
    return {**copy.deepcopy(ARM), **kw}


def test_the_hash_is_the_scopes_identity() -> None:
    assert plan_hash(SCOPE) == plan_hash(copy.deepcopy(SCOPE))
    assert plan_hash(SCOPE) != plan_hash(changed(budget={"amount": 2.5, "unit": "cpu"}))
    assert len(plan_hash(SCOPE)) == 16


def test_the_budget_is_shared_by_projected_cost_or_evenly() -> None:
    assert split_budget(Budget(3.0, "cpu"), [1.0, 2.0]) == [1.0, 2.0]
    assert split_budget(Budget(3.0, "cpu"), [1.0, None]) == [1.5, 1.5]


@pytest.mark.parametrize(
    ("proposed", "said"),
    [
        (changed(budget={"amount": 3.0, "unit": "cpu"}), "the budget rises from 2 to 3 CPU-h"),
        (changed(budget={"amount": 1.0, "unit": "gpu"}), "changes unit"),
        (changed(arms=[arm(trials=24)]), "arm lr: trials 12 → 24"),
        (changed(arms=[arm(concurrency=8)]), "arm lr: concurrency 4 → 8"),
        (changed(arms=[ARM, arm(name="wide")]), "a new arm wide"),
        (changed(on_failure=["drop_trial", "restart", "stop_arm"]), "it may also stop_arm"),
        (changed(publish=["notion", "linear"]), "publishes also to linear"),
        (changed(decision_rule="highest accuracy"), "the decision rule changes"),
    ],
)
def test_what_costs_more_or_reaches_further_grows_the_plan(proposed: dict[str, Any], said: str) -> None:
    assert any(said in reason for reason in growth(SCOPE, proposed)), growth(SCOPE, proposed)


def test_what_costs_less_is_within_the_plan() -> None:
    smaller = changed(budget={"amount": 1.0, "unit": "cpu"}, arms=[arm(trials=6, concurrency=2)], on_failure=["stop"])
    assert growth(SCOPE, smaller) == ["it may also stop"]
    assert growth(SCOPE, changed(arms=[arm(trials=6)], publish=[])) == []


def test_a_running_arm_keeps_its_job_space_seeds_and_search() -> None:
    wider = arm(space={"dimensions": [{"name": "lr", "kind": "loguniform", "low": 1e-5, "high": 1e-1}], "fixed": {}})
    [problem] = fixed_changes(SCOPE, changed(arms=[wider]), running=["lr"])
    assert "space cannot change" in problem and "add a new one" in problem
    assert fixed_changes(SCOPE, changed(arms=[wider]), running=[]) == []  # not started yet: anything goes
    assert fixed_changes(SCOPE, changed(arms=[arm(seeds=3, search="random")]), running=["lr"])


def test_a_plan_with_two_arms_of_one_name_is_refused() -> None:
    twice = [{"name": "a", "job": "j", "space": {}, "metric": "loss"}] * 2
    req = PlanRequest.model_validate({"hypothesis": "h", "decision_rule": "d", "budget": "1cpu-h", "arms": twice})
    with pytest.raises(BadRequest, match="a is given twice"):
        resolve_plan(req, lambda a, b: pytest.fail("not resolved"))
