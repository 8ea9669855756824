"""User stories on a real multi-node Ray cluster: a head (no CPU) and two worker nodes (1 CPU and ``accelerator=1``
each) on this machine (``labbot.training.local_cluster``, Ray's own ``cluster_utils``), labbot connected to it as to
any external cluster (``RAY_ADDRESS``, token auth), checkpoints in S3 (moto's server), Slack's fake.

- tiny-lm on a worker, the node killed (``kill -9`` of its raylet and its processes): the run restarts from its
  checkpoint on the other worker and finishes; the thread names the lost node; the job's own restarts are untouched
  (``--max-restarts 0``).
- Both workers lost: the run waits in the queue, the reason said, and starts when a node joins.
- A checkpointing job on this cluster with only a local checkpoint folder: refused, saying what to set.
- tiny-lm through Ray Train, ``num_workers=2`` spread over the two workers (1 CPU each, the driver on the head), one
  worker's node killed mid-run and a node joining (as KubeRay replaces a pod): Ray Train's own failure handling
  restarts its workers from the checkpoint inside the attempt, the run finishes as attempt 1, the thread names the
  lost node, the run counts it (``node_losses``), every rank of the run carries its run id.
- An eval of 12 tasks on three worker nodes, the eval job submitted as labbot submits it (the driver on the head):
  the samples run on more than one node, each node builds the suite's venv once and measures its own sandbox (the
  isolation battery), and ``results.json`` says what a one-node run of the same suite says (``--fan-out off``), with
  one ``.eval`` log of the 12 in the suite's order.

The cluster declares a node dead after 3 missed health checks 1 s apart (``NODE_DEATH_ENV``), so each loss is seen
within seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.slack import SlackFake
from inspect_ai.log import read_eval_log
from run_fixtures import make_suite
from s3_server import MotoS3
from slack_driver import OWNER, SlackSide, slack_env
from support import SMALL, Serve, make_service, wait_for

from labbot.common.errors import BadRequest
from labbot.evals.running import fan_out
from labbot.evals.running.runner import RESULTS_FILE
from labbot.evals.sandbox.venvs import collect_wheels, with_tools
from labbot.training.launcher import RayLauncher, Submission
from labbot.training.local_cluster import ClusterProcess
from labbot.training.specs import LaunchRequest

pytestmark = pytest.mark.subprocess

TOML = """
[slack]
card_every = "1s"
progress_every = "1h"

