"""labbot.training.monitoring for RL jobs and metric alerts: ``no_signal``, ``entropy_collapse``, ``kl_blowup``, the
phase a stall names, and one ``metric`` finding per alert that holds. Pure functions, a fixed clock."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from labbot.training.alerts import parse_alert
from labbot.training.monitoring import (
    ENTROPY_COLLAPSE,
    HUNG,
    KINDS,
    KL_BLOWUP,
    METRIC,
    NO_SIGNAL,
    RL_WINDOW,
    Finding,
    RunState,
    Thresholds,
    evaluate,
    missing_alert_metrics,
    observe,
    rl_findings,
)

T0 = datetime(2026, 2, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def run(vitals: dict[str, Any], **changes: Any) -> RunState:
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
        vitals=vitals,
        thresholds=Thresholds(),
    )
    return dataclasses.replace(base, **changes)


def steps(metric_rows: list[dict[str, float]], start: int = 0) -> list[tuple[int, datetime, dict[str, float]]]:
    """One point per row, a second apart from step ``start``."""
    return [(start + i, at(start + i), row) for i, row in enumerate(metric_rows)]


def judge(state: RunState, now: datetime) -> list[Finding]:
    found = evaluate(state, now)
    order = [f.kind for f in found]
    assert order == sorted(order, key=KINDS.index)
    for f in found:
        json.dumps(f.detail, allow_nan=False)
        assert f.summary and "\n" not in f.summary
    return found


def vitals_after(rows: list[dict[str, float]], **kw: Any) -> dict[str, Any]:
    return observe({}, 1, steps(rows), now=at(len(rows)), **kw)


def healthy(i: int) -> dict[str, float]:
    return {"reward": 0.3 + 0.01 * (i % 5), "frac_reward_zero_std": 0.2, "entropy": 0.8, "kl": 0.05 + 0.001 * i}


def test_a_learning_rl_run_finds_nothing() -> None:
    assert judge(run(vitals_after([healthy(i) for i in range(40)])), at(41)) == []


def test_every_group_with_equal_rewards_for_the_window_is_no_signal() -> None:
    rows = [healthy(i) for i in range(10)] + [{**healthy(i), "frac_reward_zero_std": 1.0} for i in range(19)]
    assert judge(run(vitals_after(rows)), at(30)) == [], "19 of the 20 reports needed"
    rows.append({**healthy(0), "frac_reward_zero_std": 0.96})
    [f] = judge(run(vitals_after(rows)), at(31))
    assert f.kind == NO_SIGNAL and f.severity == "page"
    assert "no learning signal" in f.summary and "frac_reward_zero_std ≥ 0.95" in f.summary
    rows.append(healthy(1))  # one group with varied rewards: the signal is back
    assert judge(run(vitals_after(rows)), at(32)) == []


def test_a_flat_reward_is_no_signal_too() -> None:
    rows = [{"reward": 0.0, "entropy": 0.7} for _ in range(20)]
    [f] = judge(run(vitals_after(rows)), at(21))
    assert f.kind == NO_SIGNAL and "reward has stayed at 0 for 20 steps" in f.summary
    loose = Thresholds(no_signal_points=5, reward_flat_within=0.05)
    wobbly = [{"reward": 0.5 + 0.01 * (i % 3)} for i in range(5)]
    [f] = judge(run(vitals_after(wobbly), thresholds=loose), at(6))
    assert f.kind == NO_SIGNAL and "(within 0.05)" in f.summary


def test_entropy_under_the_floor_for_three_reports_is_a_collapse() -> None:
    rows = [healthy(i) for i in range(10)] + [{**healthy(i), "entropy": 0.001} for i in range(2)]
    assert judge(run(vitals_after(rows)), at(13)) == [], "two low reports may be noise"
    rows.append({**healthy(0), "entropy": 0.0005})
    [f] = judge(run(vitals_after(rows)), at(14))
    assert f.kind == ENTROPY_COLLAPSE and "under the floor 0.02" in f.summary


def test_entropy_falling_by_more_than_the_factor_is_a_collapse_above_the_floor() -> None:
    rows = [{"entropy": 2.0} for _ in range(10)] + [{"entropy": 0.15} for _ in range(3)]
    [f] = judge(run(vitals_after(rows)), at(14))
    assert f.kind == ENTROPY_COLLAPSE and "fell from 2 to 0.15" in f.summary
    assert judge(run(vitals_after(rows), thresholds=Thresholds(entropy_drop=20)), at(14)) == []


def test_kl_over_its_bound_or_jumping_over_its_trailing_maximum_blows_up() -> None:
    rows = [{"kl": 0.01 * (i + 1)} for i in range(10)]
    assert judge(run(vitals_after(rows)), at(11)) == []
    [f] = judge(run(vitals_after([*rows, {"kl": 1.5}])), at(12))
    assert f.kind == KL_BLOWUP and "jumped to 1.5, over ×10 its trailing maximum 0.1" in f.summary
    [f] = judge(run(vitals_after([{"kl": 2.5}])), at(2))
    assert f.kind == KL_BLOWUP and "over the bound 2" in f.summary
    assert judge(run(vitals_after([{"kl": 2.5}]), thresholds=Thresholds(kl_max=3)), at(2)) == []


def test_rl_findings_end_with_the_run() -> None:
    rows = [{"reward": 0.0, "entropy": 0.0, "kl": 9.0} for _ in range(20)]
    vitals = vitals_after(rows)
    assert [f.kind for f in judge(run(vitals), at(21))] == [NO_SIGNAL, ENTROPY_COLLAPSE, KL_BLOWUP]
    assert judge(run(vitals, status="succeeded", ray_status="SUCCEEDED"), at(21)) == []


def test_rl_windows_are_bounded_and_start_again_with_each_attempt() -> None:
    vitals = observe({}, 1, steps([healthy(i) for i in range(RL_WINDOW + 30)]), now=at(100))
    assert all(len(v) == RL_WINDOW for v in vitals["rl"].values())
    assert "rl" not in observe(vitals, 2, [], now=at(101)), "a restarted attempt is judged on its own reports"


def test_a_stall_names_the_phase_the_job_is_in() -> None:
    vitals = observe({}, 1, steps([{"reward": 0.5}]), now=at(0), phase="learn")
    vitals = observe(vitals, 1, [], now=at(30), phase="rollout")  # a heartbeat that names a new phase
    vitals = observe(vitals, 1, [], now=at(500), phase="rollout")  # the same phase: entered at 30 s still
    assert vitals["phase"] == {"name": "rollout", "since": at(30).isoformat()}
    [f] = judge(run(vitals, last_step_at=at(0), last_telemetry_at=at(700)), at(750))
    assert f.kind == HUNG
    assert f.summary.startswith("stuck in rollout for 12m at step 10 though heartbeats arrive")
    assert f.detail["phase"] == "rollout" and f.detail["in_phase_s"] == 720.0


def test_each_alert_that_holds_is_its_own_metric_finding() -> None:
    alerts = (parse_alert("pass_rate below 0.2 for 10m"), parse_alert("reward above 0.9 warning as too-good"))
    points = [
        (0, at(0), {"pass_rate": 0.5, "reward": 0.3}),
        (10, at(60), {"pass_rate": 0.1, "reward": 0.95}),
    ]
    vitals = observe({}, 1, points, now=at(60), alerts=alerts)
    patient = Thresholds(stall_after_s=10**6)  # the job is not silent in this story
    state = run(vitals, alerts=alerts, thresholds=patient)
    [too_good] = judge(state, at(600))
    assert (too_good.kind, too_good.alert, too_good.severity) == (METRIC, "too-good", "warning")
    assert too_good.condition == "metric:too-good"
    found = judge(state, at(660))
    assert [(f.alert, f.severity) for f in found] == [("pass_rate-below", "page"), ("too-good", "warning")]
    assert found[0].summary.startswith("alert pass_rate-below: pass_rate 0.1 is below 0.2 for 10m")
    recovered = observe(vitals, 1, [(20, at(700), {"pass_rate": 0.4, "reward": 0.5})], now=at(700), alerts=alerts)
    assert judge(run(recovered, alerts=alerts, thresholds=patient), at(2000)) == []


def test_alert_states_follow_the_runs_alerts() -> None:
    old = (parse_alert("loss above 5"),)
    vitals = observe({}, 1, [(0, at(0), {"loss": 9.0})], now=at(0), alerts=old)
    assert "loss-above" in vitals["alerts"]
    assert "alerts" not in observe(vitals, 1, [(1, at(1), {"loss": 9.0})], now=at(1), alerts=())


@pytest.mark.parametrize("reported", [False, True])
def test_an_alert_on_a_metric_never_reported_is_missing_after_a_while(reported: bool) -> None:
    alerts = (parse_alert("pass_rate below 0.2"),)
    row = {"loss": 1.0, **({"pass_rate": 0.5} if reported else {})}
    vitals = observe({}, 1, [(0, at(0), row)], now=at(0), alerts=alerts)
    state = run(vitals, alerts=alerts)
    assert missing_alert_metrics(state, at(599)) == []
    assert missing_alert_metrics(state, at(600)) == ([] if reported else list(alerts))
    assert missing_alert_metrics(dataclasses.replace(state, status="stopped"), at(600)) == []


def test_rl_findings_judge_a_bare_window_as_the_watchdog_does() -> None:
    """What benchmarks/rl_feedback.py replays on healthy runs: the same rules the watchdog applies to vitals."""
    healthy = {"entropy": [0.9, 0.8, 0.85, 0.7], "zero_std": [0.2, 0.4, 0.3], "reward": [0.1, 0.3, 0.5], "kl": [0.0]}
    assert rl_findings(healthy, Thresholds()) == []
    collapsed = {**healthy, "entropy": [0.9, 0.8, 0.01, 0.005, 0.004]}
    assert [f.kind for f in rl_findings(collapsed, Thresholds())] == ["entropy_collapse"]


# --- what the field watches: grad norm, lengths, staleness; and where a signal began -------------------------------


def _judged(rows: list[dict[str, float]], start: int = 1) -> list[Finding]:
    vitals = observe({}, 1, steps(rows, start), now=at(start + len(rows)))
    return rl_findings(vitals["rl"], Thresholds(), vitals["rl_steps"])


def test_a_grad_norm_far_over_its_running_median_is_a_spike_warning_from_its_step() -> None:
    calm = [{"grad_norm": g} for g in (1.0, 3.0, 0.5, 11.0, 2.0, 0.8, 1.5, 0.1, 2.2)]  # noisy, as RL's is
    assert _judged(calm) == []
    [spike] = _judged([*calm, {"grad_norm": 3000.0}])
    assert (spike.kind, spike.severity) == ("grad_spike", "warning")
    assert spike.detail["since_step"] == 10 and spike.detail["median"] == 1.5
    assert spike.detail["window"][-1] == [10, 3000.0]


def test_length_collapse_every_answer_cut_or_none_given() -> None:
    ok = [{"truncated_frac": 0.02, "response_len": 4.0}] * 5
    assert _judged(ok) == []
    cut = _judged([*ok, *[{"truncated_frac": 1.0, "response_len": 4.0}] * 3])
    assert [f.kind for f in cut] == ["length_collapse"] and cut[0].detail["since_step"] == 6
    assert "cut at the length limit" in cut[0].summary
    empty = _judged([*ok, *[{"truncated_frac": 0.0, "response_len": 0.2}] * 3])
    assert "ends its answers before it gives one" in empty[0].summary


def test_stale_rollouts_when_the_lag_stays_over_the_bound() -> None:
    assert _judged([{"rollout_lag": lag} for lag in (0, 1, 6, 1, 6)]) == [], "one stale batch is not a trend"
    [stale] = _judged([{"rollout_lag": lag} for lag in (0, 1, 6, 7, 8)])
    assert stale.kind == "stale_rollouts" and stale.detail["since_step"] == 3


def test_a_kl_blowup_began_where_the_climb_began_not_where_it_crossed_the_bound() -> None:
    calm = [{"kl": 0.03 + 0.01 * (i % 3)} for i in range(20)]  # steps 1..20
    climb = [{"kl": v} for v in (0.3, 0.5, 0.9, 1.4, 1.9, 2.6)]  # steps 21..26
    [blowup] = _judged([*calm, *climb])
    assert blowup.kind == KL_BLOWUP and blowup.detail["since_step"] == 21


def test_an_entropy_collapse_began_where_the_fall_began() -> None:
    rows = [{"entropy": 0.9}] * 10 + [{"entropy": v} for v in (0.2, 0.05, 0.01, 0.01, 0.005)]
    [collapse] = _judged(rows)
    assert collapse.kind == ENTROPY_COLLAPSE and collapse.detail["since_step"] == 11


def test_the_windows_keep_the_step_of_every_value_and_a_new_attempt_starts_them_again() -> None:
    vitals = observe({}, 1, steps([{"kl": 0.1, "entropy": 0.5}] * 3, 5), now=at(10))
    assert vitals["rl_steps"] == {"kl": [5, 6, 7], "entropy": [5, 6, 7]}
    vitals = observe(vitals, 1, steps([{"kl": 0.2}], 8), now=at(11))
    assert vitals["rl_steps"]["kl"] == [5, 6, 7, 8] and vitals["rl_steps"]["entropy"] == [5, 6, 7]
    assert "rl_steps" not in observe(vitals, 2, [], now=at(12))
    old = {"attempt": 1, "rl": {"kl": [0.1, 0.2]}}  # stored before steps were kept: dropped, never given wrong steps
    assert observe(old, 1, [], now=at(13)).get("rl") is None


def test_early_rl_kl_noise_is_no_jump() -> None:
    """At the start of RL the KL is tiny and noisy (0.001 to 0.016 in a healthy tiny-rl run): ×10 of nothing is no
    blow-up; the jump test waits for a trailing maximum of at least 0.01."""
    rows = [{"kl": v} for v in (0.0, 0.0012, 0.0005, 0.001, 0.0054, 0.0009, 0.0157)]
    assert judge(run(vitals_after(rows)), at(8)) == []


def test_a_metric_alert_says_the_step_its_condition_began_at() -> None:
    alert = parse_alert("pass_rate below 0.5 for 5s")
    rows = [{"pass_rate": v} for v in (0.9, 0.8, 0.4, 0.3, 0.6, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1)]  # steps 0..10
    vitals = vitals_after(rows, alerts=[alert])
    assert vitals["alerts"][alert.name]["since_step"] == 5, "the break at step 4 starts it again"
    [f] = evaluate(run(vitals, alerts=(alert,)), at(11))
    assert f.kind == METRIC and f.detail["since_step"] == 5


def test_no_signal_says_every_group_when_it_is_every_group() -> None:
    flat = {"zero_std": [1.0] * 20}
    [f] = rl_findings(flat, Thresholds())
    assert "in each of the last 20 steps, every group had rewards all equal" in f.summary
    [f] = rl_findings({"zero_std": [0.97] * 20}, Thresholds())
    assert "97% or more of the groups had rewards all equal" in f.summary
