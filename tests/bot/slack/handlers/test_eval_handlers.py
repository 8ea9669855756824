"""``/lab eval ...`` through their handlers (``labbot.bot.slack.handlers``) against a real EvalService and RunThreads
(Slack's Web API faked at the edge): launches open threads, refusals are ephemeral and launch nothing, and an ended eval
run's thread gets its results table, its .eval log and, when so, the saturation call-out."""

from __future__ import annotations

import asyncio
import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from eval_services import CAUSE, SLACK_TOKEN, FakeSlack, finished, make_eval_service, make_suite, paged_run, slack_lab
from eval_services import task_ids as tasks

from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.policy import PagingPolicy
from labbot.agents.fleet.tools import CallContext, ToolResult
from labbot.bot.commands import LAB, Parsed, parse
from labbot.bot.integrations import Integrations
from labbot.bot.slack.crosslinks import CrossLinks
from labbot.bot.slack.handlers import Asker, SlackDeps, dispatch
from labbot.evals.service import EvalService, pack
from labbot.storage.models import Incident
from labbot.training.telemetry_store import TelemetryStore

ALICE, CHANNEL = "U0ALICE001", "C0LAB00001"


@pytest.fixture
def evals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EvalService:
    return make_eval_service(tmp_path, monkeypatch)


@pytest.fixture
def lab(evals: EvalService, tmp_path: Path) -> tuple[SlackDeps, FakeSlack, str]:
    made = make_suite(tmp_path / "made", tasks=20)
    evals.add_suite(io.BytesIO(pack(tmp_path / "made")))
    deps, slack = slack_lab(evals)
    return deps, slack, made.id


def run(deps: SlackDeps, text: str, trigger: str = "t-1") -> None:
    parsed = parse(text, LAB)
    assert isinstance(parsed, Parsed), parsed
    asyncio.run(dispatch(deps, parsed, Asker(ALICE, CHANNEL, trigger)))


def test_eval_run_opens_the_runs_thread_and_a_retry_launches_nothing_more(
    lab: tuple[SlackDeps, FakeSlack, str],
) -> None:
    deps, slack, suite = lab
    deps.service.registry.set_env("eval", {"ANTHROPIC_API_KEY": "sk-ant-for-evals"})  # LABBOT_EVAL_ANTHROPIC_API_KEY
    run(deps, f"eval run {suite} --solver agent:anthropic/model-x --max-samples 2")
    [launched] = deps.service.runs()
    assert launched["job"] == "eval" and launched["owner"] == ALICE
    assert launched["params"]["solver"] == "agent:anthropic/model-x" and launched["params"]["max_samples"] == 2
    assert deps.threads.thread_of(launched["id"]) is not None
    run(deps, f"eval run {suite} --solver agent:anthropic/model-x --max-samples 2")  # Slack's retry: same trigger
    assert len(deps.service.runs()) == 1
    assert "already launched by this command" in slack.said("chat.postEphemeral")[-1]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("eval run suite-0123456789ab", "no suite suite-0123456789ab: you can run suite-"),
        ("eval run latest", "is not a suite id"),
        ("eval run {suite} --solver golden", "accepted: gold, none, agent"),
        ("eval run {suite} --solver agent:anthropic/model-x", "set LABBOT_EVAL_ANTHROPIC_API_KEY (a key for evals)"),
        ("eval run {suite} --solver agent", "--solver agent needs a model: name one"),
        ("eval generate --deletion everything", "one of body, function, mixed"),
        ("eval generate --prefer wide", "one of any, deep"),
        ("eval generate --deletions 9", "deletions"),
        ("eval compare abc123 def456", "no eval run 'abc123' that you can see"),
    ],
)
def test_refusals_are_ephemeral_say_what_exists_and_launch_nothing(
    lab: tuple[SlackDeps, FakeSlack, str], text: str, said: str
) -> None:
    deps, slack, suite = lab
    run(deps, text.format(suite=suite))
    assert deps.service.runs() == []
    assert [m for m, _ in slack.calls] == ["chat.postEphemeral"]
    assert said in slack.said("chat.postEphemeral")[0]


def test_eval_generate_launches_the_generator_with_the_asked_deletion(lab: tuple[SlackDeps, FakeSlack, str]) -> None:
    deps, _slack, _suite = lab
    run(deps, "eval generate --count 4 --seed 2 --deletion function")
    [launched] = deps.service.runs()
    assert launched["job"] == "eval-generate" and launched["owner"] == ALICE
    assert launched["params"] == {"count": 4, "seed": 2, "deletion": "function", "deletions": 1, "prefer": "any"}


def test_eval_generate_asks_for_a_harder_suite(lab: tuple[SlackDeps, FakeSlack, str]) -> None:
    deps, _slack, _suite = lab
    run(deps, "eval generate --count 20 --deletion function --deletions 2 --prefer deep")
    [launched] = deps.service.runs()
    assert launched["params"] == {"count": 20, "seed": 0, "deletion": "function", "deletions": 2, "prefer": "deep"}


