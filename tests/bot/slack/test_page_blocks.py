"""How a page looks in Slack (bot/slack/blocks/pages.py): each state and level, Block Kit's limits, escaping, the list.

Pages and runs are built as the pager and the API see them (``incident_view``, ``run_view`` over model rows); every
message is checked with the emulator's Block Kit rules (what Slack would refuse) and slack_sdk's block models.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from labbot.agents.babysitter.pager import incident_view
from labbot.bot.console.blocks import block_errors
from labbot.bot.slack.blocks.limits import MAX_BLOCKS, MAX_MESSAGE_TEXT, MAX_SECTION_TEXT
from labbot.bot.slack.blocks.pages import page_message, pages_list
from labbot.storage.models import Incident, Run
from labbot.training.run_json import run_view

ALICE, BOB = "U0ALICE001", "U0BOB00001"
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def make_page(**over: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "id": "pk7m2x",
        "key": "labbot-r0blocks1-hung",
        "run_id": "r0blocks1",
        "kind": "hung",
        "severity": "page",
        "state": "triggered",
        "summary": "step stuck at 40 for 30s",
        "detail": {},
        "escalation_level": 0,
        "occurrence": 1,
        "reopened": 0,
        "pagerduty_open": False,
        "triggered_at": T0,
    }
    fields.update(over)
    return incident_view(Incident(**fields))


def make_run(status: str = "running", **over: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "id": "r0blocks1",
        "job": "tiny-lm",
        "name": "lr-sweep-3",
        "owner": ALICE,
        "status": status,
        "attempt": 1,
        "config": {"params": {"steps": 200}},
        "metrics": {},
    }
    fields.update(over)
    return run_view(Run(**fields))


def check_limits(text: str, blocks: list[dict[str, Any]]) -> None:
    """What Slack would accept: the emulator's Block Kit rules, then slack_sdk's models as a second opinion."""
    assert 1 <= len(text) <= MAX_MESSAGE_TEXT
    assert 1 <= len(blocks) <= MAX_BLOCKS
    assert block_errors(blocks) == []
    for block in blocks:
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= MAX_SECTION_TEXT
        parsed = Block.parse(block)
        assert parsed is not None
        parsed.validate_json()


def mrkdwn_texts(text: str, blocks: list[dict[str, Any]]) -> list[str]:
    """Every string Slack parses as mrkdwn: the notification text and the blocks' text objects."""
    out = [text]
    for b in blocks:
        if b["type"] == "section":
            out.append(b["text"]["text"])
        elif b["type"] == "context":
            out += [e["text"] for e in b["elements"]]
    return out


def action_ids(blocks: list[dict[str, Any]]) -> list[str]:
    return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]


def context(blocks: list[dict[str, Any]]) -> str:
    return " ".join(e["text"] for b in blocks if b["type"] == "context" for e in b["elements"])


def test_a_triggered_page_mentions_the_owner_and_offers_ack_resolve_and_stop() -> None:
    page, run = make_page(), make_run()
    text, blocks = page_message(page, run, now=T0 + timedelta(minutes=1))
    check_limits(text, blocks)
    assert text == f"<@{ALICE}> hung on run r0blocks1: step stuck at 40 for 30s"
    head = blocks[0]["text"]["text"]
    assert head.splitlines() == [
        ":rotating_light: *hung* — run `r0blocks1` (lr-sweep-3)",
        "step stuck at 40 for 30s",
        f"Owner: <@{ALICE}>",
    ]
    assert context(blocks) == "page `pk7m2x` · triggered · level 0: the run's thread and its owner"
    assert action_ids(blocks) == ["page_ack", "page_resolve", "run_stop"]
    (actions,) = [b for b in blocks if b["type"] == "actions"]
    assert actions["block_id"] == "page_actions_pk7m2x"
    ack, resolve, stop = actions["elements"]
    assert ack["value"] == resolve["value"] == "pk7m2x" and stop["value"] == "r0blocks1"
    assert stop["style"] == "danger" and "lr-sweep-3" in stop["confirm"]["text"]["text"]


def test_an_acknowledged_page_says_who_and_drops_the_ack_button() -> None:
    page = make_page(state="acknowledged", acknowledged_by=BOB, acknowledged_at=T0 + timedelta(minutes=5))
    text, blocks = page_message(page, make_run())
    check_limits(text, blocks)
    assert blocks[0]["text"]["text"].startswith(":eyes: *hung*")
    assert f"acknowledged by <@{BOB}> at 12:05 UTC" in context(blocks)
    assert "level" not in context(blocks)
    assert action_ids(blocks) == ["page_resolve", "run_stop"]
    assert not text.startswith("<@")  # only a triggered page notifies the owner again


