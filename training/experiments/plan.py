"""What a front door asks for (``ExperimentRequest``) checked against its job into what is stored and run
(``ExperimentPlan``), with the projected cost; pure: no Optuna, no database, no clock.

Everything is checked before anything is written: the space (:mod:`.space`), the objective's metric (one the job
reports), the goal (``min``/``max``, else by the metric's name), seeds (≥ 1, and the job must have a seed parameter to
repeat with), the search and the pruner by name, the limits, and the budget (``2gpu-h``, ``10cpu-h``): a budget
smaller than one trial's projected cost is refused with the figure.

**The projected cost** of a run is its resources (GPUs for a ``gpu-h`` budget, else CPUs; 1 when it reserves none)
× its steps (the largest its space allows) × the seconds a step takes (the median of the job's finished runs when
there are any, else the job's declared ``step_seconds``); a trial is that × seeds, the experiment that × trials.
When neither figure exists the cost is unknown, said so, and the budget is enforced only as it is used.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from labbot.common.errors import BadRequest
from labbot.training.compare import direction
from labbot.training.experiments.space import Space, parse_space
from labbot.training.specs import DEFAULT_PURPOSE, JobSpec, check_purpose

SEARCHES: tuple[str, ...] = ("grid", "random", "tpe", "cmaes")
PRUNERS: tuple[str, ...] = ("asha", "hyperband", "median", "none")
Goal = Literal["min", "max"]
MAX_TRIALS = 500
MAX_CONCURRENCY = 64
MAX_SEEDS = 20
DEFAULT_TRIALS = 20
DEFAULT_WINDOW = 3  # the objective at the end: the mean of the metric's last three reported values
_BUDGET = re.compile(r"^\s*(?P<amount>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>gpu|cpu)[-_ ]?(?:h|hr|hrs|hours?)\s*$", re.I)


class ExperimentRequest(BaseModel):
    """What a front door sends. ``space`` items are ``NAME=EXPR`` strings or, from JSON, ``{NAME: EXPR}`` (an EXPR
    may be a list or a number)."""

    model_config = ConfigDict(extra="forbid")

    job: str
    space: list[str] | dict[str, Any]
    metric: str
    goal: str | None = None  # min|max; None: by the metric's name
    at: str | int = "final"  # "final" (the mean of the last ``window`` values) or a step
    window: int = Field(default=DEFAULT_WINDOW, ge=1, le=1000)
    trials: int | None = None
    concurrency: int = 2
    seeds: int = 1
    search: str = "tpe"
    prune: str = "none"
    budget: str | None = None
    name: str | None = Field(default=None, max_length=200)
    owner: str = Field(default="cli", max_length=100)
    purpose: str | None = Field(default=None, max_length=32)
    search_seed: int | None = None  # the sampler's own seed (None: drawn from the experiment's id)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


@dataclass(frozen=True)
class Budget:
    amount: float
    unit: Literal["gpu", "cpu"]

    def words(self) -> str:
        return f"{self.amount:g} {self.unit.upper()}-h"


def parse_budget(text: str) -> Budget:
    m = _BUDGET.match(text)
    if m is None:
        raise BadRequest(f"budget {text!r} is not understood: write it in GPU- or CPU-hours, e.g. 2gpu-h or 10cpu-h")
    amount = float(m["amount"])
    if not amount > 0:
        raise BadRequest(f"budget {text!r} must be more than 0 hours")
    return Budget(amount, m["unit"].lower())  # type: ignore[arg-type]


@dataclass(frozen=True)
class Projection:
    """The projected cost, in the budget's unit (CPU-hours when there is none)."""

    unit: str
    run_hours: float | None  # one run of the largest configuration; None: unknown
    trial_hours: float | None
    total_hours: float | None
    trials_allowed: int | None  # how many trials the budget pays for (None: no budget, or the cost unknown)
    basis: str  # in words: where the seconds per step came from

    def to_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "run_hours": self.run_hours,
            "trial_hours": self.trial_hours,
            "total_hours": self.total_hours,
            "trials_allowed": self.trials_allowed,
            "basis": self.basis,
        }


