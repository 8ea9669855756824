"""storage: migrations (from empty, and from every earlier revision with rows in it, down a step and up again), the
models they build, NaN/inf round trips, 64-bit steps, the URL labbot accepts, SQLite settings — on SQLite and on
PostgreSQL (``databases``: see tests/databases.py)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import JSON, Boolean, DateTime, Float, Integer, MetaData, String, func, inspect, select, text
from sqlalchemy.engine import Connection

from labbot.common.errors import BadRequest
from labbot.storage import Database, MetricPoint, Run, RunStatus
from labbot.storage.db import MIGRATIONS, VERSION_TABLE, normalize_database_url, schema_revision
from labbot.storage.floats import decode_float, encode_float
from labbot.storage.models import Base, utcnow

pytestmark = pytest.mark.databases


def _script() -> ScriptDirectory:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(cfg)


def _head_revision() -> str:
    head = _script().get_current_head()
    assert head is not None
    return head


REVISIONS = [r.revision for r in reversed(list(_script().walk_revisions()))]  # oldest first
"""Every revision but the head: where a database made by an older labbot stands."""
EARLIER = REVISIONS[:-1]


def _diff(db: Database) -> list[Any]:
    with db.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        return list(compare_metadata(context, Base.metadata))


def test_migrations_from_empty_build_exactly_the_models(empty_database_url: str) -> None:
    db = Database(empty_database_url)
    db.upgrade()
    assert set(inspect(db.engine).get_table_names()) >= {"runs", "metric_points", "launch_keys"}
    assert _diff(db) == [], f"models and migrations disagree on {db.dialect}: {_diff(db)}"
    db.dispose()


def _revision(conn: Connection) -> str | None:
    return schema_revision(conn)


def _fill(conn: Connection, tag: str) -> dict[str, int]:
    """One row in every table that exists at this revision, every column given a value of its type (foreign keys
    pointing at the parent's row): what an older labbot's database holds. Returns each table's row count."""
    meta = MetaData()
    meta.reflect(conn)
    made: dict[tuple[str, str], Any] = {}
    for table in meta.sorted_tables:
        if table.name == VERSION_TABLE:
            continue
        row: dict[str, Any] = {}
        for column in table.columns:
            fks = list(column.foreign_keys)
            if fks:
                parent = fks[0].column
                row[column.name] = made.get((parent.table.name, parent.name))
                continue
            row[column.name] = _value(column.type, f"{tag}{table.name}")
        conn.execute(table.insert().values(row))
        made.update({(table.name, k): v for k, v in row.items()})
    counts = {}
    for table in meta.sorted_tables:
        counts[table.name] = conn.execute(select(func.count()).select_from(table)).scalar_one()
    return counts


def _value(type_: Any, tag: str) -> Any:
    if isinstance(type_, Boolean):
        return False
    if isinstance(type_, Integer):
        return 7
    if isinstance(type_, Float):
        return 1.5
    if isinstance(type_, DateTime):
        return datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    if isinstance(type_, JSON) or type(type_).__name__ in ("JSON", "JSONB"):
        return {}
    if isinstance(type_, String):  # VARCHAR(n) and TEXT: PostgreSQL holds them to their length
        return tag[: type_.length or 64]
    if "JSON" in str(type_).upper():  # SQLite reflects JSON as its own type name
        return {}
    raise AssertionError(f"no test value for the column type {type_!r}")


@pytest.mark.parametrize("revision", EARLIER)
def test_a_database_at_every_earlier_revision_upgrades_to_head_keeping_its_rows(
    empty_database_url: str, revision: str
) -> None:
    db = Database(empty_database_url)
    db.upgrade(revision)
    with db.engine.begin() as conn:
        assert _revision(conn) == revision
        before = _fill(conn, "old")
    db.upgrade()
    with db.engine.begin() as conn:
        assert _revision(conn) == _head_revision()
        for table, count in before.items():
            assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one() == count, table
    assert _diff(db) == [], f"upgraded from {revision} on {db.dialect}, the schema differs: {_diff(db)}"
    with db.session() as s:  # the models read what the old labbot wrote
        run = s.scalars(select(Run)).one()
        assert run.created_at.tzinfo is not None and run.status
    db.dispose()


@pytest.mark.parametrize("revision", REVISIONS[1:])
def test_each_revision_goes_down_a_step_and_up_again(empty_database_url: str, revision: str) -> None:
    db = Database(empty_database_url)
    db.upgrade(revision)
    with db.engine.begin() as conn:
        _fill(conn, "new")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    from alembic import command

    previous = _script().get_revision(revision).down_revision
    with db.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, str(previous))
    with db.engine.begin() as conn:
        assert _revision(conn) == previous
    db.upgrade(revision)
    with db.engine.begin() as conn:
        assert _revision(conn) == revision
        assert conn.execute(text("SELECT count(*) FROM runs")).scalar_one() == 1
    db.dispose()


def test_a_revision_kept_in_alembic_version_moves_to_labbots_own_table(db: Database) -> None:
    """A database upgraded before labbot kept its revision apart has it in ``alembic_version``: the next upgrade moves
    it, and ``alembic_version`` is free for Optuna's storage; one holding another's revision is left alone."""
    head = _head_revision()
    with db.engine.begin() as conn:  # as an older labbot left it
        conn.execute(text(f"DROP TABLE {VERSION_TABLE}"))
        conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)"))
        conn.execute(text("INSERT INTO alembic_version VALUES (:v)"), {"v": head})
    db.upgrade()
    assert db.revision() == head
    with db.engine.connect() as conn:
        assert "alembic_version" not in inspect(conn).get_table_names()
    with db.engine.begin() as conn:  # Optuna's own revision beside labbot's
        conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)"))
        conn.execute(text("INSERT INTO alembic_version VALUES ('v3.2.0.a')"))
    db.upgrade()
    with db.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "v3.2.0.a"
    assert db.revision() == head


