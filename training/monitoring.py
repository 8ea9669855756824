"""The watchdog's judgment: rules from a run's state to findings, and the bookkeeping they judge from.

The watchdog (a loop in the server) reads each active run's row, builds a ``RunState`` from it and from Ray's job
status, and asks :func:`evaluate` what is wrong; what to do about a ``Finding`` (page, restart, stop) is its own
business. Judging loss and step rate would need the metric points, so instead the telemetry ingest folds each batch
into a small JSON "vitals" dict with :func:`observe` (a trailing loss window, step-rate samples, a latched
divergence) that is stored on the run, and the watchdog judges from that one row. :func:`infra_finding` is the one
finding about Ray itself rather than a run. Everything here is a pure function: no I/O, no clock (``now`` is
passed in), no input is mutated.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from labbot.common.durations import format_duration
from labbot.storage.floats import decode_float, encode_float

SILENT, HUNG, FAILED, PENDING, DIVERGED, SLOW, INFRA = (
    "silent",
    "hung",
    "failed",
    "pending",
    "diverged",
    "slow",
    "infra",
)
KINDS = (SILENT, HUNG, FAILED, PENDING, DIVERGED, SLOW, INFRA)
PAGE, WARNING = "page", "warning"

TERMINAL_STATUSES = frozenset({"succeeded", "failed", "stopped"})

LOSS_WINDOW = 50  # trailing finite, non-spike losses kept for the spike test
MIN_SPIKE_WINDOW = 5  # no spike test before the window holds this many losses
MAX_RATES = 30  # step-rate samples kept
MIN_RATE_INTERVAL_S = 2.0  # a rate sample spans at least this long
RECOVERY_POINTS = 5  # consecutive normal losses that clear a latched divergence ...
RECOVERY_S = 30.0  # ... once it has also been latched this long
SLOW_MEDIAN_SAMPLES = 20  # the slow test's median looks back at most this many samples
MESSAGE_CHARS = 500  # Ray's message in a finding's detail is cut to this


@dataclass(frozen=True)
class Thresholds:
    stall_after_s: float = 600.0  # silent / hung
    pending_after_s: float = 600.0  # pending
    spike_factor: float = 10.0  # diverged: loss over this × the trailing maximum (Megatron's factor)
    slow_factor: float = 0.5  # slow: step rate under this × its trailing median ...
    slow_samples: int = 3  # ... for this many consecutive rate samples
    # before an attempt's first telemetry (or first step), silence is judged against at least this: loading a big
    # model or a dataset is not a stall
    startup_grace_s: float = 0.0


@dataclass(frozen=True)
class RunState:
    """What the watchdog knows about one run: its row, Ray's view of the current attempt, and the thresholds."""

    run_id: str
    status: str  # labbot's run status: pending|running|stalled|restarting|succeeded|failed|stopped
    ray_status: str | None  # Ray's status for the current attempt: PENDING|RUNNING|STOPPED|SUCCEEDED|FAILED, or None
    ray_error_type: str | None
    ray_message: str
    attempt: int
    attempt_started_at: datetime | None  # when the current attempt was submitted to Ray
    last_telemetry_at: datetime | None  # last points or heartbeat; may predate attempt_started_at (older attempt)
    last_step: int | None
    last_step_at: datetime | None  # when last_step last advanced (None: no step yet in this attempt)
    vitals: Mapping[str, Any]  # what observe() returned, {} if nothing yet
    thresholds: Thresholds
    stop_requested: bool = False


@dataclass(frozen=True)
class Finding:
    kind: str  # one of KINDS
    severity: str  # PAGE or WARNING
    summary: str  # one plain line for a human, e.g. "no telemetry for 2m 10s (threshold 30s)"
    detail: dict[str, Any]  # JSON-safe facts (non-finite floats as "NaN", "Infinity", "-Infinity")


# --- evaluate --------------------------------------------------------------------------------------------------------


