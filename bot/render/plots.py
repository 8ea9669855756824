"""The metric-curve PNGs: the metrics a job plots (``JobSpec.plot``, loss by default), one panel each, sharing the
step axis. The thread keeper uploads them into a run's thread at milestones and at the end, ``/lab compare`` overlays
two runs, and ``/plots/{run_id}/…png`` serves them to the run's Notion report.

Rendered with matplotlib's Agg canvas directly (``Figure`` + ``FigureCanvasAgg``): no pyplot, so no global current
figure, no GUI backend and no display; each call owns its figure, which is what makes it safe to call from worker
threads (the thread keeper renders off the event loop). A lock still serialises the draw itself, because text
layout goes through caches in matplotlib that are shared by the process.
"""

from __future__ import annotations

import io
import math
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # matplotlib takes a second to import: a process pays for it at its first plot
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

WIDTH_IN, HEIGHT_IN, DPI = 8.0, 4.0, 100
PANEL_HEIGHT_IN = 2.3  # each metric's panel when a job plots several
SMOOTH_ABOVE = 50  # more raw points than this and an EMA line is drawn over them
RAW_COLOR, EMA_COLOR, NAN_COLOR, ATTEMPT_COLOR = "#9ecae1", "#08519c", "#d62728", "#636363"

_draw_lock = threading.Lock()


def ema(values: Sequence[float], alpha: float) -> list[float]:
    """Exponential moving average, debiased so the first values are not pulled toward zero."""
    out, avg, weight = [], 0.0, 0.0
    for v in values:
        avg = alpha * v + (1 - alpha) * avg
        weight = alpha + (1 - alpha) * weight
        out.append(avg / weight)
    return out


def _png(fig: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buf = io.BytesIO()
    with _draw_lock:
        FigureCanvasAgg(fig).print_png(buf)
    return buf.getvalue()


def _no_data(title: str) -> bytes:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 1.5), dpi=DPI)
    fig.text(0.5, 0.62, title, ha="center", va="center", fontsize=10, wrap=True)
    fig.text(0.5, 0.32, "no data yet", ha="center", va="center", fontsize=12, color="#636363")
    return _png(fig)


def loss_plot_png(
    points: Sequence[tuple[int, float]],
    *,
    title: str,
    attempts: Sequence[tuple[int, int]] = (),
) -> bytes:
    """``points`` (step, loss) as a PNG line chart: ``metrics_plot_png`` of loss alone."""
    return metrics_plot_png({"loss": points}, title=title, attempts=attempts)


def metrics_plot_png(
    series: Mapping[str, Sequence[tuple[int, float]]],
    *,
    title: str,
    attempts: Sequence[tuple[int, int]] = (),
) -> bytes:
    """Each metric's ``(step, value)`` points in ``series`` (in its order) as one PNG.

    One metric is one 8×4-inch chart; several are stacked panels sharing the step axis, one per metric, so the
    thread gets one image (one upload) whatever the job plots. A metric with no points yet is a panel saying
    "no data yet"; when no metric has any point, the whole image is a small "no data yet" card. Non-finite values
    are left out of the lines; the first one is marked with a red vertical line labelled "NaN" (or "inf").
    ``attempts`` holds (attempt, first step) pairs: each restart (attempt > 1) gets a dashed line on every panel.
    """
    ordered = {name: sorted((int(s), float(v)) for s, v in points) for name, points in series.items()}
    if not any(ordered.values()):
        return _no_data(title)
    from matplotlib.figure import Figure

    if len(ordered) == 1:
        fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="tight")
        axes = [fig.add_subplot()]
        axes[0].set_title(title, fontsize=11)
    else:
        # fixed margins, not a layout engine: constrained layout measures every tick label of every panel, which
        # cost more than the drawing itself (about half a second a panel)
        height = PANEL_HEIGHT_IN * len(ordered) + 0.4
        fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI)
        fig.subplots_adjust(left=0.9 / WIDTH_IN, right=1 - 0.25 / WIDTH_IN, top=1 - 0.55 / height,
                            bottom=0.55 / height, hspace=0.35)  # fmt: skip
        axes = list(fig.subplots(len(ordered), 1, sharex=True, squeeze=False)[:, 0])
        fig.suptitle(title, fontsize=11, y=1 - 0.12 / height, va="top")
    steps = [s for points in ordered.values() for s, _ in points]
    first, last = min(steps), max(steps)
    for i, (ax, (name, points)) in enumerate(zip(axes, ordered.items(), strict=True)):
        _panel(ax, name, points, attempts, single=len(axes) == 1, label_attempts=i == 0)
        if first == last:
            ax.set_xlim(first - 1, last + 1)
    axes[-1].set_xlabel("step")
    return _png(fig)


