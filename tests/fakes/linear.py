"""Linear for labbot's tests: its GraphQL endpoint, checked against Linear's published schema, over in-memory state.

`LinearFake` answers ``POST /graphql`` by really executing each request with graphql-core against the schema built
from ``../shared/specs/linear-schema.graphql`` (missing: it fails loudly, never skips), with resolvers over its
teams, workflow states, labels, users, issues and comments, so answers have exactly the schema's shapes.
Connections honour ``first``/``after`` (cursors are ids) and ``filter`` (the comparators and ``and``/``or``/``null``
Linear documents). Use it in-process (``httpx.ASGITransport(fake.app)``, see `transport()`) or over real HTTP from
a daemon thread (`start()`/`stop()`/`url`, or ``with LinearFake() as fake:``) for a ``labbot serve`` subprocess
given ``LINEAR_API_URL=fake.url``.

Every request is checked, whatever is answered: a body that is not ``{"query": ..., "variables": {...}}``, a
document the schema refuses (`graphql.validate`), variables that do not coerce to their declared types, or a
variable the operation does not declare is recorded in `violations` and answered as Linear does (HTTP 400,
``extensions.code: "GRAPHQL_VALIDATION_FAILED"``). What the fake itself cannot answer (a filter or argument it does
not implement, a field it has no value for) is recorded there too, so a test asserting ``fake.violations == []``
notices. ``Authorization`` must be the fake's key (raw; ``Bearer`` for ``lin_oauth`` tokens): otherwise 401 (none)
or 400 (wrong) with ``AUTHENTICATION_ERROR``.

Seed with `add_team` (with workflow states and labels), `add_label`, `add_user`, `add_issue`, `add_comment`; read
`issues`, `comments`, `issue(ref)`, `requests` and `operations`. `fail_next` queues injected answers (429
RATELIMITED, 5xx, a malformed body, a 200 with an ``errors`` array); `hang_next` makes requests hang until the
client gives up (a timeout) or `release()`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import threading
import uuid
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import graphql
import httpx
from fakes.served import ServedFake
from graphql.execution.values import get_variable_values
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

SPECS_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "specs"
SCHEMA_PATH = SPECS_DIR / "linear-schema.graphql"
API_KEY = "lin_api_" + "labbot0test0key0000000000000000000000000"
"""The fake's personal API key unless another is given (split, so nothing here looks like a leaked key)."""
STATES = (("Backlog", "backlog"), ("Todo", "unstarted"), ("In Progress", "started"), ("Done", "completed"))
PRIORITY_LABELS = ("No priority", "Urgent", "High", "Medium", "Low")
_EPOCH = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


@functools.cache
def linear_schema() -> graphql.GraphQLSchema:
    """Linear's published schema, built once per process (≈0.8 s: the SDL is 1.2 MB)."""
    if not SCHEMA_PATH.is_file():
        raise AssertionError(f"Linear's schema is missing at {SCHEMA_PATH}: the specs folder must sit beside the repo")
    return graphql.build_schema(SCHEMA_PATH.read_text(), no_location=True)


def check(query: Any, variables: Any = None, operation_name: str | None = None) -> list[str]:
    """Why Linear would refuse this request before running it (empty: it would not)."""
    if not isinstance(query, str) or not query.strip():
        return ["the body has no 'query' string"]
    if variables is not None and not isinstance(variables, dict):
        return ["'variables' must be an object"]
    try:
        document = graphql.parse(query)
    except graphql.GraphQLError as e:
        return [f"syntax error: {e.message}"]
    errors = [e.message for e in graphql.validate(linear_schema(), document)]
    operation = graphql.get_operation_ast(document, operation_name)
    if errors or operation is None:
        return errors or [f"no single operation to run (operationName {operation_name!r})"]
    definitions = operation.variable_definitions or ()
    declared = {d.variable.name.value for d in definitions}
    errors += [
        f"variable ${v} is sent but the operation does not declare it" for v in variables or {} if v not in declared
    ]
    coerced = get_variable_values(linear_schema(), definitions, variables or {})
    return errors + ([e.message for e in coerced] if isinstance(coerced, list) else [])


