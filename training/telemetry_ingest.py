"""Validation of telemetry batches as jobs send them (pure; the wire format of ``labbot_client.telemetry``).

    {"attempt": 1, "sent_at": 1764000000.0,
     "points": [{"step": 12, "ts": 1764000000.0, "metrics": {"loss": 2.31, "tokens_per_s": 40960.0}}],
     "events": [{"kind": "checkpoint", "step": 10, "ts": 1764000000.0, "path": "..."}],
     "phase": "rollout"}                                # optional: what the job is doing now

Non-finite values arrive as ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (or bare JSON NaN tokens) and are kept:
they are a divergence signal, not an error. Anything else malformed raises BadRequest naming the field.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from labbot.common.errors import BadRequest
from labbot.common.humanize import format_bytes
from labbot.common.json_input import loads_json
from labbot.storage.floats import decode_float

MAX_BODY_BYTES = 1 << 20
MAX_POINTS = 5_000
MAX_METRICS_PER_POINT = 64
MAX_NAME = 64
MAX_INT = 2**63 - 1  # steps and attempts are SQL BIGINTs: a larger integer is refused here, not overflowed there
EVENT_KINDS = frozenset({"checkpoint"})
PHASE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")  # labbot_client.telemetry.PHASE_NAME
METRIC_NAME_RULE = f"metric names must be 1-{MAX_NAME} characters"


def metric_name_ok(name: str) -> bool:
    """Whether ``name`` is a metric name the control plane accepts (the client drops the others before sending)."""
    return 0 < len(name) <= MAX_NAME


@dataclass(frozen=True, slots=True)
class TelemetryPoint:
    step: int
    when: datetime
    metrics: dict[str, float]


@dataclass(frozen=True, slots=True)
class TelemetryEvent:
    kind: str
    step: int
    path: str | None


@dataclass(frozen=True, slots=True)
class TelemetryBatch:
    attempt: int
    points: list[TelemetryPoint]
    events: list[TelemetryEvent]
    phase: str | None = None  # what the job says it is doing ("rollout", "learn"), with every request once set


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT:
        shown = repr(value) if not isinstance(value, int) or value.bit_length() < 128 else "a larger integer"
        raise BadRequest(f"{where} must be a non-negative integer up to {MAX_INT}, got {shown}")
    return value


def _when(value: Any, where: str, default: datetime) -> datetime:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{where} must be unix seconds, got {value!r}")
    try:
        seconds = float(value)  # an integer past the largest double overflows here
        if not math.isfinite(seconds):
            raise BadRequest(f"{where} must be unix seconds, got {value!r}")
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise BadRequest(f"{where} is out of range: {str(value)[:40]}") from None


def parse_batch(body: bytes, *, now: datetime | None = None) -> TelemetryBatch:
    if len(body) > MAX_BODY_BYTES:
        raise BadRequest(f"body of {format_bytes(len(body))} is over the {format_bytes(MAX_BODY_BYTES)} limit")
    now = now or datetime.now(UTC)
    doc = loads_json(body)
    if not isinstance(doc, dict):
        raise BadRequest("body must be a JSON object with 'attempt', 'points' and 'events'")
    attempt = _int(doc.get("attempt", 1), "attempt")
    raw_points = doc.get("points", [])
    raw_events = doc.get("events", [])
    if not isinstance(raw_points, list) or not isinstance(raw_events, list):
        raise BadRequest("'points' and 'events' must be lists")
    if len(raw_points) > MAX_POINTS:
        raise BadRequest(f"{len(raw_points)} points in one batch; send at most {MAX_POINTS}")
    points = []
    for i, p in enumerate(raw_points):
        if not isinstance(p, dict):
            raise BadRequest(f"points[{i}] must be an object with 'step' and 'metrics'")
        metrics = p.get("metrics", {})
        if not isinstance(metrics, dict) or len(metrics) > MAX_METRICS_PER_POINT:
            raise BadRequest(f"points[{i}].metrics must be an object of at most {MAX_METRICS_PER_POINT} numbers")
        values = {}
        for name, v in metrics.items():
            if not metric_name_ok(name):
                raise BadRequest(f"points[{i}]: {METRIC_NAME_RULE}, got {name!r}")
            try:
                values[name] = decode_float(v)
            except ValueError as e:
                raise BadRequest(f"points[{i}].metrics.{name}: {e}") from None
        points.append(
            TelemetryPoint(
                step=_int(p.get("step"), f"points[{i}].step"),
                when=_when(p.get("ts"), f"points[{i}].ts", now),
                metrics=values,
            )
        )
    events = []
    for i, ev in enumerate(raw_events):
        if not isinstance(ev, dict) or not isinstance(ev.get("kind"), str) or ev["kind"] not in EVENT_KINDS:
            raise BadRequest(f"events[{i}] must be an object whose kind is one of {sorted(EVENT_KINDS)}")
        path = ev.get("path")
        if path is not None and not isinstance(path, str):
            raise BadRequest(f"events[{i}].path must be a string")
        events.append(TelemetryEvent(kind=ev["kind"], step=_int(ev.get("step"), f"events[{i}].step"), path=path))
    phase = doc.get("phase")
    if phase is not None and (not isinstance(phase, str) or not PHASE_NAME.match(phase)):
        raise BadRequest(f"phase must be 1-32 letters, digits, '_', '-' or '.', got {str(phase)[:40]!r}")
    return TelemetryBatch(attempt=attempt, points=points, events=events, phase=phase)
