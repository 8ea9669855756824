"""Shared set-up for benchmarks: a real control plane (`labbot serve`) on an embedded Ray head, and a run whose
telemetry token we can use. Reuses the test suite's helpers (tests/support.py) rather than copying them."""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support import Serve, telemetry_token  # noqa: E402

from labbot.training.ray_cluster import EmbeddedRayHead, RayConnection  # noqa: E402

SINK_TOML = """
[jobs.sink]
entrypoint = "sleep 600"
description = "holds a run open so a benchmark can post telemetry to it"
"""


@dataclass
class Plane:
    serve: Serve
    ray: RayConnection

    def sink_run(self) -> tuple[str, str]:
        """Launch a do-nothing run; returns (run id, its telemetry token)."""
        with self.serve.client() as api:
            run = api.post("/runs", json={"job": "sink"}).json()["run"]
        return run["id"], telemetry_token(self.ray, run["ray_submission_id"])


@contextmanager
def control_plane() -> Iterator[Plane]:
    with tempfile.TemporaryDirectory(prefix="lb-bench-") as tmp:
        home = Path(tmp)
        head = EmbeddedRayHead(home / "ray-home")
        ray = head.ensure()
        (home / "labbot.toml").write_text(SINK_TOML)
        serve = Serve(
            home / "home",
            ray_address=ray.address,
            ray_token=ray.token,
            extra_env={"LABBOT_CONFIG": str(home / "labbot.toml")},
        ).start()
        try:
            yield Plane(serve, ray)
        finally:
            with serve.client() as api:
                for run in api.get("/runs").json()["runs"]:
                    if run["status"] in ("pending", "running", "restarting"):
                        api.post(f"/runs/{run['id']}/stop")
            serve.stop()
            head.stop()


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def report(name: str, result: dict[str, Any]) -> None:
    """Print one JSON line (run_all.py collects them) after the human-readable lines."""
    print(json.dumps({"benchmark": name, **result}), flush=True)
