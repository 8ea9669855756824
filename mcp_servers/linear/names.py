"""What a model writes, turned into what Linear needs: an issue reference into an id or identifier, a team key or
name into a team, label and state names into ids, a priority checked. Pure functions over the nodes Linear answered
(:data:`~labbot.mcp_servers.linear.queries.TEAMS`, :data:`~labbot.mcp_servers.linear.queries.LABELS`); a name that
matches nothing is a ``ToolError`` that lists the names that would match, so the model can correct itself in one step.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["PRIORITIES", "check_priority", "find_labels", "find_state", "find_team", "issue_ref"]

PRIORITIES = {0: "no priority", 1: "urgent", 2: "high", 3: "medium", 4: "low"}
"""Linear's priority numbers and what they mean."""

_IDENTIFIER = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)-(\d+)$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def issue_ref(text: str) -> str:
    """What ``issue(id:)`` takes, from an identifier (``eng-123`` → ``ENG-123``), an issue URL
    (``https://linear.app/acme/issue/ENG-123/some-title``) or an issue id (a UUID)."""
    ref = text.strip()
    if ref.startswith(("http://", "https://")):
        parts = [p for p in urlsplit(ref).path.split("/") if p]
        if "issue" in parts and parts.index("issue") + 1 < len(parts):
            ref = parts[parts.index("issue") + 1]
    if match := _IDENTIFIER.match(ref):
        return f"{match.group(1).upper()}-{match.group(2)}"
    if _UUID.match(ref):
        return ref.lower()
    raise ToolError(
        f"{text!r} is not a Linear issue: give its identifier (e.g. ENG-123), its URL "
        "(https://linear.app/<workspace>/issue/ENG-123/...) or its id"
    )


def _fold(name: str) -> str:
    return " ".join(name.split()).casefold()


def _listing(names: list[str]) -> str:
    return ", ".join(names) if names else "none"


def find_team(teams: list[dict[str, Any]], wanted: str) -> dict[str, Any]:
    """The team whose key or name is ``wanted`` (case-insensitive), else a ToolError listing the teams."""
    for team in teams:
        if _fold(wanted) in (_fold(team["key"]), _fold(team["name"])):
            return team
    known = [f"{t['key']} ({t['name']})" for t in teams]
    raise ToolError(f"there is no Linear team {wanted!r}: the teams are {_listing(known)}")


def find_labels(labels: list[dict[str, Any]], names: list[str], team: dict[str, Any]) -> list[str]:
    """The ids of the labels called ``names`` that an issue of ``team`` may carry (the team's own labels and the
    workspace's); a team's label wins over a workspace label of the same name. ToolError lists the available ones
    when any name matches none."""
    usable = [lb for lb in labels if lb.get("team") is None or lb["team"].get("id") == team["id"]]
    usable.sort(key=lambda lb: lb.get("team") is None)  # the team's own first
    ids: list[str] = []
    unknown: list[str] = []
    for name in names:
        match = next((lb for lb in usable if _fold(lb["name"]) == _fold(name)), None)
        if match is None:
            unknown.append(name)
        elif match["id"] not in ids:
            ids.append(match["id"])
    if unknown:
        available = sorted({lb["name"] for lb in usable}, key=str.casefold)
        raise ToolError(
            f"team {team['key']} has no label {', '.join(repr(n) for n in unknown)}: the labels its issues can "
            f"have are {_listing(available)}"
        )
    return ids


def find_state(team: dict[str, Any], wanted: str, issue: str) -> dict[str, Any]:
    """The workflow state of ``team`` called ``wanted`` (case-insensitive), else a ToolError listing its states."""
    states = sorted(team["states"]["nodes"], key=lambda s: s.get("position", 0))
    for state in states:
        if _fold(state["name"]) == _fold(wanted):
            return state
    raise ToolError(
        f"{issue} is in team {team['key']}, which has no state {wanted!r}: its states are "
        f"{_listing([s['name'] for s in states])}"
    )


def check_priority(priority: int | None) -> None:
    """ToolError unless ``priority`` is None or one of Linear's 0–4."""
    if priority is not None and priority not in PRIORITIES:
        meanings = ", ".join(f"{n} ({m})" for n, m in PRIORITIES.items())
        raise ToolError(f"priority {priority} is not a Linear priority: use {meanings}")
