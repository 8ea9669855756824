"""The control plane's retries: tenacity, with its waits taken from the one policy, ``labbot_client.backoff.Backoff``.

The model client (``labbot.agents.fleet.runtime``) and the vendor HTTP seam (``labbot.mcp_servers.vendor_http``) retry
through :meth:`RetryPolicy.retrying`; the outbox, which retries later rather than in a loop, takes its waits from
the same ``Backoff``. What each caller decides for itself: which failures are worth another try (``retry``), where
the server's wait is found (``retry_after``: by default an exception's ``retry_after_s``, else the ``Retry-After``
header of the response it carries or of the response returned) and what to say when it gives up (``give_up``).

Usage::

    policy = RetryPolicy(attempts=4, backoff=Backoff(base=0.5, cap=8.0, max_retry_after=30.0))
    retrying = policy.retrying(retry=retry_if_exception_type(httpx.TransportError), give_up=tell)
    response = await retrying(client.get, "/v1/things")
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, stop_after_attempt
from tenacity.retry import retry_base
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from labbot_client.backoff import RETRY_AFTER_STATUS, RETRYABLE_STATUS, Backoff, retry_after_seconds

__all__ = [
    "RETRYABLE_STATUS",
    "RETRY_AFTER_STATUS",
    "Backoff",
    "RetryPolicy",
    "retry_after_of",
    "stop_before_deadline",
    "wait_backoff",
]

RetryAfter = Callable[[RetryCallState], float | None]
Hook = Callable[[RetryCallState], Any]


def retry_after_of(state: RetryCallState) -> float | None:
    """The wait the server asked for after the attempt that just failed, or None when it did not say.

    Read from the exception's ``retry_after_s`` (a float) when it has one, else from the ``Retry-After`` header of
    the response it carries (``exc.response``, as httpx and most SDKs attach it) or of the response returned."""
    outcome = state.outcome
    if outcome is None:
        return None
    carrier: Any = outcome.exception() if outcome.failed else outcome.result()
    said = getattr(carrier, "retry_after_s", None)
    if isinstance(said, int | float) and not isinstance(said, bool):
        return float(said)
    response = getattr(carrier, "response", carrier)
    headers = getattr(response, "headers", None)
    if headers is None or not hasattr(headers, "get"):
        return None
    value = headers.get("retry-after")
    return retry_after_seconds(value if isinstance(value, str) else None)


class wait_backoff(wait_base):
    """A tenacity wait: ``backoff.delay(failures so far, the server's wait)``."""

    def __init__(
        self, backoff: Backoff, *, retry_after: RetryAfter = retry_after_of, rng: random.Random | None = None
    ) -> None:
        self.backoff = backoff
        self.retry_after = retry_after
        self.rng = rng

    def __call__(self, retry_state: RetryCallState) -> float:
        return self.backoff.delay(retry_state.attempt_number, self.retry_after(retry_state), rng=self.rng)


class stop_before_deadline(stop_base):
    """A tenacity stop: give up when the next wait would not end before the deadline (``remaining()`` seconds away)."""

    def __init__(self, remaining: Callable[[], float]) -> None:
        self.remaining = remaining

    def __call__(self, retry_state: RetryCallState) -> bool:
        return retry_state.upcoming_sleep >= self.remaining()


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``attempts`` tries (the first included), ``backoff`` between them."""

    attempts: int = 4
    backoff: Backoff = field(default_factory=Backoff)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"RetryPolicy needs at least one attempt, got {self.attempts}")

    def retrying(
        self,
        *,
        retry: retry_base | Callable[[RetryCallState], bool],
        retry_after: RetryAfter = retry_after_of,
        deadline: Callable[[], float] | None = None,
        give_up: Hook | None = None,
        before_sleep: Hook | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> AsyncRetrying:
        """A tenacity ``AsyncRetrying`` for this policy.

        Args:
            retry: which outcomes are worth another try (a tenacity predicate such as ``retry_if_exception``);
                any other exception is raised as it is.
            retry_after: the server's wait for a failed attempt (see :func:`retry_after_of`).
            deadline: seconds left before a deadline; a wait that would not end before it is not waited (it gives
                up instead). None: only ``attempts`` stops.
            give_up: called with tenacity's state when it stops; what it returns (or raises) is the call's outcome.
                None: the last exception is raised.
            before_sleep: called (and awaited, if async) before each wait, e.g. to tell someone about it.
            sleep: the waits' seam (tests record them).
            rng: the jitter's randomness (tests pass one whose ``random()`` is 0: no jitter).
        """
        stop: stop_base = stop_after_attempt(self.attempts)
        if deadline is not None:
            stop = stop | stop_before_deadline(deadline)
        return AsyncRetrying(
            sleep=sleep,
            stop=stop,
            wait=wait_backoff(self.backoff, retry_after=retry_after, rng=rng),
            retry=retry,
            before_sleep=before_sleep,
            retry_error_callback=give_up,
            reraise=True,
        )
