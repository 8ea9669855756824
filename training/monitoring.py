"""The watchdog's judgment: rules from a run's state to findings, and the bookkeeping they judge from.

The watchdog (a loop in the server) reads each active run's row, builds a ``RunState`` from it and from Ray's job
status, and asks :func:`evaluate` what is wrong; what to do about a ``Finding`` (page, restart, stop) is its own
business. Judging loss and step rate would need the metric points, so instead the telemetry ingest folds each batch
into a small JSON "vitals" dict with :func:`observe` (a trailing loss window, step-rate samples, a latched
divergence, trailing windows of the RL metrics, the state of each metric alert, the phase the job says it is in)
that is stored on the run, and the watchdog judges from that one row. :func:`infra_finding` is the one finding about
Ray itself rather than a run.

RL conditions are judged for any job that reports the metrics they read: ``frac_reward_zero_std`` and ``reward``
(``no_signal``), ``entropy`` (``entropy_collapse``), ``kl`` (``kl_blowup``), ``grad_norm`` (``grad_spike``: against its
running median), ``response_len`` and ``truncated_frac`` (``length_collapse``: every generation cut at the length
limit, or next to no generation at all), ``rollout_lag`` (``stale_rollouts``: rollouts sampled too many weight versions
behind the learner). Each RL finding says where its signal began (``since_step``) and shows the window it saw
(``window``: ``[step, value]`` pairs), which a remedy (:mod:`labbot.training.remedies`) needs to choose the checkpoint
before it. A job's own alerts
(:mod:`labbot.training.alerts`) are findings of kind ``metric``, one per alert (:attr:`Finding.condition`).

Everything here is a pure function: no I/O, no clock (``now`` is passed in), no input is mutated.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from labbot.common.durations import format_duration
from labbot.storage.floats import decode_float, encode_float
from labbot.training import alerts as alert_rules
from labbot.training import failure_reason
from labbot.training.alerts import Alert, as_utc, parse_time

SILENT, HUNG, FAILED, PENDING, DIVERGED, SLOW, INFRA = (
    "silent",
    "hung",
    "failed",
    "pending",
    "diverged",
    "slow",
    "infra",
)
NO_SIGNAL, ENTROPY_COLLAPSE, KL_BLOWUP, METRIC = "no_signal", "entropy_collapse", "kl_blowup", "metric"
GRAD_SPIKE, LENGTH_COLLAPSE, STALE_ROLLOUTS = "grad_spike", "length_collapse", "stale_rollouts"
KINDS = (
    SILENT,
    HUNG,
    FAILED,
    PENDING,
    DIVERGED,
    SLOW,
    NO_SIGNAL,
    ENTROPY_COLLAPSE,
    KL_BLOWUP,
    GRAD_SPIKE,
    LENGTH_COLLAPSE,
    STALE_ROLLOUTS,
    METRIC,
    INFRA,
)
PAGE, WARNING = "page", "warning"
# what a run's numbers say (not whether it is alive): a run that ends with one of these has not fixed it, so its page is
# not cleared by the end (a run going silent, hung or slow is over when the run is)
OF_THE_NUMBERS = frozenset(
    {DIVERGED, NO_SIGNAL, ENTROPY_COLLAPSE, KL_BLOWUP, GRAD_SPIKE, LENGTH_COLLAPSE, STALE_ROLLOUTS, METRIC}
)

# the RL metrics whose trailing windows observe() keeps, and the key of each in vitals["rl"]
RL_METRICS = {
    "frac_reward_zero_std": "zero_std",
    "reward": "reward",
    "entropy": "entropy",
    "kl": "kl",
    "grad_norm": "grad_norm",
    "response_len": "length",
    "truncated_frac": "truncated",
    "rollout_lag": "lag",
}
RL_WINDOW = 50  # trailing values kept of each
COLLAPSE_POINTS = 3  # entropy_collapse: this many latest values judged (one low sample is noise)
KL_JUMP_MIN = 1e-2  # kl_blowup's jump test needs a trailing maximum at least this large (early RL: KL is noise)
HELD_POINTS = 3  # length_collapse, stale_rollouts: this many latest reports in a row
AWAY_FACTOR = 3.0  # a signal began where its metric was first this far from its baseline (see _Series.since)
EVIDENCE_POINTS = 8  # a finding's window: at most this many latest [step, value] pairs

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
    # RL (see RL_THRESHOLDS): no_signal when frac_reward_zero_std ≥ no_signal_frac for no_signal_points reports in a
    # row, or the mean reward moves by no more than reward_flat_within over that many reports
    no_signal_frac: float = 0.95
    no_signal_points: int = 20
    reward_flat_within: float = 0.0
    # entropy_collapse: the latest values all under entropy_floor, or under the trailing maximum / entropy_drop
    entropy_floor: float = 0.02
    entropy_drop: float = 10.0
    # kl_blowup: the latest KL over kl_max, or over kl_jump × its trailing maximum
    kl_max: float = 2.0
    kl_jump: float = 10.0
    # grad_spike: the latest grad norm over grad_spike_factor × its trailing median (a warning: one spike may pass)
    grad_spike_factor: float = 100.0
    # length_collapse: truncated_frac at least truncated_max, or response_len at most length_floor, for HELD_POINTS
    truncated_max: float = 0.99
    length_floor: float = 0.5
    # stale_rollouts: rollout_lag over stale_max weight versions for HELD_POINTS reports
    stale_max: float = 4.0


# the thresholds a job (``watch = {...}`` in labbot.toml), a launch (``--watch KEY=VALUE``) or ``[watchdog]`` may set
RL_THRESHOLDS = (
    "no_signal_frac",
    "no_signal_points",
    "reward_flat_within",
    "entropy_floor",
    "entropy_drop",
    "kl_max",
    "kl_jump",
    "grad_spike_factor",
    "truncated_max",
    "length_floor",
    "stale_max",
)


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
    alerts: tuple[Alert, ...] = ()  # the job's and the launch's metric alerts


@dataclass(frozen=True)
class Finding:
    kind: str  # one of KINDS
    severity: str  # PAGE or WARNING
    summary: str  # one plain line for a human, e.g. "no telemetry for 2m 10s (threshold 30s)"
    detail: dict[str, Any]  # JSON-safe facts (non-finite floats as "NaN", "Infinity", "-Infinity")
    alert: str | None = None  # kind METRIC: the alert's name

    @property
    def condition(self) -> str:
        """What a page is kept per: the kind, or ``metric:NAME`` for a metric alert (one page per alert)."""
        return condition_of(self.kind, self.alert)


def condition_of(kind: str, alert: str | None) -> str:
    return f"{kind}:{alert}" if kind == METRIC and alert else kind


# --- evaluate --------------------------------------------------------------------------------------------------------


def evaluate(state: RunState, now: datetime) -> list[Finding]:
    """Everything wrong with ``state`` at ``now``, in the order of ``KINDS`` (metric alerts by name); [] when all is
    well."""
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
        rl = state.vitals.get("rl")
        if isinstance(rl, Mapping) and rl:
            steps = state.vitals.get("rl_steps")
            for finding in rl_findings(rl, th, steps if isinstance(steps, Mapping) else None):
                found[finding.kind] = finding
    out = [found[kind] for kind in KINDS if kind in found]
    if state.alerts and state.status not in TERMINAL_STATUSES:
        out += _alerts(state, now)
    return out


def rl_findings(rl: Mapping[str, Any], th: Thresholds, steps: Mapping[str, Any] | None = None) -> list[Finding]:
    """The RL conditions of a run's trailing RL window: each key of :data:`RL_METRICS`'s values mapped to the run's
    latest values of that metric, oldest first; ``steps`` the same keys mapped to the step of each value (then each
    finding says where its signal began, ``since_step``)."""
    rules = (_no_signal, _entropy_collapse, _kl_blowup, _grad_spike, _length_collapse, _stale_rollouts)
    found = (rule(rl, th, steps or {}) for rule in rules)
    return [f for f in found if f is not None]


@dataclass(frozen=True)
class _Series:
    """One RL metric's trailing values and, when known, the step of each."""

    values: list[float]
    steps: list[int] | None

    def latest_all(self, n: int, held: Callable[[float], bool]) -> list[float] | None:
        """The latest ``n`` values when there are ``n`` and every one is ``held``; None otherwise."""
        recent = self.values[-n:]
        return recent if len(recent) == n and all(held(v) for v in recent) else None

    def since(
        self, held: Callable[[float], bool], away: Callable[[float, float], bool] | None = None
    ) -> dict[str, Any]:
        """``since_step`` and ``window`` (the latest ``[step, value]`` pairs) for a finding's detail.

        The signal began at the first step of the latest unbroken run of values where ``held``, and, with ``away``,
        earlier still while the values before it were already ``away(value, baseline)`` from the baseline (the median
        of the older half of the values before the run): a KL that crosses its bound at step 62 began climbing at
        step 41, and the checkpoint to go back to is the one before the climb."""
        window = self.values[-EVIDENCE_POINTS:]
        if self.steps is None:
            return {"window": [[None, v] for v in window]}
        i = len(self.values)
        while i > 0 and held(self.values[i - 1]):
            i -= 1
        if away is not None and i > 1:
            baseline = float(statistics.median(self.values[: max(1, i // 2)]))
            while i > 0 and away(self.values[i - 1], baseline):
                i -= 1
        out: dict[str, Any] = {"window": [[s, v] for s, v in zip(self.steps[-EVIDENCE_POINTS:], window, strict=True)]}
        if i < len(self.values):
            out["since_step"] = self.steps[i]
        return out


def _rose(value: float, baseline: float) -> bool:
    """Already on the way up: over three times the baseline (of at least ``KL_JUMP_MIN``)."""
    return value > AWAY_FACTOR * max(baseline, KL_JUMP_MIN)


def _fell(value: float, baseline: float) -> bool:
    """Already on the way down: under a third of the baseline."""
    return value * AWAY_FACTOR < baseline


def _series(rl: Mapping[str, Any], steps: Mapping[str, Any], key: str) -> _Series:
    values = _finite_list(rl.get(key))
    raw = steps.get(key)
    if isinstance(raw, list) and len(raw) == len(values) and all(type(x) is int for x in raw):
        return _Series(values, list(raw))
    return _Series(values, None)


def missing_alert_metrics(state: RunState, now: datetime) -> list[Alert]:
    """The run's alerts on a metric it has never reported, though it has reported others for a while: said once in
    the run's thread (an alert that can never fire is a typo or a job that changed), never paged."""
    if not state.alerts or state.status in TERMINAL_STATUSES:
        return []
    states = state.vitals.get("alerts")
    first = parse_time(state.vitals.get("first_point_at"))
    return alert_rules.never_reported(state.alerts, states if isinstance(states, Mapping) else {}, first, now)


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
    detail: dict[str, Any] = {"error_type": state.ray_error_type, "message": state.ray_message[:MESSAGE_CHARS]}
    lost = failure_reason.lost_node(state.ray_error_type, state.ray_message)
    if lost is not None:  # not the job's failure: the watchdog restarts it elsewhere (lost_node_of)
        detail["lost_node"] = {"node_id": lost.node_id, "ip": lost.ip, "why": lost.why}
    return Finding(
        kind=FAILED,
        severity=PAGE,
        summary=failure_reason.reason(state.ray_error_type, state.ray_message),  # the kind says it failed
        detail=detail,
    )


def lost_node_of(finding: Finding) -> failure_reason.LostNode | None:
    """The node a ``failed`` finding says the attempt lost (None: the attempt failed on its own)."""
    raw = finding.detail.get("lost_node") if finding.kind == FAILED else None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("node_id"), str):
        return None
    ip, why = raw.get("ip"), raw.get("why")
    return failure_reason.LostNode(
        raw["node_id"], ip if isinstance(ip, str) else None, why if isinstance(why, str) else None
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
    detail: dict[str, Any] = {
        "stuck_for_s": stuck_for,
        "threshold_s": float(threshold),
        "last_step": state.last_step,
        "attempt": state.attempt,
    }
    phase = state.vitals.get("phase")
    if isinstance(phase, Mapping) and isinstance(phase.get("name"), str):
        entered = parse_time(phase.get("since"))
        in_phase = stuck_for if entered is None else min(stuck_for, _seconds(now - entered))
        step = f" at step {state.last_step}" if state.last_step is not None else ""
        what = f"stuck in {phase['name']} for {format_duration(in_phase)}{step}"
        detail |= {"phase": phase["name"], "in_phase_s": in_phase}
    return Finding(
        kind=HUNG,
        severity=PAGE,
        summary=f"{what} though heartbeats arrive (threshold {format_duration(threshold)})",
        detail=detail,
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


def _no_signal(rl: Mapping[str, Any], th: Thresholds, steps: Mapping[str, Any]) -> Finding | None:
    n = max(2, int(th.no_signal_points))
    zero_series = _series(rl, steps, "zero_std")
    zero = zero_series.latest_all(n, lambda v: v >= th.no_signal_frac)
    if zero is not None:
        return Finding(
            kind=NO_SIGNAL,
            severity=PAGE,
            summary=f"no learning signal: in each of the last {n} steps, "
            + ("every group" if min(zero) >= 1 else f"{min(zero):.0%} or more of the groups")
            + f" had rewards all equal (frac_reward_zero_std ≥ {th.no_signal_frac:g}), so every advantage is zero",
            detail={"metric": "frac_reward_zero_std", "latest": zero[-1], "points": n, "floor": th.no_signal_frac}
            | zero_series.since(lambda v: v >= th.no_signal_frac),
        )
    reward_series = _series(rl, steps, "reward")
    reward = reward_series.values[-n:]
    if len(reward) == n and max(reward) - min(reward) <= th.reward_flat_within:
        evidence = reward_series.since(lambda v: abs(v - reward[-1]) <= th.reward_flat_within)
        return Finding(
            kind=NO_SIGNAL,
            severity=PAGE,
            summary=f"no learning signal: the reward has stayed at {_fmt(reward[-1])} for {n} steps"
            + (f" (within {th.reward_flat_within:g})" if th.reward_flat_within else ""),
            detail={"metric": "reward", "latest": reward[-1], "points": n, "within": th.reward_flat_within} | evidence,
        )
    return None


def _entropy_collapse(rl: Mapping[str, Any], th: Thresholds, steps: Mapping[str, Any]) -> Finding | None:
    series = _series(rl, steps, "entropy")
    values = series.values
    if len(values) < COLLAPSE_POINTS:
        return None
    recent, before = values[-COLLAPSE_POINTS:], values[:-COLLAPSE_POINTS]
    latest = recent[-1]
    if all(v < th.entropy_floor for v in recent):
        return Finding(
            kind=ENTROPY_COLLAPSE,
            severity=PAGE,
            summary=f"entropy collapsed to {_fmt(latest)}, under the floor {th.entropy_floor:g} for the last "
            f"{COLLAPSE_POINTS} reports: the policy has stopped exploring",
            detail={"metric": "entropy", "latest": latest, "floor": th.entropy_floor}
            | series.since(lambda v: v < th.entropy_floor, _fell),
        )
    top = max(before) if before else 0.0
    if top > 0 and th.entropy_drop > 1 and all(v * th.entropy_drop < top for v in recent):
        return Finding(
            kind=ENTROPY_COLLAPSE,
            severity=PAGE,
            summary=f"entropy fell from {_fmt(top)} to {_fmt(latest)}, more than ×{th.entropy_drop:g} down: "
            "the policy has stopped exploring",
            detail={"metric": "entropy", "latest": latest, "trailing_max": top, "factor": th.entropy_drop}
            | series.since(lambda v: v * th.entropy_drop < top, _fell),
        )
    return None


def _kl_blowup(rl: Mapping[str, Any], th: Thresholds, steps: Mapping[str, Any]) -> Finding | None:
    series = _series(rl, steps, "kl")
    values = series.values
    if not values:
        return None
    latest, before = values[-1], values[:-1]
    if latest > th.kl_max:
        return Finding(
            kind=KL_BLOWUP,
            severity=PAGE,
            summary=f"KL to the reference policy is {_fmt(latest)}, over the bound {th.kl_max:g}",
            detail={"metric": "kl", "latest": latest, "bound": th.kl_max}
            | series.since(lambda v: v > th.kl_max, _rose),
        )
    top = max(before) if len(before) >= MIN_SPIKE_WINDOW else 0.0
    if top >= KL_JUMP_MIN and latest > th.kl_jump * top:
        return Finding(
            kind=KL_BLOWUP,
            severity=PAGE,
            summary=f"KL to the reference policy jumped to {_fmt(latest)}, over ×{th.kl_jump:g} its trailing "
            f"maximum {_fmt(top)}",
            detail={"metric": "kl", "latest": latest, "trailing_max": top, "factor": th.kl_jump}
            | series.since(lambda v: v > th.kl_jump * top, _rose),
        )
    return None


def _grad_spike(rl: Mapping[str, Any], th: Thresholds, steps: Mapping[str, Any]) -> Finding | None:
    """The latest gradient norm far over its running median (of the values before the spike): a warning, since one
    spike that clipping absorbs does no harm; a remedy may still act on it."""
    series = _series(rl, steps, "grad_norm")
    values = series.values
    if len(values) <= MIN_SPIKE_WINDOW or th.grad_spike_factor <= 1:
        return None
    latest = values[-1]
    bound = th.grad_spike_factor * float(statistics.median(values[:-1]))
    first = len(values) - 1
    while first > 0 and values[first - 1] > bound:  # a spike several reports long: the median before it all
        first -= 1
    if first < MIN_SPIKE_WINDOW:
        return None
    median = float(statistics.median(values[:first]))
    if median <= 0 or latest <= th.grad_spike_factor * median:
        return None
    return Finding(
        kind=GRAD_SPIKE,
        severity=WARNING,
        summary=f"gradient norm spiked to {_fmt(latest)}, over ×{th.grad_spike_factor:g} its running median "
        f"{_fmt(median)}",
        detail={"metric": "grad_norm", "latest": latest, "median": median, "factor": th.grad_spike_factor}
        | series.since(lambda v: v > th.grad_spike_factor * median),
    )


def _length_collapse(rl: Mapping[str, Any], th: Thresholds, steps: Mapping[str, Any]) -> Finding | None:
    cut = _series(rl, steps, "truncated")
    recent = cut.latest_all(HELD_POINTS, lambda v: v >= th.truncated_max)
    if recent is not None:
        return Finding(
            kind=LENGTH_COLLAPSE,
            severity=PAGE,
            summary=f"{min(recent):.0%} or more of the generations were cut at the length limit in each of the last "
            f"{HELD_POINTS} reports (truncated_frac ≥ {th.truncated_max:g}): the policy no longer ends its answers",
            detail={"metric": "truncated_frac", "latest": recent[-1], "bound": th.truncated_max}
            | cut.since(lambda v: v >= th.truncated_max),
        )
    length = _series(rl, steps, "length")
    recent = length.latest_all(HELD_POINTS, lambda v: v <= th.length_floor)
    if recent is not None:
        return Finding(
            kind=LENGTH_COLLAPSE,
            severity=PAGE,
            summary=f"the mean generation is {_fmt(recent[-1])} tokens long, at most {th.length_floor:g} for the last "
            f"{HELD_POINTS} reports: the policy ends its answers before it gives one",
            detail={"metric": "response_len", "latest": recent[-1], "floor": th.length_floor}
            | length.since(lambda v: v <= th.length_floor),
        )
    return None


def _stale_rollouts(rl: Mapping[str, Any], th: Thresholds, steps: Mapping[str, Any]) -> Finding | None:
    lag = _series(rl, steps, "lag")
    recent = lag.latest_all(HELD_POINTS, lambda v: v > th.stale_max)
    if recent is None:
        return None
    return Finding(
        kind=STALE_ROLLOUTS,
        severity=PAGE,
        summary=f"rollouts are {_fmt(recent[-1])} weight versions behind the learner, over {th.stale_max:g} for the "
        f"last {HELD_POINTS} reports: the learner trains on a policy it left behind",
        detail={"metric": "rollout_lag", "latest": recent[-1], "bound": th.stale_max}
        | lag.since(lambda v: v > th.stale_max),
    )


def _alerts(state: RunState, now: datetime) -> list[Finding]:
    states = state.vitals.get("alerts")
    if not isinstance(states, Mapping):
        return []
    out = []
    for alert in sorted(state.alerts, key=lambda a: a.name):
        st = states.get(alert.name)
        if not isinstance(st, Mapping):
            continue
        held = alert_rules.holding(alert, st, now)
        if held is None:
            continue
        out.append(
            Finding(
                kind=METRIC,
                severity=alert.severity,
                summary=alert_rules.summary(alert, st, held),
                detail=_json_safe(
                    {"alert": alert.name, "rule": alert.to_json(), "last": st.get("last"), "since": st.get("since")}
                    | ({"since_step": st["since_step"]} if isinstance(st.get("since_step"), int) else {})
                ),
                alert=alert.name,
            )
        )
    return out


# --- observe ---------------------------------------------------------------------------------------------------------


def observe(
    vitals: Mapping[str, Any],
    attempt: int,
    points: Sequence[tuple[int, datetime, Mapping[str, float]]],
    *,
    now: datetime,
    spike_factor: float = 10.0,
    alerts: Sequence[Alert] = (),
    phase: str | None = None,
) -> dict[str, Any]:
    """New vitals after one telemetry batch of ``attempt``: ``points`` are ``(step, when, metrics)`` in any order.

    The result is a new, JSON-safe dict of bounded size: ``attempt``, ``loss_window`` (trailing finite, non-spike
    losses), ``rates`` (steps/s samples) and their ``anchor``, and while one is latched, ``divergence`` and
    ``recovered_points``; when the job reports them, ``rl`` (trailing windows of the RL metrics), ``alerts`` (each
    alert's state, :func:`labbot.training.alerts.track`), ``first_point_at`` (the attempt's first point) and
    ``phase`` (``{"name", "since"}``: the phase the batch names and when it was entered). A batch of an attempt older
    than the one recorded (a previous attempt flushing its tail) changes nothing.
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
    ordered = sorted(points, key=lambda p: p[0])
    rl, rl_steps = _rl_windows(vitals if same_attempt else {}, ordered)
    raw_alerts = vitals.get("alerts") if same_attempt else None
    alert_states = _alert_states(raw_alerts, alerts, ordered)
    first_point_at = vitals.get("first_point_at") if same_attempt else None
    if first_point_at is None and ordered:
        first_point_at = as_utc(ordered[0][1]).isoformat()
    raw_phase = vitals.get("phase") if same_attempt else None
    phase_state = dict(raw_phase) if isinstance(raw_phase, Mapping) else None
    if phase is not None and (phase_state is None or phase_state.get("name") != phase):
        phase_state = {"name": phase, "since": now.isoformat()}

    for step, when, metrics in ordered:
        when = as_utc(when)
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
        at = parse_time(divergence.get("at"))
        if at is None or _seconds(now - at) >= RECOVERY_S:
            divergence = None

    out: dict[str, Any] = {"attempt": attempt, "loss_window": window, "rates": rates[-MAX_RATES:]}
    if anchor is not None:
        out["anchor"] = {"step": anchor[0], "when": anchor[1].isoformat()}
    if divergence is not None:
        out["divergence"] = divergence
        out["recovered_points"] = recovered
    if rl:
        out["rl"] = rl
        out["rl_steps"] = rl_steps
    if alert_states:
        out["alerts"] = alert_states
    if first_point_at is not None:
        out["first_point_at"] = first_point_at
    if phase_state is not None:
        out["phase"] = phase_state
    return out


def _rl_windows(
    vitals: Mapping[str, Any], ordered: Sequence[tuple[int, datetime, Mapping[str, float]]]
) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """The trailing window of each RL metric after a batch, and the step of each value (a window stored before steps
    were kept has none: its values are dropped rather than given steps they did not have)."""
    raw_rl, raw_steps = vitals.get("rl"), vitals.get("rl_steps")
    rl: dict[str, list[float]] = {}
    steps: dict[str, list[int]] = {}
    if isinstance(raw_rl, Mapping) and isinstance(raw_steps, Mapping):
        for key in raw_rl:
            values, at = _finite_list(raw_rl.get(key)), raw_steps.get(key)
            if isinstance(at, list) and len(at) == len(values):
                rl[key], steps[key] = values[-RL_WINDOW:], [int(s) for s in at][-RL_WINDOW:]
    for step, _, metrics in ordered:
        for name, key in RL_METRICS.items():
            value = _number(metrics.get(name))
            if value is not None and math.isfinite(value):
                rl.setdefault(key, []).append(value)
                steps.setdefault(key, []).append(step)
    return {k: v[-RL_WINDOW:] for k, v in rl.items()}, {k: v[-RL_WINDOW:] for k, v in steps.items()}


def _alert_states(
    raw: Any, alerts: Sequence[Alert], ordered: Sequence[tuple[int, datetime, Mapping[str, float]]]
) -> dict[str, Any]:
    """Each alert's state after the batch; the states of alerts the run no longer has are dropped."""
    previous = raw if isinstance(raw, Mapping) else {}
    out: dict[str, Any] = {}
    for alert in alerts:
        values, steps = [], []
        for step, when, metrics in ordered:
            value = _number(metrics.get(alert.metric))
            if value is not None:
                values.append((when, value))
                steps.append(step)
        old = previous.get(alert.name)
        if values or isinstance(old, Mapping):
            tracked = alert_rules.track(old if isinstance(old, Mapping) else None, alert, values, steps)
            out[alert.name] = _json_safe(tracked)
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


def _latest(*times: datetime | None) -> datetime | None:
    present = [as_utc(t) for t in times if t is not None]
    return max(present) if present else None


def _anchor(value: Any) -> tuple[int, datetime] | None:
    if not isinstance(value, Mapping):
        return None
    step, when = value.get("step"), parse_time(value.get("when"))
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
