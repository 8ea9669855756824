"""GraphQL over the Linear fake's state: a view (a dict) of each entity, connections with ``first``/``after``/
``filter``, and the Query and Mutation fields (`Resolvers._root`) that `LinearFake` (fake.py) executes a checked
request with."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fakes.linear.errors import LinearError, Unsupported, _not_found
from fakes.linear.filters import _matches
from fakes.linear.state import _EPOCH, PRIORITY_LABELS, Comment, Issue, Label, LinearState, State, Team, User, _id

_CONNECTION_ARGS = {"first", "after", "filter", "includeArchived", "orderBy"}


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Resolvers(LinearState):
    """The root value `LinearFake._execute` runs a request against, and the views it is built of."""

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
