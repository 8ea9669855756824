"""Human output of the CLI: run tables, run details, pages and the audit trail (pure functions of the API's JSON)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from labbot.common.durations import format_duration


def age(iso: str | None, now: datetime | None = None) -> str:
    if not iso:
        return "-"
    seconds = ((now or datetime.now(UTC)) - datetime.fromisoformat(iso)).total_seconds()
    return format_duration(seconds, unknown="-")


def metric(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value  # NaN / Infinity as the API carries them
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


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
        ("attempt", str(r["attempt"])),
        ("step", "-" if r["step"] is None else str(r["step"])),
        ("checkpoint", "-" if r.get("checkpoint_step") is None else f"step {r['checkpoint_step']}"),
        ("ray job", r.get("ray_submission_id") or "-"),
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
