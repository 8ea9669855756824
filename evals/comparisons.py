"""``compare A B``, every front door's (``/lab compare``, ``labbot compare``, ``GET /api/v1/compare``): two runs
told apart only when the data can.

Two eval runs (jobs ``eval``/``eval-incidents``) go to ``EvalService.compare`` unchanged: paired by task, Newcombe's
interval, and only for a viewer who may see both (whoever may run their suite; another's is refused like an unknown
eval run). Two training runs are compared on one metric — by default their shared ``headline`` — over their final
windows, with a block-bootstrap interval on the difference of the window means (``labbot.training.compare``).
Anything that cannot be compared is a ``BadRequest`` that names what differs, before any statistics: one eval run and
one training run, a metric one of them does not report, two headlines that differ, a run with no points yet.

This sits in ``evals``, where both its inputs are: the layer that holds ``EvalService`` and may import ``training``
(``RunService``, the telemetry store). It must work when evals are switched off (:class:`EvalsNotRunning`).
"""

from __future__ import annotations

import math
from typing import Any

from labbot.common.errors import BadRequest, LabbotError
from labbot.evals.service import EVAL_JOBS, EvalService
from labbot.storage.floats import encode_float
from labbot.training.compare import compare_runs
from labbot.training.remedies import lineage_text
from labbot.training.service import RunService
from labbot.training.telemetry_store import TelemetryStore

MAX_POINTS = 1_000_000  # a run's points of one metric read for a comparison (the window is the last 10 % of them)
PLOT_POINTS = 2000  # each curve of the overlay plot is thinned to about this many points (its window kept whole)


class EvalsNotRunning(LabbotError):
    status = 503
    code = "not_running"


Points = list[tuple[int, float]]


class RunComparer:
    def __init__(self, runs: RunService, telemetry: TelemetryStore, evals: EvalService | None = None) -> None:
        self.runs = runs
        self.telemetry = telemetry
        self.evals = evals

    def compare(
        self,
        run_a: str,
        run_b: str,
        *,
        metric: str | None = None,
        better: str | None = None,
        window: int | None = None,
        viewer: str | None = None,
        admin: bool = False,
    ) -> dict[str, Any]:
        """``{"kind": "training"|"eval", ...}``: the comparison as the API returns it."""
        return self.compare_with_points(
            run_a, run_b, metric=metric, better=better, window=window, viewer=viewer, admin=admin
        )[0]

    def compare_with_points(
        self,
        run_a: str,
        run_b: str,
        *,
        metric: str | None = None,
        better: str | None = None,
        window: int | None = None,
        viewer: str | None = None,
        admin: bool = False,
    ) -> tuple[dict[str, Any], tuple[Points, Points] | None]:
        """The comparison, and for training runs each run's points of the metric (for the overlay plot). Eval runs
        are compared only when ``viewer`` may see both (``EvalService.compare``: whoever may run their suite)."""
        if run_a == run_b:
            raise BadRequest(f"both runs are {run_a}: compare two different runs")
        a, b = self.runs.get(run_a), self.runs.get(run_b)  # UnknownRun (404) names the one that is not there
        a_eval, b_eval = a["job"] in EVAL_JOBS, b["job"] in EVAL_JOBS
        if a_eval != b_eval:
            ev, tr = (a, b) if a_eval else (b, a)
            raise BadRequest(
                f"run {ev['id']} is an eval run (job {ev['job']}) and run {tr['id']} a training run (job {tr['job']}): "
                "compare two training runs, or two eval runs of one suite"
            )
        if a_eval:
            given = [f for f, v in (("--metric", metric), ("--better", better), ("--window", window)) if v is not None]
            if given:
                raise BadRequest(
                    f"{', '.join(given)} applies to training runs; eval runs are compared task by task on whether "
                    "each passed"
                )
            if self.evals is None:
                raise EvalsNotRunning("evals are not enabled in this labbot: eval runs cannot be compared here")
            return {"kind": "eval", **self.evals.compare(run_a, run_b, viewer=viewer, admin=admin)}, None
        return self._training(a, b, metric, better, window)

    def _training(
        self, a: dict[str, Any], b: dict[str, Any], metric: str | None, better: str | None, window: int | None
    ) -> tuple[dict[str, Any], tuple[Points, Points]]:
        reported_a, reported_b = set(a.get("metrics") or {}), set(b.get("metrics") or {})
        for run, reported in ((a, reported_a), (b, reported_b)):
            if not reported:
                raise BadRequest(
                    f"run {run['id']} has no points yet ({run['status']}): compare it once it has reported some steps"
                )
        both = ", ".join(sorted(reported_a & reported_b)) or "nothing in common"
        if metric is None:
            if a["headline"] != b["headline"]:
                raise BadRequest(
                    f"run {a['id']}'s headline metric is {a['headline']} and run {b['id']}'s is {b['headline']}: "
                    f"say which to compare with --metric (both report: {both})"
                )
            metric = str(a["headline"])
        missing = [run for run, reported in ((a, reported_a), (b, reported_b)) if metric not in reported]
        if len(missing) == 2:
            raise BadRequest(f"neither run reports {metric}; both report: {both}")
        if missing:
            raise BadRequest(f"run {missing[0]['id']} reports no {metric}; both report: {both}")
        pa, pb = (self._points(run["id"], metric) for run in (a, b))
        result = compare_runs(pa, pb, metric, better=better, window=window, names=(a["id"], b["id"]))
        doc = result.to_json()
        windows = doc.pop("window")
        doc = {
            "kind": "training",
            "a": _side(a, windows["a"]),
            "b": _side(b, windows["b"]),
            **doc,
        }
        for run in (a, b):  # a remedied run's later steps are its remedial attempt's: the lineage says so
            for entry in run.get("lineage") or []:
                doc["notes"] = [*doc.get("notes", []), f"run {run['id']} was remedied: {lineage_text(entry)}"]
        differs = param_differences(a, b)
        doc["params_differ"] = {k: [va, vb] for k, (va, vb) in differs.items()}
        note = differs_note(a, b, differs, metric)
        if note:
            doc["notes"] = [*doc.get("notes", []), note]
        return _json_safe(doc), (pa, pb)

    def _points(self, run_id: str, metric: str) -> Points:
        """One point per step, in step order (a restarted attempt's value wins where it re-ran a step)."""
        latest: dict[int, float] = {}
        for step, value in self.telemetry.metrics(run_id, metric, limit=MAX_POINTS):
            latest[step] = value
        return sorted(latest.items())


