"""Which checkpoint of a run is the last good one before a signal: a pure function of the checkpoints the run's job
reported (``TelemetryStore.checkpoints``: each with the run's metrics at its step) and the step the signal began at.

A checkpoint written at or after the signal began is never chosen, whatever its attempt; nor is one whose health holds
a non-finite value of a watched metric (a NaN loss written into the weights). Among the rest, the newest step wins,
and at one step the newest attempt (a restart re-ran it). None: there is no good checkpoint — the run starts over.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from labbot.storage.floats import decode_float


def healthy(metrics: Mapping[str, Any], watched: Collection[str] | None = None) -> bool:
    """Whether every watched metric (every metric, when ``watched`` is None) is finite at the checkpoint."""
    for name, raw in metrics.items():
        if watched is not None and name not in watched:
            continue
        value = decode_float(raw) if isinstance(raw, str) else raw
        if isinstance(value, int | float) and not math.isfinite(value):
            return False
    return True


def last_good(
    checkpoints: Sequence[Mapping[str, Any]], signal_step: int, *, watched: Collection[str] | None = None
) -> Mapping[str, Any] | None:
    """The newest checkpoint written before ``signal_step`` whose watched metrics were finite, else None."""
    good = [c for c in checkpoints if int(c["step"]) < signal_step and healthy(c.get("metrics") or {}, watched)]
    return max(good, key=lambda c: (int(c["step"]), int(c["attempt"])), default=None)
