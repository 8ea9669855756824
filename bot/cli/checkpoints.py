"""``labbot checkpoints RUN [--json]``: the checkpoints a run's job reported, oldest first, each with its health —
the run's metrics at its step, a non-finite one marked — so which one is the last good one before a signal can be
seen. A client of ``/api/v1/runs/{id}/checkpoints``."""

from __future__ import annotations

import argparse
import math
from typing import Any

from labbot.bot.cli.output import print_json
from labbot.common.api_client import ApiClient, run_path
from labbot.common.text_tables import table

SHOWN = 4  # metrics shown per checkpoint in the table (all of them with --json)


def add_parser(sub: Any) -> None:
    s = sub.add_parser("checkpoints", help="a run's checkpoints with the metrics at each one's step (its health)")
    s.set_defaults(func=_checkpoints)
    s.add_argument("run", help="a run id, as `labbot runs` lists them")
    s.add_argument("--json", action="store_true")


def _value(raw: Any) -> str:
    if isinstance(raw, str):
        return raw  # NaN, Infinity, -Infinity: as stored
    if isinstance(raw, float) and math.isfinite(raw):
        return f"{raw:.4g}"
    return str(raw)


def _checkpoints(api: ApiClient, a: argparse.Namespace) -> int:
    found = api.json("GET", run_path(a.run, "checkpoints"))["checkpoints"]
    if a.json:
        print_json(found)
        return 0
    if not found:
        print(f"run {a.run} has reported no checkpoint yet")
        return 0
    rows = []
    for c in found:
        metrics = c["metrics"]
        shown = " ".join(f"{k}={_value(v)}" for k, v in sorted(metrics.items())[:SHOWN])
        finite = not any(isinstance(v, str) for v in metrics.values())  # NaN and infinities travel as text
        rows.append([str(c["step"]), str(c["attempt"]), "ok" if finite else "NON-FINITE", shown, c["path"] or "-"])
    print(table(["step", "attempt", "health", "metrics at its step", "path"], rows))
    return 0
