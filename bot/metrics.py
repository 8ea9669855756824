"""``/metrics``: what a control plane knows, in Prometheus' text format (prometheus-client).

One :class:`Metrics` per ``ControlPlane``, on its own ``CollectorRegistry`` (never the process-wide one: tests run
several apps in one process, and ``ray`` registers its own metrics there). Two kinds of samples:

* **Database state, read at scrape time** by :class:`DatabaseCollector` (three small grouped queries over indexed
  columns, in one session): runs by status and purpose, open pages by kind, escalation level and state, the outbox's
  backlog and its oldest undelivered notification's age, by channel. Every replica reads the same rows, so every
  replica says the same thing. A database that does not answer makes ``labbot_database_up`` 0, never a failed scrape.
* **Events, counted where they happen**, in this process: watchdog ticks (a histogram of their duration), telemetry
  points stored, agent runs, model calls, tokens and tool calls by role, Slack Web API errors by method and error,
  vendor API errors (Notion, Linear, Datadog, PagerDuty) by vendor, method and status. Lower layers report them
  through ``labbot.common.observe.Observer``, which :class:`Metrics` implements; they never import Prometheus.

Plus ``labbot_leader``: 1 while this process is the leader (the lease's ``held``; a lone process is its own).

Labels are bounded on purpose: no run id, page id, user, channel or path is ever a label. Rendering runs the queries:
call :meth:`Metrics.render` on a worker thread, never on the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from labbot.storage.db import Database
from labbot.storage.models import (
    OPEN_INCIDENT_STATES,
    Delivery,
    DeliveryState,
    Incident,
    Run,
    RunStatus,
    utcnow,
)

__all__ = ["CONTENT_TYPE", "DatabaseCollector", "Metrics"]

log = logging.getLogger(__name__)

# the classic text format generate_latest writes, which every Prometheus (2.x and 3.x) reads
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
CHANNELS = ("slack", "pagerduty")  # the outbox's channels: always reported, 0 when nothing waits
TICK_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
MAX_LABEL = 64
UNDELIVERED = (DeliveryState.PENDING.value, DeliveryState.SENDING.value)


def _label(value: object) -> str:
    """A label value as given, cut to 64 characters (a role, a stop reason, an error code: short already)."""
    return str(value)[:MAX_LABEL] or "none"


class DatabaseCollector(Collector):
    """The gauges that are database state, computed at each scrape (see the module docstring)."""

    def __init__(self, db: Database, *, clock: Callable[[], Any] = utcnow) -> None:
        self.db = db
        self.clock = clock

    def describe(self) -> list[Metric]:
        return []  # nothing to describe up front: collect() queries the database, which registering must not do

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("labbot_database_up", "1 when this scrape's queries of the database answered, else 0")
        try:
            with self.db.session() as s:
                runs = s.execute(select(Run.status, Run.purpose, func.count()).group_by(Run.status, Run.purpose)).all()
                pages = s.execute(
                    select(Incident.kind, Incident.escalation_level, Incident.state, func.count())
                    .where(Incident.state.in_(OPEN_INCIDENT_STATES))
                    .group_by(Incident.kind, Incident.escalation_level, Incident.state)
                ).all()
                outbox = s.execute(
                    select(Delivery.channel, func.count(), func.min(Delivery.created_at))
                    .where(Delivery.state.in_(UNDELIVERED))
                    .group_by(Delivery.channel)
                ).all()
        except Exception as e:  # a scrape says the database is down; it does not fail
            log.warning("metrics: the database did not answer (%s)", type(e).__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up

        by_run: dict[tuple[str, str], int] = {}
        for status, purpose, n in runs:
            by_run[(_label(status), _label(purpose))] = int(n)
        purposes = {p for _, p in by_run} or {"default"}
        g = GaugeMetricFamily(
            "labbot_runs", "Runs by status and purpose (every run in the database)", labels=["status", "purpose"]
        )
        for purpose in sorted(purposes):
            for status in sorted({st.value for st in RunStatus} | {st for st, p in by_run if p == purpose}):
                g.add_metric([status, purpose], by_run.get((status, purpose), 0))
        yield g

        g = GaugeMetricFamily(
            "labbot_pages_open",
            "Open pages (triggered or acknowledged) by kind, escalation level and state",
            labels=["kind", "level", "state"],
        )
        for kind, level, state, n in pages:
            g.add_metric([_label(kind), str(int(level or 0)), _label(state)], int(n))
        yield g

        now = self.clock()
        backlog = GaugeMetricFamily(
            "labbot_outbox_backlog",
            "Notifications not yet delivered (pending or being sent), by channel",
            labels=["channel"],
        )
        age = GaugeMetricFamily(
            "labbot_outbox_oldest_undelivered_age_seconds",
            "Age of the oldest notification not yet delivered, by channel (0 when none waits)",
            labels=["channel"],
        )
        seen: dict[str, tuple[int, float]] = {}
        for channel, n, oldest in outbox:
            waited = max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0
            seen[_label(channel)] = (int(n), waited)
        for channel in sorted(set(CHANNELS) | set(seen)):
            n, waited = seen.get(channel, (0, 0.0))
            backlog.add_metric([channel], n)
            age.add_metric([channel], waited)
        yield backlog
        yield age


class Metrics:
    """A control plane's metrics, on a registry of its own; the ``Observer`` its lower layers report to."""

    def __init__(self, db: Database | None = None, *, is_leader: Callable[[], bool] = lambda: True) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.is_leader = is_leader  # the lease's `held` in a control plane (ControlPlane.build)
        r = self.registry
        self.watchdog_tick = Histogram(
            "labbot_watchdog_tick_seconds",
            "Duration of a watchdog tick (reconcile with Ray, judge, page), failed ones included",
            buckets=TICK_BUCKETS,
            registry=r,
        )
        self.watchdog_failures = Counter(
            "labbot_watchdog_tick_failures", "Watchdog ticks that raised (logged as 'watchdog tick failed')", registry=r
        )
        self.telemetry_points_total = Counter(
            "labbot_telemetry_points", "Telemetry points (steps) stored from jobs' batches", registry=r
        )
        self.agent_runs = Counter(
            "labbot_agent_runs",
            "Agent runs (one answer each) by role and how they stopped",
            ["role", "stop"],
            registry=r,
        )
        self.agent_model_calls = Counter(
            "labbot_agent_model_calls", "Messages API calls (agent turns) by role", ["role"], registry=r
        )
        self.agent_tokens = Counter(
            "labbot_agent_tokens",
            "Tokens the agents used by role and kind (input, output, cache_read, cache_creation)",
            ["role", "kind"],
            registry=r,
        )
        self.agent_tool_calls = Counter(
            "labbot_agent_tool_calls",
            "Agents' tool calls by role and outcome (ok, error)",
            ["role", "outcome"],
            registry=r,
        )
        self.slack_errors = Counter(
            "labbot_slack_api_errors",
            "Slack Web API calls that failed, by method and Slack's error (or timeout, connection)",
            ["method", "error"],
            registry=r,
        )
        self.vendor_errors = Counter(
            "labbot_vendor_api_errors",
            "Vendor API answers that were errors, each try counted, by vendor, HTTP method (PagerDuty: event action) "
            "and status (or timeout, connection)",
            ["vendor", "method", "status"],
            registry=r,
        )
        leader = Gauge("labbot_leader", "1 while this process is the leader, 0 while it follows", registry=r)
        leader.set_function(lambda: 1.0 if self.is_leader() else 0.0)
        if db is not None:
            r.register(DatabaseCollector(db))

    def render(self) -> bytes:
        """The text exposition of every sample; blocking (the database collector queries): use a worker thread."""
        return generate_latest(self.registry)

    # -- labbot.common.observe.Observer ----------------------------------------------------------------------

    def api_error(self, system: str, method: str, error: str) -> None:
        if system == "slack":
            self.slack_errors.labels(_label(method), _label(error)).inc()
        else:
            self.vendor_errors.labels(_label(system), _label(method), _label(error)).inc()

    def telemetry_points(self, points: int) -> None:
        if points > 0:
            self.telemetry_points_total.inc(points)

    def agent_run(
        self,
        role: str,
        *,
        stop: str,
        model_calls: int,
        tokens: Mapping[str, int],
        tool_calls: int,
        tool_errors: int,
    ) -> None:
        role = _label(role)
        self.agent_runs.labels(role, _label(stop)).inc()
        if model_calls > 0:
            self.agent_model_calls.labels(role).inc(model_calls)
        for kind, n in tokens.items():
            if n > 0:
                self.agent_tokens.labels(role, _label(kind)).inc(n)
        if tool_calls - tool_errors > 0:
            self.agent_tool_calls.labels(role, "ok").inc(tool_calls - tool_errors)
        if tool_errors > 0:
            self.agent_tool_calls.labels(role, "error").inc(tool_errors)