[watchdog]
tick = "1s"
restart_backoff = "1s"
"""
# slow enough to be killed mid-run, short enough to finish: ~0.25 s a step, a checkpoint every 4 steps
RUN = f"launch tiny-lm steps=40 checkpoint_every=4 log_every=1 num_threads=1 min_step_s=0.25 {SMALL}"


class Cluster(SlackSide):
    def __init__(self, fake: SlackFake, serve: Serve, cluster: ClusterProcess) -> None:
        super().__init__(fake, serve)
        self.cluster = cluster

    def capacity(self) -> dict[str, Any]:
        with self.serve.client() as api:
            return dict(api.get("/capacity").json())

    def thread_texts(self, run_id: str) -> list[str]:
        return [m.text for m in self.thread(run_id)]

    def on_a_worker(self, run_id: str) -> dict[str, object]:
        """The run once it runs on a worker node, with a checkpoint written."""
        workers = {w["node_id"] for w in self.cluster.workers}
        return wait_for(
            lambda: (
                (r := self.run(run_id))["status"] == "running"
                and (r.get("node") or {}).get("id") in workers
                and (r.get("checkpoint_step") or 0) >= 4
                and r
            ),
            timeout=90,
            what=f"run {run_id} running on a worker with a checkpoint",
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    c = ClusterProcess(tmp_path_factory.mktemp("cluster"), workers=2)
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, cluster: ClusterProcess, s3_server: MotoS3) -> Iterator[Cluster]:
    home = tmp_path_factory.mktemp("multinode")
    (home / "labbot.toml").write_text(TOML)
    fake = SlackFake(channels={"C0LAB00001": "lab"}, users={OWNER: "alice"})
    fake.start()
    conn = cluster.connection
    env = {
        **slack_env(fake, home / "labbot.toml"),
        **s3_server.env,
        "LABBOT_ARTIFACTS_URL": f"s3://{s3_server.bucket()}/labbot",
    }
    serve = Serve(home / "state", ray_address=conn.address, ray_token=conn.token, extra_env=env).start()
    try:
        yield Cluster(fake, serve, cluster)
    finally:
        serve.stop()
        fake.stop()


def test_a_lost_worker_node_restarts_the_run_on_the_other_from_its_checkpoint(lab: Cluster) -> None:
    run_id = lab.launched(f"{RUN} --resources accelerator=1 --max-restarts 0")
    first = lab.on_a_worker(run_id)
    node = first["node"]
    assert isinstance(node, dict)
    card = json.dumps(lab.card(run_id).blocks)
    wait_for(lambda: node["id"][:8] in json.dumps(lab.card(run_id).blocks), timeout=15, what="the node on the card")

    lab.cluster.kill_node(str(node["id"]))
    moved = wait_for(
        lambda: (
            (r := lab.run(run_id))["attempt"] == 2
            and r["status"] == "running"
            and (r.get("node") or {}).get("id") not in (None, node["id"])
            and r
        ),
        timeout=60,
        what="attempt 2 running on the other worker",
    )
    assert moved["node_losses"] == 1
    said = wait_for(
        lambda: next((t for t in lab.thread_texts(run_id) if "lost its node" in t), None),
        timeout=15,
        what="the lost node in the thread",
    )
    assert node["id"][:8] in said and "does not count against the job's automatic restarts (0 of 0 used)" in said
    done = wait_for(lambda: (r := lab.run(run_id))["status"] == "succeeded" and r, timeout=120, what="the run's end")
    assert done["attempt"] == 2 and done["step"] == 40
    logs = lab.serve.cli("logs", run_id, "--tail", "200").stdout
    assert "resumed from checkpoint step" in logs, logs[-2000:]
    assert card  # the card was drawn before the loss
    lab.cluster.add_worker()  # back to two workers for the next story


def test_with_every_worker_lost_the_run_waits_in_the_queue_until_a_node_joins(lab: Cluster) -> None:
    run_id = lab.launched(f"{RUN} --resources accelerator=1")
    first = lab.on_a_worker(run_id)
    node = first["node"]
    assert isinstance(node, dict)
    others = [w["node_id"] for w in lab.cluster.workers if w["node_id"] != node["id"]]
    for other in others:  # the idle worker first: the run's own node is the last to go
        lab.cluster.kill_node(other)
    lab.cluster.kill_node(str(node["id"]))
    queued = wait_for(
        lambda: (r := lab.run(run_id))["status"] == "queued" and r, timeout=60, what="the run queued for a node"
    )
    assert queued["waiting_for"] == "a node with accelerator=1"
    wait_for(
        lambda: any("waits in the queue for a node with accelerator=1" in t for t in lab.thread_texts(run_id)),
        timeout=15,
        what="the wait said in the thread",
    )
    # capacity shrinks with the lost nodes (Ray's alive nodes, read at most every 10 s) and grows back below
    wait_for(lambda: lab.capacity()["cluster"]["cpus"] == 0, timeout=30, what="capacity without the workers")

    joined = lab.cluster.add_worker()
    back = wait_for(
        lambda: (r := lab.run(run_id))["status"] == "running" and (r.get("node") or {}).get("id") == joined and r,
        timeout=60,
        what="the run started on the node that joined",
    )
    assert back["attempt"] == 2 and back["waiting_for"] is None
    wait_for(lambda: lab.capacity()["cluster"]["cpus"] == 1, timeout=30, what="capacity with the node that joined")
    shown = lab.serve.cli("capacity").stdout
    assert f"({joined[:8]}): CPU=1, accelerator=1" in shown and "head): nothing" in shown, shown
    done = wait_for(lambda: (r := lab.run(run_id))["status"] == "succeeded" and r, timeout=120, what="the run's end")
    assert done["step"] == 40
    lab.cluster.add_worker()


def test_a_checkpointing_job_is_refused_on_a_multinode_cluster_without_shared_checkpoints(
    tmp_path: Path, cluster: ClusterProcess
) -> None:
    service = make_service(tmp_path, cluster.connection)  # checkpoints in a local folder nobody declared shared
    try:
        with pytest.raises(BadRequest) as refused:
            service.launch(LaunchRequest(job="tiny-lm", owner="alice"))
        assert "this Ray cluster has 3 nodes" in refused.value.message
        assert "LABBOT_ARTIFACTS_URL=s3://" in refused.value.message
        assert "[training] checkpoint_root" in refused.value.message
        assert service.runs() == []  # nothing written
        service.checkpoints_shared = True  # [training] checkpoint_root declares a folder every node mounts
        assert service.cluster_totals().cpus == len(cluster.workers)
        # the address a job's driver is given (Ray's supervisor reads it in the node's temp dir; without it, it took
        # any GCS on this machine, another cluster's on a busy one)
        st = cluster.state()
        assert Path(st["temp_dir"], "ray_current_cluster").read_text().strip() == st["gcs_address"]
    finally:
        service.launcher.close()


def test_ray_train_on_two_nodes_loses_one_resumes_from_its_checkpoint_and_finishes(lab: Cluster) -> None:
    workers = [w["node_id"] for w in lab.cluster.workers]
    assert len(workers) == 2, workers  # each 1 CPU: Ray Train's two workers (1 CPU each) land one on each
    run_id = lab.launched(f"{RUN} num_workers=2 --max-restarts 0")
    wait_for(
        lambda: (r := lab.run(run_id))["status"] == "running" and (r.get("checkpoint_step") or 0) >= 4 and r,
        timeout=120,
        what="Ray Train running with a checkpoint",
    )
    lost = workers[0]
    lab.cluster.kill_node(lost)
    lab.cluster.add_worker()  # the pod replaced: Ray Train's restart needs two 1-CPU nodes again
    said = wait_for(
        lambda: next((t for t in lab.thread_texts(run_id) if "was lost under attempt 1" in t), None),
        timeout=60,
        what="the lost node in the thread",
    )
    assert f"(node {lost[:8]})" in said and "RayTrainWorker" in said and "Ray Train's own failure handling" in said
    done = wait_for(
        lambda: (r := lab.run(run_id))["status"] in ("succeeded", "failed") and r, timeout=180, what="the run's end"
    )
    logs = lab.serve.cli("logs", run_id, "--tail", "400").stdout
    assert done["status"] == "succeeded", logs[-3000:]
    assert (done["attempt"], done["node_losses"]) == (1, 1)  # Ray Train's restart, not labbot's
    assert done["step"] == 40 and done["checkpoint_step"] == 40
    assert "Ray Train with 2 workers" in logs and "resumed from checkpoint step" in logs, logs[-3000:]
    for rank in (0, 1):
        assert f"rank {rank}/2: LABBOT_RUN_ID={run_id}" in logs, logs[-3000:]


VERDICT = ("task", "passed", "verdict", "tampered", "suspect")


def _eval_job(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labbot.evals.running.job", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )


def test_an_eval_of_12_tasks_fans_out_over_three_nodes_with_the_results_of_one(
    cluster: ClusterProcess, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    make_suite(suite, tasks=12)
    cache = request.config.cache  # pytest's cache folder keeps pytest's and coverage's wheels between sessions
    collect_wheels(with_tools([]), suite / "wheels", cache=Path(cache.mkdir("labbot-evals-generate")) / "wheels")
    while len(cluster.workers) < 3:
        cluster.add_worker()
    env = {"LABBOT_EVAL_VENV_CACHE": str(tmp_path / "venvs"), "LABBOT_EVAL_NODE_CACHE": str(tmp_path / "nodes")}
    run = ["--suite", str(suite), "--solver", "gold", "--tamper", "false"]  # the tampering probes: not this story's
    launcher = RayLauncher(cluster.connection)
    try:
        sid = launcher.submit(
            Submission(
                submission_id="labbot-fan-out-1",
                entrypoint=" ".join(["python -m labbot.evals.running.job", *run, "--out", str(tmp_path / "three")]),
                runtime_env={"env_vars": env},
                metadata={},
            )
        )
        # meanwhile, the same suite on one node (this machine, outside the cluster): the baseline
        one = _eval_job(*run, "--out", str(tmp_path / "one"), "--fan-out", "off", env={**env, "RAY_ADDRESS": ""})
        assert one.returncode == 0, one.stderr[-3000:]
        job = wait_for(
            lambda: (j := launcher.job(sid)) is not None and j.status in ("SUCCEEDED", "FAILED", "STOPPED") and j,
            timeout=400,
            interval=1.0,
            what="the fanned-out eval job's end",
        )
        logs = launcher.logs(sid)
        assert job.status == "SUCCEEDED", logs[-4000:]
    finally:
        launcher.close()
    assert "samples fan out as Ray tasks over 3 nodes" in logs and "samples by node: " in logs, logs[-3000:]

    three = json.loads((tmp_path / "three" / RESULTS_FILE).read_text())
    baseline = json.loads((tmp_path / "one" / RESULTS_FILE).read_text())
    for key in ("suite", "solver", "status", "pass_rate", "tampered", "suspect", "untrusted"):
        assert three[key] == baseline[key], key
    assert three["pass_rate"] == 1.0 and not three["untrusted"]
    seals = three["isolation"]["nodes"]  # each node that ran samples measured its own sandbox
    assert set(seals) == {s["node"] for s in three["samples"]} and all(v["sealed"] for v in seals.values()), seals
    assert [{k: s[k] for k in VERDICT} for s in three["samples"]] == [
        {k: s[k] for k in VERDICT} for s in baseline["samples"]
    ]
    nodes = {s["node"] for s in three["samples"]}
    assert len(nodes) > 1, nodes  # samples on more than one node
    assert all("node" not in s for s in baseline["samples"])

    log = read_eval_log(str(tmp_path / "three" / three["log"]))  # one log, every sample, in the suite's order
    assert log.status == "success" and [s.id for s in log.samples or []] == [s["task"] for s in baseline["samples"]]
    assert log.eval.dataset.samples == 12 and log.results is not None and log.results.total_samples == 12
    assert log.results.scores[0].metrics["accuracy"].value == 1.0
    assert {(s.metadata or {})[fan_out.NODE_KEY] for s in log.samples or []} == nodes

    # each node that ran samples built the suite's venv once, in its own cache
    built = sorted(p.parent.parent.name for p in (tmp_path / "nodes").glob("*/venvs/venv-*"))
    assert len(built) == len(set(built)) == len(nodes), built