@dataclass(frozen=True)
class ExperimentPlan:
    """A checked experiment: what is stored (``to_json``) and what the controller runs."""

    job: str
    name: str
    owner: str
    purpose: str
    space: Space
    metric: str
    goal: Goal
    goal_rule: str
    at_step: int | None  # None: the final window
    window: int
    trials: int
    concurrency: int
    seeds: tuple[int, ...]  # the seed parameter's value for each repeat
    seed_param: str | None
    search: str
    prune: str
    budget: Budget | None
    projection: Projection
    max_steps: int | None  # the most steps a trial's runs take (the pruners' resource), None: unknown
    search_seed: int
    resources: tuple[float, float]  # (cpus, gpus) of one run

    def to_json(self) -> dict[str, Any]:
        return {
            "space": self.space.to_json(),
            "objective": {
                "metric": self.metric,
                "goal": self.goal,
                "goal_rule": self.goal_rule,
                "at_step": self.at_step,
                "window": self.window,
            },
            "trials": self.trials,
            "concurrency": self.concurrency,
            "seeds": list(self.seeds),
            "seed_param": self.seed_param,
            "search": self.search,
            "prune": self.prune,
            "budget": {"amount": self.budget.amount, "unit": self.budget.unit} if self.budget else None,
            "projection": self.projection.to_json(),
            "max_steps": self.max_steps,
            "search_seed": self.search_seed,
            "resources": {"cpus": self.resources[0], "gpus": self.resources[1]},
        }

    @classmethod
    def from_row(cls, job: str, name: str, owner: str, purpose: str, spec: dict[str, Any]) -> ExperimentPlan:
        obj, budget, proj = spec["objective"], spec.get("budget"), spec["projection"]
        return cls(
            job=job,
            name=name,
            owner=owner,
            purpose=purpose,
            space=Space.from_json(spec["space"]),
            metric=obj["metric"],
            goal=obj["goal"],
            goal_rule=obj.get("goal_rule", ""),
            at_step=obj.get("at_step"),
            window=int(obj.get("window") or DEFAULT_WINDOW),
            trials=int(spec["trials"]),
            concurrency=int(spec["concurrency"]),
            seeds=tuple(spec["seeds"]),
            seed_param=spec.get("seed_param"),
            search=spec["search"],
            prune=spec["prune"],
            budget=Budget(float(budget["amount"]), budget["unit"]) if budget else None,
            projection=Projection(**proj),
            max_steps=spec.get("max_steps"),
            search_seed=int(spec["search_seed"]),
            resources=(float(spec["resources"]["cpus"]), float(spec["resources"]["gpus"])),
        )


