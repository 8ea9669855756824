"""labbot.training.telemetry_ingest: what a telemetry body may and may not be."""

from __future__ import annotations

import json
import math

import pytest

from labbot.common.errors import BadRequest
from labbot.training.telemetry_ingest import MAX_BODY_BYTES, parse_batch


def _body(**doc: object) -> bytes:
    return json.dumps(doc).encode()


def test_points_events_and_special_floats() -> None:
    batch = parse_batch(
        _body(
            attempt=2,
            points=[
                {"step": 1, "ts": 1_800_000_000.5, "metrics": {"loss": 2.5, "tokens_per_s": 100}},
                {"step": 2, "metrics": {"loss": "NaN", "grad": "Infinity", "x": "-Infinity"}},
            ],
            events=[{"kind": "checkpoint", "step": 2, "path": "/ckpt/2.pt"}],
        )
    )
    assert batch.attempt == 2 and len(batch.points) == 2
    assert batch.points[0].metrics == {"loss": 2.5, "tokens_per_s": 100.0}
    m = batch.points[1].metrics
    assert math.isnan(m["loss"]) and m["grad"] == math.inf and m["x"] == -math.inf
    assert batch.events[0].step == 2


def test_bare_json_nan_tokens_are_accepted() -> None:
    batch = parse_batch(b'{"attempt": 1, "points": [{"step": 3, "metrics": {"loss": NaN, "g": Infinity}}]}')
    assert math.isnan(batch.points[0].metrics["loss"]) and batch.points[0].metrics["g"] == math.inf


def test_a_batch_or_heartbeat_names_the_jobs_phase() -> None:
    assert parse_batch(_body(attempt=1, points=[], events=[], phase="rollout")).phase == "rollout"
    assert parse_batch(_body(attempt=1, points=[], events=[])).phase is None


def test_heartbeat_is_an_empty_batch() -> None:
    batch = parse_batch(_body(attempt=1, points=[], events=[]))
    assert batch.points == [] and batch.events == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (_body(points={"step": 1}), "must be lists"),
        (_body(points=[{"metrics": {"loss": 1}}]), r"points\[0\].step"),
        (_body(points=[{"step": -1, "metrics": {}}]), "non-negative"),
        (_body(points=[{"step": 1, "metrics": {"loss": "high"}}]), r"points\[0\].metrics.loss"),
        (_body(points=[{"step": 1, "metrics": {"loss": True}}]), "expected a number"),
        (_body(points=[{"step": 1, "metrics": [1]}]), "object of at most"),
        (_body(events=[{"kind": "party", "step": 1}]), "kind is one of"),
        (_body(attempt="one"), "attempt"),
        (_body(phase="roll out"), "phase must be 1-32 letters"),
        (_body(phase=7), "phase must be"),
    ],
)
def test_malformed_bodies_say_what_is_wrong(body: bytes, message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        parse_batch(body)


def test_oversized_body() -> None:
    with pytest.raises(BadRequest, match="limit"):
        parse_batch(b" " * (MAX_BODY_BYTES + 1))
