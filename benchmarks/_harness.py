"""Shared set-up for benchmarks: a real control plane (`labbot serve`) on an embedded Ray head, and a run whose
telemetry token we can use; a scratch database on SQLite or PostgreSQL (``--database sqlite|postgresql|both``).
Reuses the test suite's helpers (tests/support.py) rather than copying them."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support import Serve, telemetry_token  # noqa: E402

from labbot.training.ray_cluster import EmbeddedRayHead, RayConnection  # noqa: E402

SERVER_ENV = "LABBOT_TEST_DATABASE_URL"  # the PostgreSQL server's maintenance database, as the tests use it
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1/postgres"

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


def _admin() -> Any:
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    from labbot.storage.db import normalize_database_url

    url = normalize_database_url(os.environ.get(SERVER_ENV) or DEFAULT_SERVER)
    return url, create_engine(
        url, isolation_level="AUTOCOMMIT", poolclass=NullPool, connect_args={"connect_timeout": 3}
    )


def postgresql_problem() -> str | None:
    """Why the PostgreSQL server cannot be used (None: it can)."""
    from sqlalchemy import text

    try:
        _url, engine = _admin()
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as e:
        return " ".join(str(getattr(e, "orig", None) or e).split())[:200]
    return None


def add_database_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--database",
        choices=["sqlite", "postgresql", "both"],
        default=None,
        help=f"where labbot keeps its state: default both when PostgreSQL answers ({SERVER_ENV}, default "
        f"{DEFAULT_SERVER}), else sqlite",
    )


def backends(choice: str | None) -> list[str]:
    """The backends to measure: ``--database`` as given (PostgreSQL must answer then), else both when it answers."""
    problem = postgresql_problem() if choice != "sqlite" else None
    if choice in ("postgresql", "both") and problem:
        raise SystemExit(f"--database {choice}: PostgreSQL does not answer ({problem}); set {SERVER_ENV}")
    if choice is None and problem:
        print(f"PostgreSQL NOT RUN: it does not answer ({problem}); SQLite only", flush=True)
        return ["sqlite"]
    return {"sqlite": ["sqlite"], "postgresql": ["postgresql"]}.get(choice or "both", ["sqlite", "postgresql"])


@contextmanager
def scratch_database(backend: str, folder: Path) -> Iterator[str]:
    """An empty database for one measurement: a SQLite file in ``folder``, or ``labbot_bench_<random>`` on the
    PostgreSQL server (as a plain postgresql:// URL; dropped afterwards)."""
    if backend == "sqlite":
        yield f"sqlite:///{folder / 'labbot.db'}"
        return
    from sqlalchemy import text

    url, engine = _admin()
    name = f"labbot_bench_{uuid.uuid4().hex[:12]}"
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield url.set(drivername="postgresql", database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


@contextmanager
def control_plane(database_url: str | None = None) -> Iterator[Plane]:
    with tempfile.TemporaryDirectory(prefix="lb-bench-") as tmp:
        home = Path(tmp)
        head = EmbeddedRayHead(home / "ray-home")
        ray = head.ensure()
        (home / "labbot.toml").write_text(SINK_TOML)
        serve = Serve(
            home / "home",
            ray_address=ray.address,
            ray_token=ray.token,
            extra_env={"LABBOT_CONFIG": str(home / "labbot.toml")}
            | ({"LABBOT_DATABASE_URL": database_url} if database_url else {}),
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
