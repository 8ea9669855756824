"""The HTTP app's route table, in the order Starlette matches it: every path and method of ``/api/v1``, the probes
and the signed plots, as the route modules (``bot/api/*.py``, each ``routes(deps)``) join into ``create_app``. A
route added, dropped or moved shows here first (their behaviour is the other API tests')."""

from __future__ import annotations

from typing import Any, cast

from labbot.bot.api import create_app

ROUTES = [
    ("/healthz", "GET"),
    ("/readyz", "GET"),
    ("/metrics", "GET"),
    ("/api/v1/jobs", "GET"),
    ("/api/v1/runs", "GET"),
    ("/api/v1/runs", "POST"),
    ("/api/v1/runs/{run_id}", "GET"),
    ("/api/v1/runs/{run_id}/stop", "POST"),
    ("/api/v1/runs/{run_id}/restart", "POST"),
    ("/api/v1/runs/{run_id}/priority", "POST"),
    ("/api/v1/capacity", "GET"),
    ("/api/v1/runs/{run_id}/logs", "GET"),
    ("/api/v1/runs/{run_id}/metrics/{name}", "GET"),
    ("/api/v1/runs/{run_id}/checkpoints", "GET"),
    ("/api/v1/runs/{run_id}/telemetry", "POST"),
    ("/api/v1/pages", "GET"),
    ("/api/v1/pages/{page_id}", "GET"),
    ("/api/v1/pages/{page_id}/ack", "POST"),
    ("/api/v1/pages/{page_id}/resolve", "POST"),
    ("/api/v1/audit", "GET"),
    ("/plots/{run_id}/loss.png", "GET"),
    ("/plots/{run_id}/metrics.png", "GET"),
    ("/api/v1/artifacts", "GET"),
    ("/api/v1/artifacts", "POST"),
    ("/api/v1/artifacts/{artifact_id}", "GET"),
    ("/api/v1/artifacts/{artifact_id}", "DELETE"),
    ("/api/v1/artifacts/{artifact_id}/share", "POST"),
    ("/api/v1/artifacts/{artifact_id}/post", "POST"),
    ("/api/v1/evals/compare", "GET"),
    ("/api/v1/evals/feedback/{feedback_id}", "POST"),
    ("/api/v1/evals/incidents/{page_id}", "POST"),
    ("/api/v1/evals/suites", "POST"),
    ("/api/v1/evals/suites", "GET"),
    ("/api/v1/evals/suites/{suite_id}", "GET"),
    ("/api/v1/evals/suites/{suite_id}/share", "POST"),
    ("/api/v1/evals/runs", "POST"),
    ("/api/v1/evals/runs", "GET"),
    ("/api/v1/evals/runs/{run_id}", "GET"),
    ("/api/v1/feedback", "GET"),
    ("/api/v1/feedback/{feedback_id}", "GET"),
    ("/api/v1/feedback/{feedback_id}/comment", "POST"),
    ("/api/v1/ab", "GET"),
    ("/api/v1/compare", "GET"),
    ("/api/v1/experiments", "GET"),
    ("/api/v1/experiments", "POST"),
    ("/api/v1/experiments/plan", "POST"),
    ("/api/v1/experiments/{exp_id}", "GET"),
    ("/api/v1/experiments/{exp_id}/pause", "POST"),
    ("/api/v1/experiments/{exp_id}/resume", "POST"),
    ("/api/v1/experiments/{exp_id}/stop", "POST"),
    ("/api/v1/experiments/{exp_id}/trials/{number:int}/stop", "POST"),
    ("/api/v1/claims/check", "POST"),
    ("/api/v1/findings", "GET"),
    ("/api/v1/findings", "POST"),
    ("/api/v1/findings/{finding_id}", "GET"),
    ("/api/v1/research", "GET"),
    ("/api/v1/research", "POST"),
    ("/api/v1/research/{rid}", "GET"),
    ("/api/v1/research/{rid}/plan", "POST"),
    ("/api/v1/research/{rid}/plans/{plan_hash}", "GET"),
    ("/api/v1/research/{rid}/plans/{plan_hash}/start", "POST"),
    ("/api/v1/research/{rid}/act", "POST"),
    ("/api/v1/research/{rid}/report", "POST"),
    ("/api/v1/research/{rid}/close", "POST"),
]


def test_the_route_table_is_every_path_and_method_in_order() -> None:
    app = create_app(cast(Any, None), cast(Any, None), admin_token="t0ken")
    seen = [(r.path, ",".join(sorted(set(getattr(r, "methods", None) or ()) - {"HEAD"}))) for r in app.routes]
    assert seen == ROUTES
