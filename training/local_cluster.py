"""A multi-node Ray cluster on one machine: a head and worker nodes, each with its own resources, on Ray's own test
cluster (``ray.cluster_utils.Cluster``), for trying labbot's "your cluster" path and for the tests of node loss.

``make cluster`` (``python -m labbot.training.local_cluster``) starts one and prints what labbot needs to connect to
it as to any external cluster — ``RAY_ADDRESS`` (the dashboard's Jobs API) and ``RAY_AUTH_TOKEN`` (token auth is on)
— then blocks until Ctrl-C, which stops the jobs still running and every node. By default the head has no CPU (as
KubeRay's head in ``deploy/raycluster.yaml`` takes no work), and each of two workers has one CPU and one
``accelerator``, a custom resource standing in for a GPU type: a job that asks ``--cpus 1`` or
``--resources accelerator=1`` runs on a worker.

Every node's processes get the allow-listed environment a job may inherit (``ray_cluster.head_environment``: no
secret of the shell that started it), the token as a file's path, and a node-death timeout shorter than Ray's
default (``NODE_DEATH_ENV``: a node whose raylet misses ``3`` health checks ``1 s`` apart is dead, so about 3-4 s
after a raylet dies its jobs fail as lost, where Ray's defaults take 15-30 s). :meth:`LocalCluster.kill_node` does
what a lost machine does: ``kill -9`` of the node's raylet, then of every process it started (the jobs' drivers and
Ray workers there — on KubeRay a raylet's death ends its pod, and with it those processes).

The cluster lives in a process of its own: Ray reads its token settings once, when it is imported, so the process
that starts the nodes (and holds Ray's client of them) is started with the nodes' environment. ``ClusterProcess``
starts that process and drives it from outside (the tests' fixture): its state file says where the dashboard is and
which workers run (node id, raylet pid); ``SIGUSR1`` makes it add a worker; ``kill_node`` needs no help from it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from labbot.training.ray_cluster import LOG_MONITOR_ENV, RayConnection, _stop_jobs, head_environment

#: Ray's GCS declares a node dead after this many missed health checks this far apart (its defaults: 5 × 3 s, with a
#: 10 s timeout each): "Ray's node-death timeout" for the local cluster is their product, ``NODE_DEATH_TIMEOUT_S``
NODE_DEATH_ENV = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_initial_delay_ms": "1000",
}
NODE_DEATH_TIMEOUT_S = 3.0
WORKER_RESOURCES = {"accelerator": 1.0}
STATE_FILE = "cluster.json"


@dataclass(frozen=True)
class WorkerNode:
    """One worker node: Ray's node id, its raylet's pid, and the Ray ``Node`` that started it."""

    node_id: str
    raylet_pid: int
    node: Any


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalCluster:
    """A head and ``workers`` worker nodes on this machine, token-authenticated, owned by this process."""

    def __init__(
        self,
        home: Path,
        *,
        workers: int = 2,
        head_cpus: float = 0,
        worker_cpus: float = 1,
        worker_resources: Mapping[str, float] | None = None,
    ) -> None:
        self.home = home
        self.worker_cpus = worker_cpus
        self.worker_resources = dict(WORKER_RESOURCES if worker_resources is None else worker_resources)
        self.head_cpus = head_cpus
        self.workers_at_start = workers
        self.token_file = home / "auth_token"
        # Ray's socket paths must stay under 107 bytes, and Ray makes its temp dir world-writable: a short folder in
        # /tmp, inside a 0700 one of ours (as the embedded head's)
        digest = hashlib.sha1(str(home.resolve()).encode()).hexdigest()[:10]
        self.private_dir = Path("/tmp") / f"lbc-{digest}"
        self.temp_dir = self.private_dir / "r"
        self._cluster: Any = None
        self.workers: list[WorkerNode] = []
        self.dashboard_port = 0

    # -- life ------------------------------------------------------------------------------------------------

    def start(self) -> RayConnection:
        """Start the head and the workers; returns how labbot reaches the cluster (the Jobs API and the token).
        This process's environment becomes the nodes' one before Ray is imported (Ray reads its token settings
        then): call it in a process of its own (``main``), before anything imported Ray."""
        if "ray" in sys.modules:
            raise RuntimeError("LocalCluster.start must run in a process that has not imported Ray (see main)")
        self.home.mkdir(parents=True, exist_ok=True)
        if not self.token_file.exists():
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
        self.private_dir.mkdir(mode=0o700, exist_ok=True)
        self.private_dir.chmod(0o700)
        (self.temp_dir / "ray").mkdir(parents=True, exist_ok=True)  # Ray writes the cluster's address there
        self.dashboard_port = _free_port()
        env = self.node_environment()
        os.environ.clear()
        os.environ.update(env)
        from ray.cluster_utils import Cluster  # heavy, and only here: the control plane never starts a cluster

        try:
            self._cluster = Cluster(
                initialize_head=True,
                shutdown_at_exit=True,
                head_node_args={
                    "num_cpus": self.head_cpus,
                    "include_dashboard": True,
                    "dashboard_host": "127.0.0.1",
                    "dashboard_port": self.dashboard_port,
                    # Ray's fixed default (52365) would collide with another cluster's head on this machine (two
                    # test modules, a benchmark, `make cluster`): its agent would never register
                    "dashboard_agent_listen_port": _free_port(),
                    "temp_dir": str(self.temp_dir),
                },
            )
            # Ray's job supervisor gives each driver RAY_ADDRESS from the address file in the node's temp dir itself
            # (``ray_current_cluster`` there), while the test cluster writes it one level down (``ray/``); without
            # it the supervisor falls back to any GCS it finds on this machine — another cluster's, on a busy one
            from ray._private.utils import write_ray_address

            write_ray_address(self._cluster.gcs_address, str(self.temp_dir))
            self._await_job_agent()
            for _ in range(self.workers_at_start):
                self.add_worker()
        except BaseException:
            self.stop()
            raise
        return self.connection

    def _await_job_agent(self, timeout: float = 60.0) -> None:
        """Until the head's dashboard agent registered (Ray's Jobs API submits through it: a submission before
        that waits in the dashboard, past a client's deadline)."""
        from ray._private.ray_constants import KV_NAMESPACE_DASHBOARD
        from ray.dashboard.consts import DASHBOARD_AGENT_ADDR_NODE_ID_PREFIX

        head = self._cluster.head_node
        key = f"{DASHBOARD_AGENT_ADDR_NODE_ID_PREFIX}{head.node_id}".encode()
        gcs = head.get_gcs_client()
        deadline = time.monotonic() + timeout
        while not gcs.internal_kv_get(key, KV_NAMESPACE_DASHBOARD):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the head's dashboard agent did not register within {timeout:g}s")
            time.sleep(0.1)

    @property
    def connection(self) -> RayConnection:
        return RayConnection(f"http://127.0.0.1:{self.dashboard_port}", self.token())

    def token(self) -> str:
        return self.token_file.read_text().strip()

    def add_worker(self, *, resources: Mapping[str, float] | None = None) -> WorkerNode:
        """A worker node joins (``worker_cpus`` CPUs and ``resources``, the workers' own by default)."""
        node = self._cluster.add_node(
            num_cpus=self.worker_cpus,
            resources=dict(self.worker_resources if resources is None else resources),
            temp_dir=str(self.temp_dir),
        )
        worker = WorkerNode(node.node_id, node.all_processes["raylet"][0].process.pid, node)
        self.workers.append(worker)
        return worker

    def kill_node(self, worker: WorkerNode) -> float:
        """What a lost machine does: ``kill -9`` of the node's raylet, then of every process it started (Ray's
        workers there, and the jobs' drivers they started). Returns the time of the raylet's kill
        (``time.monotonic()``)."""
        killed_at = kill_node_processes(worker.raylet_pid)
        with contextlib.suppress(Exception):  # the node's other processes (its agents, its log monitor) go too
            worker.node.kill_all_processes(check_alive=False, allow_graceful=False, wait=True)
        self.workers.remove(worker)
        with contextlib.suppress(KeyError, AttributeError):
            self._cluster.worker_nodes.remove(worker.node)
        return killed_at

    def stop(self) -> None:
        """Stop the jobs still running (their drivers run in sessions of their own), then every node."""
        if self._cluster is not None and self.dashboard_port:
            _stop_jobs(self.connection.address, self.token(), timeout=10.0)
        for worker in list(self.workers):
            self.kill_node(worker)
        if self._cluster is not None:
            with contextlib.suppress(Exception):
                self._cluster.shutdown()
            self._cluster = None
        shutil.rmtree(self.private_dir, ignore_errors=True)

    # -- the nodes' environment ------------------------------------------------------------------------------

    def node_environment(self) -> dict[str, str]:
        """What every node's processes (and so every job) get: the allow-listed environment, this interpreter's
        ``bin`` first on ``PATH`` (jobs run ``python -m labbot...``), token auth by the token file's path, the
        short node-death timeout, the log monitor's pace."""
        env = head_environment(os.environ)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(self.token_file.resolve()))
        env.update(NODE_DEATH_ENV)
        env.update(LOG_MONITOR_ENV)
        env["RAY_TMPDIR"] = str(self.temp_dir)  # where Ray's test cluster writes its address
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        return env

    def write_state(self, path: Path) -> None:
        """Where the cluster is and which workers run, for ``ClusterProcess`` (written whole, then renamed)."""
        state = {
            "address": self.connection.address,
            "gcs_address": self._cluster.gcs_address,
            "temp_dir": str(self.temp_dir),
            "token_file": str(self.token_file.resolve()),
            "pid": os.getpid(),
            "private_dir": str(self.private_dir),
            "workers": [{"node_id": w.node_id, "raylet_pid": w.raylet_pid} for w in self.workers],
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(path)


def kill_node_processes(raylet_pid: int) -> float:
    """``kill -9`` of a node's raylet, then of every process it started (and theirs, found by session too: a job's
    driver runs in a session of its own). Returns when the raylet was killed (``time.monotonic()``)."""
    try:
        doomed = psutil.Process(raylet_pid).children(recursive=True)
        own = {os.getsid(raylet_pid)}  # the cluster's own session: the other nodes live in it too
    except (psutil.NoSuchProcess, ProcessLookupError):
        doomed, own = [], set()
    doomed += _session_children(doomed, but=own)
    killed_at = time.monotonic()
    with contextlib.suppress(ProcessLookupError):
        os.kill(raylet_pid, signal.SIGKILL)
    for proc in doomed:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    return killed_at


def _session_children(procs: list[psutil.Process], *, but: Set[int] = frozenset()) -> list[psutil.Process]:
    """Processes of the sessions ``procs`` started (a job's driver runs in a session of its own, its watcher in
    another) that left their parent's tree; the sessions in ``but`` are not swept."""
    out: list[psutil.Process] = []
    sessions = set()
    for proc in procs:
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            sessions.add(os.getsid(proc.pid))
    sessions -= but
    if not sessions:
        return out
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if proc not in procs and os.getsid(proc.pid) in sessions and proc.pid != os.getpid():
                out.append(proc)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labbot.training.local_cluster",
        description="A Ray cluster of a head and worker nodes on this machine, for labbot's multi-node path.",
    )
    parser.add_argument("--workers", type=int, default=2, help="worker nodes (default 2)")
    parser.add_argument("--worker-cpus", type=float, default=1, help="CPUs of each worker (default 1)")
    parser.add_argument(
        "--home", type=Path, default=Path(".labbot/cluster"), help="where the token is kept (default .labbot/cluster)"
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing (the state file says where it is)")
    a = parser.parse_args(argv)
    if a.workers < 0 or a.worker_cpus <= 0:
        parser.error("--workers must be at least 0 and --worker-cpus more than 0")
    cluster = LocalCluster(a.home, workers=a.workers, worker_cpus=a.worker_cpus)
    state_file = a.home / STATE_FILE
    stop = False
    add = 0

    def on_signal(*_: object) -> None:
        nonlocal stop
        stop = True

    def on_add(*_: object) -> None:
        nonlocal add
        add += 1

    with contextlib.suppress(FileNotFoundError):
        state_file.unlink()
    try:
        conn = cluster.start()
    except BaseException:
        cluster.stop()
        raise
    # after the start: Ray's nodes set a SIGTERM handler of their own, which would stop them without the jobs
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGUSR1, on_add)
    cluster.write_state(state_file)
    if not a.quiet:
        print(
            f"a Ray cluster of a head (no CPU) and {a.workers} worker node(s) "
            f"({a.worker_cpus:g} CPU and accelerator=1 each) is up; in another shell:\n\n"
            f"  export RAY_ADDRESS={conn.address}\n"
            f"  export RAY_AUTH_TOKEN=$(cat {cluster.token_file.resolve()})\n"
            '  export LABBOT_ARTIFACTS_URL=s3://BUCKET/labbot   # or [training] checkpoint_root = "/shared/folder"\n'
            "  make run\n\n"
            "Ctrl-C stops the cluster and the jobs on it.",
            flush=True,
        )
    try:
        while not stop:
            if add:
                add -= 1
                cluster.add_worker()
                cluster.write_state(state_file)
            time.sleep(0.1)
    finally:
        cluster.stop()
        with contextlib.suppress(FileNotFoundError):
            state_file.unlink()
    return 0


