"""``labbot feedback`` and ``labbot ab``: people's votes, and the A/B report of the agents' models (clients of
``/api/v1/feedback`` and ``/api/v1/ab``); the text renderers ``/lab feedback``, ``/lab ab`` and
``/lab eval from-feedback`` share."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from labbot.bot.cli import render
from labbot.common.api_client import ApiClient


def add_parser(sub: Any) -> None:
    s = sub.add_parser("feedback", help="people's votes on agents' answers, run cards and eval results, newest first")
    s.add_argument("--kind", choices=("answer", "run", "eval"), help="only votes on this kind of message")
    s.add_argument("--vote", choices=("up", "down"), help="only 👍 (up) or 👎 (down)")
    s.add_argument("--model", metavar="M", help="only votes on answers by model M")
    s.add_argument("--run", metavar="RUN_ID", help="only votes about this run")
    s.add_argument("--limit", type=int, default=50, metavar="N", help="at most N rows (default: 50)")
    s.add_argument("--json", action="store_true", help="print the rows as one JSON list")

    s = sub.add_parser("ab", help="the A/B test of the agents' models: each arm's 👍 rate with its 95%% interval")
    s.add_argument("--json", action="store_true")


def run(api: ApiClient, a: argparse.Namespace, *, print_json: Any) -> int:
    if a.command == "feedback":
        q = {"limit": a.limit, "kind": a.kind, "vote": a.vote, "model": a.model, "run": a.run}
        rows = api.json("GET", "/feedback", params={k: v for k, v in q.items() if v is not None})["feedback"]
        print_json(rows) if a.json else print(feedback_table(rows))
        return 0
    doc = api.json("GET", "/ab")["ab"]
    print_json(doc) if a.json else print(ab_text(doc))
    return 0


def _about(row: dict[str, Any]) -> str:
    if row["kind"] == "answer":
        who = "/".join(x for x in (row.get("role"), row.get("model")) if x)
        arm = f" (arm {row['ab_arm']})" if row.get("ab_arm") else ""
        return f"answer by {who}{arm}" + (f" · run {row['run_id']}" if row.get("run_id") else "")
    return f"{'eval run' if row['kind'] == 'eval' else 'run'} {row.get('run_id') or '?'}"


def feedback_table(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "no feedback yet: 👍/👎 under an agent's answer, or a 👍/👎 reaction on a run card or eval results"
    table = render.table(
        ["id", "vote", "by", "on", "when", "comment"],
        [
            [
                r["id"],
                "👍" if r["vote"] == "up" else "👎",
                r["user"],
                _about(r),
                render.age(r["updated_at"]),
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
        render.table(
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
