"""People's votes and the A/B report of the agents' models in words: the feedback table, the A/B report's table and
verdict, a case made from a 👎. Pure functions of ``/api/v1/feedback``' and ``/api/v1/ab``'s JSON, shown by
``labbot feedback``, ``labbot ab``, ``labbot eval from-feedback`` and their ``/lab`` commands alike."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from labbot.bot.render import tables


def _about(row: dict[str, Any]) -> str:
    if row["kind"] == "answer":
        who = "/".join(x for x in (row.get("role"), row.get("model")) if x)
        arm = f" (arm {row['ab_arm']})" if row.get("ab_arm") else ""
        return f"answer by {who}{arm}" + (f" · run {row['run_id']}" if row.get("run_id") else "")
    return f"{'eval run' if row['kind'] == 'eval' else 'run'} {row.get('run_id') or '?'}"


def feedback_table(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "no feedback yet: 👍/👎 under an agent's answer, or a 👍/👎 reaction on a run card or eval results"
    table = tables.table(
        ["id", "vote", "by", "on", "when", "comment"],
        [
            [
                r["id"],
                "👍" if r["vote"] == "up" else "👎",
                r["user"],
                _about(r),
                tables.age(r["updated_at"]),
                ((r.get("comment") or "")[:60] + ("…" if len(r.get("comment") or "") > 60 else ""))
                + (f" [case {r['case']}]" if r.get("case") else ""),
            ]
            for r in rows
        ],
    )
    return table


def _rate(arm: dict[str, Any]) -> str:
    if not arm["votes"]:
        return "no votes"
    low, high = arm["interval"]
    return f"{arm['up_rate']:.0%} 👍 [{low:.0%}, {high:.0%}]"


def ab_text(doc: dict[str, Any]) -> str:
    """The A/B report as a table and the verdict in plain words."""
    if not doc.get("configured"):
        return str(doc.get("message"))
    arms = doc["arms"]
    lines = [
        tables.table(
            ["arm", "model", "votes", "👍 rate (95% interval)", "answers", "model calls", "tokens", "seconds"],
            [
                [
                    a["arm"],
                    a["model"],
                    f"{a['up']}👍 {a['down']}👎",
                    _rate(a),
                    str(a["answers"]),
                    f"{a['model_calls_per_answer']:.1f}",
                    f"{a['tokens_per_answer']:,.0f}",
                    f"{a['seconds_per_answer']:.1f}",
                ]
                for a in arms
            ],
        ),
        "(model calls, tokens and seconds are per answer)",
        "",
    ]
    if doc.get("difference") is not None:
        low, high = doc["interval"]
        lines.append(f"B − A: {doc['difference']:+.1%} 👍, 95% interval [{low:+.1%}, {high:+.1%}]")
    lines.append(f"{doc['verdict']}: {doc['why']}")
    more = doc.get("more_votes_needed") or {}
    if more.get("per_arm"):
        lines.append(f"roughly {more['per_arm']} more votes per arm: {more['note']}")
    elif more.get("note"):
        lines.append(more["note"])
    return "\n".join(lines)


def feedback_case_text(made: dict[str, Any]) -> str:
    """What ``eval from-feedback`` made: the case (the question, what it is scored on) and its suite."""
    case, suite = made["case"], made["suite"]
    question = str(case.get("question") or "")
    return "\n".join(
        [
            f"case {case['id']}: {question[:120]}{'…' if len(question) > 120 else ''}",
            f"  {len(case.get('context') or [])} tool results kept (secrets redacted); the answer marked 👎 was "
            f"{(case.get('answered_by') or {}).get('model') or 'the agent'}'s",
            f"  scored against what the researcher said was wrong: {case['cause']}",
            f"suite {suite['suite']}: {suite['tasks']} cases (incidents and feedback) — run it with "
            f"`labbot eval run {suite['suite']} --solver agent`",
        ]
    )
