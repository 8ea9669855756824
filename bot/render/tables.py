"""Text tables of runs, pages, the audit trail and compute by purpose: pure functions of the API's JSON, shown by the
CLI (``labbot runs``, ``labbot pages``, ...) and in Slack (``/lab runs``, ``/lab capacity``) alike."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from labbot.common.durations import format_duration
from labbot.common.text_tables import metric, table
from labbot.common.words import counted

__all__ = ["age", "metric", "table"]  # metric and table live in common (the MCP servers use them too)


def age(iso: str | None, now: datetime | None = None) -> str:
    if not iso:
        return "-"
    seconds = ((now or datetime.now(UTC)) - datetime.fromisoformat(iso)).total_seconds()
    return format_duration(seconds, unknown="-")


def runs_table(runs: Sequence[dict[str, Any]]) -> str:
    """``labbot runs`` (and ``/lab runs``): one row per run. The metric column is loss while every run shown reports
    loss first; once a run's job names another headline metric it is ``headline``, each cell naming its metric."""
    if not runs:
        return "no runs yet — launch one with `labbot launch tiny-lm`"
    only_loss = all((r.get("headline") or "loss") == "loss" for r in runs)

    def headline(r: dict[str, Any]) -> str:
        name = r.get("headline") or "loss"
        value = metric(r["metrics"].get(name))
        return value if only_loss else f"{name} {value}"

    rows = [
        [
            r["id"],
            r["job"],
            r["name"],
            r["status"],
            str(r["attempt"]),
            "-" if r["step"] is None else str(r["step"]),
            headline(r),
            metric(r["metrics"].get("tokens_per_s")),
            r["owner"],
            age(r["created_at"]),
        ]
        for r in runs
    ]
    column = "loss" if only_loss else "headline"
    return table(["id", "job", "name", "status", "attempt", "step", column, "tok/s", "owner", "age"], rows)


def run_details(r: dict[str, Any]) -> str:
    fields = [
        ("run", f"{r['id']}  ({r['name']})"),
        ("job", r["job"]),
        ("status", r["status"] + (f" — {r['error']}" if r.get("error") else "")),
        ("owner", r["owner"]),
        ("purpose", queue_words(r) or str(r.get("purpose") or "training")),
        ("attempt", str(r["attempt"])),
        ("step", "-" if r["step"] is None else str(r["step"])),
        ("checkpoint", "-" if r.get("checkpoint_step") is None else f"step {r['checkpoint_step']}"),
        ("ray job", "- (queued: not on Ray yet)" if r["status"] == "queued" else r.get("ray_submission_id") or "-"),
        ("params", " ".join(f"{k}={v}" for k, v in r.get("params", {}).items()) or "-"),
        ("created", f"{r['created_at']} ({age(r['created_at'])} ago)"),
        ("last telemetry", "-" if not r.get("last_telemetry_at") else f"{age(r['last_telemetry_at'])} ago"),
    ]
    for name, value in sorted(r["metrics"].items()):
        fields.append((name, metric(value)))
    width = max(len(k) for k, _ in fields)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in fields)


def pages_table(pages: Sequence[dict[str, Any]], now: datetime | None = None) -> str:
    """``labbot pages``: one row per page, newest first."""
    if not pages:
        return "no open pages (labbot pages --all shows resolved ones)"
    rows = [
        [
            p["id"],
            p["kind"],
            p.get("run_id") or "(cluster)",
            p["state"],
            str(p.get("escalation_level", 0)),
            age(p.get("triggered_at"), now),
            p.get("acknowledged_by") or p.get("resolved_by") or "",
            str(p.get("summary", ""))[:80],
        ]
        for p in pages
    ]
    return table(["page", "kind", "run", "state", "level", "age", "by", "summary"], rows)


def call_duration(ms: float | None) -> str:
    """A tool call's duration (the API gives milliseconds)."""
    return "-" if ms is None else format_duration(ms / 1000, unknown="-")


