"""A research plan, checked and compared: pure functions, no database.

What the researcher agent proposes (:class:`PlanRequest`: a hypothesis, one or more *arms* — each an experiment —
a decision rule, one budget for all of it, what it may do on a failure, where the answer is published) is resolved
arm by arm into experiment plans (``labbot.training.experiments.plan``, by the caller's ``resolve``), the budget split
between the arms by their projected cost, and reduced to its **scope**: the document whose hash a human approves
(:func:`plan_hash`). Nothing in it is random (an experiment's sampler seed is drawn when it starts), so the same plan
has the same hash.

Between an approved scope and a proposed one, :func:`growth` lists what would cost more or reach further (a larger
budget, a new arm, more trials or concurrency, a new failure action or publication, a changed hypothesis or decision
rule): that needs a new approval. :func:`fixed_changes` lists what cannot change on an arm whose experiment already
runs (its job, metric, space, seeds, search or pruner): such a plan is refused, with what to do instead. What is
left — an arm dropped, fewer trials, a smaller budget — is applied within the approval.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from labbot.common.errors import BadRequest
from labbot.training.experiments.plan import Budget, ExperimentPlan, parse_budget

FailureAction = Literal["restart", "drop_trial", "stop_arm", "stop"]
"""What the researcher may do about a failure without asking again: restart a run of the plan from its checkpoint,
drop (stop) one trial, stop one arm, stop the whole plan and report what it has."""
DEFAULT_ON_FAILURE: tuple[FailureAction, ...] = ("restart", "drop_trial")
MAX_ARMS = 6
ARM_NAME = r"^[a-z0-9][a-z0-9_-]{0,31}$"
FIXED_KEYS = ("job", "metric", "goal", "at_step", "window", "space", "seeds", "search", "prune")
"""An arm's keys that cannot change once its experiment runs (Optuna's study is asked over that space and goal)."""


class ArmRequest(BaseModel):
    """One arm: an experiment (``labbot.training.experiments.plan.ExperimentRequest`` less its owner and budget,
    which the plan gives)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=ARM_NAME)
    job: str
    space: list[str] | dict[str, Any]
    metric: str
    goal: str | None = None
    at: str | int = "final"
    window: int = Field(default=3, ge=1, le=1000)
    trials: int | None = Field(default=None, ge=1, le=500)
    concurrency: int = Field(default=2, ge=1, le=64)
    seeds: int = Field(default=1, ge=1, le=20)
    search: str = "tpe"
    prune: str = "none"


class PlanRequest(BaseModel):
    """What the researcher proposes."""

    model_config = ConfigDict(extra="forbid")

    hypothesis: str = Field(min_length=1, max_length=2000)
    arms: list[ArmRequest] = Field(min_length=1, max_length=MAX_ARMS)
    decision_rule: str = Field(min_length=1, max_length=1000)
    budget: str
    on_failure: list[FailureAction] = Field(default_factory=lambda: list(DEFAULT_ON_FAILURE))
    publish: list[Literal["notion", "linear"]] = Field(default_factory=list)


@dataclass(frozen=True)
class ResolvedPlan:
    """A plan checked arm by arm: each arm's experiment plan with its share of the budget."""

    hypothesis: str
    decision_rule: str
    budget: Budget
    on_failure: tuple[str, ...]
    publish: tuple[str, ...]
    arms: tuple[tuple[str, ExperimentPlan], ...]

    def scope(self) -> dict[str, Any]:
        """What is approved: everything that decides what runs and what it may cost (no projection, no seed)."""
        return {
            "hypothesis": self.hypothesis,
            "decision_rule": self.decision_rule,
            "budget": {"amount": round(self.budget.amount, 9), "unit": self.budget.unit},
            "on_failure": sorted(self.on_failure),
            "publish": sorted(self.publish),
            "arms": [arm_scope(name, plan) for name, plan in self.arms],
        }

    def projection(self) -> dict[str, Any]:
        """The projected cost in the budget's unit: each arm's (all its trials) and its share of the budget, and
        the total the plan may spend (the budget caps it whatever the projection)."""
        arms: list[dict[str, Any]] = []
        for name, plan in self.arms:
            share = plan.budget.amount if plan.budget is not None else None
            arms.append({"name": name, "projected": plan.projection.total_hours, "budget": share,
                         "trials_allowed": plan.projection.trials_allowed, "basis": plan.projection.basis,
                         "runs": plan.trials * len(plan.seeds)})  # fmt: skip
        known = [plan.projection.total_hours for _, plan in self.arms]
        total = None if any(v is None for v in known) else sum(v for v in known if v is not None)
        return {
            "unit": self.budget.unit,
            "projected": total,
            "cap": self.budget.amount,
            "runs": sum(a["runs"] for a in arms),
            "arms": arms,
        }

    def to_json(self) -> dict[str, Any]:
        return {"scope": self.scope(), "projection": self.projection(), "hash": plan_hash(self.scope())}


