"""Security finding 11: what labbot keeps on disk is its own — the SQLite database and its WAL/shm files 0600, the
artifact store's folders 0700 and its blobs 0600 — whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from labbot.storage.artifacts import ArtifactStore
from labbot.storage.db import Database, default_sqlite_url


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0o022)  # the usual default: files 0644, folders 0755
    try:
        yield
    finally:
        os.umask(old)


def test_the_database_and_its_wal_are_0600(tmp_path: Path, open_umask: None) -> None:
    db = Database(default_sqlite_url(tmp_path))
    db.upgrade()
    with db.session() as s:
        s.execute(text("SELECT 1"))
    files = [tmp_path / name for name in ("labbot.db", "labbot.db-wal", "labbot.db-shm")]
    assert files[1].exists(), "WAL mode: the write-ahead log is there while the database is open"
    for path in files:
        if path.exists():
            assert mode(path) == 0o600, path.name
    db.dispose()


def test_an_existing_open_database_is_made_0600(tmp_path: Path, open_umask: None) -> None:
    path = tmp_path / "labbot.db"
    path.touch(mode=0o644)
    Database(default_sqlite_url(tmp_path)).dispose()
    assert mode(path) == 0o600


def test_artifact_folders_are_0700_and_blobs_0600(tmp_path: Path, open_umask: None) -> None:
    db = Database(default_sqlite_url(tmp_path))
    db.upgrade()
    root = tmp_path / "artifacts"
    store = ArtifactStore(db, str(root))
    view = store.put("alice/analyst", "report.md", b"# the loss is flat")
    assert mode(root) == 0o700
    blobs = [p for p in (root / "blobs").rglob("*") if p.is_file()]
    assert blobs and all(mode(p) == 0o600 for p in blobs), view
    db.dispose()
