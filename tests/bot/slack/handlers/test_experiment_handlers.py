"""``/lab sweep``, ``/lab experiments`` and ``/lab experiment`` through their handlers against the Slack emulator
(every Web API call checked against Slack's spec when the test ends), over the real experiment service, controller,
Optuna study and SQLite (Ray the recording double): the card posted as the thread's root with the plan inside, kept
current as trials run and are pruned, and at the end the ranking with intervals, the verdict and two plots; only the
owner (or an admin) stops it; bad input an ephemeral refusal, nothing made."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from experiment_lab import Lab
from fakes.slack import SlackFake, started

from labbot.bot.commands import LAB, Parsed, parse
from labbot.bot.config import SlackSettings
from labbot.bot.slack.experiment_threads import ExperimentThreads
from labbot.bot.slack.handlers import Asker, SlackDeps, dispatch
from labbot.bot.slack.thread_plan import Cadence
from labbot.bot.slack.threads import RunThreads

ALICE, BOB, ADMIN = "U0ALICE001", "U0BOB00001", "U0ADMIN001"


@pytest.fixture
def slack() -> Iterator[SlackFake]:
    with started() as fake:
        yield fake


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slack: SlackFake) -> tuple[SlackDeps, Lab, list[int]]:
    lab = Lab(tmp_path, monkeypatch)
    client = slack.async_client()
    kicks: list[int] = []
    deps = SlackDeps(
        client, lab.service, RunThreads(client, lab.service, lab.telemetry, Cadence()),
        SlackSettings(admins=frozenset({ADMIN})), experiments=lab.experiments,
        experiment_threads=ExperimentThreads(client, lab.experiments), tick_soon=lambda: kicks.append(1),
    )  # fmt: skip
    return deps, lab, kicks


def command(deps: SlackDeps, slack: SlackFake, text: str, user: str = ALICE) -> None:
    parsed = parse(text, LAB)
    assert isinstance(parsed, Parsed), parsed
    asyncio.run(dispatch(deps, parsed, Asker(user, slack.default_channel, "t-1")))


def upkeep(deps: SlackDeps) -> None:
    assert deps.experiment_threads is not None
    asyncio.run(deps.experiment_threads.tick())


def card_text(slack: SlackFake) -> str:
    [card] = slack.messages(slack.default_channel)
    return " ".join(b.get("text", {}).get("text", "") for b in card.blocks or [])


def test_a_sweep_from_slack_to_its_answer_in_the_thread(
    world: tuple[SlackDeps, Lab, list[int]], slack: SlackFake
) -> None:
    deps, lab, kicks = world
    command(deps, slack, "sweep toy lr=1e-4,3e-3 width=16,64 --metric loss --search grid --seeds 2 --concurrency 2")
    [card] = slack.messages(slack.default_channel)
    assert "experiment `x" in card_text(slack) and "— running" in card_text(slack) and kicks == [1]
    [_root, plan] = slack.messages(slack.default_channel, thread_ts=card.ts)
    assert "4 trials × 2 seed(s), 2 at a time" in plan.text and "projected cost" in plan.text
    lab.tick()
    upkeep(deps)
    assert "2 running" in card_text(slack) and "#0" in card_text(slack)
    for _ in range(100):
        lab.train()
        lab.tick()
        upkeep(deps)
        if "— done" in card_text(slack):
            break
    text = card_text(slack)
    assert "4 done" in text and "best so far: #" in text
    replies = slack.messages(slack.default_channel, thread_ts=card.ts)
    summary = " ".join(" ".join(b.get("text", {}).get("text", "") for b in m.blocks or []) for m in replies[2:])
    assert "95% INTERVAL" in summary and "best vs runner-up: better:" in summary
    files = [f for m in replies for f in m.files or []]
    assert sorted(f["name"].split("-", 1)[1] for f in files) == ["params.png", "trials.png"]
    assert all(slack.file_bytes(f["id"]).startswith(b"\x89PNG") for f in files)
    upkeep(deps)  # nothing posted twice
    assert len(slack.messages(slack.default_channel, thread_ts=card.ts)) == len(replies)


def test_only_the_owner_or_an_admin_stops_it(world: tuple[SlackDeps, Lab, list[int]], slack: SlackFake) -> None:
    deps, lab, _ = world
    command(deps, slack, "sweep toy lr=1e-4,3e-3 --metric loss --search grid")
    [exp] = lab.experiments.experiments()
    command(deps, slack, f"experiment {exp['id']} stop", user=BOB)
    assert f"only <@{ALICE}>" in slack.ephemeral_messages(slack.default_channel, BOB)[-1].text
    assert lab.experiments.get(exp["id"])["status"] == "running"
    command(deps, slack, f"experiment {exp['id']} pause", user=ADMIN)
    assert lab.experiments.get(exp["id"])["status"] == "paused"
    command(deps, slack, f"experiment {exp['id']} stop")
    assert lab.experiments.get(exp["id"])["status"] == "stopped"


def test_bad_input_is_an_ephemeral_refusal_and_nothing_is_made(
    world: tuple[SlackDeps, Lab, list[int]], slack: SlackFake
) -> None:
    deps, lab, _ = world
    command(deps, slack, "sweep toy lr=loguniform(1e-4,1e-2) --metric val_loss")
    [said] = slack.ephemeral_messages(slack.default_channel, ALICE)
    assert "never reports 'val_loss'; it reports: loss, acc" in said.text
    command(deps, slack, "sweep toy lr=loguniform(1e-4,1e-2) --metric loss --plan")
    assert "projected cost" in slack.ephemeral_messages(slack.default_channel, ALICE)[-1].blocks[0]["text"]["text"]
    assert lab.experiments.experiments() == [] and slack.messages(slack.default_channel) == []
