"""The Ray cluster labbot talks to: ``RAY_ADDRESS`` when set, else an embedded local head under ``LABBOT_HOME``.

The embedded head runs ``ray start --head --block`` in its own session with token auth (``RAY_AUTH_MODE=token``;
the token lives in ``LABBOT_HOME/ray/auth_token``, mode 0600, and reaches Ray as that file's path). Jobs inherit the
head's environment, so the head gets an allow-listed one (``head_environment``): no Slack, Ray or vendor secret of
labbot's reaches a job. Its state (dashboard URL, pid, temp dir) is
recorded in ``LABBOT_HOME/ray/head.json`` so a restarted labbot reuses a head that is still up — jobs keep
running across a control-plane restart — and stops it on exit only if labbot started it. Ray's unix socket
paths must stay under 107 bytes, so the head's ``--temp-dir`` is a short folder in /tmp, recorded in head.json. Ray
makes its temp dir world-writable and writes each job's runtime env (telemetry token included) in logs there, so
that folder sits inside a private (0700) one of labbot's. The head's log monitor lists its log folder once a second,
not ten times (``LOG_MONITOR_ENV``): an idle head's CPU no longer grows with every job it has run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from labbot.common.durations import format_duration
from labbot.common.processes import pid_alive
from labbot.common.redact import SECRET_ENV_NAME

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RayConnection:
    """Where the Ray dashboard (Jobs API) is and how to authenticate to it."""

    address: str
    token: str | None
    embedded: bool = False

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def dashboard_alive(address: str, token: str | None, timeout: float = 2.0) -> bool:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        r = httpx.get(f"{address.rstrip('/')}/api/version", headers=headers, timeout=timeout)
    except httpx.HTTPError:
        return False
    return r.status_code == 200


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free ports: every socket stays bound until all are chosen, so none is handed out twice."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("127.0.0.1", 0))
            ports.append(int(s.getsockname()[1]))
        return ports


_PORT_ERRORS = re.compile(r"address already in use|is trying to use a port number|failed to bind", re.IGNORECASE)
# `ray start` says this once the head node is up (its raylet registered); the dashboard can answer before that, and a
# raylet that never registers (an overloaded machine) makes `ray start` give up and take the dashboard down with it
_STARTED = "Ray runtime started"
_START_TIMED_OUT = re.compile(r"timed out during startup|GCS has become overloaded", re.IGNORECASE)


# what a job may inherit from labbot's environment: names that locate things (interpreter, libraries, GPUs, caches)
_ENV_NAMES = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM", "HOSTNAME"}
    | {"PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "XDG_CACHE_HOME"}
)
_ENV_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "NCCL_", "HF_", "TORCH", "OMP_", "MKL_", "RAY_")


LOG_MONITOR_ENV = {"RAY_LOG_MONITOR_MANY_FILES_THRESHOLD": "0", "LOG_NAME_UPDATE_INTERVAL_S": "1.0"}
"""Ray's log monitor (which carries a job's Ray workers' output to its driver, and so to ``labbot logs``) lists the
session's log folder ten times a second while it holds under a thousand files: tens of milliseconds of CPU a second on
an idle head once a few dozen jobs have run, growing with each. With these it lists the folder once a second (a new
worker's first lines reach its driver up to a second later; nothing is lost), as Ray itself does past a thousand
files."""


def head_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of ``environ`` the Ray head (and so every job) may carry: allow-listed names, never one that names
    a secret (``HF_TOKEN``, ``RAY_AUTH_TOKEN``), never ``RAY_ADDRESS`` (the head is its own cluster). A job that
    needs a key gets it from its spec's ``env``."""
    return {
        k: v
        for k, v in environ.items()
        if (k in _ENV_NAMES or k.startswith(_ENV_PREFIXES)) and not SECRET_ENV_NAME.search(k) and k != "RAY_ADDRESS"
    }


class _PortTaken(Exception):
    """The head exited at start because one of its chosen ports was taken meanwhile."""


class _StartTimedOut(Exception):
    """The head gave up at start: its raylet did not register in time (the machine was too busy)."""


class EmbeddedRayHead:
    """A local single-node Ray head with token auth, owned by labbot."""

    def __init__(self, home: Path, *, num_cpus: int | None = None, start_timeout: float = 90.0) -> None:
        self.dir = home / "ray"
        self.state_file = self.dir / "head.json"
        self.token_file = self.dir / "auth_token"
        self.num_cpus = num_cpus
        self.start_timeout = start_timeout
        self.started_here = False
        # short and stable per LABBOT_HOME: Ray's socket paths must stay under 107 bytes
        digest = hashlib.sha1(str(home.resolve()).encode()).hexdigest()[:10]
        # Ray chmods its temp dir 0777 and logs runtime envs there: it lives inside a 0700 folder of labbot's
        self.private_dir = Path("/tmp") / f"lb-{digest}"
        self.temp_dir = self.private_dir / "r"

    def token(self) -> str:
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self.token_file.exists():
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
        return self.token_file.read_text().strip()

    def _read_state(self) -> dict[str, object] | None:
        try:
            state = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return None
        return state if isinstance(state, dict) else None

    def ensure(self) -> RayConnection:
        """Reuse the recorded head if it answers, else start one. Blocks until its dashboard answers."""
        token = self.token()
        state = self._read_state()
        if state and dashboard_alive(str(state["address"]), token):
            log.info("reusing the local Ray head at %s", state["address"])
            self.started_here = True  # it was started by labbot for this LABBOT_HOME: ours to stop
            return RayConnection(str(state["address"]), token, embedded=True)
        return self._start(token)

    def _start(self, token: str, attempts: int = 3) -> RayConnection:
        """Start the head; a port taken by another process between choosing and binding it, or a head that gave up
        at start on a busy machine, means a retry."""
        for attempt in range(1, attempts + 1):
            try:
                return self._start_once(token)
            except _PortTaken as exc:
                log.warning("the local Ray head could not bind its ports (try %d of %d): %s", attempt, attempts, exc)
            except _StartTimedOut as exc:
                log.warning("the local Ray head gave up starting (try %d of %d): %s", attempt, attempts, exc)
        raise RuntimeError(f"the local Ray head did not start after {attempts} tries; see {self.dir / 'head.log'}")

    def _private_temp_dir(self) -> None:
        """The 0700 folder around Ray's temp dir, ours alone (one another user made first is refused)."""
        self.private_dir.mkdir(mode=0o700, exist_ok=True)
        if self.private_dir.is_symlink() or self.private_dir.stat().st_uid != os.getuid():
            raise RuntimeError(f"{self.private_dir} is not labbot's own folder; remove it and start labbot again")
        self.private_dir.chmod(0o700)
        self.temp_dir.mkdir(exist_ok=True)

    def _start_once(self, token: str) -> RayConnection:
        self._private_temp_dir()
        dashboard_port, gcs_port, *component_ports = _free_ports(9)
        flags = (
            "--dashboard-agent-listen-port",
            "--dashboard-agent-grpc-port",
            "--runtime-env-agent-port",
            "--metrics-export-port",
            "--ray-client-server-port",
            "--node-manager-port",
            "--object-manager-port",
        )
        ports = dict(zip(flags, component_ports, strict=True))
        ray_bin = Path(sys.executable).with_name("ray")
        cmd = [
            str(ray_bin) if ray_bin.exists() else "ray",
            "start",
            "--head",
            "--block",
            f"--temp-dir={self.temp_dir}",
            f"--port={gcs_port}",
            "--node-ip-address=127.0.0.1",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard_port}",
            "--disable-usage-stats",
            *(f"{flag}={port}" for flag, port in ports.items()),
        ]
        if self.num_cpus is not None:
            cmd.append(f"--num-cpus={self.num_cpus}")
        env = head_environment(os.environ)  # every job inherits it: labbot's secrets stay out
        # the token as a path, not a value: a job printing its environment shows no credential
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(self.token_file.resolve()))
        # jobs run `python ...`: make it this interpreter's environment (torch, labbot's training package)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env.update(LOG_MONITOR_ENV)
        address = f"http://127.0.0.1:{dashboard_port}"
        log_path = self.dir / "head.log"
        log_start = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=self.dir
            )
        deadline = time.monotonic() + self.start_timeout

        def started() -> bool:
            said = log_path.read_bytes()[log_start:].decode(errors="replace")
            return _STARTED in said and dashboard_alive(address, token, timeout=1.0)

        try:
            self._await_start(proc, started, log_path, log_start, deadline)
        except BaseException:  # stopped (SIGTERM, Ctrl-C) or failed while it starts: the head goes too
            self._terminate(proc.pid)
            shutil.rmtree(self.private_dir, ignore_errors=True)
            raise
        state = {"address": address, "pid": proc.pid, "gcs_port": gcs_port, "temp_dir": str(self.temp_dir)}
        self.state_file.write_text(json.dumps(state, indent=2))
        self.started_here = True
        log.info("started a local Ray head at %s (temp dir %s)", address, self.temp_dir)
        return RayConnection(address, token, embedded=True)

    def _await_start(
        self,
        proc: subprocess.Popen[bytes],
        started: Callable[[], bool],
        log_path: Path,
        log_start: int,
        deadline: float,
    ) -> None:
        while not started():
            if proc.poll() is not None:
                tail = log_path.read_bytes()[log_start:].decode(errors="replace")
                if _PORT_ERRORS.search(tail):
                    raise _PortTaken(tail.strip().splitlines()[-1])
                if _START_TIMED_OUT.search(tail):
                    raise _StartTimedOut(tail.strip().splitlines()[-1])
                raise RuntimeError(f"the local Ray head exited with code {proc.returncode}; see {log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the local Ray head did not answer within {format_duration(self.start_timeout)}")
            time.sleep(0.25)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the head if labbot started it: first the jobs still running on it, through the Jobs API (a job's
        entrypoint runs in a session of its own, so the head going away would leave it training, orphaned), then
        SIGTERM to ``ray start --block``, which stops all the head's processes."""
        state = self._read_state()
        if not self.started_here or not state:
            return
        _stop_jobs(str(state["address"]), self.token(), timeout=min(timeout, 10.0))
        self._terminate(int(str(state["pid"])), timeout)
        with contextlib.suppress(OSError):
            self.state_file.unlink()
        self.started_here = False
        # Ray's session folders (logs, sockets: megabytes each) live in /tmp for its socket paths' length limit:
        # labbot's state is in LABBOT_HOME, so nothing of this head stays behind in /tmp
        shutil.rmtree(self.private_dir, ignore_errors=True)

    @staticmethod
    def _terminate(pid: int, timeout: float = 10.0) -> None:
        """SIGTERM ``ray start --block`` (it stops every Ray process it started), then sweep its process group."""
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(pid, os.WNOHANG)[0] == pid:
                        break  # our child, reaped
                if not pid_alive(pid):
                    break
                time.sleep(0.1)
        # whatever is left of the head's session (a slow shutdown, an orphaned worker) goes now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _stop_jobs(address: str, token: str | None, *, timeout: float) -> None:
    """Stop every PENDING or RUNNING job on the head and wait (bounded) until Ray says they ended."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    live = ("PENDING", "RUNNING")
    deadline = time.monotonic() + timeout
    try:
        with httpx.Client(base_url=address.rstrip("/"), headers=headers, timeout=2.0) as http:
            jobs = [j for j in http.get("/api/jobs/").json() if j.get("status") in live and j.get("submission_id")]
            for job in jobs:
                http.post(f"/api/jobs/{job['submission_id']}/stop")
            if jobs:
                log.info("stopped %d job(s) still running on the local Ray head", len(jobs))
            running = [j for j in jobs if j.get("status") == "RUNNING"]  # a PENDING job has no process to orphan
            while running and time.monotonic() < deadline:
                time.sleep(0.2)
                running = [j for j in http.get("/api/jobs/").json() if j.get("status") == "RUNNING"]
    except (httpx.HTTPError, ValueError) as e:
        log.warning("could not stop the jobs on the local Ray head before stopping it: %s", type(e).__name__)


def connect(home: Path, address: str | None, token: str | None) -> tuple[RayConnection, EmbeddedRayHead | None]:
    """``RAY_ADDRESS``/``RAY_AUTH_TOKEN`` when given; otherwise the embedded head (started or reused)."""
    if address:
        if "://" not in address:
            address = f"http://{address}"
        return RayConnection(address.rstrip("/"), token or None), None
    head = EmbeddedRayHead(home)
    return head.ensure(), head
