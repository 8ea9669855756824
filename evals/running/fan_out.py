"""An eval run's samples fanned out over a Ray cluster's nodes: each a Ray task, sandboxed on the node that runs it.

On a cluster of more than one node with CPUs, the eval job (its driver, wherever Ray put it) does not run the samples
itself: :func:`run_samples` ships the suite to the cluster once (a ``tar.gz`` in Ray's object store, so no node needs
the control plane's disk), and runs each sample as a Ray task of one CPU (``SPREAD``: the samples go round the nodes,
at most ``in_flight`` at once). A task prepares its node once — under a lock on the node, the suite unpacked into the
node's cache and its venv built there from the suite's wheels (:func:`~labbot.evals.sandbox.venvs.ensure_venv`), so
the first sample on a node builds it and the others wait for it and reuse it — then runs its one sample through the
same inspect task as a one-node run (:func:`~labbot.evals.running.task.suite_task`: the same solver, sandbox and
scorer, all on that node) and hands back its inspect log. The driver merges the samples into one ``.eval`` log in the
suite's order (inspect's own metrics recomputed over them, :func:`inspect_ai.log.recompute_metrics`), from which the
runner writes ``results.json`` as it always did; each sample's ``metadata.ray_node`` says where it ran.

What does not fan out (the runner keeps it on the driver's node and says why): an inspect ``Model`` object (only a
model name travels), a command solver's folder (``/solver``) or its variables (:mod:`~.solver_access`: they are never
shipped through the object store). The seal is measured where the samples ran: the runner's battery on the driver's
node, alongside, and the run's first sample on each node runs the battery (:func:`~labbot.evals.seal.battery.battery`)
there too, after its sample; a probe failed on any node is an open way of the run's (:func:`with_nodes`), named with
the node, and ``results.json``'s ``isolation.nodes`` has each node's verdict. A node lost mid-sample is Ray's to
handle: the task is retried on another node (Ray's default for system failures).

Which nodes: every alive node with a CPU, or only those with the custom resources ``$LABBOT_EVAL_SAMPLE_RESOURCES``
names (a JSON object, ``{"eval_sandbox": 1}``) where only some may start a sandbox. The node's cache:
``$LABBOT_EVAL_NODE_CACHE`` (default: the temp dir's ``labbot-eval-node``), one folder per node id
(several nodes may share a machine, as the tests' local cluster does; each still builds its own). Sandboxes never see
it (they get a fresh ``/tmp`` and only the workspace and the venv).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gzip
import hashlib
import io
import json
import logging
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog, EvalSample, read_eval_log, recompute_metrics, write_eval_log

from labbot.common.errors import BadRequest
from labbot.evals.running.solvers import SolverSpec
from labbot.evals.running.task import suite_task
from labbot.evals.sandbox.bwrap import Limits
from labbot.evals.sandbox.venvs import ensure_venv
from labbot.evals.seal.battery import battery
from labbot.evals.seal.cache import seal_cache
from labbot.evals.seal.report import ALONGSIDE, IsolationReport
from labbot.evals.suite import load, wheels_dir

ENV_NODE_CACHE = "LABBOT_EVAL_NODE_CACHE"
ENV_SAMPLE_RESOURCES = "LABBOT_EVAL_SAMPLE_RESOURCES"  # JSON: the custom resources a sample's node must have
NODE_KEY = "ray_node"  # the sample metadata naming the node that ran it: "NAME (node 1a2b3c4d)"
SUITE_FILE = "suite.json"


@dataclass(frozen=True)
class SampleWork:
    """What every node needs to run a sample of the run (pickled once into each task)."""

    solver: SolverSpec
    model: str
    limits: Limits
    test_timeout_s: float
    time_limit_s: int
    allow_hosts: tuple[str, ...]
    venv: str | None  # a venv path every node has (``--venv``); None: each node builds the suite's own
    run_token: str  # this run's own: a node's first sample of the run is the one that measures the node's seal


@dataclass(frozen=True)
class NodeSample:
    """One sample as its node ran it."""

    task_id: str
    node_id: str
    node: str  # "NAME (node 1a2b3c4d)"
    log: EvalLog  # a one-sample inspect log
    isolation: IsolationReport | None = None  # the node's battery, run by the run's first sample there


@dataclass(frozen=True)
class FanOut:
    """The merged run: where its log is, and where each sample ran."""

    log: Path
    nodes: dict[str, str]  # task id -> "NAME (node 1a2b3c4d)"
    isolation: dict[str, IsolationReport]  # node -> its isolation battery (every node that ran a sample)


def in_a_cluster() -> bool:
    """Whether this process runs where Ray says which cluster (a Ray job's driver: ``RAY_ADDRESS``)."""
    return bool(os.environ.get("RAY_ADDRESS"))


def sample_resources() -> dict[str, float]:
    """``$LABBOT_EVAL_SAMPLE_RESOURCES`` (``{"eval_sandbox": 1}``): what a node must have to run samples, for clusters
    where only some nodes may start a sandbox (bubblewrap needs user namespaces); each sample asks for a thousandth of
    each, so they never limit how many run at once. Empty by default: every node with a CPU."""
    raw = os.environ.get(ENV_SAMPLE_RESOURCES) or "{}"
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not all(
        isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for k, v in doc.items()
    ):
        raise BadRequest(
            f"${ENV_SAMPLE_RESOURCES} must be a JSON object of resource names and positive numbers, like "
            f'{{"eval_sandbox": 1}}, got {raw[:80]!r}'
        )
    return {str(k): float(v) for k, v in doc.items()}


def sample_nodes() -> list[dict[str, Any]]:
    """The alive nodes of the cluster that can run a sample (a CPU, and ``sample_resources()``), from Ray."""
    need = {"CPU": 1.0, **sample_resources()}
    _connect()
    import ray

    return [
        n
        for n in ray.nodes()
        if n.get("Alive") and all(float((n.get("Resources") or {}).get(k, 0)) >= v for k, v in need.items())
    ]


def _connect() -> None:
    import ray

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS") or "auto", log_to_driver=False, logging_level=logging.WARNING)


def suite_archive(suite_dir: Path) -> bytes:
    """The suite folder as a ``tar.gz`` (entries sorted, times and owners zeroed: the same suite, the same bytes)."""

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(suite_dir.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(suite_dir)), recursive=False, filter=clean)
    return gzip.compress(buf.getvalue(), compresslevel=6, mtime=0)  # gzip's header time zeroed too


