"""User story of the agents issue, end to end: in a run's Slack thread a researcher asks "why is this run slow?";
the agent (a scripted model behind the real SDK) reads the run's metrics and logs through the `lab` server and the
recent commits through `codebase`, answers in the thread; asked to stop the run, it waits for Approve before it does.

Real `labbot serve`, real Ray head, real built-in MCP servers; the Slack Web API and Anthropic fakes at the edge."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_story import STOPPED_ANSWER, TOML, commit_history, model
from fakes.anthropic import FakeAnthropic
from slack_driver import OWNER, SlackSide, agents_lab
from support import wait_for

from labbot.bot.slack.payloads import Workspace, button_click
from labbot.training.ray_cluster import RayConnection

OTHER = "U0BOB00001"


@pytest.fixture
def lab(tmp_path: Path, ray_head: RayConnection) -> Iterator[tuple[SlackSide, FakeAnthropic]]:
    repo = commit_history(tmp_path / "repo")
    users = {OWNER: "alice", OTHER: "bob"}
    with agents_lab(tmp_path, ray_head, toml=TOML, codebase=repo, model=model, users=users) as lab:
        yield lab


def test_why_is_this_run_slow_then_stop_it_with_approval(lab: tuple[SlackSide, FakeAnthropic]) -> None:
    slack, anthropic = lab
    run_id = slack.launched("launch sleeper")
    wait_for(lambda: slack.run(run_id)["status"] == "running", timeout=60, what="the run to start")

    slack.reply(run_id, "why is this run slow?")
    wait_for(lambda: slack.said(run_id, "data loader starves"), timeout=60, what="the agent's answer in the thread")
    called = [
        b["name"]
        for r in anthropic.requests
        for m in r.messages
        for b in m.get("content") or []
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    assert {"lab__run_metrics", "lab__run_logs", "codebase__git_log"} <= set(called)
    results = anthropic.requests[1].tool_results()
    assert not any(r.get("is_error") for r in results), results
    assert any("bigger batches" in json.dumps(r["content"]) for r in results), "the commit came from codebase"
    assert run_id in json.dumps(anthropic.requests[0].system), "the run's state is in the session's context"

    slack.reply(run_id, "ok, please stop it")
    prompt = wait_for(lambda: slack.prompt(run_id), timeout=60, what="the approval prompt in the thread")
    assert "lab__stop_run" in json.dumps(prompt.blocks)
    assert slack.run(run_id)["status"] == "running", "nothing stops before a human approves"
    approval_id = next(
        el["value"] for b in prompt.blocks if b["type"] == "actions" for el in b["elements"]
        if el["action_id"] == "approval_approve"
    )  # fmt: skip
    ws = Workspace(team_id=slack.ws.team_id, app_id=slack.ws.app_id, channel=slack.ws.channel)
    stranger = button_click(ws, user=OTHER, action_id="approval_approve", value=approval_id, message_ts=prompt.ts)
    assert slack.post(stranger).status_code == 200  # not the run's owner, not an admin: refused
    wait_for(lambda: any("only" in t for t in slack.ephemerals(OTHER)), timeout=15, what="the refusal")
    assert slack.run(run_id)["status"] == "running"
    owner = button_click(ws, user=OWNER, action_id="approval_approve", value=approval_id, message_ts=prompt.ts)
    assert slack.post(owner).status_code == 200
    wait_for(lambda: slack.run(run_id)["status"] == "stopped", timeout=30, what="the run stopped after Approve")
    wait_for(lambda: slack.said(run_id, STOPPED_ANSWER), timeout=30, what="the agent's final answer")
    settled = slack.fake.message(slack.ws.channel, prompt.ts)
    assert "approved" in json.dumps(settled.blocks) and "approval_approve" not in json.dumps(settled.blocks)


def test_a_new_page_gets_a_diagnosis_from_the_investigator_in_the_runs_thread(
    lab: tuple[SlackSide, FakeAnthropic],
) -> None:
    slack, anthropic = lab
    run_id = slack.launched("launch crasher")
    wait_for(lambda: slack.pages(run=run_id), timeout=60, what="the failed page")
    wait_for(lambda: slack.said(run_id, "Diagnosis:"), timeout=60, what="the investigator's diagnosis in the thread")
    asked = [r for r in anthropic.requests if "You are labbot's investigator" in str(r.system)]
    assert asked, "the investigator role answered"
    logs = [r for r in asked if r.tool_results()]
    assert logs and "illegal memory access" in json.dumps(logs[0].tool_results()), "it read the log tail"
    assert all(not name.startswith("lab__stop") for r in asked for name in r.tool_names), "it may not act"
