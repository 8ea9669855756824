"""What both reference jobs' training loops share: a minimum step time, the injected hang, and exiting on SIGTERM."""

from __future__ import annotations

import signal
import sys
import time
from typing import NoReturn


def pace(started: float, min_step_s: float) -> None:
    """Sleep out the rest of ``min_step_s`` since ``started`` (a ``perf_counter`` time); nothing when it is 0."""
    left = min_step_s - (time.perf_counter() - started)
    if left > 0:
        time.sleep(left)


def hang_forever(step: int, *, verbose: bool = True) -> NoReturn:
    """``hang_at_step``: no further progress while the process stays alive (its telemetry heartbeats go on)."""
    if verbose:
        print(f"injected hang at step {step} (LABBOT_ATTEMPT=1): no further progress", flush=True)
    while True:
        time.sleep(1)


def exit_on_sigterm() -> None:
    """Ray stops a job with SIGTERM: exit through Python so telemetry's atexit flush sends the last steps."""
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
