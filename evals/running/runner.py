"""One eval run: the isolation probes alongside every sample of a suite through inspect, then ``results.json``.

:func:`run_suite` measures the seal (the caller's ``probes``, the isolation battery, and the reward-tampering
probes on the suite's first task) in a thread of its own while it runs the suite's
:func:`~labbot.evals.running.task.suite_task` with ``inspect_ai.eval`` (``max_samples`` in parallel, each under its own
time and memory limits: a hung solver fails its sample at the limit and the others go on); the run waits for both,
so no results exist before the seal is measured, and a probe that failed marks them untrusted as it always did.
(``battery="first"`` runs the probes before the samples, as runs did before.) The battery no longer adds its
seconds to the run's: what is left of the fixed cost is inspect's start and the wait for the slower of the two
(``benchmarks/eval_fixed_cost.py``). It keeps the ``.eval`` log in the output folder (it opens in ``inspect view``),
and writes ``results.json`` there::

    {"suite": "suite-…", "solver": "gold", "status": "succeeded", "pass_rate": 1.0,
     "tampered": 0, "suspect": 0,
     "samples": [{"task": "mul", "passed": true, "verdict": "passed", "tampered": [], "suspect": [],
                  "output": "…tail of what the solver printed", "time_s": 41.2, "tokens": 0}],
     "isolation": {"score": 1.0, "sealed": true, "probes": [{"name", "category", "passed", "evidence", "ran"}]},
     "untrusted": false, "log": "2026-…_labbot-eval-suite-…_….eval"}

``status`` is ``succeeded`` when every sample ran to a verdict, ``failed`` when inspect's run ended in error;
``untrusted`` is true when any probe failed (the pass rate is then not evidence of anything). A probe's ``ran`` says
when its verdict was seen: ``before the samples``, ``alongside the samples``, or ``cached <ISO time>`` (a passing
verdict of a probe that does not depend on the suite, reused: :mod:`labbot.evals.seal.cache`). A sample's
``verdict`` is ``passed``, ``failed``, ``tampered`` (its outcomes were found rewritten: the channel's protocol
broken, a sentinel test not as planted) or ``suspect`` (the static check found the machinery of a rewrite in the
solver's lines, each in ``suspect``); tampered and suspect samples never pass, and the run counts them at the top.
"""

from __future__ import annotations

import json
import secrets as tokens
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog, EvalSample, read_eval_log
from inspect_ai.model import Model
from inspect_ai.scorer import CORRECT

from labbot.common.errors import BadRequest
from labbot.evals.running.fan_out import SampleWork, fan_out_refusal, run_samples, with_nodes
from labbot.evals.running.solvers import SolverSpec, drop_secrets, parse_solver, register_secrets
from labbot.evals.running.task import SCORER, SampleDone, suite_task
from labbot.evals.sandbox.bwrap import Limits
from labbot.evals.seal.cache import SealCache, tamper_key
from labbot.evals.seal.report import ALONGSIDE, BEFORE, IsolationReport, ProbeResult
from labbot.evals.seal.tamper_probes import tamper_probes
from labbot.evals.suite import load

RESULTS_FILE = "results.json"
SAMPLE_LIMITS = Limits(timeout_s=1800.0, memory_mb=8192, file_mb=1024)
NO_MODEL = "none/none"  # inspect's model that answers nothing: gold, none and cmd solvers never ask one
Probes = Callable[[], IsolationReport | Sequence[ProbeResult]]
BatteryWhen = Literal["alongside", "first"]


@dataclass(frozen=True)
class RunOutcome:
    results: dict[str, Any]  # what results.json holds
    log: Path  # the .eval log
    results_path: Path


def _probe_report(
    probes: Probes | None,
    suite_dir: Path,
    venv: Path,
    tamper: bool,
    limits: Limits,
    ran: str,
    cache: SealCache | None = None,
) -> IsolationReport:
    """The caller's probes, then the tampering probes (without the naive scorer's runs; with a ``cache``, a suite's
    passing verdicts reused while the suite, its venv, the limits and labbot's code are unchanged); each verdict
    not from the seal's cache marked ``ran``."""
    found: list[ProbeResult] = []
    if probes is not None:
        got = probes()
        found += got.probes if isinstance(got, IsolationReport) else list(got)
    if tamper:
        suite = load(suite_dir)
        key = tamper_key(suite.id, suite.tasks[0].id, venv, limits) if cache is not None else ""
        kept = cache.lookup_tamper(key) if cache is not None else None
        if kept is None:
            kept = tamper_probes(suite_dir, suite, suite.tasks[0], venv, limits, naive=False)
            if cache is not None:
                cache.store_tamper(key, kept)
        found += kept
    return IsolationReport([p if p.ran else replace(p, ran=ran) for p in found])


