"""What the HTTP app's routes work with, passed in once: :class:`ApiDeps`, the services the composition root built
(any of them ``None`` when this labbot runs without it) and the admin rule every ``/api/v1`` route goes through.

Each route module (``runs``, ``pages``, ``artifacts``, ...) is ``routes(deps) -> list[Route]``; ``create_app`` builds
one ``ApiDeps`` and joins their lists. Service calls block (SQL, Ray, the artifact filesystem), so routes run them on
worker threads (:func:`blocking`); a service left ``None`` answers 503 :class:`NotRunning`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from anyio import to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from labbot.agents.babysitter.pager import Pager
from labbot.agents.feedback.ab import AbTest
from labbot.bot.api.auth import require_admin
from labbot.bot.api.probes import REFUSE_ANONYMOUS, ProbeAccess
from labbot.bot.metrics import Metrics
from labbot.bot.web.errors import from_exception
from labbot.common.errors import LabbotError
from labbot.evals.service import EvalService
from labbot.storage.artifacts import ArtifactStore
from labbot.storage.db import Database
from labbot.training.experiments.service import ExperimentService
from labbot.training.findings import FindingStore
from labbot.training.research.service import ResearchService
from labbot.training.service import RunService
from labbot.training.telemetry_store import TelemetryStore

T = TypeVar("T")
Handler = Callable[[Request], Any]  # answers a Response, or a JSON document (200)
PostFile = Callable[[str, str | None, str, bytes], Awaitable[None]]
Ready = Callable[[], Awaitable[tuple[bool, dict[str, Any]]]]
MAX_ARTIFACT_BODY = 100 << 20  # one artifact upload; the store's per-agent quota applies on top


class NotRunning(LabbotError):
    """A service this labbot was started without (the composition root passed ``None``)."""

    status = 503
    code = "not_running"


@dataclass(frozen=True)
class ApiDeps:
    """The app's services and settings (``create_app``'s arguments; see its docstring)."""

    service: RunService
    telemetry: TelemetryStore
    admin_token: str
    pager: Pager | None = None
    db: Database | None = None
    artifacts: ArtifactStore | None = None
    max_artifact_bytes: int = MAX_ARTIFACT_BODY
    post_file: PostFile | None = None
    evals: EvalService | None = None
    ab: AbTest | None = None
    ready: Ready | None = None
    metrics: Metrics | None = None
    probes: ProbeAccess = REFUSE_ANONYMOUS
    admins: frozenset[str] = frozenset()
    experiments: ExperimentService | None = None
    kick: Callable[[], None] | None = None  # brings the leader's next tick forward (a new experiment's trials)
    findings: FindingStore | None = None
    research: ResearchService | None = None

    def admin(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` behind the admin token; its errors become the JSON error body, a dict it returns JSON."""

        async def wrapped(request: Request) -> Response:
            try:
                require_admin(request, self.admin_token)
                result = await handler(request)
            except Exception as e:
                return from_exception(e)
            return result if isinstance(result, Response) else JSONResponse(result)

        return wrapped


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on a worker thread: never a blocking call on the event loop."""
    return await to_thread.run_sync(lambda: fn(*args, **kwargs))