def _bounded(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadRequest(f"{name}={value!r} must be a whole number from {low} to {high}")
    return value


def _goal(metric: str, goal: str | None) -> tuple[Goal, str]:
    if goal is not None:
        if goal not in ("min", "max"):
            raise BadRequest(f"goal {goal!r} must be min or max: whether a lower or a higher {metric} is better")
        return goal, f"{goal} (as asked)"  # type: ignore[return-value]
    better = direction(metric)
    if better.better is None:
        raise BadRequest(f"not known whether a lower or a higher {metric} is better: say --goal min or --goal max")
    return (
        "min" if better.better == "lower" else "max"
    ), f"{'min' if better.better == 'lower' else 'max'} (by its name)"


def _at(at: str | int) -> int | None:
    if isinstance(at, int) and not isinstance(at, bool):
        step = at
    elif isinstance(at, str) and at.strip().lower() == "final":
        return None
    else:
        text = str(at).strip().lower().removeprefix("step").strip(" :=")
        if not text.isdigit():
            raise BadRequest(f"at={at!r}: the objective is read at the end (final) or at a step (e.g. at=500)")
        step = int(text)
    if step < 1:
        raise BadRequest(f"at={at!r}: a step is a whole number of at least 1")
    return step


def resolve_experiment(
    spec: JobSpec,
    req: ExperimentRequest,
    *,
    step_seconds: float | None,
    step_basis: str,
    search_seed: int,
) -> ExperimentPlan:
    """Check ``req`` against ``spec``; ``step_seconds`` is what a step of this job takes (learned from its runs, or
    declared), ``step_basis`` where that figure came from, ``search_seed`` the sampler's seed when none is asked."""
    seed_param = spec.seed_key
    items: list[Any] = list(req.space) if isinstance(req.space, list) else _items(req.space)
    space = parse_space(items, spec, seed_param=seed_param)
    if req.metric not in spec.reported_metrics:
        raise BadRequest(
            f"job {spec.name} never reports {req.metric!r}; it reports: {', '.join(spec.reported_metrics)}"
        )
    goal, rule = _goal(req.metric, req.goal)
    at_step = _at(req.at)
    seeds_n = _bounded(req.seeds, "seeds", 1, MAX_SEEDS)
    if seeds_n > 1 and seed_param is None:
        raise BadRequest(f"job {spec.name} has no seed parameter to repeat with: seeds must be 1")
    base = spec.params.get(seed_param, 0) if seed_param else 0
    base = base if isinstance(base, int) and not isinstance(base, bool) else 0
    seeds = tuple(base + i for i in range(seeds_n))
    if req.search not in SEARCHES:
        raise BadRequest(f"search {req.search!r} is not one labbot runs; searches: {', '.join(SEARCHES)}")
    if req.prune not in PRUNERS:
        raise BadRequest(f"prune {req.prune!r} is not a pruner labbot runs; pruners: {', '.join(PRUNERS)}")
    if req.search == "cmaes" and not any(d.kind != "choice" for d in space.dimensions):
        raise BadRequest("cmaes searches ranges: give at least one parameter as a range (uniform, loguniform, int)")
    if req.search == "grid":
        size = space.grid_size()
        trials = size if req.trials is None else _bounded(req.trials, "trials", 1, MAX_TRIALS)
        if trials > size:
            raise BadRequest(f"the grid has {size} configs: trials must be at most {size}")
    else:
        trials = DEFAULT_TRIALS if req.trials is None else _bounded(req.trials, "trials", 1, MAX_TRIALS)
    concurrency = _bounded(req.concurrency, "concurrency", 1, MAX_CONCURRENCY)
    purpose = spec.purpose if req.purpose is None else check_purpose(req.purpose)
    max_steps = _max_steps(spec, space)
    if at_step is not None and max_steps is not None and at_step > max_steps:
        raise BadRequest(f"at={at_step}: the runs take at most {max_steps} steps; read the objective at or before it")
    cpus = float(spec.cpus) if spec.cpus is not None else 1.0
    gpus = float(spec.gpus)
    budget = parse_budget(req.budget) if req.budget is not None else None
    if budget is not None and budget.unit == "gpu" and gpus <= 0:
        raise BadRequest(f"job {spec.name} uses no GPU: give the budget in CPU-hours (e.g. {budget.amount:g}cpu-h)")
    projection = project(
        budget, cpus=cpus, gpus=gpus, steps=max_steps, step_seconds=step_seconds, basis=step_basis,
        seeds=seeds_n, trials=trials,
    )  # fmt: skip
    if budget is not None and projection.trial_hours is not None and projection.trial_hours > budget.amount:
        raise BadRequest(
            f"budget {budget.words()} is smaller than one trial ({projection.trial_hours:.3g} {budget.unit.upper()}-h "
            f"projected: {seeds_n} seed(s) × {max_steps} steps × {step_seconds:.3g} s a step, {step_basis}): "
            "give at least that, or fewer seeds or steps"
        )
    return ExperimentPlan(
        job=spec.name,
        name=req.name or f"{spec.name} sweep",
        owner=req.owner,
        purpose=purpose or DEFAULT_PURPOSE,
        space=space,
        metric=req.metric,
        goal=goal,
        goal_rule=rule,
        at_step=at_step,
        window=req.window,
        trials=trials,
        concurrency=concurrency,
        seeds=seeds,
        seed_param=seed_param,
        search=req.search,
        prune=req.prune,
        budget=budget,
        projection=projection,
        max_steps=max_steps,
        search_seed=search_seed if req.search_seed is None else req.search_seed,
        resources=(cpus, gpus),
    )


def _items(space: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for name, expr in space.items():
        if isinstance(expr, list):
            expr = "[" + ",".join(str(v).lower() if isinstance(v, bool) else str(v) for v in expr) + "]"
        elif isinstance(expr, bool):
            expr = str(expr).lower()
        out.append((str(name), str(expr)))
    return out


def _max_steps(spec: JobSpec, space: Space) -> int | None:
    key = spec.steps_key
    if key is None:
        return None
    for d in space.dimensions:
        if d.name == key:
            largest = d.largest()
            return int(largest) if largest is not None else None
    value = space.fixed.get(key, spec.params[key])
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def project(
    budget: Budget | None,
    *,
    cpus: float,
    gpus: float,
    steps: int | None,
    step_seconds: float | None,
    basis: str,
    seeds: int,
    trials: int,
) -> Projection:
    unit = budget.unit if budget is not None else "cpu"
    per = gpus if unit == "gpu" else cpus
    if steps is None or step_seconds is None:
        why = "the job's steps are not known" if steps is None else "no run of the job has finished to learn from"
        return Projection(unit, None, None, None, None, f"unknown: {why}")
    run = per * steps * step_seconds / 3600.0
    trial = run * seeds
    allowed = None
    if budget is not None and trial > 0:
        allowed = min(trials, math.floor(budget.amount / trial + 1e-9))
    return Projection(unit, run, trial, trial * trials, allowed, basis)
