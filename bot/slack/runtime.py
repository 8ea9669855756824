"""The Slack side of a running labbot: the Web API client, the Bolt app, run threads, home tabs and their upkeep.

Built by the composition root (``labbot.bot.serve``) when a bot token is set, and by ``labbot console`` against the
in-process emulator, in two steps: ``SlackCore`` (client and run threads, which the agents and integrations need),
then, once the handlers' dependencies (``SlackDeps``) are built on it, ``SlackRuntime`` (the Bolt app, home tabs).
The client retries Slack's 429 (honouring ``Retry-After``), 5xx and connection errors.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from starlette.routing import Route

from labbot.agents.fleet.sessions import SessionStore
from labbot.bot.config import SlackSettings
from labbot.bot.slack.app import REPLAY_TTL_S, build_app
from labbot.bot.slack.client import ObservedWebClient
from labbot.bot.slack.feedback import SlackFeedback
from labbot.bot.slack.handlers import SlackDeps
from labbot.bot.slack.handlers.evals import finished as eval_results
from labbot.bot.slack.home import AppHome, HomeSources
from labbot.bot.slack.http import events_route
from labbot.bot.slack.tasks import TaskSet
from labbot.bot.slack.thread_plan import Cadence
from labbot.bot.slack.threads import RunThreads
from labbot.common.errors import BadRequest
from labbot.common.observe import NO_OBSERVER, Observer
from labbot.storage.lease import Fenced
from labbot.storage.seen import DurableSeenKeys
from labbot.training.service import RunService
from labbot.training.telemetry_store import TelemetryStore

log = logging.getLogger(__name__)


def web_client(token: str, api_url: str, *, observer: Observer = NO_OBSERVER) -> AsyncWebClient:
    """The client of Bolt, the run threads and the agents' threads: its failed calls are counted (``/metrics``)."""
    return ObservedWebClient(
        token=token,
        base_url=api_url,
        observer=observer,
        retry_handlers=[
            AsyncRateLimitErrorRetryHandler(max_retry_count=5),
            AsyncServerErrorRetryHandler(max_retry_count=4),
            AsyncConnectionErrorRetryHandler(max_retry_count=3),
        ],
    )


@dataclass(frozen=True)
class SlackCore:
    """What the rest of Slack's side, the agents and the integrations are built on: the settings, the Web API client
    and the run threads. Built first (``ControlPlane.build``), before the handlers' dependencies."""

    settings: SlackSettings
    client: AsyncWebClient
    threads: RunThreads

    @classmethod
    def build(
        cls,
        settings: SlackSettings,
        service: RunService,
        telemetry: TelemetryStore,
        *,
        observer: Observer = NO_OBSERVER,
    ) -> SlackCore:
        if not settings.bot_token or not (settings.signing_secret or settings.app_token):
            raise BadRequest(
                "Slack needs SLACK_BOT_TOKEN and, to receive requests, SLACK_SIGNING_SECRET (HTTP mode) "
                "or SLACK_APP_TOKEN (Socket Mode)"
            )
        client = web_client(settings.bot_token, settings.api_url, observer=observer)
        return cls(settings, client, RunThreads(client, service, telemetry, cadence_of(settings)))


def cadence_of(settings: SlackSettings) -> Cadence:
    """How often a run's card, progress and plots (and a home tab) may change: ``[slack]`` settings."""
    return Cadence(
        card_every_s=settings.card_every_s,
        progress_every_s=settings.progress_every_s,
        plot_milestones=settings.plot_milestones,
    )


@dataclass(frozen=True)
class SlackRuntime:
    settings: SlackSettings
    client: AsyncWebClient
    app: AsyncApp
    threads: RunThreads
    deps: SlackDeps
    tasks: TaskSet
    tick_s: float = 2.0
    home: AppHome | None = None

    @classmethod
    def build(cls, deps: SlackDeps, *, tick_s: float = 2.0) -> SlackRuntime:
        """The Bolt app and the home tabs over ``deps`` (whose client, threads and settings are a ``SlackCore``'s);
        with evals, an eval run's thread gets its results when it ends."""
        settings, client, service = deps.settings, deps.client, deps.service
        if deps.evals is not None:
            deps.threads.on_end.append(functools.partial(eval_results, deps))
        tasks = TaskSet()
        sources = HomeSources(service, SessionStore(service.db), deps.pager, deps.artifacts)
        home = AppHome(
            client, sources, cadence_of(settings), capacity=service.capacity, admins=settings.admins,
            command=settings.command, agents=deps.agents_line,
        )  # fmt: skip
        app = build_app(
            deps=deps,
            signing_secret=settings.signing_secret,
            tasks=tasks,
            triggers=DurableSeenKeys(service.db, ttl_s=REPLAY_TTL_S),
            feedback=SlackFeedback(client, service.db, settings.command),
            home=home,
        )
        return cls(settings, client, app, deps.threads, deps, tasks, tick_s, home)

    def routes(self) -> list[Route]:
        """``POST /slack/events``: events, slash commands and interactivity alike (HTTP mode). Without a signing
        secret (Socket Mode only) there is no HTTP door: unsigned requests are never accepted. Size, signature and
        freshness are checked by ``labbot.bot.slack.http`` before Bolt sees the request."""
        if not self.settings.signing_secret:
            return []
        return [events_route(self.app, self.settings.signing_secret)]

    async def upkeep(self) -> None:
        """One round of the run threads' upkeep (cards, progress, plots, summaries), after Slack's acks: a singleton
        the control plane runs every ``tick_s`` on the leader only (two replicas would each post the progress)."""
        await self.tasks.quiet()
        try:
            await self.threads.tick()
            if self.deps.experiment_threads is not None:  # experiments' cards and, at the end, their answers
                await self.deps.experiment_threads.tick()
            if self.deps.research_threads is not None:  # reported research questions' answers, published
                await self.deps.research_threads.tick()
        except Fenced:
            raise  # the lease is lost: said by the control plane
        except Exception:
            log.exception("thread upkeep failed")

    async def refresh_homes(self) -> None:
        """One round of the opened home tabs' refresh, by the cards' rule. Every replica runs it for the homes opened
        through it (what each showed is this process's memory); ``views.publish`` replaces a view, so two replicas
        refreshing one home show it once."""
        if self.home is None:
            return
        await self.tasks.quiet()
        try:
            await self.home.tick()
        except Exception:
            log.exception("home tab refresh failed")

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[SlackRuntime]:
        """Socket Mode, when an app token is set, for as long as the control plane runs (its envelopes checked as the
        HTTP door checks a body: ``labbot.bot.slack.socket_mode``); Slack's tasks drained at the end."""
        socket = None
        if self.settings.app_token:
            from labbot.bot.slack.socket_mode import GuardedSocketModeHandler

            socket = GuardedSocketModeHandler(self.app, self.settings.app_token)
            await socket.connect_async()
            log.info("Slack Socket Mode connected")
        try:
            yield self
        finally:
            if socket is not None:
                await socket.close_async()
            await self.tasks.drain(timeout=5)
