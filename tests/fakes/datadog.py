"""Datadog for labbot's tests: the parts of its API the ``datadog`` MCP server uses, as a Starlette app.

Use it in process (``httpx.ASGITransport(fake.app)``, or ``fake.transport()``) or over real HTTP on 127.0.0.1
(``with DatadogFake() as dd:`` / `start()` / `stop()`; `url` is the base URL to give ``DD_API_URL``).

Every request is checked before it is answered, and a request the real service would refuse is answered 400
``{"errors": [...]}`` AND recorded in `violations` (tests assert it stays empty):

* v1 (``/api/v1/...``) against Datadog's published document, ``../shared/specs/datadog-v1-openapi.yaml``, with
  :meth:`OpenApiSpec.check`: method, path, required and unknown query parameters (``from``/``to``/``query``...),
  enums, the body's shape;
* ``POST /api/v2/logs/events/search`` (not in that document) by hand, after Datadog's v2 docs: a JSON content type,
  a body whose ``filter.query/from/to`` are strings (``from``/``to`` ISO-8601, epoch milliseconds or ``now-15m``),
  ``page.limit`` 1..1000, ``page.cursor`` one this fake gave, ``sort`` ``timestamp`` or ``-timestamp``.

Then the keys: ``DD-API-KEY`` and ``DD-APPLICATION-KEY`` must equal the fake's, else 403 ``{"errors":
["Forbidden"]}``. v1 answers are checked too (:meth:`OpenApiSpec.check_response`; a metric answer's pointlists with
only their first points, to keep 100,000-point series cheap); a drift is recorded in `violations` as ``answer: ...``.

Seeded data, in memory: `add_series` (pointlists of ``[ms, value]``), `add_log`, `add_monitor` (with
``overall_state`` and per-group states), `add_event`. Muting creates a v1 downtime, kept in `downtimes`.

`fail_next(status, headers=..., body=...)` queues injected answers (403, 404, 429 with ``Retry-After`` or
``X-RateLimit-Reset``, 500/503, a malformed body as ``bytes``), given after the request is checked and before the
keys are; `hang_next(seconds)` holds the next request that long (or until `release()`/`stop()`) before answering
it normally — for client timeouts over real HTTP. The metric query syntax understood is ``aggr:metric{tags}`` with
an optional ``by {...}`` and ``.fn(...)`` suffixes (each seeded series matching the scope is answered as is); log
search understands ``key:value`` (``*`` wildcards; service, status, host, tags, ``@attributes``), ``-`` negation,
``*`` and free words matched against the message.
"""

from __future__ import annotations

import asyncio
import base64
import fnmatch
import json
import re
import shlex
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from fakes.openapi import OpenApiSpec, SpecViolation
from fakes.served import ServedFake
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

