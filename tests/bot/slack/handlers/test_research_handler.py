"""``/lab research QUESTION`` through its handler against the Slack emulator, over the real research and experiment
services and the real fleet (the Anthropic fake answering as the model): the question opened in a thread of its own,
owned by who asked, the researcher answering there — and the thread's later replies going to the researcher too;
without a model, it says so and opens nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from experiment_lab import Lab
from fakes.anthropic import FakeAnthropic, text
from fakes.slack import SlackFake, started
from sqlalchemy import select

from labbot.agents.fleet.fleet import Fleet
from labbot.agents.fleet.model import NO_MODEL_MESSAGE, ModelSettings
from labbot.agents.fleet.roles import load_roles
from labbot.agents.fleet.runtime import AgentLimiter, AgentRuntime
from labbot.agents.fleet.tools import ToolCall, ToolResult, ToolSpec
from labbot.bot.commands import LAB, Parsed, parse
from labbot.bot.config import SlackSettings
from labbot.bot.integrations import Integrations
from labbot.bot.slack.agent_threads import AgentThreads
from labbot.bot.slack.handlers import Asker, SlackDeps, dispatch
from labbot.bot.slack.research_threads import ResearchThreads
from labbot.bot.slack.thread_plan import Cadence
from labbot.bot.slack.threads import RunThreads
from labbot.storage.models import AgentSession
from labbot.training.claims import StoreSources
from labbot.training.research.service import ResearchService

ALICE = "U0ALICE001"
QUESTION = "which lr minimises tiny-lm's loss at 300 steps within 2 cpu-hours?"
RESEARCHER = load_roles()["researcher"].system


class NoTools:
    def tools(self) -> list[ToolSpec]:
        return []

    async def call(self, call: ToolCall) -> ToolResult:
        return ToolResult("no tools here", is_error=True)


@pytest.fixture
def slack() -> Iterator[SlackFake]:
    with started() as fake:
        yield fake


def deps_for(lab: Lab, slack: SlackFake, fleet: Fleet | None) -> tuple[SlackDeps, ResearchService]:
    client = slack.async_client()
    research = ResearchService(lab.db, lab.experiments, StoreSources(lab.telemetry.series, lab.experiments.get))
    deps = SlackDeps(
        client, lab.service, RunThreads(client, lab.service, lab.telemetry, Cadence()), SlackSettings(),
        conversations=AgentThreads(client, lab.db, fleet) if fleet is not None else None,
        research_threads=ResearchThreads(client, research, lab.experiments, Integrations(), None),
    )  # fmt: skip
    return deps, research


def command(deps: SlackDeps, slack: SlackFake, text_: str) -> None:
    parsed = parse(text_, LAB)
    assert isinstance(parsed, Parsed), parsed
    asyncio.run(dispatch(deps, parsed, Asker(ALICE, slack.default_channel, "t-1")))


def test_research_opens_the_question_in_its_thread_and_the_researcher_answers_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slack: SlackFake
) -> None:
    lab = Lab(tmp_path, monkeypatch)
    with FakeAnthropic() as fake:
        fake.script(text("I will read the lab's findings on tiny-lm's learning rate first."), text("Noted."))
        env = {"ANTHROPIC_API_KEY": fake.api_key, "ANTHROPIC_BASE_URL": fake.base_url}

        async def tools_for(role: str) -> NoTools:
            return NoTools()

        async def go() -> None:
            runtime = AgentRuntime.from_settings(ModelSettings.from_env(env), limiter=AgentLimiter())
            try:
                deps, research = deps_for(lab, slack, Fleet(lab.db, runtime, tools_for))
                parsed = parse(f"research {QUESTION}", LAB)
                assert isinstance(parsed, Parsed)
                await dispatch(deps, parsed, Asker(ALICE, slack.default_channel, "t-1"))
                [q] = research.questions()
                assert q["owner"] == ALICE and q["question"] == QUESTION and q["status"] == "planning"
                # a reply in the thread goes to the researcher again (the session keeps its role)
                assert deps.conversations is not None
                await deps.conversations.answer(user=ALICE, text="make it 1 cpu-hour", channel=q["channel"],
                                                thread_ts=q["thread_ts"])  # fmt: skip
            finally:
                await runtime.aclose()

        asyncio.run(go())
        first, second = fake.requests
    [q] = ResearchService(lab.db, lab.experiments, StoreSources(lab.telemetry.series, lab.experiments.get)).questions()
    root = slack.messages(slack.default_channel)[0]
    assert root.ts == q["thread_ts"] and f"research question `{q['id']}`" in root.text
    said = slack.texts(slack.default_channel, thread_ts=q["thread_ts"])
    assert any("read the lab's findings" in t for t in said)
    for request in (first, second):
        assert request.system[0]["text"] == RESEARCHER
    assert f"research_id={q['id']!r}" in str(first.messages[0]["content"])
    with lab.db.session() as s:
        [session] = s.scalars(select(AgentSession).where(AgentSession.thread_ts == q["thread_ts"]))
        assert session.role == "researcher" and session.owner == ALICE


def test_without_a_model_research_says_so_and_opens_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slack: SlackFake
) -> None:
    lab = Lab(tmp_path, monkeypatch)
    deps, research = deps_for(lab, slack, None)
    command(deps, slack, f"research {QUESTION}")
    assert research.questions() == []
    assert NO_MODEL_MESSAGE in slack.ephemeral_messages(slack.default_channel, ALICE)[-1].text