def evaluate(state: RunState, now: datetime) -> list[Finding]:
    """Everything wrong with ``state`` at ``now``, in the order of ``KINDS``; [] when all is well."""
    if state.stop_requested:
        return []
    found: dict[str, Finding] = {}
    failed = _failed(state)
    if failed is not None:
        found[FAILED] = failed
    if state.status not in TERMINAL_STATUSES:
        th = state.thresholds
        if state.ray_status == "PENDING":
            pending = _pending(state, now)
            if pending is not None:
                found[PENDING] = pending
        if state.ray_status == "RUNNING":
            stalled = _silent(state, now) or _hung(state, now)  # hung only when not silent
            if stalled is not None:
                found[stalled.kind] = stalled
            else:
                slow = _slow(state.vitals.get("rates"), th.slow_factor, th.slow_samples)
                if slow is not None:
                    found[SLOW] = slow
        diverged = _diverged(state)
        if diverged is not None:
            found[DIVERGED] = diverged
    return [found[kind] for kind in KINDS if kind in found]


def infra_finding(down_since: datetime | None, now: datetime, infra_after_s: float, address: str) -> Finding | None:
    """A page when the Ray API at ``address`` has not answered since ``down_since`` for ``infra_after_s`` or more."""
    if down_since is None:
        return None
    down_for = _seconds(now - down_since)
    if down_for < infra_after_s:
        return None
    return Finding(
        kind=INFRA,
        severity=PAGE,
        summary=f"the Ray API at {address} has not answered for {format_duration(down_for)} "
        f"(threshold {format_duration(infra_after_s)})",
        detail={"down_for_s": down_for, "threshold_s": float(infra_after_s), "address": address},
    )


def _failed(state: RunState) -> Finding | None:
    if state.ray_status != "FAILED":
        return None
    message = " ".join(state.ray_message.split())  # one line
    if len(message) > 300:
        message = message[:299] + "…"
    said = ": ".join(part for part in (state.ray_error_type, message) if part)
    return Finding(
        kind=FAILED,
        severity=PAGE,
        summary=f"Ray says FAILED: {said}" if said else "Ray says FAILED",
        detail={"error_type": state.ray_error_type, "message": state.ray_message[:MESSAGE_CHARS]},
    )


def _pending(state: RunState, now: datetime) -> Finding | None:
    if state.attempt_started_at is None:
        return None
    pending_for = _seconds(now - state.attempt_started_at)
    threshold = state.thresholds.pending_after_s
    if pending_for < threshold:
        return None
    return Finding(
        kind=PENDING,
        severity=PAGE,
        summary=f"pending for {format_duration(pending_for)} (threshold {format_duration(threshold)}): "
        "Ray has not found resources for it",
        detail={"pending_for_s": pending_for, "threshold_s": float(threshold), "attempt": state.attempt},
    )


def _silent(state: RunState, now: datetime) -> Finding | None:
    baseline = _latest(state.last_telemetry_at, state.attempt_started_at)
    if baseline is None:
        return None
    silent_for = _seconds(now - baseline)
    fresh = state.last_telemetry_at is None or (
        state.attempt_started_at is not None and state.last_telemetry_at < state.attempt_started_at
    )
    threshold = state.thresholds.stall_after_s
    if fresh:
        threshold = max(threshold, state.thresholds.startup_grace_s)
    if silent_for < threshold:
        return None
    since = f" since attempt {state.attempt} was submitted" if fresh else ""
    return Finding(
        kind=SILENT,
        severity=PAGE,
        summary=f"no telemetry for {format_duration(silent_for)}{since} (threshold {format_duration(threshold)})",
        detail={
            "silent_for_s": silent_for,
            "threshold_s": float(threshold),
            "last_telemetry_at": None
            if fresh or state.last_telemetry_at is None
            else state.last_telemetry_at.isoformat(),
            "attempt": state.attempt,
        },
    )


