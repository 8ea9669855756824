"""A run's report as Markdown, for Notion (``/lab report RUN``): what ran, how it went, its curves and config.

Pure functions over the run's JSON (``labbot.training.run_json.run_view``) and its metric series (``(step, value)``
points). The notion server turns the Markdown into blocks. The curves are those of the metrics the run's job plots
(``plot`` in the run JSON: loss by default) and of the usual loss metrics it reports. The job's plot is an image when
labbot is reachable by the report's readers (a signed link to it, ``labbot.bot.api.plots``: Notion's API takes images
as URLs), and each curve is drawn in text besides (a fixed-width chart in a code block, plus a table of sampled
points), which needs nothing reachable.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["REPORT_METRICS", "loss_chart", "plot_image", "plotted_metrics", "report_metrics", "run_report"]

Points = Sequence[tuple[int, float]]
REPORT_METRICS = ("loss", "val_loss", "eval_loss")  # reported whatever the job plots, when the run has them
CHART_WIDTH = 60
CHART_HEIGHT = 12
TABLE_ROWS = 12


def _finite(points: Points) -> list[tuple[int, float]]:
    return [(s, v) for s, v in points if isinstance(v, int | float) and math.isfinite(v)]


def loss_chart(points: Points, *, width: int = CHART_WIDTH, height: int = CHART_HEIGHT) -> str:
    """A fixed-width chart of a series: each column the mean of its steps, the y axis labelled with min and max."""
    pts = _finite(points)
    if len(pts) < 2:
        return "(not enough points to draw)"
    first, last = pts[0][0], pts[-1][0]
    span = max(last - first, 1)
    columns: list[list[float]] = [[] for _ in range(width)]
    for step, value in pts:
        columns[min(width - 1, (step - first) * width // span)].append(value)
    means = [sum(c) / len(c) if c else None for c in columns]
    lo, hi = min(v for _, v in pts), max(v for _, v in pts)
    rows = [[" "] * width for _ in range(height)]
    for x, mean in enumerate(means):
        if mean is None:
            continue
        y = 0 if hi == lo else round((mean - lo) / (hi - lo) * (height - 1))
        rows[height - 1 - y][x] = "•"
    label = max(len(f"{hi:.4g}"), len(f"{lo:.4g}"))
    lines = []
    for i, row in enumerate(rows):
        tick = f"{hi:.4g}" if i == 0 else f"{lo:.4g}" if i == height - 1 else ""
        lines.append(f"{tick:>{label}} ┤{''.join(row)}")
    lines.append(f"{'':>{label}} └{'─' * width}")
    lines.append(f"{'':>{label}}  step {first}{' ' * max(1, width - len(str(first)) - len(str(last)) - 10)}step {last}")
    return "\n".join(lines)


def _sampled(points: Points, rows: int = TABLE_ROWS) -> list[tuple[int, float]]:
    if len(points) <= rows:
        return list(points)
    every = (len(points) - 1) / (rows - 1)
    return [points[round(i * every)] for i in range(rows)]


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text.replace("|", "\\|").replace("\n", " ")


def plotted_metrics(run: Mapping[str, Any]) -> list[str]:
    """What the run's job plots (``plot`` in the run JSON; loss for a run JSON from before jobs named it)."""
    plot = run.get("plot")
    return [str(m) for m in plot] if isinstance(plot, list) and plot else ["loss"]


def report_metrics(run: Mapping[str, Any]) -> list[str]:
    """The metrics whose curves the report shows: what the job plots, then the usual loss metrics."""
    plotted = plotted_metrics(run)
    return [*plotted, *(m for m in REPORT_METRICS if m not in plotted)]


def plot_image(run: Mapping[str, Any]) -> str:
    """Which signed plot image (``labbot.bot.api.plots.PLOT_IMAGES``) shows the run's plot: ``loss`` for a job
    plotting loss alone (the image reports have always had), ``metrics`` otherwise."""
    return "loss" if plotted_metrics(run) == ["loss"] else "metrics"


def run_report(
    run: Mapping[str, Any],
    series: Mapping[str, Points],
    *,
    thread_url: str | None = None,
    plot_url: str | None = None,
) -> tuple[str, str]:
    """The report's (title, Markdown) for ``run``, with its ``series`` by metric name (each drawn if present);
    ``plot_url``, a link others can open to the run's ``plot_image`` (``labbot.bot.api.plots``), is embedded as an
    image: in the loss section for a job plotting loss alone, as the report's "Plots" section otherwise."""
    name = run.get("name") or run["id"]
    title = f"{name} — {run.get('job')} run {run['id']} ({run.get('status')})"
    facts = [
        ("run", f"`{run['id']}`"),
        ("job", str(run.get("job"))),
        ("owner", str(run.get("owner"))),
        ("status", str(run.get("status"))),
        ("attempt", str(run.get("attempt"))),
        ("step", str(run.get("step"))),
        ("checkpoint step", str(run.get("checkpoint_step"))),
        ("Ray submission", f"`{run.get('ray_submission_id')}`"),
        ("created", str(run.get("created_at"))),
        ("finished", str(run.get("finished_at") or run.get("ended_at") or "—")),
    ]
    md = [f"Report written by labbot for run `{run['id']}`."]
    if thread_url:
        md.append(f"Discussion: [the run's Slack thread]({thread_url})")
    md += ["", "## Summary", "", "| field | value |", "| --- | --- |"]
    md += [f"| {k} | {_cell(v)} |" for k, v in facts]
    if run.get("error"):
        md += ["", "## Error", "", "```", str(run["error"])[:1800], "```"]
    metrics = run.get("metrics") or {}
    if metrics:
        md += ["", "## Latest metrics", "", "| metric | value |", "| --- | --- |"]
        md += [f"| {_cell(k)} | {_cell(v)} |" for k, v in sorted(metrics.items())]
    loss_only = plot_image(run) == "loss"
    if plot_url and not loss_only:
        shown = ", ".join(plotted_metrics(run))
        md += ["", "## Plots", "", f"![{shown} of run {run['id']}]({plot_url})"]
    for metric, points in series.items():
        if not points:
            continue
        pts = _finite(points)
        md += ["", f"## {metric.capitalize()} curve", ""]
        if metric == "loss" and plot_url and loss_only:
            md += [f"![loss curve of run {run['id']}]({plot_url})", ""]
        if pts:
            best = min(pts, key=lambda p: p[1])
            md.append(
                f"{len(points)} points from step {points[0][0]} to {points[-1][0]}: first {points[0][1]:.4g}, "
                f"last {points[-1][1]:.4g}, lowest {best[1]:.4g} at step {best[0]}."
            )
            odd = len(points) - len(pts)
            if odd:
                md.append(f"{odd} point(s) were not finite (NaN or inf).")
        md += ["", "```", loss_chart(points), "```", "", "| step | value |", "| --- | --- |"]
        md += [f"| {s} | {v:.6g} |" if isinstance(v, int | float) else f"| {s} | {v} |" for s, v in _sampled(points)]
    md += ["", "## Config", "", "```json", json.dumps(run.get("params") or {}, indent=2, sort_keys=True), "```"]
    return title[:200], "\n".join(md)
