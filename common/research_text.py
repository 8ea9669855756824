"""A research question in text: its plan with the price and what cannot be undone (what its approval shows), its
state (each arm's experiment in a line), and its report. Pure functions of ``/api/v1/research``'s JSON, shown by the
``lab`` MCP server, Slack and the CLI alike — which is why it lives in ``common`` (the MCP servers import nothing of
``bot``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labbot.common.experiment_text import hours

FAILURE_WORDS = {
    "restart": "restart a run of the plan from its checkpoint",
    "drop_trial": "drop (stop) a failing trial",
    "stop_arm": "stop an arm",
    "stop": "stop everything and report what it has",
}


def _space(space: Mapping[str, Any]) -> str:
    bits = []
    for d in space.get("dimensions", []):
        if d["kind"] == "choice":
            bits.append(f"{d['name']}=[{','.join(str(v) for v in d['values'])}]")
        else:
            bits.append(f"{d['name']}={d['kind']}({d['low']:g},{d['high']:g})")
    bits += [f"{k}={v}" for k, v in (space.get("fixed") or {}).items()]
    return " ".join(bits)


def _money(amount: float, currency: str) -> str:
    return f"{amount:,.2f} {currency}"


def plan_text(doc: Mapping[str, Any], *, pending: bool = True) -> str:
    """The question's plan as proposed (``pending``) or as approved: hypothesis, arms, decision rule, failure
    actions, publishing, the projected cost against the budget, what cannot be undone and, for a change to an
    approved plan, what grows. This is what an approval of ``start_research`` shows."""
    plan = doc["plan"] if pending else doc["approved"]
    if plan is None:
        return f"research {doc['id']}: no plan {'proposed' if pending else 'approved'} yet"
    scope, proj = plan["scope"], plan["projection"]
    unit = proj["unit"]
    lines = [
        f"research {doc['id']} — {doc['question']}",
        f"plan {plan['hash']} (asked by {doc['owner']})",
        f"hypothesis: {scope['hypothesis']}",
    ]
    by_arm = {a["name"]: a for a in proj["arms"]}
    for arm in scope["arms"]:
        cost = by_arm.get(arm["name"], {})
        lines.append(
            f"• arm {arm['name']}: {arm['job']} over {_space(arm['space'])}; {arm['goal']} {arm['metric']}; "
            f"{arm['trials']} trials × {arm['seeds']} seed(s), {arm['concurrency']} at a time, {arm['search']} "
            f"search, pruner {arm['prune']}; projected {hours(cost.get('projected'), unit)}, its budget "
            f"{hours(cost.get('budget'), unit)}"
        )
    lines.append(f"decision rule: {scope['decision_rule']}")
    actions = "; ".join(FAILURE_WORDS.get(a, a) for a in scope["on_failure"]) or "none (it asks)"
    lines.append(f"on a failure it may: {actions}")
    where = ", ".join(["this thread", *(f"a {p.title()} {'page' if p == 'notion' else 'issue per follow-up'}"
                                         for p in scope["publish"])])  # fmt: skip
    lines.append(f"the answer goes to: {where}; every number in it checked against labbot's store first")
    projected = hours(proj.get("projected"), unit) if proj.get("projected") is not None else "unknown"
    money = proj.get("money") or {}
    spend = (
        f" ≈ {_money(float(money['projected']), money['currency'])}"
        if money and money.get("projected") is not None
        else ""
    )
    cap = f" ≈ {_money(money['cap'], money['currency'])}" if money else ""
    lines.append(
        f"cost: projected {projected}{spend} for all {proj['runs']} runs; capped at the budget, "
        f"{scope['budget']['amount']:g} {unit.upper()}-h{cap}"
    )
    lines.append(
        f"cannot be undone: up to {scope['budget']['amount']:g} {unit.upper()}-h of compute spent, "
        f"{proj['runs']} runs launched as {doc['owner']}"
        + (", pages and issues written outside labbot" if scope["publish"] else "")
    )
    grows = (doc.get("pending") or {}).get("grows") if pending else None
    if doc.get("approved") is not None and pending and grows:
        lines.append("this change needs approval because: " + "; ".join(grows))
    return "\n".join(lines)


def research_text(doc: Mapping[str, Any]) -> str:
    """A question's state: status, plan hashes, each arm's experiment, the budget used, the report's verdict."""
    lines = [f"research {doc['id']} · {doc['status']} · asked by {doc['owner']}: {doc['question']}"]
    if doc.get("approved_hash"):
        lines.append(f"approved plan {doc['approved_hash']}")
    pending = doc.get("pending")
    if pending:
        lines.append(f"plan {pending['hash']} waits for approval: {'; '.join(pending['grows'])}")
    unit = ((doc.get("approved") or doc.get("plan") or {}).get("projection") or {}).get("unit", "cpu")
    for arm in doc.get("arm_states", []):
        c = arm["counts"]
        best = arm.get("best")
        best_words = f"; best so far {best['params']} at {best['mean']:.4g}" if best else ""
        lines.append(
            f"• arm {arm['name']} (experiment {arm['experiment']}): {arm['status']} — {c['done']} done, "
            f"{c['running']} running, {c['pruned']} pruned, {c['failed']} failed; "
            f"{hours(arm['budget_used']['amount'], unit)} used{best_words}"
            + (f" ({arm['reason']})" if arm.get("reason") and arm["status"] != "running" else "")
        )
    if doc.get("arm_states"):
        lines.append(f"budget used: {hours(doc['budget_used'], unit)}; every arm ended: {doc['all_ended']}")
    report = doc.get("report")
    if report:
        c = report["counts"]
        lines.append(f"report ({report['status']}): {report['verdict']} — {c['ok']} claim(s) checked")
    if doc.get("reason"):
        lines.append(f"why: {doc['reason']}")
    return "\n".join(lines)
