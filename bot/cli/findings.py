"""``labbot findings [WORDS...]`` and ``labbot finding ID``: what the lab learned — every ended experiment's finding
and those agents recorded — searched by words (newest first without any), or one in full. A client of
``/api/v1/findings``."""

from __future__ import annotations

import argparse
from typing import Any

from labbot.bot.cli.output import print_json
from labbot.common.api_client import ApiClient, api_path, check_id
from labbot.common.text_tables import table


def add_parser(sub: Any) -> None:
    s = sub.add_parser("findings", help="what the lab learned, best match for WORDS first (newest first without)")
    s.set_defaults(func=_findings)
    s.add_argument("words", nargs="*", help="words of a question, e.g. tiny-lm lr loss")
    s.add_argument("--limit", type=int, default=10)
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("finding", help="one finding: question, verdict, summary, its claims as checked, links")
    s.set_defaults(func=_finding)
    s.add_argument("id", help="a finding id from `labbot findings`")
    s.add_argument("--json", action="store_true")


def _findings(api: ApiClient, a: argparse.Namespace) -> int:
    found = api.json("GET", "/findings", params={"q": " ".join(a.words), "limit": a.limit})["findings"]
    if a.json:
        print_json(found)
    elif not found:
        print("no findings match" if a.words else "no findings yet: every experiment that ends leaves one")
    else:
        rows = [[f["id"], f["status"], f["created_at"][:10], f["question"][:70]] for f in found]
        print(table(["id", "status", "date", "question"], rows))
    return 0


def _finding(api: ApiClient, a: argparse.Namespace) -> int:
    f = api.json("GET", api_path("findings", check_id("finding", a.id)))["finding"]
    if a.json:
        print_json(f)
        return 0
    print(f"{f['id']} · {f['status']} · {f['kind']} · {f['owner']} · {f['created_at']}\n{f['question']}\n")
    print(f"{f['verdict']}\n\n{f['summary']}\n")
    checked = ", ".join(f"{c['value']} ({c['verdict']})" for c in f["claims"]) or "none"
    print(f"claims checked when recorded: {checked}")
    for key, value in f["links"].items():
        print(f"{key}: {value}")
    return 0
