"""``labbot console``: the whole bot in a terminal, with Slack replaced by the in-process Web API emulator.

The real Bolt app, the real slack_sdk client (pointed at the emulator) and every handler run exactly as in HTTP
mode: what you type becomes a signed request to ``POST /slack/events``; what labbot posts to "Slack" is printed
as the channel and its threads change. Works interactively and with piped input; at the end of piped input it
waits for the runs launched in this session to finish (their summaries posted), then exits. An agent's answer is
shown as Slack streams it (each piece as it arrives, ``│ ▸``), with the assistant status line (``│ · labbot is
reading the run's logs…``); Slack's emoji shortcodes are shown as the emoji.

    /lab launch tiny-lm steps=100     a slash command (any /lab subcommand)
    reply RUN_ID some text            a reply in the run's thread
    click stop RUN_ID                 press a button on the run's card (stop | restart; `yes` confirms)
    click ack PAGE_ID                 press a button on a page (ack | resolve | stop: its run's Stop)
    click approve REQUEST_ID          answer an agent's request to run a tool (approve | deny)
    home                              your App Home tab: your runs, pages, agents, evals, capacity
    home older | home newer           another page of your runs there
    ask some text                     a question in the assistant container (the app's DM; suggested prompts)
    vote up | vote down               👍 or 👎 the agent's latest answer (a 👎 asks what went wrong)
    comment SOME TEXT                 answer that question (the modal a 👎 opened)
    @labbot some text                 mention the bot in the channel
    anything else                     a message in the channel
"""

from __future__ import annotations

import asyncio
import dataclasses
import getpass
import json
import re
import secrets
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import httpx
from anyio import to_thread
from sqlalchemy import select

from labbot.agents.fleet.demo_model import TRY
from labbot.agents.fleet.model import ModelSettings
from labbot.bot.config import Settings, SlackSettings
from labbot.bot.console.demo_project import write_demo_project
from labbot.bot.console.emoji import emojize
from labbot.bot.console.emulator import SlackEmulator
from labbot.bot.console.model import EmulatorEvent, Message
from labbot.bot.integrations import agents_line
from labbot.bot.slack.payloads import (
    JSON,
    Workspace,
    app_home_opened,
    assistant_thread_started,
    button_click,
    feedback_click,
    home_click,
    signed,
    slash_command,
    view_submission,
)
from labbot.common.api_client import OWNER_ENV
from labbot.storage.models import Run, RunThread

_USER_REF = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_CHANNEL_REF = re.compile(r"<#([CGD][A-Z0-9]+)(?:\|([^>]*))?>")
_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|([^>]*))?>")
PARTIAL_SHORTCODE = re.compile(r":[a-z0-9_+\-]*$")  # a line's end that may be an emoji shortcode's start
COMPLETE_BEFORE = re.compile(r":[a-z0-9_+\-]+$")

CONSOLE_USER = "U0CONSOLE1"
ONCALL_CHANNEL = "C0ONCALL01"  # level 1 of the paging policy goes here unless labbot.toml names another
HELP = __doc__.split("\n\n", 2)[2] if __doc__ else ""
_MRKDWN = re.compile(r"[*`]")


def _confirm_text(confirm: Any) -> str | None:
    """A button's confirm dialog as one line (its title and text), or None when it has none."""
    if not isinstance(confirm, dict):
        return None
    title = (confirm.get("title") or {}).get("text", "")
    text = _MRKDWN.sub("", str((confirm.get("text") or {}).get("text", "")))
    return " — ".join(part for part in (title, text) if part) or "Are you sure?"


def blocks_text(blocks: list[dict[str, Any]]) -> list[str]:
    """Block Kit as terminal lines: headers, sections, fields, context, buttons."""
    lines: list[str] = []
    for b in blocks:
        kind = b.get("type")
        if kind == "header":
            lines.append(f"▌ {b['text']['text']}")
        elif kind == "section":
            if b.get("text"):
                lines.extend(_MRKDWN.sub("", b["text"]["text"]).splitlines())
            if b.get("fields"):
                lines.append("  ".join(_MRKDWN.sub("", f["text"]).replace("\n", " ") for f in b["fields"]))
        elif kind == "context":
            lines.append("  ".join(_MRKDWN.sub("", e.get("text", "")) for e in b.get("elements", [])))
        elif kind == "actions":
            lines.append(" ".join(f"[{e['text']['text']}]" for e in b.get("elements", []) if e.get("type") == "button"))
        elif kind == "context_actions" and any(e.get("type") == "feedback_buttons" for e in b.get("elements", [])):
            lines.append("[👍] [👎]  (vote up | vote down)")
    return lines


