"""The fleet never blocks the event loop on its database: 20 agent turns at once against a database that takes 50 ms
a query, each through the audit, the approval gate (a destructive call, approved), the outside waits and the
identity, while a probe sleeps 1 ms at a time on the same loop (the scenario: tests/loop_lag_scenario.py). The
probe's p99 lateness stays under 10 ms; with the fleet's SQL on the loop each query stalls it (and every other
agent, Slack handler and tick) for 50 ms, and the p99 is seconds.

SQLite writes one transaction at a time, so the turns' saves (seven statements each under the write lock) queue
for about 7 s however they are run. A quiet loop during that queue dilutes the p99, so the slow database also
records any statement run on the loop's own thread: there must be none."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.anthropic import FakeAnthropic
from loop_lag_scenario import ANSWER, QUERY_S, SlowDatabase, model, owner, turns_with_probe

from labbot.agents.fleet.audit import audit_rows

TURNS = 20
P99_LIMIT_MS = 10.0


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(model=model) as server:
        yield server


def test_twenty_agent_turns_on_a_slow_database_leave_the_event_loop_free(tmp_path: Path, fake: FakeAnthropic) -> None:
    slow = SlowDatabase(tmp_path / "labbot.db")
    measured = asyncio.run(turns_with_probe(slow, fake, TURNS))

    assert [a.text for a in measured.answers] == [ANSWER] * TURNS, [a.text for a in measured.answers]
    assert measured.p99 < P99_LIMIT_MS, (
        f"the event loop's lag: p50 {measured.p50:.2f} ms, p99 {measured.p99:.2f} ms, max {max(measured.lags_ms):.1f}"
        f" ms over {len(measured.lags_ms)} probes ({slow.queries} queries of {QUERY_S * 1000:.0f} ms, "
        f"{measured.took_s:.1f} s)"
    )
    assert slow.queries >= 15 * TURNS, "each turn's session, history, run, approval, audit rows and answer"
    assert not slow.on_loop, f"{len(slow.on_loop)} of {slow.queries} statements ran on the event loop: {slow.on_loop}"
    rows = audit_rows(slow.db, limit=100)
    stops = sorted((r["owner"], r["approver"], r["outcome"]) for r in rows if r["tool"] == "lab__stop_run")
    assert stops == [(owner(i), owner(i), "ok") for i in range(TURNS)], "each stop ran once, approved by its owner"
    assert sum(r["tool"] == "lab__list_runs" for r in rows) == TURNS
