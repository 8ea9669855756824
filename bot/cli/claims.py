"""``labbot check-claims [FILE]``: a report's numbers, each written ``[[VALUE | SOURCE]]``, recomputed from labbot's
store and judged to the precision they were written with (``labbot.training.claims``); the corrected text, and the
numbers bound to no source. A client of ``POST /api/v1/claims/check``. Exit 0 when every claim checks, 1 when one is
wrong or cannot be sourced."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from labbot.bot.cli.output import CLIError, print_json
from labbot.common.api_client import ApiClient

EXAMPLES = """examples:
  labbot check-claims report.md
  echo 'loss [[2.49 | run:k3xq7p metric:loss at:final]]' | labbot check-claims

SOURCE is run:ID metric:M [at:final|STEP|min|max|last] [window:N];
experiment:ID trial:N|best [stat:mean|low|high|n]; experiment:ID count:done|running|queued|pruned|failed|stopped|trials;
eval:ID [stat:pass_rate|low|high|passed|samples]."""


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "check-claims",
        help="recompute a report's numbers ([[VALUE | SOURCE]]) from labbot's store: each right, wrong or unsourced",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.set_defaults(func=_check)
    s.add_argument("file", nargs="?", default="-", help="the report (default: standard input)")
    s.add_argument("--corrected", action="store_true", help="print only the corrected text")
    s.add_argument("--json", action="store_true", help="print the whole check as JSON")


def _check(api: ApiClient, a: argparse.Namespace) -> int:
    try:
        text = sys.stdin.read() if a.file == "-" else Path(a.file).read_text()
    except OSError as e:
        raise CLIError(f"cannot read {a.file}: {e.strerror}", exit_code=2) from None
    doc = api.json("POST", "/claims/check", json={"text": text})["report"]
    if a.json:
        print_json(doc)
    elif a.corrected:
        print(doc["corrected"])
    else:
        for c in doc["claims"]:
            print(f"{c['verdict']:<10} {c['value']:<10} {c['source']}  — {c['why']}")
        if doc["unbound"]:
            print(f"bound to no source: {', '.join(doc['unbound'])}")
        counts = doc["counts"]
        print(f"{counts['ok']} right, {counts['wrong']} wrong, {counts['unsourced']} unsourced")
    return 0 if doc["ok"] else 1
