"""``/lab capacity``, ``/lab priority`` and ``/lab launch`` over a ``[compute]`` cap through their handlers
(``labbot.bot.slack.handlers.runs``) against the Slack emulator (every Web API call checked against Slack's spec when
the test ends), a real RunService and SQLite, Ray the recording double of ``compute_support``: what each answers, to
whom, and that a refusal changes nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compute_support import RecordingRay, compute_service
from fakes.slack import SlackFake, started

from labbot.bot.commands import LAB, Parsed, parse
from labbot.bot.config import SlackSettings
from labbot.bot.slack.handlers import Asker, SlackDeps, dispatch
from labbot.bot.slack.thread_plan import Cadence
from labbot.bot.slack.threads import RunThreads
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest
from labbot.training.telemetry_store import TelemetryStore

ALICE, BOB, ADMIN = "U0ALICE001", "U0BOB00001", "U0ADMIN001"


@pytest.fixture
def slack() -> Iterator[SlackFake]:
    with started(users={ALICE: "alice", BOB: "bob", ADMIN: "admin"}) as fake:
        yield fake


class Lab:
    def __init__(self, deps: SlackDeps, service: RunService, ray: RecordingRay, slack: SlackFake) -> None:
        self.deps, self.service, self.ray, self.slack = deps, service, ray, slack

    def command(self, text: str, user: str = ALICE) -> None:
        parsed = parse(text, LAB)
        assert isinstance(parsed, Parsed), parsed
        asyncio.run(dispatch(self.deps, parsed, Asker(user, self.slack.default_channel, f"t-{text}-{user}")))

    def told(self, user: str = ALICE) -> list[Any]:
        return self.slack.ephemeral_messages(self.slack.default_channel, user)

    def launch(self, owner: str, **kwargs: Any) -> str:
        return str(self.service.launch(LaunchRequest(job="slow", owner=owner, **kwargs)).run["id"])


def make_lab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slack: SlackFake, compute: Any, admins: frozenset[str]
) -> Lab:
    service, ray = compute_service(tmp_path, monkeypatch, compute)
    client = slack.async_client()
    threads = RunThreads(client, service, TelemetryStore(service.db), Cadence())
    return Lab(SlackDeps(client, service, threads, SlackSettings(admins=admins)), service, ray, slack)


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slack: SlackFake) -> Lab:
    return make_lab(tmp_path, monkeypatch, slack, {"training": {"runs": 1, "cpus": 3}}, frozenset({ADMIN}))


def blocks_text(message: Any) -> str:
    return "\n".join(str(b.get("text", {}).get("text", "")) for b in message.blocks or [])


def test_capacity_shows_use_against_the_cap_who_uses_it_and_the_queue_in_order(lab: Lab) -> None:
    a = lab.launch(ALICE)
    b, c = lab.launch(BOB), lab.launch(ALICE)
    lab.command("capacity", user=BOB)
    [answer] = lab.told(BOB)
    assert answer.text == "capacity by purpose" and not lab.told(ALICE)  # to the asker alone
    text = blocks_text(answer)
    lines = text.strip("`\n").splitlines()
    assert lines[0] == "cluster: 16 CPUs, 4 GPUs (Ray's view); labbot's runs on it: 1 run, 2 CPUs, 0 GPUs"
    [row] = [line for line in lines if line.startswith("training ")]
    assert row.split() == ["training", "1/1", "2/3", "0/-", "2", ALICE, f"({a})"]
    assert lines[-3:] == [
        "queued, in order:",
        f"  training 1st: {b}  {BOB}  asks 2 CPUs",
        f"  training 2nd: {c}  {ALICE}  asks 2 CPUs",
    ]
    assert lab.slack.messages(lab.slack.default_channel) == []  # nothing posted for everyone


def test_capacity_without_compute_says_nothing_is_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slack: SlackFake
) -> None:
    lab = make_lab(tmp_path, monkeypatch, slack, None, frozenset())
    lab.launch(ALICE)
    lab.command("capacity")
    text = blocks_text(lab.told()[-1])
    assert "no [compute] caps are set: every launch goes to Ray at once" in text
    assert "training (no cap)" in text and "queued, in order" not in text


def test_a_non_admins_priority_is_refused_naming_the_admins_and_changes_nothing(lab: Lab) -> None:
    lab.launch(ALICE)
    b, c = lab.launch(ALICE), lab.launch(ALICE)
    lab.command(f"priority {c} 10")  # even the run's owner: the line is everyone's
    [refusal] = lab.told()
    assert refusal.text == (
        f":no_entry: only an admin can set the priority of run `{c}`: ask <@{ADMIN}> (`[roles] admins` in labbot.toml)"
    )
    assert lab.service.get(c)["priority"] == 0 and lab.service.get(c)["queue_position"] == 2
    assert lab.service.get(b)["queue_position"] == 1


def test_without_admins_a_priority_refusal_says_how_to_name_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slack: SlackFake
) -> None:
    lab = make_lab(tmp_path, monkeypatch, slack, {"training": {"runs": 1}}, frozenset())
    lab.launch(ALICE)
    queued = lab.launch(ALICE)
    lab.command(f"priority {queued} 5")
    assert "this labbot has none: add Slack user ids to `[roles] admins` in labbot.toml" in lab.told()[-1].text
    assert lab.service.get(queued)["priority"] == 0


def test_an_admin_moves_a_queued_run_ahead_and_the_card_says_who(lab: Lab) -> None:
    lab.launch(ALICE)
    b = lab.launch(ALICE)
    c = lab.launch(BOB)
    asyncio.run(lab.deps.threads.open_thread(lab.service.get(c), lab.slack.default_channel))
    lab.command(f"priority {c} 10", user=ADMIN)
    assert lab.told(ADMIN)[-1].text == f"run `{c}`: priority 10: now 1st in line for training"
    assert lab.service.get(c)["queue_position"] == 1 and lab.service.get(b)["queue_position"] == 2
    [card] = lab.slack.messages(lab.slack.default_channel)
    assert f"<@{ADMIN}> set the priority to 10" in json.dumps(card.blocks)
    assert lab.ray.submitted_ids == [lab.ray.submitted_ids[0]]  # a move in line starts nothing while A runs


def test_a_priority_on_a_run_on_ray_is_kept_but_changes_nothing_now(lab: Lab) -> None:
    a = lab.launch(ALICE)  # admitted: pending on Ray
    lab.command(f"priority {a} 3", user=ADMIN)
    assert lab.told(ADMIN)[-1].text == (
        f"run `{a}`: priority 3 kept, but it only orders the queue: the run is pending, so nothing changes now"
    )
    assert lab.service.get(a)["priority"] == 3


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("priority zzzzzz 1", "unknown run 'zzzzzz'"),
        ("priority {run} 5000", "must be a whole number from -1000 to 1000"),
        ("priority {run} high", "a whole number"),
    ],
)
def test_a_bad_priority_gets_what_was_wrong_and_the_usage(lab: Lab, text: str, says: str) -> None:
    lab.launch(ALICE)
    queued = lab.launch(ALICE)
    line = text.format(run=queued)
    parsed = parse(line, LAB)
    if isinstance(parsed, Parsed):
        lab.command(line, user=ADMIN)
        [answer] = lab.told(ADMIN)
        assert says in answer.text and "/lab priority RUN_ID PRIORITY" in blocks_text(answer)
    else:  # refused by the parser before any handler (Slack's ack carries it)
        assert says in parsed.message
    assert lab.service.get(queued)["priority"] == 0


def test_a_launch_over_the_cap_is_queued_or_with_no_queue_refused_with_the_numbers(lab: Lab) -> None:
    lab.launch(ALICE)
    lab.command("launch slow --no-queue", user=BOB)
    [refusal] = lab.told(BOB)
    assert refusal.text == (
        "not launched: training is at 1 of 1 run and 2 of 3 CPUs; this launch needs 2 CPUs; "
        "without --no-queue it would wait 1st in line"
    )
    assert len(lab.service.runs()) == 1 and not lab.slack.messages(lab.slack.default_channel)
    lab.command("launch slow", user=BOB)
    [queued] = [r for r in lab.service.runs() if r["status"] == "queued"]
    assert lab.told(BOB)[-1].text == (
        f":hourglass: run `{queued['id']}` is queued: training is at 1 of 1 run and 2 of 3 CPUs; "
        "this launch needs 2 CPUs; it waits 1st in line"
    )
    [card] = lab.slack.messages(lab.slack.default_channel)
    assert "1st in line for training" in json.dumps(card.blocks)
    assert len(lab.ray.submitted) == 1  # the queued run is a row, not a Ray job
