"""Experiment threads: one Slack thread per experiment, its card (the root) kept current as trials start, are pruned,
fail and score, and at the end the answer: the configs ranked with their intervals across seeds, the verdict between
the best and the runner-up, and two plots (each searched parameter against the score; every trial's curve on one
chart). The trials' runs are ordinary runs, listed on the card, without threads of their own (twelve cards would
bury the channel).

``tick`` is the leader's (a singleton beside the run threads' upkeep): it checks the lease right before each write
(``labbot.storage.lease.aguard``); what was shown is recorded on the experiment (its card's digest, whether the
summary went out), so nothing is posted twice, even across a restart.
"""

from __future__ import annotations

import logging
from typing import Any

from anyio import to_thread
from slack_sdk.web.async_client import AsyncWebClient

from labbot.bot.render.plots import experiment_curves_png, params_scores_png
from labbot.bot.slack.blocks import text_blocks
from labbot.bot.slack.blocks.experiment_card import card_digest, experiment_card
from labbot.common.experiment_text import plan_text, ranking_text
from labbot.storage.lease import Fenced, aguard
from labbot.training.experiments.service import ExperimentService

log = logging.getLogger(__name__)
ENDED = ("done", "stopped", "budget_spent")


class ExperimentThreads:
    def __init__(self, client: AsyncWebClient, experiments: ExperimentService, *, command: str = "/lab") -> None:
        self.client = client
        self.experiments = experiments
        self.command = command

    async def open_thread(self, doc: dict[str, Any], channel: str, plan: dict[str, Any] | None = None) -> str:
        """Post the card (the thread's root) and, in the thread, what will run and what it is projected to cost."""
        text, blocks = experiment_card(doc, self.command)
        resp = await self.client.chat_postMessage(channel=channel, text=text, blocks=blocks)
        channel, ts = str(resp["channel"]), str(resp["ts"])
        await to_thread.run_sync(self.experiments.set_thread, doc["id"], channel, ts)
        await to_thread.run_sync(self.experiments.card_posted, doc["id"], card_digest(blocks))
        if plan is not None:
            await self.client.chat_postMessage(channel=channel, thread_ts=ts, text=f"```\n{plan_text(plan)}\n```")
        return ts

    async def tick(self) -> int:
        """Every open experiment thread brought up to date; the Web API calls made."""
        calls = 0
        for exp_id in await to_thread.run_sync(self.experiments.open_threads):
            try:
                calls += await self._tend(exp_id)
            except Fenced:
                raise
            except Exception:
                log.exception("could not update the thread of experiment %s", exp_id)
        return calls

    async def _tend(self, exp_id: str) -> int:
        doc = await to_thread.run_sync(self.experiments.get, exp_id)
        channel, ts = doc["channel"], doc["thread_ts"]
        calls = 0
        text, blocks = experiment_card(doc, self.command)
        digest = card_digest(blocks)
        if digest != doc.get("card_digest"):
            await aguard(f"updating the card of experiment {exp_id}")
            await self.client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)
            await to_thread.run_sync(self.experiments.card_posted, exp_id, digest)
            calls += 1
        if doc["status"] in ENDED:
            calls += await self._summary(doc, channel, ts)
            await to_thread.run_sync(self.experiments.summary_done, exp_id)
        return calls

    async def _summary(self, doc: dict[str, Any], channel: str, ts: str) -> int:
        """The answer in the thread: why it ended, the ranking with intervals and the verdict, and the two plots."""
        ended = {"done": "ended", "stopped": "was stopped", "budget_spent": "stopped: its budget is spent"}
        lead = f"experiment `{doc['id']}` {ended.get(doc['status'], doc['status'])} ({doc.get('reason') or ''})"
        body = f"{lead}\n```\n{ranking_text(doc)}\n```"
        await aguard(f"posting the summary of experiment {doc['id']}")
        for blocks in text_blocks(body)[:3]:
            await self.client.chat_postMessage(channel=channel, thread_ts=ts, text=lead, blocks=blocks)
        curves, params = await to_thread.run_sync(self._plots, doc)
        await aguard(f"posting the plots of experiment {doc['id']}")
        for name, data in (("trials.png", curves), ("params.png", params)):
            await self.client.files_upload_v2(
                channel=channel, thread_ts=ts, content=data, filename=f"{doc['id']}-{name}", title=name
            )
        return 3

    def _plots(self, doc: dict[str, Any]) -> tuple[bytes, bytes]:
        metric = doc["objective"]["metric"]
        curves = self.experiments.curves(doc["id"])
        ranks = {r["trial"]: i for i, r in enumerate(doc["results"]["ranking"], 1)}
        statuses = {t["number"]: t["status"] for t in doc["trials"]}
        title = f"{doc['name']} ({doc['id']}): {metric} by trial"
        trials_png = experiment_curves_png(curves, statuses, ranks, metric=metric, title=title)
        dims = self.experiments.dimensions(doc["id"])
        scored = [(r["params"], r["mean"], (r["high"] - r["mean"]) if r.get("high") is not None else None)
                  for r in doc["results"]["ranking"]]  # fmt: skip
        params_png = params_scores_png(dims, scored, metric=metric, title=f"{metric} by parameter (scored configs)")
        return trials_png, params_png