class ClusterProcess:
    """A ``LocalCluster`` in a process of its own, driven from this one (the tests' multi-node fixture)."""

    def __init__(self, home: Path, *, workers: int = 2, start_timeout: float = 90.0) -> None:
        self.home = home
        self.state_file = home / STATE_FILE
        self.workers_at_start = workers
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = home / "cluster.log"
        self.killed: set[str] = set()  # the workers killed from here (the cluster's own state still lists them)

    def start(self) -> RayConnection:
        self.home.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "labbot.training.local_cluster", "--home", str(self.home), "--quiet"]
        cmd += ["--workers", str(self.workers_at_start)]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self._await(lambda st: len(st["workers"]) == self.workers_at_start, "to start")
        return self.connection

    def state(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    @property
    def connection(self) -> RayConnection:
        st = self.state()
        return RayConnection(st["address"], Path(st["token_file"]).read_text().strip())

    @property
    def workers(self) -> list[dict[str, Any]]:
        """The worker nodes alive: started by the cluster, not killed from here."""
        return [w for w in self.state().get("workers") or [] if w["node_id"] not in self.killed]

    def raylet_of(self, node_id: str) -> int:
        for w in self.workers:
            if w["node_id"] == node_id:
                return int(w["raylet_pid"])
        raise KeyError(f"no worker node {node_id[:8]} in this cluster")

    def kill_node(self, node_id: str) -> float:
        """``kill -9`` of the worker's raylet and of its processes; returns when (``time.monotonic()``)."""
        killed_at = kill_node_processes(self.raylet_of(node_id))
        self.killed.add(node_id)
        return killed_at

    def add_worker(self) -> str:
        """A worker node joins; returns its node id."""
        assert self.proc is not None
        before = {w["node_id"] for w in self.state().get("workers") or []}
        os.kill(self.proc.pid, signal.SIGUSR1)
        st = self._await(lambda st: any(w["node_id"] not in before for w in st["workers"]), "to add a worker")
        return next(w["node_id"] for w in st["workers"] if w["node_id"] not in before)

    def _await(self, done: Any, what: str) -> dict[str, Any]:
        assert self.proc is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            st = self.state()
            if st and done(st):
                return st
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the local Ray cluster exited (code {self.proc.returncode}):\n{tail}")
            time.sleep(0.1)
        raise RuntimeError(f"the local Ray cluster took over {self.start_timeout:g}s {what}; see {self.log}")

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (the cluster stops its jobs and nodes), then ``kill -9`` of whatever it started that is left."""
        if self.proc is None:
            return
        private_dir = self.state().get("private_dir")
        try:
            left = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            left = []
        left += _session_children(left, but={self.proc.pid})
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # whatever of the cluster's session is left
        for proc in left:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self.proc = None
        if isinstance(private_dir, str) and Path(private_dir).name.startswith("lbc-"):
            shutil.rmtree(private_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
