"""labbot.training.alerts: the words of an alert, and when one holds (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from labbot.common.errors import BadRequest
from labbot.training.alerts import (
    MISSING_AFTER_S,
    Alert,
    alert_from_json,
    alerts_of,
    holding,
    make_alert,
    merge_alerts,
    never_reported,
    parse_alert,
    summary,
    track,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pass_rate below 0.2 for 10m", Alert("pass_rate-below", "pass_rate", "below", 0.2, 600.0, "page")),
        ("loss above 5", Alert("loss-above", "loss", "above", 5.0, 0.0, "page")),
        ("reward flat for 15m warning", Alert("reward-flat", "reward", "flat", 0.0, 900.0, "warning")),
        ("reward flat within 0.01 for 1h as stuck", Alert("stuck", "reward", "flat", 0.01, 3600.0, "page")),
        ("grad_norm nan", Alert("grad_norm-nan", "grad_norm", "nan", None, 0.0, "page")),
        ("eval/acc BELOW 0.5 for 2m warning as acc-low", Alert("acc-low", "eval/acc", "below", 0.5, 120.0, "warning")),
    ],
)
def test_the_words_of_an_alert(text: str, expected: Alert) -> None:
    alert = parse_alert(text)
    assert alert == expected
    again = parse_alert(alert.describe())  # describe() gives the words back (without severity and name)
    assert (again.metric, again.condition, again.threshold, again.for_s) == (
        alert.metric,
        alert.condition,
        alert.threshold,
        alert.for_s,
    )
    assert alert_from_json(alert.to_json()) == alert


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("pass_rate", "write METRIC above|below NUMBER"),
        ("pass_rate under 0.2", "condition 'under' is not one of above, below, flat, nan"),
        ("pass_rate below", "'below' needs a number"),
        ("pass_rate below low", "'low' is not a number"),
        ("pass_rate below nan", "needs a finite threshold"),
        ("pass_rate below 0.2 for ever", "bad duration 'ever'"),
        ("pass_rate below 0.2 for 10m loudly", "'loudly' is not understood there"),
        ("reward flat", "'flat' needs a duration"),
        ("reward flat within -1 for 5m", "'flat' takes 'within' a number ≥ 0"),
        ("loss nan 3", "'3' is not understood there"),
        ("pass_rate below 0.2 as bad/name", "alert name 'bad/name'"),
        ("pass rate below 0.2", "condition 'rate' is not one of"),
    ],
)
def test_bad_words_say_what_is_accepted(text: str, said: str) -> None:
    with pytest.raises(BadRequest) as e:
        parse_alert(text)
    assert said in e.value.message


def test_a_table_needs_a_metric_and_a_known_severity() -> None:
    with pytest.raises(BadRequest, match="metric None is not a metric name"):
        make_alert(None, "below", 0.2)
    with pytest.raises(BadRequest, match="severity 'loud' is not one of page, warning"):
        make_alert("loss", "above", 1, None, "loud")
    with pytest.raises(BadRequest, match="'nan' takes no threshold"):
        make_alert("loss", "nan", 1)


def test_a_launch_alert_replaces_the_jobs_alert_of_the_same_name() -> None:
    declared = [parse_alert("pass_rate below 0.2 for 10m"), parse_alert("reward flat for 15m")]
    merged = merge_alerts(declared, [parse_alert("pass_rate below 0.5 for 1m")])
    assert [a.describe() for a in merged] == ["pass_rate below 0.5 for 1m", "reward flat for 15m"]
    with pytest.raises(BadRequest, match="at most 20"):
        merge_alerts([], [parse_alert(f"m{i} above 1") for i in range(21)])


def test_stored_alerts_are_read_back_and_junk_is_left_out() -> None:
    good = parse_alert("pass_rate below 0.2 for 10m").to_json()
    assert alerts_of({"alerts": [good, {"metric": "x", "condition": "sideways"}, "junk"]}) == (alert_from_json(good),)
    assert alerts_of({}) == () and alerts_of(None) == ()


def test_below_holds_for_its_duration_then_clears_on_a_good_point() -> None:
    alert = parse_alert("pass_rate below 0.2 for 10m")
    st = track(None, alert, [(at(0), 0.5), (at(60), 0.1)])
    assert st["since"] == at(60).isoformat()
    assert holding(alert, st, at(60 + 599)) is None, "under its 'for'"
    assert holding(alert, st, at(60 + 600)) == 600.0
    st = track(st, alert, [(at(700), 0.15)])
    assert holding(alert, st, at(700)) == 640.0, "still below: held since the first bad point"
    assert "alert pass_rate-below: pass_rate 0.15 is below 0.2 for 10m 40s" in summary(alert, st, 640.0)
    st = track(st, alert, [(at(710), 0.3)])
    assert st["since"] is None and holding(alert, st, at(2000)) is None


def test_a_nan_is_neither_above_nor_below_but_is_nan() -> None:
    below = parse_alert("loss below 1")
    assert track(None, below, [(at(0), float("nan"))])["since"] is None
    nan = parse_alert("loss nan")
    st = track(None, nan, [(at(0), 1.0), (at(5), float("inf"))])
    assert holding(nan, st, at(5)) == 0.0
    assert "loss is inf" in summary(nan, st, 0.0)
    assert track(st, nan, [(at(6), 2.0)])["since"] is None


def test_flat_needs_its_points_to_span_the_duration() -> None:
    alert = parse_alert("reward flat within 0.01 for 5m")
    st = track(None, alert, [(at(0), 0.5), (at(100), 0.505), (at(200), 0.498)])
    assert holding(alert, st, at(10_000)) is None, "the points span 200 s, not 5m: silence is not flatness"
    st = track(st, alert, [(at(300), 0.501)])
    assert holding(alert, st, at(300)) == 300.0
    assert "reward flat between 0.498 and 0.505" in summary(alert, st, 300.0)
    st = track(st, alert, [(at(310), 0.6)])
    assert st["since"] == at(310).isoformat() and holding(alert, st, at(320)) is None, "a move restarts the window"


def test_a_metric_never_reported_is_found_after_a_while_of_telemetry() -> None:
    alerts = [parse_alert("pass_rate below 0.2"), parse_alert("loss above 9 for 1h")]
    states = {"loss-above": {"at": at(5).isoformat(), "since": None}}
    assert never_reported(alerts, states, at(0), at(MISSING_AFTER_S - 1)) == []
    assert never_reported(alerts, states, at(0), at(MISSING_AFTER_S)) == [alerts[0]]
    assert never_reported(alerts, {}, None, at(10**6)) == [], "no telemetry at all is the silent rule's business"
    long = parse_alert("acc below 0.1 for 1h")
    assert never_reported([long], {}, at(0), at(MISSING_AFTER_S)) == [], "an alert's own 'for' is waited out"