def test_upgrade_is_idempotent(db: Database) -> None:
    db.upgrade()  # a second `labbot db upgrade` changes nothing
    with db.engine.connect() as conn:
        assert conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar() == _head_revision()
        if db.dialect == "sqlite":
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"


def _run(run_id: str = "r1", **kw: Any) -> Run:
    return Run(
        id=run_id,
        job="tiny-lm",
        name="n",
        owner="o",
        config={},
        status=RunStatus.RUNNING.value,
        attempt=1,
        telemetry_token_hash="x",
        metrics={"loss": encode_float(math.nan)},
        stop_requested=False,
        **kw,
    )


def test_nan_and_inf_metric_values_round_trip(db: Database) -> None:
    now = utcnow()
    with db.session() as s:
        s.add(_run())
        s.flush()
        for step, v in enumerate([1.5, math.nan, math.inf, -math.inf]):
            s.add(MetricPoint(run_id="r1", attempt=1, step=step, name="loss", value=v, ts=now))
    with db.session() as s:
        values = [p.value for p in s.query(MetricPoint).order_by(MetricPoint.step)]
        run = s.get_one(Run, "r1")
        assert values[0] == 1.5 and math.isnan(values[1]) and values[2] == math.inf and values[3] == -math.inf
        assert math.isnan(decode_float(run.metrics["loss"]))
        assert run.created_at.tzinfo is not None  # UTC-aware on every backend


def test_steps_are_64_bit_and_json_with_a_stray_nan_is_stored(db: Database) -> None:
    """The telemetry accepts steps up to 2**63 - 1; a JSON document holding a float NaN (Python's json writes the
    non-standard literal, which PostgreSQL's json type refuses) is stored, read back as NaN or its string."""
    big = 2**63 - 1
    with db.session() as s:
        s.add(_run(last_step=big, checkpoint_step=big, vitals={"x": math.nan, "w": [math.inf]}))
        s.flush()
        s.add(MetricPoint(run_id="r1", attempt=2**40, step=big, name="loss", value=1.0, ts=utcnow()))
    with db.session() as s:
        run = s.get_one(Run, "r1")
        assert run.last_step == big and run.checkpoint_step == big
        assert math.isnan(decode_float(run.vitals["x"])) and decode_float(run.vitals["w"][0]) == math.inf
        assert s.scalars(select(MetricPoint.step)).one() == big


def test_an_insert_ignoring_duplicates_counts_the_rows_it_inserted(db: Database) -> None:
    from labbot.storage.models import SeenKey

    with db.session() as s:
        first = s.execute(db.insert_ignoring_duplicates(SeenKey).values(key="k", seen_at=utcnow()))
        again = s.execute(db.insert_ignoring_duplicates(SeenKey).values(key="k", seen_at=utcnow()))
        assert (first.rowcount, again.rowcount) == (1, 0)


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


@pytest.mark.parametrize(
    ("url", "driver"),
    [
        ("postgresql://u@h/db", "postgresql+psycopg"),
        ("postgres://u:pw@h:5433/db", "postgresql+psycopg"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg"),
        ("sqlite:////tmp/x.db", "sqlite"),
    ],
)
def test_a_plain_postgresql_url_gets_labbots_driver(url: str, driver: str) -> None:
    assert normalize_database_url(url).drivername == driver


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://u:hunter2@h/db", "mysql:// is not supported"),
        ("postgresql+psycopg2://u:hunter2@h/db", "the driver 'psycopg2' is not supported"),
        ("hunter2 is not a url", "is not a database URL"),
    ],
)
def test_an_unknown_scheme_says_what_is_accepted_and_never_the_password(url: str, says: str) -> None:
    with pytest.raises(BadRequest) as e:
        Database(url)
    assert says in e.value.message and "postgresql://USER" in e.value.message and "sqlite:///" in e.value.message
    assert "hunter2" not in e.value.message


def test_a_database_that_does_not_answer_is_a_bad_request_without_the_password() -> None:
    from support import free_port

    db = Database(f"postgresql://labbot:hunter2@127.0.0.1:{free_port()}/labbot")
    assert db.display_url.endswith("labbot:***@" + db.display_url.split("@")[1])
    with pytest.raises(BadRequest) as e:
        db.upgrade()
    assert "cannot connect to the database postgresql+psycopg://labbot:***@127.0.0.1" in e.value.message
    assert "hunter2" not in e.value.message and "accepts" in e.value.message


def test_models_and_inserts_compile_for_postgres() -> None:
    """The DDL and the dedup insert compile for PostgreSQL (what the tests above run, without a server)."""
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.dialects.postgresql import insert as pg_insert
    from sqlalchemy.schema import CreateIndex, CreateTable

    dialect = postgresql.dialect()
    for table in Base.metadata.sorted_tables:
        ddl = str(CreateTable(table).compile(dialect=dialect))
        if table.name == "metric_points":  # values are doubles, steps 64-bit
            assert "FLOAT(53)" in ddl or "DOUBLE PRECISION" in ddl
            assert "step BIGINT" in ddl
        for index in table.indexes:
            str(CreateIndex(index).compile(dialect=dialect))
    sql = str(pg_insert(MetricPoint).on_conflict_do_nothing().compile(dialect=dialect))
    assert "ON CONFLICT DO NOTHING" in sql
