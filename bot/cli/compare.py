"""``labbot compare A B``: two runs told apart only when the data can — two training runs on a metric over their
final windows (a block-bootstrap interval on the difference), or two eval runs of one suite paired by task (what
``labbot eval compare`` says). A client of ``GET /api/v1/compare``; the statistics are the control plane's
(``labbot.evals.comparisons``, ``labbot.training.compare``)."""

from __future__ import annotations

import argparse
from typing import Any

from labbot.bot.cli.output import print_json
from labbot.bot.render.compare import comparison_text
from labbot.common.api_client import ApiClient, check_id

EXAMPLES = """examples:
  labbot compare k3xq7p m2np4r                    two runs of one job, on its headline metric (e.g. loss)
  labbot compare k3xq7p m2np4r --metric reward    on another metric both report
  labbot compare k3xq7p m2np4r --window 200 --better higher --json
  labbot compare e1val1 e2val2                    two eval runs of one suite: paired by task

The final window is each run's last 10 % of steps (at least 20 points when it has them); A − B is the difference
of the window means, its 95 % interval from a circular block bootstrap (consecutive steps are correlated). The
verdict names a better run only when the interval excludes zero."""


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "compare",
        help="two runs told apart only when the data can: training runs on a metric, eval runs paired by task",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.set_defaults(func=_compare)
    s.add_argument("run_a", help="the first run's id")
    s.add_argument("run_b", help="the second run's id (two training runs, or two eval runs of one suite)")
    s.add_argument("--metric", metavar="M", help="training runs: the metric (default: their headline, e.g. loss)")
    s.add_argument(
        "--better", choices=("lower", "higher"), help="training runs: which way M is better (default: by its name)"
    )
    s.add_argument("--window", type=int, metavar="N", help="training runs: the last N points of each (default: 10 %%)")
    s.add_argument("--json", action="store_true", help="print the comparison as one JSON document")


def _compare(api: ApiClient, a: argparse.Namespace) -> int:
    params: dict[str, Any] = {"a": check_id("run", a.run_a), "b": check_id("run", a.run_b)}
    for key in ("metric", "better", "window"):
        if getattr(a, key) is not None:
            params[key] = getattr(a, key)
    doc = api.json("GET", "/compare", params=params)["comparison"]
    print_json(doc) if a.json else print(comparison_text(doc))
    return 0
