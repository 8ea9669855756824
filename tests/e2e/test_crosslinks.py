"""User stories of the Notion/Linear/Datadog issue, end to end: a page filed in Linear from its File incident button
(linked both ways), `/lab report RUN` written to Notion after an approval, and — the issue's done-when — an agent
asked in a run's thread to "write this run up in Notion and open a Linear ticket for the divergence at step 300",
which after two approvals leaves both, with their links in the thread.

Real `labbot serve`, real Ray head, the built-in notion and linear MCP servers in process; Slack, Anthropic, Notion
and Linear are fakes at the HTTP edge, each checking what labbot sends against the vendor's published spec."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agent_story import TOML
from fakes.anthropic import FakeAnthropic, SeenRequest, Step, text, tool_uses
from fakes.linear import API_KEY as LINEAR_KEY
from fakes.linear import LinearFake
from fakes.notion import NotionFake
from fakes.slack import SlackFake
from slack_driver import OWNER, SlackSide, slack_env
from support import Serve, wait_for

from labbot.bot.slack.payloads import Workspace, button_click
from labbot.training.ray_cluster import RayConnection

OTHER = "U0BOB00001"
REPORTS = "1f2e3d4c5b6a79880796a5b4c3d2e1f0"  # the Notion page reports go under
CROSSLINK_TOML = f"""
[notion]
reports_parent = "{REPORTS}"

