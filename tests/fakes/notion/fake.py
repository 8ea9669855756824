"""`NotionFake`: Notion's API as a Starlette app. Each request is checked (the token, the pinned version, the
published OpenAPI document, content.py's limits), answered with an injected failure (`fail_next` from
`fakes.failures`; `hang_next` holds it first) or by the endpoint (endpoints.py) over the store (store.py), and
recorded in `requests`; what Notion would refuse goes into `violations`."""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass
from typing import Any

import httpx
from fakes.failures import Failure, FailureInjection
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


class NotionFake(ServedFake, Endpoints, FailureInjection):
    """Notion's API in memory; see the module docstring."""

    def __init__(self, token: str = TOKEN, *, version: str = VERSION, max_hang_s: float = 30.0) -> None:
        self.token, self.version = token, version
        self.init_failures(max_hang_s=max_hang_s)
        self.spec = OpenApiSpec.load("notion-openapi.json")
        self.pages: dict[str, dict[str, Any]] = {}
        self.blocks: dict[str, dict[str, Any]] = {}
        self.children: dict[str, list[str]] = {}  # page or block id → its child block ids, in order
        self.data_sources: dict[str, dict[str, Any]] = {}
        self.comments: list[dict[str, Any]] = []
        self._created: list[str] = []  # ids of the pages made through the API, in order
        self.requests: list[SeenRequest] = []
        self.violations: list[str] = []
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

    def failure_answer(self, status: int) -> tuple[Any, dict[str, str]]:
        """Notion's error for an injected status. `fail_next` answers only valid requests, and ``on`` is a method
        and a template (``"PATCH /v1/blocks/{block_id}/children"``) or a path (``"GET /v1/blocks/<id>/children"``).
        """
        return _error(status, "injected failure"), {}

    def transport(self) -> httpx.ASGITransport:
        """The in-process seam: ``NotionApi(transport=fake.transport())``."""
        return httpx.ASGITransport(app=self.app)

    # ----------------------------------------------------------------- HTTP

    async def _handle(self, request: Request) -> Response:
        raw = await request.body()
        await self.hold_if_hanging(request, f"{request.method} {request.url.path}")
        query = dict(request.query_params)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        with self._lock:
            status, answer = self._answer(request.method, request.url.path, query, request.headers, body)
            self.requests.append(SeenRequest(request.method, request.url.path, query, body, status))
        return answer.response() if isinstance(answer, Failure) else JSONResponse(answer, status)

    def _answer(self, method: str, path: str, query: dict[str, str], headers: Any, body: Any) -> tuple[int, Any]:
        """(status, body or the injected `Failure`) for one request."""
        if headers.get("authorization") != f"Bearer {self.token}":
            return 401, _error(401, "API token is invalid.")
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
            failure = self.take_failure(f"{method.upper()} {op.template}", f"{method.upper()} {path}")
            if failure is not None:
                return failure.status, failure
            return 200, route(op.path_params, query, body or {})
        except (Invalid, SpecViolation) as e:
            self.violations.append(f"{method} {path}: {e}")
            return 400, _error(400, str(e))
        except NotFound as e:
            return 404, _error(404, str(e))

    # ----------------------------------------------------------------- serving

    def _before_stop(self) -> None:
        self.release()
