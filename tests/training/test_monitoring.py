"""labbot.training.monitoring, the watchdog's judgment: the rules of ``evaluate``, ``infra_finding`` and the
vitals bookkeeping of ``observe``.

Everything under test is a pure function of its arguments, so time is a fixed ``T0`` plus offsets and no test
sleeps. Every finding a test sees is also checked to be JSON-safe (``allow_nan=False``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labbot.training.monitoring import (
    DIVERGED,
    FAILED,
    HUNG,
    INFRA,
    KINDS,
    PAGE,
    PENDING,
    SILENT,
    SLOW,
    WARNING,
    Finding,
    RunState,
    Thresholds,
    evaluate,
    infra_finding,
    observe,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def run(**changes: Any) -> RunState:
    """A healthy running run: attempt 1 submitted at T0, telemetry and step advance at T0."""
    base = RunState(
        run_id="r1",
        status="running",
        ray_status="RUNNING",
        ray_error_type=None,
        ray_message="",
        attempt=1,
        attempt_started_at=T0,
        last_telemetry_at=T0,
        last_step=10,
        last_step_at=T0,
        vitals={},
        thresholds=Thresholds(),
    )
    return dataclasses.replace(base, **changes)


def judge(state: RunState, now: datetime) -> list[Finding]:
    """``evaluate``, checking what holds for every answer: KINDS order, severities, JSON-safe details."""
    findings = evaluate(state, now)
    kinds = [f.kind for f in findings]
    assert kinds == [k for k in KINDS if k in kinds]
    assert len(set(kinds)) == len(kinds)
    assert not {SILENT, HUNG} <= set(kinds)
    for f in findings:
        assert f.severity == (WARNING if f.kind == SLOW else PAGE)
        assert "\n" not in f.summary and f.summary
        json.dumps(f.detail, allow_nan=False)
    return findings


def kinds(findings: list[Finding]) -> list[str]:
    return [f.kind for f in findings]


def losses(*values: float, start: int = 0) -> list[tuple[int, datetime, dict[str, float]]]:
    """Points with these losses at consecutive steps from ``start``, one second apart."""
    return [(start + i, at(start + i), {"loss": v}) for i, v in enumerate(values)]


def rated(rates: list[float]) -> dict[str, Any]:
    return {"attempt": 1, "rates": rates, "loss_window": []}


# --- silent / hung ----------------------------------------------------------------------------------------------------


def test_healthy_run_finds_nothing() -> None:
    state = run(last_telemetry_at=at(590), last_step_at=at(590))
    assert judge(state, at(600)) == []


def test_silent_after_stall_after_without_telemetry() -> None:
    state = run(last_telemetry_at=at(100), last_step_at=at(100), thresholds=Thresholds(stall_after_s=30))
    assert judge(state, at(129.9)) == []
    [f] = judge(state, at(230))
    assert f.kind == SILENT
    assert f.summary == "no telemetry for 2m 10s (threshold 30s)"
    assert f.detail["silent_for_s"] == 130.0
    assert f.detail["threshold_s"] == 30.0


def test_silent_and_hung_are_exclusive() -> None:
    """No telemetry means no step either: that is one finding, silent, not two."""
    state = run(last_telemetry_at=at(0), last_step_at=at(0))
    assert kinds(judge(state, at(10_000))) == [SILENT]


def test_heartbeat_only_job_is_hung_not_silent() -> None:
    state = run(last_telemetry_at=at(695), last_step=57, last_step_at=at(50))
    assert judge(state, at(649)) == []
    [f] = judge(state, at(700))
    assert f.kind == HUNG
    assert f.detail["last_step"] == 57
    assert f.detail["stuck_for_s"] == 650.0
    assert f.detail["threshold_s"] == 600.0
    assert f.summary == "step stuck at 57 for 10m 50s though heartbeats arrive (threshold 10m)"


def test_fresh_restart_is_not_silent_until_stall_after_since_its_submission() -> None:
    """Telemetry from the previous attempt is old, but the clock starts again when attempt 2 is submitted."""
    state = run(attempt=2, attempt_started_at=at(5000), last_telemetry_at=at(100), last_step_at=at(100))
    assert judge(state, at(5599)) == []
    [f] = judge(state, at(5600))
    assert f.kind == SILENT
    assert f.detail["silent_for_s"] == 600.0
    assert "since attempt 2 was submitted" in f.summary


def test_restart_sending_heartbeats_but_no_step_is_hung_since_its_submission() -> None:
    state = run(attempt=2, attempt_started_at=at(5000), last_telemetry_at=at(5590), last_step_at=None)
    assert judge(state, at(5599)) == []
    [f] = judge(state, at(5600))
    assert f.kind == HUNG
    assert "since attempt 2 was submitted" in f.summary


def test_no_time_known_at_all_finds_no_stall() -> None:
    state = run(attempt_started_at=None, last_telemetry_at=None, last_step_at=None, last_step=None)
    assert judge(state, at(1e6)) == []


@pytest.mark.parametrize("ray_status", [None, "PENDING", "STOPPED", "SUCCEEDED"])
def test_stalls_are_judged_only_while_ray_says_running(ray_status: str | None) -> None:
    state = run(ray_status=ray_status, thresholds=Thresholds(pending_after_s=1e9))
    assert judge(state, at(10_000)) == []


# --- pending ----------------------------------------------------------------------------------------------------------


def test_pending_threshold() -> None:
    state = run(status="pending", ray_status="PENDING", last_telemetry_at=None, last_step_at=None)
    assert judge(state, at(599)) == []
    [f] = judge(state, at(600))
    assert f.kind == PENDING
    [f] = judge(state, at(603))
    assert f.summary == "pending for 10m 3s (threshold 10m): Ray has not found resources for it"
    assert f.detail["pending_for_s"] == 603.0
    assert f.detail["threshold_s"] == 600.0


def test_pending_uses_its_own_threshold() -> None:
    state = run(ray_status="PENDING", thresholds=Thresholds(pending_after_s=60, stall_after_s=10))
    assert kinds(judge(state, at(61))) == [PENDING]


# --- failed -----------------------------------------------------------------------------------------------------------


def test_failed_carries_error_type_and_message() -> None:
    state = run(ray_status="FAILED", ray_error_type="RuntimeError", ray_message="injected crash at step 30")
    [f] = judge(state, at(1))
    assert f.kind == FAILED
    assert f.summary == "RuntimeError: injected crash at step 30"
    assert f.detail == {"error_type": "RuntimeError", "message": "injected crash at step 30"}


def test_failed_without_error_type_says_just_the_message() -> None:
    [f] = judge(run(ray_status="FAILED", ray_message="exit code 1"), at(1))
    assert f.summary == "exit code 1"
    assert f.detail["error_type"] is None


def test_failed_message_is_one_line_in_the_summary_and_cut_to_500_chars_in_the_detail() -> None:
    message = "Traceback (most recent call last):\n" + "x" * 2000
    [f] = judge(run(ray_status="FAILED", ray_error_type="E", ray_message=message), at(1))
    assert len(f.detail["message"]) == 500
    assert message.startswith(f.detail["message"])
    assert len(f.summary) < 400


def test_a_failed_entrypoint_is_summed_up_by_its_exception_not_rays_envelope() -> None:
    message = (
        "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\n"
        'step 35\nTraceback (most recent call last):\n  File "tiny_lm.py", line 9, in <module>\n'
        "    raise RuntimeError('injected crash at step 35')\nRuntimeError: injected crash at step 35\n"
    )
    [f] = judge(run(ray_status="FAILED", ray_error_type="JOB_ENTRYPOINT_COMMAND_ERROR", ray_message=message), at(1))
    assert f.summary == "RuntimeError: injected crash at step 35 (exit code 1)"
    assert f.detail["message"] == message, "Ray's whole message stays in the detail"


def test_failed_is_found_even_for_a_run_labbot_already_marked_failed() -> None:
    state = run(status="failed", ray_status="FAILED", ray_message="boom", last_telemetry_at=None)
    assert kinds(judge(state, at(10_000))) == [FAILED]


# --- terminal, stop_requested -----------------------------------------------------------------------------------------

DIVERGED_VITALS = {"attempt": 1, "divergence": {"reason": "nan", "step": 5, "value": "NaN", "at": T0.isoformat()}}


@pytest.mark.parametrize("status", ["succeeded", "stopped", "failed"])
@pytest.mark.parametrize("ray_status", ["RUNNING", "PENDING", "SUCCEEDED", "STOPPED", None])
def test_terminal_runs_find_nothing(status: str, ray_status: str | None) -> None:
    state = run(status=status, ray_status=ray_status, vitals=DIVERGED_VITALS)
    assert judge(state, at(100_000)) == []


@pytest.mark.parametrize("ray_status", ["RUNNING", "PENDING", "FAILED"])
def test_stop_requested_finds_nothing(ray_status: str) -> None:
    state = run(ray_status=ray_status, stop_requested=True, vitals=DIVERGED_VITALS, ray_message="boom")
    assert judge(state, at(100_000)) == []


# --- diverged ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "reason", "value"),
    [(math.nan, "nan", "NaN"), (math.inf, "inf", "Infinity"), (-math.inf, "inf", "-Infinity")],
)
def test_non_finite_loss_diverges(bad: float, reason: str, value: str) -> None:
    points = [*losses(2.0, 1.9, 1.8), (57, at(57), {"loss": bad})]
    vitals = observe({}, 1, points, now=at(60))
    assert vitals["divergence"] == {"reason": reason, "step": 57, "value": value, "at": at(60).isoformat()}
    assert vitals["loss_window"] == [2.0, 1.9, 1.8]  # the bad value is not in the window
    [f] = judge(run(vitals=vitals, last_telemetry_at=at(60), last_step_at=at(60)), at(61))
    assert f.kind == DIVERGED
    assert f.summary == f"loss is {value} at step 57"
    assert f.detail["reason"] == reason


def test_non_finite_loss_sent_as_a_json_string_diverges() -> None:
    vitals = observe({}, 1, [(3, at(3), {"loss": "NaN"})], now=at(4))  # type: ignore[dict-item]
    assert vitals["divergence"]["reason"] == "nan"


def test_tenfold_spike_diverges() -> None:
    points = [*losses(3.9, 3.5, 3.2, 3.0, 2.9), (80, at(80), {"loss": 412.3})]
    vitals = observe({}, 1, points, now=at(81))
    div = vitals["divergence"]
    assert div == {"reason": "spike", "step": 80, "value": 412.3, "trailing_max": 3.9, "at": at(81).isoformat()}
    assert 412.3 not in vitals["loss_window"]
    [f] = judge(run(vitals=vitals, last_telemetry_at=at(81), last_step_at=at(81)), at(82))
    assert f.summary == "loss spiked to 412.3 at step 80, over 10× the trailing maximum 3.9"


def test_ninefold_rise_is_not_a_spike() -> None:
    vitals = observe({}, 1, [*losses(1.0, 1.0, 1.0, 1.0, 1.0), (9, at(9), {"loss": 9.0})], now=at(10))
    assert "divergence" not in vitals
    assert vitals["loss_window"][-1] == 9.0


def test_no_spike_before_five_window_values() -> None:
    vitals = observe({}, 1, [*losses(1.0, 1.0, 1.0, 1.0), (9, at(9), {"loss": 1000.0})], now=at(10))
    assert "divergence" not in vitals
    assert len(vitals["loss_window"]) == 5


def test_no_spike_when_the_trailing_maximum_is_not_positive() -> None:
    vitals = observe({}, 1, [*losses(-5.0, -4.0, -3.0, -2.0, 0.0), (9, at(9), {"loss": 1000.0})], now=at(10))
    assert "divergence" not in vitals


def test_spike_factor_is_a_parameter() -> None:
    vitals = observe({}, 1, [*losses(1.0, 1.0, 1.0, 1.0, 1.0), (9, at(9), {"loss": 3.5})], now=at(10), spike_factor=3)
    assert vitals["divergence"]["reason"] == "spike"


def test_points_are_judged_in_step_order() -> None:
    """The spike comes last by step even though it is first in the batch, so the window is full by then."""
    points = [(80, at(80), {"loss": 412.3}), *reversed(losses(3.9, 3.5, 3.2, 3.0, 2.9))]
    vitals = observe({}, 1, points, now=at(81))
    assert vitals["divergence"]["step"] == 80
    assert vitals["loss_window"] == [3.9, 3.5, 3.2, 3.0, 2.9]


def test_loss_window_keeps_the_last_50() -> None:
    vitals = observe({}, 1, losses(*[float(i + 1) for i in range(80)]), now=at(100))
    assert vitals["loss_window"] == [float(i + 1) for i in range(30, 80)]


def test_points_without_a_loss_only_feed_the_rates() -> None:
    vitals = observe({}, 1, [(0, at(0), {"lr": 0.1}), (10, at(5), {"grad_norm": 1.0})], now=at(5))
    assert vitals["loss_window"] == []
    assert vitals["rates"] == [2.0]


# --- latch and recovery -----------------------------------------------------------------------------------------------


def test_divergence_is_latched_until_five_normal_losses_and_thirty_seconds() -> None:
    vitals = observe({}, 1, [*losses(1.0, 1.0, 1.0), (3, at(3), {"loss": math.nan})], now=at(3))
    first = vitals["divergence"]
    vitals = observe(vitals, 1, losses(1.0, 1.0, 1.0, 1.0, start=4), now=at(8))
    assert vitals["divergence"] == first and vitals["recovered_points"] == 4
    vitals = observe(vitals, 1, losses(1.0, start=8), now=at(9))
    assert vitals["divergence"] == first and vitals["recovered_points"] == 5  # enough points, too soon
    still = run(vitals=vitals, last_telemetry_at=at(30), last_step_at=at(30))
    assert kinds(judge(still, at(30))) == [DIVERGED]
    vitals = observe(vitals, 1, [], now=at(33))  # a heartbeat 30 s after the latch clears it
    assert "divergence" not in vitals and "recovered_points" not in vitals
    assert judge(dataclasses.replace(still, vitals=vitals), at(33)) == []


def test_thirty_seconds_without_five_normal_losses_does_not_clear() -> None:
    vitals = observe({}, 1, [(3, at(3), {"loss": math.inf})], now=at(3))
    vitals = observe(vitals, 1, losses(1.0, 1.0, 1.0, 1.0, start=4), now=at(1000))
    assert vitals["divergence"]["reason"] == "inf"


def test_five_normal_losses_in_one_late_batch_clear_at_once() -> None:
    vitals = observe({}, 1, [(3, at(3), {"loss": math.nan})], now=at(3))
    vitals = observe(vitals, 1, losses(1.0, 1.0, 1.0, 1.0, 1.0, start=4), now=at(40))
    assert "divergence" not in vitals


def test_a_new_divergence_while_latched_keeps_the_first_and_restarts_the_count() -> None:
    vitals = observe({}, 1, [*losses(1.0, 1.0, 1.0, 1.0, 1.0), (5, at(5), {"loss": math.nan})], now=at(5))
    first = vitals["divergence"]
    vitals = observe(vitals, 1, [*losses(1.0, 1.0, 1.0, start=6), (9, at(9), {"loss": 500.0})], now=at(50))
    assert vitals["divergence"] == first
    assert vitals["recovered_points"] == 0
    vitals = observe(vitals, 1, losses(1.0, 1.0, 1.0, 1.0, start=10), now=at(60))
    assert vitals["divergence"] == first  # four since the spike
    vitals = observe(vitals, 1, losses(1.0, start=14), now=at(61))
    assert "divergence" not in vitals


def test_diverged_comes_with_other_findings_in_kinds_order() -> None:
    vitals = observe({}, 1, [(57, at(57), {"loss": math.nan})], now=at(57))
    state = run(vitals=vitals, last_telemetry_at=at(1000), last_step=57, last_step_at=at(57))
    assert kinds(judge(state, at(1001))) == [HUNG, DIVERGED]
    state = dataclasses.replace(state, ray_status="FAILED", ray_message="NaN loss")
    assert kinds(judge(state, at(1001))) == [FAILED, DIVERGED]


# --- rates and slow ---------------------------------------------------------------------------------------------------


def test_rates_sample_at_least_two_seconds_apart() -> None:
    points: list[tuple[int, datetime, dict[str, float]]] = [
        (0, at(0), {}),
        (1, at(1), {}),
        (4, at(2), {}),
        (5, at(3), {}),
        (10, at(6), {}),
    ]
    vitals = observe({}, 1, points, now=at(6))
    assert vitals["rates"] == [2.0, 1.5]
    assert vitals["anchor"] == {"step": 10, "when": at(6).isoformat()}


def test_rates_continue_across_batches_and_keep_the_last_30() -> None:
    vitals: dict[str, Any] = {}
    for i in range(40):
        vitals = observe(vitals, 1, [(i * 10, at(i * 4), {"loss": 1.0})], now=at(i * 4))
    assert len(vitals["rates"]) == 30
    assert set(vitals["rates"]) == {2.5}


def test_first_point_only_sets_the_anchor() -> None:
    vitals = observe({}, 1, [(7, at(7), {})], now=at(7))
    assert vitals["rates"] == []
    assert vitals["anchor"]["step"] == 7


def test_steady_rate_is_not_slow() -> None:
    vitals: dict[str, Any] = {}
    for i in range(30):
        vitals = observe(vitals, 1, [(i * 20, at(i * 10), {"loss": 1.0})], now=at(i * 10))
    assert judge(run(vitals=vitals), at(1)) == []


def test_rate_at_40_percent_for_three_samples_is_slow() -> None:
    vitals = rated([2.0] * 10 + [0.8, 0.8, 0.8])
    [f] = judge(run(vitals=vitals), at(1))
    assert f.kind == SLOW and f.severity == WARNING
    assert f.detail["rate"] == 0.8
    assert f.detail["median"] == 2.0
    assert "0.8 steps/s" in f.summary and "2 steps/s" in f.summary


def test_slow_from_observed_points() -> None:
    vitals: dict[str, Any] = {}
    step, t = 0, 0.0
    for rate in [2.0] * 10 + [0.8] * 3:
        step, t = step + int(rate * 10), t + 10
        vitals = observe(vitals, 1, [(step, at(t), {"loss": 1.0})], now=at(t))
    assert kinds(judge(run(vitals=vitals), at(1))) == [SLOW]


def test_two_slow_samples_are_not_slow() -> None:
    assert judge(run(vitals=rated([2.0] * 10 + [0.8, 0.8])), at(1)) == []
    assert judge(run(vitals=rated([2.0] * 10 + [0.8, 2.0, 0.8, 0.8])), at(1)) == []


def test_slow_needs_slow_samples_plus_five_samples() -> None:
    assert judge(run(vitals=rated([2.0] * 4 + [0.8] * 3)), at(1)) == []
    assert kinds(judge(run(vitals=rated([2.0] * 5 + [0.8] * 3)), at(1))) == [SLOW]


def test_slow_median_looks_back_at_most_twenty_samples() -> None:
    """Ten fast samples long ago are outside the 20 the median uses, so the recent 1.0 steps/s is the norm."""
    vitals = rated([100.0] * 10 + [1.0] * 20 + [0.6] * 3)
    assert judge(run(vitals=vitals), at(1)) == []


def test_slow_thresholds_are_parameters() -> None:
    vitals = rated([2.0] * 10 + [1.5, 1.5])
    assert judge(run(vitals=vitals), at(1)) == []
    [f] = judge(run(vitals=vitals, thresholds=Thresholds(slow_factor=0.8, slow_samples=2)), at(1))
    assert f.kind == SLOW


def test_slow_is_not_reported_with_a_stall_or_off_ray_running() -> None:
    vitals = rated([2.0] * 10 + [0.1] * 3)
    assert kinds(judge(run(vitals=vitals, last_telemetry_at=at(995)), at(1000))) == [HUNG]
    assert kinds(judge(run(vitals=vitals), at(1000))) == [SILENT]
    assert judge(run(vitals=vitals, ray_status="PENDING"), at(1)) == []


def test_zero_median_is_not_slow() -> None:
    assert judge(run(vitals=rated([0.0] * 10 + [0.0] * 3)), at(1)) == []


# --- attempts ---------------------------------------------------------------------------------------------------------


def test_attempt_change_resets_rates_and_drops_divergence_but_keeps_the_loss_window() -> None:
    vitals = observe({}, 1, [(0, at(0), {"loss": 2.0}), (10, at(5), {"loss": 1.5})], now=at(5))
    vitals = observe(vitals, 1, [(11, at(6), {"loss": math.nan})], now=at(6))
    assert vitals["rates"] == [2.0] and "divergence" in vitals
    vitals = observe(vitals, 2, [(8, at(100), {"loss": 1.4})], now=at(100))
    assert vitals["attempt"] == 2
    assert vitals["rates"] == []
    assert vitals["anchor"] == {"step": 8, "when": at(100).isoformat()}  # anchor restarted, not 10 → 8
    assert "divergence" not in vitals and "recovered_points" not in vitals
    assert vitals["loss_window"] == [2.0, 1.5, 1.4]


def test_a_previous_attempt_flushing_its_tail_changes_nothing() -> None:
    vitals = observe({}, 2, [(0, at(0), {"loss": 2.0}), (10, at(5), {"loss": 1.5})], now=at(5))
    assert observe(vitals, 1, [(50, at(6), {"loss": math.nan})], now=at(6)) == vitals


# --- observe: purity and size -----------------------------------------------------------------------------------------

loss_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-10, max_value=10),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324]),
)
point = st.tuples(
    st.integers(min_value=0, max_value=10**9),
    st.floats(min_value=0, max_value=10**7),
    st.dictionaries(st.sampled_from(["loss", "lr", "grad_norm"]), loss_values, max_size=3),
)
batch = st.tuples(st.integers(min_value=1, max_value=4), st.lists(point, max_size=20), st.floats(0, 1000))


@settings(max_examples=200, deadline=None)
@given(batches=st.lists(batch, max_size=40), spike_factor=st.floats(min_value=1, max_value=100))
def test_observe_never_mutates_and_stays_small_and_json_safe(
    batches: list[tuple[int, list[tuple[int, float, dict[str, float]]], float]], spike_factor: float
) -> None:
    vitals: dict[str, Any] = {}
    clock = 0.0
    for attempt, raw_points, advance in batches:
        clock += advance
        points = [(step, at(t), metrics) for step, t, metrics in raw_points]
        before, points_before = copy.deepcopy(vitals), copy.deepcopy(points)
        new = observe(vitals, attempt, points, now=at(clock), spike_factor=spike_factor)
        assert new is not vitals
        assert vitals == before and points == points_before
        text = json.dumps(new, allow_nan=False)
        assert len(text) < 8 * 1024
        assert json.loads(text) == new
        assert len(new["loss_window"]) <= 50 and len(new["rates"]) <= 30
        assert all(math.isfinite(v) for v in new["loss_window"] + new["rates"])
        vitals = new
        for f in evaluate(run(vitals=vitals, thresholds=Thresholds(spike_factor=spike_factor)), at(clock)):
            json.dumps(f.detail, allow_nan=False)


def test_observe_does_not_share_lists_with_its_input() -> None:
    vitals = observe({}, 1, [*losses(1.0, 2.0), (10, at(5), {"loss": 1.0})], now=at(5))
    new = observe(vitals, 1, [], now=at(6))
    new["loss_window"].append(99.0)
    new["rates"].append(99.0)
    assert vitals["loss_window"] == [1.0, 2.0, 1.0] and vitals["rates"] == [2.0]


# --- evaluate: properties ---------------------------------------------------------------------------------------------

maybe_time = st.one_of(st.none(), st.floats(min_value=0, max_value=10**6).map(at))


@settings(max_examples=300, deadline=None)
@given(
    status=st.sampled_from(["pending", "running", "stalled", "restarting", "succeeded", "failed", "stopped"]),
    ray_status=st.sampled_from([None, "PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"]),
    started=maybe_time,
    telemetry=maybe_time,
    step_at=maybe_time,
    rates=st.lists(st.floats(min_value=0, max_value=1e6), max_size=30),
    now=st.floats(min_value=0, max_value=2 * 10**6).map(at),
    stop=st.booleans(),
)
def test_evaluate_answers_are_well_formed(
    status: str,
    ray_status: str | None,
    started: datetime | None,
    telemetry: datetime | None,
    step_at: datetime | None,
    rates: list[float],
    now: datetime,
    stop: bool,
) -> None:
    state = run(
        status=status,
        ray_status=ray_status,
        ray_message="msg",
        attempt_started_at=started,
        last_telemetry_at=telemetry,
        last_step_at=step_at,
        vitals={**DIVERGED_VITALS, "rates": rates},
        stop_requested=stop,
    )
    found = kinds(judge(state, now))
    if stop:
        assert found == []
    elif status in ("succeeded", "failed", "stopped"):
        assert found == ([FAILED] if ray_status == "FAILED" else [])
    else:
        assert DIVERGED in found
        assert (FAILED in found) == (ray_status == "FAILED")


# --- infra ------------------------------------------------------------------------------------------------------------


def test_infra_finding_thresholds() -> None:
    address = "http://127.0.0.1:8265"
    assert infra_finding(None, at(10_000), 120, address) is None
    assert infra_finding(at(0), at(119.9), 120, address) is None
    f = infra_finding(at(0), at(185), 120, address)
    assert f is not None
    assert (f.kind, f.severity) == (INFRA, PAGE)
    assert f.summary == "the Ray API at http://127.0.0.1:8265 has not answered for 3m 5s (threshold 2m)"
    assert f.detail == {"down_for_s": 185.0, "threshold_s": 120.0, "address": address}
    json.dumps(f.detail, allow_nan=False)
    assert infra_finding(at(0), at(120), 120, address) is not None