def _panel(
    ax: Axes,
    name: str,
    ordered: Sequence[tuple[int, float]],
    attempts: Sequence[tuple[int, int]],
    *,
    single: bool,
    label_attempts: bool,
) -> None:
    """One metric's curve on ``ax`` (its points sorted by step)."""
    finite = [(s, v) for s, v in ordered if math.isfinite(v)]
    bad = next(((s, v) for s, v in ordered if not math.isfinite(v)), None)
    if single:
        ax.set_ylabel(name)
    else:
        ax.set_title(name, loc="left", fontsize=9)
    ax.grid(True, alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)

    if not ordered:
        ax.text(0.5, 0.5, "no data yet", transform=ax.transAxes, ha="center", va="center", color=ATTEMPT_COLOR)
        ax.set_yticks([])
    elif finite:
        steps, values = [s for s, _ in finite], [v for _, v in finite]
        smooth = len(finite) > SMOOTH_ABOVE
        ax.plot(steps, values, color=RAW_COLOR if smooth else EMA_COLOR, linewidth=1, label=name)
        if smooth:
            alpha = min(1.0, 40 / len(finite))  # an averaging window of about 5% of the points
            ax.plot(steps, ema(values, alpha), color=EMA_COLOR, linewidth=2, label=f"{name} (EMA)")
        if min(values) > 0 and max(values) / min(values) > 100:
            ax.set_yscale("log")  # a blow-up before the NaN would otherwise flatten the whole curve
    else:
        ax.text(0.5, 0.5, f"no finite {name}", transform=ax.transAxes, ha="center", va="center", color=NAN_COLOR)

    for attempt, first_step in sorted(attempts):
        if attempt > 1:
            ax.axvline(first_step, color=ATTEMPT_COLOR, linestyle="--", linewidth=1)
            if label_attempts:
                ax.text(first_step, 0.98, f" attempt {attempt}", transform=ax.get_xaxis_transform(), va="top",
                        fontsize=8, color=ATTEMPT_COLOR)  # fmt: skip
    if bad is not None:
        label = "NaN" if math.isnan(bad[1]) else "inf"
        ax.axvline(bad[0], color=NAN_COLOR, linewidth=1.5)
        ax.text(bad[0], 0.02, f"{label} ", transform=ax.get_xaxis_transform(), ha="right", va="bottom", fontsize=9,
                color=NAN_COLOR, fontweight="bold")  # fmt: skip
    if single and len(finite) > 1:
        ax.legend(loc="upper right", fontsize=8, frameon=False)


OVERLAY_COLORS = ("#08519c", "#d94801")  # run A, run B


