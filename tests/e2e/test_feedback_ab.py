"""User story of the outer loop's feedback half, end to end: with `[agents.ab]` splitting new threads between two
models, researchers ask in several threads; each answer carries 👍/👎; they vote (one 👎 with a "what went wrong"
comment), and `/lab ab` shows each model's 👍 rate with its interval — "not enough votes" while there are few — and
the 👎 becomes an eval case with `/lab eval from-feedback`. A thread keeps its model for every answer.

Real `labbot serve`, real Ray head; the Slack Web API and Anthropic fakes at the edge (the scripted model says which
model it was asked as)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_story import commit_history
from fakes.anthropic import FakeAnthropic, SeenRequest, Step, text
from slack_driver import OWNER, SlackSide, agents_lab
from support import wait_for

from labbot.bot.console.model import Message
from labbot.bot.slack.payloads import JSON, feedback_click, view_submission
from labbot.training.ray_cluster import RayConnection

BOB = "U0BOB00001"
TOML = """
[agents.ab]
models = ["model-a", "model-b"]
"""
THREADS = 8


def answered(m: Message) -> bool:
    """A whole answer: streamed into the thread, and the stream stopped (with the 👍/👎 buttons under it)."""
    return m.bot_id is not None and "Answered by" in m.text and not m.streaming


def answer_as_asked(req: SeenRequest) -> Step:
    return text(f"Answered by {req.body['model']}: the loader is the bottleneck.")


@pytest.fixture
def lab(tmp_path: Path, ray_head: RayConnection) -> Iterator[tuple[SlackSide, FakeAnthropic]]:
    repo = commit_history(tmp_path / "repo")
    users = {OWNER: "alice", BOB: "bob"}
    with agents_lab(tmp_path, ray_head, toml=TOML, codebase=repo, model=answer_as_asked, users=users) as lab:
        yield lab


def test_votes_on_two_models_answers_and_the_ab_report(lab: tuple[SlackSide, FakeAnthropic]) -> None:
    slack, _ = lab
    fake, channel = slack.fake, slack.ws.channel
    bot = fake.bot_user_id
    answers = []
    for i in range(THREADS):
        asked = fake.user_message(channel, OWNER, f"<@{bot}> why is run {i} slow?")
        assert slack.post(json.dumps(fake.validated_event(asked)), content_type=JSON).status_code == 200
        answer = wait_for(
            lambda a=asked: next((m for m in fake.messages(channel, thread_ts=a.ts)[1:] if answered(m)), None),
            timeout=60,
            what=f"the answer in thread {i}",
        )
        answers.append((asked, answer))
    models = [re.search(r"Answered by (model-[ab])", a.text).group(1) for _, a in answers]  # type: ignore[union-attr]
    assert set(models) <= {"model-a", "model-b"}

    # a reply in a thread is answered by the thread's model again
    first_q, _ = answers[0]
    again = fake.user_message(channel, OWNER, "and what should I change?", thread_ts=first_q.ts)
    assert slack.post(json.dumps(fake.validated_event(again)), content_type=JSON).status_code == 200
    second = wait_for(
        lambda: [m for m in fake.messages(channel, thread_ts=first_q.ts)[1:] if answered(m)][1:],
        timeout=60,
        what="the second answer in the first thread",
    )
    assert f"Answered by {models[0]}" in second[0].text

    # votes: Alice likes model-b's answers and not model-a's (nor the first answer); Bob 👍 everything; a press
    # twice is one vote
    def buttons(message: object) -> dict[str, str]:
        [el] = [e for b in message.blocks if b["type"] == "context_actions" for e in b["elements"]]  # type: ignore[attr-defined]
        return {"up": el["positive_button"]["value"], "down": el["negative_button"]["value"]}

    for i, ((asked, answer), model_name) in enumerate(zip(answers, models, strict=True)):
        values = buttons(answer)
        verdict = "up" if model_name == "model-b" and i > 0 else "down"  # the first answer gets a 👎 whoever wrote it
        for _ in range(2):
            click = feedback_click(
                slack.ws, user=OWNER, value=values[verdict], message_ts=answer.ts, thread_ts=asked.ts
            )
            assert slack.post(click).status_code == 200
        reaction = fake.reaction_payload(answer, user=BOB, reaction="+1")
        assert slack.post(json.dumps(reaction), content_type=JSON).status_code == 200

    with slack.serve.client() as api:
        rows = wait_for(
            lambda: (lambda f: f if len(f) == 2 * THREADS else None)(
                api.get("/feedback", params={"limit": 100}).json()["feedback"]
            ),
            timeout=30,
            what="one vote per answer and voter",
        )
        assert {(r["user"], r["model"]) for r in rows} == {(u, m) for u in (OWNER, BOB) for m in models}
        assert all(r["kind"] == "answer" and r["ab_arm"] in ("A", "B") for r in rows)
        report = api.get("/ab").json()["ab"]
    assert report["configured"] and [a["model"] for a in report["arms"]] == ["model-a", "model-b"]
    by_model = {a["model"]: a for a in report["arms"]}
    for name in set(models):
        n = models.count(name)
        assert by_model[name]["votes"] == 2 * n and by_model[name]["answers"] >= n
    assert report["significant"] is False and report["verdict"] == "not enough votes"  # 16 votes in all

    # /lab ab says the same, to whoever asks
    assert slack.command("ab").status_code == 200
    shown = wait_for(
        lambda: [m for m in fake.ephemeral_messages(channel, OWNER) if m.text == "A/B test"],
        what="the answer to /lab ab",
    )
    said = json.dumps(shown[-1].blocks, ensure_ascii=False)
    # (the table's header names the interval: the line of B − A is there only when both arms have votes, and
    # the arms are drawn by hash, so 2 runs in 256 give all eight threads to one model)
    assert "not enough votes" in said and "model-a" in said and "model-b" in said and "95% interval" in said.lower()

    # a 👎 with a comment becomes an eval case
    [modal] = wait_for(
        lambda: [v for v in fake.views_opened() if v.get("callback_id") == "feedback_comment"][:1],
        what="the what-went-wrong modal",
    )
    typed = {"comment": {"text": "it blamed the loader; the learning rate was 10x too high"}}
    assert slack.post(view_submission(slack.ws, user=OWNER, view=modal, values=typed)).status_code == 200
    with slack.serve.client() as api:
        [down] = wait_for(
            lambda: [f for f in api.get("/feedback", params={"vote": "down"}).json()["feedback"] if f["comment"]],
            what="the comment on the 👎",
        )
    assert slack.command(f"eval from-feedback {down['id']}").status_code == 200
    made = wait_for(
        lambda: [
            m for m in fake.ephemeral_messages(channel, OWNER) if f"feedback-{down['id']}" in json.dumps(m.blocks)
        ],
        timeout=30,
        what="the eval case made from the 👎",
    )
    assert "incidents-" in json.dumps(made[-1].blocks)
    with slack.serve.client() as api:
        assert api.get(f"/feedback/{down['id']}").json()["feedback"]["case"] == f"feedback-{down['id']}"