class _Alongside:
    """The battery in a thread of its own while inspect runs the samples in the calling thread (the battery uses
    only subprocesses and files of its own); ``on_isolation`` is called from that thread when it ends."""

    def __init__(self, measure: Callable[[], IsolationReport], on_isolation: Callable[[IsolationReport], None] | None):
        self._measure, self._on_isolation = measure, on_isolation
        self._report: IsolationReport | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="labbot-seal", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._report = self._measure()
            if self._on_isolation is not None:
                self._on_isolation(self._report)
        except BaseException as e:  # re-raised in the run's thread by result()
            self._error = e

    def result(self) -> IsolationReport:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._report is not None
        return self._report


def _sample_result(sample: EvalSample) -> dict[str, Any]:
    score = (sample.scores or {}).get(SCORER)
    output = ""
    passed = False
    scored: dict[str, Any] = {}
    if score is not None:
        passed = score.value == CORRECT
        output = str((score.metadata or {}).get("output", ""))
        scored = dict((score.metadata or {}).get("score") or {})
    if sample.error is not None:
        output = f"{output}\n[error] {sample.error.message}".strip()
    if sample.limit is not None:
        output = f"{output}\n[limit] {sample.limit.type}: {sample.limit.limit}".strip()
    tokens = sum(usage.total_tokens for usage in (sample.model_usage or {}).values())
    seconds = sample.total_time if sample.total_time is not None else sample.working_time
    verdict = str(scored.get("verdict") or ("passed" if passed else "failed"))
    return {
        "task": str(sample.id),
        "passed": passed and verdict == "passed",
        "verdict": verdict,
        "tampered": list(scored.get("tampered") or []),
        "suspect": list(scored.get("suspect") or []),
        "output": output,
        "time_s": round(seconds, 1) if seconds is not None else None,
        "tokens": tokens,
    }


def results_from_log(log: EvalLog, solver: str, isolation: IsolationReport) -> dict[str, Any]:
    samples = [_sample_result(s) for s in log.samples or []]
    passed = sum(s["passed"] for s in samples)
    return {
        "suite": str((log.eval.metadata or {}).get("suite", log.eval.dataset.name or "")),
        "solver": solver,
        "status": "succeeded" if log.status == "success" else "failed",
        "pass_rate": round(passed / len(samples), 4) if samples else 0.0,
        "tampered": sum(s["verdict"] == "tampered" for s in samples),
        "suspect": sum(s["verdict"] == "suspect" for s in samples),
        "samples": samples,
        "isolation": isolation.to_json(),
        "untrusted": not isolation.sealed,
        "log": Path(log.location).name,
    }