# parameters that change what a metric means: a loss under another objective, another task, another job is another
# number, so "A is better" on it says nothing of which run learned more
OBJECTIVE_PARAMS = ("algo", "objective", "teacher", "n_digits")
MAX_SHOWN = 6


def param_differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The launch parameters whose values differ between the two runs (one missing in a run counts as differing)."""
    pa, pb = a.get("params") or {}, b.get("params") or {}
    return {k: (pa.get(k), pb.get(k)) for k in sorted(set(pa) | set(pb)) if pa.get(k) != pb.get(k)}


def differs_note(a: dict[str, Any], b: dict[str, Any], differs: dict[str, tuple[Any, Any]], metric: str) -> str | None:
    """What the verdict cannot say: the runs differ in more than one thing, or in what ``metric`` means."""
    if a.get("job") != b.get("job"):
        jobs = f"run {a['id']} is {a.get('job')} and run {b['id']} is {b.get('job')}"
        return f"{jobs}: their {metric} need not mean one thing"
    if not differs:
        return None
    shown = ", ".join(f"{k} {va} vs {vb}" for k, (va, vb) in list(differs.items())[:MAX_SHOWN])
    more = f" and {len(differs) - MAX_SHOWN} more" if len(differs) > MAX_SHOWN else ""
    meaning = [k for k in differs if k in OBJECTIVE_PARAMS]
    if meaning:
        return (
            f"the runs differ in {', '.join(meaning)}, which changes what {metric} measures ({shown}{more}): compare "
            "them on a metric both mean alike (reward, pass_rate), not on this one"
        )
    if len(differs) > 1:
        return f"the runs differ in {len(differs)} parameters ({shown}{more}): a difference is theirs together"
    return f"the runs differ in one parameter: {shown}"


def _side(run: dict[str, Any], window: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "name", "job", "status", "step", "lineage")
    return {**{k: run.get(k) for k in keys}, **window}


def _json_safe(doc: Any) -> Any:
    if isinstance(doc, float):
        return encode_float(doc) if not math.isfinite(doc) else doc
    if isinstance(doc, dict):
        return {k: _json_safe(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [_json_safe(v) for v in doc]
    return doc


def thinned(points: Points, keep_from: int, limit: int = PLOT_POINTS) -> Points:
    """``points`` with those before step ``keep_from`` thinned evenly so that about ``limit`` remain in all."""
    head = [p for p in points if p[0] < keep_from]
    tail = [p for p in points if p[0] >= keep_from]
    room = max(limit - len(tail), 2)
    if len(head) <= room:
        return points
    stride = math.ceil(len(head) / room)
    return head[::stride] + tail
