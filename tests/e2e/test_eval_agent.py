"""The evals issue's agent story, end to end: in a Slack thread a researcher asks labbot to "make a harder eval from
this repo and run it against the current model". The assistant hands it to the eval-writer, which generates a harder
suite from the codebase labbot serves (whole functions, two per task, the largest first), waits for the generation
run, runs the suite with gold and with the model (each launch approved by the researcher in the thread), waits for
both, reads the results, keeps them as an artifact and answers with the table and the suite id.

Real `labbot serve`, real Ray head, real eval-generate and eval jobs in real sandboxes, the real built-in MCP
servers; the Slack Web API and Anthropic fakes at the edge, the model under test inspect's ``mockllm`` (it answers
without ever using a tool, so it restores nothing)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.anthropic import FakeAnthropic, SeenRequest, Step, text, tool_use, tool_uses
from slack_driver import OWNER, SlackSide, agents_lab
from support import wait_for

from labbot.bot.slack.payloads import Workspace, button_click
from labbot.training.ray_cluster import RayConnection

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evals"))
from gen_support import make_repo, package

MODEL_UNDER_TEST = "agent:mockllm/model"
ASK = "make a harder eval from this repo and run it against the current model"


def _called(req: SeenRequest) -> list[str]:
    """The tools this agent has called so far in its run, in order."""
    return [
        b["name"]
        for m in req.messages
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]


def _results(req: SeenRequest) -> str:
    return json.dumps(req.tool_results(), ensure_ascii=False)  # the tools' "·" as it is


def model(req: SeenRequest) -> Step:
    """The assistant delegates; the eval-writer works the loop its prompt describes, one step per answer."""
    if "You are labbot's eval-writer" not in json.dumps(req.system):
        if not req.tool_results():
            return tool_use("delegate", {"role": "eval-writer", "task": f"{ASK} ({MODEL_UNDER_TEST})"})
        return text("The eval-writer's report:\n" + str(req.tool_results()[0]["content"]))
    done, last = _called(req), _results(req)
    if not done:
        harder = {"count": 2, "deletion": "function", "deletions": 2, "prefer": "deep"}
        return tool_use("lab__generate_eval_suite", harder)
    step = done[-1]
    if step == "lab__generate_eval_suite":
        return tool_use("lab__wait_for_run", {"run_id": re.search(r"generating: (\w+)", last).group(1)})  # type: ignore[union-attr]
    if step == "lab__wait_for_run" and "eval-generate" in last:
        return tool_use("lab__list_eval_suites", {})
    if step == "lab__list_eval_suites":
        suite = re.search(r"(suite-[0-9a-f]{12})", last).group(1)  # type: ignore[union-attr]
        return tool_uses(
            ("lab__run_eval", {"suite_id": suite, "solver": "gold"}),
            ("lab__run_eval", {"suite_id": suite, "solver": MODEL_UNDER_TEST}),
        )
    if step == "lab__run_eval":
        runs = re.findall(r"eval run (\w+) launched", last)
        return tool_uses(*(("lab__wait_for_run", {"run_id": r}) for r in runs))
    if step == "lab__wait_for_run":
        runs = re.findall(r"ended: (\w+) · eval ·", last)
        return tool_uses(*(("lab__get_eval_results", {"run_id": r}) for r in runs))
    if step == "lab__get_eval_results":
        table = "\n".join(str(r["content"]) for r in req.tool_results())
        return tool_use("lab__put_artifact", {"name": "harder-eval-results.md", "text": table})
    if step == "lab__put_artifact":
        tables = [
            str(b["content"])
            for m in req.messages
            if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result" and str(b["content"]).startswith("eval ")
        ]
        return text("Results of the harder suite:\n" + "\n".join(tables) + "\n" + last)
    return text(f"unexpected step {step}: {last[:500]}")


@pytest.fixture
def lab(tmp_path: Path, ray_head: RayConnection) -> Iterator[tuple[SlackSide, FakeAnthropic]]:
    repo = make_repo(tmp_path / "shapes", package())
    toml = '[slack]\ncard_every = "2s"\nprogress_every = "1h"\n'
    with agents_lab(tmp_path, ray_head, toml=toml, codebase=repo, model=model) as lab:
        yield lab


def _thread(slack: SlackSide, ts: str) -> list[Any]:
    return slack.fake.messages(slack.ws.channel, thread_ts=ts)[1:]


def _approve_each(slack: SlackSide, ts: str, approved: set[str]) -> int:
    """Press Approve, as the researcher, on every approval prompt in the thread not pressed yet."""
    ws = Workspace(team_id=slack.ws.team_id, app_id=slack.ws.app_id, channel=slack.ws.channel)
    for m in _thread(slack, ts):
        for b in m.blocks or []:
            for el in b.get("elements") or [] if b.get("type") == "actions" else []:
                if el.get("action_id") == "approval_approve" and el["value"] not in approved:
                    approved.add(el["value"])
                    body = button_click(
                        ws, user=OWNER, action_id="approval_approve", value=el["value"], message_ts=m.ts
                    )
                    assert slack.post(body).status_code == 200
    return len(approved)


@pytest.mark.timeout(900)  # a generation job and two sealed eval runs, beside the other test workers
def test_make_a_harder_eval_and_run_it_against_the_model_from_a_thread(lab: tuple[SlackSide, FakeAnthropic]) -> None:
    slack, anthropic = lab
    msg = slack.fake.user_message(slack.ws.channel, OWNER, f"<@{slack.fake.bot_user_id}> {ASK}", None)
    event = slack.fake.event_payload(msg, team_id=slack.ws.team_id, api_app_id=slack.ws.app_id)
    assert slack.post(json.dumps(event), content_type="application/json").status_code == 200

    approved: set[str] = set()

    def story() -> str:  # what the thread and the model saw, for a failure's message
        said = [m.text[:300] for m in _thread(slack, msg.ts)]
        asked = [(_called(r)[-2:], _results(r)[:400]) for r in anthropic.requests]
        return f"thread: {said}; model calls: {asked}"

    try:
        wait_for(lambda: _approve_each(slack, msg.ts, approved) >= 1, timeout=120, what="the generation's approval")
    except AssertionError as e:
        raise AssertionError(f"{e}; {story()}") from None
    assert not [r for r in slack.serve.client().get("/runs").json()["runs"] if r["job"] == "eval"], "none yet"
    wait_for(lambda: _approve_each(slack, msg.ts, approved) >= 3, timeout=600, what="both eval runs' approvals")

    def answered() -> Any:
        return next((m for m in _thread(slack, msg.ts) if m.bot_id and "Results of the harder suite" in m.text), None)

    try:
        answer = wait_for(answered, timeout=600, interval=1.0, what="the eval-writer's results in the thread")
    except AssertionError as e:
        runs = [
            (r["id"], r["job"], r["status"], r.get("error")) for r in slack.serve.client().get("/runs").json()["runs"]
        ]
        raise AssertionError(f"{e}; runs: {runs}; {story()}") from None
    listed = slack.serve.client().get("/runs").json()["runs"]
    assert {r["owner"] for r in listed} == {OWNER}  # launched by her agent, approved by her: her runs
    runs = {r["job"]: r for r in listed}
    assert runs["eval-generate"]["status"] == "succeeded"
    assert (
        runs["eval-generate"]["params"] | {"deletion": "function", "deletions": 2, "prefer": "deep"}
        == runs["eval-generate"]["params"]
    )
    said = answer.text
    suite = re.search(r"(suite-[0-9a-f]{12})", said).group(1)  # type: ignore[union-attr]
    assert re.search(r"solver gold · succeeded · pass rate 100% \(95% CI \d+%–100%\)", said), said
    assert re.search(rf"solver {MODEL_UNDER_TEST} · succeeded · pass rate 0% \(95% CI 0%–\d+%\)", said), said
    assert "isolation: sealed" in said and said.count(": pass · ") == 2 and said.count(": fail · ") == 2
    assert "stored harder-eval-results.md as" in said
    with slack.serve.client() as api:
        kept = api.get("/evals/suites").json()["suites"]
        assert suite in [s["suite"] for s in kept]
        tasks = api.get(f"/evals/suites/{suite}").json()["suite"]["tasks"]
        assert len(tasks) == 2 and all(len(t["also"]) == 1 for t in tasks)  # two features deleted per task
    writer = [r for r in anthropic.requests if "You are labbot's eval-writer" in json.dumps(r.system)]
    assert all("lab__launch_run" not in _called(r) for r in writer)
