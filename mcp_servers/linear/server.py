"""The ``linear`` MCP server's tools: read teams and issues, and — each only after a human approves, since they are
``destructiveHint`` — create issues, comment on them and move them to another workflow state.

Tools resolve what a model writes (a team key or name, label and state names, ``ENG-123`` or an issue URL) into
Linear's ids before they write anything, so a wrong name is an error that lists the right ones and nothing is
half-created. Answers are compact text; what people wrote in Linear comes back as untrusted data (see
:mod:`labbot.mcp_servers.linear.render`). ``build_server(read_only=True)`` leaves the write tools out.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from labbot.mcp_servers.annotations import VENDOR_READ, VENDOR_WRITE
from labbot.mcp_servers.linear import queries
from labbot.mcp_servers.linear.client import LinearApi
from labbot.mcp_servers.linear.names import check_priority, find_labels, find_state, find_team, issue_ref
from labbot.mcp_servers.linear.render import issue_text, issues_text, priority_name, teams_text

__all__ = ["build_server"]

IssueArg = Annotated[str, Field(description="an identifier like ENG-123, a Linear issue URL, or an issue id")]


def _payload(data: dict[str, Any], field: str, entity: str, what: str) -> dict[str, Any]:
    """The created/updated entity of a mutation payload, or a ToolError when Linear says ``success: false``."""
    payload = data.get(field) or {}
    if payload.get("success") is not True or not payload.get(entity):
        raise ToolError(f"Linear did not {what} (success: false): nothing was changed; try again, or check in Linear")
    result: dict[str, Any] = payload[entity]
    return result


def _labels_filter(team_id: str) -> dict[str, Any]:
    return {"or": [{"team": {"id": {"eq": team_id}}}, {"team": {"null": True}}]}


def build_server(api: LinearApi | None = None, *, read_only: bool = False) -> MCPServer:
    """The ``linear`` server over ``api`` (default: ``LinearApi()``, configured from the environment)."""
    linear = api or LinearApi()
    writes = "" if read_only else " Creating issues, commenting and changing an issue's state need a human's approval."
    server: MCPServer = MCPServer(
        "labbot-linear",
        instructions="Linear: teams (with their workflow states and labels) and issues: search, read." + writes,
    )

    _read_tools(server, linear)
    if not read_only:
        _write_tools(server, linear)
    return server


def _read_tools(server: MCPServer, linear: LinearApi) -> None:
    """Teams and issues: listing, searching, reading."""

    @server.tool(annotations=VENDOR_READ, structured_output=False)
    async def list_teams() -> str:
        """The Linear teams: key, name, workflow states (with their type) and labels; then the workspace's labels."""
        teams = await linear.paginate(queries.TEAMS, {}, ("teams",))
        labels = await linear.paginate(queries.LABELS, {"filter": None}, ("issueLabels",))
        return teams_text(teams, labels)

    @server.tool(annotations=VENDOR_READ, structured_output=False)
    async def search_issues(
        query: Annotated[str, Field(description="words to look for in titles and descriptions; empty: recent")],
        team: Annotated[str | None, Field(description="only this team (its key, e.g. ENG, or its name)")] = None,
        state: Annotated[str | None, Field(description="only issues in this workflow state, e.g. In Progress")] = None,
        limit: Annotated[int, Field(ge=1, le=250)] = 20,
    ) -> str:
        """Find issues: one line each (identifier · title · state · assignee · priority · url)."""
        flt: dict[str, Any] = {}
        if team:
            flt["team"] = {"or": [{"key": {"eqIgnoreCase": team}}, {"name": {"eqIgnoreCase": team}}]}
        if state:
            flt["state"] = {"name": {"eqIgnoreCase": state}}
        term = query.strip()
        if term:
            variables: dict[str, Any] = {"term": term, "filter": flt or None}
            found = await linear.paginate(queries.SEARCH_ISSUES, variables, ("searchIssues",), limit=limit + 1)
        else:
            found = await linear.paginate(queries.ISSUES, {"filter": flt or None}, ("issues",), limit=limit + 1)
        where = "".join([f" in team {team}" if team else "", f" in state {state!r}" if state else ""])
        text = issues_text(found[:limit], term, where, more=len(found) > limit)
        if not found and (team or state):
            text += ": check the team and state names with list_teams"
        return text

    @server.tool(annotations=VENDOR_READ, structured_output=False)
    async def get_issue(issue: IssueArg) -> str:
        """One issue in full: state, team, priority, assignee, labels, url, description and every comment."""
        variables = {"id": issue_ref(issue), "commentsFirst": linear.page_size}
        found = (await linear.execute(queries.ISSUE, variables))["issue"]
        comments = list(found["comments"]["nodes"])
        page = found["comments"]["pageInfo"]
        if page.get("hasNextPage") and page.get("endCursor"):
            more = await linear.paginate(
                queries.ISSUE_COMMENTS, {"id": found["id"]}, ("issue", "comments"), after=page["endCursor"]
            )
            comments += more
        comments.sort(key=lambda c: str(c.get("createdAt") or ""))
        return issue_text(found, comments)