def utc_time(iso: str | None) -> str:
    if not iso:
        return "-"
    return datetime.fromisoformat(iso).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def audit_table(calls: Sequence[dict[str, Any]], agent: str | None = None) -> str:
    """``labbot audit``: one row per tool call, newest first, as ``/api/v1/audit`` answers them."""
    if not calls:
        return f"no tool calls by agent {agent} recorded" if agent else "no tool calls recorded yet"
    rows = [
        [
            utc_time(c.get("started_at")),
            c["agent"],
            c["role"],
            c["tool"],
            c["outcome"],
            c.get("approver") or "-",
            call_duration(c.get("duration_ms")),
        ]
        for c in calls
    ]
    return table(["time", "agent", "role", "tool", "outcome", "approver", "duration"], rows)


# -- compute by purpose (labbot capacity, /lab capacity, labbot priority) ------------------------------------------


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def queue_words(run: dict[str, Any]) -> str | None:
    """A queued run's place: "2nd in line for training"; None for a run that is not queued."""
    place = run.get("queue_position")
    if run.get("status") != "queued" or not isinstance(place, int):
        return None
    return f"{ordinal(place)} in line for {run.get('purpose') or 'training'}"


def priority_words(run: dict[str, Any]) -> str:
    """What a priority change did: the queued run's new place, or that it changes nothing now."""
    where = queue_words(run)
    if where:
        return f"priority {run['priority']}: now {where}"
    return (
        f"priority {run['priority']} kept, but it only orders the queue: the run is {run['status']}, "
        "so nothing changes now"
    )


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


def _count(value: float | None, noun: str) -> str:
    """``_num`` with its noun, singular for exactly one: "1 CPU", "2.5 CPUs"."""
    return f"{_num(value)} {noun}" + ("" if value == 1 else "s")


def capacity_text(doc: dict[str, Any]) -> str:
    """``labbot capacity``: the cluster, then per purpose its use against each cap, who uses it, and its queue."""
    cluster = doc.get("cluster")
    use = doc.get("use") or {}
    lines = [
        (
            f"cluster: {_count(cluster['cpus'], 'CPU')}, {_count(cluster['gpus'], 'GPU')} (Ray's view)"
            if cluster
            else f"cluster: unknown ({doc.get('cluster_error') or 'Ray did not answer'})"
        )
        + f"; labbot's runs on it: {counted(use.get('runs', 0), 'run')}, {_count(use.get('cpus', 0), 'CPU')}, "
        f"{_count(use.get('gpus', 0), 'GPU')}"
    ]
    nodes = (cluster or {}).get("nodes") or []
    if len(nodes) > 1:  # where a run can go: an ask must fit one node's resources
        for node in nodes:
            have = ", ".join(f"{k}={_num(v)}" for k, v in sorted((node.get("resources") or {}).items())) or "nothing"
            head = ", head" if node.get("head") else ""
            lines.append(f"  node {node.get('name')} ({str(node.get('id'))[:8]}{head}): {have}")
    if not doc.get("caps_set"):
        lines.append("no [compute] caps are set: every launch goes to Ray at once (labbot.toml [compute.PURPOSE])")
    purposes = doc.get("purposes") or []
    if purposes:

        def of(p: dict[str, Any], key: str) -> str:
            limit = p["limits"][key]
            return f"{_num(p['use'][key])}/{_num(limit) if limit is not None else '-'}"

        rows = []
        for p in purposes:
            users: dict[str, list[str]] = {}
            for r in p["running"]:
                users.setdefault(r["owner"], []).append(r["run_id"])
            who = ", ".join(f"{o} ({' '.join(ids)})" for o, ids in sorted(users.items())) or "-"
            rows.append([p["purpose"] + ("" if p["capped"] else " (no cap)"), of(p, "runs"), of(p, "cpus"),
                         of(p, "gpus"), str(len(p["queued"])), who])  # fmt: skip
        lines += ["", table(["purpose", "runs", "cpus", "gpus", "queued", "used by"], rows)]
    queued = [(p["purpose"], i, q) for p in purposes for i, q in enumerate(p["queued"], 1)]
    if queued:
        lines += ["", "queued, in order:"]
        for purpose, i, q in queued:
            ask = f"{_num(q['cpus'])} CPUs" + (f", {_num(q['gpus'])} GPUs" if q["gpus"] else "")
            lines.append(f"  {purpose} {ordinal(i)}: {q['run_id']}  {q['owner']}  asks {ask}")
    return "\n".join(lines)