def graphql_error(message: str, code: str, **extensions: Any) -> dict[str, Any]:
    """A body with one error as Linear writes it (for `fail_next`)."""
    return {"errors": [{"message": message, "extensions": {"code": code, **extensions}}]}


RATELIMITED = graphql_error("Rate limit exceeded", "RATELIMITED", type="ratelimited")
NOT_AUTHENTICATED = graphql_error(
    "Authentication required, not authenticated",
    "AUTHENTICATION_ERROR",
    type="authentication error",
    userPresentableMessage="You need to authenticate to access this operation.",
)


class LinearError(Exception):
    """An error Linear itself answers (entity not found, invalid input): returned in ``errors``."""

    def __init__(self, message: str, code: str = "INVALID_INPUT", user_message: str | None = None) -> None:
        super().__init__(message)
        self.extensions = {"code": code, "type": code.lower().replace("_", " ")}
        if user_message:
            self.extensions["userPresentableMessage"] = user_message


def _not_found(entity: str) -> LinearError:
    return LinearError(f"Entity not found: {entity}", user_message=f"Could not find referenced {entity}.")


class Unsupported(Exception):
    """Something valid the fake does not implement: recorded as a violation, so the test that needs it fails."""


@dataclass(eq=False)
class Team:
    id: str
    key: str
    name: str


@dataclass(eq=False)
class State:
    id: str
    team: Team
    name: str
    type: str
    position: float


@dataclass(eq=False)
class Label:
    id: str
    name: str
    team: Team | None  # None: a workspace label


@dataclass(eq=False)
class User:
    id: str
    name: str
    display_name: str
    email: str


@dataclass(eq=False)
class Issue:
    id: str
    team: Team
    number: int
    title: str
    description: str | None
    state: State
    labels: list[Label]
    priority: int
    assignee: User | None
    url: str
    created_at: datetime
    updated_at: datetime

    @property
    def identifier(self) -> str:
        return f"{self.team.key}-{self.number}"


@dataclass(eq=False)
class Comment:
    id: str
    issue: Issue
    body: str
    user: User | None
    created_at: datetime


@dataclass(frozen=True)
class SeenRequest:
    """One request to the fake and how it was answered."""

    operation: str | None
    query: str
    variables: dict[str, Any]
    authorization: str | None
    status: int
    violations: tuple[str, ...] = ()


@dataclass
class _Injected:
    status: int
    headers: dict[str, str]
    body: Any
    operation: str | None


def _id() -> str:
    return str(uuid.uuid4())


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60] or "issue"


# ---------------------------------------------------------------------------------------------------- filters


def _fields(entity: Any) -> dict[str, Any]:
    """What a filter on ``entity`` can compare (relations are entities themselves, or None)."""
    if isinstance(entity, Team):
        return {"id": entity.id, "key": entity.key, "name": entity.name}
    if isinstance(entity, State):
        return {"id": entity.id, "name": entity.name, "type": entity.type, "team": entity.team}
    if isinstance(entity, Label):
        return {"id": entity.id, "name": entity.name, "team": entity.team}
    if isinstance(entity, User):
        return {"id": entity.id, "name": entity.name, "displayName": entity.display_name, "email": entity.email}
    if isinstance(entity, Issue):
        return {
            "id": entity.id, "number": entity.number, "title": entity.title, "priority": entity.priority,
            "team": entity.team, "state": entity.state, "assignee": entity.assignee,
        }  # fmt: skip
    if isinstance(entity, Comment):
        return {"id": entity.id, "body": entity.body, "user": entity.user, "issue": entity.issue}
    raise Unsupported(f"filtering {type(entity).__name__}")


