"""What the Datadog fake has to answer with, in memory: metric series, log events, monitors (with per-group
states) and events that tests seed (`add_series`, `add_log`, `add_monitor`, `add_event`), shaped as Datadog answers
them, and the downtimes muting creates. `DatadogFake` (fake.py) sets these attributes; `Endpoints` (endpoints.py)
answers from them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any


class DatadogStore:
    """The seeded data; `DatadogFake.__init__` sets these attributes."""

    clock: Callable[[], float]
    series: list[dict[str, Any]]
    logs: list[tuple[int, dict[str, Any]]]
    monitors: dict[int, dict[str, Any]]
    events: list[dict[str, Any]]
    downtimes: list[dict[str, Any]]
    _lock: threading.Lock
    _next_id: int

    # ----------------------------------------------------------------- seeding

    def add_series(
        self,
        metric: str,
        points: Iterable[Iterable[float | None]],
        *,
        scope: str = "*",
        aggr: str = "avg",
        unit: str | None = None,
    ) -> dict[str, Any]:
        """A series of ``metric`` for ``scope`` (``host:a,env:prod``): ``points`` are ``[ms, value]`` (value may be
        None), in time order."""
        series = {"metric": metric, "scope": scope, "aggr": aggr, "unit": unit, "points": [list(p) for p in points]}
        self.series.append(series)
        return series

    def add_log(
        self,
        message: str,
        *,
        at: float,
        service: str = "trainer",
        status: str = "info",
        host: str = "gpu-1",
        tags: Iterable[str] = (),
        attributes: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A log event at unix seconds ``at``, shaped as v2 search answers it."""
        ms = round(at * 1000)
        event = {
            "id": f"AQAAAZ{self._new_id():012d}",
            "type": "log",
            "attributes": {
                "timestamp": _iso_ms(ms),
                "service": service,
                "status": status,
                "host": host,
                "message": message,
                "tags": [*tags, f"service:{service}"],
                "attributes": dict(attributes or {}),
            },
        }
        self.logs.append((ms, event))
        self.logs.sort(key=lambda pair: pair[0])
        return event

    def add_monitor(
        self,
        name: str,
        query: str,
        *,
        type: str = "metric alert",
        overall_state: str = "OK",
        message: str = "",
        tags: Iterable[str] = (),
        thresholds: Mapping[str, float] | None = None,
        groups: Mapping[str, str] | None = None,
        priority: int | None = None,
        monitor_id: int | None = None,
    ) -> dict[str, Any]:
        """A monitor; ``groups`` maps a group (``host:a``) to its state, answered when ``group_states`` is asked."""
        mid = monitor_id if monitor_id is not None else self._new_id()
        now = _iso_s(self.clock())
        monitor: dict[str, Any] = {
            "id": mid,
            "name": name,
            "type": type,
            "query": query,
            "message": message,
            "tags": list(tags),
            "overall_state": overall_state,
            "options": {"thresholds": dict(thresholds or {}), "notify_no_data": False},
            "multi": bool(groups),
            "priority": priority,
            "created": now,
            "modified": now,
            "deleted": None,
        }
        stamp = int(self.clock())
        monitor["_groups"] = {
            g: {"name": g, "status": s, "last_triggered_ts": stamp if s != "OK" else 0, "last_nodata_ts": 0}
            for g, s in (groups or {}).items()
        }
        self.monitors[mid] = monitor
        return monitor

    def add_event(
        self,
        title: str,
        text: str = "",
        *,
        at: float,
        priority: str = "normal",
        source: str = "my_apps",
        tags: Iterable[str] = (),
        alert_type: str = "info",
        host: str | None = None,
    ) -> dict[str, Any]:
        """An event at unix seconds ``at``, shaped as ``GET /api/v1/events`` answers it."""
        eid = self._new_id()
        event: dict[str, Any] = {
            "id": eid,
            "id_str": str(eid),
            "title": title,
            "text": text,
            "date_happened": int(at),
            "priority": priority,
            "source_type_name": source,
            "tags": list(tags),
            "alert_type": alert_type,
            "url": f"/event/event?id={eid}",
        }
        if host:
            event["host"] = host
        self.events.append(event)
        return event

    def _new_id(self) -> int:
        with self._lock:
            self._next_id += 1
            return self._next_id


def _iso_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _iso_s(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")