def overlay_plot_png(
    series: Sequence[tuple[str, Sequence[tuple[int, float]], tuple[int, int]]],
    *,
    metric: str,
    title: str,
) -> bytes:
    """Two runs' ``metric`` against step on one chart (``/lab compare``): each ``(label, points, (first, last))``
    a line in its own colour, its final window (steps ``first``–``last``, what the comparison averaged) shaded in
    that colour. Non-finite values are left out of the lines; a curve of over ``SMOOTH_ABOVE`` points is drawn
    faintly with its EMA over it."""
    if not any(points for _, points, _ in series):
        return _no_data(title)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="tight")
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11)
    ax.set_xlabel("step")
    ax.set_ylabel(metric)
    ax.grid(True, alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    lows: list[float] = []
    for (label, points, (first, last)), color in zip(series, OVERLAY_COLORS, strict=False):
        finite = sorted((int(s), float(v)) for s, v in points if math.isfinite(v))
        ax.axvspan(first, max(last, first + 1), color=color, alpha=0.12, linewidth=0)
        if not finite:
            continue
        steps, values = [s for s, _ in finite], [v for _, v in finite]
        lows.append(min(values))
        if len(finite) > SMOOTH_ABOVE:
            ax.plot(steps, values, color=color, linewidth=0.8, alpha=0.35)
            ax.plot(steps, ema(values, min(1.0, 40 / len(finite))), color=color, linewidth=2, label=label)
        else:
            ax.plot(steps, values, color=color, linewidth=1.5, label=label)
    ax.legend(loc="best", fontsize=8, frameon=False, title="shaded: final windows", title_fontsize=8)
    return _png(fig)


STATUS_STYLE = {"done": "-", "pruned": ":", "failed": "--", "stopped": "--", "running": "-", "launching": "-"}


def experiment_curves_png(
    curves: Mapping[int, Sequence[tuple[int, float]]],
    statuses: Mapping[int, str],
    ranks: Mapping[int, int],
    *,
    metric: str,
    title: str,
) -> bytes:
    """An experiment's trials on one chart: each trial's ``metric`` (the mean across its seeds) against step, the
    scored ones coloured by rank (the best darkest, labelled), pruned ones dotted where they were stopped, failed and
    stopped ones dashed and grey."""
    if not any(curves.values()):
        return _no_data(title)
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="tight")
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11)
    ax.set_xlabel("step")
    ax.set_ylabel(f"{metric} (mean over seeds)")
    ax.grid(True, alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    cmap = colormaps["viridis"]
    scored = max(1, len(ranks))
    for number, points in sorted(curves.items(), key=lambda kv: ranks.get(kv[0], 10**6), reverse=True):
        finite = sorted((int(s), float(v)) for s, v in points if math.isfinite(v))
        if not finite:
            continue
        status = statuses.get(number, "running")
        rank = ranks.get(number)
        color = cmap(0.85 * (rank - 1) / scored) if rank is not None else "#bdbdbd"
        label = f"#{number} (rank {rank})" if rank is not None and rank <= 5 else None
        ax.plot([s for s, _ in finite], [v for _, v in finite], STATUS_STYLE.get(status, "-"), color=color,
                linewidth=2 if rank == 1 else 1.2, label=label)  # fmt: skip
    if ranks:
        ax.legend(loc="best", fontsize=8, frameon=False, title="dotted: pruned; grey: failed or stopped",
                  title_fontsize=8)  # fmt: skip
    return _png(fig)


def params_scores_png(
    dimensions: Sequence[tuple[str, bool]],
    trials: Sequence[tuple[Mapping[str, object], float, float | None]],
    *,
    metric: str,
    title: str,
) -> bytes:
    """Each searched parameter against the score, one panel each: ``dimensions`` (name, log scale?), ``trials`` the
    scored configs as (params, mean, half-width of the interval across seeds or None). Text-valued parameters are
    placed at their values' positions."""
    if not trials or not dimensions:
        return _no_data(title)
    from matplotlib.figure import Figure

    n = len(dimensions)
    fig = Figure(figsize=(min(4.0 * n, 12.0), 3.2), dpi=DPI, layout="tight")
    fig.suptitle(title, fontsize=11)
    for i, (name, log) in enumerate(dimensions):
        ax = fig.add_subplot(1, n, i + 1)
        values = [p.get(name) for p, _, _ in trials]
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        if numeric:
            xs = [float(v) for v in values]  # type: ignore[arg-type]
        else:
            labels = sorted({str(v) for v in values})
            xs = [float(labels.index(str(v))) for v in values]
            ax.set_xticks(range(len(labels)), labels)
        ys = [m for _, m, _ in trials]
        errs = [h if h is not None else 0.0 for _, _, h in trials]
        ax.errorbar(xs, ys, yerr=errs, fmt="o", color=EMA_COLOR, ecolor=RAW_COLOR, capsize=3, markersize=5)
        if log and numeric and min(xs) > 0:
            ax.set_xscale("log")
        ax.set_xlabel(name)
        if i == 0:
            ax.set_ylabel(metric)
        ax.grid(True, alpha=0.3)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    return _png(fig)
