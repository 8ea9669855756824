"""An experiment in text: its plan and projected cost (what an approval shows), the one-line counts a card shows, its
trials, and the ranking of its configs with intervals and the verdict. Pure functions of the API's JSON, shown by
the CLI (``labbot sweep``, ``labbot experiment``), Slack (``/lab sweep``, an experiment's thread) and the ``lab`` MCP
server alike — which is why it lives in ``common``, below all three (the MCP servers import nothing of ``bot``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from labbot.common.text_tables import metric, table


def _param(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def params_words(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={_param(v)}" for k, v in params.items()) or "-"


def hours(value: float | None, unit: str) -> str:
    if value is None:
        return "unknown"
    return f"{value:.3g} {unit.upper()}-h"


def objective_words(objective: Mapping[str, Any]) -> str:
    at = (
        f"at step {objective['at_step']}" if objective.get("at_step") else f"over its last {objective['window']} values"
    )
    return f"{objective['goal']} {objective['metric']} {at} ({objective.get('goal_rule') or objective['goal']})"


def plan_text(doc: Mapping[str, Any]) -> str:
    """An experiment's plan before it starts (``POST /api/v1/experiments/plan``, an agent's approval): what it runs,
    how many, and what it is projected to cost against its budget."""
    proj, budget = doc["projection"], doc.get("budget")
    seeds = doc["seeds"]
    lines = [
        f"experiment: {doc.get('name') or doc['job']} — job {doc['job']}, {doc['trials']} trials "
        f"× {len(seeds)} seed(s), {doc['concurrency']} at a time",
        f"space: {' '.join(doc.get('space_words') or [])}",
        f"objective: {objective_words(doc['objective'])}",
        f"search: {doc['search']}, pruner: {doc['prune']}",
        f"runs: up to {doc['trials'] * len(seeds)} (seeds {', '.join(map(str, seeds))})",
    ]
    unit = proj["unit"]
    if proj.get("trial_hours") is None:
        lines.append(f"projected cost: {proj['basis']}")
    else:
        lines.append(
            f"projected cost: {hours(proj['trial_hours'], unit)} a trial, {hours(proj['total_hours'], unit)} for all "
            f"(a step's time {proj['basis']})"
        )
    if budget:
        allowed = proj.get("trials_allowed")
        pays = f"; it pays for {allowed} of {doc['trials']} trials" if allowed is not None else ""
        lines.append(f"budget: {budget['amount']:g} {budget['unit'].upper()}-h{pays}")
    else:
        lines.append("budget: none (the trials limit ends it)")
    return "\n".join(lines)


def counts_words(doc: Mapping[str, Any]) -> str:
    c = doc["counts"]
    parts = [f"{c['done']} done", f"{c['running']} running", f"{c['pruned']} pruned", f"{c['queued']} queued",
             f"{c['failed']} failed"]  # fmt: skip
    if c.get("stopped"):
        parts.append(f"{c['stopped']} stopped")
    parts.append(f"{c['not_started']} to go")
    return ", ".join(parts)


def budget_words(doc: Mapping[str, Any]) -> str:
    used = doc["budget_used"]
    budget = doc.get("budget")
    if budget:
        return f"{hours(used['amount'], used['unit'])} of {budget['amount']:g} {budget['unit'].upper()}-h used"
    return f"{hours(used['amount'], used['unit'])} used (no budget)"


def best_words(doc: Mapping[str, Any]) -> str:
    best = doc["results"]["best"]
    if best is None:
        return "best so far: none scored yet"
    interval = f" [{best['low']:.4g}, {best['high']:.4g}]" if best.get("low") is not None else " (one seed)"
    metric_name = doc["objective"]["metric"]
    return f"best so far: #{best['trial']} {params_words(best['params'])} → {metric_name} {best['mean']:.4g}{interval}"


def summary_text(doc: Mapping[str, Any]) -> str:
    """The header of ``labbot experiment ID`` and an experiment's card: status, counts, budget, best."""
    reason = f" ({doc['reason']})" if doc.get("reason") else ""
    lines = [
        f"experiment {doc['id']} {doc['name']} — {doc['status']}{reason}",
        f"job {doc['job']}, {doc['search']} search, {doc['prune']} pruning; objective: "
        f"{objective_words(doc['objective'])}",
        f"trials: {counts_words(doc)}",
        budget_words(doc),
        best_words(doc),
    ]
    return "\n".join(lines)


def trials_table(trials: Sequence[Mapping[str, Any]], metric_name: str) -> str:
    if not trials:
        return "no trials yet"
    rows = []
    for t in trials:
        runs = " ".join(r["id"] for r in t["runs"]) or "-"
        note = t.get("reason") or ""
        rows.append([f"#{t['number']}", t["status"], params_words(t["params"]), metric(t["value"]), runs, note[:80]])
    return table(["trial", "status", "params", metric_name, "runs", "why"], rows)


def ranking_text(doc: Mapping[str, Any]) -> str:
    """The scored configs, best first, with each one's interval across seeds, and the verdict between the top two."""
    results = doc["results"]
    ranking = results["ranking"]
    if not ranking:
        return "no config scored"
    rows = []
    for i, r in enumerate(ranking, 1):
        interval = f"[{r['low']:.4g}, {r['high']:.4g}]" if r.get("low") is not None else "-"
        rows.append([str(i), f"#{r['trial']}", params_words(r["params"]), f"{r['mean']:.4g}", interval, str(r["n"])])
    lines = [table(["rank", "trial", "params", doc["objective"]["metric"], "95% interval", "seeds"], rows)]
    if results.get("verdict"):
        lines.append(f"best vs runner-up: {results['verdict']['words']}")
    return "\n".join(lines)


def experiment_text(doc: Mapping[str, Any]) -> str:
    return "\n\n".join([summary_text(doc), trials_table(doc["trials"], doc["objective"]["metric"]), ranking_text(doc)])


def experiments_table(docs: Sequence[Mapping[str, Any]]) -> str:
    if not docs:
        return "no experiments yet: start one with `labbot sweep JOB SPACE… --metric M`"
    rows = [[d["id"], d["name"], d["job"], d["status"], d["search"], d["prune"], str(d["trials_limit"]), d["owner"]]
            for d in docs]  # fmt: skip
    return table(["id", "name", "job", "status", "search", "prune", "trials", "owner"], rows)
