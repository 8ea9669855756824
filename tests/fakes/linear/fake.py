"""`LinearFake`: Linear's ``POST /graphql`` as a Starlette app. Each request is checked against the published schema
(schema.py) and the key, answered by executing it over the state (state.py) with the resolvers (resolvers.py) or with
an answer a test injected (`fail_next`, `hang_next`: `fakes.failures`, ``on`` an operation name such as
``"IssueCreate"``), and recorded in `requests` and `violations`."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any

import graphql
import httpx
from fakes.failures import Failure, FailureInjection
from fakes.linear.errors import NOT_AUTHENTICATED, RATELIMITED, LinearError, graphql_error
from fakes.linear.resolvers import Resolvers
from fakes.linear.schema import check, linear_schema
from fakes.linear.state import Comment, Issue, Label, State, Team, User
from fakes.served import ServedFake
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

API_KEY = "lin_api_" + "labbot0test0key0000000000000000000000000"
"""The fake's personal API key unless another is given (split, so nothing here looks like a leaked key)."""


@dataclass(frozen=True)
class SeenRequest:
    """One request to the fake and how it was answered."""

    operation: str | None
    query: str
    variables: dict[str, Any]
    authorization: str | None
    status: int
    violations: tuple[str, ...] = ()


class LinearFake(ServedFake, Resolvers, FailureInjection):
    """Linear's GraphQL API; see the module docstring. ``workspace`` is the URL slug of issue URLs."""

    def __init__(self, *, api_key: str = API_KEY, workspace: str = "labbot-test") -> None:
        linear_schema()  # here, in the test's thread: a missing spec skips the test (in CI: fails) up front
        self.api_key = api_key
        self.workspace = workspace
        self.teams: list[Team] = []
        self.states: list[State] = []
        self.labels: list[Label] = []
        self.users: list[User] = []
        self.issues: list[Issue] = []
        self.comments: list[Comment] = []
        self.requests: list[SeenRequest] = []
        self.violations: list[str] = []
        """Every request Linear would refuse as invalid, and everything the fake could not answer."""
        self._lock = threading.RLock()
        self.init_failures()
        self._ticks = 0
        self.viewer = self.add_user("Labbot Tester", display_name="labbot", email="labbot@example.com")
        self.app = Starlette(routes=[Route("/graphql", self._endpoint, methods=["POST"])])
        self.serve_app(self.app, "Linear fake", path="/graphql")

    # ----------------------------------------------------------------- what tests read and script

    @property
    def operations(self) -> list[str | None]:
        """The operation name of each request, in order."""
        return [r.operation for r in self.requests]

    def failure_answer(self, status: int) -> tuple[Any, dict[str, str]]:
        """Linear's answer to an injected status (requests that take one are still checked and recorded): 400/429
        RATELIMITED, 5xx an internal error, 200 an ``errors`` array."""
        if status in (400, 429):
            return RATELIMITED, {}
        if status == 200:
            return {"data": None, **graphql_error("Something went wrong", "INTERNAL_ERROR")}, {}
        return graphql_error(f"Internal server error ({status})", "INTERNAL_SERVER_ERROR"), {}

    def transport(self) -> httpx.AsyncBaseTransport:
        """An httpx transport that serves this fake in-process: ``LinearApi(transport=fake.transport())``."""
        return httpx.ASGITransport(app=self.app)

    # ----------------------------------------------------------------- HTTP

    def _authorized(self, header: str | None) -> bool:
        return header == (f"Bearer {self.api_key}" if self.api_key.startswith("lin_oauth") else self.api_key)

    async def _endpoint(self, request: Request) -> Response:
        authorization = request.headers.get("authorization")
        query, variables, name, problems = _read(await request.body())
        operation = name or _operation_name(query)
        names = (operation,) if operation else ()
        await self.hold_if_hanging(request, *names)
        with self._lock:
            status, answer, limits = self._answer(authorization, query, variables, name, names, problems)
            seen = SeenRequest(operation, query, variables, authorization, status, tuple(problems))
            self.requests.append(seen)
            self.violations += [f"{operation}: {p}" for p in problems] + limits
        return answer.response() if isinstance(answer, Failure) else JSONResponse(answer, status)

    def _answer(
        self,
        authorization: str | None,
        query: str,
        variables: dict[str, Any],
        name: str | None,
        names: tuple[str, ...],
        problems: list[str],
    ) -> tuple[int, Any, list[str]]:
        """(status, body or the injected `Failure`, what the fake could not answer): an injected answer first,
        then Linear's."""
        injected = self.take_failure(*names)
        if injected is not None:
            return injected.status, injected, []
        if not self._authorized(authorization):
            return (400 if authorization else 401), NOT_AUTHENTICATED, []
        if problems:
            code = {"code": "GRAPHQL_VALIDATION_FAILED", "type": "graphql error"}
            return 400, {"errors": [{"message": p, "extensions": code} for p in problems]}, []
        return self._execute(query, variables, name, names[0] if names else None)

    def _execute(
        self, query: str, variables: dict[str, Any], name: str | None, operation: str | None
    ) -> tuple[int, dict[str, Any], list[str]]:
        """(status, answer, what the fake could not answer) of a checked request, as Linear answers it."""
        document = graphql.parse(query)
        result = graphql.execute_sync(
            linear_schema(), document, root_value=self._root(), variable_values=variables, operation_name=name
        )
        errors, limits = [], []
        for err in result.errors or []:
            original = err.original_error
            if isinstance(original, LinearError):
                errors.append({"message": str(original), "path": err.path, "extensions": original.extensions})
                continue
            where = ".".join(str(p) for p in err.path or [])
            limits.append(f"{operation}: the fake could not answer {where}: {err.message}")
            errors.append({"message": err.message, "path": err.path, "extensions": {"code": "INTERNAL_ERROR"}})
        answer: dict[str, Any] = {"data": result.data}
        if errors:
            answer["errors"] = errors
        return (400 if errors and result.data is None else 200), answer, limits

    # ----------------------------------------------------------------- serving

    def _before_stop(self) -> None:
        self.release()


def _read(raw: bytes) -> tuple[str, dict[str, Any], str | None, list[str]]:
    """(query, variables, operationName, why Linear would refuse it) of a request body."""
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return "", {}, None, ["the body is not a JSON object"]
    query, variables, name = body.get("query"), body.get("variables"), body.get("operationName")
    problems = check(query, variables, name)
    return (
        query if isinstance(query, str) else "",
        variables if isinstance(variables, dict) else {},
        name if isinstance(name, str) else None,
        problems,
    )


def _operation_name(query: str) -> str | None:
    match = re.search(r"\b(?:query|mutation)\s+(\w+)", query)
    return match.group(1) if match else None
