"""An EvalService over a real database and artifact store with Ray's job submission recorded instead of made, a
suite folder written by hand, and finished eval runs with the results their job would have written: for the tests
of the evals service, its HTTP routes, the lab MCP tools and ``/lab eval``."""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support import make_service

from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.policy import PagingPolicy
from labbot.bot.config import SlackSettings
from labbot.bot.slack.handlers import SlackDeps
from labbot.bot.slack.handlers import evals as eval_handlers
from labbot.bot.slack.thread_plan import Cadence
from labbot.bot.slack.threads import RunThreads
from labbot.evals.service import EvalService
from labbot.evals.suite import EvalTask, Suite, suite_id
from labbot.storage.artifacts import ArtifactStore
from labbot.storage.models import AgentMessage, AgentSession, Incident, MetricPoint, Run
from labbot.training.ray_cluster import RayConnection
from labbot.training.telemetry_store import TelemetryStore


def make_eval_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str | None = None) -> EvalService:
    """On a SQLite file in ``tmp_path``, or on ``database_url`` (the ``database_url`` fixture's, for a test marked
    ``databases``)."""
    service = make_service(tmp_path, RayConnection("http://127.0.0.1:9", None), database_url=database_url)
    submitted: list[Any] = []
    monkeypatch.setattr(service.launcher, "submit", lambda sub: submitted.append(sub) or sub.submission_id)
    artifacts = ArtifactStore(service.db, str(tmp_path / "artifacts"))
    svc = EvalService(service, artifacts, tmp_path / "suites")
    svc.submitted = submitted  # type: ignore[attr-defined]
    return svc


