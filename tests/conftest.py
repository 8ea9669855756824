"""Fixtures shared by every package's tests: one real local Ray head (token auth) for the whole session, one local
S3-compatible server (moto's, in a thread) for the session, and a migrated database per test (``db``,
``database_url``: SQLite, and PostgreSQL too where a module is marked ``databases``; see ``tests/databases.py``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from s3_server import MotoS3
from shared_ray import shared_head
from support import Serve

from labbot.training.ray_cluster import RayConnection

# one intra-op thread for torch (and anything else on OpenMP or MKL) in the tests and every process they start, the
# Ray head's jobs included (it passes OMP_/MKL_ on): the tests run three to a 2-core machine, where a second thread
# per process only spins waiting for the first (tiny models; a run's own num_threads flag still wins)
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

# tiers: the ray/e2e/subprocess markers; vendor_specs: spec_path, and the end-of-run line when specs are missing;
# system_packages: the eval tests without bubblewrap; databases: the backend, database_url and db fixtures, and the
# end-of-run line when PostgreSQL is not reachable
pytest_plugins = ["tiers", "vendor_specs", "system_packages", "databases"]


@pytest.fixture(scope="session")
def ray_head(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[RayConnection]:
    """A real Ray head with token auth (≈6 s to start), one for the whole run: under pytest-xdist the workers share
    it and the last to finish stops it (``tests/shared_ray.py``)."""
    base = tmp_path_factory.getbasetemp()
    folder = base.parent / "shared-ray" if worker_id != "master" else base / "shared-ray"
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    with shared_head(folder, worker_id, workers=workers) as conn:
        yield conn


@pytest.fixture
def serve(tmp_path: Path, ray_head: RayConnection, backend: str, request: pytest.FixtureRequest) -> Iterator[Serve]:
    """A real `labbot serve` on a free port, against the session's Ray head; on its SQLite file in LABBOT_HOME, or,
    for the PostgreSQL variant of a ``databases`` test, on a PostgreSQL database of the test's own
    (``LABBOT_DATABASE_URL=postgresql://…``)."""
    env = {"LABBOT_DATABASE_URL": request.getfixturevalue("database_url")} if backend == "postgresql" else {}
    s = Serve(tmp_path / "home", ray_address=ray_head.address, ray_token=ray_head.token, extra_env=env).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def module_serve(tmp_path_factory: pytest.TempPathFactory, ray_head: RayConnection) -> Iterator[Serve]:
    """One `labbot serve` shared by a module's tests that only read or are refused (saves start-ups)."""
    s = Serve(tmp_path_factory.mktemp("home"), ray_address=ray_head.address, ray_token=ray_head.token).start()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[MotoS3]:
    """moto's S3 server on 127.0.0.1 (a thread of this process, not a process), started once for the session."""
    server = MotoS3().start()
    yield server
    server.stop()


@pytest.fixture
def s3(s3_server: MotoS3, monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoS3]:
    """The session's S3 server with this test's environment pointing at it (dummy credentials); started again if a
    test stopped it."""
    if s3_server._server is None:
        s3_server.start()
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    yield s3_server
    if s3_server._server is None:
        s3_server.start()


@pytest.fixture
def slack() -> Iterator[Any]:
    """A started Slack fake; at the end, every call the test made is checked against slack_sdk's method signatures
    (the methods newer than Slack's 2021 OpenAPI document too). A module may define its own."""
    from fakes.slack import SlackFake  # here, not at the top: it imports a plugin pytest registers after conftest

    fake = SlackFake()
    fake.start()
    yield fake
    fake.stop()
    fake.check_against_sdk()