_RELATIONS = {"team", "state", "assignee", "user", "issue"}
_COMPARATORS: dict[str, Any] = {
    "eq": lambda v, a: v == a,
    "neq": lambda v, a: v != a,
    "in": lambda v, a: v in a,
    "nin": lambda v, a: v not in a,
    "gt": lambda v, a: v > a,
    "gte": lambda v, a: v >= a,
    "lt": lambda v, a: v < a,
    "lte": lambda v, a: v <= a,
    "eqIgnoreCase": lambda v, a: str(v).casefold() == a.casefold(),
    "neqIgnoreCase": lambda v, a: str(v).casefold() != a.casefold(),
    "contains": lambda v, a: a in str(v),
    "containsIgnoreCase": lambda v, a: a.casefold() in str(v).casefold(),
    "containsIgnoreCaseAndAccent": lambda v, a: a.casefold() in str(v).casefold(),
    "notContains": lambda v, a: a not in str(v),
    "notContainsIgnoreCase": lambda v, a: a.casefold() not in str(v).casefold(),
    "startsWith": lambda v, a: str(v).startswith(a),
    "startsWithIgnoreCase": lambda v, a: str(v).casefold().startswith(a.casefold()),
    "notStartsWith": lambda v, a: not str(v).startswith(a),
    "endsWith": lambda v, a: str(v).endswith(a),
    "notEndsWith": lambda v, a: not str(v).endswith(a),
}


def _matches(entity: Any, flt: dict[str, Any]) -> bool:
    """Whether ``entity`` (None for an unset nullable relation) satisfies a Linear filter."""
    for key, cond in flt.items():
        if cond is None:
            continue
        if key == "and":
            ok = all(_matches(entity, f) for f in cond)
        elif key == "or":
            ok = any(_matches(entity, f) for f in cond)
        elif key == "null":
            ok = (entity is None) == cond
        elif entity is None:
            ok = False
        else:
            fields = _fields(entity)
            if key not in fields:
                raise Unsupported(f"filtering {type(entity).__name__} by {key!r}")
            ok = _matches(fields[key], cond) if key in _RELATIONS else _compare(fields[key], cond)
        if not ok:
            return False
    return True


def _compare(value: Any, comparator: dict[str, Any]) -> bool:
    for op, arg in comparator.items():
        if arg is None:
            continue
        if op not in _COMPARATORS:
            raise Unsupported(f"the comparator {op!r}")
        if not _COMPARATORS[op](value, arg):
            return False
    return True


# ---------------------------------------------------------------------------------------------------- the fake

_CONNECTION_ARGS = {"first", "after", "filter", "includeArchived", "orderBy"}