def make_suite(folder: Path, *, tasks: int = 2) -> Suite:
    """A suite folder by hand: the shape ``labbot.evals.generation.generator`` writes."""
    folder.mkdir(parents=True)
    (folder / "original" / "pkg").mkdir(parents=True)
    (folder / "original" / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    items = []
    for i in range(tasks):
        task_id = f"t{i:02d}-add"
        (folder / "tasks" / task_id / "repo").mkdir(parents=True)
        f2p = [f"tests/test_calc.py::test_{i}"]
        items.append(EvalTask(task_id, "pkg/calc.py", "add", "body", "Restore add.", f2p, [], f"canary-{i}"))
    doc = Suite("", "calc", "0" * 40, 0, items).to_json()
    suite = Suite.from_json({**doc, "id": suite_id(doc)})
    (folder / "suite.json").write_text(json.dumps(suite.to_json()))
    return suite


def task_ids(n: int = 20) -> list[str]:
    """The ids :func:`make_suite` gives its first ``n`` tasks."""
    return [f"t{i:02d}-add" for i in range(n)]


def finished(
    evals: EvalService, suite: str, solver: str, verdicts: dict[str, bool], *, owner: str = "alice", **extra: Any
) -> str:
    """An eval run launched through the service, then its job's results.json written and the run ended."""
    run = evals.launch(suite, solver=solver, owner=owner)
    out = evals.runs.checkpoint_root / run["id"] / "eval"
    out.mkdir(parents=True)
    samples = [{"task": t, "passed": p, "output": "", "time_s": 3.5, "tokens": 1200} for t, p in verdicts.items()]
    doc = {"suite": suite, "solver": solver, "status": "succeeded", "samples": samples,
           "pass_rate": sum(verdicts.values()) / len(verdicts), "isolation": {"score": 1.0, "probes": []},
           "untrusted": False, "log": "", **extra}  # fmt: skip
    (out / "results.json").write_text(json.dumps(doc))
    with evals.runs.db.session() as s:
        s.get_one(Run, run["id"]).status = "succeeded"
    return str(run["id"])


PAGED_AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
LABBOTS_OWN_SECRET = "labbot-own-secret-value-9f8e7d"
SLACK_TOKEN = "xoxb-" + "1234567890-abcdefghijklmnop"  # in two parts: not a credential in the diff
CAUSE = "the data loader deadlocked: its workers blocked on a full shared-memory queue"


def paged_run(
    evals: EvalService,
    *,
    page_id: str = "pq3x7k",
    resolved: bool = True,
    cause: str | None = CAUSE,
    role: str = "investigator",
) -> None:
    """A run of tiny-lm that hung at step 40, paged; its metrics before and after the page, its investigator's
    investigation (tool calls and results, and its own conclusion; a session of ``role``), and the page itself."""
    db = evals.runs.db
    with db.session() as s:
        s.add(
            Run(
                id="r1hung", job="tiny-lm", name="tiny-lm-r1hung", owner="U0ALICE001", status="stalled", attempt=1,
                config={"params": {"steps": 1000, "api_token": "tok-should-not-leak"}, "gpus": 0},
                telemetry_token_hash="x" * 64,
            )
        )  # fmt: skip
        s.flush()
        for step in range(1, 41):
            at = PAGED_AT - timedelta(seconds=(41 - step) * 10)
            s.add(MetricPoint(run_id="r1hung", attempt=1, step=step, name="loss", value=3.0 - step / 40, ts=at))
            # a metric whose name sounds like a secret: its numbers are no secret (redacted, they broke the case)
            s.add(MetricPoint(run_id="r1hung", attempt=1, step=step, name="tokens_per_s", value=3400.0, ts=at))
        s.add(MetricPoint(run_id="r1hung", attempt=1, step=41, name="loss", value=0.1, ts=PAGED_AT + timedelta(1)))
        s.add(AgentSession(id="sess1", role=role, owner="labbot", run_id="r1hung", created_at=PAGED_AT))
        s.flush()  # the run and the session before the rows that point at them
        messages: list[tuple[str, Any]] = [
            ("assistant", [{"type": "tool_use", "id": "tu1", "name": "datadog__search_logs", "input": {}}]),
            ("user", [{"type": "tool_result", "tool_use_id": "tu1",
                       "content": [{"type": "text", "text": f"worker 3: queue full; DD header Bearer {'z' * 24}"}]}]),
            ("assistant", [{"type": "text", "text": "My diagnosis: the data loader deadlocked."}]),
        ]  # fmt: skip
        for seq, (role, content) in enumerate(messages):
            s.add(
                AgentMessage(
                    session_id="sess1", seq=seq, role=role, content=content, created_at=PAGED_AT + timedelta(seconds=30)
                )
            )
        s.add(
            Incident(
                id=page_id, key=f"labbot-r1hung-hung-{page_id}", run_id="r1hung", kind="hung", severity="page",
                state="triggered", summary="no progress for 10m at step 40 (stuck in data)",
                detail={"phase": "data", "log_tail": (
                    "step 40/1000 loss 2.0\n"
                    f"export WANDB_API_KEY=wandb-0123456789abcdef and SLACK={SLACK_TOKEN}\n"
                    f"token from env: {LABBOTS_OWN_SECRET}\nworker 3 waiting on queue.put"
                )},
                triggered_at=PAGED_AT,
            )
        )  # fmt: skip
    pager = Pager(db, PagingPolicy(), slack=False, pagerduty=False, clock=lambda: PAGED_AT + timedelta(hours=1))
    if resolved:
        pager.resolve(page_id, by="U0ALICE001", cause=cause)


CHANNEL = "C0LAB00001"


class FakeSlack:
    """The Web API methods these handlers call, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._ts = 1000

    def _record(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((method, params))
        self._ts += 1
        return {"ok": True, "channel": params.get("channel", CHANNEL), "ts": f"{self._ts}.000100"}

    async def chat_postMessage(self, **kw: Any) -> dict[str, Any]:
        return self._record("chat.postMessage", kw)

    async def chat_postEphemeral(self, **kw: Any) -> dict[str, Any]:
        return self._record("chat.postEphemeral", kw)

    async def chat_update(self, **kw: Any) -> dict[str, Any]:
        return self._record("chat.update", kw)

    async def files_upload_v2(self, **kw: Any) -> dict[str, Any]:
        return self._record("files.upload", kw)

    def said(self, method: str) -> list[str]:
        out = []
        for m, p in self.calls:
            if m == method:
                blocks = " ".join(b.get("text", {}).get("text", "") for b in p.get("blocks") or [])
                out.append(f"{p.get('text', '')} {blocks}")
        return out


def slack_lab(evals: EvalService, admins: frozenset[str] = frozenset()) -> tuple[SlackDeps, FakeSlack]:
    """``/lab``'s handlers over a real EvalService and RunThreads, Slack's Web API faked and recorded; an ended eval
    run's thread gets its results (``handlers.evals.finished``)."""
    slack = FakeSlack()
    threads = RunThreads(slack, evals.runs, TelemetryStore(evals.runs.db), Cadence())  # type: ignore[arg-type]
    deps = SlackDeps(slack, evals.runs, threads, SlackSettings(admins=admins), evals=evals)  # type: ignore[arg-type]
    threads.on_end.append(functools.partial(eval_handlers.finished, deps))
    return deps, slack