class ConsoleView:
    """Prints the channel as it changes (called from the emulator's thread)."""

    def __init__(self, emulator: SlackEmulator, out: TextIO, files_dir: Path) -> None:
        self.emulator = emulator
        self.out = out
        self.files_dir = files_dir
        self._lock = threading.Lock()
        self.card_of: dict[str, str] = {}  # run id -> card ts, learned from the cards' buttons
        # (verb, value) -> (channel, ts, action_id, its confirm dialog's words or None) of the newest message with
        # that button: "click VERB VALUE"
        self.buttons: dict[tuple[str, str], tuple[str, str, str, str | None]] = {}
        # the newest agent answer's feedback buttons: (channel, ts, thread ts, {"up": value, "down": value})
        self.answer: tuple[str, str, str | None, dict[str, str]] | None = None
        # the streamed answer whose last line is still being written (its ts, the line's indent): its pieces go on
        # that line as they come, the way the answer grows in Slack
        self._open: tuple[str, str] | None = None
        self._held = ""  # the open line's tail that may be the start of an emoji shortcode (":arrow_"), kept back

    def __call__(self, event: EmulatorEvent) -> None:
        msg = event.message
        if event.kind == "deleted":
            return
        if event.kind == "appended" and self._open is not None and self._open[0] == msg.ts:
            self._write_on(event.detail)
            return
        if event.kind == "appended" and msg.streamed and event.detail.strip():
            # the answer goes on after another line came between (a status, a tool's task): a new ▸ line, kept open
            # for the pieces after it, so a sentence is not cut wherever Slack's stream was flushed
            indent = "    │ " if msg.is_reply else "  "
            self._write(f"{indent}▸ ", end="")
            self._open = (msg.ts, indent)
            self._write_on(event.detail.lstrip("\n"))
            return
        if event.kind in ("appended", "task", "status", "home"):
            self._write(self._render_surface(event))
            return
        for block in msg.blocks:
            for el in block.get("elements", []) if block.get("type") == "context_actions" else []:
                if el.get("type") == "feedback_buttons":
                    values = {"up": str(el["positive_button"]["value"]), "down": str(el["negative_button"]["value"])}
                    self.answer = (msg.channel, msg.ts, msg.thread_ts, values)
            elements = block.get("elements", []) if block.get("type") == "actions" else []
            # a page's own buttons carry its id: its Stop run button answers to the page's id too
            page = next(
                (str(e.get("value")) for e in elements if str(e.get("action_id", "")).startswith("page_")), None
            )
            for el in elements:
                action_id, value = str(el.get("action_id", "")), str(el.get("value"))
                if action_id.startswith("run_") and block.get("block_id") == "run_actions":
                    self.card_of[value] = msg.ts
                verb = action_id.partition("_")[2]  # run_stop, page_ack, approval_approve, ...
                if verb and el.get("type") == "button":
                    button = (msg.channel, msg.ts, action_id, _confirm_text(el.get("confirm")))
                    self.buttons[(verb.replace("_", "-"), value)] = button
                    if page is not None and not action_id.startswith("page_"):
                        self.buttons[(verb.replace("_", "-"), page)] = button
        rendered = self._render(event.kind, msg)
        if msg.streamed and event.kind == "posted" and msg.is_bot:  # the answer's line stays open for its pieces
            self._write(rendered, end="")
            self._open = (msg.ts, "    │ " if msg.is_reply else "  ")
            return
        self._write(rendered)

    def _write(self, text: str | None, *, end: str = "\n") -> None:
        if text is None:
            return
        with self._lock:
            if self._open is not None:  # another line comes: the open one ends first
                self.out.write(self._held + "\n")
                self._open, self._held = None, ""
            self.out.write(emojize(self.plain(text)) + end)
            self.out.flush()

    def plain(self, text: str) -> str:
        """Slack's markup as a person reads it: ``<@U…>`` as ``@name``, ``<#C…|lab>`` as ``#lab``, ``<url|label>`` as
        ``label (url)``, and ``&lt;`` ``&gt;`` ``&amp;`` as the characters (Slack escapes them in text)."""
        text = _USER_REF.sub(lambda m: "@" + self.emulator.user_label(m.group(1)), text)
        text = _CHANNEL_REF.sub(
            lambda m: "#" + (m.group(2) or self.emulator.channel_label(m.group(1)).lstrip("#")), text
        )
        text = _LINK.sub(lambda m: f"{m.group(2)} ({m.group(1)})" if m.group(2) else m.group(1), text)
        return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")

    def _write_on(self, piece: str) -> None:
        """A piece of the open streamed answer, on its line; a line break starts the next ``▸`` line."""
        assert self._open is not None
        indent = self._open[1]
        lines = (self._held + piece).split("\n")
        text = lines[0] + "".join(f"\n{indent}▸ {line}" for line in lines[1:] if line.strip())
        partial = PARTIAL_SHORTCODE.search(text)  # ":arrow_" + "forward:" come in two pieces: shown as one emoji
        if partial and partial.group() == ":" and COMPLETE_BEFORE.search(text[: partial.start()]):
            partial = None  # the colon that ends ":warning:", not one that may begin a shortcode
        self._held, text = (partial.group(), text[: partial.start()]) if partial else ("", text)
        with self._lock:
            self.out.write(emojize(self.plain(text)))
            self.out.flush()

    def _render_surface(self, event: EmulatorEvent) -> str | None:
        """A streamed answer growing, the assistant status line, a home tab published."""
        if event.kind == "home":
            if event.message.user != CONSOLE_USER:
                return None
            return "(your home tab changed: type `home` to see it)"
        indent = "    │ " if event.message.is_reply or event.kind == "status" else "  "
        if event.kind == "status":
            return f"{indent}· labbot {event.detail}" if event.detail else None
        if event.kind == "task":  # the plan display: each tool call a task, shown as it starts and ends
            status, _, title = event.detail.partition(" ")
            mark = {"in_progress": "◌", "complete": "✓", "error": "✗", "pending": "·"}.get(status, "·")
            plan = f" ({event.message.plan_title})" if event.message.plan_title and status == "in_progress" else ""
            return f"{indent}{mark} {title}{plan if len(event.message.tasks) == 1 else ''}"
        lines = [line for line in event.detail.strip("\n").splitlines() if line.strip()]
        return "\n".join(f"{indent}▸ {line}" for line in lines) or None

    def _render(self, kind: str, msg: Message) -> str:
        who = "labbot" if msg.is_bot else self.emulator_user_name(msg.user)
        when = datetime.fromtimestamp(float(msg.ts)).strftime("%H:%M:%S")
        indent = "    │ " if msg.is_reply else "  "
        head = {"updated": "✎ ", "ephemeral": "(only you) "}.get(kind, "")
        where = f"thread {msg.thread_ts}" if msg.is_reply else self.emulator.channel_label(msg.channel)
        if msg.streamed and kind == "posted":  # the first piece of a streamed answer; the rest arrive appended
            lines = [f"▸ {line}" for line in msg.text.splitlines()]
        elif msg.streamed and kind == "updated":  # the stream stopped: what it put under the answer
            head, lines = "✔ ", ["(answer complete)", *blocks_text(msg.blocks)]
        else:
            lines = blocks_text(msg.blocks) if msg.blocks else msg.text.splitlines()
        for f in msg.files:
            lines.append(f"📎 {f.get('title') or f.get('name')} → {self._save(f)}")
        body = "\n".join(f"{indent}{line}" for line in lines if line.strip())
        return f"{head}[{when}] {where} · {who}\n{body}"

    def _save(self, f: dict[str, Any]) -> str:
        self.files_dir.mkdir(parents=True, exist_ok=True)
        path = self.files_dir / str(f.get("name") or f.get("id"))
        path.write_bytes(self.emulator.file_bytes(str(f["id"])))
        return str(path)

    def emulator_user_name(self, user: str) -> str:
        return "you" if user == CONSOLE_USER else user


