"""labbot.common.retry: tenacity driven by the one Backoff — waits that grow within bounds, the server's Retry-After
honoured and capped, and the stops (attempts, a deadline) with what the caller says when it gives up."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import NoJitter
from tenacity import RetryCallState, retry_if_exception_type

from labbot.common.retry import Backoff, RetryPolicy, retry_after_of

POLICY = RetryPolicy(attempts=5, backoff=Backoff(base=0.5, cap=4.0, max_retry_after=30.0))


class Flaky(Exception):
    def __init__(self, retry_after_s: float | None = None) -> None:
        super().__init__("flaky")
        self.retry_after_s = retry_after_s


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def failing(*failures: BaseException, then: Any = "ok") -> Callable[[], Awaitable[Any]]:
    """An async call that raises ``failures`` in turn, then returns ``then``; counts its calls."""
    left = list(failures)

    async def call() -> Any:
        call.calls += 1  # type: ignore[attr-defined]
        if left:
            raise left.pop(0)
        return then

    call.calls = 0  # type: ignore[attr-defined]
    return call


def run(policy: RetryPolicy, call: Callable[[], Awaitable[Any]], **kw: Any) -> tuple[Any, list[float]]:
    sleeps = Sleeps()
    kw.setdefault("retry", retry_if_exception_type(Flaky))
    result = asyncio.run(policy.retrying(sleep=sleeps, **kw)(call))
    return result, sleeps.waits


# ----------------------------------------------------------------- the waits


def test_waits_double_from_the_base_up_to_the_cap_without_jitter() -> None:
    call = failing(*[Flaky() for _ in range(4)])
    result, waits = run(POLICY, call, rng=NoJitter())
    assert result == "ok" and call.calls == 5  # type: ignore[attr-defined]
    assert waits == [0.5, 1.0, 2.0, 4.0]


@given(failures=st.integers(min_value=1, max_value=200), seed=st.integers(0, 2**32))
def test_a_jittered_wait_stays_in_the_upper_half_of_its_ceiling(failures: int, seed: int) -> None:
    backoff = POLICY.backoff
    ceiling = min(backoff.cap, backoff.base * 2 ** min(failures - 1, 60))
    wait = backoff.delay(failures, rng=random.Random(seed))
    assert ceiling / 2 <= wait <= ceiling <= backoff.cap


def test_jittered_waits_grow_and_spread() -> None:
    rng = random.Random(1)
    backoff = Backoff(base=1.0, cap=64.0)
    means = []
    for failures in range(1, 7):
        waits = [backoff.delay(failures, rng=rng) for _ in range(300)]
        assert max(waits) - min(waits) > 0.3 * backoff.ceiling(failures)  # jittered, not fixed
        means.append(sum(waits) / len(waits))
    assert means == sorted(means)


def test_the_servers_retry_after_replaces_the_backoff_and_is_capped() -> None:
    call = failing(Flaky(retry_after_s=7.0), Flaky(retry_after_s=600.0), Flaky(retry_after_s=0.0))
    result, waits = run(POLICY, call, rng=NoJitter())
    assert result == "ok" and waits == [7.0, 30.0, 0.0]


def test_retry_after_is_read_from_a_responses_header() -> None:
    request = httpx.Request("GET", "https://api.example.test/x")

    def limited(header: str | None) -> httpx.HTTPStatusError:
        headers = {"Retry-After": header} if header is not None else {}
        response = httpx.Response(429, headers=headers, request=request)
        return httpx.HTTPStatusError("429", request=request, response=response)

    call = failing(limited("3"), limited("not a number"), limited(None))
    result, waits = run(POLICY, call, retry=retry_if_exception_type(httpx.HTTPStatusError), rng=NoJitter())
    assert result == "ok" and waits == [3.0, 1.0, 2.0]  # unreadable or absent: the backoff's 2nd and 3rd waits


def test_retry_after_of_a_returned_response() -> None:
    class State:
        class outcome:  # stands in for tenacity's Future
            failed = False

            @staticmethod
            def result() -> httpx.Response:
                return httpx.Response(503, headers={"retry-after": "12"})

    assert retry_after_of(State()) == 12.0  # type: ignore[arg-type]


# ----------------------------------------------------------------- the stops


def test_it_stops_after_the_attempts_and_raises_the_last_failure() -> None:
    call = failing(*[Flaky() for _ in range(9)])
    with pytest.raises(Flaky):
        run(POLICY, call, rng=NoJitter())
    assert call.calls == 5  # type: ignore[attr-defined]


def test_give_up_says_what_happens_when_it_stops() -> None:
    def give_up(state: RetryCallState) -> str:
        return f"gave up after {state.attempt_number} attempts"

    call = failing(*[Flaky() for _ in range(9)])
    result, waits = run(POLICY, call, give_up=give_up, rng=NoJitter())
    assert result == "gave up after 5 attempts" and len(waits) == 4


def test_a_failure_not_worth_retrying_is_raised_at_once() -> None:
    call = failing(ValueError("a bug"))
    with pytest.raises(ValueError, match="a bug"):
        run(POLICY, call)
    assert call.calls == 1  # type: ignore[attr-defined]


def test_a_wait_that_would_end_past_the_deadline_is_not_waited() -> None:
    seen: list[float] = []

    def give_up(state: RetryCallState) -> str:
        seen.append(state.upcoming_sleep)
        return f"stopped at attempt {state.attempt_number}"

    remaining = iter([10.0, 10.0, 1.5])  # seconds left before each wait
    call = failing(*[Flaky() for _ in range(9)])
    result, waits = run(POLICY, call, deadline=lambda: next(remaining), give_up=give_up, rng=NoJitter())
    assert result == "stopped at attempt 3" and waits == [0.5, 1.0] and seen == [2.0]


def test_before_sleep_is_told_each_wait_and_may_be_async() -> None:
    told: list[tuple[int, float]] = []

    async def before_sleep(state: RetryCallState) -> None:
        told.append((state.attempt_number, state.upcoming_sleep))

    call = failing(Flaky(), Flaky(retry_after_s=3.0))
    result, waits = run(POLICY, call, before_sleep=before_sleep, rng=NoJitter())
    assert result == "ok" and told == [(1, 0.5), (2, 3.0)] and waits == [0.5, 3.0]


def test_a_policy_needs_an_attempt_and_a_sane_backoff() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)
    with pytest.raises(ValueError):
        Backoff(base=2.0, cap=1.0)