@pytest.mark.parametrize(
    ("by", "shown"),
    [("labbot", "labbot (the condition cleared)"), (BOB, f"<@{BOB}>"), ("cli:<eve>", "cli:&lt;eve&gt;")],
)
def test_a_resolved_page_has_no_buttons_and_no_log(by: str, shown: str) -> None:
    page = make_page(
        state="resolved",
        resolved_by=by,
        resolved_at=T0 + timedelta(minutes=9),
        detail={"log_tail": "Traceback (most recent call last)"},
    )
    text, blocks = page_message(page, make_run())
    check_limits(text, blocks)
    assert blocks[0]["text"]["text"].startswith(":white_check_mark: *hung*")
    assert f"resolved by {shown} at 12:09 UTC" in context(blocks)
    assert action_ids(blocks) == [] and not any(b["type"] == "actions" for b in blocks)
    assert "Traceback" not in str(blocks)


def test_a_warning_is_a_quiet_line_without_owner_or_level() -> None:
    page = make_page(kind="slow", severity="warning", summary="3.1 tokens/s, a third of the median")
    text, blocks = page_message(page, make_run())
    check_limits(text, blocks)
    assert blocks[0]["text"]["text"].startswith(":warning: *slow*")
    assert "Owner:" not in blocks[0]["text"]["text"] and "<@" not in text
    assert context(blocks) == "page `pk7m2x` · triggered"


def test_level_1_names_the_user_group_and_how_long_nobody_acknowledged() -> None:
    page = make_page(escalation_level=1)
    text, blocks = page_message(page, make_run(), level=1, usergroup="S0ONCALL", now=T0 + timedelta(minutes=15))
    check_limits(text, blocks)
    lines = blocks[0]["text"]["text"].splitlines()
    assert lines[1] == "<!subteam^S0ONCALL> Escalated: nobody has acknowledged this page for 15m."
    assert "level 1: the on-call channel" in context(blocks)
    _, blocks = page_message(page, make_run(), level=1, renotify=2, now=T0 + timedelta(minutes=45))
    lines = blocks[0]["text"]["text"].splitlines()
    assert lines[1] == "Escalated: nobody has acknowledged this page for 45m."  # no group configured
    assert lines[2] == "Reminder 2: still unacknowledged."


def test_a_cluster_page_has_no_run_owner_or_stop_button() -> None:
    page = make_page(key="labbot-cluster-infra", run_id=None, kind="infra", summary="the Ray API has not answered")
    text, blocks = page_message(page, None)
    check_limits(text, blocks)
    assert text == "infra on the Ray cluster: the Ray API has not answered"
    assert blocks[0]["text"]["text"].startswith(":rotating_light: *infra* — the Ray cluster")
    assert "Owner:" not in blocks[0]["text"]["text"]
    assert action_ids(blocks) == ["page_ack", "page_resolve"]


def test_a_finished_run_has_no_stop_button() -> None:
    _, blocks = page_message(make_page(kind="failed"), make_run("failed"))
    assert action_ids(blocks) == ["page_ack", "page_resolve"]


def test_a_huge_summary_and_log_tail_stay_within_block_kit_limits() -> None:
    tail = "\n".join(f"step {i}: loss 2.{i:04d} grad_norm 1.{i:03d}" for i in range(400))
    tail += "\nRuntimeError: CUDA out of memory"
    assert len(tail) > 10_000
    page = make_page(summary="s" * 5000, detail={"log_tail": tail})
    for state in ("triggered", "acknowledged"):
        text, blocks = page_message({**page, "state": state}, make_run(name="n" * 300), level=1, usergroup="S0X")
        check_limits(text, blocks)
        log = blocks[1]["text"]["text"]
        assert log.startswith("```\n") and log.endswith("\n```")
        assert "RuntimeError: CUDA out of memory" in log  # the end of a log is what says what happened


