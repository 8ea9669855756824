"""`DatadogFake`: Datadog's API as a Starlette app. Each request is checked (checks.py), answered with an injected
failure (`fail_next` from `fakes.failures`, ``on`` a method and path or path template such as
``"GET /api/v1/monitor/{monitor_id}"``; `hang_next` holds it first), 403 for wrong keys, or from the store
(endpoints.py), and recorded in `requests`; what the real service would refuse goes into `violations` too."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
from fakes.datadog.checks import LOGS_SEARCH, RequestChecks
from fakes.datadog.endpoints import Endpoints
from fakes.failures import FailureInjection
from fakes.openapi import OpenApiSpec, SpecViolation
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


class DatadogFake(ServedFake, Endpoints, RequestChecks, FailureInjection):
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
        self.init_failures()
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

    def failure_answer(self, status: int) -> tuple[Any, dict[str, str]]:
        """Datadog's ``{"errors": [...]}`` for an injected status (`fail_next` answers only requests that pass
        the checks); a status under 400 needs the (malformed) body to send with it."""
        if status < 400:
            raise ValueError(f"fail_next({status}): give a failure status, or a malformed body to send with it")
        reasons = {403: "Forbidden", 404: "Not found", 429: "Rate limit exceeded", 400: "Bad Request"}
        return {"errors": [reasons.get(status, "Internal Server Error")]}, {}

    def reset(self) -> None:
        """Forget requests, violations and injected failures and hangs (seeded data stays)."""
        with self._lock:
            self._requests.clear()
            self._violations.clear()
        self.clear_failures()

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
        names = self._names(method, path)
        await self.hold_if_hanging(request, *names)
        problem = problem or (
            self._check_logs(body) if path == LOGS_SEARCH else self._check_v1(method, path, query, body)
        )
        if problem:
            with self._lock:
                self._violations.append(problem)
            return self._answer(method, path, query, body, 400, {"errors": [problem]})
        failure = self.take_failure(*names)
        if failure is not None:
            response = failure.response()
            self._record(method, path, query, body, failure.status, bytes(response.body))
            return response
        if (request.headers.get("dd-api-key"), request.headers.get("dd-application-key")) != (
            self.api_key,
            self.app_key,
        ):
            return self._answer(method, path, query, body, 403, {"errors": ["Forbidden"]})
        status, answer = self._route(method, path, query, body, str(request.base_url))
        if path != LOGS_SEARCH:
            self._check_answer(method, path, status, answer)
        return self._answer(method, path, query, body, status, answer)

    def _answer(self, method: str, path: str, query: dict[str, str], body: Any, status: int, answer: Any) -> Response:
        data = json.dumps(answer, separators=(",", ":")).encode()
        self._record(method, path, query, body, status, data)
        return Response(data, status_code=status, media_type="application/json")

    def _record(self, method: str, path: str, query: dict[str, str], body: Any, status: int, data: bytes) -> None:
        with self._lock:
            self._requests.append(SeenRequest(method, path, query, body, status, data))

    def _names(self, method: str, path: str) -> tuple[str, ...]:
        """What `fail_next`'s ``on`` may call this request: its method and path, and its v1 path template."""
        names = [f"{method} {path}"]
        if path != LOGS_SEARCH:
            with contextlib.suppress(SpecViolation):  # a path not in the document has no template
                names.append(f"{method} {self.spec.operation(method, path).template}")
        return tuple(names)

    # ----------------------------------------------------------------- serving

    def _before_stop(self) -> None:
        self.release()
