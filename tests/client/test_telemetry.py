"""labbot_client.telemetry, the in-job telemetry client.

Most tests use httpx.MockTransport as the network seam; one runs against a real HTTP server on 127.0.0.1
that is stopped and restarted mid-run, and two run a child interpreter to check the atexit flush and its
deadline.
Nothing sleeps where a condition can be awaited: ``wait_for`` polls with a deadline.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from labbot_client import telemetry
from labbot_client.telemetry import Telemetry

ROOT = Path(__file__).resolve().parents[2]

TOKEN = "tok-SECRET-4f9c2a"
URL = "http://control.test"
RUN_ID = "run-42"
ENV_NAMES = ("LABBOT_CONTROL_URL", "LABBOT_RUN_ID", "LABBOT_TELEMETRY_TOKEN", "LABBOT_ATTEMPT")


def wait_for(condition: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.005)


def _no_bare_constants(name: str) -> Any:
    raise AssertionError(f"bare JSON constant {name} in a request body")


Responder = Callable[[httpx.Request, int], httpx.Response]


class Recorder:
    """MockTransport handler: records every request and answers with ``responder(request, index)``."""

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder: Responder = responder or (lambda request, n: httpx.Response(200))
        self.lock = threading.Lock()
        self.requests: list[httpx.Request] = []
        self.bodies: list[dict[str, Any]] = []
        self.statuses: list[int | None] = []
        self.times: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content, parse_constant=_no_bare_constants)
        with self.lock:
            n = len(self.requests)
            self.requests.append(request)
            self.bodies.append(body)
            self.times.append(time.monotonic())
            self.statuses.append(None)
        response = self.responder(request, n)  # may raise: the client must survive it
        with self.lock:
            self.statuses[n] = response.status_code
        return response

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.requests)

    def accepted(self) -> list[dict[str, Any]]:
        with self.lock:
            return [b for b, s in zip(self.bodies, self.statuses, strict=True) if s is not None and s < 300]

    def accepted_points(self) -> list[dict[str, Any]]:
        return [p for b in self.accepted() for p in b["points"]]

    def accepted_steps(self) -> list[int]:
        return [p["step"] for p in self.accepted_points()]

    def accepted_events(self) -> list[dict[str, Any]]:
        return [e for b in self.accepted() for e in b["events"]]


@pytest.fixture(autouse=True)
def _reset_module_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    telemetry.finish(0.5)
    yield
    telemetry.finish(0.5)


@pytest.fixture
def make_client() -> Iterator[Callable[..., Telemetry]]:
    clients: list[Telemetry] = []

    def make(recorder: Recorder, **options: Any) -> Telemetry:
        settings: dict[str, Any] = {
            "flush_interval": 0.02,
            "heartbeat_interval": 60.0,
            "backoff_base": 0.01,
            "backoff_max": 0.05,
            "transport": httpx.MockTransport(recorder),
        }
        settings.update(options)
        client = Telemetry(URL, RUN_ID, TOKEN, settings.pop("attempt", 1), **settings)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close(0.5)


def test_many_log_calls_become_few_ordered_requests(make_client: Callable[..., Telemetry]) -> None:
    rec = Recorder()
    client = make_client(rec, attempt=3, flush_interval=60.0)
    for step in range(1234):
        client.log(step, loss=1.0 / (step + 1), tokens_per_s=4567)

    assert client.flush(5.0) is True
    assert rec.accepted_steps() == list(range(1234))
    assert rec.count <= 6, f"{rec.count} requests for 1234 points"
    assert all(len(b["points"]) <= 500 for b in rec.bodies)
    assert client.sent == 1234 and client.dropped == 0

    request, body = rec.requests[0], rec.bodies[0]
    assert request.method == "POST"
    assert str(request.url) == f"{URL}/api/v1/runs/{RUN_ID}/telemetry"
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["content-type"] == "application/json"
    assert len(request.content) < 1024 * 1024
    assert body["attempt"] == 3 and isinstance(body["sent_at"], float) and body["events"] == []
    point = body["points"][0]
    assert set(point) == {"step", "ts", "metrics"} and isinstance(point["ts"], float)
    assert point["metrics"] == {"loss": 1.0, "tokens_per_s": 4567.0}
    assert isinstance(point["metrics"]["tokens_per_s"], float)
    timestamps = [p["ts"] for p in rec.accepted_points()]
    assert timestamps == sorted(timestamps)


def test_non_finite_values_are_sent_as_strings(make_client: Callable[..., Telemetry]) -> None:
    rec = Recorder()  # Recorder parses bodies with parse_constant that fails on bare NaN/Infinity
    client = make_client(rec)
    client.log(7, loss=math.nan, grad_norm=math.inf, margin=-math.inf, lr=3e-4)

    assert client.flush(5.0)
    assert rec.accepted_points()[0]["metrics"] == {
        "loss": "NaN",
        "grad_norm": "Infinity",
        "margin": "-Infinity",
        "lr": 3e-4,
    }


def test_metric_values_are_converted_with_float_or_dropped(make_client: Callable[..., Telemetry]) -> None:
    np = pytest.importorskip("numpy")
    rec = Recorder()
    client = make_client(rec)
    values: dict[str, Any] = {
        "i": 3,
        "b": True,
        "f32": np.float32(0.5),
        "i64": np.int64(9),
        "nan32": np.float32("nan"),
        "text": "1.5",
        "none": None,
        "obj": object(),
        "cplx": 1j,
        "vec": np.array([1.0, 2.0]),
    }
    client.log(np.int64(5), **values)
    bad_step: Any = object()
    client.log(bad_step, loss=1.0)  # a step that is not an integer: point dropped and counted, no raise

    assert client.flush(5.0) is True  # the bad-step point never entered the buffer
    (point,) = rec.accepted_points()
    assert point["step"] == 5
    assert point["metrics"] == {"i": 3.0, "b": 1.0, "f32": 0.5, "i64": 9.0, "nan32": "NaN"}
    assert client.dropped == 1


def test_points_the_control_plane_would_refuse_are_trimmed_in_log(
    make_client: Callable[..., Telemetry],
) -> None:
    rec = Recorder()
    client = make_client(rec)
    many = {f"m{i:03d}": float(i) for i in range(80)}
    client.log(-1, loss=1.0)  # negative step: the whole point goes
    client.log(1, **{"": 1.0, "x" * 65: 2.0, "ok": 3.0})
    client.log(2, **many)

    assert client.flush(5.0) is True
    first, second = rec.accepted_points()
    assert (first["step"], first["metrics"]) == (1, {"ok": 3.0})
    assert second["step"] == 2 and list(second["metrics"]) == list(many)[:64]
    assert client.dropped == 1


def test_batches_are_split_to_keep_request_bodies_under_one_mebibyte(
    make_client: Callable[..., Telemetry],
) -> None:
    rec = Recorder()
    client = make_client(rec, flush_interval=60.0)
    wide = {f"metric_{i:02d}_{'x' * 52}": 1.0 / (i + 3) for i in range(64)}  # ~5 KB of JSON a point
    for step in range(500):
        client.log(step, **wide)

    assert client.flush(10.0) is True
    assert rec.accepted_steps() == list(range(500))
    assert rec.count >= 3
    assert all(len(request.content) < 1024 * 1024 for request in rec.requests)


def test_zero_dim_torch_tensors_are_converted(make_client: Callable[..., Telemetry]) -> None:
    torch = pytest.importorskip("torch")
    rec = Recorder()
    client = make_client(rec)
    client.log(torch.tensor(3), loss=torch.tensor(0.25), bad=torch.tensor([1.0, 2.0]), div=torch.tensor(math.inf))

    assert client.flush(5.0)
    assert rec.accepted_points()[0] == {
        "step": 3,
        "ts": rec.accepted_points()[0]["ts"],
        "metrics": {"loss": 0.25, "div": "Infinity"},
    }


def test_heartbeats_are_sent_without_log_calls(make_client: Callable[..., Telemetry]) -> None:
    rec = Recorder()
    client = make_client(rec, heartbeat_interval=0.05)

    wait_for(lambda: rec.count >= 3, what="three heartbeats")
    assert all(b["points"] == [] and b["events"] == [] and b["attempt"] == 1 for b in rec.bodies[:3])

    # A loop that logs once and then hangs still shows up as alive.
    client.log(1, loss=1.0)
    wait_for(lambda: rec.accepted_steps() == [1], what="the point")
    after = rec.count
    wait_for(lambda: rec.count >= after + 2, what="heartbeats after the loop stopped logging")
    assert all(b["points"] == [] for b in rec.bodies[after:])


def test_the_phase_rides_on_every_request_heartbeats_included(make_client: Callable[..., Telemetry]) -> None:
    rec = Recorder()
    client = make_client(rec, heartbeat_interval=0.05)
    wait_for(lambda: rec.count >= 1, what="a heartbeat")
    assert "phase" not in rec.bodies[0], "no phase until the job names one"
    client.phase("rollout")
    client.phase("not a phase!")  # ignored, with a warning: the phase stays
    wait_for(lambda: rec.bodies[-1].get("phase") == "rollout", what="a heartbeat naming the phase")
    client.phase("learn")
    client.log(3, loss=1.0)
    wait_for(lambda: rec.accepted_steps() == [3], what="the point")
    assert next(b for b in rec.bodies if b["points"])["phase"] == "learn"


def test_checkpoint_events_are_sent_promptly(make_client: Callable[..., Telemetry]) -> None:
    rec = Recorder()
    client = make_client(rec, flush_interval=60.0)
    client.log(100, loss=0.5)
    client.checkpoint(100, "/ckpt/step-100")
    client.checkpoint(200)

    wait_for(lambda: len(rec.accepted_events()) == 2, what="checkpoint events, without flush()")
    first, second = rec.accepted_events()
    assert first["kind"] == "checkpoint" and first["step"] == 100 and first["path"] == "/ckpt/step-100"
    assert isinstance(first["ts"], float)
    assert second["step"] == 200 and second["path"] is None
    assert rec.accepted_steps() == [100]


def test_log_never_raises_and_stays_fast_while_the_transport_raises(
    make_client: Callable[..., Telemetry],
) -> None:
    broken = threading.Event()
    broken.set()

    def responder(request: httpx.Request, n: int) -> httpx.Response:
        if broken.is_set():
            raise RuntimeError("transport exploded")
        return httpx.Response(202)

    rec = Recorder(responder)
    client = make_client(rec, backoff_base=0.05, backoff_max=0.2)

    # Baseline: the same loop into a plain deque, so a loaded CI machine does not make this flaky.
    sink: deque[tuple[int, float, dict[str, Any]]] = deque(maxlen=10_000)

    def plain(step: int, **metrics: Any) -> None:
        sink.append((step, time.time(), {k: float(v) for k, v in metrics.items()}))

    start = time.perf_counter()
    for step in range(100_000):
        plain(step, loss=float(step), tokens_per_s=step)
    baseline = time.perf_counter() - start

    start = time.perf_counter()
    for step in range(100_000):
        client.log(step, loss=float(step), tokens_per_s=step)
    elapsed = time.perf_counter() - start
    budget = max(1.0, 15 * baseline)  # 1 s on an idle machine
    assert elapsed < budget, f"100k log() calls took {elapsed:.2f}s (plain deque loop: {baseline:.2f}s)"

    # Backoff, not a busy loop: count attempts over a short window.
    before = rec.count
    window_start = time.monotonic()
    wait_for(lambda: time.monotonic() - window_start > 0.6, what="the window")
    assert rec.count - before <= 12, f"{rec.count - before} attempts in 0.6 s while the server is down"
    assert client.sent == 0

    broken.clear()
    assert client.flush(5.0) is True  # nothing *more* was dropped while flushing
    steps = rec.accepted_steps()
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    assert steps[-10_000:] == list(range(90_000, 100_000))  # the newest max_buffer points survived
    assert client.sent == len(steps)
    assert client.sent + client.dropped == 100_000


def test_full_buffer_drops_the_oldest_points_and_counts_them(make_client: Callable[..., Telemetry]) -> None:
    rec = Recorder()
    client = make_client(rec, flush_interval=60.0, max_buffer=10)
    for step in range(25):
        client.log(step, loss=float(step))

    assert client.dropped == 15
    assert client.flush(5.0) is True
    assert rec.accepted_steps() == list(range(15, 25))
    assert client.sent == 10 and client.dropped == 15


@pytest.mark.parametrize("status", [401, 403, 400, 404, 413, 422])
def test_rejected_batches_are_dropped_and_counted_without_retries(
    make_client: Callable[..., Telemetry], capfd: pytest.CaptureFixture[str], status: int
) -> None:
    rec = Recorder(lambda request, n: httpx.Response(status, text=f"nope, {TOKEN} is bad"))
    client = make_client(rec)

    for step in range(10):
        client.log(step, loss=1.0)
    assert client.flush(5.0) is False
    assert rec.count == 1 and client.dropped == 10 and client.sent == 0

    for step in range(10, 15):
        client.log(step, loss=1.0)
    assert client.flush(5.0) is False
    assert client.dropped == 15

    # Give a retry storm the chance to show up: several flush intervals pass with nothing new to send.
    time.sleep(0.15)
    assert rec.count == 2
    assert [len(b["points"]) for b in rec.bodies] == [10, 5]

    err = capfd.readouterr().err
    assert err.count("labbot.telemetry:") == 1, err
    assert str(status) in err
    assert TOKEN not in err


@pytest.mark.parametrize("status", [429, 503, 500, 408])
def test_retryable_statuses_keep_and_retry_the_batch(make_client: Callable[..., Telemetry], status: int) -> None:
    rec = Recorder(lambda request, n: httpx.Response(status if n < 2 else 200))
    client = make_client(rec)
    for step in range(5):
        client.log(step, loss=1.0)

    assert client.flush(5.0) is True
    assert rec.count == 3
    assert all([p["step"] for p in b["points"]] == list(range(5)) for b in rec.bodies)
    assert rec.accepted_steps() == list(range(5))
    assert client.sent == 5 and client.dropped == 0


def test_retry_after_is_honoured_even_by_flush(make_client: Callable[..., Telemetry]) -> None:
    def responder(request: httpx.Request, n: int) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": "1"}) if n == 0 else httpx.Response(200)

    rec = Recorder(responder)
    client = make_client(rec, flush_interval=60.0)
    client.log(1, loss=1.0)

    assert client.flush(5.0) is True
    assert rec.count == 2
    assert rec.times[1] - rec.times[0] >= 0.95


def test_flush_gives_up_at_its_timeout_while_the_server_is_down(
    make_client: Callable[..., Telemetry],
) -> None:
    def responder(request: httpx.Request, n: int) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client = make_client(Recorder(responder))
    client.log(1, loss=1.0)

    start = time.monotonic()
    assert client.flush(0.3) is False
    assert time.monotonic() - start < 1.0
    assert client.sent == 0 and client.dropped == 0  # still buffered, not lost


def test_close_delivers_the_tail_and_is_idempotent(make_client: Callable[..., Telemetry]) -> None:
    rec = Recorder()
    client = make_client(rec, flush_interval=60.0)
    for step in range(7):
        client.log(step, loss=float(step))
    client.checkpoint(6, "/ckpt/6")

    client.close(5.0)
    assert rec.accepted_steps() == list(range(7))
    assert [e["step"] for e in rec.accepted_events()] == [6]
    assert not client._thread.is_alive()

    client.close(5.0)
    client.log(7, loss=1.0)  # after close: a no-op, not an error
    assert client.flush(0.1) is True
    assert rec.accepted_steps() == list(range(7))


def test_init_without_environment_returns_none_and_module_functions_are_noops() -> None:
    threads_before = {t.name for t in threading.enumerate()}

    assert telemetry.init() is None
    assert telemetry.init(url="http://127.0.0.1:3000", run_id=RUN_ID) is None  # no token
    telemetry.log(1, loss=1.0)
    telemetry.checkpoint(1, "/ckpt/1")
    telemetry.finish()
    telemetry.finish()

    new_threads = {t.name for t in threading.enumerate()} - threads_before
    assert not any(name.startswith("labbot-telemetry") for name in new_threads)


def test_init_reads_the_environment_and_is_idempotent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABBOT_CONTROL_URL", "http://127.0.0.1:3000/")
    monkeypatch.setenv("LABBOT_RUN_ID", "env-run")
    monkeypatch.setenv("LABBOT_TELEMETRY_TOKEN", TOKEN)
    monkeypatch.setenv("LABBOT_ATTEMPT", "2")
    rec = Recorder()

    client = telemetry.init(transport=httpx.MockTransport(rec), flush_interval=60.0)
    assert isinstance(client, Telemetry)
    assert telemetry.init() is client
    assert telemetry.init(run_id="ignored") is client

    telemetry.log(1, loss=0.5)
    telemetry.checkpoint(1, "/ckpt/1")
    telemetry.finish(5.0)
    telemetry.log(2, loss=0.25)  # after finish: no default client, a no-op

    assert rec.accepted_steps() == [1]
    assert str(rec.requests[0].url) == "http://127.0.0.1:3000/api/v1/runs/env-run/telemetry"
    assert rec.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert rec.bodies[0]["attempt"] == 2


def test_explicit_init_arguments_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABBOT_CONTROL_URL", "http://127.0.0.1:3000")
    monkeypatch.setenv("LABBOT_RUN_ID", "env-run")
    monkeypatch.setenv("LABBOT_TELEMETRY_TOKEN", "env-token")
    monkeypatch.setenv("LABBOT_ATTEMPT", "not-a-number")
    rec = Recorder()

    client = telemetry.init(
        url="http://cp.internal:8080", run_id="arg/run", token=TOKEN, transport=httpx.MockTransport(rec)
    )
    assert client is not None
    telemetry.log(1, loss=1.0)
    assert client.flush(5.0)

    assert str(rec.requests[0].url) == "http://cp.internal:8080/api/v1/runs/arg%2Frun/telemetry"
    assert rec.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert rec.bodies[0]["attempt"] == 1  # unparsable LABBOT_ATTEMPT falls back to 1


def test_the_token_never_reaches_stderr(
    make_client: Callable[..., Telemetry], capfd: pytest.CaptureFixture[str]
) -> None:
    def raising(request: httpx.Request, n: int) -> httpx.Response:
        raise RuntimeError(f"cannot send {request.headers['authorization']}")

    scenarios: list[Responder] = [
        lambda request, n: httpx.Response(401, text=f"invalid token {TOKEN}"),
        lambda request, n: httpx.Response(422, json={"detail": f"bad body from Bearer {TOKEN}"}),
        lambda request, n: httpx.Response(503, text=TOKEN),
        raising,
    ]
    for responder in scenarios:
        client = make_client(Recorder(responder))
        client.log(1, loss=math.nan)
        client.flush(0.2)
        client.close(0.2)
    assert telemetry.init(url=URL, run_id=RUN_ID, token=TOKEN, no_such_option=1) is None

    err = capfd.readouterr().err
    assert err.count("labbot.telemetry:") >= 4, err
    assert TOKEN not in err


class _TelemetryHandler(BaseHTTPRequestHandler):
    server: _RecordingServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.steps.extend(p["step"] for p in body["points"])
            self.server.auth.append(self.headers.get("Authorization", ""))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, steps: list[int], auth: list[str], lock: threading.Lock) -> None:
        super().__init__(("127.0.0.1", port), _TelemetryHandler)
        self.steps, self.auth, self.lock = steps, auth, lock
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join(5.0)


def test_real_server_outage_buffers_and_delivers_in_order_after_recovery() -> None:
    steps: list[int] = []
    auth: list[str] = []
    lock = threading.Lock()

    def received() -> list[int]:
        with lock:
            return list(steps)

    server = _RecordingServer(0, steps, auth, lock)
    port = server.server_address[1]
    client = Telemetry(
        f"http://127.0.0.1:{port}",
        RUN_ID,
        TOKEN,
        flush_interval=0.02,
        heartbeat_interval=60.0,
        backoff_base=0.02,
        backoff_max=0.2,
        timeout=2.0,
    )
    try:
        for step in range(100):
            client.log(step, loss=1.0 / (step + 1))
        wait_for(lambda: len(received()) >= 100, what="the first 100 points")

        server.stop()
        for step in range(100, 200):
            client.log(step, loss=1.0 / (step + 1))
        wait_for(lambda: client._failures >= 2, what="failed attempts while the server is down")
        assert client.sent == 100 and client.dropped == 0

        server = _RecordingServer(port, steps, auth, lock)
        wait_for(lambda: len(set(received())) >= 200, what="the buffered points after recovery")
        assert client.flush(5.0) is True
        # At-least-once, in order: drop repeats (a retried batch whose reply was lost), order must hold.
        assert list(dict.fromkeys(received())) == list(range(200))
        assert client.sent == 200 and client.dropped == 0
        assert set(auth) == {f"Bearer {TOKEN}"}
    finally:
        client.close(2.0)
        server.stop()


def _run_child(
    script: str, env: dict[str, str], timeout: float = 20.0
) -> tuple[subprocess.CompletedProcess[str], float]:
    child_env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    child_env.update(env)
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=ROOT,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return result, time.monotonic() - start


@pytest.mark.subprocess
def test_atexit_flush_delivers_the_last_steps() -> None:
    steps: list[int] = []
    lock = threading.Lock()
    server = _RecordingServer(0, steps, [], lock)
    try:
        result, _ = _run_child(
            """
            from labbot_client import telemetry
            assert telemetry.init(flush_interval=60.0, heartbeat_interval=60.0) is not None
            for step in range(5):
                telemetry.log(step, loss=float(step))
            # no finish(): the atexit hook must deliver these
            """,
            {
                "LABBOT_CONTROL_URL": f"http://127.0.0.1:{server.server_address[1]}",
                "LABBOT_RUN_ID": RUN_ID,
                "LABBOT_TELEMETRY_TOKEN": TOKEN,
            },
        )
        assert result.returncode == 0, result.stderr
        with lock:
            assert steps == list(range(5))
    finally:
        server.stop()


@pytest.mark.subprocess
def test_atexit_flush_never_hangs_exit_longer_than_its_deadline() -> None:
    # A server that accepts connections (into the backlog) and never answers: requests hang until timeout.
    blackhole = socket.socket()
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen(16)
    try:
        result, elapsed = _run_child(
            """
            import time
            start = time.monotonic()
            from labbot_client import telemetry
            assert telemetry.init(exit_timeout=0.5, timeout=30.0, flush_interval=60.0) is not None
            telemetry.log(1, loss=1.0)
            print(f"startup {time.monotonic() - start:.3f}")
            """,
            {
                "LABBOT_CONTROL_URL": f"http://127.0.0.1:{blackhole.getsockname()[1]}",
                "LABBOT_RUN_ID": RUN_ID,
                "LABBOT_TELEMETRY_TOKEN": TOKEN,
            },
        )
        assert result.returncode == 0, result.stderr
        startup = float(result.stdout.split()[-1])
        assert elapsed - startup < 3.0, f"exit took {elapsed - startup:.2f}s with a 0.5 s deadline"
        assert TOKEN not in result.stderr
    finally:
        blackhole.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_does_not_share_the_parents_sender(make_client: Callable[..., Telemetry]) -> None:
    rec = Recorder()
    client = make_client(rec, flush_interval=60.0)
    assert telemetry.init(url=URL, run_id=RUN_ID, token=TOKEN, transport=httpx.MockTransport(rec)) is not None
    client.log(1, loss=1.0)  # buffered in the parent when the fork happens

    pid = os.fork()
    if pid == 0:  # child: must leave through os._exit, never back into pytest
        code = 1
        try:
            start = time.monotonic()
            client.log(2, loss=2.0)
            telemetry.log(2, loss=2.0)
            ok = client.flush(5.0) and telemetry._default is None and client.sent == 0
            client.close(5.0)
            code = 0 if ok and time.monotonic() - start < 1.0 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0

    assert client.flush(5.0) is True  # the parent's client still works, and only the parent's point arrived
    assert rec.accepted_steps() == [1]
