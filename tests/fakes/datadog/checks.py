"""What Datadog would refuse, checked before the Datadog fake answers: v1 requests (and the fake's own v1 answers)
against Datadog's published OpenAPI document, and ``POST /api/v2/logs/events/search`` by hand, after the v2 docs;
with the time values (``now-15m``, ISO-8601, epoch ms) and page cursors of that search."""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fakes.openapi import OpenApiSpec, SpecViolation

LOGS_SEARCH = "/api/v2/logs/events/search"
MAX_LOGS_PAGE = 1000
_RELATIVE = re.compile(r"now(?:-(\d+)([smhdw]))?")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class RequestChecks:
    """The checks `DatadogFake._handle` runs: `_check_v1` and `_check_logs` say why Datadog would refuse a request
    (None: it would not); `_check_answer` records a drift of the fake's own v1 answer. `DatadogFake` sets these
    attributes."""

    spec: OpenApiSpec
    clock: Callable[[], float]
    _lock: threading.Lock
    _violations: list[str]

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
