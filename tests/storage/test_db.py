"""storage: migrations, the models they build, NaN/inf round trips, SQLite settings."""

from __future__ import annotations

import math
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from labbot.storage import Database, MetricPoint, Run, RunStatus
from labbot.storage.floats import decode_float, encode_float
from labbot.storage.models import Base, utcnow


def _db(tmp_path: Path) -> Database:
    db = Database(f"sqlite:///{tmp_path / 'labbot.db'}")
    db.upgrade()
    return db


def test_migrations_build_exactly_the_models(tmp_path: Path) -> None:
    db = _db(tmp_path)
    assert set(inspect(db.engine).get_table_names()) >= {"runs", "metric_points", "launch_keys"}
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"models and migrations disagree: {diff}"


def test_upgrade_is_idempotent_and_uses_wal(tmp_path: Path) -> None:
    db = _db(tmp_path)
    db.upgrade()  # a second `labbot db upgrade` changes nothing
    with db.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == _head_revision()


def test_nan_and_inf_metric_values_round_trip(tmp_path: Path) -> None:
    db = _db(tmp_path)
    now = utcnow()
    with db.session() as s:
        s.add(
            Run(
                id="r1",
                job="tiny-lm",
                name="n",
                owner="o",
                config={},
                status=RunStatus.RUNNING.value,
                attempt=1,
                telemetry_token_hash="x",
                metrics={"loss": encode_float(math.nan)},
                stop_requested=False,
            )
        )
        s.flush()
        for step, v in enumerate([1.5, math.nan, math.inf, -math.inf]):
            s.add(MetricPoint(run_id="r1", attempt=1, step=step, name="loss", value=v, ts=now))
    with db.session() as s:
        values = [p.value for p in s.query(MetricPoint).order_by(MetricPoint.step)]
        run = s.get_one(Run, "r1")
        assert values[0] == 1.5 and math.isnan(values[1]) and values[2] == math.inf and values[3] == -math.inf
        assert math.isnan(decode_float(run.metrics["loss"]))
        assert run.created_at.tzinfo is not None  # UTC-aware even on SQLite


def test_float_codec() -> None:
    assert encode_float(2.0) == 2.0
    assert encode_float(math.inf) == "Infinity" and encode_float(-math.inf) == "-Infinity"
    assert encode_float(math.nan) == "NaN"
    for bad in ("nan", "1.0", None, True, [1]):
        try:
            decode_float(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} should not decode")


def test_models_and_inserts_compile_for_postgres() -> None:
    """Nothing SQLite-only in the models: the DDL and the dedup insert compile for Postgres too."""
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.dialects.postgresql import insert as pg_insert
    from sqlalchemy.schema import CreateIndex, CreateTable

    dialect = postgresql.dialect()
    for table in Base.metadata.sorted_tables:
        ddl = str(CreateTable(table).compile(dialect=dialect))
        if table.name == "metric_points":  # values are doubles (FLOAT(53) is double precision in Postgres)
            assert "FLOAT(53)" in ddl or "DOUBLE PRECISION" in ddl
        for index in table.indexes:
            str(CreateIndex(index).compile(dialect=dialect))
    sql = str(pg_insert(MetricPoint).on_conflict_do_nothing().compile(dialect=dialect))
    assert "ON CONFLICT DO NOTHING" in sql


def _head_revision() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from labbot.storage.db import MIGRATIONS

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    return head
