"""Test helpers shared across packages: awaiting conditions, free ports, a real `labbot serve` subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import httpx

T = TypeVar("T")


class NoJitter(random.Random):
    """An ``rng`` for the retry policy's jitter that takes none off: the waits are the bare exponential ones."""

    def random(self) -> float:
        return 0.0


class Clock:
    """A clock moved only by hand, for the code that takes a ``clock`` returning an aware datetime: it starts at
    ``start`` (now, by default); ``at(s)`` sets it to ``start`` + s seconds, ``advance(s)`` moves it on."""

    def __init__(self, start: datetime | None = None) -> None:
        self.start = start or datetime.now(UTC)
        self.now = self.start

    def __call__(self) -> datetime:
        return self.now

    def at(self, seconds: float) -> datetime:
        self.now = self.start + timedelta(seconds=seconds)
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def timestamp(self) -> float:
        return self.now.timestamp()


def wait_for(cond: Callable[[], T], *, timeout: float = 30.0, interval: float = 0.25, what: str = "condition") -> T:
    """Poll ``cond`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds. The default
    interval is a quarter second: most conditions ask a `labbot serve` over HTTP, and on two cores a tenth-second poll
    of every waiting test cost the suite CPU the servers and jobs under test need (a test that must see a moment
    sooner passes its own interval)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last value: {last!r})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# a tiny-lm far smaller than the default, for a run that is only there to be watched (paged, stopped, restarted): a
# step of the default model is ~0.05 s of a core, and such a run takes whole minutes of a 2-core machine's CPU
SMALL = "n_layer=1 n_head=2 n_embd=16 batch_size=2 block_size=16"
SMALL_LM = tuple(SMALL.split())


FRESH_CONNECTIONS = httpx.Limits(max_keepalive_connections=0)  # a new TCP connection per request, as before


class _KeptOpen(httpx.Client):
    """A client a ``with`` block neither opens nor closes: the Serve's, used again by the next block (httpx opens
    its transport on the first request)."""

    def __enter__(self) -> _KeptOpen:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class Serve:
    """A real ``labbot serve`` process on a free port with its own LABBOT_HOME."""

    def __init__(
        self,
        home: Path,
        *,
        ray_address: str | None,
        ray_token: str | None,
        port: int | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.home = home
        self.chosen_port = port is None  # a port picked here may be taken by another process before serve binds it
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("LABBOT_", "RAY_", "ANTHROPIC_"))}
        self.env.update(LABBOT_HOME=str(home), LABBOT_PORT=str(self.port), PYTHONUNBUFFERED="1")
        if ray_address:
            self.env["RAY_ADDRESS"] = ray_address
        if ray_token:
            self.env["RAY_AUTH_TOKEN"] = ray_token
        self.env.update(extra_env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = home / "serve.log"
        # one HTTP client per thread for the Serve's life: an httpx client costs ~20 ms of CPU to make (its SSL
        # context), a request through one ~1 ms — a poll making a client each time cost the suite a minute of CPU.
        # No connection is kept alive: a test that kills and restarts serve finds no stale connection in a pool
        self._clients = threading.local()

    def start(self, timeout: float = 120.0) -> Serve:
        """Start it and wait until it answers. A port this class picked that another process took in the meantime
        (free when asked, bound by someone else before serve bound it) is picked again, up to three times."""
        self._clients = threading.local()  # a (re)started serve: clients made for it from here on
        for _ in range(3):
            try:
                return self._start(timeout)
            except AssertionError as e:
                if not (self.chosen_port and "address already in use" in str(e)):
                    raise
                self.port = free_port()
                self.url = f"http://127.0.0.1:{self.port}"
                self.env["LABBOT_PORT"] = str(self.port)
        return self._start(timeout)

    def _start(self, timeout: float) -> Serve:
        # a start imports labbot (about 5 s of CPU on its own) and opens its database and Ray: beside the other test
        # workers on two cores, that has taken over a minute
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "labbot.bot.cli.main", "serve"],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for(self._healthy, timeout=timeout, what=f"labbot serve on {self.url} (log: {self.log_path})")
        except BaseException:
            self.stop()  # a serve that did not come up in time is not left running after the test
            raise
        return self

    def _healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"labbot serve exited with {self.proc.returncode}: {self.log()}")
        try:
            return self._plain().get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def _plain(self) -> httpx.Client:
        """This thread's client without credentials (the probes)."""
        if getattr(self._clients, "plain", None) is None:
            self._clients.plain = httpx.Client(timeout=30, limits=FRESH_CONNECTIONS)
        return self._clients.plain

    def _api(self) -> httpx.Client:
        """This thread's client of ``/api/v1`` with the admin token (made once the token exists)."""
        if getattr(self._clients, "api", None) is None:
            self._clients.api = _KeptOpen(
                base_url=f"{self.url}/api/v1",
                headers={"Authorization": f"Bearer {self.admin_token}"},
                timeout=30,
                limits=FRESH_CONNECTIONS,
            )
        return self._clients.api

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    @property
    def admin_token(self) -> str:
        """The token it was given (``LABBOT_ADMIN_TOKEN``), else the one it keeps in its LABBOT_HOME."""
        return self.env.get("LABBOT_ADMIN_TOKEN") or (self.home / "admin_token").read_text().strip()

    def client(self) -> httpx.Client:
        """``/api/v1`` with the admin token: this thread's one client, which a ``with`` block leaves open."""
        return self._api()

    def run(self, run_id: str) -> dict[str, Any]:
        """The run's JSON (what ``labbot run RUN --json`` prints), over HTTP: the cheap way to poll a run's status (a
        ``labbot`` process per poll costs a sixth of a second of CPU, four times a second, on two cores)."""
        r = self._api().get(f"/runs/{run_id}")
        assert r.status_code == 200, r.text
        return dict(r.json()["run"])

    def cli(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run the real ``labbot`` CLI against this control plane."""
        return subprocess.run(
            [sys.executable, "-m", "labbot.bot.cli.main", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def make_service(
    tmp_path: Path,
    ray: Any,
    jobs: dict[str, Any] | None = None,
    *,
    control_url: str = "http://127.0.0.1:9",
    database_url: str | None = None,
):
    """A real RunService: the database at ``database_url`` (the ``database_url`` fixture's), else a SQLite file in
    ``tmp_path``; the given Ray connection, built-in jobs + ``jobs``."""
    from labbot.storage.db import Database
    from labbot.training.launcher import RayLauncher
    from labbot.training.registry import JobRegistry
    from labbot.training.service import RunService

    path = tmp_path / "labbot.db"
    if database_url is None and not path.exists():  # a copy of the worker's migrated SQLite template
        from databases import sqlite_copy

        db = Database(sqlite_copy(path))
    else:  # the fixture's, or the one a service before this one (a labbot before a restart) left here
        db = Database(database_url or f"sqlite:///{path}")
        db.upgrade()
    return RunService(
        db,
        JobRegistry.from_config(jobs or {}),
        RayLauncher(ray, timeout=10),
        control_url=control_url,
        checkpoint_root=tmp_path / "runs",
    )


SLEEPER = {"sleeper": {"entrypoint": "sleep 120", "description": "does nothing for two minutes"}}


@contextlib.contextmanager
def api_client(tmp_path: Path, database_url: str, admin_token: str) -> Iterator[Any]:
    """The HTTP app in process (starlette's TestClient, the admin token sent, the app's 500s answered not raised)
    over a real RunService, pager, audit trail and artifact store on ``database_url``; Ray an address where nothing
    listens, so a launch that gets as far as Ray is a 503, not a job."""
    from starlette.testclient import TestClient

    from labbot.agents.babysitter.pager import Pager
    from labbot.agents.babysitter.policy import PagingPolicy
    from labbot.bot.api import create_app
    from labbot.storage.artifacts import ArtifactStore
    from labbot.training.ray_cluster import RayConnection
    from labbot.training.telemetry_store import TelemetryStore

    nowhere = RayConnection(address=f"http://127.0.0.1:{free_port()}", token=None)
    service = make_service(tmp_path, nowhere, SLEEPER, database_url=database_url)
    app = create_app(
        service,
        TelemetryStore(service.db),
        admin_token=admin_token,
        pager=Pager(service.db, PagingPolicy(), slack=False, pagerduty=False),
        db=service.db,
        artifacts=ArtifactStore(service.db, str(tmp_path / "artifacts")),
    )
    try:
        with TestClient(app, headers={"Authorization": f"Bearer {admin_token}"}, raise_server_exceptions=False) as c:
            yield c
    finally:
        service.launcher.close()
        service.db.dispose()


# labbot.toml's jobs for the paging stories: one that fails at once (a page), one that holds a run open
CRASHER_AND_SLEEPER_TOML = """
[jobs.crasher]
entrypoint = "python -c 'import sys; sys.exit(3)'"
description = "fails at once"
max_restarts = 0

[jobs.sleeper]
entrypoint = "sleep 300"
description = "holds a run open"
"""


def telemetry_token(ray: Any, submission_id: str) -> str:
    """The run's telemetry token, read where the job reads it: the Ray job's runtime_env."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(ray.address, headers=dict(ray.headers))
    return str(client.get_job_info(submission_id).runtime_env["env_vars"]["LABBOT_TELEMETRY_TOKEN"])


@contextlib.contextmanager
def telemetry_receiver(monkeypatch: Any, run_id: str, token: str = "secret") -> Iterator[list[dict[str, Any]]]:
    """A control plane's telemetry endpoint on 127.0.0.1 that accepts every batch of ``run_id`` and keeps its body;
    the job's environment (``LABBOT_CONTROL_URL``, ``LABBOT_RUN_ID``, ``LABBOT_TELEMETRY_TOKEN``) points at it."""
    bodies: list[dict[str, Any]] = []
    paths: list[str] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            paths.append(self.path)
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("LABBOT_CONTROL_URL", f"http://127.0.0.1:{server.server_address[1]}")
        monkeypatch.setenv("LABBOT_RUN_ID", run_id)
        monkeypatch.setenv("LABBOT_TELEMETRY_TOKEN", token)
        yield bodies
    finally:
        server.shutdown()
        server.server_close()
    assert set(paths) <= {f"/api/v1/runs/{run_id}/telemetry"}, paths