API_KEY = "dd0fake0api0key0" + "labbot0tests0000"  # fake, split: no scanner flags it
APP_KEY = "dd0fake0app0key0" + "labbot0tests00000000000000"
LOGS_SEARCH = "/api/v2/logs/events/search"
MAX_LOGS_PAGE = 1000
_METRIC_QUERY = re.compile(
    r"\s*(?:(?P<aggr>avg|sum|min|max|count):)?(?P<metric>[A-Za-z][\w.]*)\s*\{(?P<scope>[^{}]*)\}"
    r"(?:\s*by\s*\{[^{}]*\})?(?:\.\w+\([^()]*\))*\s*"
)
_RELATIVE = re.compile(r"now(?:-(\d+)([smhdw]))?")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass(frozen=True)
class SeenRequest:
    """One request to the fake and how it was answered."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int
    answer: bytes


@dataclass
class _Scripted:
    status: int | None  # None: only a hang
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    times: int = 1
    hang_s: float = 0.0


class DatadogFake(ServedFake):
    """Datadog's API for tests; see the module docstring.

    Args:
        api_key, app_key: the keys requests must carry.
        logs_page_cap: answer at most this many logs a page whatever ``page.limit`` asks (Datadog may send fewer
            than asked, with a cursor): makes clients follow ``meta.page.after``.
        clock: "now" for ``now-15m`` in log searches.
    """

    def __init__(
        self,
        *,
        api_key: str = API_KEY,
        app_key: str = APP_KEY,
        logs_page_cap: int | None = None,
        clock: Any = time.time,
    ) -> None:
        self.api_key, self.app_key = api_key, app_key
        self.logs_page_cap = logs_page_cap
        self.clock = clock
        self.spec = OpenApiSpec.load("datadog-v1-openapi.yaml")
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._scripted: deque[_Scripted] = deque()
        self._requests: list[SeenRequest] = []
        self._violations: list[str] = []
        self.series: list[dict[str, Any]] = []
        self.logs: list[tuple[int, dict[str, Any]]] = []  # (ms, v2 log event)
        self.monitors: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.downtimes: list[dict[str, Any]] = []
        self._next_id = 1000
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
        self.app = Starlette(routes=[Route("/{path:path}", self._handle, methods=methods)])
        self.serve_app(self.app, "Datadog fake")

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

    # ----------------------------------------------------------------- what tests read and script

    @property
    def requests(self) -> list[SeenRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def violations(self) -> list[str]:
        with self._lock:
            return list(self._violations)

    def fail_next(
        self, status: int, *, headers: Mapping[str, str] | None = None, body: Any = None, times: int = 1
    ) -> None:
        """Answer the next ``times`` (checked) requests with ``status``: ``body`` a JSON value, or ``bytes``/``str``
        sent as is (a malformed body); None gives Datadog's ``{"errors": [...]}`` for the status."""
        if times < 1:
            raise ValueError("times must be at least 1")
        if status < 400 and body is None:
            raise ValueError(f"fail_next({status}): give a failure status, or a malformed body to send with it")
        with self._lock:
            self._scripted.append(_Scripted(status, dict(headers or {}), body, times))

    def hang_next(self, seconds: float = 30.0, *, times: int = 1) -> None:
        """Hold the next ``times`` requests ``seconds`` (or until `release`) before answering them normally."""
        self._released.clear()
        with self._lock:
            self._scripted.append(_Scripted(None, times=times, hang_s=seconds))

    def release(self) -> None:
        """End every hang now."""
        self._released.set()

    def reset(self) -> None:
        """Forget requests, violations and scripted answers (seeded data stays)."""
        with self._lock:
            self._requests.clear()
            self._violations.clear()
            self._scripted.clear()

    def transport(self) -> httpx.ASGITransport:
        """An httpx transport that reaches this fake in process."""
        return httpx.ASGITransport(app=self.app)

    # ----------------------------------------------------------------- HTTP

    async def _handle(self, request: Request) -> Response:
        raw = await request.body()
        method, path, query = request.method, request.url.path, dict(request.query_params)
        body: Any = None
        problem: str | None = None
        if raw:
            ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json":
                problem = f"{method} {path}: Content-Type must be application/json, got {ctype or 'none'!r}"
            try:
                body = json.loads(raw)
            except ValueError:
                problem = f"{method} {path}: the body is not JSON"
        scripted = self._take()
        if scripted is not None and scripted.status is None:
            await self._hang(scripted.hang_s)
            scripted = None
        problem = problem or (
            self._check_logs(body) if path == LOGS_SEARCH else self._check_v1(method, path, query, body)
        )
        if problem:
            with self._lock:
                self._violations.append(problem)
            return self._answer(method, path, query, body, 400, {"errors": [problem]})
        if scripted is not None and scripted.status is not None:
            return self._answer(method, path, query, body, scripted.status, _failure(scripted), scripted.headers)
        if (request.headers.get("dd-api-key"), request.headers.get("dd-application-key")) != (
            self.api_key,
            self.app_key,
        ):
            return self._answer(method, path, query, body, 403, {"errors": ["Forbidden"]})
        status, answer = self._route(method, path, query, body, str(request.base_url))
        if path != LOGS_SEARCH:
            self._check_answer(method, path, status, answer)
        return self._answer(method, path, query, body, status, answer)

    def _answer(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        body: Any,
        status: int,
        answer: Any,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        data = answer if isinstance(answer, bytes) else json.dumps(answer, separators=(",", ":")).encode()
        kind = "text/html" if isinstance(answer, bytes) else "application/json"
        with self._lock:
            self._requests.append(SeenRequest(method, path, query, body, status, data))
        return Response(data, status_code=status, media_type=kind, headers=dict(headers or {}))

    def _take(self) -> _Scripted | None:
        with self._lock:
            if not self._scripted:
                return None
            scripted = self._scripted[0]
            scripted.times -= 1
            if scripted.times <= 0:
                self._scripted.popleft()
            return scripted

    async def _hang(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._released.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    # ----------------------------------------------------------------- checks

    def _check_v1(self, method: str, path: str, query: dict[str, str], body: Any) -> str | None:
        try:
            self.spec.check(method, path, query=query, body=body)
        except SpecViolation as e:
            return str(e)
        return None

    def _check_answer(self, method: str, path: str, status: int, answer: Any) -> None:
        shown = answer
        if isinstance(answer, dict) and isinstance(answer.get("series"), list):
            shown = {**answer, "series": [{**s, "pointlist": s["pointlist"][:3]} for s in answer["series"]]}
        try:
            self.spec.check_response(method, path, status, shown)
        except SpecViolation as e:
            with self._lock:
                self._violations.append(f"answer: {e}")

    def _check_logs(self, body: Any) -> str | None:
        """Datadog's v2 docs for ``POST /api/v2/logs/events/search`` (LogsListRequest), by hand."""
        where = f"POST {LOGS_SEARCH}"
        if body is None:
            return None  # every member is optional: Datadog searches * over the last 15 minutes
        if not isinstance(body, dict):
            return f"{where}: the body must be a JSON object"
        unknown = sorted(set(body) - {"filter", "options", "page", "sort"})
        if unknown:
            return f"{where}: body fields {unknown} are not in LogsListRequest"
        f, page, options = body.get("filter", {}), body.get("page", {}), body.get("options", {})
        if not all(isinstance(x, dict) for x in (f, page, options)):
            return f"{where}: filter, page and options must be objects"
        unknown = sorted(set(f) - {"query", "from", "to", "indexes", "storage_tier"})
        if unknown:
            return f"{where}: filter fields {unknown} are not in LogsQueryFilter"
        for key in ("query", "from", "to"):
            if key in f and not isinstance(f[key], str):
                return f"{where}: filter.{key} must be a string, not {type(f[key]).__name__}"
        for key in ("from", "to"):
            if key in f and _when_ms(f[key], self.clock()) is None:
                return f"{where}: filter.{key}={f[key]!r} is not ISO-8601, epoch milliseconds or now-<n><unit>"
        indexes = f.get("indexes", [])
        if not isinstance(indexes, list) or not all(isinstance(i, str) for i in indexes):
            return f"{where}: filter.indexes must be a list of strings"
        if f.get("storage_tier", "indexes") not in ("indexes", "online-archives", "flex"):
            return f"{where}: filter.storage_tier={f['storage_tier']!r} is not indexes, online-archives or flex"
        unknown = sorted(set(page) - {"cursor", "limit"})
        if unknown:
            return f"{where}: page fields {unknown} are not in LogsListRequestPage"
        limit = page.get("limit", 10)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LOGS_PAGE:
            return f"{where}: page.limit={limit!r} must be an integer from 1 to {MAX_LOGS_PAGE}"
        if "cursor" in page and _offset(page["cursor"]) is None:
            return f"{where}: page.cursor={page['cursor']!r} is not a cursor this search answered"
        if "sort" in body and body["sort"] not in ("timestamp", "-timestamp"):
            return f"{where}: sort={body['sort']!r} is not timestamp or -timestamp"
        if set(options) - {"timeOffset", "timezone"}:
            return f"{where}: options fields {sorted(set(options) - {'timeOffset', 'timezone'})} are not listed"
        return None

    # ----------------------------------------------------------------- the API

    def _route(self, method: str, path: str, query: dict[str, str], body: Any, base: str) -> tuple[int, Any]:
        if path == LOGS_SEARCH:
            return self._search_logs(body or {}, base)
        op = self.spec.operation(method, path)
        if (op.method, op.template) == ("get", "/api/v1/query"):
            return self._query(query)
        if (op.method, op.template) == ("get", "/api/v1/monitor"):
            return 200, self._list_monitors(query)
        if (op.method, op.template) == ("get", "/api/v1/monitor/{monitor_id}"):
            monitor = self.monitors.get(int(op.path_params["monitor_id"]))
            if monitor is None:
                return 404, {"errors": ["Monitor not found"]}
            return 200, _public(monitor, "group_states" in query)
        if (op.method, op.template) == ("get", "/api/v1/events"):
            return 200, self._list_events(query)
        if (op.method, op.template) == ("post", "/api/v1/downtime"):
            return self._create_downtime(body)
        return 404, {"errors": [f"the Datadog fake does not serve {method} {op.template}"]}

    def _query(self, query: dict[str, str]) -> tuple[int, Any]:
        q = query["query"]
        m = _METRIC_QUERY.fullmatch(q)
        if m is None:
            return 400, {"errors": [f"Error parsing query: unable to parse {q}: Rule 'scope_expr' didn't match"]}
        lo, hi = int(query["from"]) * 1000, int(query["to"]) * 1000
        wanted = {t.strip() for t in m["scope"].split(",") if t.strip() and t.strip() != "*"}
        aggr = m["aggr"] or "avg"
        out = []
        for s in self.series:
            if s["metric"] != m["metric"] or not wanted <= set(s["scope"].split(",")):
                continue
            points = [p for p in s["points"] if lo <= p[0] <= hi]
            entry: dict[str, Any] = {
                "metric": s["metric"],
                "display_name": s["metric"],
                "aggr": aggr,
                "scope": s["scope"],
                "expression": f"{aggr}:{s['metric']}{{{s['scope']}}}",
                "pointlist": points,
                "length": len(points),
                "query_index": 0,
                "tag_set": [t for t in s["scope"].split(",") if t != "*"],
            }
            if points:
                entry |= {"start": int(points[0][0]), "end": int(points[-1][0])}
                if len(points) > 1:
                    entry["interval"] = max(1, int((points[-1][0] - points[0][0]) / (len(points) - 1)))
            if s["unit"]:
                entry["unit"] = [{"family": "general", "name": s["unit"], "plural": s["unit"], "short_name": s["unit"]}]
            out.append(entry)
        return 200, {
            "status": "ok",
            "res_type": "time_series",
            "query": q,
            "from_date": lo,
            "to_date": hi,
            "series": out,
            "group_by": [],
            "message": "",
        }

    def _search_logs(self, body: dict[str, Any], base: str) -> tuple[int, Any]:
        f, page = body.get("filter") or {}, body.get("page") or {}
        now = self.clock()
        lo, hi = _when_ms(f.get("from", "now-15m"), now), _when_ms(f.get("to", "now"), now)
        assert lo is not None and hi is not None  # checked
        query = f.get("query", "*")
        found = [e for ms, e in self.logs if lo <= ms <= hi and _log_matches(query, e)]
        if body.get("sort", "timestamp") == "-timestamp":
            found.reverse()
        offset = _offset(page["cursor"]) if "cursor" in page else 0
        assert offset is not None  # checked
        limit = min(page.get("limit", 10), self.logs_page_cap or MAX_LOGS_PAGE)
        chunk = found[offset : offset + limit]
        meta: dict[str, Any] = {"elapsed": 3, "request_id": f"req-{self._new_id()}", "status": "done"}
        answer: dict[str, Any] = {"data": chunk, "meta": meta}
        if offset + len(chunk) < len(found):
            after = _cursor(offset + len(chunk))
            meta["page"] = {"after": after}
            answer["links"] = {"next": f"{base.rstrip('/')}/api/v2/logs/events?page[cursor]={after}"}
        return 200, answer

    def _list_monitors(self, query: dict[str, str]) -> list[dict[str, Any]]:
        found = sorted(self.monitors.values(), key=lambda m: m["id"])
        if name := query.get("name"):
            found = [m for m in found if name.lower() in m["name"].lower()]
        if wanted := {t.strip() for t in query.get("monitor_tags", "").split(",") if t.strip()}:
            found = [m for m in found if wanted <= set(m["tags"])]
        if scope := [t.strip() for t in query.get("tags", "").split(",") if t.strip()]:
            found = [m for m in found if all(t in m["query"] for t in scope)]
        if "id_offset" in query:
            found = [m for m in found if m["id"] > int(query["id_offset"])]
        if "page" in query:
            size = int(query.get("page_size", 100))
            found = found[int(query["page"]) * size : (int(query["page"]) + 1) * size]
        return [_public(m, "group_states" in query) for m in found]

    def _list_events(self, query: dict[str, str]) -> dict[str, Any]:
        lo, hi = int(query["start"]), int(query["end"])
        found = [e for e in self.events if lo <= e["date_happened"] <= hi]
        if priority := query.get("priority"):
            found = [e for e in found if e["priority"] == priority]
        if sources := {s.strip().lower() for s in query.get("sources", "").split(",") if s.strip()}:
            found = [e for e in found if e["source_type_name"].lower() in sources]
        if tags := {t.strip() for t in query.get("tags", "").split(",") if t.strip()}:
            found = [e for e in found if tags <= set(e["tags"])]
        found.sort(key=lambda e: e["date_happened"], reverse=True)
        page = int(query.get("page", 0))
        return {"events": found[page * 1000 : (page + 1) * 1000], "status": "ok"}

    def _create_downtime(self, body: dict[str, Any]) -> tuple[int, Any]:
        monitor_id = body.get("monitor_id")
        if monitor_id is not None and monitor_id not in self.monitors:
            return 400, {"errors": [f"Monitor {monitor_id} not found"]}
        downtime = {
            "id": self._new_id(),
            "active": True,
            "disabled": False,
            "downtime_type": 2,
            "monitor_tags": ["*"],
            "scope": ["*"],
            "start": int(self.clock()),
            **body,
        }
        with self._lock:
            self.downtimes.append(downtime)
        return 200, downtime

    # ----------------------------------------------------------------- serving

    def _before_stop(self) -> None:
        self.release()


def _failure(s: _Scripted) -> Any:
    if s.body is not None:
        return s.body.encode() if isinstance(s.body, str) else s.body
    reasons = {403: "Forbidden", 404: "Not found", 429: "Rate limit exceeded", 400: "Bad Request"}
    return {"errors": [reasons.get(s.status or 500, "Internal Server Error")]}


def _public(monitor: dict[str, Any], with_groups: bool) -> dict[str, Any]:
    out = {k: v for k, v in monitor.items() if not k.startswith("_")}
    if with_groups:
        out["state"] = {"groups": monitor["_groups"]}
    return out


def _iso_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _iso_s(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def _when_ms(value: str, now: float) -> int | None:
    """A v2 ``filter.from``/``to``: ISO-8601, epoch milliseconds, or ``now``/``now-15m``; None if none of them."""
    if value.isdigit():
        return int(value)
    if m := _RELATIVE.fullmatch(value):
        back = int(m[1]) * _UNIT_S[m[2]] if m[1] else 0
        return round((now - back) * 1000)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return round((parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp() * 1000)


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": offset}).encode()).decode()


def _offset(cursor: Any) -> int | None:
    try:
        offset = json.loads(base64.urlsafe_b64decode(str(cursor).encode()))["after"]
    except (ValueError, KeyError, TypeError):
        return None
    return offset if isinstance(offset, int) and offset >= 0 else None


def _log_matches(query: str, event: dict[str, Any]) -> bool:
    a = event["attributes"]
    try:
        terms = shlex.split(query)
    except ValueError:
        terms = query.split()
    for term in terms:
        if term.upper() == "AND":
            continue
        negated = term.startswith("-")
        term = term.removeprefix("-")
        if term in ("", "*"):
            ok = True
        elif ":" in term:
            key, pattern = term.split(":", 1)
            if key.startswith("@"):
                values = [str(a["attributes"].get(key[1:], ""))]
            elif key in ("service", "status", "host"):
                values = [str(a.get(key, ""))]
            else:
                values = [t.split(":", 1)[1] for t in a["tags"] if t.startswith(f"{key}:")]
            ok = any(fnmatch.fnmatch(v.lower(), pattern.lower()) for v in values)
        else:
            ok = term.lower() in a["message"].lower()
        if ok == negated:
            return False
    return True
