"""The one retry policy every labbot client follows: exponential backoff with equal jitter, and the server's
``Retry-After`` honoured (up to a cap) when it sends one.

The in-job telemetry sender applies it directly (its sender thread keeps a batch and retries it on a later
cycle); the control plane's clients — the model client and the vendor HTTP seam — drive it through tenacity
(``labbot.common.retry``), and the delivery outbox (Slack, PagerDuty) takes the wait before a row's next try from it.
Standard library only: this module runs inside user jobs.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from dataclasses import dataclass

__all__ = ["RETRYABLE_STATUS", "RETRY_AFTER_STATUS", "Backoff", "retry_after_seconds"]

#: Statuses worth another try: the request timed out, was too early, was rate limited, or the server failed.
RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
#: Statuses whose ``Retry-After`` header says when to come back.
RETRY_AFTER_STATUS = frozenset({429, 503})


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if not math.isfinite(seconds):
        return None
    return max(seconds, 0.0)


@dataclass(frozen=True)
class Backoff:
    """How long to wait before try ``failures + 1``.

    ``base`` doubles with each failure up to ``cap``; the wait is drawn from the upper half of that ceiling
    ("equal jitter": never a thundering herd, never a near-zero wait). A server's ``Retry-After`` replaces the
    computed wait, shortened to ``max_retry_after``.
    """

    base: float = 0.5
    cap: float = 10.0
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if not (self.base > 0 and self.cap >= self.base and self.max_retry_after >= 0):
            raise ValueError(f"Backoff needs 0 < base <= cap and max_retry_after >= 0, got {self}")

    def ceiling(self, failures: int) -> float:
        """The longest computed wait after ``failures`` consecutive failures (1 = the first)."""
        return min(self.cap, self.base * 2.0 ** min(max(failures, 1) - 1, 60))

    def delay(self, failures: int, retry_after: float | None = None, *, rng: random.Random | None = None) -> float:
        """Seconds to wait after ``failures`` consecutive failures, or the server's ``retry_after`` (capped).

        The jitter is taken off the ceiling, so an ``rng`` whose ``random()`` is 0 gives the ceiling itself (tests
        use one to see the bare exponential waits)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        ceiling = self.ceiling(failures)
        return ceiling - (rng or random).uniform(0.0, ceiling / 2.0)