def test_an_ended_eval_runs_thread_gets_the_table_the_log_and_saturation(
    lab: tuple[SlackDeps, FakeSlack, str],
    evals: EvalService,
) -> None:
    deps, slack, suite = lab
    strong = finished(evals, suite, "agent:x/strong", {t: i < 19 for i, t in enumerate(tasks())})
    log = evals.runs.checkpoint_root / strong / "eval" / "2026-12-02_labbot-eval.eval"
    log.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    results = log.parent / "results.json"
    results.write_text(results.read_text().replace('"log": ""', f'"log": "{log.name}"'))
    asyncio.run(deps.threads.open_thread(evals.runs.get(strong), CHANNEL))
    slack.calls.clear()
    asyncio.run(deps.threads.tick())
    posted = "\n".join(slack.said("chat.postMessage"))
    assert "pass rate 95% (95% CI 76%–99%)" in posted
    assert "t19-add" in posted and "fail" in posted and "1,200" in posted  # per task: result, time, tokens
    [upload] = [p for m, p in slack.calls if m == "files.upload"]
    assert upload["filename"] == f"{strong}.eval" and upload["content"].startswith(b"PK")
    assert (
        "is saturated" in posted
        and "eval generate --deletion function --deletions 2 --prefer deep --count 20" in posted
    )
    slack.calls.clear()
    asyncio.run(deps.threads.tick())  # posted once
    assert not [m for m, _ in slack.calls if m != "chat.update"]


def test_eval_compare_and_show_answer_the_asker(lab: tuple[SlackDeps, FakeSlack, str], evals: EvalService) -> None:
    deps, slack, suite = lab
    a = finished(evals, suite, "agent:x/strong", {t: i < 14 for i, t in enumerate(tasks())})
    b = finished(evals, suite, "agent:x/weak", {t: i < 8 for i, t in enumerate(tasks())})
    run(deps, f"eval compare {a} {b}")
    said = slack.said("chat.postEphemeral")[-1]
    assert "A − B = +30%" in said and "verdict: A is better (the interval excludes zero)" in said
    run(deps, f"eval show {a}")
    assert "pass rate 70% (95% CI 48%–85%)" in slack.said("chat.postEphemeral")[-1]
    run(deps, "eval list")
    assert suite in slack.said("chat.postEphemeral")[-1]


def test_resolve_with_a_cause_then_eval_from_incident(
    lab: tuple[SlackDeps, FakeSlack, str], evals: EvalService
) -> None:
    deps, slack, _suite = lab
    paged_run(evals, resolved=False)
    deps = replace(deps, pager=Pager(evals.runs.db, PagingPolicy(), slack=False, pagerduty=False))
    run(deps, "eval from-incident pq3x7k")  # still open: what to do, nothing made
    assert "is still triggered" in slack.said("chat.postEphemeral")[-1]
    run(deps, "resolve pq3x7k")
    run(deps, "eval from-incident pq3x7k")
    assert "has no recorded cause" in slack.said("chat.postEphemeral")[-1]
    assert "resolve pq3x7k --cause" in slack.said("chat.postEphemeral")[-1]
    assert not any(s["suite"].startswith("incidents-") for s in evals.suites())
    run(deps, f"resolve pq3x7k --cause '{CAUSE}'")
    assert "cause recorded" in slack.said("chat.postEphemeral")[-1]
    run(deps, "eval from-incident pq3x7k")
    said = slack.said("chat.postEphemeral")[-1]
    assert "case incident-pq3x7k: hung page of r1hung" in said and "/lab eval run incidents-" in said
    assert CAUSE in said and SLACK_TOKEN not in said


def test_without_a_recorded_cause_the_pages_linear_issue_gives_it(
    lab: tuple[SlackDeps, FakeSlack, str], evals: EvalService
) -> None:
    """The third place a cause is written: the Linear issue the page was filed as ("Cause: ..." in a comment)."""
    deps, slack, _suite = lab
    paged_run(evals, cause=None)
    pager = Pager(evals.runs.db, PagingPolicy(), slack=False, pagerduty=False)
    pager.link("pq3x7k", "linear", {"identifier": "ENG-42", "url": "https://linear.app/lab/issue/ENG-42", "by": "x"})
    asked: list[tuple[str, dict[str, Any], str | None]] = []
    issue = (
        "ENG-42 · Done · team ENG (Engineering)\n<untrusted>title: hung run\n\nfiled from Slack</untrusted>\n"
        "comments (2):\n— Alice at 2026-12-01T10:00:00Z:\nlooking\n\n— Alice at 2026-12-01T11:00:00Z:\n"
        f"**Cause:** {CAUSE}\n"
    )

    async def act(tool: str, arguments: Any, ctx: CallContext, approved_by: str | None) -> ToolResult:
        asked.append((tool, dict(arguments), approved_by))
        return ToolResult(issue)

    links = CrossLinks(
        slack,  # type: ignore[arg-type]
        evals.runs,
        TelemetryStore(evals.runs.db),
        deps.threads,
        Integrations(linear=True, linear_team="ENG"),
        act,
        pager=pager,
    )
    deps = replace(
        deps,
        linear_cause=links.linear_cause,
        record_cause=lambda page_id, cause, user: pager.resolve(page_id, by=user, cause=cause),
    )
    run(deps, "eval from-incident pq3x7k")
    assert asked == [("linear__get_issue", {"issue": "ENG-42"}, ALICE)]
    said = slack.said("chat.postEphemeral")[-1]
    assert "case incident-pq3x7k" in said and CAUSE in said
    assert pager.get("pq3x7k")["cause"] == CAUSE and pager.get("pq3x7k")["cause_by"] == ALICE
    # no cause in the issue either: the refusal still says what to record
    issue = "ENG-42 · Done\ncomments: none"
    with evals.runs.db.session() as s:
        s.get_one(Incident, "pq3x7k").cause = None
    run(deps, "eval from-incident pq3x7k")
    assert "has no recorded cause" in slack.said("chat.postEphemeral")[-1]
