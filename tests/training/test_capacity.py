"""labbot.training.capacity: the [compute] table checked, a purpose's limits from its caps and its share of Ray's
totals, admit-or-queue with the numbers, and the queue served in order with a blocked head holding its line."""

from __future__ import annotations

import pytest

from labbot.common.errors import BadRequest
from labbot.training.capacity import (
    Ask,
    Cap,
    ComputePolicy,
    Totals,
    admissible,
    decide,
    limits,
    never_fits,
    ordinal,
    positions,
    report,
)

TOTALS = Totals(cpus=16, gpus=4)


def ask(run_id: str, purpose: str = "training", cpus: float = 1, gpus: float = 0, owner: str = "U0ALICE001") -> Ask:
    return Ask(run_id, owner, purpose, cpus, gpus)


def test_no_compute_table_caps_nothing() -> None:
    policy = ComputePolicy.from_config(None)
    assert not policy.enabled
    assert decide(policy, None, [ask(str(i), gpus=4) for i in range(50)], 0, ask("new", gpus=4)).admit


def test_a_share_is_a_fraction_of_rays_totals_and_the_smaller_of_share_and_cap_holds() -> None:
    policy = ComputePolicy.from_config({"training": {"share": 0.5, "gpus": 1, "runs": 3}})
    lim = limits(policy.caps["training"], TOTALS)
    assert (lim.runs, lim.cpus, lim.gpus) == (3, 8.0, 1.0)
    assert policy.needs_totals
    assert limits(Cap(cpus=4), None).cpus == 4  # an explicit cap needs no totals


def test_over_the_cap_queues_with_the_numbers_in_words() -> None:
    policy = ComputePolicy.from_config({"training": {"runs": 3, "cpus": 8}})
    active = [ask("a", cpus=2.5), ask("b", cpus=2.5), ask("c", cpus=2.5), ask("e", purpose="eval", cpus=8)]
    decision = decide(policy, TOTALS, active, 1, ask("new", cpus=2))
    assert not decision.admit and decision.position == 2
    assert decision.reason(no_queue=True) == (
        "training is at 3 of 3 runs and 7.5 of 8 CPUs; this launch needs 2 CPUs; "
        "1 training run is queued ahead of it; without --no-queue it would wait 2nd in line"
    )


def test_a_launch_that_fits_still_queues_behind_runs_already_waiting() -> None:
    policy = ComputePolicy.from_config({"training": {"runs": 2}})
    assert decide(policy, TOTALS, [], 0, ask("new")).admit
    decision = decide(policy, TOTALS, [], 1, ask("new"))
    assert not decision.admit and decision.position == 2


def test_other_purposes_do_not_count_and_fractional_gpus_add_up_exactly() -> None:
    policy = ComputePolicy.from_config({"eval": {"gpus": 1}})
    active = [ask("t", purpose="training", gpus=4), ask("e1", purpose="eval", gpus=0.5), ask("e2", "eval", gpus=0.25)]
    assert decide(policy, TOTALS, active, 0, ask("e3", purpose="eval", gpus=0.25)).admit
    assert not decide(policy, TOTALS, active, 0, ask("e3", purpose="eval", gpus=0.5)).admit
    assert decide(policy, TOTALS, active, 0, ask("t2", purpose="training", gpus=4)).admit  # not capped


def test_the_queue_is_served_in_order_and_a_head_that_does_not_fit_holds_its_line() -> None:
    policy = ComputePolicy.from_config({"training": {"gpus": 4}, "eval": {"runs": 1}})
    active = [ask("t0", gpus=2)]
    queue = [ask("big", gpus=3), ask("small", gpus=1), ask("e1", "eval"), ask("e2", "eval")]
    assert admissible(policy, TOTALS, active, queue) == ["e1"]  # big does not fit: small waits behind it
    assert admissible(policy, TOTALS, [], queue) == ["big", "small", "e1"]
    assert positions(queue) == {"big": 1, "small": 2, "e1": 1, "e2": 2}


def test_a_launch_that_could_never_fit_its_explicit_cap_is_said_so() -> None:
    policy = ComputePolicy.from_config({"training": {"gpus": 2, "share": 0.1}, "data": {"runs": 0}})
    assert never_fits(policy, ask("x", gpus=3)) == "this launch needs 3 GPUs but training is capped at 2 GPUs"
    assert never_fits(policy, ask("x", gpus=2)) is None
    assert never_fits(policy, ask("x", "data")) == "data is capped at 0 runs in [compute]"


def test_report_shows_use_against_each_cap_who_uses_it_and_the_queue_in_order() -> None:
    policy = ComputePolicy.from_config({"training": {"runs": 2}})
    active = [ask("a", owner="U1"), ask("b", owner="U2"), ask("e", "eval", owner="U3")]
    [training, evals] = report(policy, TOTALS, active, [ask("q1", owner="U4"), ask("q2", owner="U1")])
    assert training["limits"] == {"runs": 2, "cpus": None, "gpus": None} and training["use"]["runs"] == 2
    assert training["owners"] == ["U1", "U2"] and [q["run_id"] for q in training["queued"]] == ["q1", "q2"]
    assert (evals["purpose"], evals["capped"], evals["use"]["runs"]) == ("eval", False, 1)


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ({"trainig": {"runs": 1}}, "[compute.trainig]: 'trainig' is not a purpose; purposes: training, eval, data"),
        ({"training": {"runs": -1}}, "runs = -1 must be a number of at least 0"),
        ({"training": {"share": 1.5}}, "share = 1.5 is a fraction of the cluster, more than 0 and at most 1"),
        ({"training": {"share": 0}}, "share = 0 is a fraction"),
        ({"training": {"runs": 1.5}}, "runs = 1.5 must be a whole number"),
        ({"training": {"gpu": 1}}, "unknown key gpu; keys: share, cpus, gpus, runs"),
        ({"training": {}}, "must be a table with at least one of share, cpus, gpus, runs"),
        ({"training": {"cpus": True}}, "cpus = True must be a number"),
        ("all", "[compute] must be a table of purposes"),
        ({"prices": {"cpu_hour": -1}}, "[compute.prices]: cpu_hour = -1 must be a price of at least 0"),
        ({"prices": {"gpu": 2.5}}, "unknown key gpu; keys: cpu_hour, gpu_hour, currency"),
        ({"prices": {"currency": ""}}, "currency = '' must be a short name"),
    ],
)
def test_a_bad_compute_table_is_refused_with_what_is_accepted(table: object, said: str) -> None:
    with pytest.raises(BadRequest) as e:
        ComputePolicy.from_config(table)
    assert said in e.value.message and e.value.message.startswith("labbot.toml: [compute")


def test_shares_may_sum_over_one() -> None:
    policy = ComputePolicy.from_config({"training": {"share": 0.8}, "eval": {"share": 0.5}})
    assert set(policy.caps) == {"training", "eval"}


def test_ordinals() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th",
    ]  # fmt: skip


def test_prices_are_not_a_purpose_and_cap_nothing() -> None:
    policy = ComputePolicy.from_config({"prices": {"gpu_hour": 2.5, "currency": "EUR"}})
    assert not policy.enabled and policy.caps == {}
    assert policy.prices.of(4.0, "gpu") == 10.0 and policy.prices.of(4.0, "cpu") is None
    assert policy.prices.currency == "EUR"
    assert ComputePolicy.from_config({"training": {"runs": 1}}).prices.of(1.0, "cpu") is None
