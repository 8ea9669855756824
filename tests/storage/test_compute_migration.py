"""Migration 0011: runs gain purpose (backfilled from the config, else the built-in job's, else training), priority
and queued_at, and the admission_lock row exists."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from labbot.storage.db import Database

pytestmark = pytest.mark.databases


def test_existing_runs_get_their_purpose_and_the_lock_row_exists(empty_database_url: str) -> None:
    db = Database(empty_database_url)
    db.upgrade("0009")
    with db.engine.begin() as conn:
        for run_id, job, config in (
            ("r1", "tiny-lm", "{}"),
            ("r2", "eval", "{}"),
            ("r3", "eval-generate", "{}"),
            ("r4", "my-job", '{"purpose": "research"}'),
        ):
            conn.execute(
                text(
                    "INSERT INTO runs (id, job, name, owner, config, status, attempt, telemetry_token_hash, "
                    "stop_requested, created_at, updated_at, metrics, vitals, auto_restarts) VALUES (:id, :job, :id, "
                    "'U1', :config, 'succeeded', 1, 'h', false, '2026-01-01', '2026-01-01', '{}', '{}', 0)"
                ),
                {"id": run_id, "job": job, "config": config},
            )
    db.upgrade()
    with db.engine.begin() as conn:
        rows = dict(conn.execute(text("SELECT id, purpose FROM runs")).all())
        assert rows == {"r1": "training", "r2": "eval", "r3": "data", "r4": "research"}
        assert conn.execute(text("SELECT priority, queued_at FROM runs WHERE id = 'r1'")).one() == (0, None)
        assert conn.execute(text("SELECT id, decisions FROM admission_lock")).all() == [(1, 0)]
    db.dispose()
