"""Run threads: one Slack thread per run, its card kept current, progress, plots and a summary posted into it.

The plots are of the metrics the run's job names (``plot`` in the run JSON, from ``JobSpec.plot``; loss by
default): one image with a panel per metric, so a job plotting several costs the thread no more uploads.

``open_thread`` posts the run card to the channel (the card is the thread's root) and a launch confirmation in the
thread. ``tick`` (called every few seconds by the keeper loop) asks ``thread_plan.plan`` what each thread needs and does
it; what was posted is a row in ``run_threads`` (``labbot.storage.run_threads``), so nothing is posted twice, even
across a restart of labbot. ``tick`` is a singleton (the leader's): right before each of its writes the leader lease is
checked again (``labbot.storage.lease.aguard``), and a replica that lost it (``Fenced``) stops there, leaving the rest
to the new leader. Replies in a run's thread are stored with the run.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from anyio import to_thread
from slack_sdk.web.async_client import AsyncWebClient

from labbot.bot.render.plots import metrics_plot_png
from labbot.bot.slack.blocks import progress_text, restart_text, run_card, summary_blocks
from labbot.bot.slack.blocks.posts import launch_confirmation, left_queue_text
from labbot.bot.slack.thread_plan import Cadence, Plan, ThreadState, card_digest, plan
from labbot.storage.lease import Fenced, aguard
from labbot.storage.models import RunThread, utcnow
from labbot.storage.run_threads import Posted, Reply, RunThreadStore
from labbot.training.service import RunService
from labbot.training.telemetry_store import TelemetryStore

log = logging.getLogger(__name__)
MAX_HISTORY = 20
_UNSAFE_IN_FILENAME = re.compile(r"[^A-Za-z0-9_.-]+")


class RunThreads:
    def __init__(
        self,
        client: AsyncWebClient,
        service: RunService,
        telemetry: TelemetryStore,
        cadence: Cadence,
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.clock = clock  # a benchmark replays an hour of a run in seconds
        self.client = client
        self.service = service
        self.telemetry = telemetry
        self.cadence = cadence
        self.db = service.db
        self.rows = RunThreadStore(service.db)  # what was posted where: no SQL here
        # what else a run's thread gets when it ends, after the summary (an eval run: its results and .eval log);
        # each returns the Web API calls it made, and checks the lease before each write (aguard), as tick does
        self.on_end: list[Callable[[dict[str, Any], str, str], Awaitable[int]]] = []

    # -- opening ---------------------------------------------------------------------------------------------

    async def open_thread(self, run: dict[str, Any], channel: str) -> str:
        text, blocks = run_card(run)
        resp = await self.client.chat_postMessage(channel=channel, text=text, blocks=blocks)
        channel, ts = str(resp["channel"]), str(resp["ts"])
        await to_thread.run_sync(self._create_row, run, channel, ts)
        await self.client.chat_postMessage(channel=channel, thread_ts=ts, text=launch_confirmation(run))
        return ts

    def _create_row(self, run: dict[str, Any], channel: str, ts: str) -> None:
        self.rows.create(run["id"], channel, ts, attempt=run["attempt"], status=run["status"], at=self.clock())
        self.service.set_thread(run["id"], channel, ts)

    # -- who did what ----------------------------------------------------------------------------------------

    async def record_action(self, run_id: str, line: str) -> None:
        """Add a line to the card's history ("<@U1> stopped the run") and show it at once."""
        thread = await to_thread.run_sync(self._append_history, run_id, line)
        if thread is not None:
            await self._update_card(run_id, force=True)

    def _append_history(self, run_id: str, line: str) -> RunThread | None:
        stamp = self.clock().strftime("%H:%M UTC")
        return self.rows.append_history(run_id, f"{line} at {stamp}", keep=MAX_HISTORY)

    # -- upkeep ----------------------------------------------------------------------------------------------

    async def tick(self) -> int:
        """Bring every open thread up to date; returns how many Web API calls it made."""
        rows = await to_thread.run_sync(self.rows.open_threads)
        calls = 0
        for row in rows:
            try:
                calls += await self._update_thread(row)
            except Fenced:
                raise  # the lease is lost: no thread more
            except Exception:
                log.exception("could not update the thread of run %s", row.run_id)
        return calls

    async def _update_thread(self, row: RunThread) -> int:
        """Bring one run's thread up to date (card, notices, progress, plots, summary); the Web API calls made."""
        run = await to_thread.run_sync(self.service.get, row.run_id)
        state = ThreadState(
            card_digest=row.card_digest,
            card_updated_at=row.card_updated_at,
            progress_posted_at=row.progress_posted_at,
            progress_step=row.progress_step,
            plots_posted=tuple(row.plots_posted),
            attempt_seen=row.attempt_seen,
            status_seen=row.status_seen,
            summary_posted=row.summary_posted,
        )
        p = plan(run, state, history=list(row.history), now=self.clock(), cadence=self.cadence)
        if p.empty:
            return 0
        return await self._carry_out(row, run, p)

    async def _carry_out(self, row: RunThread, run: dict[str, Any], p: Plan) -> int:
        calls = 0
        post = self.client.chat_postMessage
        if p.restarted:
            await _fence(row.run_id, "the restart notice")
            await post(channel=row.channel, thread_ts=row.card_ts, text=restart_text(run, None))
            calls += 1
        if p.left_queue:
            await _fence(row.run_id, "the left-the-queue notice")
            await post(channel=row.channel, thread_ts=row.card_ts, text=left_queue_text(run, now=self.clock()))
            calls += 1
        if p.update_card:
            await self._update_card(row.run_id, run=run)
            calls += 1
        if p.progress:
            await _fence(row.run_id, "the progress line")
            await post(channel=row.channel, thread_ts=row.card_ts, text=progress_text(run))
            calls += 1
        if p.plot_milestone is not None:
            calls += await self._upload_plot(row, run, f"{p.plot_milestone}% done")
        if p.summary:
            calls += await self._upload_plot(row, run, "final")
            text, blocks = await to_thread.run_sync(self._summary, run)
            await _fence(row.run_id, "the summary")
            await post(channel=row.channel, thread_ts=row.card_ts, text=text, blocks=blocks)
            calls += 1
            for extra in self.on_end:
                try:
                    calls += await extra(run, row.channel, row.card_ts)
                except Fenced:
                    raise
                except Exception:  # the summary is posted: a failing extra must not post it again next tick
                    log.exception("posting the end of run %s in its thread failed", row.run_id)
        await to_thread.run_sync(self._remember, row.run_id, run, p)
        return calls

    def _summary(self, run: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        headline = str(run.get("headline") or "loss")
        values = [v for _, v in self.telemetry.metrics(run["id"], headline)]
        # "best" is the lowest only for loss: for another metric labbot cannot know which way is better
        finite = [v for v in values if v == v and abs(v) != float("inf")] if headline == "loss" else []
        duration = None
        if run.get("started_at") and run.get("ended_at"):
            duration = (
                datetime.fromisoformat(run["ended_at"]) - datetime.fromisoformat(run["started_at"])
            ).total_seconds()
        return summary_blocks(
            run,
            first_loss=values[0] if values else None,
            best_loss=min(finite) if finite else None,
            duration_s=duration,
        )

    def _remember(self, run_id: str, run: dict[str, Any], p: Plan) -> None:
        now = self.clock()
        posted = Posted(
            status=run["status"],
            attempt=run["attempt"],
            progress_at=now if p.progress else None,
            progress_step=run.get("step") if p.progress else None,
            milestones=tuple(p.milestones_passed or ()),
            summary=bool(p.summary),
            reopened=p.reopened,
        )
        self.rows.remember(run_id, posted)

    async def _update_card(self, run_id: str, *, run: dict[str, Any] | None = None, force: bool = False) -> None:
        if run is None:
            run = await to_thread.run_sync(self.service.get, run_id)
        row = await to_thread.run_sync(self.rows.get, run_id)
        if row is None:
            return
        digest = card_digest(run, list(row.history))
        if digest == row.card_digest and not force:
            return
        text, blocks = run_card(run, history=list(row.history))
        await _fence(run_id, "the card's update")
        await self.client.chat_update(channel=row.channel, ts=row.card_ts, text=text, blocks=blocks)
        await to_thread.run_sync(self._card_updated, run_id, digest)

    def _card_updated(self, run_id: str, digest: str) -> None:
        self.rows.card_updated(run_id, digest, at=self.clock())

    async def _upload_plot(self, row: RunThread, run: dict[str, Any], label: str) -> int:
        names = [str(m) for m in run.get("plot") or ["loss"]]
        series, starts = await to_thread.run_sync(self._series, row.run_id, names)
        if not any(series.values()):
            return 0
        shown = ", ".join(names)
        png = await to_thread.run_sync(
            lambda: metrics_plot_png(series, title=f"{run['name']} — {shown} ({label})", attempts=starts)
        )
        what = "+".join(_UNSAFE_IN_FILENAME.sub("_", name) for name in names)[:80]
        await _fence(row.run_id, f"the {label} plot")
        await self.client.files_upload_v2(
            channel=row.channel,
            thread_ts=row.card_ts,
            content=png,
            filename=f"{run['id']}-{what}-{label.split('%')[0].replace(' ', '-')}.png",
            title=f"{run['name']} {shown} ({label})",
        )
        return 3  # files.getUploadURLExternal, the upload, files.completeUploadExternal

    def _series(
        self, run_id: str, names: list[str]
    ) -> tuple[dict[str, list[tuple[int, float]]], list[tuple[int, int]]]:
        return self.telemetry.series(run_id, names), self.telemetry.attempt_starts(run_id)

    async def post_file(self, channel: str, thread_ts: str | None, filename: str, data: bytes) -> None:
        """An artifact (or any file) uploaded into a thread."""
        await self.client.files_upload_v2(
            channel=channel, thread_ts=thread_ts, content=data, filename=filename, title=filename
        )

    # -- replies ---------------------------------------------------------------------------------------------

    async def store_reply(self, channel: str, thread_ts: str, user: str, ts: str, text: str) -> Reply | None:
        return await to_thread.run_sync(self._store_reply, channel, thread_ts, user, ts, text)

    def _store_reply(self, channel: str, thread_ts: str, user: str, ts: str, text: str) -> Reply | None:
        return self.rows.store_reply(channel, thread_ts, user, ts, text)  # a delivery twice: stored once

    def thread_of(self, run_id: str) -> tuple[str, str] | None:
        return self.rows.thread_of(run_id)


async def _fence(run_id: str, what: str) -> None:
    """Right before a write into a run's thread: inside the upkeep's fence, the leader lease checked again (``Fenced``
    when lost); elsewhere (a button's card update) nothing."""
    await aguard(f"{what} in the thread of run {run_id}")
