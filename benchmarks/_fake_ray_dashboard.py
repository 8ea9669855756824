"""A fake Ray dashboard at the HTTP edge: what ``ray.job_submission.JobSubmissionClient`` reads for the watchdog.

Answers ``GET /api/version`` (the shape of ``ray/dashboard/modules/job/job_head.py``: ``VersionResponse``) and
``GET /api/jobs/`` (a JSON list of ``JobDetails.dict()``, as ``JobHead.list_jobs`` serializes it), plus
``GET /api/jobs/{id}`` for one job. Token auth like a head started with ``RAY_AUTH_MODE=token``: a request without
``Authorization: Bearer TOKEN`` gets 401. The job list is serialized once per ``set_jobs``, so each request costs the
fake no more than writing bytes: what is timed is labbot's side (the SDK's request, JSON parsing, pydantic).

    with FakeRayDashboard("tok") as dash:
        dash.set_jobs([job_details(run_id) for run_id in ids])
        RayLauncher(RayConnection(dash.url, "tok")).jobs()
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import ray

VERSION = {"version": "4", "ray_version": ray.__version__, "ray_commit": ray.__commit__, "session_name": "session_fake"}


def job_details(run_id: str, *, attempt: int = 1, start_ms: int, status: str = "RUNNING", n: int = 0) -> dict[str, Any]:
    """One submission job as the dashboard lists it: labbot's submission id, metadata and runtime_env."""
    sid = f"labbot-{run_id}-{attempt}"
    return {
        "type": "SUBMISSION",
        "job_id": f"{n + 2:08x}",
        "submission_id": sid,
        "driver_info": {"id": f"{n + 2:08x}", "node_ip_address": "127.0.0.1", "pid": str(10000 + n % 50000)},
        "status": status,
        "entrypoint": (
            "python -m labbot.training.jobs.tiny_lm --steps 100000 --checkpoint_every 50 --log_every 10 "
            "--num_workers 0 --batch_size 16 --lr 0.003 --seed 1337 --device auto --hang_at_step 0 "
            "--crash_at_step 0 --nan_at_step 0"
        ),
        "message": "Job is currently running." if status == "RUNNING" else f"Job {status.lower()}.",
        "error_type": None,
        "start_time": start_ms,
        "end_time": None,
        "metadata": {
            "labbot_run_id": run_id,
            "labbot_job": "tiny-lm",
            "labbot_owner": "U0ALICE001",
            "labbot_attempt": str(attempt),
        },
        "runtime_env": {
            "env_vars": {
                "LABBOT_RUN_ID": run_id,
                "LABBOT_ATTEMPT": str(attempt),
                "LABBOT_TELEMETRY_TOKEN": "x" * 43,
                "LABBOT_CONTROL_URL": "http://127.0.0.1:8080",
                "LABBOT_CHECKPOINT_DIR": f"/var/lib/labbot/runs/{run_id}",
            }
        },
        "driver_agent_http_address": "http://127.0.0.1:52365",
        "driver_node_id": "f" * 56,
        "driver_exit_code": None,
    }


class FakeRayDashboard:
    def __init__(self, token: str | None) -> None:
        self.token = token
        self.requests = 0
        self._jobs_body = b"[]"
        self._by_id: dict[str, bytes] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def set_jobs(self, jobs: list[dict[str, Any]]) -> None:
        self._jobs_body = json.dumps(jobs).encode()
        self._by_id = {j["submission_id"]: json.dumps(j).encode() for j in jobs}

    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")  # what aiohttp sends
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                fake.requests += 1
                if fake.token and self.headers.get("Authorization") != f"Bearer {fake.token}":
                    self._send(401, b'{"error": "Unauthorized: missing or invalid authentication token"}')
                    return
                path = self.path.split("?", 1)[0]
                if path == "/api/version":
                    self._send(200, json.dumps(VERSION).encode())
                elif path == "/api/jobs/":
                    self._send(200, fake._jobs_body)
                elif path.startswith("/api/jobs/") and path.rstrip("/")[len("/api/jobs/") :] in fake._by_id:
                    self._send(200, fake._by_id[path.rstrip("/")[len("/api/jobs/") :]])
                else:
                    self._send(404, b'{"error": "not found"}')

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-ray-dashboard", daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeRayDashboard:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