def node_cache(node_id: str) -> Path:
    root = os.environ.get(ENV_NODE_CACHE) or str(Path(tempfile.gettempdir()) / "labbot-eval-node")
    return Path(root) / node_id[:16]


@contextlib.contextmanager
def _node_lock(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@dataclass(frozen=True)
class PreparedNode:
    suite_dir: Path
    venv: Path
    first_of_run: bool  # this call is the run's first on the node (it measures the node's seal)


def prepare_node(root: Path, archive: bytes, digest: str, venv: str | None, run_token: str) -> PreparedNode:
    """The suite unpacked under ``root`` and its venv, each made once per node (under the node's lock), and whether
    this is the run's first sample on the node."""
    with _node_lock(root):
        marker = root / "runs" / run_token
        first = not marker.exists()
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        suite_dir = root / "suites" / digest
        if not (suite_dir / SUITE_FILE).is_file():
            tmp = Path(tempfile.mkdtemp(prefix=f".unpack-{digest[:12]}-", dir=root))
            try:
                with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
                    tar.extractall(tmp, filter="data")
                suite_dir.parent.mkdir(parents=True, exist_ok=True)
                shutil.rmtree(suite_dir, ignore_errors=True)
                tmp.rename(suite_dir)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        made = Path(venv) if venv is not None else ensure_venv(wheels_dir(suite_dir), root / "venvs")
        return PreparedNode(suite_dir, made, first)


@functools.cache
def _node_name(node_id: str) -> str:
    """This node's name as Ray lists it (its IP, or the pod's name), read once per worker process."""
    import ray

    here = [n for n in ray.nodes() if n.get("NodeID") == node_id]
    return str(here[0].get("NodeName") or here[0].get("NodeManagerAddress")) if here else "?"


def run_one_sample(archive: bytes, digest: str, work: SampleWork, task_id: str) -> NodeSample:
    """A Ray task's body: one sample of the suite on this node (prepared once), its one-sample inspect log."""
    import ray

    ctx = ray.get_runtime_context()
    node_id = ctx.get_node_id()
    where = f"{_node_name(node_id)} (node {node_id[:8]})"
    node = prepare_node(node_cache(node_id), archive, digest, work.venv, work.run_token)
    with tempfile.TemporaryDirectory(prefix="labbot-sample-log-") as logs:
        task = suite_task(
            node.suite_dir,
            work.solver,
            venv=node.venv,
            limits=work.limits,
            test_timeout_s=work.test_timeout_s,
            task_ids=[task_id],
            allow_hosts=work.allow_hosts,
        )
        [done] = inspect_eval(
            task,
            model=work.model,
            log_dir=logs,
            log_format="eval",
            max_samples=1,
            max_sandboxes=1,
            time_limit=work.time_limit_s,
            fail_on_error=False,
            score_on_error=True,
            display="none",
            log_samples=True,
        )
        log = read_eval_log(done.location)
    for sample in log.samples or []:
        sample.metadata = {**(sample.metadata or {}), NODE_KEY: where}
    isolation = None
    if node.first_of_run:  # the run's first sample here measures this node's sandbox, as the driver does its own
        first_task = load(node.suite_dir).tasks[0]
        isolation = battery(node.suite_dir, first_task, node.venv, allow_hosts=work.allow_hosts, cache=seal_cache())
    return NodeSample(task_id, node_id, where, log, isolation)


def run_samples(
    suite_dir: Path,
    task_ids: Sequence[str],
    work: SampleWork,
    out_dir: Path,
    *,
    in_flight: int,
    on_done: Callable[[str, EvalSample], None] | None = None,
) -> FanOut:
    """Every task of ``task_ids`` as a Ray task across the cluster (see the module docstring), at most ``in_flight``
    at once; ``on_done(task, sample)`` as each comes back. The merged ``.eval`` log is written in ``out_dir``."""
    if not task_ids:
        raise BadRequest("no tasks to run")
    _connect()
    import ray

    archive = suite_archive(suite_dir)
    digest = hashlib.sha256(archive).hexdigest()
    ref = ray.put(archive)
    custom = {name: 0.001 for name in sample_resources()}
    remote = ray.remote(num_cpus=1, resources=custom, scheduling_strategy="SPREAD")(run_one_sample)
    waiting = list(task_ids)
    pending: dict[Any, str] = {}
    got: dict[str, NodeSample] = {}
    while waiting or pending:
        while waiting and len(pending) < max(1, in_flight):
            task_id = waiting.pop(0)
            pending[remote.remote(ref, digest, work, task_id)] = task_id
        [ready], _ = ray.wait(list(pending), num_returns=1)
        task_id = pending.pop(ready)
        result: NodeSample = ray.get(ready)
        got[task_id] = result
        if on_done is not None:
            for sample in result.log.samples or []:
                on_done(task_id, sample)
    ordered = [got[t] for t in task_ids]
    merged = merge_logs([r.log for r in ordered])
    location = out_dir / Path(ordered[0].log.location).name
    merged.location = str(location)
    write_eval_log(merged, str(location))
    seals = {r.node: r.isolation for r in ordered if r.isolation is not None}
    return FanOut(location, {r.task_id: r.node for r in ordered}, seals)


def with_nodes(isolation: IsolationReport, nodes: dict[str, IsolationReport]) -> IsolationReport:
    """The run's seal with the nodes' batteries: a probe failed on any node that ran samples is an open way of the
    run's (named with the node: ``"git log --all on 10.0.0.7 (node 1a2b3c4d)"``), so the run is untrusted; the
    passing ones are the driver's already."""
    failed = [
        replace(p, name=f"{p.name} on {node}", ran=ALONGSIDE)
        for node, report in sorted(nodes.items())
        for p in report.failed()
    ]
    return IsolationReport([*isolation.probes, *failed])


def merge_logs(logs: Sequence[EvalLog]) -> EvalLog:
    """One-sample logs of the same task as one log, samples in the order given: the first log's header, every
    sample, the dataset's count and ids, the span of their times, the error status if any failed, and inspect's
    metrics recomputed over all the samples."""
    if not logs:
        raise ValueError("nothing to merge")
    merged = logs[0].model_copy(deep=True)
    samples = [s for log in logs for s in (log.samples or [])]
    merged.samples = samples
    merged.eval.dataset.samples = len(samples)
    merged.eval.dataset.sample_ids = [s.id for s in samples]
    starts = [log.stats.started_at for log in logs if log.stats.started_at]
    ends = [log.stats.completed_at for log in logs if log.stats.completed_at]
    if starts:
        merged.stats.started_at = min(starts)
    if ends:
        merged.stats.completed_at = max(ends)
    usage = dict(merged.stats.model_usage)
    for log in logs[1:]:
        for model, used in log.stats.model_usage.items():
            usage[model] = usage[model] + used if model in usage else used
    merged.stats.model_usage = usage
    failed = next((log for log in logs if log.status != "success"), None)
    if failed is not None:
        merged.status, merged.error = failed.status, failed.error
    if merged.results is not None:
        merged.results.total_samples = len(samples)
        recompute_metrics(merged)
    return merged


def fan_out_refusal(model: object, solver_dir: Path | None, solver_env: object) -> str | None:
    """Why this run's samples stay on the driver's node, or None when they can fan out."""
    if model is not None and not isinstance(model, str):
        return "the model is an inspect Model object (only a model's name travels to other nodes)"
    if solver_dir is not None:
        return "a command solver's folder (/solver) is not shipped to other nodes"
    if solver_env:
        return "a command solver's variables are never shipped through Ray's object store"
    return None