def test_user_supplied_text_is_escaped() -> None:
    page = make_page(
        summary="loss <nan> & grad <!channel>",
        detail={"log_tail": "x < y && z > 0\n```\n<!here> <https://evil.example|click>\n```"},
    )
    run = make_run(name="<b>sweep</b> & co")
    for state in ("triggered", "acknowledged"):
        text, blocks = page_message({**page, "state": state}, run, level=1, usergroup="S0ONCALL", now=T0)
        check_limits(text, blocks)
        for s in mrkdwn_texts(text, blocks):
            for raw in ("<nan>", "<!channel>", "<!here>", "<https://evil", "<b>", "& grad", "&& z"):
                assert raw not in s, (raw, s)
        assert "loss &lt;nan&gt; &amp; grad &lt;!channel&gt;" in blocks[0]["text"]["text"]
        assert "&lt;b&gt;sweep&lt;/b&gt; &amp; co" in blocks[0]["text"]["text"]
        log = blocks[1]["text"]["text"]
        assert "x &lt; y &amp;&amp; z &gt; 0" in log
        assert log.count("```") == 2  # the log's own fences cannot close the code block early
        stop = [e for b in blocks if b["type"] == "actions" for e in b["elements"] if e["action_id"] == "run_stop"]
        assert "&lt;b&gt;sweep" in stop[0]["confirm"]["text"]["text"]


def test_the_pages_list_when_there_are_none() -> None:
    assert pages_list([]) == ":white_check_mark: no open pages. (`/lab pages --all` shows resolved ones too.)"
    assert "`/labbot pages --all`" in pages_list([], command="/labbot")


def test_the_pages_list_shows_one_line_per_page_and_how_to_ack() -> None:
    pages = [
        make_page(),
        make_page(
            id="pq3w9z",
            key="labbot-cluster-infra",
            run_id=None,
            kind="infra",
            state="acknowledged",
            acknowledged_by=BOB,
            escalation_level=1,
            summary="Ray <down> & out " + "x" * 400,
        ),
    ]
    lines = pages_list(pages).splitlines()
    assert len(lines) == 3
    assert lines[0] == (
        ":rotating_light: `pk7m2x` *hung* run `r0blocks1` — triggered, level 0 — step stuck at 40 for 30s"
    )
    assert lines[1].startswith(
        f":eyes: `pq3w9z` *infra* cluster — acknowledged, level 1, acked by <@{BOB}> — Ray &lt;down&gt; &amp; out "
    )
    assert len(lines[1]) < 320 and lines[1].endswith("…")
    assert lines[2] == "_acknowledge with `/lab ack PAGE`_"
    assert pages_list(pages, command="/labbot").endswith("_acknowledge with `/labbot ack PAGE`_")
    assert "acknowledge with" not in pages_list(pages[1:]), "no footer asking to acknowledge what is acknowledged"


def _buttons(blocks: list[dict[str, Any]]) -> list[str]:
    return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]


def test_file_incident_shows_where_linear_is_set_up_until_the_page_is_filed_then_the_link() -> None:
    run = make_run()
    assert "page_file" not in _buttons(page_message(make_page(), run)[1])  # Linear not set up: no button
    _, blocks = page_message(make_page(), run, file_incidents=True)
    assert _buttons(blocks) == ["page_ack", "page_resolve", "page_file", "run_stop"]
    assert block_errors(blocks) == []
    link = {"identifier": "ENG-7", "url": "https://linear.app/acme/issue/ENG-7", "by": ALICE}
    _, filed = page_message(make_page(links={"linear": link}), run, file_incidents=True)
    assert "page_file" not in _buttons(filed)
    status = next(b for b in filed if b["type"] == "context")["elements"][0]["text"]
    assert "Linear: <https://linear.app/acme/issue/ENG-7|ENG-7>" in status
    _, resolved = page_message(make_page(state="resolved", links={"linear": link}), run, file_incidents=True)
    assert _buttons(resolved) == [] and "ENG-7" in str(resolved)


def test_a_metric_alerts_page_and_the_pages_list_name_the_alert() -> None:
    page = make_page(
        kind="metric",
        key="labbot-r0blocks1-metric:pass_rate-below",
        summary="alert pass_rate-below: pass_rate 0.12 is below 0.2 for 11m (pass_rate below 0.2 for 10m)",
        detail={"alert": "pass_rate-below", "last": 0.12},
    )
    text, blocks = page_message(page, make_run())
    check_limits(text, blocks)
    assert blocks[0]["text"]["text"].startswith(":rotating_light: *metric pass_rate-below* — run `r0blocks1`")
    assert "metric pass_rate-below on run r0blocks1: alert pass_rate-below: pass_rate 0.12" in text
    listed = pages_list([page])
    assert "*metric pass_rate-below* run `r0blocks1`" in listed
