"""The Slack front-end in HTTP mode, end to end: a real `labbot serve` with its Bolt app at POST /slack/events,
signed requests as Slack sends them, the real slack_sdk client talking to a local Slack Web API fake, a real Ray head.

The story: `/lab launch tiny-lm` → run card in the channel → thread updates → loss plot upload → completion summary;
and what it must withstand (forged/stale requests, retries, double clicks, bots, 429/5xx, bad input, limits)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.slack import SlackFake
from slack_driver import OWNER, SECRET, SlackSide, slack_env
from support import SMALL, Serve, wait_for

from labbot.bot.slack.payloads import JSON, signed, slash_command
from labbot.training.ray_cluster import RayConnection

OTHER, ADMIN = "U0BOB00001", "U0ADMIN001"
TOML = f"""
[slack]
card_every = "2s"
progress_every = "3s"
plot_milestones = [50]

[roles]
admins = ["{ADMIN}"]

[jobs.sleeper]
entrypoint = "sleep 300"
description = "holds a run open"
"""


@pytest.fixture(scope="module")
def slack(tmp_path_factory: pytest.TempPathFactory, ray_head: RayConnection) -> Iterator[SlackSide]:
    home = tmp_path_factory.mktemp("slack-home")
    (home / "labbot.toml").write_text(TOML)
    fake = SlackFake(users={OWNER: "alice", OTHER: "bob", ADMIN: "admin"})
    fake.start()
    env = slack_env(fake, home / "labbot.toml")
    serve = Serve(home / "state", ray_address=ray_head.address, ray_token=ray_head.token, extra_env=env).start()
    side = SlackSide(fake, serve)
    try:
        yield side
        fake.check_against_sdk()  # the surfaces' calls as slack_sdk's signatures send them
        fake.check_against_spec()  # every call labbot made has the shape Slack's published spec gives it
    finally:
        serve.stop()
        fake.stop()


def test_launch_from_slack_card_thread_plot_summary(slack: SlackSide) -> None:
    run_id = slack.launched(f"launch tiny-lm steps=400 checkpoint_every=100 {SMALL}")
    card = slack.card(run_id)
    assert "tiny-lm" in card.text and any(b["type"] == "actions" for b in card.blocks)
    run = slack.run(run_id)
    assert run["owner"] == OWNER and run["thread_ts"] == card.ts and run["channel"] == slack.ws.channel

    def finished() -> bool:
        texts = [m.text for m in slack.thread(run_id)]
        return any("finished" in t for t in texts)

    wait_for(finished, timeout=120, interval=0.5, what="the completion summary in the thread")
    thread = slack.thread(run_id)
    texts = [m.text for m in thread]
    assert "launched" in texts[0]  # the launch confirmation opens the thread
    files = [f for m in thread for f in m.files]
    assert files and all(f["name"].endswith(".png") for f in files)  # loss plot(s): 50% and final
    png = slack.fake.file_bytes(files[-1]["id"])
    assert png.startswith(b"\x89PNG")
    card = slack.card(run_id)
    assert card.edited and "succeeded" in json.dumps(card.blocks)  # the card was kept current
    assert_card_rate_limited(slack.fake, card.ts, every_s=2.0)


def assert_card_rate_limited(fake: SlackFake, ts: str, *, every_s: float) -> None:
    """The card's rule, update by update: a change of status goes out at once, anything else (a step, a metric) at
    most once per ``every_s`` (``card_every``). Counted against the rule, not a total: a loaded machine that makes the
    job run longer makes more updates, each still on time."""
    updates = sorted((c for c in fake.calls_to("chat.update") if c.params.get("ts") == ts), key=lambda c: c.time)
    assert updates, "the card was never updated"
    statuses = [re.search(r": (\w+), step", str(c.params.get("text", ""))) for c in updates]
    assert all(statuses), [c.params.get("text") for c in updates]
    shown = [m.group(1) for m in statuses if m]
    for i in range(1, len(updates)):
        gap = updates[i].time - updates[i - 1].time
        # 0.5 s for the two calls' trips to the fake, which need not take equally long
        assert shown[i] != shown[i - 1] or gap >= every_s - 0.5, (
            f"card update {i} ({shown[i]}) came {gap:.2f}s after the one before with no change of status: "
            f"card updates must be rate-limited to one per {every_s:g}s"
        )


def test_forged_unsigned_and_stale_requests_are_refused(slack: SlackSide) -> None:
    before = len(slack.fake.calls)
    body = slash_command(slack.ws, user=OWNER, user_name="alice", text="launch sleeper")
    forged = signed(body, "not-the-secret")
    stale = signed(body, SECRET, timestamp=int(time.time()) - 6 * 60)
    for headers in (forged, stale, {"Content-Type": "application/x-www-form-urlencoded"}):
        assert slack.post(body, headers=headers).status_code == 401
    assert len(slack.fake.calls) == before
    # nothing may happen after the refusal either: the same command, signed, goes the same way after them (a launch,
    # spawned on the same TaskSet); once its run is launched, a refused request let through would have launched too
    cards_before = [m.ts for m in slack.fake.messages(slack.ws.channel) if m.bot_id]
    run_id = slack.launched("launch sleeper")
    with slack.serve.client() as api:
        assert [r["id"] for r in api.get("/runs").json()["runs"] if r["job"] == "sleeper"] == [run_id]
    cards = [m for m in slack.fake.messages(slack.ws.channel) if m.bot_id and m.ts not in cards_before]
    assert len(cards) == 1, "one card: the signed command's"
    slack.command(f"stop {run_id}")


def test_bad_input_gets_an_ephemeral_answer_and_does_nothing(slack: SlackSide) -> None:
    cases = [
        ("lanch tiny-lm", "did you mean 'launch'"),
        ("stop", "needs RUN_ID"),
        ("launch tiny-lm steps=ten", "expects an integer"),
        ("launch nosuchjob", "unknown job 'nosuchjob'"),
        ("status zzzzzz", "unknown run 'zzzzzz'"),
        ("launch tiny-lm --stall-after soon", "duration"),
    ]
    with slack.serve.client() as api:
        runs_before = len(api.get("/runs").json()["runs"])
    for text, expected in cases:
        r = slack.command(text)
        answered = r.text if r.content else ""
        wait_for(
            lambda e=expected, a=answered: e in a or any(e in t for t in slack.ephemerals()),
            timeout=10,
            what=f"an ephemeral answer to {text!r} saying {expected!r}",
        )
    with slack.serve.client() as api:
        assert len(api.get("/runs").json()["runs"]) == runs_before


def test_permission_retries_double_clicks(slack: SlackSide) -> None:
    run_id = slack.launched("launch sleeper")
    wait_for(lambda: slack.run(run_id)["status"] == "running", timeout=30, what="the sleeper to run")
    # someone else may not stop it, by command or by button
    slack.command(f"stop {run_id}", user=OTHER)
    slack.click("stop", run_id, user=OTHER)
    wait_for(lambda: len([t for t in slack.ephemerals(OTHER) if "only the run's owner" in t]) >= 2, what="refusals")
    assert slack.run(run_id)["status"] == "running"
    # the owner double-clicks Stop: acted on once
    slack.click("stop", run_id)
    slack.click("stop", run_id)
    wait_for(lambda: slack.run(run_id)["status"] == "stopped", what="the stop")
    wait_for(lambda: "stopped the run" in json.dumps(slack.card(run_id).blocks), what="the card to show who stopped it")
    assert json.dumps(slack.card(run_id).blocks).count("stopped the run") == 1
    # an admin may restart someone else's run; a run action after the double click, spawned after it on the same
    # TaskSet: once it is done, a second stop for the second click would have been told to the owner already
    slack.command(f"restart {run_id}", user=ADMIN)
    wait_for(lambda: slack.run(run_id)["attempt"] == 2, what="the admin's restart")
    told = wait_for(  # the owner's ephemeral can trail the restart on a loaded machine: wait for one, then count
        lambda: [t for t in slack.ephemerals(OWNER) if f"`{run_id}`: stopped the run" in t], what="the stop told"
    )
    stops = [t for t in slack.ephemerals(OWNER) if f"`{run_id}`: stopped the run" in t]
    assert told and len(stops) == 1, "the double click acted once"
    slack.command(f"stop {run_id}")


def test_thread_replies_stored_once_bots_ignored(slack: SlackSide) -> None:
    run_id = slack.launched("launch sleeper")
    root = slack.card(run_id).ts
    msg = slack.fake.user_message(slack.ws.channel, OTHER, "why is the loss flat?", thread_ts=root)
    event = slack.fake.validated_event(msg, event_id="Ev0REPLY1")
    body = json.dumps(event)
    assert slack.post(body, content_type=JSON).status_code == 200
    retry = signed(body, SECRET, content_type=JSON) | {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    assert slack.post(body, content_type=JSON, headers=retry).status_code == 200
    wait_for(lambda: any("No model is configured" in m.text for m in slack.thread(run_id)), what="the no-model note")
    # a bot's message in the thread (another bot, or labbot itself) triggers nothing
    bot_msg = slack.fake.user_message(slack.ws.channel, OTHER, "beep", thread_ts=root)
    bot_event = slack.fake.event_payload(bot_msg, event_id="Ev0BOT0001")
    bot_event["event"]["bot_id"] = "B0OTHERBOT"
    slack.post(json.dumps(bot_event), content_type=JSON)
    second = slack.fake.user_message(slack.ws.channel, OWNER, "second reply", thread_ts=root)
    slack.post(json.dumps(slack.fake.validated_event(second, event_id="Ev0REPLY2")), content_type=JSON)
    from labbot.storage.db import Database
    from labbot.storage.models import ThreadMessage

    db = Database(f"sqlite:///{slack.serve.home / 'labbot.db'}")

    def stored() -> list[str]:
        with db.session() as s:
            return [m.text for m in s.query(ThreadMessage).filter_by(run_id=run_id).order_by(ThreadMessage.id)]

    # the second reply is the later event: handled after the retry and the bot's message (each spawned before it on
    # the same TaskSet), so once it is stored they would have been stored, and noted, already
    wait_for(lambda: "second reply" in stored(), what="the second reply stored")
    notes = [m for m in slack.thread(run_id) if "No model is configured" in m.text]
    assert len(notes) == 1, "said once per thread"
    assert stored() == ["why is the loss flat?", "second reply"]  # the retry and the bot's message are not stored
    slack.command(f"stop {run_id}")


def test_slack_429_and_500_are_retried_without_duplicates(slack: SlackSide) -> None:
    slack.fake.fail_next(429, on="chat.postMessage", retry_after=1)
    slack.fake.fail_next(500, on="chat.postMessage")
    # launched() returns once the launch confirmation is in the card's thread: posted after the card, so every
    # attempt at posting the card (a retry that posted it twice included) is over by then
    run_id = slack.launched("launch sleeper")
    cards = [m for m in slack.fake.messages(slack.ws.channel) if m.bot_id and run_id in json.dumps(m.blocks)]
    assert len(cards) == 1, "one card, not one per attempt"
    failed = [c for c in slack.fake.calls_to("chat.postMessage") if c.failed]
    assert len(failed) >= 2
    slack.command(f"stop {run_id}")


def test_long_logs_are_uploaded_not_rejected(slack: SlackSide) -> None:
    run_id = slack.launched(
        "launch tiny-lm steps=2000 log_every=1 num_threads=1 batch_size=2 block_size=16 n_layer=1 n_head=2 n_embd=16"
    )
    wait_for(lambda: (slack.run(run_id)["step"] or 0) > 900, timeout=120, what="a thousand log lines")
    r = slack.command(f"logs {run_id} --tail 5000")
    assert r.status_code == 200 and not r.content, r.text
    wait_for(
        lambda: any(f["name"] == f"{run_id}-logs.txt" for m in slack.thread(run_id) for f in m.files),
        timeout=20,
        what="the logs file in the thread",
    )
    slack.command(f"stop {run_id}")


def test_manifest_grants_what_labbot_uses() -> None:
    import yaml

    manifest = yaml.safe_load((Path(__file__).resolve().parents[2] / "slack-manifest.yaml").read_text())
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {"chat:write", "commands", "files:write", "app_mentions:read", "channels:history"} <= scopes
    assert [c["command"] for c in manifest["features"]["slash_commands"]] == ["/lab"]
    settings = manifest["settings"]
    assert {"app_mention", "message.channels", "reaction_added", "reaction_removed"} <= set(
        settings["event_subscriptions"]["bot_events"]
    )
    assert "reactions:read" in scopes  # 👍/👎 reactions are feedback
    assert settings["interactivity"]["is_enabled"] and settings["socket_mode_enabled"]
    # Slack's agent surfaces: streamed answers and the status line, suggested prompts, the Home tab
    assert {"assistant:write", "chat:write", "im:history"} <= scopes
    assert {"app_home_opened", "assistant_thread_started", "message.im"} <= set(
        settings["event_subscriptions"]["bot_events"]
    )
    features = manifest["features"]
    assert features["app_home"]["home_tab_enabled"] and features["assistant_view"]["assistant_description"]
    assert 0 < len(features["assistant_view"]["suggested_prompts"]) <= 4


def test_without_a_model_a_mention_gets_a_plain_answer_on_how_to_configure_one(slack: SlackSide) -> None:
    msg = slack.fake.user_message(slack.ws.channel, OWNER, f"<@{slack.fake.bot_user_id}> why did my run fail?")
    event = slack.fake.validated_event(msg, event_id="Ev0MENTION1")
    assert event["event"]["type"] == "app_mention"
    assert slack.post(json.dumps(event), content_type=JSON).status_code == 200
    answer = wait_for(
        lambda: next((m for m in slack.fake.messages(slack.ws.channel, thread_ts=msg.ts)[1:] if m.bot_id), None),
        what="the answer to the mention",
    )
    assert "ANTHROPIC_API_KEY" in answer.text  # what to set; everything else keeps working
    assert slack.command("runs").status_code == 200


def test_lab_artifacts_lists_your_agents_artifacts_and_posts_one_here(slack: SlackSide) -> None:
    with slack.serve.client() as api:
        mine = api.post(
            "/artifacts",
            params={"agent": f"{OWNER}/assistant", "name": "diagnosis.md"},
            content=b"# slow: dataloader\n",
        ).json()["artifact"]
        theirs = api.post("/artifacts", params={"agent": f"{OTHER}/assistant", "name": "secret.md"}, content=b"x")
        theirs_id = theirs.json()["artifact"]["id"]
    assert slack.command("artifacts").status_code == 200
    listing = wait_for(
        lambda: next((t for t in slack.ephemerals() if "diagnosis.md" in t or "artifacts" in t), None),
        timeout=15,
        what="the listing",
    )
    shown = json.dumps([m.blocks for m in slack.fake.ephemeral_messages(slack.ws.channel, OWNER)])
    assert mine["id"] in shown and "diagnosis.md" in shown and "assistant" in shown and theirs_id not in shown, listing

    assert slack.command(f"artifacts {theirs_id}").status_code == 200  # another researcher's agent's: not yours
    wait_for(lambda: any("none of your agents has" in t for t in slack.ephemerals()), timeout=15, what="refusal")
    assert slack.command(f"artifacts {mine['id']}").status_code == 200
    posted = wait_for(
        lambda: next((m for m in slack.fake.messages(slack.ws.channel) if "diagnosis.md" in str(m.files)), None),
        timeout=15,
        what="the file in the channel",
    )
    assert slack.fake.file_bytes(posted.files[0]["id"]) == b"# slow: dataloader\n"
