"""``labbot feedback`` and ``labbot ab``: people's votes, and the A/B report of the agents' models (clients of
``/api/v1/feedback`` and ``/api/v1/ab``; the text is ``labbot.bot.render.feedback``'s)."""

from __future__ import annotations

import argparse
from typing import Any

from labbot.bot.cli.output import print_json
from labbot.bot.render.feedback import ab_text, feedback_table
from labbot.common.api_client import ApiClient


def add_parser(sub: Any) -> None:
    s = sub.add_parser("feedback", help="people's votes on agents' answers, run cards and eval results, newest first")
    s.set_defaults(func=_feedback)
    s.add_argument("--kind", choices=("answer", "run", "eval"), help="only votes on this kind of message")
    s.add_argument("--vote", choices=("up", "down"), help="only 👍 (up) or 👎 (down)")
    s.add_argument("--model", metavar="M", help="only votes on answers by model M")
    s.add_argument("--run", metavar="RUN_ID", help="only votes about this run")
    s.add_argument("--limit", type=int, default=50, metavar="N", help="at most N rows (default: 50)")
    s.add_argument("--json", action="store_true", help="print the rows as one JSON list")

    s = sub.add_parser("ab", help="the A/B test of the agents' models: each arm's 👍 rate with its 95%% interval")
    s.set_defaults(func=_ab)
    s.add_argument("--json", action="store_true")


def _feedback(api: ApiClient, a: argparse.Namespace) -> int:
    q = {"limit": a.limit, "kind": a.kind, "vote": a.vote, "model": a.model, "run": a.run}
    rows = api.json("GET", "/feedback", params={k: v for k, v in q.items() if v is not None})["feedback"]
    print_json(rows) if a.json else print(feedback_table(rows))
    return 0


def _ab(api: ApiClient, a: argparse.Namespace) -> int:
    doc = api.json("GET", "/ab")["ab"]
    print_json(doc) if a.json else print(ab_text(doc))
    return 0