def _write_tools(server: MCPServer, linear: LinearApi) -> None:
    """Creating issues, commenting, changing an issue's state: each needs a human's approval."""

    @server.tool(annotations=VENDOR_WRITE, structured_output=False)
    async def create_issue(
        team: Annotated[str, Field(description="the team's key (e.g. ENG) or name")],
        title: str,
        description: Annotated[str, Field(description="Markdown")] = "",
        labels: Annotated[list[str] | None, Field(description="label names, e.g. ['Bug']")] = None,
        priority: Annotated[int | None, Field(description="0 none, 1 urgent, 2 high, 3 medium, 4 low")] = None,
    ) -> str:
        """Create an issue in a team (needs a human's approval): its identifier and URL."""
        title = title.strip()
        if not title:
            raise ToolError("the title is empty: give the issue a short title")
        check_priority(priority)
        found = find_team(await linear.paginate(queries.TEAMS, {}, ("teams",)), team)
        label_ids: list[str] = []
        if labels:
            usable = await linear.paginate(queries.LABELS, {"filter": _labels_filter(found["id"])}, ("issueLabels",))
            label_ids = find_labels(usable, labels, found)
        fields: dict[str, Any] = {"teamId": found["id"], "title": title}
        if description.strip():
            fields["description"] = description
        if label_ids:
            fields["labelIds"] = label_ids
        if priority is not None:
            fields["priority"] = priority
        data = await linear.execute(queries.ISSUE_CREATE, {"input": fields})
        made = _payload(data, "issueCreate", "issue", "create the issue")
        named = ", ".join(lb["name"] for lb in made["labels"]["nodes"]) or "none"
        return (
            f"created {made['identifier']} · {made['title']} · state {made['state']['name']} · "
            f"{priority_name(made['priority'])} · labels: {named}\n{made['url']}"
        )

    @server.tool(annotations=VENDOR_WRITE, structured_output=False)
    async def add_comment(issue: IssueArg, body: Annotated[str, Field(description="Markdown")]) -> str:
        """Comment on an issue (needs a human's approval)."""
        if not body.strip():
            raise ToolError("the comment is empty: write what to say")
        data = await linear.execute(queries.COMMENT_CREATE, {"input": {"issueId": issue_ref(issue), "body": body}})
        comment = _payload(data, "commentCreate", "comment", "add the comment")
        return f"commented on {(comment.get('issue') or {}).get('identifier', issue)}: {comment['url']}"

    @server.tool(annotations=VENDOR_WRITE, structured_output=False)
    async def update_state(
        issue: IssueArg, state: Annotated[str, Field(description="a workflow state of the issue's team, e.g. Done")]
    ) -> str:
        """Move an issue to another workflow state of its team (needs a human's approval)."""
        found = (await linear.execute(queries.ISSUE_TEAM_STATES, {"id": issue_ref(issue)}))["issue"]
        target = find_state(found["team"], state, found["identifier"])
        if target["id"] == found["state"]["id"]:
            return f"{found['identifier']} is already {target['name']}: nothing changed · {found['url']}"
        data = await linear.execute(queries.ISSUE_UPDATE, {"id": found["id"], "input": {"stateId": target["id"]}})
        moved = _payload(data, "issueUpdate", "issue", "change the issue's state")
        return f"{moved['identifier']} moved from {found['state']['name']} to {moved['state']['name']} · {moved['url']}"
