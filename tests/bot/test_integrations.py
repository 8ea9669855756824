"""labbot.bot.integrations: which integrations are on (by their credentials), where cross-links go (labbot.toml), bad
settings refused with what would be right, and what /lab help says."""

from __future__ import annotations

from typing import Any

import pytest

from labbot.bot.integrations import Integrations
from labbot.common.errors import BadRequest

KEYS = {"NOTION_TOKEN": "ntn_" + "x" * 20, "LINEAR_API_KEY": "lin_api_" + "y" * 20}


def test_nothing_is_on_without_credentials_and_help_says_how() -> None:
    off = Integrations.from_env({}, {"notion": {"reports_parent": "abc"}, "linear": {"team": "ENG"}})
    assert off.servers == () and not off.reports and not off.incidents
    lines = "\n".join(off.help_lines())
    assert "Notion: off (set NOTION_TOKEN)" in lines and "Linear: off (set LINEAR_API_KEY)" in lines
    assert "DD_API_KEY and DD_APP_KEY" in lines


def test_credentials_turn_servers_on_and_labbot_toml_says_where_cross_links_go() -> None:
    env = {**KEYS, "DD_API_KEY": "k" * 32, "DD_APP_KEY": "a" * 40}
    config: dict[str, Any] = {
        "notion": {"reports_parent": " https://www.notion.so/acme/Runs-1f2e ", "reports_parent_type": "data_source"},
        "linear": {"team": "ENG", "labels": ["incident", "ml-infra"]},
    }
    on = Integrations.from_env(env, config)
    assert on.servers == ("notion", "linear", "datadog") and on.reports and on.incidents
    assert on.notion_reports_parent == "https://www.notion.so/acme/Runs-1f2e"
    assert (on.notion_reports_parent_type, on.linear_team, on.linear_labels) == (
        "data_source",
        "ENG",
        ("incident", "ml-infra"),
    )
    assert "`/lab report RUN`" in "\n".join(on.help_lines()) and "incidents in ENG" in "\n".join(on.help_lines())
    notes = on.agent_notes()
    assert 'parent_id="https://www.notion.so/acme/Runs-1f2e", parent_type="data_source"' in notes
    assert "team ENG with the labels incident, ml-infra" in notes
    half = Integrations.from_env({**KEYS, "DD_API_KEY": "k" * 32}, {})
    assert half.agent_notes() == ""  # no app key: Datadog stays off
    assert half.servers == ("notion", "linear") and not half.reports and not half.incidents
    assert "reports_parent" in "\n".join(half.help_lines()) and "[linear] team" in "\n".join(half.help_lines())


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"notion": {"report_parent": "x"}}, "did you mean 'reports_parent'"),
        ({"notion": {"reports_parent_type": "database"}}, "not one of page, data_source"),
        ({"notion": {"reports_parent": ""}}, "must be a non-empty string"),
        ({"linear": {"labels": "incident"}}, "must be a list of names"),
        ({"linear": "ENG"}, "[linear] must be a table"),
    ],
)
def test_bad_settings_say_what_would_be_right(config: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequest, match=message.replace("[", r"\[").replace("]", r"\]")):
        Integrations.from_env(KEYS, config)


def test_help_says_whether_the_agents_answer_and_how_to_turn_them_on() -> None:
    from labbot.bot.integrations import agents_line

    off = Integrations.from_env({}, {}).help_lines(agents=agents_line(None))
    assert off[0].startswith("*Agents*: off — no model is configured") and "set ANTHROPIC_API_KEY" in off[0]
    on = agents_line("claude-sonnet-4-5", "/ml")
    assert on == "*Agents*: on (claude-sonnet-4-5) — `/ml ask`, @labbot in a thread, or the assistant tab"
