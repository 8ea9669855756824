"""`NotionFake`: Notion's API as a Starlette app. Each request is checked (the token, the pinned version, the
published OpenAPI document, content.py's limits), answered with an injected failure (`fail_next`; `hang_next` holds
it first) or by the endpoint (endpoints.py) over the store (store.py), and recorded in `requests`; what Notion would
refuse goes into `violations`."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

import httpx
from fakes.notion.content import _limits
from fakes.notion.endpoints import Endpoints
from fakes.notion.errors import Invalid, NotFound, _error
from fakes.openapi import OpenApiSpec, SpecViolation
from fakes.served import ServedFake
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

TOKEN = "ntn_labbot0test0notion0token0000000000000000"
VERSION = "2025-09-03"


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int


@dataclass
class _Failure:
    status: int
    headers: dict[str, str]
    body: Any
    on: str | None  # "METHOD /v1/template" or "METHOD /v1/path", or None: any request


class NotionFake(ServedFake, Endpoints):
    """Notion's API in memory; see the module docstring."""

    def __init__(self, token: str = TOKEN, *, version: str = VERSION, max_hang_s: float = 30.0) -> None:
        self.token, self.version, self.max_hang_s = token, version, max_hang_s
        self.spec = OpenApiSpec.load("notion-openapi.json")
        self.pages: dict[str, dict[str, Any]] = {}
        self.blocks: dict[str, dict[str, Any]] = {}
        self.children: dict[str, list[str]] = {}  # page or block id → its child block ids, in order
        self.data_sources: dict[str, dict[str, Any]] = {}
        self.comments: list[dict[str, Any]] = []
        self._created: list[str] = []  # ids of the pages made through the API, in order
        self.requests: list[SeenRequest] = []
        self.violations: list[str] = []
        self._failures: deque[_Failure] = deque()
        self._hangs = 0
        self._release = threading.Event()
        self._lock = threading.RLock()
        self._clock = itertools.count(1)
        self._routes: dict[tuple[str, str], Any] = {
            ("post", "/v1/search"): self._search,
            ("get", "/v1/pages/{page_id}"): lambda p, q, b: self._page(p["page_id"]),
            ("patch", "/v1/pages/{page_id}"): self._update_page,
            ("post", "/v1/pages"): self._create_page,
            ("get", "/v1/blocks/{block_id}/children"): self._list_children,
            ("patch", "/v1/blocks/{block_id}/children"): self._append_children,
            ("post", "/v1/comments"): self._comment,
            ("get", "/v1/data_sources/{data_source_id}"): lambda p, q, b: self._source(p["data_source_id"]),
            ("post", "/v1/data_sources/{data_source_id}/query"): self._query,
        }
        route = Route("/{path:path}", self._handle, methods=["GET", "POST", "PATCH", "DELETE"])
        self.app = Starlette(routes=[route])
        self.serve_app(self.app, "Notion fake")

    # ----------------------------------------------------------------- what tests script

    def fail_next(
        self,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        body: Any = None,
        times: int = 1,
        on: str | None = None,
    ) -> None:
        """Answer the next ``times`` valid requests with ``status`` — only those to ``on`` when it is given, a method
        and a template (``"PATCH /v1/blocks/{block_id}/children"``) or a path (``"GET /v1/blocks/<id>/children"``).
        The default body is Notion's error for the status; a str body is sent as HTML, as a proxy's page would be."""
        with self._lock:
            self._failures.extend(_Failure(status, dict(headers or {}), body, on) for _ in range(times))

    def hang_next(self, times: int = 1) -> None:
        """Hold the next ``times`` requests until :meth:`release` (or ``stop``, or ``max_hang_s``)."""
        self._hangs += times
        self._release.clear()

    def release(self) -> None:
        self._hangs = 0
        self._release.set()

    def transport(self) -> httpx.ASGITransport:
        """The in-process seam: ``NotionApi(transport=fake.transport())``."""
        return httpx.ASGITransport(app=self.app)

    # ----------------------------------------------------------------- HTTP

    async def _handle(self, request: Request) -> Response:
        raw = await request.body()
        if self._hangs > 0:
            self._hangs -= 1
            for _ in range(int(self.max_hang_s * 100)):  # polled: the client's timeout is what is under test
                if self._release.is_set():
                    break
                await asyncio.sleep(0.01)
        query = dict(request.query_params)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        with self._lock:
            status, answer, headers = self._answer(request.method, request.url.path, query, request.headers, body)
            self.requests.append(SeenRequest(request.method, request.url.path, query, body, status))
        if isinstance(answer, str | bytes):
            return Response(answer, status, headers, media_type="text/html")
        return JSONResponse(answer, status, headers)

    def _answer(self, method: str, path: str, query: dict[str, str], headers: Any, body: Any) -> tuple[int, Any, Any]:
        if headers.get("authorization") != f"Bearer {self.token}":
            return 401, _error(401, "API token is invalid."), {}
        try:
            if headers.get("notion-version") != self.version:
                raise Invalid(f"Notion-Version should be {self.version}, got {headers.get('notion-version')!r}")
            if isinstance(body, str):
                raise Invalid("Error parsing JSON body.")
            op = self.spec.check(method, path, query=query, headers=dict(headers), body=body)
            route = self._routes.get((op.method, op.template))
            if route is None:
                raise Invalid(f"the Notion fake does not implement {method} {op.template}")
            _limits(body)
            where = (f"{method.upper()} {op.template}", f"{method.upper()} {path}")
            failure = next((f for f in self._failures if f.on is None or f.on in where), None)
            if failure is not None:
                self._failures.remove(failure)
                answer = failure.body if failure.body is not None else _error(failure.status, "injected failure")
                return failure.status, answer, failure.headers
            return 200, route(op.path_params, query, body or {}), {}
        except (Invalid, SpecViolation) as e:
            self.violations.append(f"{method} {path}: {e}")
            return 400, _error(400, str(e)), {}
        except NotFound as e:
            return 404, _error(404, str(e)), {}

    # ----------------------------------------------------------------- serving

    def _before_stop(self) -> None:
        self.release()