def _hung(state: RunState, now: datetime) -> Finding | None:
    baseline = _latest(state.last_step_at, state.attempt_started_at)
    if baseline is None:
        return None
    stuck_for = _seconds(now - baseline)
    threshold = state.thresholds.stall_after_s
    if state.last_step_at is None:
        threshold = max(threshold, state.thresholds.startup_grace_s)
    if stuck_for < threshold:
        return None
    if state.last_step_at is None or state.last_step is None:
        what = f"no step reported for {format_duration(stuck_for)} since attempt {state.attempt} was submitted"
    else:
        what = f"step stuck at {state.last_step} for {format_duration(stuck_for)}"
    return Finding(
        kind=HUNG,
        severity=PAGE,
        summary=f"{what} though heartbeats arrive (threshold {format_duration(threshold)})",
        detail={
            "stuck_for_s": stuck_for,
            "threshold_s": float(threshold),
            "last_step": state.last_step,
            "attempt": state.attempt,
        },
    )


def _diverged(state: RunState) -> Finding | None:
    div = state.vitals.get("divergence")
    if not isinstance(div, Mapping):
        return None
    step = div.get("step")
    where = f" at step {step}" if step is not None else ""
    value = _number(div.get("value"))
    if div.get("reason") == "spike" and value is not None:
        trailing = _number(div.get("trailing_max"))
        factor = f"{state.thresholds.spike_factor:g}×"
        over = f", over {factor} the trailing maximum {_fmt(trailing)}" if trailing is not None else ""
        summary = f"loss spiked to {_fmt(value)}{where}{over}"
    else:
        summary = f"loss is {_fmt(value) if value is not None else 'not finite'}{where}"
    return Finding(kind=DIVERGED, severity=PAGE, summary=summary, detail=_json_safe(dict(div)))


def _slow(raw_rates: Any, slow_factor: float, slow_samples: int) -> Finding | None:
    n = max(1, slow_samples)
    if not isinstance(raw_rates, list | tuple) or len(raw_rates) < n + 5:
        return None
    rates = _finite_list(raw_rates[-(n + SLOW_MEDIAN_SAMPLES) :])  # judged every tick for every run: read no more
    if len(rates) < n + 5:
        return None
    recent, before = rates[-n:], rates[:-n][-SLOW_MEDIAN_SAMPLES:]
    median = float(statistics.median(before))
    if median <= 0 or not all(r < slow_factor * median for r in recent):
        return None
    last = recent[-1]
    return Finding(
        kind=SLOW,
        severity=WARNING,
        summary=f"step rate {_fmt(last)} steps/s is under {slow_factor:.0%} of its trailing median "
        f"{_fmt(median)} steps/s for {n} samples",
        detail={"rate": last, "median": median, "factor": float(slow_factor), "samples": n},
    )


# --- observe ---------------------------------------------------------------------------------------------------------


