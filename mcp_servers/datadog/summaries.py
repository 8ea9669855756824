"""Datadog metric answers summarised to fit a model's context (a pure function of the ``/api/v1/query`` answer).

A series of 100,000 points is megabytes of JSON; what a model needs is its shape. For each series (at most
:data:`MAX_SERIES`, the rest counted) :func:`summarise_timeseries` gives its expression and scope, how many points
(and how many are not null), the time span, min (with when) / max (with when) / mean / last, and the series
downsampled to at most :data:`MAX_BUCKETS` equal time buckets, each shown as min/max/last, so a one-point spike
still shows in its bucket's max. The full payload goes to an artifact (see ``payloads.py``), not to the model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from labbot.common.durations import format_duration
from labbot.mcp_servers.datadog.window import iso

__all__ = ["MAX_BUCKETS", "MAX_SERIES", "summarise_timeseries"]

MAX_SERIES = 10
MAX_BUCKETS = 60
BUCKET_LINES = 240  # bucket lines across all the series shown: more series, coarser buckets
MIN_BUCKETS = 12
_LABEL_CHARS = 200


def _num(v: float) -> str:
    return f"{v:.6g}"


def _label(text: str) -> str:
    return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 1] + "…"


def _clock(ms: float, *, with_date: bool) -> str:
    t = datetime.fromtimestamp(ms / 1000, UTC)
    return t.strftime("%m-%d %H:%M" if with_date else "%H:%M:%S")


def _unit(series: Mapping[str, Any]) -> str:
    units = series.get("unit") or []
    names = [u.get("short_name") or u.get("name") for u in units if isinstance(u, Mapping)]
    return "/".join(str(n) for n in names if n)


def _series(index: int, series: Mapping[str, Any], buckets: int) -> str:
    points: Sequence[Sequence[Any]] = series.get("pointlist") or []
    expression = series.get("expression") or f"{series.get('metric', '?')}{{{series.get('scope', '*')}}}"
    head = f"[{index}] {_label(str(expression))}"
    if series.get("scope") and str(series["scope"]) not in str(expression):
        head += f" (scope {_label(str(series['scope']))})"
    if not points:
        return head + "\n    no points in the window"
    t0, t1 = float(points[0][0]), float(points[-1][0])
    n = len(points)
    nb = max(1, min(buckets, n))
    width = (t1 - t0) / nb if t1 > t0 else 1.0
    b_min: list[float | None] = [None] * nb
    b_max: list[float | None] = [None] * nb
    b_last: list[float | None] = [None] * nb
    count, total = 0, 0.0
    lo, hi, lo_t, hi_t = math.inf, -math.inf, t0, t0
    last: float | None = None
    last_t = t0
    for t, v in points:  # one pass: the stats and the buckets together
        if not isinstance(v, int | float) or not math.isfinite(v):
            continue
        count += 1
        total += v
        if v < lo:
            lo, lo_t = v, t
        if v > hi:
            hi, hi_t = v, t
        last, last_t = v, t
        b = min(nb - 1, max(0, int((t - t0) / width)))
        m = b_min[b]
        if m is None or v < m:
            b_min[b] = v
        m = b_max[b]
        if m is None or v > m:
            b_max[b] = v
        b_last[b] = v
    with_date = t1 - t0 > 86_400_000 or _clock(t0, with_date=True)[:5] != _clock(t1, with_date=True)[:5]
    span = format_duration((t1 - t0) / 1000) if t1 > t0 else "one instant"
    unit = _unit(series)
    facts = f"    {n} points, {count} non-null, {iso(t0 / 1000)} → {iso(t1 / 1000)} ({span})"
    if unit:
        facts += f", unit {unit}"
    lines = [head, facts]
    if last is None:
        lines.append("    every point is null")
        return "\n".join(lines)
    lines.append(
        f"    min {_num(lo)} (at {iso(lo_t / 1000)}) · max {_num(hi)} (at {iso(hi_t / 1000)}) · "
        f"mean {_num(total / count)} · last {_num(last)} (at {iso(last_t / 1000)})"
    )
    if n <= buckets:
        lines.append(f"    every point (time value{', UTC' if not with_date else ''}):")
        lines += [
            f"    {_clock(float(t), with_date=with_date)} {_num(v) if isinstance(v, int | float) else 'null'}"
            for t, v in points
        ]
        return "\n".join(lines)
    lines.append(
        f"    {nb} buckets of {format_duration(width / 1000)} (start min/max/last; one value when equal; "
        "×n: n buckets alike)"
    )
    shown: list[tuple[str, str]] = []  # (start, what), equal neighbours merged
    repeats: list[int] = []
    for b in range(nb):
        mn, mx, ls = b_min[b], b_max[b], b_last[b]
        if mn is None or mx is None or ls is None:
            what = "—"
        else:
            what = _num(mn) if mn == mx else f"{_num(mn)}/{_num(mx)}/{_num(ls)}"
        if shown and shown[-1][1] == what and "/" not in what:
            repeats[-1] += 1
        else:
            shown.append((_clock(t0 + b * width, with_date=with_date), what))
            repeats.append(1)
    lines += [
        f"    {start} {what}" + (f" ×{n}" if n > 1 else "") for (start, what), n in zip(shown, repeats, strict=True)
    ]
    return "\n".join(lines)


def summarise_timeseries(
    doc: Mapping[str, Any], *, max_series: int = MAX_SERIES, max_buckets: int = MAX_BUCKETS
) -> str:
    """A ``MetricsQueryResponse`` (``/api/v1/query``'s answer) as compact text; see the module docstring."""
    query = str(doc.get("query") or "the query")
    series: Sequence[Mapping[str, Any]] = doc.get("series") or []
    start, end = doc.get("from_date"), doc.get("to_date")
    when = f"{iso(start / 1000)} → {iso(end / 1000)}" if isinstance(start, int | float) and end else "the window"
    if not series:
        return (
            f"no data for {_label(query)} in {when}: check the metric name and tags (the Metrics Explorer lists "
            "them), or widen the window"
        )
    shown = list(series[:max_series])
    buckets = max(MIN_BUCKETS, min(max_buckets, BUCKET_LINES // len(shown)))
    parts = [f"{_label(query)}: {len(series)} series, {when}"]
    parts += [_series(i, s, buckets) for i, s in enumerate(shown, 1)]
    if len(series) > len(shown):
        parts.append(
            f"… and {len(series) - len(shown)} more series not shown (narrow the scope or the `by` of the query)"
        )
    return "\n".join(parts)
