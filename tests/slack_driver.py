"""Driving a real `labbot serve` as Slack does: signed slash commands and button clicks into `POST /slack/events`,
and reading what labbot posted from the Slack Web API fake (the e2e tests of the Slack front-end and the pager)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from fakes.anthropic import FakeAnthropic, SeenRequest, Step
from fakes.slack import SlackFake
from support import Serve, wait_for

from labbot.bot.slack.payloads import JSON, Workspace, button_click, signed, slash_command

SECRET = "test-signing-secret"
OWNER = "U0ALICE001"


def slack_env(fake: SlackFake, config: Path) -> dict[str, str]:
    """What a `labbot serve` needs to talk to the (started) Slack fake: its bot token, the signing secret the
    driver signs with, the fake's Web API URL, and the labbot.toml to read."""
    assert fake.url is not None, "start the Slack fake first"
    return {
        "SLACK_BOT_TOKEN": fake.bot_token,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": str(fake.url),
        "LABBOT_CONFIG": str(config),
    }


@contextlib.contextmanager
def agents_lab(
    root: Path,
    ray: Any,
    *,
    toml: str,
    codebase: Path,
    model: Callable[[SeenRequest], Step],
    users: dict[str, str] | None = None,
) -> Iterator[tuple[SlackSide, FakeAnthropic]]:
    """A real `labbot serve` with agents: Slack and Anthropic faked at their HTTP edge (``model`` scripts every
    answer), the `codebase` server on ``codebase``; the Slack calls checked against Slack's spec at the end."""
    home = root / "home"
    home.mkdir()
    (home / "labbot.toml").write_text(toml)
    with FakeAnthropic() as anthropic:
        anthropic.answer_with(model)
        fake = SlackFake(users=users or {OWNER: "alice"})
        fake.start()
        env = {
            **slack_env(fake, home / "labbot.toml"),
            "ANTHROPIC_API_KEY": anthropic.api_key,
            "ANTHROPIC_BASE_URL": anthropic.base_url,
            "LABBOT_CODEBASE_ROOT": str(codebase),
        }
        serve = Serve(home / "state", ray_address=ray.address, ray_token=ray.token, extra_env=env).start()
        try:
            yield SlackSide(fake, serve), anthropic
            fake.check_against_sdk()
            fake.check_against_spec()
        finally:
            serve.stop()
            fake.stop()


class SlackSide:
    def __init__(self, fake: SlackFake, serve: Serve) -> None:
        self.fake = fake
        self.serve = serve
        self.ws = Workspace(team_id=fake.team_id, app_id=fake.app_id, channel=fake.default_channel)
        self.http = httpx.Client(timeout=30)

    def post(
        self,
        body: str,
        *,
        content_type: str = "application/x-www-form-urlencoded",
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        h = signed(body, SECRET, content_type=content_type) if headers is None else headers
        start = time.monotonic()
        r = self.http.post(f"{self.serve.url}/slack/events", content=body.encode(), headers=h)
        assert time.monotonic() - start < 3, "Slack needs an answer within 3 s"
        return r

    def command(self, text: str, user: str = OWNER) -> httpx.Response:
        return self.post(slash_command(self.ws, user=user, user_name=user.lower(), text=text))

    def click(self, verb: str, run_id: str, user: str = OWNER) -> httpx.Response:
        ts = self.card(run_id).ts
        return self.post(button_click(self.ws, user=user, action_id=f"run_{verb}", value=run_id, message_ts=ts))

    def card(self, run_id: str) -> Any:
        for m in self.fake.messages(self.ws.channel):
            if m.bot_id and any(
                el.get("value") == run_id for b in m.blocks if b.get("type") == "actions" for el in b["elements"]
            ):
                return m
        return None

    def thread(self, run_id: str) -> list[Any]:
        return self.fake.messages(self.ws.channel, thread_ts=self.card(run_id).ts)[1:]

    def ephemerals(self, user: str = OWNER) -> list[str]:
        return [m.text for m in self.fake.ephemeral_messages(self.ws.channel, user)]

    def launched(self, text: str, user: str = OWNER, *, recorded: bool = True) -> str:
        """Launch from Slack; return the run id once its card is in the channel and (``recorded``) labbot has
        recorded its thread. ``recorded=False`` returns at the card, for a test that takes Slack down at once."""
        before = {m.ts for m in self.fake.messages(self.ws.channel)}
        assert self.command(text, user).status_code == 200
        card = wait_for(
            lambda: next((m for m in self.fake.messages(self.ws.channel) if m.ts not in before and m.bot_id), None),
            timeout=30,
            what="the run card",
        )
        # labbot knows the thread once it has posted the launch confirmation in it (the card is visible a moment
        # before its thread is recorded: a reply sent in that moment would not be a reply to a run yet)
        wait_for(
            lambda: not recorded or any(m.bot_id for m in self.fake.messages(self.ws.channel, thread_ts=card.ts)[1:]),
            timeout=30,
            what="the launch confirmation in the run's thread",
        )
        return next(el["value"] for b in card.blocks if b.get("type") == "actions" for el in b["elements"])

    def run(self, run_id: str) -> dict[str, Any]:
        with self.serve.client() as api:
            return api.get(f"/runs/{run_id}").json()["run"]

    def page_messages(self, channel: str | None = None, *, run_id: str | None = None) -> list[Any]:
        """Messages showing a page (their blocks carry a page's Ack/Resolve buttons, or its status line)."""
        msgs = self.thread(run_id) if run_id is not None else self.fake.messages(channel or self.ws.channel)
        return [m for m in msgs if m.bot_id and "page `" in str(m.blocks)]

    def click_page(self, verb: str, page_id: str, message: Any, user: str = OWNER) -> httpx.Response:
        ws = Workspace(team_id=self.ws.team_id, app_id=self.ws.app_id, channel=message.channel)
        body = button_click(ws, user=user, action_id=f"page_{verb}", value=page_id, message_ts=message.ts)
        return self.post(body)

    def reply(self, run_id: str, words: str, user: str = OWNER) -> None:
        """A researcher's reply in the run's thread (an agent answers it when a model is configured)."""
        thread_ts = self.card(run_id).ts
        msg = self.fake.user_message(self.ws.channel, user, words, thread_ts)
        event = self.fake.event_payload(msg, team_id=self.ws.team_id, api_app_id=self.ws.app_id)
        assert self.post(json.dumps(event), content_type=JSON).status_code == 200

    def said(self, run_id: str, words: str) -> Any:
        """labbot's first message in the run's thread that contains ``words``, or None."""
        return next((m for m in self.thread(run_id) if m.bot_id and words in m.text), None)

    def prompt(self, run_id: str) -> Any:
        """The first approval prompt (Approve / Deny) in the run's thread, or None."""
        return next((m for m in self.thread(run_id) if "approval_approve" in json.dumps(m.blocks)), None)

    def pages(self, **params: Any) -> list[dict[str, Any]]:
        with self.serve.client() as api:
            return list(api.get("/pages", params=params).json()["pages"])