def arm_scope(name: str, plan: ExperimentPlan) -> dict[str, Any]:
    return {
        "name": name,
        "job": plan.job,
        "metric": plan.metric,
        "goal": plan.goal,
        "at_step": plan.at_step,
        "window": plan.window,
        "space": plan.space.to_json(),
        "trials": plan.trials,
        "concurrency": plan.concurrency,
        "seeds": len(plan.seeds),
        "search": plan.search,
        "prune": plan.prune,
    }


def plan_hash(scope: Mapping[str, Any]) -> str:
    """The scope's identity: what an approval is bound to (sha256 of its canonical JSON, 16 hex digits)."""
    canonical = json.dumps(scope, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def split_budget(budget: Budget, projected: Sequence[float | None]) -> list[float]:
    """The budget shared between arms in proportion to their projected cost (evenly when any is unknown)."""
    n = len(projected)
    if any(p is None or not math.isfinite(p) or p <= 0 for p in projected):
        return [budget.amount / n] * n
    total = sum(float(p) for p in projected if p is not None)
    return [budget.amount * float(p) / total for p in projected if p is not None]


ResolveArm = Callable[[ArmRequest, Budget], ExperimentPlan]


def resolve_plan(req: PlanRequest, resolve: ResolveArm) -> ResolvedPlan:
    """Every arm checked (``resolve``: the experiment service's check of one arm under a budget; it raises
    ``BadRequest`` naming what is wrong), then each given its share of the budget and checked again under it."""
    budget = parse_budget(req.budget)
    names = [a.name for a in req.arms]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise BadRequest(f"arm names must differ: {', '.join(repeated)} is given twice")
    first = [_arm(resolve, arm, budget) for arm in req.arms]
    shares = split_budget(budget, [p.projection.total_hours for p in first])
    arms = tuple(
        (arm.name, _arm(resolve, arm, Budget(share, budget.unit))) for arm, share in zip(req.arms, shares, strict=True)
    )
    return ResolvedPlan(
        hypothesis=req.hypothesis.strip(),
        decision_rule=req.decision_rule.strip(),
        budget=budget,
        on_failure=tuple(dict.fromkeys(req.on_failure)),
        publish=tuple(dict.fromkeys(req.publish)),
        arms=arms,
    )


def _arm(resolve: ResolveArm, arm: ArmRequest, budget: Budget) -> ExperimentPlan:
    try:
        return resolve(arm, budget)
    except BadRequest as e:
        raise BadRequest(f"arm {arm.name}: {e.message}") from None


def growth(approved: Mapping[str, Any], proposed: Mapping[str, Any]) -> list[str]:
    """What ``proposed`` (a scope) costs or reaches beyond ``approved``, in words; empty: it is within it."""
    grew: list[str] = []
    was, now = approved["budget"], proposed["budget"]
    if now["unit"] != was["unit"]:
        grew.append(f"the budget changes unit, {was['unit'].upper()}-h to {now['unit'].upper()}-h")
    elif now["amount"] > was["amount"] + 1e-9:
        grew.append(f"the budget rises from {was['amount']:g} to {now['amount']:g} {now['unit'].upper()}-h")
    for key, words in (("hypothesis", "the hypothesis"), ("decision_rule", "the decision rule")):
        if proposed[key] != approved[key]:
            grew.append(f"{words} changes")
    for key, words in (("on_failure", "may also"), ("publish", "publishes also to")):
        added = sorted(set(proposed[key]) - set(approved[key]))
        if added:
            grew.append(f"it {words} {', '.join(added)}")
    before = {a["name"]: a for a in approved["arms"]}
    for arm in proposed["arms"]:
        old = before.get(arm["name"])
        if old is None:
            grew.append(f"a new arm {arm['name']}: {arm['job']}, {arm['trials']} trials × {arm['seeds']} seed(s)")
            continue
        for key in ("trials", "concurrency"):
            if arm[key] > old[key]:
                grew.append(f"arm {arm['name']}: {key} {old[key]} → {arm[key]}")
    return grew


def fixed_changes(approved: Mapping[str, Any], proposed: Mapping[str, Any], running: Sequence[str]) -> list[str]:
    """What ``proposed`` changes on an arm whose experiment runs (``running``: those arms' names) that cannot change
    there, each with what to do instead."""
    before = {a["name"]: a for a in approved["arms"]}
    problems = []
    for arm in proposed["arms"]:
        old = before.get(arm["name"])
        if old is None or arm["name"] not in running:
            continue
        changed = [key for key in FIXED_KEYS if arm[key] != old[key]]
        if changed:
            problems.append(
                f"arm {arm['name']} runs, so its {', '.join(changed)} cannot change: keep them, or drop the arm and "
                "add a new one under another name"
            )
    return problems


def dropped(approved: Mapping[str, Any], proposed: Mapping[str, Any]) -> list[str]:
    """The arms of ``approved`` that ``proposed`` no longer has."""
    kept = {a["name"] for a in proposed["arms"]}
    return [a["name"] for a in approved["arms"] if a["name"] not in kept]
