"""The Datadog fake's answers to checked, authorized requests, from its store: ``GET /api/v1/query`` (the metric
query syntax ``aggr:metric{tags}``), the v2 log search (``key:value``, ``-`` negation, free words), monitors,
events and ``POST /api/v1/downtime``. `DatadogFake._handle` (fake.py) calls `Endpoints._route`."""

from __future__ import annotations

import fnmatch
import re
import shlex
from typing import Any

from fakes.datadog.checks import LOGS_SEARCH, MAX_LOGS_PAGE, _cursor, _offset, _when_ms
from fakes.datadog.store import DatadogStore
from fakes.openapi import OpenApiSpec

_METRIC_QUERY = re.compile(
    r"\s*(?:(?P<aggr>avg|sum|min|max|count):)?(?P<metric>[A-Za-z][\w.]*)\s*\{(?P<scope>[^{}]*)\}"
    r"(?:\s*by\s*\{[^{}]*\})?(?:\.\w+\([^()]*\))*\s*"
)


class Endpoints(DatadogStore):
    """The API the ``datadog`` MCP server uses, answered from the store."""

    spec: OpenApiSpec
    logs_page_cap: int | None

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


def _public(monitor: dict[str, Any], with_groups: bool) -> dict[str, Any]:
    out = {k: v for k, v in monitor.items() if not k.startswith("_")}
    if with_groups:
        out["state"] = {"groups": monitor["_groups"]}
    return out


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
