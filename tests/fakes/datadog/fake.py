"""`DatadogFake`: Datadog's API as a Starlette app. Each request is checked (checks.py), answered with an injected
failure (`fail_next`; `hang_next` holds it first), 403 for wrong keys, or from the store (endpoints.py), and
recorded in `requests`; what the real service would refuse goes into `violations` too."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from fakes.datadog.checks import LOGS_SEARCH, RequestChecks
from fakes.datadog.endpoints import Endpoints
from fakes.openapi import OpenApiSpec
from fakes.served import ServedFake
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

API_KEY = "dd0fake0api0key0" + "labbot0tests0000"  # fake, split: no scanner flags it
APP_KEY = "dd0fake0app0key0" + "labbot0tests00000000000000"


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


class DatadogFake(ServedFake, Endpoints, RequestChecks):
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

    # ----------------------------------------------------------------- serving

    def _before_stop(self) -> None:
        self.release()


def _failure(s: _Scripted) -> Any:
    if s.body is not None:
        return s.body.encode() if isinstance(s.body, str) else s.body
    reasons = {403: "Forbidden", 404: "Not found", 429: "Rate limit exceeded", 400: "Bad Request"}
    return {"errors": [reasons.get(s.status or 500, "Internal Server Error")]}
