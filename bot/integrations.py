"""Which of the org's systems labbot reaches — Notion, Linear, Datadog — and where its cross-links go.

An integration is on when its credentials are in the environment (``NOTION_TOKEN``; ``LINEAR_API_KEY``;
``DD_API_KEY`` and ``DD_APP_KEY``): its built-in MCP server is then offered to the agents, and ``/lab help`` says
which are on and how to turn on the others. labbot.toml says where labbot itself writes::

    [notion]
    reports_parent = "https://www.notion.so/acme/Experiments-1f2e3d4c5b6a79880796a5b4c3d2e1f0"  # or a bare id
    reports_parent_type = "page"      # or "data_source": a report is then a row of that database

    [linear]
    team = "ENG"                      # key or name of the team "File incident" files pages in
    labels = ["incident"]             # label names added to every filed incident

Part of bot/ (the composition root reads it once at start-up); pure data.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from labbot.agents.fleet.demo_model import DEMO_MODEL
from labbot.common.errors import BadRequest

__all__ = ["Integrations"]

_NOTION_KEYS = ("reports_parent", "reports_parent_type")
_LINEAR_KEYS = ("team", "labels")
_PARENT_TYPES = ("page", "data_source")


def _table(config: Mapping[str, Any], name: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    table = config.get(name) or {}
    if not isinstance(table, Mapping):
        raise BadRequest(f"labbot.toml: [{name}] must be a table, e.g. [{name}] then {keys[0]} = ...")
    for key in table:
        if key not in keys:
            close = difflib.get_close_matches(str(key), keys, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise BadRequest(f"labbot.toml: [{name}] has no setting {key!r}{hint}; the settings are: {', '.join(keys)}")
    return table


def _text(table: Mapping[str, Any], section: str, key: str) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"labbot.toml: [{section}] {key} must be a non-empty string, not {value!r}")
    return value.strip()


@dataclass(frozen=True)
class Integrations:
    notion: bool = False
    linear: bool = False
    datadog: bool = False
    notion_reports_parent: str | None = None
    notion_reports_parent_type: str = "page"
    linear_team: str | None = None
    linear_labels: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str], config: Mapping[str, Any]) -> Integrations:
        notion = _table(config, "notion", _NOTION_KEYS)
        linear = _table(config, "linear", _LINEAR_KEYS)
        parent_type = _text(notion, "notion", "reports_parent_type") or "page"
        if parent_type not in _PARENT_TYPES:
            raise BadRequest(
                f"labbot.toml: [notion] reports_parent_type {parent_type!r} is not one of {', '.join(_PARENT_TYPES)}"
            )
        labels = linear.get("labels") or []
        if not isinstance(labels, list) or not all(isinstance(x, str) and x.strip() for x in labels):
            raise BadRequest(f'labbot.toml: [linear] labels must be a list of names, e.g. ["incident"], not {labels!r}')
        return cls(
            notion=bool(env.get("NOTION_TOKEN", "").strip()),
            linear=bool(env.get("LINEAR_API_KEY", "").strip()),
            datadog=bool(env.get("DD_API_KEY", "").strip() and env.get("DD_APP_KEY", "").strip()),
            notion_reports_parent=_text(notion, "notion", "reports_parent"),
            notion_reports_parent_type=parent_type,
            linear_team=_text(linear, "linear", "team"),
            linear_labels=tuple(x.strip() for x in labels),
        )

    @property
    def servers(self) -> tuple[str, ...]:
        """The built-in vendor MCP servers that are on."""
        return tuple(n for n, on in (("notion", self.notion), ("linear", self.linear), ("datadog", self.datadog)) if on)

    @property
    def reports(self) -> bool:
        """``/lab report`` can write: Notion is on and labbot.toml says where reports go."""
        return self.notion and self.notion_reports_parent is not None

    @property
    def incidents(self) -> bool:
        """Pages have a File incident button: Linear is on and labbot.toml names the team."""
        return self.linear and self.linear_team is not None

    def agent_notes(self) -> str:
        """What the agents are told of where this lab keeps things (a system block): empty when nothing is set."""
        notes = []
        if self.reports:
            notes.append(
                f"Run reports and write-ups go in Notion under {self.notion_reports_parent} (notion__create_page "
                f'with parent_id="{self.notion_reports_parent}", parent_type="{self.notion_reports_parent_type}").'
            )
        if self.incidents:
            labels = f" with the labels {', '.join(self.linear_labels)}" if self.linear_labels else ""
            notes.append(f"Tickets and incidents go in Linear, team {self.linear_team}{labels} (linear__create_issue).")
        return ("Where this lab keeps things:\n" + "\n".join(f"- {n}" for n in notes)) if notes else ""

    def help_lines(self, command: str = "/lab", *, agents: str = "") -> list[str]:
        """``/lab help``'s footer: what is on, and how to turn on the rest."""
        on = "on"
        notion = (
            f"on — `{command} report RUN` writes run reports"
            if self.reports
            else (
                f"{on}; set `[notion] reports_parent` in labbot.toml for `{command} report`" if self.notion else "off"
            )
        )
        linear = (
            f"on — pages can be filed as incidents in {self.linear_team}"
            if self.incidents
            else (f"{on}; set `[linear] team` in labbot.toml for File incident" if self.linear else "off")
        )
        lines = [
            *([agents] if agents else []),
            "*Integrations* (agents reach them through MCP):",
            f"• Notion: {notion}" + ("" if self.notion else " (set NOTION_TOKEN)"),
            f"• Linear: {linear}" + ("" if self.linear else " (set LINEAR_API_KEY)"),
            "• Datadog: " + ("on" if self.datadog else "off (set DD_API_KEY and DD_APP_KEY; DD_SITE for your region)"),
        ]
        return lines


def agents_line(model_name: str | None, command: str = "/lab") -> str:
    """Whether the agents answer, said where a newcomer looks (``/lab help``, App Home, the console's banner):
    ``model_name`` is the configured model, None when no key is set."""
    if model_name is None:
        return (
            "*Agents*: off — no model is configured, so mentions, the assistant tab and "
            f"`{command} ask` say how to turn them on (set ANTHROPIC_API_KEY and restart labbot)"
        )
    if model_name == DEMO_MODEL:
        return (
            f"*Agents*: on the scripted demo model ({DEMO_MODEL}: its words are a script's, its tool calls real; "
            f"set ANTHROPIC_API_KEY for a real one) — `{command} ask`, @labbot in a thread, or the assistant tab"
        )
    return f"*Agents*: on ({model_name}) — `{command} ask`, @labbot in a thread, or the assistant tab"