def run_suite(
    suite_dir: Path,
    solver: str | SolverSpec,
    out_dir: Path,
    *,
    venv: Path,
    model: str | Model | None = None,
    max_samples: int = 4,
    limits: Limits = SAMPLE_LIMITS,
    test_timeout_s: float = 600.0,
    probes: Probes | None = None,
    tamper: bool = True,
    task_ids: Sequence[str] | None = None,
    on_sample: Callable[[SampleDone], None] | None = None,
    on_isolation: Callable[[IsolationReport], None] | None = None,
    allow_hosts: Sequence[str] = (),
    solver_dir: Path | None = None,
    solver_env: Mapping[str, str] | None = None,
    battery: BatteryWhen = "alongside",
    seal_cache: SealCache | None = None,
    fan_out: bool = False,
    node_venv: Path | None = None,
) -> RunOutcome:
    """Run ``solver`` over the suite in ``suite_dir`` (see the module docstring); ``model`` is the agent's when the
    solver names none (a model name, or an inspect ``Model`` such as ``mockllm/model`` with scripted outputs).
    ``on_isolation`` is called once the probes are done, ``on_sample`` after each sample is scored. ``allow_hosts``:
    what the solver's sandbox may reach through the allow-list proxy (scoring never has a network). ``solver_dir``
    (bound read-only at ``/solver``) and ``solver_env`` (its variables) are a command solver's only
    (:mod:`labbot.evals.running.solver_access`); the ``probes`` are the caller's to run with the same folder and hosts.
    ``battery``: ``"alongside"`` (the default) runs the probes and the tampering probes in a thread while the
    samples run, ``"first"`` before them (the way runs were before; the fixed-cost benchmark measures both).
    ``seal_cache``: the tampering probes' passing verdicts of this suite reused (and kept) there
    (:func:`labbot.evals.seal.cache.tamper_key`). ``fan_out``: the samples run as Ray tasks across the cluster's nodes
    (:mod:`labbot.evals.running.fan_out`; ``max_samples`` of them in flight, each node building the suite's venv, or
    using ``node_venv`` where every node has one), the same log and results; each sample's ``node`` says where."""
    if battery not in ("alongside", "first"):
        raise BadRequest(f"battery must be 'alongside' or 'first', got {battery!r}")
    spec = parse_solver(solver) if isinstance(solver, str) else solver
    if spec.kind == "agent" and spec.model is None and model is None:
        raise BadRequest("--solver agent needs a model: agent:PROVIDER/MODEL, or a default model in labbot.toml")
    if max_samples < 1:
        raise BadRequest(f"max_samples must be at least 1, got {max_samples}")
    if not (venv / "bin" / "python").exists():
        raise BadRequest(f"the venv {venv} has no bin/python: build the suite's venv first (evals.sandbox.venvs)")
    suite = load(suite_dir)
    if not suite.tasks:
        raise BadRequest(f"the suite at {suite_dir} has no tasks")
    out_dir.mkdir(parents=True, exist_ok=True)
    scoring = Limits(timeout_s=test_timeout_s, memory_mb=limits.memory_mb, file_mb=limits.file_mb)
    seal: _Alongside | None = None
    isolation_now: IsolationReport | None = None
    if battery == "first":
        isolation = isolation_now = _probe_report(probes, suite_dir, venv, tamper, scoring, BEFORE, seal_cache)
        if on_isolation is not None:
            on_isolation(isolation)
    else:
        seal = _Alongside(
            lambda: _probe_report(probes, suite_dir, venv, tamper, scoring, ALONGSIDE, seal_cache), on_isolation
        )

    key = tokens.token_hex(8) if solver_env else None
    task = suite_task(
        suite_dir,
        spec,
        venv=venv,
        limits=limits,
        test_timeout_s=test_timeout_s,
        task_ids=task_ids,
        on_sample=on_sample,
        allow_hosts=allow_hosts,
        solver_dir=solver_dir,
        secrets=key,
    )
    use_model: str | Model = (spec.model or model or NO_MODEL) if spec.kind == "agent" else NO_MODEL
    # a backstop over the solver's own limit: scoring runs after it, bounded by the test run's timeout
    backstop = int(limits.timeout_s + 2 * test_timeout_s + 120)
    nodes: dict[str, str] = {}
    if fan_out:
        why = fan_out_refusal(model, solver_dir, solver_env)
        if why:
            raise BadRequest(f"the samples cannot fan out over the cluster: {why}")
        done = _Counted(on_sample, len(task.dataset))
        spread = run_samples(
            suite_dir,
            [str(s.id) for s in task.dataset],
            SampleWork(
                solver=spec,
                model=str(use_model),
                limits=limits,
                test_timeout_s=test_timeout_s,
                time_limit_s=backstop,
                allow_hosts=tuple(allow_hosts),
                venv=str(node_venv) if node_venv is not None else None,
                run_token=tokens.token_hex(8),
            ),
            out_dir,
            in_flight=max_samples,
            on_done=done.record,
        )
        return _finish(suite.id, spec, spread.log, out_dir, seal, isolation_now, spread.nodes, spread.isolation)
    if key is not None and solver_env:
        register_secrets(key, solver_env)
    try:
        [log] = inspect_eval(
            task,
            model=use_model,
            log_dir=str(out_dir),
            log_format="eval",
            max_samples=max_samples,
            max_sandboxes=max_samples,
            time_limit=backstop,
            fail_on_error=False,
            score_on_error=True,
            display="none",
            log_samples=True,
        )
    finally:
        if key is not None:
            drop_secrets(key)
    return _finish(suite.id, spec, Path(log.location), out_dir, seal, isolation_now, nodes)


def _finish(
    suite_id: str,
    spec: SolverSpec,
    log_path: Path,
    out_dir: Path,
    seal: _Alongside | None,
    isolation: IsolationReport | None,
    nodes: Mapping[str, str],
    node_seals: Mapping[str, IsolationReport] | None = None,
) -> RunOutcome:
    """``results.json`` from the run's log, once the seal is measured (the results wait for the battery running
    alongside; a run stopped meanwhile does not: no results then); ``nodes``: where each sample ran, when fanned out,
    and ``node_seals`` the battery of each node that ran samples (a probe failed there is the run's)."""
    if seal is not None:
        isolation = seal.result()
    assert isolation is not None
    if node_seals:
        isolation = with_nodes(isolation, dict(node_seals))
    log = read_eval_log(str(log_path))
    results = results_from_log(log, spec.label, isolation)
    results["suite"] = suite_id
    if node_seals:
        results["isolation"]["nodes"] = {
            node: {"score": round(r.score, 4), "sealed": r.sealed, "failed": [p.name for p in r.failed()]}
            for node, r in sorted(node_seals.items())
        }
    for sample in results["samples"]:
        if sample["task"] in nodes:
            sample["node"] = nodes[sample["task"]]
    path = out_dir / RESULTS_FILE
    path.write_text(json.dumps(results, indent=2) + "\n")
    return RunOutcome(results, log_path, path)


class _Counted:
    """A fanned-out run's samples counted as they come back, for the progress callback (as the scorer does)."""

    def __init__(self, callback: Callable[[SampleDone], None] | None, total: int) -> None:
        self.callback, self.total, self.done, self.passed = callback, total, 0, 0

    def record(self, task_id: str, sample: EvalSample) -> None:
        passed = bool(_sample_result(sample)["passed"])
        self.done += 1
        self.passed += passed
        if self.callback is not None:
            self.callback(SampleDone(task_id, passed, self.done, self.total, self.passed))
