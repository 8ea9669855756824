"""Remedies: parsing, the launch-time check against the job's parameters, the changes applied, and the decision
(which finding, which checkpoint, attempts left or exhausted)."""

from __future__ import annotations

import pytest

from labbot.common.errors import BadRequest
from labbot.training.registry import TINY_LM, TINY_RL
from labbot.training.remedies import (
    Act,
    Change,
    Exhausted,
    apply_changes,
    check_remedy,
    decide,
    lineage,
    lineage_text,
    parse_change,
    parse_remedy,
    signal_step,
)


def _check(text: str, spec=TINY_RL, alerts=("pass_rate_below",)):  # type: ignore[no-untyped-def]
    return check_remedy(
        parse_remedy(text, "--remedy"),
        job=spec.name,
        params=spec.params,
        checks=spec.checks,
        allowed=spec.remedy_params,
        alerts=alerts,
        where="--remedy",
    )


def test_words_and_tables_give_the_same_remedy() -> None:
    words = parse_remedy("entropy_collapse, kl_blowup: temperature += 0.5, lr *= 0.5; max 3", "w")
    table = parse_remedy(
        {"on": ["entropy_collapse", "kl_blowup"], "change": ["temperature += 0.5", "lr *= 0.5"], "max_attempts": 3},
        "t",
    )
    assert words == table
    assert words.text() == "entropy_collapse, kl_blowup: temperature += 0.5, lr *= 0.5; max 3"
    assert parse_remedy(words.to_json(), "stored") == words


def test_a_metric_alert_is_named_with_its_colon() -> None:
    r = parse_remedy("metric:pass_rate_below: lr *= 0.5", "w")
    assert r.on == ("metric:pass_rate_below",)
    assert r.acts_on("metric", "pass_rate_below", None)
    assert not r.acts_on("metric", "other", None)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("lr *= 0.5", "write 'FINDING"),
        ("hung: lr *= 0.5", "restart_on"),
        ("entropy_collapse: lr ** 2", "PARAM OP VALUE"),
        ("entropy_collapse: lr *= fast", "takes a finite number"),
        ("entropy_collapse: lr /= 0", "divides by zero"),
        ("entropy_collapse: lr *= 0.5, lr += 1", "changed twice"),
        ("entropy_collapse: lr *= 0.5; max 0", "from 1 to"),
        ("entropy_collapse: lr *= 0.5; twice", "max N"),
    ],
)
def test_bad_words_are_refused_with_what_is_accepted(text: str, said: str) -> None:
    with pytest.raises(BadRequest, match=said):
        parse_remedy(text, "--remedy")


def test_a_parameter_the_job_does_not_take_is_refused_at_launch() -> None:
    with pytest.raises(BadRequest, match=r"has no parameter 'kl_coef'.*declared parameters"):
        _check("kl_blowup: kl_coef *= 2")


def test_a_parameter_the_job_keeps_out_of_remedies_is_refused() -> None:
    # a fault's switch is a parameter, but not one a remedy may turn off: that would cure by not injecting
    with pytest.raises(BadRequest, match="does not let a remedy change 'entropy_collapse_at_step'"):
        _check("entropy_collapse: entropy_collapse_at_step = 0")


def test_a_value_out_of_range_after_some_attempt_is_refused() -> None:
    # lam is in [0, 1]: 0.5 + 0.3 is fine once, 1.1 on the second attempt is not
    _check("no_signal: lam += 0.3; max 1")
    with pytest.raises(BadRequest, match=r"after attempt 2.*lam is a number from 0 to 1"):
        _check("no_signal: lam += 0.3; max 2")
    with pytest.raises(BadRequest, match="algo is one of"):
        _check("no_signal: algo = ppo")
    with pytest.raises(BadRequest, match="not a whole number"):
        _check("no_signal: group_size *= 1.3", alerts=())


def test_a_non_number_is_set_not_scaled_and_an_unknown_alert_is_refused() -> None:
    with pytest.raises(BadRequest, match="not a number; set it with '='"):
        _check("no_signal: teacher *= 2")
    assert _check("no_signal: teacher = ema").changes == (Change("teacher", "=", "ema"),)
    with pytest.raises(BadRequest, match="names no alert of this run; its alerts: metric:pass_rate_below"):
        _check("metric:loss_high: lr *= 0.5")


def test_values_take_the_parameters_type() -> None:
    r = _check("diverged: lr *= 0.5, batch_size = 32", spec=TINY_LM, alerts=())
    assert r.changes[1].value == 32 and isinstance(r.changes[1].value, int)
    params, diff = apply_changes({"lr": 0.003, "batch_size": 16}, r.changes)
    assert params == {"lr": 0.0015, "batch_size": 32}
    with pytest.raises(BadRequest, match="does not let a remedy change 'n_layer'"):
        _check("diverged: n_layer = 3", spec=TINY_LM, alerts=())
    assert diff[0] == {"param": "lr", "from": 0.003, "to": 0.0015, "change": "lr *= 0.5"}


