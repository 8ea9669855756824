"""The Linear fake's workspace in memory: teams with their workflow states and labels, users, issues and comments;
how tests seed them (`add_team`, `add_issue`, ...) and how they change (a clock that ticks a minute a change).
`LinearFake` (fake.py) sets these attributes; `Resolvers` (resolvers.py) answers GraphQL over them."""

from __future__ import annotations

import re
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from fakes.linear.errors import _not_found

STATES = (("Backlog", "backlog"), ("Todo", "unstarted"), ("In Progress", "started"), ("Done", "completed"))
PRIORITY_LABELS = ("No priority", "Urgent", "High", "Medium", "Low")
_EPOCH = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


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


def _id() -> str:
    return str(uuid.uuid4())


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60] or "issue"


class LinearState:
    """The entities, seeded and changed under ``_lock``; `LinearFake.__init__` sets these attributes."""

    workspace: str
    teams: list[Team]
    states: list[State]
    labels: list[Label]
    users: list[User]
    issues: list[Issue]
    comments: list[Comment]
    viewer: User
    _lock: threading.RLock
    _ticks: int

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
