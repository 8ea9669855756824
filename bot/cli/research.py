"""``labbot research [ID [close]]``: research questions — newest first, or one in full (its plan as approved and
any change waiting for approval, each arm's experiment, the checked report), or closed with no report (its running
arms stopped). Questions are asked in Slack (``/lab research``), where the researcher answers. A client of
``/api/v1/research``."""

from __future__ import annotations

import argparse
from typing import Any

from labbot.bot.cli.output import print_json
from labbot.common.api_client import ApiClient, api_path, check_id, me
from labbot.common.research_text import plan_text, research_text
from labbot.common.text_tables import table


def add_parser(sub: Any) -> None:
    s = sub.add_parser("research", help="research questions; with an id, one in full; `ID close` ends it unanswered")
    s.set_defaults(func=_research)
    s.add_argument("id", nargs="?", help="a research question's id, as `labbot research` lists them")
    s.add_argument("action", nargs="?", choices=("close",), help="close: end it with no report, its arms stopped")
    s.add_argument("--limit", type=int, default=20)
    s.add_argument("--json", action="store_true")


def _research(api: ApiClient, a: argparse.Namespace) -> int:
    if a.id is None:
        found = api.json("GET", "/research", params={"limit": a.limit})["research"]
        if a.json:
            print_json(found)
        elif not found:
            print("no research questions yet: ask one in Slack with `/lab research QUESTION`")
        else:
            rows = [[r["id"], r["status"], r["owner"], r["created_at"][:10], r["question"][:60]] for r in found]
            print(table(["id", "status", "owner", "date", "question"], rows))
        return 0
    path = api_path("research", check_id("research", a.id))
    if a.action == "close":
        doc = api.json("POST", f"{path}/close", params={"by": me()})["research"]
    else:
        doc = api.json("GET", path)["research"]
    if a.json:
        print_json(doc)
        return 0
    print(research_text(doc))
    if doc.get("approved"):
        print("\n" + plan_text(doc, pending=False))
    if doc.get("report"):
        print(f"\n{doc['report']['verdict']}\n\n{doc['report']['text']}")
        for key, link in (doc["report"].get("links") or {}).items():
            print(f"{key}: {link.get('url') or link.get('ts') or link.get('error')}")
    return 0
