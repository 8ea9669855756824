"""Metric alerts a job declares: their parsing, and the pure bookkeeping that says when one holds.

An alert names one metric the job reports and a condition on it. A job declares them in ``labbot.toml``::

    [[jobs.my-rl.alerts]]
    metric = "pass_rate"
    condition = "below"        # above | below | flat | nan
    threshold = 0.2
    for = "10m"                # how long the condition must hold before it fires (default: at once)
    severity = "page"          # page | warning (default page)
    name = "pass-rate-low"     # optional: default "<metric>-<condition>"

and a launch adds or replaces them (``labbot launch JOB --alert 'pass_rate below 0.2 for 10m'``, the same words in
``/lab launch``). The words: ``METRIC above|below NUMBER [for DURATION] [page|warning] [as NAME]``,
``METRIC flat [within NUMBER] for DURATION [page|warning] [as NAME]`` (the metric moved by no more than NUMBER,
default 0, over the whole duration) and ``METRIC nan [for DURATION] [page|warning] [as NAME]`` (its latest value is
NaN or infinite).

The telemetry ingest folds each point of an alert's metric into a small per-alert state (:func:`track`) stored in
the run's vitals, and the watchdog asks :func:`holding` whether the alert fires now. A metric the job has never
reported is :func:`never_reported` once the run has reported other metrics for a while: that is said once in the
run's thread, not paged. Everything here is pure.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from labbot.common.durations import format_duration, parse_duration
from labbot.common.errors import BadRequest
from labbot.training.telemetry_ingest import METRIC_NAME_RULE, metric_name_ok

CONDITIONS = ("above", "below", "flat", "nan")
SEVERITIES = ("page", "warning")
ALERT_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
MAX_ALERTS = 20  # per run: each is judged every watchdog tick
# a metric no point of the run has carried after this long of telemetry is said to be missing (once)
MISSING_AFTER_S = 600.0
SYNTAX = (
    "METRIC above|below NUMBER [for DURATION] [page|warning] [as NAME], "
    "METRIC flat [within NUMBER] for DURATION [page|warning] [as NAME], or METRIC nan [for DURATION] [page|warning] "
    "[as NAME] — e.g. 'pass_rate below 0.2 for 10m'"
)


@dataclass(frozen=True)
class Alert:
    name: str
    metric: str
    condition: str  # one of CONDITIONS
    threshold: float | None  # above/below: the bound; flat: the largest move that still counts as flat
    for_s: float  # seconds the condition must hold
    severity: str  # page | warning

    def describe(self) -> str:
        """The alert in the words a launch accepts, e.g. ``pass_rate below 0.2 for 10m``."""
        parts = [self.metric, self.condition]
        if self.condition in ("above", "below"):
            parts.append(f"{self.threshold:g}")
        elif self.condition == "flat" and self.threshold:
            parts += ["within", f"{self.threshold:g}"]
        if self.for_s > 0:
            parts += ["for", format_duration(self.for_s)]
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metric": self.metric,
            "condition": self.condition,
            "threshold": self.threshold,
            "for_s": self.for_s,
            "severity": self.severity,
        }


def make_alert(
    metric: Any,
    condition: Any,
    threshold: Any = None,
    for_: Any = None,
    severity: Any = "page",
    name: Any = None,
    *,
    where: str = "alert",
) -> Alert:
    """An Alert from loose values (a TOML table, JSON, or the parsed words); BadRequest says what was wrong."""
    if not isinstance(metric, str) or not metric_name_ok(metric):
        raise BadRequest(f"{where}: metric {metric!r} is not a metric name ({METRIC_NAME_RULE})")
    if condition not in CONDITIONS:
        raise BadRequest(f"{where}: condition {condition!r} is not one of {', '.join(CONDITIONS)}")
    if severity not in SEVERITIES:
        raise BadRequest(f"{where}: severity {severity!r} is not one of {', '.join(SEVERITIES)}")
    bound: float | None = None
    if condition in ("above", "below"):
        bound = _finite(threshold, where, f"'{condition}' needs a finite threshold, e.g. {metric} {condition} 0.2")
    elif condition == "flat":
        bound = 0.0 if threshold is None else _finite(threshold, where, "'flat' takes 'within' a finite number ≥ 0")
        if bound < 0:
            raise BadRequest(f"{where}: 'flat' takes 'within' a number ≥ 0, got {threshold!r}")
    elif threshold is not None:
        raise BadRequest(f"{where}: 'nan' takes no threshold")
    for_s = 0.0
    if for_ is not None:
        for_s = parse_duration(for_) if isinstance(for_, str) else _finite(for_, where, "'for' is a duration")
        if for_s < 0:
            raise BadRequest(f"{where}: 'for' must not be negative")
    if condition == "flat" and for_s <= 0:
        raise BadRequest(f"{where}: 'flat' needs a duration to be flat for, e.g. {metric} flat for 15m")
    label = name if name is not None else re.sub(r"[^A-Za-z0-9_.-]", ".", f"{metric}-{condition}")[-40:]
    if not isinstance(label, str) or not ALERT_NAME.match(label):
        raise BadRequest(f"{where}: alert name {label!r} must be 1-40 letters, digits, '_', '.' or '-'")
    return Alert(name=label, metric=metric, condition=condition, threshold=bound, for_s=for_s, severity=severity)


def parse_alert(text: str) -> Alert:
    """``pass_rate below 0.2 for 10m warning as rl-stuck`` → Alert; BadRequest names the accepted words."""
    words = text.split()
    where = f"alert {text.strip()!r}"
    if len(words) < 2:
        raise BadRequest(f"bad {where}: write {SYNTAX}")
    metric, condition, rest = words[0], words[1].lower(), words[2:]
    if condition not in CONDITIONS:
        raise BadRequest(
            f"bad {where}: condition {words[1]!r} is not one of {', '.join(CONDITIONS)} (a metric name has no "
            f"spaces); write {SYNTAX}"
        )
    threshold: str | None = None
    for_: str | None = None
    severity = "page"
    name: str | None = None
    if condition in ("above", "below"):
        if not rest:
            raise BadRequest(f"bad {where}: '{condition}' needs a number; write {SYNTAX}")
        threshold, rest = rest[0], rest[1:]
    i = 0
    while i < len(rest):
        word = rest[i].lower()
        value = rest[i + 1] if i + 1 < len(rest) else None
        if word == "within" and condition == "flat" and value is not None and threshold is None:
            threshold, i = value, i + 2
        elif word == "for" and value is not None and for_ is None:
            for_, i = value, i + 2
        elif word == "as" and value is not None and name is None:
            name, i = value, i + 2
        elif word in SEVERITIES:
            severity, i = word, i + 1
        else:
            raise BadRequest(f"bad {where}: {rest[i]!r} is not understood there; write {SYNTAX}")
    number: float | None = None
    if threshold is not None:
        try:
            number = float(threshold)
        except ValueError:
            raise BadRequest(f"bad {where}: {threshold!r} is not a number; write {SYNTAX}") from None
    return make_alert(metric, condition, number, for_, severity, name, where=where)


def alert_from_json(doc: Mapping[str, Any]) -> Alert:
    """An alert as :meth:`Alert.to_json` stored it (with a run's config)."""
    return make_alert(
        doc.get("metric"),
        doc.get("condition"),
        doc.get("threshold"),
        doc.get("for_s"),
        doc.get("severity", "page"),
        doc.get("name"),
    )


def alerts_of(config: Mapping[str, Any] | None) -> tuple[Alert, ...]:
    """The alerts stored in a run's config (``config["alerts"]``); judged for every run at every tick and batch, so
    parsed once per distinct list. Entries that no longer parse are left out rather than failing the run."""
    raw = (config or {}).get("alerts")
    if not raw or not isinstance(raw, list):
        return ()
    return _parsed(json.dumps(raw, sort_keys=True))


@functools.lru_cache(maxsize=512)
def _parsed(doc: str) -> tuple[Alert, ...]:
    out = []
    for item in json.loads(doc):
        if isinstance(item, Mapping):
            try:
                out.append(alert_from_json(item))
            except BadRequest:
                continue
    return tuple(out)


def merge_alerts(declared: Iterable[Alert], given: Iterable[Alert]) -> list[Alert]:
    """The job's alerts with the launch's: a launch alert of the same name replaces the job's."""
    merged = {a.name: a for a in declared}
    for a in given:
        merged[a.name] = a
    if len(merged) > MAX_ALERTS:
        raise BadRequest(f"{len(merged)} alerts on one run; at most {MAX_ALERTS}")
    return list(merged.values())


def _finite(value: Any, where: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise BadRequest(f"{where}: {what}")
    try:
        number = float(value)
    except ValueError:
        raise BadRequest(f"{where}: {what}") from None
    if not math.isfinite(number):
        raise BadRequest(f"{where}: {what}")
    return number


# --- the state of one alert, folded point by point (stored in a run's vitals) -----------------------------------------


def violates(alert: Alert, value: float) -> bool:
    """Whether one value is outside what the alert allows (``flat`` is judged over a window, not here)."""
    if alert.condition == "nan":
        return not math.isfinite(value)
    if not math.isfinite(value):
        return False  # a NaN is neither above nor below: the 'nan' condition and the divergence rule say it
    assert alert.threshold is not None
    return value > alert.threshold if alert.condition == "above" else value < alert.threshold


def track(
    state: Mapping[str, Any] | None,
    alert: Alert,
    points: Sequence[tuple[datetime, float]],
    steps: Sequence[int] | None = None,
) -> dict[str, Any]:
    """The alert's new state after ``points`` (``(when, value)`` of its metric, in step order; ``steps`` the step of
    each, when known).

    ``since``: when the condition started to hold without a break (None: it does not hold), and ``since_step`` the
    step it started at (where a remedy's signal began); ``last``: the latest value and ``at`` its time; for ``flat``,
    ``lo``/``hi`` are the range of the values since ``since``.
    """
    out: dict[str, Any] = dict(state or {})
    since = parse_time(out.get("since"))
    since_step = out.get("since_step") if since is not None else None
    for i, (when, value) in enumerate(points):
        when = as_utc(when)
        step = steps[i] if steps is not None and i < len(steps) else None
        if alert.condition == "flat":
            lo, hi = _float(out.get("lo")), _float(out.get("hi"))
            threshold = alert.threshold or 0.0
            if not math.isfinite(value):
                since, since_step, lo, hi = None, None, None, None
            elif since is None or lo is None or hi is None or max(hi, value) - min(lo, value) > threshold:
                since, since_step, lo, hi = when, step, value, value  # the window starts again at this point
            else:
                lo, hi = min(lo, value), max(hi, value)
            out["lo"], out["hi"] = lo, hi
        elif violates(alert, value):
            if since is None:
                since, since_step = when, step
        else:
            since, since_step = None, None
        out["last"] = value if math.isfinite(value) else str(value)
        out["at"] = when.isoformat()
    out["since"] = since.isoformat() if since is not None else None
    out["since_step"] = since_step if since is not None else None
    return out


def holding(alert: Alert, state: Mapping[str, Any] | None, now: datetime) -> float | None:
    """For how long the alert's condition has held (seconds) when that is at least its ``for``; None otherwise.

    ``above``/``below``/``nan`` hold from their first violating point until a point that does not violate; ``flat``
    needs its points to span the duration (a metric that stopped being reported is not flat, it is silent).
    """
    if not state:
        return None
    since = parse_time(state.get("since"))
    if since is None:
        return None
    end = parse_time(state.get("at")) if alert.condition == "flat" else as_utc(now)
    if end is None:
        return None
    held = (end - since).total_seconds()
    return held if held >= alert.for_s else None


def summary(alert: Alert, state: Mapping[str, Any], held_s: float) -> str:
    """One line for the page: the alert's name, what it watches and what the metric did."""
    last = state.get("last")
    shown = f"{last:.4g}" if isinstance(last, int | float) else str(last)
    lasted = f" for {format_duration(held_s)}" if held_s >= 1 else ""
    if alert.condition == "flat":
        lo, hi = _float(state.get("lo")), _float(state.get("hi"))
        moved = f"between {lo:.4g} and {hi:.4g}" if lo is not None and hi is not None and lo != hi else f"at {shown}"
        what = f"{alert.metric} flat {moved}{lasted}"
    elif alert.condition == "nan":
        what = f"{alert.metric} is {shown}{lasted}"
    else:
        what = f"{alert.metric} {shown} is {alert.condition} {alert.threshold:g}{lasted}"
    return f"alert {alert.name}: {what} ({alert.describe()})"


def alerts_missing_after(alert: Alert) -> float:
    """How long a run reports telemetry without the alert's metric before that is said."""
    return max(MISSING_AFTER_S, alert.for_s)


def never_reported(
    alerts: Iterable[Alert], states: Mapping[str, Any], first_point_at: datetime | None, now: datetime
) -> list[Alert]:
    """Alerts whose metric no point has carried though the run has reported for ``MISSING_AFTER_S`` (or the
    alert's own ``for``, if longer)."""
    if first_point_at is None:
        return []
    reporting_for = (as_utc(now) - as_utc(first_point_at)).total_seconds()
    out = []
    for alert in alerts:
        state = states.get(alert.name)
        if isinstance(state, Mapping) and state.get("at") is not None:
            continue
        if reporting_for >= alerts_missing_after(alert):
            out.append(alert)
    return out


def as_utc(when: datetime) -> datetime:
    """Naive datetimes are taken as UTC, so that they compare with aware ones."""
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 time as the vitals store it, in UTC; None for anything else."""
    if not isinstance(value, str):
        return None
    try:
        return as_utc(datetime.fromisoformat(value))
    except ValueError:
        return None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