class Console:
    def __init__(
        self,
        emulator: SlackEmulator,
        *,
        url: str,
        secret: str,
        user_name: str,
        db_session: Any,
        busy: Callable[[], int],
    ) -> None:
        self.busy = busy  # work the Bolt app is still doing after its acks
        self.emulator = emulator
        self.url = url
        self.secret = secret
        self.user_name = user_name
        self.confirming: str | None = None  # a click waiting for the answer to its confirm dialog
        self.ws = Workspace(team_id=emulator.team_id, app_id=emulator.app_id, channel=emulator.default_channel)
        self.db_session = db_session
        self.started = datetime.now().astimezone()
        self.view: ConsoleView | None = None
        self._http = httpx.AsyncClient(timeout=30)

    async def post(self, body: str, content_type: str | None = None) -> int:
        headers = (
            signed(body, self.secret) if content_type is None else signed(body, self.secret, content_type=content_type)
        )
        r = await self._http.post(f"{self.url}/slack/events", content=body.encode(), headers=headers)
        if r.status_code != 200:
            print(f"(labbot answered {r.status_code}: {r.text[:200]})", flush=True)
        elif r.content and r.headers.get("content-type", "").startswith("application/json"):
            doc = r.json()  # an ephemeral answer given in the ack itself (help, usage errors)
            lines = blocks_text(doc.get("blocks", [])) or str(doc.get("text", "")).splitlines()
            print(emojize("(only you)\n" + "\n".join(f"  {_MRKDWN.sub('', line)}" for line in lines)), flush=True)
        return r.status_code

    async def handle(self, line: str) -> bool:
        """One line of input; False to quit."""
        line = line.strip()
        if not line:
            return True
        if line in ("quit", "exit"):
            return False
        if line in ("help", "?"):
            print(HELP, flush=True)
            return True
        if line.startswith("/"):
            command, _, text = line.partition(" ")
            body = slash_command(self.ws, user=CONSOLE_USER, user_name=self.user_name, text=text, command=command)
            await self.post(body)
            return True
        if self.confirming is not None:  # the answer to a button's confirm dialog
            click, self.confirming = self.confirming, None
            if line.lower() in ("y", "yes"):
                await self.post(click)
            else:
                print("(cancelled: nothing was pressed)", flush=True)
            return True
        m = re.match(r"^click\s+(\S+)\s+(\S+)$", line)
        if m:
            verb, value = m.groups()
            where = self.view.buttons.get((verb, value)) if self.view else None
            if where is None:
                known = sorted({f"{v} {x}" for v, x in self.view.buttons}) if self.view else []
                seen = ", ".join(known[-12:]) or "none yet"
                print(f"(no [{verb}] button for {value} in this console; buttons seen: {seen})", flush=True)
                return True
            channel, ts, action_id, confirm = where
            ws = Workspace(team_id=self.ws.team_id, app_id=self.ws.app_id, channel=channel)
            click = button_click(ws, user=CONSOLE_USER, action_id=action_id, value=value, message_ts=ts)
            if confirm is not None:  # Slack asks before a button with a confirm dialog does anything; so does this
                self.confirming = click
                print(f"{confirm} (yes / no)", flush=True)
                return True
            await self.post(click)
            return True
        m = re.match(r"^home(?:\s+(older|newer))?$", line)
        if m:
            await self.show_home(m.group(1))
            return True
        m = re.match(r"^ask\s+(.+)$", line)
        if m:
            await self.ask_assistant(m.group(1))
            return True
        m = re.match(r"^vote\s+(up|down)$", line)
        if m:
            answer = self.view.answer if self.view else None
            if answer is None:
                print("(no agent answer to vote on yet: @labbot a question first)", flush=True)
                return True
            channel, ts, thread_ts, values = answer
            ws = Workspace(team_id=self.ws.team_id, app_id=self.ws.app_id, channel=channel)
            body = feedback_click(ws, user=CONSOLE_USER, value=values[m.group(1)], message_ts=ts, thread_ts=thread_ts)
            await self.post(body)
            if m.group(1) == "down":
                print("(labbot asks what went wrong: answer with `comment SOME TEXT`, or carry on)", flush=True)
            return True
        m = re.match(r"^comment\s+(.+)$", line)
        if m:

            def opened() -> list[dict[str, Any]]:
                return [v for v in self.emulator.views_opened() if v.get("callback_id") == "feedback_comment"]

            await self.settle(lambda: bool(opened()), timeout=5.0, while_busy=False)  # a 👎 just typed opens it
            modals = opened()
            if not modals:
                print("(no question to answer: `vote down` on an answer opens one)", flush=True)
                return True
            typed = {"comment": {"text": m.group(1)}}
            await self.post(view_submission(self.ws, user=CONSOLE_USER, view=modals[-1], values=typed))
            return True
        m = re.match(r"^reply\s+(\S+)\s+(.+)$", line)
        thread_ts = None
        if m:
            run_id, line = m.groups()
            thread_ts = (self.view.card_of if self.view else {}).get(run_id)
            if thread_ts is None:
                print(f"(no thread for run {run_id} in this console)", flush=True)
                return True
        text = line.replace("@labbot", f"<@{self.emulator.bot_user_id}>")
        msg = await to_thread.run_sync(
            lambda: self.emulator.user_message(self.ws.channel, CONSOLE_USER, text, thread_ts)
        )
        event = self.emulator.event_payload(msg, team_id=self.ws.team_id, api_app_id=self.ws.app_id)
        await self.post(json.dumps(event), content_type=JSON)
        return True

    async def settle(self, done: Callable[[], bool], timeout: float = 10.0, *, while_busy: bool = True) -> None:
        """Wait until ``done()`` (or ``timeout``; with ``while_busy``, until labbot has nothing left to do after its
        acks, if that comes first)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await asyncio.sleep(0.05)
        while loop.time() < deadline and not done() and (self.busy() or not while_busy):
            await asyncio.sleep(0.05)

    async def show_home(self, move: str | None) -> None:
        """Open the Home tab as Slack does (``app_home_opened``), or press its Older / Newer runs button; print it."""
        before = self.emulator.home_publishes(CONSOLE_USER)
        view = self.emulator.home_view(CONSOLE_USER)
        if move is None:
            dm = self.emulator.dm_channel(CONSOLE_USER)
            await self.post(app_home_opened(self.ws, user=CONSOLE_USER, dm=dm), content_type=JSON)
        else:
            label = "Older runs" if move == "older" else "Newer runs"
            button = next((e for b in (view or {}).get("blocks", []) if b.get("block_id") == "home_runs_pager"
                           for e in b["elements"] if e["text"]["text"] == label), None)  # fmt: skip
            if view is None or button is None:
                print(f"(no {label} on your home tab: type `home` first)", flush=True)
                return
            body = home_click(self.ws, user=CONSOLE_USER, action_id=button["action_id"], value=button["value"],
                              view_id=str(view["id"]))  # fmt: skip
            await self.post(body)
        await self.settle(lambda: self.emulator.home_publishes(CONSOLE_USER) > before)
        view = self.emulator.home_view(CONSOLE_USER)
        if view is None:
            print("(labbot did not publish a home tab: is it running with Slack?)", flush=True)
            return
        lines = ["▌ Home · labbot", *(f"  {line}" for line in blocks_text(view["blocks"]))]
        print(emojize("\n".join(lines)), flush=True)

    async def ask_assistant(self, text: str) -> None:
        """A question typed into the assistant container: a new assistant thread in the app's DM (labbot offers its
        suggested prompts there), then the message in it, which the agent answers, streamed."""
        dm = self.emulator.dm_channel(CONSOLE_USER)
        root = await to_thread.run_sync(lambda: self.emulator.user_message(dm, CONSOLE_USER, "(assistant)"))
        started = assistant_thread_started(self.ws, user=CONSOLE_USER, dm=dm, thread_ts=root.ts)
        await self.post(started, content_type=JSON)
        await self.settle(lambda: bool(self.emulator.suggested_prompts(dm, root.ts)), timeout=3.0)
        prompts = self.emulator.suggested_prompts(dm, root.ts)
        if prompts:
            print("  suggested: " + " · ".join(f"“{p['title']}”" for p in prompts), flush=True)
        msg = await to_thread.run_sync(lambda: self.emulator.user_message(dm, CONSOLE_USER, text, root.ts))
        event = self.emulator.event_payload(msg, team_id=self.ws.team_id, api_app_id=self.ws.app_id)
        await self.post(json.dumps(event), content_type=JSON)

    def unfinished(self) -> int:
        """Runs launched in this session whose threads have no summary yet."""
        with self.db_session() as s:
            q = (
                select(RunThread.run_id)
                .join(Run, Run.id == RunThread.run_id)
                .where(RunThread.summary_posted.is_(False), Run.created_at >= self.started)
            )
            return len(list(s.scalars(q)))

    async def run(self, lines: asyncio.Queue[str | None], wait_s: float) -> None:
        while True:
            line = await lines.get()
            if line is None:
                break
            if not await self.handle(line):
                return
        # end of piped input: let what was launched here finish, so a script sees the whole story
        deadline = asyncio.get_running_loop().time() + wait_s
        await asyncio.sleep(0.5)  # commands typed last are still being carried out
        if await to_thread.run_sync(self.unfinished):
            print("(end of input: waiting for the runs launched here to finish — Ctrl-C leaves now)", flush=True)
        while asyncio.get_running_loop().time() < deadline:
            if not self.busy() and not await to_thread.run_sync(self.unfinished):
                break
            await asyncio.sleep(0.5)
        await self._http.aclose()


def stdin_lines(loop: asyncio.AbstractEventLoop, stream: TextIO) -> asyncio.Queue[str | None]:
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def pump() -> None:
        for line in stream:
            loop.call_soon_threadsafe(queue.put_nowait, line)
        loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=pump, name="console stdin", daemon=True).start()
    return queue


def run_console(
    settings: Settings,
    *,
    wait_s: float = 1800.0,
    fast: bool = False,
    demo: bool = False,
    demo_project: bool = False,
) -> int:
    """Start the emulator and the control plane wired to it, then the console loop. ``demo``: the agents run on the
    scripted demo model (``labbot.agents.fleet.demo_model``), whatever key is set; ``demo_project``: the codebase is
    the demo's small project (``labbot.bot.console.demo_project``, under labbot's home), not the current folder."""
    from labbot.bot.serve import serve

    if demo:
        settings = dataclasses.replace(settings, model=ModelSettings.demo_model())
    if demo_project:
        try:
            root = write_demo_project(settings.home / "demo-project")
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"(the demo project could not be written ({e}); the codebase is {settings.codebase_root})")
        else:
            settings = dataclasses.replace(settings, codebase_root=root)

    user_name = getpass.getuser()
    emulator = SlackEmulator(channels={"C0LAB00001": "lab", ONCALL_CHANNEL: "oncall"}, users={CONSOLE_USER: user_name})
    api_url = emulator.start()
    secret = secrets.token_hex(16)
    slack = SlackSettings(
        bot_token=emulator.bot_token,
        signing_secret=secret,
        api_url=api_url,
        command=settings.slack.command,
        admins=settings.slack.admins | {CONSOLE_USER},  # at your own terminal you are the admin
        card_every_s=5.0 if fast else settings.slack.card_every_s,
        progress_every_s=15.0 if fast else settings.slack.progress_every_s,
        plot_milestones=settings.slack.plot_milestones,
    )
    out = sys.stdout
    paging = settings.paging
    if not paging.oncall_channel:
        paging = dataclasses.replace(paging, oncall_channel=ONCALL_CHANNEL)
    if fast:  # a demo: escalation within minutes, not a quarter of an hour
        paging = dataclasses.replace(paging, escalate_after_s=min(paging.escalate_after_s, 60.0))
    settings = dataclasses.replace(settings, paging=paging)

    async def console_main(plane: Any) -> None:
        console = Console(
            emulator,
            url=f"http://127.0.0.1:{settings.port}",
            secret=secret,
            user_name=user_name,
            db_session=plane.db.session,
            busy=lambda: len(plane.slack.tasks) if plane.slack else 0,
        )
        console.view = ConsoleView(emulator, out, settings.home / "console-files")
        emulator.subscribe(console.view)
        print(
            f"labbot console — #lab in a local Slack; you are {user_name} ({CONSOLE_USER}, admin). Type `help` for "
            f"how. Runs the CLI launches beside it are yours here with {OWNER_ENV}={CONSOLE_USER}.",
            flush=True,
        )
        model = settings.model.model if settings.model.configured else None
        print(agents_line(model, "/lab").replace("*", ""), flush=True)
        if settings.model.demo:
            print(TRY.replace("`", ""), flush=True)
            print(f"The codebase the agents read and evals come from: {settings.codebase_root}", flush=True)
        await console.run(stdin_lines(asyncio.get_running_loop(), sys.stdin), wait_s)

    try:
        return serve(settings, slack=slack, console=console_main)
    finally:
        emulator.stop()
