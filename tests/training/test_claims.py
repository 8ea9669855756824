"""The claim ledger (``labbot.training.claims``): numbers bound to their sources, recomputed and judged to the
precision they were written with; a misquoted number caught and corrected, a source that cannot be read reported,
numbers outside any claim listed — against a table of sources and against the real stores of a finished experiment."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from experiment_lab import Lab

from labbot.common.errors import UnknownRun
from labbot.training.claims import StoreSources, check, claims_in, parse_value, unbound_numbers

POINTS = {("k3xq7p", "loss"): [(10, 3.1), (20, 2.7), (30, 2.52), (40, 2.49), (50, 2.4662)]}
EXPERIMENT = {
    "trials": [{}, {}, {}],
    "counts": {"done": 2, "running": 0, "queued": 0, "pruned": 1, "failed": 0, "stopped": 0, "not_started": 0},
    "results": {"ranking": [
        {"trial": 2, "mean": 2.4889, "low": 2.41, "high": 2.5678, "n": 3},
        {"trial": 0, "mean": 2.7364, "low": None, "high": None, "n": 1},
    ]},
}  # fmt: skip


class Table:
    def run_points(self, run_id: str, metric: str) -> list[tuple[int, float]]:
        if (run_id, metric) not in POINTS:
            raise LookupError(f"run {run_id} reported no {metric}")
        return POINTS[(run_id, metric)]

    def experiment(self, experiment_id: str) -> Mapping[str, Any]:
        if experiment_id != "xk3q7pm":
            raise LookupError(f"unknown experiment {experiment_id!r}")
        return EXPERIMENT

    def eval_run(self, run_id: str) -> Mapping[str, Any]:
        return {"pass_rate": 0.7, "interval": [0.48, 0.85], "samples": [{"passed": True}] * 7
                + [{"passed": False}] * 3}  # fmt: skip


@pytest.mark.parametrize(
    ("written", "value", "half"),
    [
        ("2.49", 2.49, 0.005),
        ("1,200", 1200.0, 0.5),
        ("34%", 0.34, 0.005),
        ("1.2e-3", 1.2e-3, 0.05e-3),
        ("-0.013", -0.013, 0.0005),
    ],
)
def test_a_value_is_read_with_the_precision_it_was_written_with(written: str, value: float, half: float) -> None:
    v, h = parse_value(written)
    assert v == pytest.approx(value) and h == pytest.approx(half)


def test_right_numbers_pass_and_a_misquoted_one_is_caught_and_corrected() -> None:
    text = (
        "Run k3xq7p ended at a loss of [[2.49 | run:k3xq7p metric:loss at:final]] (its best was "
        "[[2.47 | run:k3xq7p metric:loss at:min]]; at step 30, [[2.52 | run:k3xq7p metric:loss at:30]]). The best "
        "config scored [[2.49 | experiment:xk3q7pm best]] [[2.41 | experiment:xk3q7pm best stat:low]]–"
        "[[2.57 | experiment:xk3q7pm best stat:high]] over [[3 | experiment:xk3q7pm best stat:n]] seeds; "
        "[[1 | experiment:xk3q7pm count:pruned]] of [[3 | experiment:xk3q7pm count:trials]] trials was pruned, and "
        "the eval passed [[70% | eval:e1val1]] ([[7 | eval:e1val1 stat:passed]] of [[10 | eval:e1val1 stat:samples]]; "
        "[[48% | eval:e1val1 stat:low]] at worst)."
    )
    report = check(text, Table())
    assert report.ok, [c.why for c in report.checked if c.verdict != "ok"]
    assert report.counts() == {"ok": 13, "wrong": 0, "unsourced": 0}
    assert report.unbound == ["30"]  # a step named in prose: listed, for the policy that reads the report to judge
    assert "loss of 2.49 (its best was 2.47" in report.corrected and "[[" not in report.corrected

    wrong = check("the loss fell to [[2.31 | run:k3xq7p metric:loss at:final]], a [[12% | eval:e1val1]] pass", Table())
    assert not wrong.ok and wrong.counts() == {"ok": 0, "wrong": 2, "unsourced": 0}
    assert wrong.checked[0].actual == pytest.approx((2.52 + 2.49 + 2.4662) / 3)
    assert "not 2.31" in wrong.checked[0].why
    assert wrong.corrected == "the loss fell to 2.49, a 70% pass"


def test_a_source_that_cannot_be_read_is_unsourced_not_trusted() -> None:
    report = check(
        "[[2.1 | run:nothere metric:loss]] [[2.7 | experiment:xk3q7pm trial:0 stat:low]] [[4 | experiment:xk3q7pm "
        "trial:7]] [[3 | gpu:0]] [[two | run:k3xq7p metric:loss]] [[2 | run:k3xq7p]]",
        Table(),
    )
    assert [c.verdict for c in report.checked] == ["unsourced"] * 6
    whys = [c.why for c in report.checked]
    assert "run nothere reported no loss" in whys[0] and "one seed has no interval" in whys[1]
    assert "no score for trial 7" in whys[2] and "names no run:, experiment: or eval:" in whys[3]
    assert "'two' is not a number" in whys[4] and "needs metric:NAME" in whys[5]


def test_numbers_outside_claims_are_listed_but_not_ids_code_dates_or_names() -> None:
    text = "Run k3xq7p (tiny-lm, n_embd=64 in `lr=3e-3`) on 2026-12-05 at 04:56 reached 2.5 after 300 steps, 12%."
    assert unbound_numbers(text) == ["2.5", "300", "12%"]
    assert [c.value for c in claims_in("[[ 2.5 |run:a metric:loss ]]")] == ["2.5"]


def test_against_the_real_stores_of_a_finished_experiment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = Lab(tmp_path, monkeypatch)
    exp = lab.sweep(space=["lr=1e-4,3e-3"], search="grid", seeds=2, concurrency=2)
    lab.run_to_end()
    doc = lab.experiments.get(exp["id"])
    best = doc["results"]["best"]
    run = doc["trials"][best["trial"]]["runs"][0]["id"]
    points = lab.telemetry.series(run, ["loss"])["loss"]
    final = sum(v for _, v in points[-3:]) / 3

    def unknown_eval(run_id: str) -> Mapping[str, Any]:
        raise UnknownRun(f"unknown run {run_id!r}")

    sources = StoreSources(lab.telemetry.series, lab.experiments.get, unknown_eval)
    text = (
        f"best [[{best['mean']:.3f} | experiment:{exp['id']} best]], its run [[{final:.3f} | run:{run} "
        f"metric:loss]]; misquoted [[{final + 0.5:.3f} | run:{run} metric:loss]]; [[0.5 | eval:nothere]]"
    )
    report = check(text, sources)
    assert [c.verdict for c in report.checked] == ["ok", "ok", "wrong", "unsourced"]
    assert "unknown run 'nothere'" in report.checked[3].why


def test_each_source_is_read_once_however_many_claims_quote_it() -> None:
    class Counting(Table):
        def __init__(self) -> None:
            self.reads: list[str] = []

        def experiment(self, experiment_id: str) -> Mapping[str, Any]:
            self.reads.append(experiment_id)
            return super().experiment(experiment_id)

    sources = Counting()
    text = " ".join(
        ["[[2.49 | experiment:xk3q7pm best stat:mean]]", "[[2.74 | experiment:xk3q7pm trial:0 stat:mean]]",
         "[[2 | experiment:xk3q7pm count:done]]", "[[1 | experiment:xk3q7pm count:pruned]]",
         "[[9.9 | experiment:xnotthere best stat:mean]]", "[[9.9 | experiment:xnotthere count:done]]"]
    )  # fmt: skip
    report = check(text, sources)
    assert [c.verdict for c in report.checked] == ["ok", "ok", "ok", "ok", "unsourced", "unsourced"]
    assert sources.reads == ["xk3q7pm", "xnotthere"]  # each once: the missing one fails both its claims alike