[linear]
team = "ENG"
labels = ["incident"]
"""
WRITTEN_UP = "Written up in Notion and filed in Linear"


@dataclass
class Lab:
    slack: SlackSide
    notion: NotionFake
    linear: LinearFake
    anthropic: FakeAnthropic


def the_model(req: SeenRequest) -> Step:
    """Asked to write the run up and file the divergence: both writes in one turn, then the links it got back."""
    run_id = re.search(r'"id": "(\w+)"', str(req.system)).group(1)  # type: ignore[union-attr]
    parent = re.search(r'parent_id="(\w+)"', str(req.system)).group(1)  # type: ignore[union-attr]  # the lab's notes
    team = re.search(r"Linear, team (\w+)", str(req.system)).group(1)  # type: ignore[union-attr]
    last = req.messages[-1]
    results = (
        [b for b in last["content"] if b.get("type") == "tool_result"] if isinstance(last["content"], list) else []
    )
    if results:
        said = " ".join(json.dumps(r["content"]) for r in results)
        links = re.findall(r"https?://[^\s\"\\]+", said)
        return text(f"{WRITTEN_UP}: " + " and ".join(links))
    return tool_uses(
        (
            "notion__create_page",
            {
                "parent_id": parent,
                "title": f"Run {run_id}: divergence at step 300",
                "markdown": "## What happened\n\nThe loss **diverged** at step 300.\n\n- lr 3e-3\n- batch 512",
            },
        ),
        (
            "linear__create_issue",
            {
                "team": team,
                "title": f"Run {run_id} diverged at step 300",
                "description": "Loss went to NaN at step 300; lr 3e-3 is likely too high.",
                "labels": ["incident"],
                "priority": 2,
            },
        ),
    )


@pytest.fixture
def lab(tmp_path: Path, ray_head: RayConnection) -> Iterator[Lab]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "labbot.toml").write_text(TOML + CROSSLINK_TOML)
    with FakeAnthropic() as anthropic, NotionFake() as notion, LinearFake() as linear:
        anthropic.answer_with(the_model)
        notion.add_page(REPORTS, "Experiment reports")
        linear.add_team("ENG", "Engineering", labels=("incident",))
        fake = SlackFake(users={OWNER: "alice", OTHER: "bob"})
        fake.start()
        env = {
            **slack_env(fake, home / "labbot.toml"),
            "ANTHROPIC_API_KEY": anthropic.api_key,
            "ANTHROPIC_BASE_URL": anthropic.base_url,
            "NOTION_TOKEN": notion.token,
            "NOTION_API_URL": notion.url,
            "LINEAR_API_KEY": LINEAR_KEY,
            "LINEAR_API_URL": linear.url,
        }
        serve = Serve(home / "state", ray_address=ray_head.address, ray_token=ray_head.token, extra_env=env).start()
        try:
            yield Lab(SlackSide(fake, serve), notion, linear, anthropic)
            fake.check_against_spec()
            assert notion.violations == [] and linear.violations == []
        finally:
            serve.stop()
            fake.stop()


def buttons(message: Any) -> dict[str, str]:
    return {el["action_id"]: el["value"] for b in message.blocks if b["type"] == "actions" for el in b["elements"]}


def press(slack: SlackSide, message: Any, action_id: str, value: str, user: str = OWNER) -> None:
    ws = Workspace(team_id=slack.ws.team_id, app_id=slack.ws.app_id, channel=message.channel)
    body = button_click(ws, user=user, action_id=action_id, value=value, message_ts=message.ts)
    assert slack.post(body).status_code == 200


def approval_prompts(slack: SlackSide, run_id: str) -> list[Any]:
    return [m for m in slack.thread(run_id) if "approval_approve" in json.dumps(m.blocks)]


def audit(slack: SlackSide) -> list[dict[str, Any]]:
    with slack.serve.client() as api:
        return list(api.get("/audit").json()["audit"])


def test_file_incident_opens_a_linear_issue_linked_both_ways(lab: Lab) -> None:
    slack = lab.slack
    run_id = slack.launched("launch crasher")
    page = wait_for(
        lambda: next((m for m in slack.page_messages(run_id=run_id) if "page_file" in buttons(m)), None),
        timeout=60,
        what="the failed page with its File incident button",
    )
    page_id = buttons(page)["page_file"]
    press(slack, page, "page_file", page_id, user=OTHER)  # neither the run's owner nor an admin
    wait_for(lambda: any("only the run's owner" in t for t in slack.ephemerals(OTHER)), timeout=15, what="refusal")
    assert lab.linear.issues == []

    press(slack, page, "page_file", page_id)
    issue = wait_for(lambda: lab.linear.issues, timeout=30, what="the Linear issue")[0]
    assert issue.team.key == "ENG" and [label.name for label in issue.labels] == ["incident"]
    assert issue.priority == 2 and "failed" in issue.title and run_id in issue.title
    assert f"labbot page `{page_id}`" in issue.description and "Slack thread: http" in issue.description
    assert "illegal memory access" in issue.description  # the log tail came along

    linked = wait_for(
        lambda: (slack.pages(run=run_id, all="1")[0].get("links") or {}).get("linear"), timeout=15, what="the link"
    )
    assert linked["identifier"] == issue.identifier and linked["url"] == issue.url and linked["by"] == OWNER
    shown = wait_for(
        lambda: [m for m in slack.page_messages(run_id=run_id) if issue.identifier in json.dumps(m.blocks)],
        timeout=15,
        what="the page re-rendered with its Linear link",
    )
    assert all("page_file" not in buttons(m) for m in shown)
    wait_for(lambda: slack.said(run_id, f"filed page `{page_id}` in Linear"), timeout=15, what="the note")
    [call] = [c for c in audit(slack) if c["tool"] == "linear__create_issue"]
    assert call["approver"] == OWNER and call["outcome"] == "ok"


def test_lab_report_writes_the_runs_notion_page_after_an_approval(lab: Lab) -> None:
    slack = lab.slack
    run_id = slack.launched("launch sleeper")
    wait_for(lambda: slack.run(run_id)["status"] == "running", timeout=60, what="the run to start")
    assert slack.command(f"report {run_id}", user=OTHER).status_code == 200  # anyone may ask; the owner approves
    prompt = wait_for(lambda: approval_prompts(slack, run_id), timeout=30, what="the approval prompt")[0]
    assert "notion__create_page" in json.dumps(prompt.blocks) and lab.notion.created_pages() == []
    approval_id = buttons(prompt)["approval_approve"]
    press(slack, prompt, "approval_approve", approval_id, user=OTHER)
    wait_for(lambda: any("only" in t for t in slack.ephemerals(OTHER)), timeout=15, what="the asker cannot approve")
    press(slack, prompt, "approval_approve", approval_id)
    note = wait_for(lambda: slack.said(run_id, "Notion report:"), timeout=30, what="the report's link")
    [page] = lab.notion.created_pages()
    assert page.parent_id == REPORTS and run_id in page.title
    assert page.url in note.text
    markdown = lab.notion.page_markdown(page.id)
    assert "## Summary" in markdown and "## Config" in markdown and "slack" in markdown.lower()


def test_an_agent_writes_the_run_up_in_notion_and_files_linear_after_two_approvals(lab: Lab) -> None:
    slack = lab.slack
    run_id = slack.launched("launch sleeper")
    wait_for(lambda: slack.run(run_id)["status"] == "running", timeout=60, what="the run to start")
    slack.reply(run_id, "write this run up in Notion and open a Linear ticket for the divergence at step 300")
    prompts = wait_for(
        lambda: len(approval_prompts(slack, run_id)) == 2 and approval_prompts(slack, run_id),
        timeout=30,
        what="two approval prompts",
    )
    assert lab.notion.created_pages() == [] and lab.linear.issues == [], "nothing is written before the approvals"
    for prompt in prompts:
        press(slack, prompt, "approval_approve", buttons(prompt)["approval_approve"])
    answer = wait_for(lambda: slack.said(run_id, WRITTEN_UP), timeout=60, what="the agent's answer")
    [page] = lab.notion.created_pages()
    [issue] = lab.linear.issues
    assert page.url in answer.text and issue.url in answer.text
    assert "diverged" in lab.notion.page_markdown(page.id) and issue.title.endswith("diverged at step 300")
    approvers = {c["tool"]: c["approver"] for c in audit(slack)}
    assert approvers["notion__create_page"] == OWNER and approvers["linear__create_issue"] == OWNER
