"""The Starlette app: ``/api/v1`` (the CLI, the MCP servers, scripts), job telemetry, signed plot images and the
probes, joined from one route module per concept, each ``routes(deps) -> list[Route]`` over :class:`ApiDeps`:

- ``health``: ``/healthz``, ``/readyz``, ``/metrics`` (who may read the last two: ``labbot.bot.api.probes``);
- ``runs``: ``/api/v1/jobs``, ``/api/v1/runs``, ``/api/v1/capacity`` (``RunService``);
- ``telemetry``: a job's batches in, a metric's points out (``TelemetryStore``);
- ``pages``: ``/api/v1/pages`` (the pager); ``audit``: ``/api/v1/audit`` (the agents' tool calls);
- ``plots``: ``/plots/{run_id}/IMAGE.png?sig=SIG``, a run's plots behind a signed link (the Notion report's images);
- ``artifacts``: ``/api/v1/artifacts`` (the per-agent artifact stores);
- ``evals``: ``/api/v1/evals``; ``feedback``: ``/api/v1/feedback`` and ``/api/v1/ab``; ``compare``:
  ``/api/v1/compare``;
- ``experiments``: ``/api/v1/experiments`` (``ExperimentService``); ``claims``: ``/api/v1/claims/check`` (a report's
  numbers recomputed from the store); ``findings``: ``/api/v1/findings`` (what the lab learned, searched);
  ``research``: ``/api/v1/research`` (``ResearchService``: a question's plan, its approval, its checked report).

Every ``/api/v1`` route but telemetry's needs the admin token (``ApiDeps.admin``); errors become JSON once, in
``labbot.bot.web.errors``; a service the composition root did not pass in answers 503.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from labbot.agents.babysitter.pager import Pager
from labbot.agents.feedback.ab import AbTest
from labbot.bot.api import (
    artifacts,
    audit,
    claims,
    compare,
    evals,
    experiments,
    feedback,
    findings,
    health,
    pages,
    plots,
    research,
    runs,
    telemetry,
)
from labbot.bot.api.deps import MAX_ARTIFACT_BODY, ApiDeps, PostFile, Ready
from labbot.bot.api.probes import REFUSE_ANONYMOUS, ProbeAccess
from labbot.bot.metrics import Metrics
from labbot.bot.web.edge import RefuseUnstorable
from labbot.evals.service import EvalService
from labbot.storage.artifacts import ArtifactStore
from labbot.storage.db import Database
from labbot.training.experiments.service import ExperimentService
from labbot.training.findings import FindingStore
from labbot.training.research.service import ResearchService
from labbot.training.service import RunService
from labbot.training.telemetry_store import TelemetryStore

# in the order they are matched; bound here because create_app's arguments `artifacts`, `evals`, `experiments` and
# `findings` hide four names
ROUTE_MODULES = (
    health,
    runs,
    telemetry,
    pages,
    audit,
    plots,
    artifacts,
    evals,
    feedback,
    compare,
    experiments,
    claims,
    findings,
    research,
)


def create_app(
    service: RunService,
    telemetry_store: TelemetryStore,
    *,
    admin_token: str,
    pager: Pager | None = None,
    db: Database | None = None,
    artifacts: ArtifactStore | None = None,
    max_artifact_bytes: int = MAX_ARTIFACT_BODY,
    post_file: PostFile | None = None,
    evals: EvalService | None = None,
    ab: AbTest | None = None,
    extra_routes: Sequence[BaseRoute] = (),
    ready: Ready | None = None,
    metrics: Metrics | None = None,
    probes: ProbeAccess = REFUSE_ANONYMOUS,
    admins: frozenset[str] = frozenset(),
    experiments: ExperimentService | None = None,
    kick: Callable[[], None] | None = None,
    findings: FindingStore | None = None,
    research: ResearchService | None = None,
) -> Starlette:
    """The HTTP app. ``db`` serves ``/api/v1/audit`` (read only, through ``labbot.agents.fleet.audit.audit_rows``) and
    ``artifacts`` serves ``/api/v1/artifacts``; either left ``None`` makes its routes answer 503 ``not_running``.
    ``post_file(channel, thread_ts, filename, data)`` uploads into Slack (``/api/v1/artifacts/{id}/post``).
    ``max_artifact_bytes`` caps one upload's body (413 over it). ``ready`` answers ``/readyz`` (``(ready, body)``,
    ``labbot.bot.health.readiness``) and ``metrics`` serves ``/metrics``; either ``None`` answers 503. ``probes`` says
    who may read those two (``labbot.bot.api.probes``; the default refuses anonymous callers: the composition root
    passes the rule of the address it binds). ``admins`` (``[roles] admins``) see every eval suite and run when a read
    names one of them in ``?by=``. ``experiments`` serves ``/api/v1/experiments`` (503 when ``None``), and ``kick``
    brings the leader's next tick forward when one is created; ``findings`` serves ``/api/v1/findings`` and
    ``research`` ``/api/v1/research``.
    ``extra_routes`` (Slack's ``POST /slack/events``) are matched first."""
    deps = ApiDeps(
        service=service,
        telemetry=telemetry_store,
        admin_token=admin_token,
        pager=pager,
        db=db,
        artifacts=artifacts,
        max_artifact_bytes=max_artifact_bytes,
        post_file=post_file,
        evals=evals,
        ab=ab,
        ready=ready,
        metrics=metrics,
        probes=probes,
        admins=admins,
        experiments=experiments,
        kick=kick,
        findings=findings,
        research=research,
    )
    # extra routes first: POST /slack/events is the route under a burst (Slack's 3 s)
    routes = [*extra_routes, *(route for module in ROUTE_MODULES for route in module.routes(deps))]
    # ids and query values no database can hold are a 400 here, once for every route (labbot.bot.web.edge)
    return Starlette(routes=routes, middleware=[Middleware(RefuseUnstorable)])
