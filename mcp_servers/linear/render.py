"""Linear's answers as compact text a model reads: one line per issue, a block per team, an issue in full.

What people wrote in Linear — titles, descriptions, comments, their display names — reaches the model only inside
:func:`~labbot.mcp_servers.untrusted.untrusted` blocks, so a description that says "ignore previous instructions" is
read as data. Team, state and label names are shown as they are: the model passes them back as tool arguments.
"""

from __future__ import annotations

from typing import Any

from labbot.mcp_servers.linear.names import PRIORITIES
from labbot.mcp_servers.untrusted import untrusted

__all__ = ["issue_line", "issue_text", "issues_text", "priority_name", "teams_text"]


def priority_name(priority: Any) -> str:
    try:
        return PRIORITIES[int(priority)]
    except (TypeError, ValueError, KeyError):
        return f"priority {priority}"


def _person(user: dict[str, Any] | None, nobody: str) -> str:
    if not user:
        return nobody
    return str(user.get("name") or user.get("displayName") or nobody)


def issue_line(issue: dict[str, Any]) -> str:
    """``ENG-1 · title · state · assignee · priority · url``."""
    bits = [
        issue["identifier"],
        " ".join(str(issue["title"]).split()),
        (issue.get("state") or {}).get("name", "?"),
        _person(issue.get("assignee"), "unassigned"),
        priority_name(issue.get("priority")),
        issue["url"],
    ]
    return " · ".join(bits)


def issues_text(issues: list[dict[str, Any]], query: str, where: str, more: bool) -> str:
    """Search results: a count line, then the issue lines as untrusted data (titles are user-written)."""
    if not issues:
        return (f"no issues matching {query!r}" if query else "no issues") + where
    count = "1 issue" if len(issues) == 1 else f"{len(issues)} issues"
    head = (f"{count} matching {query!r}" if query else f"the {count} updated most recently") + where
    if more:
        head += " (there are more: raise limit or narrow the search)"
    return head + "\n" + untrusted("linear search results", "\n".join(issue_line(i) for i in issues))


def teams_text(teams: list[dict[str, Any]], labels: list[dict[str, Any]]) -> str:
    """Each team with its workflow states (in order, with their type) and labels; then the workspace's labels."""
    if not teams:
        return "this Linear workspace has no teams the key can see"
    lines: list[str] = []
    for team in teams:
        states = sorted(team["states"]["nodes"], key=lambda s: s.get("position", 0))
        own = sorted((lb["name"] for lb in labels if (lb.get("team") or {}).get("id") == team["id"]), key=str.casefold)
        lines.append(f"{team['key']} · {team['name']}")
        lines.append("  states: " + (", ".join(f"{s['name']} ({s['type']})" for s in states) or "none"))
        lines.append("  labels: " + (", ".join(own) or "none"))
    workspace = sorted((lb["name"] for lb in labels if lb.get("team") is None), key=str.casefold)
    lines.append("workspace labels (any team): " + (", ".join(workspace) or "none"))
    return "\n".join(lines)


def issue_text(issue: dict[str, Any], comments: list[dict[str, Any]]) -> str:
    """An issue in full: its facts, then its title and description, then its comments, each as untrusted data."""
    ident = issue["identifier"]
    team = issue.get("team") or {}
    labels = ", ".join(lb["name"] for lb in (issue.get("labels") or {}).get("nodes", [])) or "none"
    facts = [
        f"{ident} · {(issue.get('state') or {}).get('name', '?')} · team {team.get('key')} ({team.get('name')})",
        f"priority: {priority_name(issue.get('priority'))} · assignee: {_person(issue.get('assignee'), 'unassigned')}"
        f" · labels: {labels}",
        f"url: {issue['url']}",
        f"created {issue.get('createdAt')} · updated {issue.get('updatedAt')}",
    ]
    description = (issue.get("description") or "").strip() or "(no description)"
    body = untrusted(f"linear issue {ident}", f"title: {issue['title']}\n\n{description}")
    if not comments:
        return "\n".join([*facts, body, "comments: none"])
    written = "\n\n".join(
        f"— {_person(c.get('user'), 'an integration')} at {c.get('createdAt')}:\n{c['body']}" for c in comments
    )
    return "\n".join([*facts, body, f"comments ({len(comments)}):", untrusted(f"linear comments on {ident}", written)])