class LinearFake(ServedFake):
    """Linear's GraphQL API; see the module docstring. ``workspace`` is the URL slug of issue URLs."""

    def __init__(self, *, api_key: str = API_KEY, workspace: str = "labbot-test") -> None:
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
        self._injected: deque[_Injected] = deque()
        self._hangs = 0
        self._released = threading.Event()
        self._ticks = 0
        self.viewer = self.add_user("Labbot Tester", display_name="labbot", email="labbot@example.com")
        self.app = Starlette(routes=[Route("/graphql", self._endpoint, methods=["POST"])])
        self.serve_app(self.app, "Linear fake", path="/graphql")

    # ----------------------------------------------------------------- seeding and reading (tests)

    def add_team(self, key: str, name: str | None = None, *, states: Any = STATES, labels: Any = ()) -> Team:
        """A team with workflow states (``(name, type)`` pairs, in order) and labels of its own."""
        with self._lock:
            team = Team(_id(), key.upper(), name or key.title())
            self.teams.append(team)
            self.states += [State(_id(), team, n, kind, float(i)) for i, (n, kind) in enumerate(states)]
            self.labels += [Label(_id(), n, team) for n in labels]
            return team

    def add_label(self, name: str, team: str | None = None) -> Label:
        """A label of the team with key ``team``, or a workspace label (any team's issues may have it)."""
        with self._lock:
            label = Label(_id(), name, self._team_key(team) if team else None)
            self.labels.append(label)
            return label

    def add_user(self, name: str, *, display_name: str | None = None, email: str | None = None) -> User:
        with self._lock:
            user = User(_id(), name, display_name or name.split()[0].lower(), email or f"{_slug(name)}@example.com")
            self.users.append(user)
            return user

    def add_issue(
        self,
        team: str,
        title: str,
        *,
        description: str | None = None,
        state: str | None = None,
        labels: Any = (),
        priority: int = 0,
        assignee: User | None = None,
    ) -> Issue:
        """An issue of the team with key ``team``; ``state`` and ``labels`` by name."""
        with self._lock:
            t = self._team_key(team)
            named = [s for s in self.states if s.team is t and s.name == state]
            st = named[0] if state is not None else self._default_state(t)
            lbs = [next(lb for lb in self.labels if lb.name == n and lb.team in (t, None)) for n in labels]
            return self._new_issue(t, title, description, st, lbs, priority, assignee)

    def add_comment(self, issue: str, body: str, *, user: User | None = None) -> Comment:
        with self._lock:
            comment = Comment(_id(), self.issue(issue), body, user or self.viewer, self._tick())
            self.comments.append(comment)
            return comment

    def issue(self, ref: str) -> Issue:
        """The issue with this id or identifier (any case), as Linear's ``issue(id:)`` finds it."""
        for issue in self.issues:
            if ref == issue.id or ref.upper() == issue.identifier:
                return issue
        raise _not_found("Issue")

    def comments_on(self, ref: str) -> list[Comment]:
        issue = self.issue(ref)
        return [c for c in self.comments if c.issue is issue]

    @property
    def operations(self) -> list[str | None]:
        """The operation name of each request, in order."""
        return [r.operation for r in self.requests]

    def fail_next(
        self,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        body: Any = None,
        times: int = 1,
        operation: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests with ``status`` (they are still checked and recorded). ``body``: a
        dict or list (sent as JSON), str/bytes (sent as they are: a malformed body), or None for Linear's answer
        to that status (400/429: RATELIMITED; 5xx: an internal error; 200: an ``errors`` array). With
        ``operation`` (e.g. ``"IssueCreate"``) only requests of that operation take them."""
        if body is None and status in (400, 429):
            body = RATELIMITED
        elif body is None and status == 200:
            body = {"data": None, **graphql_error("Something went wrong", "INTERNAL_ERROR")}
        elif body is None:
            body = graphql_error(f"Internal server error ({status})", "INTERNAL_SERVER_ERROR")
        with self._lock:
            self._injected += [_Injected(status, dict(headers or {}), body, operation) for _ in range(times)]

    def hang_next(self, times: int = 1) -> None:
        """The next ``times`` requests hang until the client gives up (its timeout) or `release()`."""
        with self._lock:
            self._released.clear()
            self._hangs += times

    def release(self) -> None:
        """Let hanging requests (and those still to hang) be answered."""
        with self._lock:
            self._hangs = 0
            self._released.set()

    def transport(self) -> httpx.AsyncBaseTransport:
        """An httpx transport that serves this fake in-process: ``LinearApi(transport=fake.transport())``."""
        return httpx.ASGITransport(app=self.app)

    # ----------------------------------------------------------------- state changes

    def _tick(self) -> datetime:
        self._ticks += 1
        return _EPOCH + timedelta(minutes=self._ticks)

    def _team_key(self, key: str) -> Team:
        return next(t for t in self.teams if t.key == key.upper())

    def _default_state(self, team: Team) -> State:
        states = sorted((s for s in self.states if s.team is team), key=lambda s: s.position)
        return next((s for s in states if s.type in ("backlog", "unstarted")), states[0])

    def _new_issue(
        self,
        team: Team,
        title: str,
        description: str | None,
        state: State,
        labels: list[Label],
        priority: int,
        assignee: User | None,
    ) -> Issue:
        number = 1 + sum(1 for i in self.issues if i.team is team)
        url = f"https://linear.app/{self.workspace}/issue/{team.key}-{number}/{_slug(title)}"
        now = self._tick()
        issue = Issue(_id(), team, number, title, description, state, labels, priority, assignee, url, now, now)
        self.issues.append(issue)
        return issue

    @staticmethod
    def _by_id(items: list[Any], wanted: Any, entity: str) -> Any:
        found = next((x for x in items if x.id == wanted), None)
        if found is None:
            raise _not_found(entity)
        return found

    @staticmethod
    def _only(values: dict[str, Any], known: set[str], where: str) -> None:
        extra = sorted(k for k, v in values.items() if k not in known and v is not None)
        if extra:
            raise Unsupported(f"{where} with {extra}")

    # ----------------------------------------------------------------- GraphQL views and resolvers
    # An object is a dict; a value that is a function is called with (info, **arguments): graphql-core's default
    # resolver does that, so nested objects and connections are built only when a query asks for them.

    def _connection(self, items: list[Any], view: Any, args: dict[str, Any]) -> dict[str, Any]:
        self._only(args, _CONNECTION_ARGS, "a connection (last/before/sort are not implemented)")
        if args.get("filter"):
            items = [x for x in items if _matches(x, args["filter"])]
        if args.get("orderBy") == "updatedAt":
            items = sorted(items, key=lambda x: getattr(x, "updated_at", _EPOCH), reverse=True)
        first = 50 if args.get("first") is None else args["first"]
        if not 0 <= first <= 250:
            raise LinearError("Argument Validation Error", user_message="first must be between 0 and 250.")
        start = 0
        if args.get("after"):
            ids = [x.id for x in items]
            if args["after"] not in ids:
                raise LinearError("Argument Validation Error", user_message="after is not a valid cursor.")
            start = ids.index(args["after"]) + 1
        page = items[start : start + first]
        nodes = [view(x) for x in page]
        return {
            "nodes": nodes,
            "edges": lambda info: [{"node": n, "cursor": x.id} for n, x in zip(nodes, page, strict=True)],
            "pageInfo": {
                "hasNextPage": start + first < len(items),
                "hasPreviousPage": start > 0,
                "startCursor": page[0].id if page else None,
                "endCursor": page[-1].id if page else None,
            },
            "totalCount": len(items),
        }

    def _team_view(self, team: Team) -> dict[str, Any]:
        return {
            "id": team.id, "key": team.key, "name": team.name,
            "states": lambda info, **a: self._connection(
                [s for s in self.states if s.team is team], self._state_view, a
            ),
            "labels": lambda info, **a: self._connection(
                [lb for lb in self.labels if lb.team is team], self._label_view, a
            ),
            "issues": lambda info, **a: self._connection(
                [i for i in self.issues if i.team is team], self._issue_view, a
            ),
        }  # fmt: skip

    def _state_view(self, state: State) -> dict[str, Any]:
        return {
            "id": state.id, "name": state.name, "type": state.type, "position": state.position,
            "team": lambda info: self._team_view(state.team),
        }  # fmt: skip

    def _label_view(self, label: Label) -> dict[str, Any]:
        team = label.team
        return {"id": label.id, "name": label.name, "team": lambda info: self._team_view(team) if team else None}

    @staticmethod
    def _user_view(user: User | None) -> dict[str, Any] | None:
        if user is None:
            return None
        return {"id": user.id, "name": user.name, "displayName": user.display_name, "email": user.email}

    def _issue_view(self, issue: Issue) -> dict[str, Any]:
        return {
            "id": issue.id, "identifier": issue.identifier, "number": issue.number, "title": issue.title,
            "description": issue.description, "priority": issue.priority,
            "priorityLabel": PRIORITY_LABELS[issue.priority], "url": issue.url,
            "createdAt": _iso(issue.created_at), "updatedAt": _iso(issue.updated_at),
            "team": lambda info: self._team_view(issue.team),
            "state": lambda info: self._state_view(issue.state),
            "assignee": lambda info: self._user_view(issue.assignee),
            "labels": lambda info, **a: self._connection(list(issue.labels), self._label_view, a),
            "comments": lambda info, **a: self._connection(
                [c for c in self.comments if c.issue is issue], self._comment_view, a
            ),
        }  # fmt: skip

    def _comment_view(self, comment: Comment) -> dict[str, Any]:
        return {
            "id": comment.id, "body": comment.body, "url": f"{comment.issue.url}#comment-{comment.id[:8]}",
            "createdAt": _iso(comment.created_at), "updatedAt": _iso(comment.created_at),
            "user": lambda info: self._user_view(comment.user),
            "issue": lambda info: self._issue_view(comment.issue),
        }  # fmt: skip

    def _root(self) -> dict[str, Any]:
        """Query and Mutation fields; any other field answers null (a violation when the schema says non-null)."""
        return {
            "viewer": lambda info: self._user_view(self.viewer),
            "teams": lambda info, **a: self._connection(self.teams, self._team_view, a),
            "team": lambda info, id: self._team_view(self._by_id(self.teams, id, "Team")),
            "workflowStates": lambda info, **a: self._connection(self.states, self._state_view, a),
            "issueLabels": lambda info, **a: self._connection(self.labels, self._label_view, a),
            "users": lambda info, **a: self._connection(self.users, self._user_view, a),
            "issues": lambda info, **a: self._connection(self.issues, self._issue_view, a),
            "issue": lambda info, id: self._issue_view(self.issue(id)),
            "comments": lambda info, **a: self._connection(self.comments, self._comment_view, a),
            "searchIssues": self._search_issues,
            "issueCreate": self._issue_create,
            "issueUpdate": self._issue_update,
            "commentCreate": self._comment_create,
        }

    def _search_issues(
        self, info: Any, term: str, teamId: str | None = None, includeComments: bool | None = None, **args: Any
    ) -> dict[str, Any]:
        """Every word of ``term`` in the identifier, title or description (or a comment, with includeComments)."""
        words = term.casefold().split()

        def hit(issue: Issue) -> bool:
            texts = [issue.identifier, issue.title, issue.description or ""]
            if includeComments:
                texts += [c.body for c in self.comments if c.issue is issue]
            return all(w in " ".join(texts).casefold() for w in words)

        found = [i for i in self.issues if hit(i) and teamId in (None, i.team.id)]
        return self._connection(found, self._issue_view, args)

    def _issue_create(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        known = {"teamId", "title", "description", "labelIds", "priority", "stateId", "assigneeId"}
        self._only(input, known, "issueCreate input")
        team = self._by_id(self.teams, input["teamId"], "Team")
        if not (input.get("title") or "").strip():
            raise LinearError("Argument Validation Error", user_message="title must not be empty.")
        fields = self._issue_fields(team, input)
        state = fields.get("state") or self._default_state(team)
        issue = self._new_issue(
            team, input["title"], input.get("description"), state, fields.get("labels", []),
            fields.get("priority", 0), fields.get("assignee"),
        )  # fmt: skip
        return {"success": True, "lastSyncId": float(self._ticks), "issue": self._issue_view(issue)}

    def _issue_update(self, info: Any, id: str, input: dict[str, Any]) -> dict[str, Any]:
        self._only(input, {"title", "description", "stateId", "priority", "labelIds", "assigneeId"}, "issueUpdate")
        issue = self.issue(id)
        for name, value in self._issue_fields(issue.team, input).items():
            setattr(issue, name, value)
        for name in ("title", "description"):
            if name in input:
                setattr(issue, name, input[name])
        issue.updated_at = self._tick()
        return {"success": True, "lastSyncId": float(self._ticks), "issue": self._issue_view(issue)}

    def _issue_fields(self, team: Team, input: dict[str, Any]) -> dict[str, Any]:
        """The state, labels, priority and assignee an issue input sets, checked as Linear checks them."""
        fields: dict[str, Any] = {}
        if input.get("stateId") is not None:
            fields["state"] = self._by_id(self.states, input["stateId"], "WorkflowState")
            if fields["state"].team is not team:
                raise LinearError("Argument Validation Error", user_message="The state is not in the issue's team.")
        if input.get("labelIds") is not None:
            fields["labels"] = [self._by_id(self.labels, i, "IssueLabel") for i in input["labelIds"]]
            if any(lb.team not in (None, team) for lb in fields["labels"]):
                raise LinearError("Argument Validation Error", user_message="A label is not in the issue's team.")
        if input.get("priority") is not None:
            if not 0 <= input["priority"] <= 4:
                raise LinearError("Argument Validation Error", user_message="priority must be between 0 and 4.")
            fields["priority"] = input["priority"]
        if input.get("assigneeId") is not None:
            fields["assignee"] = self._by_id(self.users, input["assigneeId"], "User")
        return fields

    def _comment_create(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        self._only(input, {"issueId", "body"}, "commentCreate input (only comments on issues)")
        if not input.get("issueId"):
            raise LinearError("Argument Validation Error", user_message="issueId must be given.")
        issue = self.issue(input["issueId"])
        if not (input.get("body") or "").strip():
            raise LinearError("Argument Validation Error", user_message="body must not be empty.")
        comment = Comment(_id(), issue, input["body"], self.viewer, self._tick())
        self.comments.append(comment)
        return {"success": True, "lastSyncId": float(self._ticks), "comment": self._comment_view(comment)}

    # ----------------------------------------------------------------- HTTP

    def _authorized(self, header: str | None) -> bool:
        return header == (f"Bearer {self.api_key}" if self.api_key.startswith("lin_oauth") else self.api_key)

    async def _endpoint(self, request: Request) -> Response:
        authorization = request.headers.get("authorization")
        query, variables, name, problems = _read(await request.body())
        operation = name or _operation_name(query)
        with self._lock:
            hang, self._hangs = self._hangs > 0, max(0, self._hangs - 1)
        if hang:
            await self._hang(request)
        with self._lock:
            status, answer, headers, limits = self._answer(authorization, query, variables, name, operation, problems)
            seen = SeenRequest(operation, query, variables, authorization, status, tuple(problems))
            self.requests.append(seen)
            self.violations += [f"{operation}: {p}" for p in problems] + limits
        if isinstance(answer, str | bytes):
            return Response(answer, status, headers, media_type=headers.get("content-type", "application/json"))
        return JSONResponse(answer, status, headers)

    def _answer(
        self,
        authorization: str | None,
        query: str,
        variables: dict[str, Any],
        name: str | None,
        operation: str | None,
        problems: list[str],
    ) -> tuple[int, Any, dict[str, str], list[str]]:
        """(status, body, headers, what the fake could not answer): an injected answer first, then Linear's."""
        injected = next((i for i in self._injected if i.operation in (None, operation)), None)
        if injected is not None:
            self._injected.remove(injected)
            return injected.status, injected.body, injected.headers, []
        if not self._authorized(authorization):
            return (400 if authorization else 401), NOT_AUTHENTICATED, {}, []
        if problems:
            code = {"code": "GRAPHQL_VALIDATION_FAILED", "type": "graphql error"}
            return 400, {"errors": [{"message": p, "extensions": code} for p in problems]}, {}, []
        status, answer, limits = self._execute(query, variables, name, operation)
        return status, answer, {}, limits

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

    async def _hang(self, request: Request) -> None:
        while not self._released.is_set() and not await request.is_disconnected():
            await asyncio.sleep(0.01)  # polls: the release comes from another thread

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
