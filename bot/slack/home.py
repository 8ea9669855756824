"""The App Home tab: published (``views.publish``) when a researcher opens it (``app_home_opened``) and kept current
while something of theirs changes.

``AppHome.opened`` and ``AppHome.tick`` (the control plane's ``homes`` job, on every replica) gather what a user's home
shows from the services that own it (``HomeSources``: no SQL here) (their runs, a page at a time; open pages of their
runs, and the cluster's for admins, who are on call for it; their agents' threads and artifacts; their eval runs;
capacity by purpose, asked of the run service at most once per ``card_every_s``), render it
(``labbot.bot.slack.blocks.home``, pure) and ask ``thread_plan.home_due`` whether to publish: the card's rule, so Slack
resending ``app_home_opened`` publishes nothing new, a status change shows at once and a step at most every
``card_every_s``. The users whose home was opened since labbot started are the ones kept current; what each was last
shown lives in this process (after a restart, the next open publishes afresh).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from anyio import to_thread
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from labbot.agents.babysitter.pager import Pager
from labbot.agents.fleet.sessions import SessionStore
from labbot.bot.slack.blocks.home import LIST_MAX, RUNS_PER_PAGE, HomeData, home_view
from labbot.bot.slack.thread_plan import Cadence, HomeState, home_due
from labbot.storage.artifacts import ArtifactStore
from labbot.storage.models import utcnow
from labbot.training.service import RunService

log = logging.getLogger(__name__)

EVAL_JOB_PREFIX = "eval"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class HomeSources:
    """Where a home's contents come from: the services that own each table. Without a pager a home shows no pages,
    without an artifact store no artifacts."""

    runs: RunService
    sessions: SessionStore
    pager: Pager | None = None
    artifacts: ArtifactStore | None = None


class AppHome:
    def __init__(
        self,
        client: AsyncWebClient,
        sources: HomeSources,
        cadence: Cadence,
        *,
        capacity: Callable[[], dict[str, Any]] | None = None,
        admins: Collection[str] = (),
        command: str = "/lab",
        agents: str = "",
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        """``capacity``: the run service's ``capacity`` (None: the home shows none)."""
        self.client = client
        self.sources = sources
        self.capacity = capacity
        self.cadence = cadence
        self.admins = frozenset(admins)
        self.command = command
        self.agents = agents  # whether the agents answer: a line at the foot of every home
        self.clock = clock
        self.shown: dict[str, HomeState] = {}  # user -> what their home last showed
        self.page: dict[str, int] = {}  # user -> the page of runs they look at
        self._locks: dict[str, asyncio.Lock] = {}
        self._capacity: tuple[datetime, list[dict[str, Any]]] | None = None
        self.published = 0
        self.opened_count = 0  # app_home_opened events handled

    # -- what Slack and the keeper call ---------------------------------------------------------------------

    async def opened(self, user: str) -> bool:
        """``app_home_opened`` on the home tab: publish it unless it already shows what there is; True if published."""
        self.opened_count += 1
        self.shown.setdefault(user, HomeState())
        return await self.refresh(user)

    async def show_page(self, user: str, page: int) -> bool:
        """The "Older runs" / "Newer runs" buttons."""
        self.page[user] = max(0, page)
        self.shown.setdefault(user, HomeState())
        return await self.refresh(user)

    async def tick(self) -> int:
        """Keep every opened home current (by ``home_due``); returns how many were published."""
        published = 0
        for user in list(self.shown):
            try:
                published += await self.refresh(user)
            except Exception:
                log.exception("could not refresh the home tab of %s", user)
        return published

    async def refresh(self, user: str) -> bool:
        lock = self._locks.setdefault(user, asyncio.Lock())
        async with lock:  # one publish at a time per user: two opens at once publish once
            data = await to_thread.run_sync(self.gather, user, self.page.get(user, 0))
            view = home_view(data)
            statuses = _digest(
                [data.page, data.runs_total, [(r["id"], r["status"]) for r in (*data.runs, *data.evals)],
                 [(p["id"], p["state"]) for p in data.pages]]
            )  # fmt: skip
            digest = _digest(view)
            now = self.clock()
            state = self.shown.get(user, HomeState())
            if not home_due(state, digest=digest, statuses=statuses, now=now, cadence=self.cadence):
                return False
            stamped = home_view(data, updated=now.strftime("%H:%M UTC"))
            try:
                await self.client.views_publish(user_id=user, view=stamped)
            except SlackApiError as e:
                log.warning("could not publish the home tab of %s: %s", user, e.response.get("error"))
                return False
            self.shown[user] = HomeState(digest=digest, statuses=statuses, published_at=now)
            self.published += 1
            return True

    # -- what a home shows ----------------------------------------------------------------------------------

    def gather(self, user: str, page: int = 0) -> HomeData:
        """What ``user``'s home shows, asked of the services that own it (blocking: SQL)."""
        src = self.sources
        total, page, runs = src.runs.owned_runs_page(user, page, RUNS_PER_PAGE, except_prefix=EVAL_JOB_PREFIX)
        pages = src.pager.open_pages_for(user, on_call=user in self.admins, limit=LIST_MAX + 20) if src.pager else []
        return HomeData(
            user=user,
            runs=runs,
            runs_total=total,
            page=page,
            pages=pages,
            threads=src.sessions.threads_of(user, limit=LIST_MAX),
            artifacts=src.artifacts.latest_of_researcher(user, limit=LIST_MAX) if src.artifacts else [],
            evals=src.runs.owned_runs_of_jobs(user, EVAL_JOB_PREFIX, limit=5),
            capacity=self._capacity_now(),
            command=self.command,
            agents=self.agents,
        )

    def _capacity_now(self) -> list[dict[str, Any]]:
        """Capacity by purpose, asked of the run service (and so of Ray) at most once per ``card_every_s``."""
        if self.capacity is None:
            return []
        now = self.clock()
        if self._capacity is None or (now - self._capacity[0]).total_seconds() >= self.cadence.card_every_s:
            try:
                purposes = list(self.capacity().get("purposes") or [])
            except Exception:
                log.warning("capacity for the home tab failed", exc_info=True)
                purposes = self._capacity[1] if self._capacity else []
            self._capacity = (now, purposes)
        return self._capacity[1]
