"""``/lab compare A B`` through its handler (``labbot.bot.slack.handlers.compare``) against the Slack emulator (every
Web API call checked against Slack's spec when the test ends), a real RunService, EvalService, SQLite and telemetry
store; Ray is never called. Two training runs: the table in the channel and the overlay plot in its thread; two eval
runs: the paired comparison; runs that cannot be compared: an ephemeral refusal naming what differs, nothing posted."""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from compare_runs import RL_JOB, noisy, training_run
from eval_services import finished, make_eval_service, make_suite
from eval_services import task_ids as tasks
from fakes.slack import SlackFake, started

from labbot.bot.commands import LAB, Parsed, parse
from labbot.bot.config import SlackSettings
from labbot.bot.slack.handlers import Asker, SlackDeps, dispatch
from labbot.bot.slack.thread_plan import Cadence
from labbot.bot.slack.threads import RunThreads
from labbot.evals.service import EvalService, pack
from labbot.training.registry import JobRegistry
from labbot.training.telemetry_store import TelemetryStore

ALICE = "U0ALICE001"


@pytest.fixture
def slack() -> Iterator[SlackFake]:
    with started() as fake:
        yield fake


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slack: SlackFake) -> tuple[SlackDeps, EvalService]:
    evals = make_eval_service(tmp_path, monkeypatch)
    evals.runs.registry = JobRegistry.from_config(RL_JOB)
    client = slack.async_client()
    threads = RunThreads(client, evals.runs, TelemetryStore(evals.runs.db), Cadence())
    return SlackDeps(client, evals.runs, threads, SlackSettings(), evals=evals), evals


def run(deps: SlackDeps, slack: SlackFake, text: str) -> None:
    parsed = parse(text, LAB)
    assert isinstance(parsed, Parsed), parsed
    asyncio.run(dispatch(deps, parsed, Asker(ALICE, slack.default_channel, "t-1")))


def test_two_training_runs_get_the_table_in_the_channel_and_the_overlay_plot_in_its_thread(
    lab: tuple[SlackDeps, EvalService], slack: SlackFake
) -> None:
    deps, evals = lab
    good, bad = noisy(1.0, 1), noisy(1.3, 2)
    training_run(evals.runs, "lmgood", "tiny-lm", 300, lambda s: {"loss": good(s)})
    training_run(evals.runs, "lmbad1", "tiny-lm", 300, lambda s: {"loss": bad(s)})
    run(deps, slack, "compare lmgood lmbad1")
    [posted] = slack.messages(slack.default_channel)
    assert posted.text == f"<@{ALICE}> compared `lmgood` and `lmbad1` on loss: A is better"
    table = " ".join(b.get("text", {}).get("text", "") for b in posted.blocks or [])
    assert re.search(r"A  lmgood  tiny-lm-lmgood  270–299 +30 ", table)
    assert re.search(r"B  lmbad1  tiny-lm-lmbad1  270–299 +30 ", table)
    assert "95% CI" in table and "verdict: A is better (the interval excludes zero)" in table
    files = [f for m in slack.messages(slack.default_channel, thread_ts=posted.ts) for f in m.files or []]
    [plot] = files
    assert plot["name"] == "compare-lmgood-lmbad1-loss.png"  # a file per metric: --metric reward does not overwrite
    assert slack.file_bytes(plot["id"]).startswith(b"\x89PNG")


def test_two_runs_of_one_process_are_not_told_apart(lab: tuple[SlackDeps, EvalService], slack: SlackFake) -> None:
    deps, evals = lab
    one, two = noisy(1.0, 1), noisy(1.0, 3)
    training_run(evals.runs, "lmone1", "tiny-lm", 300, lambda s: {"loss": one(s)})
    training_run(evals.runs, "lmtwo2", "tiny-lm", 300, lambda s: {"loss": two(s)})
    run(deps, slack, "compare lmone1 lmtwo2")
    [posted] = slack.messages(slack.default_channel)
    assert posted.text.endswith("on loss: no difference shown at 95%")
    assert "these runs are not told apart" in " ".join(b.get("text", {}).get("text", "") for b in posted.blocks or [])


def test_two_eval_runs_are_compared_paired_by_task(lab: tuple[SlackDeps, EvalService], slack: SlackFake) -> None:
    deps, evals = lab
    suite = make_suite(evals.suites_root.parent / "made", tasks=20)
    evals.add_suite(io.BytesIO(pack(evals.suites_root.parent / "made")))
    a = finished(evals, suite.id, "agent:x/strong", {t: i < 14 for i, t in enumerate(tasks())})
    b = finished(evals, suite.id, "agent:x/weak", {t: i < 8 for i, t in enumerate(tasks())})
    run(deps, slack, f"compare {a} {b}")
    [posted] = slack.messages(slack.default_channel)
    assert posted.text.endswith(f"on {suite.id}: A is better")
    assert "A − B = +30%" in " ".join(b.get("text", {}).get("text", "") for b in posted.blocks or [])
    assert not [f for m in slack.messages(slack.default_channel, thread_ts=posted.ts) for f in m.files or []]


def test_runs_with_different_metrics_are_refused_ephemerally_naming_what_differs(
    lab: tuple[SlackDeps, EvalService], slack: SlackFake
) -> None:
    deps, evals = lab
    curve = noisy(1.0, 1)
    training_run(evals.runs, "lmrun1", "tiny-lm", 300, lambda s: {"loss": curve(s), "lr": 3e-4})
    training_run(evals.runs, "rlrun1", "rl-demo", 300, lambda s: {"reward": curve(s), "lr": 1e-5})
    run(deps, slack, "compare lmrun1 rlrun1 --metric reward")
    assert slack.messages(slack.default_channel) == []
    [refusal] = slack.ephemeral_messages(slack.default_channel, ALICE)
    assert "run lmrun1 reports no reward; both report: lr" in refusal.text
