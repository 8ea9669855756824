"""The composition root of ``labbot serve``: settings → database → Ray → run service → pager → HTTP server,
Slack, and the APScheduler jobs: the watchdog tick (one ``list_jobs`` call and one query; escalation timers and queued
admission ride on it), the outbox sender, the run threads' upkeep and the optional dead-man ping.

One asyncio process per replica. Every replica serves HTTP, Slack's events and the API; the jobs above are singletons,
run only by the replica holding the leader lease (``labbot.storage.lease``), each run inside the lease's fence: their
writes check it first, and so do their side effects outside the database (Slack posts, PagerDuty events, Ray
submissions and stops), right before each (``guard``/``aguard``). A replica checks the lease every ``[leader] renew``;
the one that takes it (or takes it back under a new token) recovers the outbox's cut-off deliveries and ticks at
once. Everything the singletons do survives a change of leader or a restart: incidents, their timers and the
deliveries not yet sent are rows. On SQLite a second replica is refused at start-up. On exit a leader stops its
singletons, then releases the lease (a follower takes over at its next check), and the embedded Ray head it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import gc
import json
import logging
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from anyio import to_thread
from starlette.applications import Starlette

from labbot.agents.babysitter.deadman import DeadmanSwitch
from labbot.agents.babysitter.outbox import Notifier, Outbox, PagerDutyNotifier
from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.pagerduty import PagerDutyClient
from labbot.agents.babysitter.watchdog import Watchdog
from labbot.agents.feedback.ab import AbTest
from labbot.bot.agents_wiring import AgentsStack, build_agents
from labbot.bot.api import create_app
from labbot.bot.api.in_process import InProcessApi
from labbot.bot.api.plots import plot_url
from labbot.bot.api.probes import OPEN_PROBES_ENV, ProbeAccess
from labbot.bot.config import Settings, SlackSettings
from labbot.bot.health import readiness
from labbot.bot.integrations import agents_line
from labbot.bot.logs import RedactingFilter, formatter
from labbot.bot.metrics import Metrics
from labbot.bot.schedule import Periodic
from labbot.bot.slack.crosslinks import CrossLinks
from labbot.bot.slack.experiment_threads import ExperimentThreads
from labbot.bot.slack.handlers import SlackDeps
from labbot.bot.slack.pager_notifier import SlackPageNotifier, outbox_client
from labbot.bot.slack.research_threads import ResearchThreads
from labbot.bot.slack.runtime import SlackCore, SlackRuntime
from labbot.evals.running.solver_access import SolverAccess
from labbot.evals.service import EVAL_GENERATE_JOB, EVAL_INCIDENTS_JOB, EVAL_JOB, EVAL_JOBS, EVALS_OWNER, EvalService
from labbot.storage.artifacts import ArtifactStore
from labbot.storage.db import Database, fenced
from labbot.storage.lease import Fenced, Lease, holder_id
from labbot.training.claims import StoreSources
from labbot.training.experiments.service import ExperimentService
from labbot.training.experiments.study import Studies
from labbot.training.findings import FindingStore
from labbot.training.launcher import RayLauncher
from labbot.training.ray_cluster import EmbeddedRayHead, RayConnection, connect
from labbot.training.registry import JobRegistry
from labbot.training.research.service import ResearchService
from labbot.training.service import RunService
from labbot.training.telemetry_store import TelemetryStore

log = logging.getLogger("labbot")
EVALS_QUOTA_BYTES = 50 << 30  # the eval suites and .eval logs kept in the artifact store


def leader_only(lease: Lease | None, job: Callable[[], Awaitable[object]]) -> Callable[[], Coroutine[Any, Any, None]]:
    """``job`` run only while this replica holds ``lease`` (None: this process, alone), inside its fence: a write it
    makes after the lease was lost (expired, or taken by another) is refused, not committed."""

    async def run() -> None:
        if lease is not None and not lease.held():
            return
        try:
            with fenced(lease):
                await job()
        except Fenced as e:
            log.warning("%s (%s)", e.message, getattr(job, "__name__", "a singleton"))

    run.__name__ = getattr(job, "__name__", "singleton")
    return run


async def send_outbox(outbox: Outbox) -> None:
    """The outbox sender: what is due goes out (the leader's, inside its fence)."""
    try:
        await outbox.drain()
    except Fenced:
        raise
    except Exception:
        log.exception("sending notifications failed")


@dataclass
class ControlPlane:
    """Everything ``labbot serve`` runs but the HTTP server, each part given at construction (``build``)."""

    settings: Settings
    db: Database
    ray: RayConnection
    head: EmbeddedRayHead | None
    launcher: RayLauncher
    service: RunService
    telemetry: TelemetryStore
    admin_token: str
    pager: Pager
    watchdog: Watchdog
    outbox: Outbox
    slack: SlackRuntime | None = None
    deadman: DeadmanSwitch | None = None
    pagerduty: PagerDutyClient | None = None
    agents: AgentsStack | None = None
    artifacts: ArtifactStore | None = None
    evals: EvalService | None = None
    experiments: ExperimentService | None = None  # sweeps: the controller moves them on the watchdog's tick
    research: ResearchService | None = None  # research questions: a plan under one approval, a checked report
    ab: AbTest | None = None  # [agents.ab]: new agent threads split between two models
    metrics: Metrics | None = None  # /metrics: this plane's registry, and the observer its layers report to
    lease: Lease | None = None  # who runs the singletons among the replicas (None: this process, alone)
    in_process: InProcessApi | None = None  # the agents' door into this plane's app (`app()` puts the app in)
    # what the scheduler changes as the plane runs (not wiring): the role the last lease check found (its change is
    # what `lead` acts on), the lease token this replica last took the lead under, the scheduler's jobs
    _leading: bool = field(default=False, init=False)
    _led_token: int | None = field(default=None, init=False)
    # the scheduler, built with the plane (its jobs are added by `periodic`, started by `background`): handlers bring
    # the watchdog's tick forward through it (a new experiment's first trials)
    jobs: Periodic = field(default_factory=Periodic)

    @classmethod
    def build(cls, settings: Settings, *, slack: SlackSettings | None = None) -> ControlPlane:
        """Everything but the HTTP server, each part built once, in the order they need each other: storage and the
        lease, Ray and the run service, the pager, artifacts and evals, Slack's client and run threads, the outbox and
        watchdog, then the agents (which need Slack's client), the integrations, and Slack's handlers and Bolt app.
        ``slack`` overrides the environment's Slack settings (console)."""
        settings.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        settings.home.chmod(0o700)  # the database, tokens, artifacts and Ray's state: nobody else's to read
        registry = JobRegistry.from_config(settings.jobs_table)  # a bad labbot.toml fails before anything starts
        ab = settings.ab_test  # a bad [agents.ab] too
        _set_eval_env(registry, settings)
        db = Database(settings.database_url)
        db.upgrade()
        lease = Lease(db, holder=holder_id(settings.leader.replica), ttl_s=settings.leader.lease_s)
        if db.dialect == "sqlite":  # one replica: a second is refused here, before it touches Ray or Slack
            lease.claim_sole(database=db.display_url)
        metrics = Metrics(db, is_leader=lease.held)  # labbot_leader: whether this replica holds the lease now
        ray, head = connect(settings.home, settings.ray_address, settings.ray_token)
        try:
            return cls._on_ray(settings, slack, registry, ab, db, lease, metrics, ray, head)
        except BaseException:  # a failure, or SIGTERM, while the rest is built: the Ray head started here stops too
            if head is not None:
                head.stop()
            raise

    @classmethod
    def _on_ray(
        cls,
        settings: Settings,
        slack: SlackSettings | None,
        registry: JobRegistry,
        ab: AbTest | None,
        db: Database,
        lease: Lease,
        metrics: Metrics,
        ray: RayConnection,
        head: EmbeddedRayHead | None,
    ) -> ControlPlane:
        """The rest of :meth:`build`, once Ray is connected."""
        launcher = RayLauncher(ray)
        if settings.jobs_get_labbots_own_keys:
            log.warning(
                "jobs write their checkpoints with labbot's own object-store key pair: give them one limited to the "
                "runs' prefix (LABBOT_JOB_AWS_ACCESS_KEY_ID / LABBOT_JOB_AWS_SECRET_ACCESS_KEY, docs/deploy.md)"
            )
        service = RunService(
            db,
            registry,
            launcher,
            control_url=settings.internal_url,  # what jobs post their telemetry to
            checkpoint_root=settings.checkpoint_root,
            compute=settings.compute,
            checkpoint_url=settings.checkpoint_url if settings.checkpoint_remote else None,
            job_env=settings.job_storage_env,
            local_checkpoint_jobs=EVAL_JOBS | {EVAL_GENERATE_JOB},  # their results are read from disk here
            # [training] checkpoint_root names a folder every Ray node mounts; the default one is this machine's only
            checkpoints_shared=settings.checkpoint_root_declared,
        )
        token = settings.admin_token(create=True)
        assert token is not None
        telemetry = TelemetryStore(db, observer=metrics)
        slack = slack or settings.slack
        pagerduty = (
            PagerDutyClient(settings.pagerduty_key, url=settings.pagerduty_url, observer=metrics)
            if settings.pagerduty_key
            else None
        )
        pager = Pager(db, settings.paging, slack=slack.configured, pagerduty=pagerduty is not None)
        in_process = InProcessApi(token)
        # one store per process (its lock is per instance); blobs/ and tmp/ sit beside runs/ under the root
        artifacts = ArtifactStore(db, settings.artifacts_url, quotas={EVALS_OWNER: EVALS_QUOTA_BYTES})
        access = SolverAccess(settings.eval_solver_dirs, settings.eval_solver_hosts, settings.eval_allow_hosts)
        evals = EvalService(service, artifacts, settings.eval_suites_root, redactor=launcher.redact, access=access)
        core = SlackCore.build(slack, service, telemetry, observer=metrics) if slack.configured else None
        notifiers: dict[str, Notifier] = {}
        if core is not None and slack.bot_token:
            notifiers["slack"] = SlackPageNotifier(
                outbox_client(slack.bot_token, slack.api_url, observer=metrics),
                core.threads,
                usergroup=settings.paging.oncall_usergroup,
                file_incidents=settings.integrations.incidents,
            )
        if pagerduty is not None:
            notifiers["pagerduty"] = PagerDutyNotifier(pagerduty)
        outbox = Outbox(db, notifiers)
        watchdog = Watchdog(db, launcher, service, pager, settings.watchdog, address=ray.address)
        jobs = Periodic()  # the scheduler: its jobs are added when the plane runs (`periodic`)
        # an experiment's study in Optuna's tables of the same database (opened on first use)
        # what the lab learned: every ended experiment's finding, its numbers checked against the store
        sources = StoreSources(telemetry.series, lambda exp_id: experiments.get(exp_id), evals.results)
        findings = FindingStore(db, artifacts, sources)
        experiments = ExperimentService(
            db, service, Studies(db.engine.url.render_as_string(hide_password=False)), findings=findings
        )
        # research questions: the researcher's plans (each released by one approval), their checked reports
        research = ResearchService(db, experiments, sources, findings=findings)
        deadman = DeadmanSwitch(settings.deadman.url, method=settings.deadman.method) if settings.deadman else None
        agents, runtime = None, None
        if core is not None:
            # after a button changed a page: its deliveries go out now on the leader (a follower leaves them)
            deliver = leader_only(lease, functools.partial(send_outbox, outbox))
            agents = build_agents(
                config=settings.config,
                db=db,
                service=service,
                slack=core,
                lab_api=in_process.lab_api,  # in process: never out through LABBOT_PUBLIC_URL
                model=settings.model,
                integrations=settings.integrations,
                ab=ab,
                observer=metrics,
                experiments=experiments,
                research=research,
            )
            deps = _slack_deps(settings, core, service, telemetry, pager, agents, artifacts, evals, ab, deliver, token)
            runtime = SlackRuntime.build(
                dataclasses.replace(
                    deps,
                    experiments=experiments,
                    experiment_threads=ExperimentThreads(core.client, experiments, command=core.settings.command),
                    research_threads=ResearchThreads(
                        core.client, research, experiments, settings.integrations, agents.call_tool
                    ),
                    tick_soon=leader_tick(lease, jobs),
                )
            )
        return cls(
            settings, db, ray, head, launcher, service, telemetry, token, pager, watchdog, outbox, jobs=jobs,
            slack=runtime, deadman=deadman, pagerduty=pagerduty, agents=agents, artifacts=artifacts, evals=evals,
            experiments=experiments, research=research, ab=ab, metrics=metrics, lease=lease, in_process=in_process,
        )  # fmt: skip

    def app(self) -> Starlette:
        """The HTTP app, put into the agents' in-process door too. ``/readyz`` and ``/metrics`` follow the rule of
        the address the server binds (``LABBOT_HOST``; ``labbot.bot.api.probes``)."""
        app = create_app(
            self.service,
            self.telemetry,
            admin_token=self.admin_token,
            pager=self.pager,
            db=self.db,
            artifacts=self.artifacts,
            evals=self.evals,
            ab=self.ab,
            post_file=self.slack.threads.post_file if self.slack else None,
            extra_routes=self.slack.routes() if self.slack else (),
            ready=self.ready,
            metrics=self.metrics,
            probes=self.probes,
            admins=(self.slack.settings if self.slack else self.settings.slack).admins,
            experiments=self.experiments,
            findings=self.experiments.findings if self.experiments is not None else None,
            research=self.research,
            kick=leader_tick(self.lease, self.jobs),
        )
        if self.in_process is not None:
            self.in_process.attach(app)
        return app

    @property
    def probes(self) -> ProbeAccess:
        """Who may read ``/readyz`` and ``/metrics``: decided by the address uvicorn binds (``serve``)."""
        s = self.settings
        return ProbeAccess.for_bind(s.host, token=s.metrics_token, open_probes=s.open_probes)

    @property
    def slack_mode(self) -> str:
        """``socket``, ``http`` or ``off``: how Slack reaches this plane (``/readyz``'s detail)."""
        if self.slack is None:
            return "off"
        return "socket" if self.slack.settings.app_token else "http"

    def is_leader(self) -> bool:
        """Whether this replica runs the singletons now: it holds the lease and its local deadline is ahead."""
        return self.lease is None or self.lease.held()

    async def ready(self) -> tuple[bool, dict[str, Any]]:
        """``/readyz``: the database answers ``SELECT 1`` and Ray its version, each within 2 s; the role, this
        replica's name in the lease and the leader's; whether Ray is the embedded head and how Slack connects (Ray's
        address is not shown: it is in the log at start-up)."""
        role = "leader" if self.is_leader() else "follower"
        ok, body = await readiness(self.db.ping, self.launcher.ping, role=role)
        if self.lease is not None:
            body["replica"] = self.lease.holder
            body["leader"] = self.lease.holder if role == "leader" else self.lease.last.holder
        body["embedded_ray"] = self.ray.embedded
        body["slack"] = self.slack_mode
        return ok, body

    # -- leadership ---------------------------------------------------------------------------------------------

    async def lead(self) -> None:
        """One check of the lease (every ``[leader] renew``): renew it, or take it when free or expired. Becoming
        leader, or taking the lease back under a new token (lost and retaken between two checks): the outbox's
        deliveries cut off mid-send go back to the queue and the watchdog ticks now."""
        if self.lease is None:
            return
        leads = await to_thread.run_sync(self.lease.step)
        token = self.lease.token if leads else None
        if leads == self._leading and (not leads or token == self._led_token):
            return
        self._leading = leads
        if not leads:
            log.warning("this replica follows now: its singletons stop (%s leads)", self.lease.last.holder or "nobody")
            return
        self._led_token = token
        log.info("this replica leads now (lease token %s): watchdog, outbox, escalations start", self.lease.token)
        try:
            with fenced(self.lease):
                await to_thread.run_sync(self.outbox.recover)
        except Fenced as e:
            log.warning("%s", e.message)
            return
        for name in ("watchdog", "outbox"):
            self.jobs.run_soon(name)

    def singleton(self, job: Callable[[], Coroutine[Any, Any, object]]) -> Callable[[], Coroutine[Any, Any, None]]:
        """``job`` run only while this replica holds the lease, inside its fence (``leader_only``)."""
        return leader_only(self.lease, job)

    async def watch(self) -> None:
        """One watchdog tick (on a worker thread), then the outbox at once: a page goes out in the same second."""
        if self.slack is not None:
            await self.slack.tasks.quiet()  # Slack's acks first: a tick can wait out a burst
        started = time.perf_counter()
        try:
            report = await to_thread.run_sync(self.watchdog.tick)
            if self.experiments is not None:  # runs that ended this tick free their trials' places in the same tick
                await to_thread.run_sync(self.experiments.controller.tick)
            if report.changed or report.restarts_scheduled or report.restarts_submitted:
                log.info(
                    "watchdog: %d run(s) changed, %d restart(s) scheduled, %d submitted",
                    report.changed,
                    report.restarts_scheduled,
                    report.restarts_submitted,
                )
        except Fenced:
            raise  # the lease is lost: said by `singleton`, and nothing is sent after it
        except Exception:
            log.exception("watchdog tick failed")
            if self.metrics is not None:
                self.metrics.watchdog_failures.inc()
        if self.metrics is not None:
            self.metrics.watchdog_tick.observe(time.perf_counter() - started)
        await self.drain_outbox()
        opened = self.pager.take_opened()
        if opened and self.agents is not None and self.agents.fleet is not None and self.slack is not None:
            with fenced(None):  # an investigation is an agent's work, not a singleton's: a change of leader keeps it
                self.slack.tasks.spawn(self.agents.investigate(self.pager, opened), name="investigate")

    async def drain_outbox(self) -> None:
        """The outbox sender: what is due goes out (the leader's, inside its fence)."""
        await send_outbox(self.outbox)

    async def drain_outbox_if_leader(self) -> None:
        """After a button changed a page: on the leader, its deliveries go out now; a follower leaves them to the
        leader's sender (within a second)."""
        await self.singleton(self.drain_outbox)()

    def periodic(self) -> Periodic:
        """The lease check every ``[leader] renew``; the singletons: the watchdog every ``[watchdog] tick``, the
        outbox every second, the run threads' upkeep, the dead-man ping when configured."""
        jobs = self.jobs
        jobs.every(self.settings.leader.renew_s, self.lead, name="lease")
        jobs.every(self.settings.watchdog.tick_s, self.singleton(self.watch), name="watchdog")
        jobs.every(1.0, self.singleton(self.drain_outbox), name="outbox")
        if self.slack is not None:
            jobs.every(self.slack.tick_s, self.singleton(self.slack.upkeep), name="threads")
            jobs.every(self.slack.tick_s, self.slack.refresh_homes, name="homes")  # every replica: its own homes
        if self.deadman is not None and self.settings.deadman is not None:
            jobs.every(self.settings.deadman.every_s, self.singleton(self.deadman.ping), name="deadman")
        return jobs

    def close(self) -> None:
        self.launcher.close()
        if self.head is not None:
            self.head.stop()
        self.db.dispose()


def _set_eval_env(registry: JobRegistry, settings: Settings) -> None:
    """What the eval jobs are told of where suites live, what they may reach and what they must not see."""
    registry.set_env(
        EVAL_JOB,
        {
            "LABBOT_EVAL_SUITES": str(settings.eval_suites_root),
            "LABBOT_EVAL_ALLOW_HOSTS": ",".join(settings.eval_allow_hosts),
            # what the isolation probes check no sandbox can see: labbot's home (database, tokens, Ray's state)
            "LABBOT_EVAL_PROTECT": str(settings.home),
            # the folders a command solver may have at /solver, by name (the job checks it exists there)
            "LABBOT_EVAL_SOLVER_DIRS": json.dumps({k: str(v) for k, v in settings.eval_solver_dirs.items()}),
            # an agent solver's default model and the providers' keys given for evals (LABBOT_EVAL_ANTHROPIC_API_KEY
            # is the job's ANTHROPIC_API_KEY); labbot's own key never reaches a job
            **settings.eval_model_env,
        },
    )
    registry.set_env(EVAL_INCIDENTS_JOB, {"LABBOT_EVAL_SUITES": str(settings.eval_suites_root)})
    # suites are generated from the repository the codebase server serves: an agent cannot name another path
    registry.set_env(
        EVAL_GENERATE_JOB,
        {"LABBOT_EVAL_SUITES": str(settings.eval_suites_root), "LABBOT_EVAL_SOURCE": str(settings.codebase_root)},
    )


def _agents_line(settings: Settings, slack: SlackSettings) -> str:
    return agents_line(settings.model.model if settings.model.configured else None, slack.command)


def leader_tick(lease: Lease | None, jobs: Periodic) -> Callable[[], None]:
    """Bring the watchdog's next tick (and the experiments' step in it) forward to now, when this replica leads; a
    follower's leader ticks on its own schedule."""

    def kick() -> None:
        if lease is None or lease.held():
            jobs.run_soon("watchdog")

    return kick


def _slack_deps(
    settings: Settings,
    core: SlackCore,
    service: RunService,
    telemetry: TelemetryStore,
    pager: Pager,
    agents: AgentsStack,
    artifacts: ArtifactStore,
    evals: EvalService,
    ab: AbTest | None,
    deliver: Callable[[], Awaitable[None]],
    token: str,
) -> SlackDeps:
    """What the ``/lab`` handlers and buttons call, with the integrations (Notion reports, Linear incidents) built
    over the agents' audited tools."""
    slack = core.settings
    crosslinks = CrossLinks(
        core.client,
        service,
        telemetry,
        core.threads,
        settings.integrations,
        agents.call_tool,
        pager=pager,
        admins=slack.admins,
        after_page_change=deliver,
        plot_url=lambda run_id, image: plot_url(settings.public_url, token, run_id, image),
    )
    linear = settings.integrations.incidents  # a page filed in Linear may have its cause written there
    return SlackDeps(
        client=core.client,
        service=service,
        threads=core.threads,
        settings=slack,
        pager=pager,
        after_page_change=deliver,
        conversations=agents.conversations,
        gate=agents.gate,
        crosslinks=crosslinks,
        help_footer=tuple(settings.integrations.help_lines(slack.command, agents=_agents_line(settings, slack))),
        agents_line=_agents_line(settings, slack),
        artifacts=artifacts,
        evals=evals,
        linear_cause=crosslinks.linear_cause if linear else None,
        record_cause=(lambda page_id, cause, user: pager.resolve(page_id, by=user, cause=cause)) if linear else None,
        ab=ab,
    )


@contextlib.asynccontextmanager
async def background(plane: ControlPlane) -> AsyncIterator[None]:
    """The scheduler (lease, watchdog, outbox, threads, dead-man) and the Slack runtime when Slack is on, while the
    server runs. The lease is checked once before: a replica alone (or first) leads from its first second."""
    jobs = plane.periodic()
    await plane.lead()
    jobs.start()
    asyncio.get_running_loop().call_soon(jobs.run_soon, "watchdog")
    try:
        if plane.slack is not None:
            async with plane.slack.running():
                yield
        else:
            yield
    finally:
        await jobs.stop()  # a tick in progress ends (its pages written and sent) before anything closes
        if plane.lease is not None:  # the singletons have stopped: a follower may take over at once
            await to_thread.run_sync(plane.lease.release)
        if plane.agents is not None:
            with contextlib.suppress(Exception):
                await plane.agents.close()
        for closable in (plane.deadman, plane.pagerduty):
            if closable is not None:
                with contextlib.suppress(Exception):
                    await closable.aclose()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed (uvicorn[standard] brings it): faster acks under a burst of Slack requests."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


# held at WARNING: chatty at INFO, and the AWS SDK's DEBUG lines quote request headers (the access key id) and the
# credentials it found, so an object store's credentials never reach labbot's log whatever the root level
QUIET_LOGGERS = (
    "httpx", "uvicorn.access", "alembic.runtime.migration", "slack_bolt", "slack_sdk", "apscheduler",
    "botocore", "aiobotocore", "boto3", "s3fs", "fsspec", "urllib3",
)  # fmt: skip


def configure_logging(settings: Settings, *, quiet: bool = False) -> None:
    """INFO to stderr; with ``quiet`` (the console, whose terminal shows the channel) only warnings go there and
    the rest to ``LABBOT_HOME/labbot.log``. ``LABBOT_LOG_FORMAT=json``: one JSON object a line (``labbot.bot.logs``);
    either way secrets are redacted first."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    redacting = RedactingFilter([settings.ray_token, settings.pagerduty_key, settings.metrics_token])
    err = logging.StreamHandler(sys.stderr)
    err.setFormatter(formatter(settings.log_format))
    err.setLevel(logging.WARNING if quiet else logging.INFO)
    err.addFilter(redacting)
    root.addHandler(err)
    if quiet:
        settings.home.mkdir(parents=True, exist_ok=True)
        to_file = logging.FileHandler(settings.home / "labbot.log")
        to_file.setFormatter(formatter(settings.log_format))
        to_file.addFilter(redacting)
        root.addHandler(to_file)
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)


ConsoleMain = Callable[[ControlPlane], Coroutine[Any, Any, None]]


def serve(settings: Settings, *, slack: SlackSettings | None = None, console: ConsoleMain | None = None) -> int:
    """Run the control plane until stopped; with ``console``, until that coroutine (the console) returns."""
    configure_logging(settings, quiet=console is not None)
    # SIGTERM as an exception from the start: stopped while the Ray head starts, labbot stops what it started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    plane = ControlPlane.build(settings, slack=slack)
    app = plane.app()
    # everything imported and built so far lives as long as the process: keep the cyclic GC from walking it
    # again and again (ray, sqlalchemy, slack_bolt make a big heap; a full collection stalls Slack's acks)
    gc.collect()
    gc.freeze()

    async def main() -> None:
        config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        async with background(plane):
            log.info(
                "labbot control plane on %s — Ray %s%s — database %s — Slack %s",
                settings.public_url,
                plane.ray.address,
                " (embedded)" if plane.ray.embedded else "",
                plane.db.display_url,
                plane.slack_mode,
            )
            probes = plane.probes
            if not probes.open and probes.token is None:
                log.warning(
                    "labbot listens on %s, beyond localhost, with neither LABBOT_METRICS_TOKEN nor %s set: /readyz "
                    "and /metrics answer 401 until one is (a token: /readyz still gives probes its status code)",
                    settings.host,
                    OPEN_PROBES_ENV,
                )
            if console is None:
                log.info("try, in another terminal:  .venv/bin/labbot launch tiny-lm steps=100")
                await server.serve()
                return
            serving = asyncio.create_task(server.serve())
            while not server.started:
                if serving.done():
                    await serving  # it failed to start (port taken?): raise that
                    return
                await asyncio.sleep(0.05)
            talking = asyncio.create_task(console(plane))
            await asyncio.wait({serving, talking}, return_when=asyncio.FIRST_COMPLETED)
            server.should_exit = True
            talking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await talking
            await serving

    # uvicorn re-raises the signal that stopped it; SIGTERM is an exception (set above), so the finally below runs
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(main())
    finally:
        plane.close()
        log.info("labbot control plane stopped")
    return 0
