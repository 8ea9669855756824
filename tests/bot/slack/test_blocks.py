"""Block Kit rendering of runs (bot/slack/blocks): every message validates against Block Kit's documented limits."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk.models.blocks import Block

from labbot.bot.slack.blocks import (
    MAX_BLOCKS,
    MAX_MESSAGE_TEXT,
    MAX_SECTION_TEXT,
    ephemeral_error,
    eta_seconds,
    fits_in_messages,
    launch_confirmation,
    progress_text,
    restart_text,
    run_card,
    split_sections,
    summary_blocks,
    text_blocks,
)
from labbot.bot.slack.blocks.limits import FENCE_CLOSE, FENCE_OPEN, fence_ends, inside_fence

STATUSES = ["pending", "running", "stalled", "restarting", "succeeded", "failed", "stopped"]
NOW = datetime(2025, 3, 1, 12, 10, tzinfo=UTC)

# -- a structural Block Kit validator (limits from api.slack.com/reference/block-kit) -----------------------------


def _text(obj: Any, *, kinds: tuple[str, ...] = ("plain_text", "mrkdwn"), limit: int = 3000) -> None:
    assert isinstance(obj, dict) and obj["type"] in kinds, obj
    assert isinstance(obj["text"], str) and 1 <= len(obj["text"]) <= limit, obj
    assert set(obj) <= {"type", "text", "emoji", "verbatim"}, obj


def _confirm(c: dict[str, Any]) -> None:
    assert set(c) <= {"title", "text", "confirm", "deny", "style"}
    _text(c["title"], kinds=("plain_text",), limit=100)
    _text(c["text"], limit=300)
    _text(c["confirm"], kinds=("plain_text",), limit=30)
    _text(c["deny"], kinds=("plain_text",), limit=30)
    assert c.get("style", "primary") in ("primary", "danger")


def _button(b: dict[str, Any]) -> None:
    assert b["type"] == "button"
    _text(b["text"], kinds=("plain_text",), limit=75)
    assert 1 <= len(b["action_id"]) <= 255
    assert len(b.get("value", "")) <= 2000
    assert b.get("style", "primary") in ("primary", "danger")
    if "confirm" in b:
        _confirm(b["confirm"])


def validate_block(block: dict[str, Any]) -> None:
    kind = block["type"]
    assert kind in ("header", "section", "context", "actions", "divider", "image"), kind
    assert len(block.get("block_id", "")) <= 255
    if kind == "header":
        _text(block["text"], kinds=("plain_text",), limit=150)
    elif kind == "section":
        assert "text" in block or "fields" in block
        if "text" in block:
            _text(block["text"], limit=MAX_SECTION_TEXT)
        fields = block.get("fields", [])
        assert len(fields) <= 10
        for f in fields:
            _text(f, limit=2000)
    elif kind == "context":
        assert 1 <= len(block["elements"]) <= 10
        for e in block["elements"]:
            _text(e)
    elif kind == "actions":
        assert 1 <= len(block["elements"]) <= 25
        for e in block["elements"]:
            _button(e)
    parsed = Block.parse(block)  # slack_sdk's own model checks as a second opinion
    assert parsed is not None
    parsed.validate_json()


def validate_message(text: str, blocks: list[dict[str, Any]]) -> None:
    assert 1 <= len(text) <= MAX_MESSAGE_TEXT
    assert 1 <= len(blocks) <= MAX_BLOCKS
    for block in blocks:
        validate_block(block)


def make_run(status: str = "running", **over: Any) -> dict[str, Any]:
    run: dict[str, Any] = {
        "id": "r1a2",
        "job": "tiny-lm",
        "name": "lr-sweep-3",
        "owner": "U123",
        "status": status,
        "attempt": 1,
        "step": 120,
        "metrics": {"loss": 2.31456, "tokens_per_s": 41234.5},
        "checkpoint_step": 100,
        "ray_submission_id": "labbot-r1a2-1",
        "thread_ts": None,
        "error": None,
        "params": {"steps": 200, "lr": 0.0003},
        "created_at": "2025-03-01T12:00:00+00:00",
        "started_at": "2025-03-01T12:00:00+00:00",
        "ended_at": None,
        "last_telemetry_at": None,
        "last_step_at": None,
    }
    return run | over


def fields_of(blocks: list[dict[str, Any]]) -> dict[str, str]:
    section = next(b for b in blocks if b["type"] == "section" and "fields" in b)
    return dict(f["text"].split("\n", 1) for f in section["fields"])


def mrkdwn_texts(node: Any) -> list[str]:
    if isinstance(node, list):
        return [t for n in node for t in mrkdwn_texts(n)]
    if isinstance(node, dict):
        if node.get("type") == "mrkdwn":
            return [node["text"]]
        return [t for v in node.values() for t in mrkdwn_texts(v)]
    return []


def buttons(blocks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["action_id"]: e for b in blocks if b["type"] == "actions" for e in b["elements"]}


# -- run card ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", STATUSES)
def test_run_card_for_every_status_is_valid_block_kit(status: str) -> None:
    run = make_run(status, error="boom" if status == "failed" else None)
    text, blocks = run_card(run, history=["<@U1> stopped the run at 12:03"], now=NOW)
    validate_message(text, blocks)
    assert blocks[0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": "tiny-lm · lr-sweep-3", "emoji": True},
    }
    f = fields_of(blocks)
    assert status in f["*Status*"] and f["*Status*"].startswith(":")
    assert f["*Owner*"] == "<@U123>" and f["*Step*"] == "120 / 200" and f["*Loss*"] == "2.3146"
    assert f["*Throughput*"] == "41.2k tok/s" and f["*Attempt*"] == "1" and f["*Checkpoint*"] == "step 100"
    b = buttons(blocks)
    assert set(b) == ({"run_restart"} if status in ("succeeded", "failed", "stopped") else {"run_stop", "run_restart"})
    assert all(btn["value"] == "r1a2" for btn in b.values())
    assert "latest checkpoint" in b["run_restart"]["confirm"]["text"]["text"]
    if "run_stop" in b:
        assert b["run_stop"]["style"] == "danger" and b["run_stop"]["confirm"]["title"]["text"] == "Stop run?"
    assert any(
        "stopped the run at 12:03" in e["text"] for blk in blocks if blk["type"] == "context" for e in blk["elements"]
    )
    has_error = any("boom" in blk.get("text", {}).get("text", "") for blk in blocks)
    assert has_error == (status == "failed")


def test_status_emoji_differs_per_status() -> None:
    emojis = {fields_of(run_card(make_run(s), now=NOW)[1])["*Status*"].split()[0] for s in STATUSES}
    assert len(emojis) == len(STATUSES)


@pytest.mark.parametrize("loss", ["NaN", "Infinity", "-Infinity", float("nan")])
def test_non_finite_loss_renders_without_crashing(loss: Any) -> None:
    run = make_run(metrics={"loss": loss, "tokens_per_s": "NaN"})
    text, blocks = run_card(run, now=NOW)
    validate_message(text, blocks)
    expected = "NaN" if loss != loss else loss
    assert fields_of(blocks)["*Loss*"] == expected and fields_of(blocks)["*Throughput*"] == "—"
    assert expected in progress_text(run, now=NOW)
    validate_message(*summary_blocks(run, first_loss=float("nan"), best_loss=None))


def test_sparse_run_pending_from_the_cli() -> None:
    run = make_run("pending", owner="alice", step=None, metrics={}, checkpoint_step=None, params={}, started_at=None)
    text, blocks = run_card(run)
    validate_message(text, blocks)
    f = fields_of(blocks)
    assert f["*Owner*"] == "alice" and f["*Step*"] == "—" and f["*Loss*"] == "—" and f["*ETA*"] == "—"
    assert "none yet" in buttons(blocks)["run_restart"]["confirm"]["text"]["text"]


def test_user_text_is_escaped_and_huge_values_are_clipped() -> None:
    run = make_run("failed", name="<!channel> " + "n" * 500, error="Traceback ```\n" + "x" * 10_000)
    text, blocks = run_card(run, history=["line"] * 3 + ["y" * 5000], now=NOW)
    validate_message(text, blocks)
    assert "<!channel>" not in " ".join(mrkdwn_texts(blocks))  # plain_text (the header) is never parsed
    assert "&lt;!channel&gt;" in " ".join(mrkdwn_texts(blocks))


# -- ETA ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("over", "rate", "expected"),
    [
        ({}, 2.0, 40.0),  # 80 steps left at the given 2 steps/s
        ({}, None, 80 / (120 / 600)),  # no rate: 120 steps in the 10 minutes since started_at
        ({"started_at": "2025-03-01T12:00:00"}, None, 400.0),  # naive timestamps are UTC
        ({"status": "succeeded"}, 2.0, None),
        ({"status": "stalled"}, 2.0, None),
        ({"params": {}}, 2.0, None),  # no total steps
        ({"step": None}, 2.0, None),
        ({"step": 0}, None, None),  # no progress yet: no rate to go by
        ({"started_at": None}, None, None),
        ({"step": 200}, 2.0, 0.0),
        ({}, 0.0, 400.0),  # a useless rate falls back to the average
    ],
)
def test_eta(over: dict[str, Any], rate: float | None, expected: float | None) -> None:
    run = make_run(**over)
    eta = eta_seconds(run, rate=rate, now=NOW)
    assert eta == (pytest.approx(expected) if expected is not None else None)
    shown = fields_of(run_card(run, rate=rate, now=NOW)[1])["*ETA*"]
    assert (shown == "—") == (expected is None)


def test_eta_formats() -> None:
    assert fields_of(run_card(make_run(), rate=2.0, now=NOW)[1])["*ETA*"] == "~40s"
    assert fields_of(run_card(make_run(), rate=0.01, now=NOW)[1])["*ETA*"] == "~2h 13m"
    assert fields_of(run_card(make_run(step=200), rate=1.0, now=NOW)[1])["*ETA*"] == "finishing"


# -- posts -------------------------------------------------------------------------------------------------------


def test_progress_line() -> None:
    line = progress_text(make_run(), rate=2.0, now=NOW)
    assert line.count("\n") == 0
    assert "120 / 200" in line and "2.3146" in line and "41.2k tok/s" in line and "ETA ~40s" in line
    assert "ETA" not in progress_text(make_run(step=None, metrics={}), now=NOW)


def test_launch_and_restart_lines() -> None:
    text = launch_confirmation(make_run("pending"))
    assert "<@U123>" in text and "tiny-lm" in text and "`steps=200`" in text and "labbot-r1a2-1" in text
    assert "<@U9> restarted" in restart_text(make_run(attempt=2), "U9")
    assert "checkpoint step 100" in restart_text(make_run(attempt=2), "U9")
    auto = restart_text(make_run(attempt=3, checkpoint_step=None), None)  # who restarted it is said by whoever did
    assert auto == ":arrows_counterclockwise: attempt 3 started, starting from step 0 (no checkpoint yet)."
    rl = make_run("pending", job="tiny-rl", params={f"knob{i}": i for i in range(40)}, params_given=["knob7"])
    line = launch_confirmation(rl)
    assert "`knob7=7` and the job's defaults" in line and "knob8" not in line, "only what the launch set"
    assert "with the job's defaults" in launch_confirmation({**rl, "params_given": []})


def test_a_stop_is_said_plainly_in_the_summary_not_as_an_error() -> None:
    run = make_run("stopped", error="stopped by slack:U9ALICE")
    run["ended_at"] = (NOW + timedelta(hours=1)).isoformat()
    _text, blocks = summary_blocks(run)
    said = str(blocks)
    assert ":octagonal_sign: Stopped by <@U9ALICE>" in said and "*Error*" not in said


@pytest.mark.parametrize("status", ["succeeded", "failed", "stopped"])
def test_summary(status: str) -> None:
    run = make_run(status, step=200, metrics={"loss": 1.8, "tokens_per_s": 1_234_567.0}, error="oom" * 2000)
    run["ended_at"] = (NOW + timedelta(hours=1)).isoformat()
    text, blocks = summary_blocks(run, first_loss=4.2, best_loss=1.75)
    validate_message(text, blocks)
    f = fields_of(blocks)
    assert f["*Loss*"] == "4.2000 → 1.8000 (best 1.7500)" and f["*Steps*"] == "200 / 200"
    assert f["*Throughput*"] == "1.2M tok/s" and f["*Wall time*"] == "1h 10m"
    assert summary_blocks(run, duration_s=42)[1][1]["fields"][3]["text"] == "*Wall time*\n42s"


def test_ephemeral_error() -> None:
    text, blocks = ephemeral_error("unknown job 'x'; known jobs: tiny-lm", "/lab launch <job> [key=value ...]")
    validate_message(text, blocks)
    assert "&lt;job&gt;" in blocks[1]["text"]["text"]
    validate_message(*ephemeral_error("x" * 5000, None))


# -- limits ------------------------------------------------------------------------------------------------------

pieces = st.sampled_from(["a", "word ", "\n", "`", "```", "```python\n", "é", "🙂", " ", "&lt;"])
long_texts = st.lists(st.tuples(pieces, st.integers(1, 1500)), max_size=30).map(
    lambda xs: "".join(p * n for p, n in xs)
)


def check_sections(text: str, code: bool, limit: int) -> None:
    sections = split_sections(text, code=code, limit=limit)
    assert "".join(s.body for s in sections) == text  # nothing lost, nothing reordered
    ends = fence_ends(text)
    pos = 0
    for i, s in enumerate(sections):
        assert s.body and len(s.text) <= limit
        first, last = i == 0, i == len(sections) - 1
        opened_before = code or (not first and inside_fence(ends, pos))
        pos += len(s.body)
        open_after = code or (not last and inside_fence(ends, pos))
        assert s.prefix == (FENCE_OPEN if opened_before else "")  # markers only where a fence is cut
        assert s.suffix == (FENCE_CLOSE if open_after else "")
        if not code and len(ends) % 2 == 0:
            assert s.text.count("```") % 2 == 0  # balanced input: each section renders on its own


@settings(max_examples=150, deadline=None)
@given(long_texts, st.booleans())
def test_text_blocks_lossless_and_within_limits(text: str, code: bool) -> None:
    check_sections(text, code, MAX_SECTION_TEXT)
    messages = text_blocks(text, code=code)
    assert (messages == []) == (text == "")
    for message in messages:
        assert 1 <= len(message) <= MAX_BLOCKS
        assert sum(len(b["text"]["text"]) for b in message) <= MAX_MESSAGE_TEXT
        for block in message:
            validate_block(block)
    texts = [b["text"]["text"] for m in messages for b in m]
    assert texts == [s.text for s in split_sections(text, code=code)]


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("ab `\n"), max_size=300), st.booleans(), st.integers(16, 40))
def test_split_sections_small_limits(text: str, code: bool, limit: int) -> None:
    check_sections(text, code, limit)


def test_split_prefers_line_boundaries_and_closes_fences() -> None:
    lines = [f"line {i:04d} " + "x" * 80 for i in range(100)]
    sections = split_sections("\n".join(lines))
    assert all(s.body.endswith("\n") for s in sections[:-1])
    code = "intro\n```\n" + "\n".join(lines) + "\n```\noutro"
    sections = split_sections(code)
    assert len(sections) > 2 and sections[0].suffix == FENCE_CLOSE and sections[1].prefix == FENCE_OPEN


def test_messages_and_files() -> None:
    log = "\n".join(f"{i:06d} " + "y" * 120 for i in range(3000))  # ~380k chars
    messages = text_blocks(log, code=True)
    assert len(messages) > 3 and all(len(m) <= MAX_BLOCKS for m in messages)
    assert not fits_in_messages(log) and fits_in_messages(log[:50_000]) and fits_in_messages("")
    assert text_blocks("short") == [[{"type": "section", "text": {"type": "mrkdwn", "text": "short"}}]]


def test_the_card_shows_the_jobs_headline_metric_and_its_latest_value() -> None:
    rl = make_run(
        job="tiny-rl",
        plot=["reward", "pass_rate"],
        headline="pass_rate",
        metrics={"reward": 1.25, "pass_rate": 0.62, "tokens_per_s": 900.0},
    )
    text, blocks = run_card(rl, now=NOW)
    validate_message(text, blocks)
    f = fields_of(blocks)
    assert f["*pass_rate*"] == "0.6200" and "*Loss*" not in f and len(f) == 8
    assert "pass_rate 0.6200" in text and "loss" not in text
    assert "pass_rate *0.6200*" in progress_text(rl, now=NOW)
    summary_text, summary = summary_blocks(rl | {"status": "succeeded"}, first_loss=0.1)
    validate_message(summary_text, summary)
    assert fields_of(summary)["*pass_rate*"] == "0.1000 → 0.6200" and "pass_rate 0.1000 → 0.6200" in summary_text
    assert "metric plots" in launch_confirmation(rl)
    before = fields_of(run_card(rl | {"metrics": {"reward": 1.0}}, now=NOW)[1])
    assert before["*pass_rate*"] == "—"  # not reported yet
    # a headline of loss, and a run JSON from before runs carried one, read as they always have
    for run in (make_run(headline="loss", plot=["loss"]), make_run()):
        text, blocks = run_card(run, now=NOW)
        assert fields_of(blocks)["*Loss*"] == "2.3146" and text.endswith("loss 2.3146")
        assert "loss curves" in launch_confirmation(run)


def test_a_remedied_runs_card_shows_its_lineage() -> None:
    entry = {
        "attempt": 2,
        "checkpoint_step": 30,
        "condition": "entropy_collapse",
        "signal_step": 35,
        "changes": [{"param": "temperature", "from": 1.0, "to": 2.0, "change": "temperature += 1"}],
    }
    text, blocks = run_card(make_run(attempt=2, lineage=[entry]), now=NOW)
    validate_message(text, blocks)
    said = json.dumps(blocks, ensure_ascii=False)
    assert "attempt 2 from checkpoint step 30 after entropy_collapse from step 35: temperature 1 \u2192 2" in said
    assert "adhesive_bandage" not in json.dumps(run_card(make_run(), now=NOW)[1]), "no lineage, no line"


def test_a_headline_metric_name_is_escaped_in_the_card() -> None:
    run = make_run(plot=["<b>&"], headline="<b>&", metrics={"<b>&": 1.0})
    text, blocks = run_card(run, now=NOW)
    assert fields_of(blocks)["*&lt;b&gt;&amp;*"] == "1.0000" and "&lt;b&gt;&amp; 1.0000" in text


def test_a_queued_runs_card_names_no_ray_job_until_it_is_admitted() -> None:
    queued = make_run("queued", step=None, queue_position=2, purpose="training", started_at=None)
    meta = " ".join(mrkdwn_texts(run_card(queued)[1]))
    assert "not on Ray yet" in meta and "labbot-r1a2-1" not in meta  # the id is reserved, Ray has no such job yet
    admitted = " ".join(mrkdwn_texts(run_card(make_run("pending", queue_position=None))[1]))
    assert "Ray job `labbot-r1a2-1`" in admitted and "not on Ray yet" not in admitted


def test_an_eval_runs_card_shows_samples_and_the_pass_rate_not_a_loss() -> None:
    run = make_run(
        job="eval", step=3, checkpoint_step=None, params={"suite": "suite-1", "solver": "gold"},
        metrics={"samples_done": 3, "samples_total": 12, "pass_rate": 0.6667}, headline="pass_rate",
    )  # fmt: skip
    text, blocks = run_card(run, now=NOW)
    f = fields_of(blocks)
    assert f["*Samples*"] == "3 / 12" and f["*pass_rate*"] == "0.6667"
    assert not {"*Loss*", "*Throughput*", "*Checkpoint*", "*Step*"} & set(f)
    validate_message(text, blocks)


def test_the_card_shows_the_node_a_run_is_on_and_what_a_queued_run_waits_for() -> None:
    node = {"id": "a95ab0918b0d2f86f98abac4dbc2813e0f686757f02aed9c8b3a7e35", "name": "10.0.0.7"}
    text, blocks = run_card(make_run("running", attempt=2, node=node), now=NOW)
    assert fields_of(blocks)["*Attempt*"] == "2 · on 10.0.0.7 (a95ab091)"
    validate_message(text, blocks)
    ended = fields_of(run_card(make_run("succeeded", attempt=2, node=node), now=NOW)[1])
    assert ended["*Attempt*"] == "2", "an ended run is on no node"
    waiting = make_run("queued", step=None, queue_position=1, waiting_for="a node with accelerator=1", started_at=None)
    status = fields_of(run_card(waiting, now=NOW)[1])["*Status*"]
    assert "waiting for a node with accelerator=1" in status and "in line" not in status
