"""Checkpoints know their health (issue 29): each checkpoint event a job reports is kept with the run's metrics at
its step, and the last good checkpoint before a signal is chosen from that data — never one written at or after the
signal, never one whose watched metric was non-finite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from experiment_lab import Lab

from labbot.common.errors import UnknownRun
from labbot.training.checkpoint_health import healthy, last_good
from labbot.training.telemetry_ingest import parse_batch


def ck(step: int, attempt: int = 1, **metrics: Any) -> dict[str, Any]:
    return {"step": step, "attempt": attempt, "path": f"/ckpt/{step}", "metrics": metrics}


def test_the_newest_checkpoint_before_the_signal_is_the_last_good_one() -> None:
    checkpoints = [ck(10, loss=3.0), ck(20, loss=2.5), ck(30, loss=2.4), ck(40, loss=9.0)]
    assert last_good(checkpoints, 35) == ck(30, loss=2.4)
    assert last_good(checkpoints, 30) == ck(20, loss=2.5)  # written as the signal began: not chosen
    assert last_good(checkpoints, 10) is None  # nothing before it: the run starts over


def test_a_checkpoint_holding_a_non_finite_metric_is_never_chosen() -> None:
    checkpoints = [ck(10, loss=3.0), ck(20, loss="NaN"), ck(30, loss=2.0, grad_norm="Infinity")]
    assert last_good(checkpoints, 100) == ck(10, loss=3.0)
    assert last_good(checkpoints, 100, watched={"loss"}) == ck(30, loss=2.0, grad_norm="Infinity")
    assert not healthy({"loss": float("nan")}) and healthy({"loss": 1.0, "note": 3})


def test_at_one_step_the_newest_attempt_wins() -> None:
    assert last_good([ck(20, attempt=1, loss=2.0), ck(20, attempt=2, loss=1.9)], 50) == ck(20, attempt=2, loss=1.9)


def test_the_store_keeps_each_checkpoint_with_the_metrics_at_its_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = Lab(tmp_path, monkeypatch)
    lab.sweep(space=["lr=1e-3,1e-2"], search="grid", concurrency=1)
    lab.tick()
    [sub] = lab.ray.submitted
    env = sub["runtime_env"]["env_vars"]
    run_id, token = env["LABBOT_RUN_ID"], env["LABBOT_TELEMETRY_TOKEN"]

    def send(points: list[tuple[int, Any]], checkpoints: list[int]) -> None:
        body = {"attempt": 1,
                "points": [{"step": s, "metrics": {"loss": v, "tokens_per_s": 100.0}} for s, v in points],
                "events": [{"kind": "checkpoint", "step": s, "path": f"/ckpt/{s}"} for s in checkpoints]}  # fmt: skip
        lab.telemetry.authenticate(run_id, token)
        lab.telemetry.ingest(run_id, parse_batch(json.dumps(body).encode()))

    send([(10, 2.0), (20, 1.5), (25, 1.4)], [20])  # the checkpoint at 20: the loss at 20, not the batch's last
    send([(30, "NaN")], [30])
    send([(10, 2.0), (20, 1.5), (25, 1.4)], [20])  # a retry after a lost reply: nothing twice
    kept = lab.telemetry.checkpoints(run_id)
    assert [(c["step"], c["metrics"]["loss"], c["path"]) for c in kept] == [
        (20, 1.5, "/ckpt/20"),
        (30, "NaN", "/ckpt/30"),
    ]
    assert last_good(kept, 1000)["step"] == 20  # type: ignore[index]
    with pytest.raises(UnknownRun):
        lab.telemetry.checkpoints("nosuchrun")
