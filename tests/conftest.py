"""Fixtures shared by every package's tests: one real local Ray head (token auth) for the whole session, one local
S3-compatible server (moto's, in a thread) for the session, and a migrated SQLite database per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from s3_server import MotoS3
from support import Serve

from labbot.storage.db import Database
from labbot.training.ray_cluster import EmbeddedRayHead, RayConnection

# tiers: the ray/e2e/subprocess markers; vendor_specs: spec_path, and the end-of-run line when specs are missing;
# system_packages: the eval tests without bubblewrap
pytest_plugins = ["tiers", "vendor_specs", "system_packages"]


@pytest.fixture(scope="session")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayConnection]:
    """A real Ray head with token auth, started once (≈6 s) and stopped at the end of the session."""
    head = EmbeddedRayHead(tmp_path_factory.mktemp("ray-home"))
    conn = head.ensure()
    yield conn
    head.stop()


@pytest.fixture
def serve(tmp_path: Path, ray_head: RayConnection) -> Iterator[Serve]:
    """A real `labbot serve` on a free port, against the session's Ray head."""
    s = Serve(tmp_path / "home", ray_address=ray_head.address, ray_token=ray_head.token).start()
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
def db(tmp_path: Path) -> Iterator[Database]:
    """A real SQLite database in ``tmp_path``, migrated to the latest revision (a module may define its own)."""
    database = Database(f"sqlite:///{tmp_path / 'labbot.db'}")
    database.upgrade()
    yield database
    database.dispose()