def test_parse_change_reads_booleans_numbers_and_words() -> None:
    assert parse_change("clip = true", "w").value is True
    assert parse_change("steps += 10", "w").value == 10
    assert parse_change("teacher = 'ema'", "w").value == "ema"


def test_signal_step_prefers_where_the_signal_began() -> None:
    assert signal_step({"since_step": 40, "step": 55}, 60) == 40
    assert signal_step({"step": 55}, 60) == 55
    assert signal_step({}, 60) == 60
    assert signal_step({}, None) == 0


def _findings(*kinds: str) -> list[tuple[str, str | None, str | None, dict[str, int]]]:
    return [(k, None, None, {"since_step": 62}) for k in kinds]


def test_decide_acts_on_the_first_finding_a_remedy_covers() -> None:
    remedies = [parse_remedy("entropy_collapse: temperature += 0.5; max 2", "t")]
    act = decide(remedies, _findings("slow", "entropy_collapse"), [], lambda step: 50, {"temperature": 1.0}, 70)
    assert isinstance(act, Act)
    assert (act.remedy, act.attempt_of_remedy, act.signal_step, act.checkpoint_step) == (0, 1, 62, 50)
    assert act.params == {"temperature": 1.5}
    assert decide(remedies, _findings("kl_blowup"), [], lambda step: 50, {}, 70) is None


def test_decide_pages_when_the_attempts_are_used() -> None:
    remedies = [parse_remedy("entropy_collapse: temperature += 0.5; max 1", "t")]
    history = [{"remedy": 0, "attempt": 2, "checkpoint_step": 50}]
    out = decide(remedies, _findings("entropy_collapse"), history, lambda step: 50, {"temperature": 1.5}, 90)
    assert isinstance(out, Exhausted)
    assert out.attempts == history


def test_nan_acts_only_on_a_non_finite_loss() -> None:
    r = parse_remedy("nan: lr *= 0.5", "t")
    assert r.acts_on("diverged", None, "nan") and r.acts_on("diverged", None, "inf")
    assert not r.acts_on("diverged", None, "spike")


def test_lineage_drops_checkpoints_a_rollback_set_aside() -> None:
    ckpts = [
        {"attempt": 1, "step": 25},
        {"attempt": 1, "step": 50},
        {"attempt": 1, "step": 75},  # written after the signal: rolled back by attempt 2
        {"attempt": 2, "step": 75},
    ]
    kept = lineage(ckpts, [{"attempt": 2, "checkpoint_step": 50}])
    assert [(c["attempt"], c["step"]) for c in kept] == [(1, 25), (1, 50), (2, 75)]
    # a rollback to the start sets every earlier checkpoint aside
    assert lineage(ckpts, [{"attempt": 3, "checkpoint_step": None}]) == []


def test_lineage_text_says_where_from_and_what_changed() -> None:
    entry = {
        "attempt": 2,
        "checkpoint_step": 50,
        "condition": "entropy_collapse",
        "signal_step": 62,
        "changes": [{"param": "temperature", "from": 1.0, "to": 2.0, "change": "temperature += 1"}],
    }
    assert (
        lineage_text(entry)
        == "attempt 2 from checkpoint step 50 after entropy_collapse from step 62: temperature 1 → 2"
    )
    assert "from the start after" in lineage_text({**entry, "checkpoint_step": None})


def test_a_launch_with_a_bad_remedy_is_refused_and_a_good_one_is_stored_before_the_jobs() -> None:
    from labbot.training.specs import LaunchRequest, resolve_launch

    with pytest.raises(BadRequest, match="has no parameter 'kl_coef'"):
        resolve_launch(TINY_RL, LaunchRequest(job="tiny-rl", remedies=["kl_blowup: kl_coef *= 2"]))
    with pytest.raises(BadRequest, match=r"lr \*= 1000.*out of range"):
        resolve_launch(TINY_RL, LaunchRequest(job="tiny-rl", remedies=["kl_blowup: lr *= 1000"]))
    cfg = resolve_launch(TINY_RL, LaunchRequest(job="tiny-rl", remedies=["kl_blowup: lr *= 0.1; max 3"]))
    assert cfg.remedies == [
        {"on": ["kl_blowup"], "changes": [{"param": "lr", "op": "*=", "value": 0.1}], "max_attempts": 3}
    ]
    assert cfg.remedied == []


def test_a_job_declaring_a_bad_remedy_is_refused_when_labbot_toml_is_read() -> None:
    from labbot.training.registry import JobRegistry

    body = {
        "entrypoint": "python rl.py",
        "params": {"lr": 0.1},
        "remedies": [{"on": "kl_blowup", "change": "beta *= 2"}],
    }
    with pytest.raises(BadRequest, match=r"\[jobs.my-rl\] is invalid.*has no parameter 'beta'"):
        JobRegistry.from_config({"my-rl": body})
    with pytest.raises(BadRequest, match="remedy_params names parameters the job does not have: beta"):
        JobRegistry.from_config({"my-rl": {"entrypoint": "x", "params": {"lr": 0.1}, "remedy_params": ["beta"]}})
