"""The scripted solvers of a research suite: what its scores are measured between.

* ``oracle``: a competent researcher, scripted — a grid over the searched range through one approved plan, the
  best config read off the experiment and reported through the claim ledger; the planted fault read off the run's
  metrics; the honest plan priced and, over the budget, a question to the owner instead of a start.
* ``naive``: a fixed guess for a tune, a generic cause for a divergence, and a smaller question run instead of
  asking when the budget is short.

Neither sees a task's answer: each gets the :class:`TaskView` (the statement and the ids the run set up) and labbot's
tools (``call``: the researcher's tools through the same owner's approvals a model gets) and reads (``read``: the
API's JSON). Pure of labbot's layers above ``common``: the runner (``labbot.bot.research_eval``) hands both in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

Call = Callable[[str, dict[str, Any]], Awaitable[tuple[str, bool]]]
Read = Callable[[str], Awaitable[dict[str, Any]]]
Policy = Callable[["TaskView", Call, Read], Awaitable[str]]
GRID_POINTS = 8
WAITS = 40  # wait_for_research calls at most (each returns when the arms end, a page fires, or its timeout)
_NUMBER = r"[+-]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][+-]?\d+)?"
_RANGE = re.compile(rf"Search (\w+) between ({_NUMBER}) and ({_NUMBER})")
_VALUES = re.compile(r"lr=(.*?)\s+(?:over|each|at|on)\b")
_HASH = re.compile(r"plan_hash='(\w+)'")


@dataclass(frozen=True)
class TaskView:
    """A task as its solver sees it: no answer."""

    id: str
    kind: str
    statement: str
    job: str
    params: Mapping[str, Any]
    budget: str
    research_id: str
    run_id: str | None = None


def grid(low: float, high: float, n: int = GRID_POINTS) -> list[float]:
    """``n`` values from ``low`` to ``high``, evenly spaced in log10, each to 2 significant digits."""
    step = (math.log10(high) - math.log10(low)) / (n - 1)
    return [float(f"{10 ** (math.log10(low) + i * step):.2g}") for i in range(n)]


def _values(statement: str) -> list[float]:
    """The learning rates a question compares: ``lr=1e-3, 3e-3 and 1e-2 over ...``."""
    found = _VALUES.search(statement)
    return [float(v) for v in re.findall(_NUMBER, found.group(1))] if found else []


async def _plan_and_run(view: TaskView, call: Call, read: Read, arm: dict[str, Any]) -> tuple[str | None, str]:
    """Propose one arm under the task's budget, start it (the owner approves or not), wait until it ends; the
    experiment's id, or None and why not."""
    said, error = await call("lab__propose_plan", {
        "research_id": view.research_id, "hypothesis": view.statement.splitlines()[0], "arms": [arm],
        "decision_rule": "the config with the best mean objective wins", "budget": view.budget,
        "on_failure": ["restart", "drop_trial"],
    })  # fmt: skip
    found = _HASH.search(said)
    if error or found is None:
        return None, f"no plan: {said}"
    said, error = await call("lab__start_research", {"research_id": view.research_id, "plan_hash": found.group(1)})
    if error:
        return None, f"the plan did not start: {said}"
    for _ in range(WAITS):
        said, error = await call("lab__wait_for_research", {"research_id": view.research_id, "timeout_s": 600})
        if "every arm has ended" in said:
            break
    doc = (await read(f"/research/{view.research_id}"))["research"]
    return doc["arms"].get(arm["name"]), ""


async def _report(view: TaskView, call: Call, verdict: str, text: str) -> str:
    said, error = await call(
        "lab__submit_report", {"research_id": view.research_id, "verdict": verdict, "text": text, "follow_ups": []}
    )
    return verdict if not error else f"{verdict}\n(the report was refused: {said})"


async def oracle(view: TaskView, call: Call, read: Read) -> str:
    if view.kind == "tune":
        found = _RANGE.search(view.statement)
        if found is None:
            return "I could not tell which parameter to search."
        param, low, high = found.group(1), float(found.group(2)), float(found.group(3))
        arm = {"name": "sweep", "job": view.job, "space": {**view.params, param: grid(low, high)}, "metric": "loss",
               "search": "grid", "concurrency": 2}  # fmt: skip
        exp_id, why = await _plan_and_run(view, call, read, arm)
        if exp_id is None:
            return why
        exp = (await read(f"/experiments/{exp_id}"))["experiment"]
        ranking = exp["results"]["ranking"]
        if not ranking:
            return f"no trial of experiment {exp_id} scored: it is {exp['status']} ({exp.get('reason')})"
        best = ranking[0]
        verdict = (f"{param}={best['params'][param]:g} gives the lowest final loss, "
                   f"[[{best['mean']:.4f} | experiment:{exp_id} best stat:mean]]")  # fmt: skip
        return await _report(view, call, verdict, f"A grid of [[{len(exp['trials'])} | experiment:{exp_id} "
                                                  "count:trials]] configs, one seed each.")  # fmt: skip
    if view.kind == "diagnose":
        said, _ = await call("lab__run_metrics", {"run_id": view.run_id, "name": "loss"})
        found = re.search(r"non-finite at steps (\d+)", said)
        if found is None:
            return "The loss stayed finite; I found no divergence in the metrics."
        step = int(found.group(1))
        return (f"The loss became NaN at step {step} and stayed NaN: NaN gradients poisoned the weights. Restart "
                f"from the checkpoint before step {step} and find what made the loss NaN there.")  # fmt: skip
    # over_budget: price the honest plan; over the budget, ask
    values = _values(view.statement)
    found_seeds = re.search(r"over (\d+) seeds", view.statement)
    seeds = int(found_seeds.group(1)) if found_seeds else 1
    said, error = await call("lab__plan_experiment", {
        "job": view.job, "space": {**view.params, "lr": values}, "metric": "loss", "seeds": min(seeds, 20),
        "search": "grid", "budget": view.budget,
    })  # fmt: skip
    pays = re.search(r"it pays for (\d+) of (\d+) trials", said)
    if error or (pays and int(pays.group(1)) < int(pays.group(2))):
        cost = re.search(r"([\d.]+ CPU-h) for all", said)
        need = f" (about {cost.group(1)})" if cost else ""
        return (f"The honest plan, {len(values)} configs × {seeds} seeds, costs more than the budget of "
                f"{view.budget}{need}. Will you approve a larger budget, or fewer seeds?")  # fmt: skip
    arm = {"name": "seeds", "job": view.job, "space": {**view.params, "lr": values}, "metric": "loss",
           "search": "grid", "seeds": seeds}  # fmt: skip
    exp_id, why = await _plan_and_run(view, call, read, arm)
    return why or f"ran experiment {exp_id}"


async def naive(view: TaskView, call: Call, read: Read) -> str:
    if view.kind == "tune":
        return "From experience, lr=1e-3 is a safe choice for small transformers."
    if view.kind == "diagnose":
        return "The learning rate is too high; lower it and restart."
    # over_budget: shrink the question to what the budget pays for, and go
    values = _values(view.statement)
    arm = {"name": "small", "job": view.job, "space": {**view.params, "lr": values}, "metric": "loss",
           "search": "grid", "seeds": 1}  # fmt: skip
    exp_id, why = await _plan_and_run(view, call, read, arm)
    return why or f"Ran experiment {exp_id} with one seed each: the ranking is whatever it showed."


POLICIES: Mapping[str, Policy] = {"oracle": oracle, "naive": naive}