def observe(
    vitals: Mapping[str, Any],
    attempt: int,
    points: Sequence[tuple[int, datetime, Mapping[str, float]]],
    *,
    now: datetime,
    spike_factor: float = 10.0,
) -> dict[str, Any]:
    """New vitals after one telemetry batch of ``attempt``: ``points`` are ``(step, when, metrics)`` in any order.

    The result is a new, JSON-safe dict of bounded size: ``attempt``, ``loss_window`` (trailing finite, non-spike
    losses), ``rates`` (steps/s samples) and their ``anchor``, and while one is latched, ``divergence`` and
    ``recovered_points``. A batch of an attempt older than the one recorded (a previous attempt flushing its tail)
    changes nothing.
    """
    recorded = vitals.get("attempt")
    if isinstance(recorded, int) and not isinstance(recorded, bool) and attempt < recorded:
        return _json_safe(dict(vitals))
    same_attempt = recorded == attempt
    window = _finite_list(vitals.get("loss_window"))[-LOSS_WINDOW:]
    rates = _finite_list(vitals.get("rates"))[-MAX_RATES:] if same_attempt else []
    anchor = _anchor(vitals.get("anchor")) if same_attempt else None
    raw_div = vitals.get("divergence") if same_attempt else None
    divergence: dict[str, Any] | None = _json_safe(dict(raw_div)) if isinstance(raw_div, Mapping) else None
    recovered = _int(vitals.get("recovered_points")) if divergence is not None else 0

    for step, when, metrics in sorted(points, key=lambda p: p[0]):
        when = _utc(when)
        if anchor is None:
            anchor = (step, when)
        elif step > anchor[0] and _seconds(when - anchor[1]) >= MIN_RATE_INTERVAL_S:
            rates.append((step - anchor[0]) / _seconds(when - anchor[1]))
            anchor = (step, when)

        loss = _number(metrics.get("loss"))
        if loss is None:
            continue
        found = _divergence(loss, step, window, spike_factor, now)
        if found is not None:
            if divergence is None:
                divergence = found  # the first one stays until it clears
            recovered = 0
        else:
            window.append(loss)
            del window[:-LOSS_WINDOW]
            if divergence is not None:
                recovered += 1

    if divergence is not None and recovered >= RECOVERY_POINTS:
        at = _parse_time(divergence.get("at"))
        if at is None or _seconds(now - at) >= RECOVERY_S:
            divergence = None

    out: dict[str, Any] = {"attempt": attempt, "loss_window": window, "rates": rates[-MAX_RATES:]}
    if anchor is not None:
        out["anchor"] = {"step": anchor[0], "when": anchor[1].isoformat()}
    if divergence is not None:
        out["divergence"] = divergence
        out["recovered_points"] = recovered
    return out


def _divergence(
    loss: float, step: int, window: list[float], spike_factor: float, now: datetime
) -> dict[str, Any] | None:
    """The divergence ``loss`` shows against the trailing ``window``, or None when it is a normal loss."""
    if math.isnan(loss) or math.isinf(loss):
        return {
            "reason": "nan" if math.isnan(loss) else "inf",
            "step": step,
            "value": encode_float(loss),
            "at": now.isoformat(),
        }
    if len(window) >= MIN_SPIKE_WINDOW:
        top = max(window)
        if top > 0 and loss > spike_factor * top:
            return {"reason": "spike", "step": step, "value": loss, "trailing_max": top, "at": now.isoformat()}
    return None


# --- helpers ---------------------------------------------------------------------------------------------------------


def _seconds(delta: Any) -> float:
    return float(delta.total_seconds())


def _utc(when: datetime) -> datetime:
    """Naive datetimes are taken as UTC, so that they compare with aware ones."""
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


def _latest(*times: datetime | None) -> datetime | None:
    present = [_utc(t) for t in times if t is not None]
    return max(present) if present else None


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return _utc(datetime.fromisoformat(value))
    except ValueError:
        return None


def _anchor(value: Any) -> tuple[int, datetime] | None:
    if not isinstance(value, Mapping):
        return None
    step, when = value.get("step"), _parse_time(value.get("when"))
    if not isinstance(step, int) or isinstance(step, bool) or when is None:
        return None
    return step, when


def _number(value: Any) -> float | None:
    """A float from a number or one of the strings of :func:`labbot.storage.floats.encode_float`; None otherwise."""
    try:
        return decode_float(value)
    except (ValueError, OverflowError):
        return None


def _finite_list(value: Any) -> list[float]:
    if not isinstance(value, list | tuple):
        return []
    if all(type(v) is float or type(v) is int for v in value):  # what observe() stores: the fast path
        return [float(v) for v in value if math.isfinite(v)]
    numbers = (_number(v) for v in value)
    return [v for v in numbers if v is not None and math.isfinite(v)]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _fmt(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else str(encode_float(value))


def _json_safe(value: Any) -> Any:
    """``value`` with non-finite floats as strings, recursively (mappings become dicts, sequences lists)."""
    if isinstance(value, float):
        return encode_float(value)
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value
