"""The loss-curve PNG that the thread keeper uploads into a run's thread at milestones and at the end.

Rendered with matplotlib's Agg canvas directly (``Figure`` + ``FigureCanvasAgg``): no pyplot, so no global current
figure, no GUI backend and no display; each call owns its figure, which is what makes it safe to call from worker
threads (the thread keeper renders off the event loop). A lock still serialises the draw itself, because text
layout goes through caches in matplotlib that are shared by the process.
"""

from __future__ import annotations

import io
import math
import threading
from collections.abc import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

WIDTH_IN, HEIGHT_IN, DPI = 8.0, 4.0, 100
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
    buf = io.BytesIO()
    with _draw_lock:
        FigureCanvasAgg(fig).print_png(buf)
    return buf.getvalue()


def _no_data(title: str) -> bytes:
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
    """``points`` (step, loss) as a PNG line chart.

    Non-finite losses are left out of the lines; the first one is marked with a red vertical line labelled "NaN"
    (or "inf"). ``attempts`` holds (attempt, first step) pairs: each restart (attempt > 1) gets a dashed line.
    """
    if not points:
        return _no_data(title)
    ordered = sorted((int(s), float(v)) for s, v in points)
    finite = [(s, v) for s, v in ordered if math.isfinite(v)]
    bad = next(((s, v) for s, v in ordered if not math.isfinite(v)), None)

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="tight")
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.grid(True, alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)

    if finite:
        steps, losses = [s for s, _ in finite], [v for _, v in finite]
        smooth = len(finite) > SMOOTH_ABOVE
        ax.plot(steps, losses, color=RAW_COLOR if smooth else EMA_COLOR, linewidth=1, label="loss")
        if smooth:
            alpha = min(1.0, 40 / len(finite))  # an averaging window of about 5% of the points
            ax.plot(steps, ema(losses, alpha), color=EMA_COLOR, linewidth=2, label="loss (EMA)")
        if min(losses) > 0 and max(losses) / min(losses) > 100:
            ax.set_yscale("log")  # a blow-up before the NaN would otherwise flatten the whole curve
    else:
        ax.text(0.5, 0.5, "no finite loss", transform=ax.transAxes, ha="center", va="center", color=NAN_COLOR)

    for attempt, first_step in sorted(attempts):
        if attempt > 1:
            ax.axvline(first_step, color=ATTEMPT_COLOR, linestyle="--", linewidth=1)
            ax.text(first_step, 0.98, f" attempt {attempt}", transform=ax.get_xaxis_transform(), va="top",
                    fontsize=8, color=ATTEMPT_COLOR)  # fmt: skip
    if bad is not None:
        label = "NaN" if math.isnan(bad[1]) else "inf"
        ax.axvline(bad[0], color=NAN_COLOR, linewidth=1.5)
        ax.text(bad[0], 0.02, f"{label} ", transform=ax.get_xaxis_transform(), ha="right", va="bottom", fontsize=9,
                color=NAN_COLOR, fontweight="bold")  # fmt: skip

    first, last = ordered[0][0], ordered[-1][0]
    if first == last:
        ax.set_xlim(first - 1, last + 1)
    if finite and len(finite) > 1:
        ax.legend(loc="upper right", fontsize=8, frameon=False)
    return _png(fig)
